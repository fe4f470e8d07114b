"""The program's own mappings as the kernel has them (src/analyze/mmranges.h),
in stats, timeline and stats' time slices, against the program's own
/proc/self/maps; and where a cut trace's figures stop being exact
(timeline's exact_to_ns), against the times the program printed."""

import json
import xml.etree.ElementTree as ET

import htformat
from cases_slices import SLICE_ENV, record_small
from cases_timeline import dump_json, fmt_ns
from htlib import case, check, compile_c, eq

MIB = 1 << 20

# A reservation of 100 MiB PROT_NONE with 10 MiB mapped into it with
# MAP_FIXED (which replaces, and adds nothing), then unmapped whole; a
# mapping grown by mremap, unmapped in the middle, then whole (a munmap
# over a hole); a munmap of half a mapping, then of all of it; an mmap
# MAP_FIXED over part of a mapping.  At each mark it prints the bytes
# /proc/self/maps has mapped in the areas it made its mappings in.
# Between the steps, malloc/free pairs: chunks for the time slices to
# cut at.
MMAPS_C = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <heaptrail.h>

static struct { unsigned long lo, hi; } area[4];
static int nareas;

static void churn(void)
{
	for (int i = 0; i < 1500; i++)
		free(malloc(32 + i % 64));
}

static void show(const char *label)
{
	HEAPTRAIL_MARK(label);
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned long tot = 0;
	while (fgets(line, sizeof line, f)) {
		unsigned long a, b;
		if (sscanf(line, "%lx-%lx", &a, &b) != 2)
			continue;
		for (int i = 0; i < nareas; i++) {
			unsigned long lo = a > area[i].lo ? a : area[i].lo;
			unsigned long hi = b < area[i].hi ? b : area[i].hi;
			if (hi > lo)
				tot += hi - lo;
		}
	}
	fclose(f);
	printf("%s %lu\n", label, tot);
	fflush(stdout);
	usleep(3000); /* (the next call in a later time bin) */
	churn();
}

static void area_set(int i, void *p, size_t len)
{
	area[i].lo = (unsigned long)p;
	area[i].hi = (unsigned long)p + len;
	if (i >= nareas)
		nareas = i + 1;
}

int main(void)
{
	size_t rl = 100 << 20;
	char *r = mmap(NULL, rl, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	area_set(0, r, rl);
	show("reserve");
	for (int i = 0; i < 10; i++)
		mmap(r + ((size_t)i << 20), 1 << 20, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	show("commit");
	munmap(r, rl);
	show("unmap");
	nareas = 0;

	char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	area_set(0, m, 1 << 20);
	show("m1M");
	m = mremap(m, 1 << 20, 3 << 20, MREMAP_MAYMOVE);
	area_set(0, m, 3 << 20);
	show("r3M");
	munmap(m + (1 << 20), 1 << 20);
	show("hole");
	munmap(m, 3 << 20);
	show("uall");
	nareas = 0;

	char *h = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	area_set(0, h, 8192);
	munmap(h, 4096);
	show("half");
	munmap(h, 8192);
	show("gone");
	nareas = 0;

	char *g = mmap(NULL, 16384, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	area_set(0, g, 16384);
	mmap(g + 4096, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	show("fixed");
	munmap(g, 16384);
	show("end");
	return 0;
}
"""

# The bytes the program's maps show at each mark.
MMAPS_TRUTH = [("reserve", 100 * MIB), ("commit", 100 * MIB), ("unmap", 0), ("m1M", MIB),
               ("r3M", 3 * MIB), ("hole", 2 * MIB), ("uall", 0), ("half", 4096), ("gone", 0),
               ("fixed", 16384), ("end", 0)]


def printed(r):
    """The program's lines "label bytes", as (label, bytes)."""
    out = []
    for line in r.stdout.splitlines():
        label, n = line.split()
        out.append((label, int(n)))
    return out


def at_marks(t, trace, series):
    """timeline --json: the series' last value in the bin of each mark."""
    r = t.tool(["timeline", "--json", "-o", "-", trace])
    eq(r.rc, 0, "timeline --json: exit status (%s)" % r.describe())
    d = json.loads(r.stdout)
    out = []
    for m in d["marks"]:
        b = d["bins"][(m["time_ns"] - d["from_ns"]) // d["bin_ns"]]
        out.append((m["label"], b[series]["last"]))
    return out


@case(labels=("analyzers",))
def test_mmap_ranges_as_mapped(t):
    """stats' and timeline's program's own mappings are the pages mapped,
    as /proc/self/maps shows them at each mark: an mmap MAP_FIXED inside
    a reservation adds nothing, a munmap removes only what is mapped, an
    mremap moves and grows (before: the lengths asked for added up,
    110 MiB at the peak and 10 MiB mapped for the rest of the run after
    the reservation was unmapped; below 0, shown as 0, after a munmap
    over a hole)."""
    exe = compile_c(t, "mmaps", MMAPS_C)
    out = t.path("mmaps.ht")
    r = t.record(out, [exe])
    eq(printed(r), MMAPS_TRUTH, "the program's own account of its maps")
    eq(at_marks(t, out, "mmap_bytes"), MMAPS_TRUTH, "timeline's mmap_bytes at each mark")
    s = t.stats(out)
    eq(s["mmap"]["peak_mapped_bytes"], 100 * MIB, "stats: the most mapped at once")
    eq(s["mmap"]["live_mapped_bytes"], 0, "stats: mapped at exit")
    # what the calls asked for is still counted as asked
    eq(s["mmap"]["bytes_mapped"], 110 * MIB + MIB + 2 * MIB + 8192 + 16384 + 8192,
       "stats: bytes the mmap calls and the mremap's growth asked for")
    txt = t.tool(["stats", out]).stdout
    check(", peak 100.0 MiB\n" in txt, "stats' text: the peak of 100.0 MiB:\n" + txt)


@case(labels=("analyzers",))
def test_mmap_ranges_in_slices(t):
    """stats in 3 and 8 time slices replays each slice's mapping calls on the
    mappings of the slices before (a reservation in one, mappings into it
    and its unmapping in the next ones): the serial bytes, and the true
    peak and live mapped bytes (before: 110 MiB, 10 MiB left)."""
    exe = compile_c(t, "mmaps", MMAPS_C)
    trace = record_small(t, "mmaps", [exe])
    serial = t.run([t.heaptrail, "stats", "--json", "-j", "1", trace], env=SLICE_ENV)
    eq(serial.rc, 0, "stats -j 1: exit status (%s)" % serial.describe())
    for j in (3, 8):
        r = t.run([t.heaptrail, "stats", "--json", "-j", str(j), trace], env=SLICE_ENV)
        eq(r.rc, 0, "stats -j %d: exit status (%s)" % (j, r.describe()))
        check("read in %d time slices" % j in r.stderr, "-j %d: read in slices:\n%s" % (
            j, r.describe()))
        check(r.out == serial.out, "stats --json: -j %d differs from -j 1:\n%s\n--- -j 1:\n%s"
              % (j, r.stdout, serial.stdout))
        s = json.loads(r.stdout)
        eq(s["mmap"]["peak_mapped_bytes"], 100 * MIB, "-j %d: the most mapped at once" % j)
        eq(s["mmap"]["live_mapped_bytes"], 0, "-j %d: mapped at exit" % j)


# Maps 3 MiB, unmaps the middle MiB, fills buffers, unmaps the 3 MiB
# (the hole too: whatever was mapped there since goes with it), fills
# buffers again.
HOLE_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
static void *volatile sink;
static void churn(int n)
{
	for (int i = 0; i < n; i++) {
		sink = malloc(32 + i % 64);
		free(sink);
	}
}
int main(void)
{
	char *m = mmap(NULL, 3 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 2;
	munmap(m + (1 << 20), 1 << 20);
	churn(200000);
	munmap(m, 3 << 20);
	churn(200000);
	puts("ok");
	return 0;
}
"""


@case(timeout=120)
def test_recorder_mapping_not_in_program_hole(t):
    """A program that unmaps a range of its own around a hole it made,
    while its thread writes its own buffers (HEAPTRAIL_SELF_WRITE=2, six
    runs): the recorder's buffer for a raw chunk is mapped when the
    writer starts, not at the thread's first such write, which put it in
    the hole, and the program's munmap took it away: the next write died
    of SIGSEGV (5 runs of 12).  (mmap_ranges_in_slices, whose program
    unmaps around holes too, died of SIGSEGV once; not shown to be this.)"""
    exe = compile_c(t, "hole", HOLE_C)
    for run in range(6):
        out = t.path("h%d.ht" % run)
        r = t.run([t.heaptrail, "record", "-q", "-o", out, "--", exe],
                  env={"HEAPTRAIL_SELF_WRITE": "2"})
        eq((r.rc, r.stdout), (0, "ok\n"), "run %d:\n%s" % (run, r.describe()))
        s = t.stats(out)
        eq((s["calls"]["malloc"], s["calls"]["free"]), (400001, 400000),
           "run %d: the trace's calls" % run)


# The main thread allocates, waits past a flush (its events are written),
# then starts a worker that allocates and frees for about 40 ms, in many
# chunks, and joins it: a trace cut in the middle of the worker's chunks
# holds the main thread's events only up to the start of the worker.
CUT_C = r"""
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <heaptrail.h>

static void *worker(void *arg)
{
	void *keep[64] = {0};
	for (int i = 0; i < 40000; i++) {
		free(keep[i % 64]);
		keep[i % 64] = malloc(16 + i % 200);
		if (i % 1000 == 999)
			usleep(1000);
	}
	for (int i = 0; i < 64; i++)
		free(keep[i]);
	return arg;
}

int main(void)
{
	void *b[100];
	HEAPTRAIL_MARK("start");
	for (int i = 0; i < 100; i++)
		b[i] = malloc(1000);
	usleep(50000);
	pthread_t th;
	pthread_create(&th, NULL, worker, NULL);
	pthread_join(th, NULL);
	for (int i = 0; i < 100; i++)
		free(b[i]);
	return 0;
}
"""


@case(labels=("analyzers",))
def test_timeline_cut_exact_to(t):
    """A trace cut in the middle of a worker's chunks: every thread's
    stream stops at one place in the file, each at a time of its own.
    timeline's exact_to_ns is the earliest time a thread's events stop
    without its exit (the main thread's last event read, long before the
    worker's), missing_thread names it, and the SVG shades from there
    (before: exact_to_ns was the last event read of any thread, and the
    live bytes after the main thread's last event looked exact)."""
    exe = compile_c(t, "cutmain", CUT_C, ("-pthread",))
    out = t.path("cut-whole.ht")
    t.run([t.heaptrail, "record", "-q", "--buffer-size=4K", "--flush-interval", "20ms", "-o",
           out, "--", exe], check_rc=0, timeout=120)
    with open(out, "rb") as f:
        data = f.read()
    tr = htformat.Trace(out)
    chunks = htformat.chunk_headers(data, tr.sections[htformat.SEC_CHUNKS][0])
    evs = dump_json(t, out)
    main_tid = evs[0]["tid"]
    work = [(off, h) for off, h in chunks
            if h[1] == htformat.CHUNK_EVENTS and h[3] != main_tid]
    check(len(work) >= 8, "the worker wrote only %d chunks" % len(work))
    off, h = work[len(work) // 2]
    cut = t.path("cut.ht")
    with open(cut, "wb") as f:
        f.write(data[:off + htformat.CHUNK.size + h[5] // 2])
    evs = dump_json(t, cut, rc=1)
    last, exited = {}, set()
    for e in evs:
        last[e["tid"]] = e["time_ns"]
        if e["kind"] == "thread_exit":
            exited.add(e["tid"])
    check(main_tid in last, "none of the main thread's events in the cut trace")
    stop = min(v for k, v in last.items() if k not in exited)
    read_to = evs[-1]["time_ns"]
    eq(stop, last[main_tid], "the main thread's events stop first")
    check(stop < read_to, "the main thread's events (to %d ns) stop before the worker's (%d ns)"
          % (stop, read_to))
    r = t.tool(["timeline", "--json", "-o", "-", cut])
    eq(r.rc, 1, "timeline of a cut trace:\n" + r.describe())
    c = json.loads(r.stdout)
    eq((c["complete"], c["read_to_ns"], c["exact_to_ns"], c["missing_thread"]),
       (False, read_to, stop, main_tid), "complete, read_to_ns, exact_to_ns, missing_thread")
    svg = t.path("cut.svg")
    r = t.tool(["timeline", "-o", svg, cut])
    eq(r.rc, 1, "timeline (SVG) of a cut trace")
    # the line that names the peak says when it lies where calls are missing
    wrote = [ln for ln in r.stderr.splitlines() if ln.startswith("heaptrail: wrote ")]
    eq(len(wrote), 1, "the 'wrote' line:\n" + r.stderr)
    missing = ", where calls are missing (thread %d's events stop at %s)" % (main_tid,
                                                                          fmt_ns(stop))
    eq(wrote[0].endswith(missing), c["peak_time_ns"] > stop,
       "the peak (at %d ns, calls missing from %d ns) said so: %s"
       % (c["peak_time_ns"], stop, wrote[0]))
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    note = [x.text or "" for x in root.iter(ns + "text") if x.get("id") == "damage"]
    eq(note, ["incomplete: the trace is cut short or damaged, thread %d's events stop at %s "
              "and the others' at %s; the figures after %s (shaded) lack calls"
              % (main_tid, fmt_ns(stop), fmt_ns(read_to), fmt_ns(stop))],
       "the note under the title")
    shaded = [x for x in root.iter(ns + "rect") if x.get("class") == "incomplete"]
    eq(len(shaded), 1, "the range from exact_to_ns shaded")
