"""`stats` in time slices (src/analyze/slices.c, docs/FORMAT.md "Time
slices"): with -j N (N > 1) a long trace is cut in N slices by time, each
read by a reader, a pass and a model of its own on its own thread, then
added in order.  The result must be the serial reader's, byte for byte
(text and JSON, warnings and errors), and where the slices cannot give it
(an address handed out while live across a cut, a control event, a
damaged trace) the trace is read serially.  The tests slice small traces
(HEAPTRAIL_SLICE_MIN_EVENTS=0) recorded with small buffers, so that there
are chunks to cut at; HEAPTRAIL_SLICE_NOTE=1 says how each was read.

tests/progs/slicemix.c is a pipeline of three threads that also keeps
blocks alive across slices, sets marks, renames threads, maps, remaps and
unmaps memory and reads the break; in mode `hide` it frees blocks where
the tracer cannot see (addresses handed out while live), in mode `pause`
it pauses the recording (control events)."""

import json
import os
import re

from cases_order import Glibc
from htlib import GLIBC_THREAD_EXIT_FREE_NULLS, case, check, compile_c, eq, expect_calls

SLICE_ENV = {"HEAPTRAIL_SLICE_MIN_EVENTS": "0", "HEAPTRAIL_SLICE_NOTE": "1"}
NOTE = "heaptrail: note: "


# (trace, options) -> the records its slices read: the same for every -j
SLICES_READ = {}


def without_counts(note):
    """The note without the events each slice read ("read in 2 time
    slices (records read: 9994529 10005490)"): how the trace was read."""
    return re.sub(r" \(records read:[ 0-9]*\)$", "", note)


def record_small(t, name, argv, opts=()):
    """record with 4 KiB buffers (many chunks, each starting with a SYNC
    record: places to cut at); returns the trace's path."""
    out = t.path(name + ".ht")
    r = t.run([t.heaptrail, "record", "-q", "--buffer-size=4K"] + list(opts) + ["-o", out, "--"] +
              [str(a) for a in argv], timeout=120)
    eq(r.rc, 0, "record %s: exit status (%s)" % (name, r.describe()))
    return out


def damaged_copy(t, data, n):
    """A copy of the trace bytes data with n bytes inverted from the middle
    on (a chunk that does not decompress); returns its path."""
    bad = bytearray(data)
    for i in range(len(data) // 2, len(data) // 2 + n):
        bad[i] ^= 0xff
    path = t.path("damaged.ht")
    with open(path, "wb") as f:
        f.write(bytes(bad))
    return path


def stats_both(t, trace, j, extra=()):
    """stats (text, then --json) at -j 1 and at -j J with slices allowed:
    the same stdout, stderr (but for the note) and exit status.  Returns
    the note of the sliced text run."""
    notes = []
    for args in ([], ["--json"]):
        serial = t.run([t.heaptrail, "stats"] + list(extra) + args + ["-j", "1", trace],
                       env=SLICE_ENV, timeout=120)
        sliced = t.run([t.heaptrail, "stats"] + list(extra) + args + ["-j", str(j), trace],
                       env=SLICE_ENV, timeout=120)
        what = "stats %s -j %d %s" % (" ".join(args), j, trace)
        check(sliced.rc < 128, "%s crashed: %s" % (what, sliced.describe()))
        eq(sliced.rc, serial.rc, what + ": exit status")
        check(sliced.out == serial.out, "%s: stdout differs from -j 1:\n%s\n--- -j 1:\n%s" % (
            what, sliced.stdout[-2000:], serial.stdout[-2000:]))
        lines = sliced.stderr.splitlines()
        own = [ln for ln in lines if ln.startswith(NOTE + "read ")]
        rest = [ln for ln in lines if not ln.startswith(NOTE + "read ")]
        check(len(own) == 1, "%s: expected one note on how it was read, got %r" % (what, own))
        eq("\n".join(rest), serial.stderr.rstrip("\n"), what + ": stderr (but the note)")
        check(NOTE + "read " not in serial.stderr, "-j 1 said how it read: %r" % serial.stderr)
        notes.append(own[0][len(NOTE):])
        if args and sliced.rc == 0 and own[0].startswith(NOTE + "read in "):
            # each record read by one slice: what the slices read adds up
            # to the same whatever their number, and to the events at
            # least (a --durations trace's durations are records too)
            m = re.search(r" \(records read:([ 0-9]*)\)$", own[0])
            check(m, "%s: the note gives no events per slice: %r" % (what, own[0]))
            read = sum(int(x) for x in m.group(1).split())
            check(read >= json.loads(sliced.stdout)["events"],
                  "%s: the slices read %s, fewer than the events" % (what, m.group(1)))
            key = (trace, tuple(extra))
            eq(read, SLICES_READ.setdefault(key, read),
               "%s: the slices read (%s) against another -j" % (what, m.group(1).strip()))
    eq(notes[1], notes[0], "the note of --json and of the text")
    notes = [without_counts(n) for n in notes]
    return notes[0]


@case(timeout=600, labels=("analyzers",))
def test_slices_same_as_serial(t):
    """Pipelines of 3, 4 and 16 threads, a pool, and slicemix: 2, 3 and 8
    slices give the serial reader's bytes, read in slices."""
    traces = {
        "slicemix": record_small(t, "slicemix", [t.prog("slicemix"), "plain", 60000]),
        "pipeline4": record_small(t, "pipeline4", [t.prog("pipeline"), 4, 30000]),
        "pipeline16": record_small(t, "pipeline16", [t.prog("pipeline"), 16, 8000]),
        "pool": record_small(t, "pool", [t.prog("pool"), 6, 20000]),
    }
    for name, trace in traces.items():
        for j in (2, 3, 8):
            with t.soft():
                note = stats_both(t, trace, j)
                eq(note, "read in %d time slices" % j, "%s -j %d: how it was read" % (name, j))


@case(timeout=300, labels=("analyzers",))
def test_slices_program_count(t):
    """slicemix, read in 3 slices, against its own count: calls exactly
    (with glibc's DTV callocs and frees and its free(NULL)s at thread
    exit), bytes allocated, and live at exit (its five blocks, glibc's
    DTVs), marks, thread names and the program's own mappings."""
    trace = record_small(t, "slicemix", [t.prog("slicemix"), "plain", 40000,
                                        t.path("count.json")])
    with open(t.path("count.json")) as f:
        prog = json.load(f)
    r = t.run([t.heaptrail, "stats", "--json", "-j", "3", trace], env=SLICE_ENV, timeout=120)
    eq(r.rc, 0, "stats: exit status (%s)" % r.describe())
    check(NOTE + "read in 3 time slices" in r.stderr, "not read in slices: %r" % r.stderr)
    s = json.loads(r.stdout)
    g = Glibc(t, trace, s)
    exits = prog["threads"] * GLIBC_THREAD_EXIT_FREE_NULLS
    with t.soft():
        expect_calls(s, {"malloc": prog["malloc"], "calloc": prog["calloc"] + g.calls["calloc"],
                         "realloc": prog["realloc"],
                         "free": prog["free"] + g.calls["free"] + exits,
                         # 40000 / (40000 / 16 + 1) = 15 rounds of side events
                         "mmap": 15, "mremap": 15, "munmap": 15, "sbrk": 15})
    with t.soft():
        eq((s["live_blocks_at_exit"], s["live_bytes_at_exit"]),
           (prog["live_blocks_at_exit"] + g.live_blocks,
            prog["live_bytes_at_exit"] + g.live_bytes), "live blocks and bytes at exit")
        eq(s["bytes_allocated"], prog["bytes_allocated"] + g.bytes, "bytes allocated")
        eq(s["unknown_frees"], 0, "unknown frees")
        eq(s["order_exact"], True, "order exact")
        eq([m["label"] for m in s["marks"]], ["phase %d" % (k * 2501) for k in range(1, 16)],
           "marks, in order")
        eq(s["mmap"]["peak_mapped_bytes"], 131072, "the program's own mappings at most at once")
        eq(sorted(th["name"] for th in s["per_thread"] if th["name"].startswith("mix-")),
           ["mix-37515"], "the last name the first thread gave itself")


# A block of the first slice that a realloc in the second grows in place,
# at the program's peak: the old block is one from before there (a
# deferred release) and the new one is handed out by the same event, so
# the height the slice notes for it must be taken after that release.
PEAK_AT_REALLOC = r"""
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void *volatile sink;
static void pairs(int n)
{
	for (int i = 0; i < n; i++) {
		sink = malloc(16 + i % 64);
		free(sink);
	}
}
int main(void)
{
	mallopt(M_TOP_PAD, 1 << 20); /* room at the top for the realloc */
	mallopt(M_MMAP_THRESHOLD, 1 << 24);
	pairs(10000);
	char *a = malloc(100000); /* next to the heap's top: it can grow there */
	memset(a, 1, 100000);
	pairs(20000);
	char *b = malloc(16);
	char *n = realloc(a, 400000);
	int moved = n != a;
	free(b);
	free(n);
	printf("moved %d\n", moved);
	return 0;
}
"""


@case(timeout=300, labels=("analyzers",))
def test_slices_peak_at_realloc(t):
    """The peak is at a realloc in a later slice that grows a block of the
    first in place (100000 -> 400000 bytes while 16 bytes are live
    beside it): the slices give the serial bytes and the true peak,
    400016 bytes in 2 blocks."""
    exe = compile_c(t, "peakrealloc", PEAK_AT_REALLOC)
    trace = record_small(t, "peakrealloc", [exe])
    r = t.run([exe])
    eq(r.stdout.strip(), "moved 0", "the realloc grows the block in place (untraced run)")
    with t.soft():
        note = stats_both(t, trace, 2)
        eq(note, "read in 2 time slices", "how it was read")
    r = t.run([t.heaptrail, "stats", "--json", "-j", "2", trace], env=SLICE_ENV)
    s = json.loads(r.stdout)
    eq(s["realloc"]["in_place"], 1, "reallocs in place")
    eq(s["peak_live_bytes"], 400016, "peak live bytes")
    eq(s["live_blocks_at_peak"], 2, "blocks at the peak")


@case(timeout=300, labels=("analyzers",))
def test_slices_fall_back(t):
    """Where slices cannot give the serial answer, the trace is read
    serially, and says the same: blocks freed unseen and handed out again
    across a cut (slicemix hide, 8 slices), a pause (control events), a
    trace with stacks (its frames are numbered from each thread's first),
    a trace cut short and one with a corrupt chunk."""
    hide = record_small(t, "hide", [t.prog("slicemix"), "hide", 60000])
    with t.soft():
        note = stats_both(t, hide, 8)
        eq(note, "read serially: an address was handed out while live across a cut",
           "slicemix hide, 8 slices")
    pause = record_small(t, "pause", [t.prog("slicemix"), "pause", 30000])
    with t.soft():
        note = stats_both(t, pause, 3)
        eq(note, "read serially: a control event (pause, reset...)", "slicemix pause")
    stacks = record_small(t, "stacks", [t.prog("pipeline"), 3, 10000], ("--stacks",))
    with t.soft():
        note = stats_both(t, stacks, 3)
        eq(note, "read serially: a trace with stacks", "a trace with stacks")
    plain = record_small(t, "plain", [t.prog("slicemix"), "plain", 30000])
    with open(plain, "rb") as f:
        data = f.read()
    cut = t.path("cut.ht")
    with open(cut, "wb") as f:
        f.write(data[:len(data) * 2 // 3])
    with t.soft():
        note = stats_both(t, cut, 3)
        eq(note, "read serially: the trace does not suit", "a trace cut short")
    damaged = damaged_copy(t, data, 64)
    with t.soft():
        note = stats_both(t, damaged, 3)
        check(note.startswith("read serially: "), "a damaged trace: %r" % note)


@case(timeout=120, labels=("analyzers",))
def test_slices_not_below_threshold(t):
    """Without HEAPTRAIL_SLICE_MIN_EVENTS, a short trace is read serially
    (slices pay only on long ones); -j 1 and HEAPTRAIL_THREADS=1 never
    slice; without -j, a long trace is read in one slice per CPU."""
    trace = record_small(t, "short", [t.prog("slicemix"), "plain", 5000])
    r = t.run([t.heaptrail, "stats", "-j", "4", trace], env={"HEAPTRAIL_SLICE_NOTE": "1"})
    eq(r.rc, 0, "stats: exit status")
    check(NOTE + "read serially: the trace does not suit" in r.stderr,
          "a short trace: %r" % r.stderr)
    r = t.run([t.heaptrail, "stats", "-j", "1", trace], env=SLICE_ENV)
    check(NOTE + "read " not in r.stderr, "-j 1 said how it read: %r" % r.stderr)
    env = dict(SLICE_ENV, HEAPTRAIL_THREADS="1")
    r = t.run([t.heaptrail, "stats", trace], env=env)
    check(NOTE + "read " not in r.stderr, "HEAPTRAIL_THREADS=1 said how it read: %r" % r.stderr)
    cpus = min(len(os.sched_getaffinity(0)), 64)
    r = t.run([t.heaptrail, "stats", trace], env=SLICE_ENV)
    if cpus > 1:
        check(NOTE + "read in %d time slices" % cpus in r.stderr,
              "without -j on %d CPUs: %r" % (cpus, r.stderr))
    else:
        check(NOTE + "read " not in r.stderr, "one CPU: %r" % r.stderr)


# ---- timeline in time slices ------------------------------------------------

def timeline_both(t, trace, j, args):
    """timeline ARGS -o - at -j 1 and at -j J with slices allowed: the same
    stdout, stderr (but for the note) and exit status.  Returns the note of
    the sliced run."""
    serial = t.run([t.heaptrail, "timeline"] + list(args) + ["-o", "-", "-j", "1", trace],
                   env=SLICE_ENV, timeout=120)
    sliced = t.run([t.heaptrail, "timeline"] + list(args) + ["-o", "-", "-j", str(j), trace],
                   env=SLICE_ENV, timeout=120)
    what = "timeline %s -j %d %s" % (" ".join(args), j, trace)
    check(sliced.rc < 128, "%s crashed: %s" % (what, sliced.describe()))
    eq(sliced.rc, serial.rc, what + ": exit status")
    if sliced.out != serial.out:
        a, b = serial.stdout.splitlines(), sliced.stdout.splitlines()
        diff = [(i, x, y) for i, (x, y) in enumerate(zip(a, b)) if x != y][:3]
        check(False, "%s: stdout differs from -j 1 (%d and %d lines), first lines that "
              "differ (line, -j 1, -j %d): %r" % (what, len(a), len(b), j, diff))
    lines = sliced.stderr.splitlines()
    own = [ln for ln in lines if ln.startswith(NOTE + "read ")]
    rest = [ln for ln in lines if not ln.startswith(NOTE + "read ")]
    check(len(own) == 1, "%s: expected one note on how it was read, got %r" % (what, own))
    eq("\n".join(rest), serial.stderr.rstrip("\n"), what + ": stderr (but the note)")
    return without_counts(own[0][len(NOTE):]) if own else ""


# Blocks glibc mmaps (200 KiB and more, the threshold pinned at 128 KiB)
# that live ten rounds of small pairs each: freed in a later slice than
# the one that allocated them, so that the slices' mmapped-chunk series
# drops by blocks from before.  Prints the most bytes of them live at once.
BIG_BLOCKS = r"""
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
static void *volatile sink;
int main(void)
{
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	void *big[40];
	unsigned long live = 0, most = 0;
	for (int r = 0; r < 40; r++) {
		big[r] = malloc(200000 + r * 4096);
		live += 200000 + r * 4096;
		if (live > most)
			most = live;
		for (int i = 0; i < 3000; i++) {
			sink = malloc(16 + i % 200);
			free(sink);
		}
		if (r >= 10) {
			free(big[r - 10]);
			live -= 200000 + (r - 10) * 4096;
		}
	}
	for (int r = 30; r < 40; r++)
		free(big[r]);
	printf("%lu\n", most);
	return 0;
}
"""


def threaded_traces(t):
    """The traces the timeline and report cases read: pipelines of 4 and 16
    threads, a pool, slicemix and bigblocks, recorded with small buffers."""
    exe = compile_c(t, "bigblocks", BIG_BLOCKS)
    return {
        "slicemix": record_small(t, "slicemix", [t.prog("slicemix"), "plain", 60000]),
        "pipeline4": record_small(t, "pipeline4", [t.prog("pipeline"), 4, 30000]),
        "pipeline16": record_small(t, "pipeline16", [t.prog("pipeline"), 16, 8000]),
        "pool": record_small(t, "pool", [t.prog("pool"), 6, 20000]),
        "bigblocks": record_small(t, "bigblocks", [exe]),
    }


@case(timeout=900, labels=("analyzers",))
def test_timeline_slices_same_as_serial(t):
    """timeline in time slices: pipelines of 4 and 16 threads, a pool,
    slicemix (maps, breaks, marks, blocks live across cuts) and glibc
    mmapped blocks freed slices after they were allocated, at 2, 3 and 8
    slices, CSV, JSON and SVG: the serial reader's bytes, read in slices;
    and with 1, 7 and 100000 bins (every bin cut, or many bins a slice)."""
    traces = threaded_traces(t)
    for name, trace in traces.items():
        for j in (2, 3, 8):
            for fmt in ("--csv", "--json", "--width=1200"):
                with t.soft():
                    note = timeline_both(t, trace, j, [fmt])
                    eq(note, "read in %d time slices" % j,
                       "%s %s -j %d: how it was read" % (name, fmt, j))
    for name in ("slicemix", "pipeline4", "bigblocks"):
        for bins in (1, 7, 100000):
            with t.soft():
                note = timeline_both(t, traces[name], 3, ["--csv", "--bins=%d" % bins])
                eq(note, "read in 3 time slices", "%s --bins=%d: how it was read" % (name, bins))


@case(timeout=300, labels=("analyzers",))
def test_timeline_slices_program_count(t):
    """timeline in 3 slices against the programs' own counts: slicemix's
    live bytes at exit (its blocks and glibc's DTVs), its peak (stats'),
    its marks in order and its own mappings at most at once (128 KiB);
    glibc's mmapped blocks of bigblocks, the most live at once to the byte
    and none at the end."""
    trace = record_small(t, "slicemix", [t.prog("slicemix"), "plain", 40000,
                                        t.path("count.json")])
    with open(t.path("count.json")) as f:
        prog = json.load(f)
    r = t.run([t.heaptrail, "stats", "--json", "-j", "1", trace], timeout=120)
    s = json.loads(r.stdout)
    g = Glibc(t, trace, s)
    r = t.run([t.heaptrail, "timeline", "--json", "-o", "-", "-j", "3", trace], env=SLICE_ENV,
              timeout=120)
    eq(r.rc, 0, "timeline: exit status (%s)" % r.describe())
    check(NOTE + "read in 3 time slices" in r.stderr, "not read in slices: %r" % r.stderr)
    tl = json.loads(r.stdout)
    with t.soft():
        eq(tl["bins"][-1]["live_bytes"]["last"], prog["live_bytes_at_exit"] + g.live_bytes,
           "live bytes at exit (the last bin)")
        eq(tl["peak_live_bytes"], s["peak_live_bytes"], "the peak, as stats")
        eq([m["label"] for m in tl["marks"]], ["phase %d" % (k * 2501) for k in range(1, 16)],
           "marks, in order")
        eq(max(b["mmap_bytes"]["max"] for b in tl["bins"]), 131072,
           "the program's own mappings at most at once")
        eq(tl["bins"][-1]["mmap_bytes"]["last"], 0, "the program's own mappings at the end")
    exe = compile_c(t, "bigblocks", BIG_BLOCKS)
    most = int(t.run([exe]).stdout)
    trace = record_small(t, "bigblocks", [exe])
    r = t.run([t.heaptrail, "timeline", "--json", "-o", "-", "-j", "3", trace], env=SLICE_ENV,
              timeout=120)
    check(NOTE + "read in 3 time slices" in r.stderr, "not read in slices: %r" % r.stderr)
    tl = json.loads(r.stdout)
    with t.soft():
        eq(max(b["mmapped_chunk_bytes"]["max"] for b in tl["bins"]), most,
           "glibc's mmapped blocks at most at once (the program's count)")
        eq(tl["bins"][-1]["mmapped_chunk_bytes"]["last"], 0, "mmapped blocks at the end")


@case(timeout=300, labels=("analyzers",))
def test_timeline_slices_fall_back(t):
    """timeline reads serially where slices cannot give its answer, and
    says the same: a range (--from, --to), an address handed out while
    live across a cut (slicemix hide), a pause; a short trace without
    HEAPTRAIL_SLICE_MIN_EVENTS."""
    plain = record_small(t, "plain", [t.prog("slicemix"), "plain", 30000])
    r = t.run([t.heaptrail, "stats", "--json", plain])
    half = "%dus" % (json.loads(r.stdout)["duration_ns"] // 2000)
    for args in (["--from", half], ["--to", half]):
        with t.soft():
            note = timeline_both(t, plain, 3, ["--csv"] + args)
            eq(note, "read serially: a part of the trace (--from, --to)", " ".join(args))
    hide = record_small(t, "hide", [t.prog("slicemix"), "hide", 60000])
    with t.soft():
        note = timeline_both(t, hide, 8, ["--csv"])
        eq(note, "read serially: an address was handed out while live across a cut",
           "slicemix hide, 8 slices")
    pause = record_small(t, "pause", [t.prog("slicemix"), "pause", 30000])
    with t.soft():
        note = timeline_both(t, pause, 3, ["--json"])
        eq(note, "read serially: a control event (pause, reset...)", "slicemix pause")
    r = t.run([t.heaptrail, "timeline", "--csv", "-o", "-", "-j", "4", plain],
              env={"HEAPTRAIL_SLICE_NOTE": "1"})
    check(NOTE + "read serially: the trace does not suit" in r.stderr,
          "a short trace: %r" % r.stderr)


@case(timeout=600, labels=("analyzers",))
def test_report_heap_beside_same(t):
    """report with threads to spare reads glibc's heap model on a thread
    of its own, with a reader and a pass of its own: the page is the
    serial one, byte for byte, on pipelines of 4 and 16 threads, a pool,
    slicemix and bigblocks; -j 1 and a short trace read it in one pass."""
    traces = threaded_traces(t)
    beside = NOTE + "glibc's heap model read beside the rest"
    for name, trace in traces.items():
        pages = {}
        for j in (1, 2, 3):
            out = t.path("%s-%d.html" % (name, j))
            r = t.run([t.heaptrail, "report", "-q", "-j", str(j), "-o", out, trace],
                      env=SLICE_ENV, timeout=120)
            with t.soft():
                eq(r.rc, 0, "report -j %d %s: exit status (%s)" % (j, name, r.describe()))
                eq(beside in r.stderr, j > 1, "report -j %d %s: read beside (%r)" % (
                    j, name, r.stderr))
            with open(out, "rb") as f:
                pages[j] = f.read()
        with t.soft():
            check(pages[2] == pages[1] and pages[3] == pages[1],
                  "%s: the page differs from -j 1's (%d, %d and %d bytes)" % (
                      name, len(pages[1]), len(pages[2]), len(pages[3])))
    r = t.run([t.heaptrail, "report", "-q", "-j", "2", "-o", t.path("short.html"),
               traces["pool"]], env={"HEAPTRAIL_SLICE_NOTE": "1"}, timeout=120)
    eq(r.rc, 0, "report of a short trace: exit status")
    check(beside not in r.stderr, "a short trace read beside: %r" % r.stderr)


# Marks before the first allocation (the first chunk of the thread holds
# no frame record), then pairs: a --stacks trace whose first chunk does not
# show its stacks.
MARKS_FIRST = r"""
#include <stdio.h>
#include <stdlib.h>
#include <heaptrail.h>
static void *volatile sink;
int main(int argc, char **argv)
{
	int marks = atoi(argv[1]), pairs = atoi(argv[2]);
	char label[32];
	for (int i = 0; i < marks; i++) {
		snprintf(label, sizeof(label), "m%d", i);
		if (heaptrail_mark)
			heaptrail_mark(label);
	}
	for (int i = 0; i < pairs; i++) {
		sink = malloc(16 + i % 100);
		free(sink);
	}
	return 0;
}
"""

# Every block allocated first, then every one freed: the whole live set
# crosses every cut, each later slice keeps a release for each.
ALL_THEN_FREE = r"""
#include <stdlib.h>
int main(int argc, char **argv)
{
	int n = atoi(argv[1]);
	void **v = calloc((size_t)n, sizeof(*v));
	for (int i = 0; i < n; i++)
		v[i] = malloc(16 + i % 64);
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
	return 0;
}
"""


@case(timeout=300, labels=("analyzers",))
def test_slices_what_they_keep(t):
    """stats and timeline read serially, the same bytes, where slices would
    keep too much or cannot read the trace: a --stacks trace whose threads
    set 3000 marks before their first allocation (its header says stacks;
    the first chunk alone did not, and it was read in slices), and 700,000
    blocks allocated and then freed (the releases the later slices keep,
    past what they may keep all together: 8.7 s and 940 MB in slices
    against 1.0 s and 300 MB serially for 3 M blocks)."""
    exe = compile_c(t, "marksfirst", MARKS_FIRST)
    stacks = record_small(t, "marksfirst", [exe, 3000, 100000], ("--stacks",))
    exe = compile_c(t, "allthenfree", ALL_THEN_FREE)
    allfree = record_small(t, "allthenfree", [exe, 700000])
    for trace, why in ((stacks, "a trace with stacks"),
                       (allfree, "too many releases of blocks from before a cut, or mapping "
                                 "calls, to keep")):
        with t.soft():
            note = stats_both(t, trace, 2)
            eq(note, "read serially: " + why, "stats of %s" % os.path.basename(trace))
        with t.soft():
            note = timeline_both(t, trace, 2, ["--csv"])
            eq(note, "read serially: " + why, "timeline of %s" % os.path.basename(trace))


@case(timeout=300, labels=("analyzers",))
def test_report_heap_beside_one_file(t):
    """report -j 2 reads its heap model from the file its first reader
    opened: damaged traces (a flipped chunk, a lost one) give -j 1's page,
    messages and exit status (it said 'changed while it was read', and no
    page), and a trace renamed over the path while report reads it gives
    the page of one trace or of the other, never a mix (91 of 200 pages
    were half one, half the other: the heap model reopened the path).
    Without -j, report reads in one pass."""
    import threading
    a = record_small(t, "a", [t.prog("pipeline"), 4, 6000])
    b = record_small(t, "b", [t.prog("pool"), 3, 6000])
    with open(a, "rb") as f:
        data = f.read()
    damaged = damaged_copy(t, data, 8)
    pages = {}
    for name, trace in (("a", a), ("b", b), ("damaged", damaged)):
        runs = []
        for j in ("1", "2"):
            out = t.path("%s-%s.html" % (name, j))
            r = t.run([t.heaptrail, "report", "-q", "-j", j, "-o", out, trace], env=SLICE_ENV,
                      timeout=120)
            page = open(out, "rb").read() if os.path.exists(out) else None
            runs.append((r.rc, r.stderr.replace(NOTE + "glibc's heap model read beside the rest\n",
                                                ""), page))
        with t.soft():
            eq(runs[1][:2], runs[0][:2], "%s: -j 2's exit status and stderr" % name)
            check(runs[1][2] == runs[0][2] and runs[0][2], "%s: -j 2's page differs" % name)
        pages[name] = runs[0][2]
    r = t.run([t.heaptrail, "report", "-q", "-o", t.path("d.html"), a], env=SLICE_ENV)
    check(NOTE + "glibc's heap model" not in r.stderr, "without -j, read beside: %r" % r.stderr)
    cur = t.path("cur.ht")
    stop = threading.Event()

    def swap():
        k = 0
        while not stop.is_set():
            src = (a, b)[k % 2]
            tmp = t.path("swap.tmp")
            with open(src, "rb") as f, open(tmp, "wb") as g:
                g.write(f.read())
            os.rename(tmp, cur)
            k += 1

    with open(a, "rb") as f, open(cur, "wb") as g:
        g.write(f.read())
    th = threading.Thread(target=swap)
    th.start()
    mixed = 0
    try:
        for i in range(60):
            out = t.path("swap-%d.html" % i)
            t.run([t.heaptrail, "report", "-q", "-j", "2", "-o", out, cur], env=SLICE_ENV,
                  timeout=120)
            with open(out, "rb") as f:
                page = f.read()
            # (the page names the trace's path, which is cur for these)
            mixed += page.replace(cur.encode(), a.encode()) != pages["a"] and \
                page.replace(cur.encode(), b.encode()) != pages["b"]
    finally:
        stop.set()
        th.join()
    eq(mixed, 0, "pages of neither trace, of 60, while the path changed")


@case(timeout=300, labels=("analyzers",))
def test_slices_durations_trace(t):
    """A trace of record --durations (a DURATION record after each call)
    is read in slices, the serial bytes: its records were taken for stacks
    (any kind from 32 on), and it was read serially, saying "a trace with
    stacks"."""
    trace = record_small(t, "durations", [t.prog("pipeline"), 3, 20000], ("--durations",))
    with t.soft():
        eq(stats_both(t, trace, 3), "read in 3 time slices", "stats")
    with t.soft():
        eq(timeline_both(t, trace, 3, ["--json"]), "read in 3 time slices", "timeline")
