"""replay, convert and compare against their docs (replay.md, convert.md,
compare.md): the replay's live set held to the trace's, its own peak of
live requested bytes reported; tunable values checked; Max RSS growth of
a workload with nothing to do; compare's chart legend and table columns;
usage errors said as such."""

import json
import re
import xml.etree.ElementTree as ET

from cases_replay import write_workload
from htlib import case, check, compile_c, eq, fail, skip

# A producer and a consumer with one block of 60,000 bytes in flight (a
# queue of depth 1): the program holds at most 3 of them (the one being
# filled, the one queued, the one being freed).
PC1 = r"""
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
static void *slot;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int n;
static void *prod(void *x)
{
	for (int i = 0; i <= n; i++) {
		void *p = i < n ? malloc(60000) : NULL;
		if (p)
			memset(p, 1, 60000);
		pthread_mutex_lock(&m);
		while (slot)
			pthread_cond_wait(&c, &m);
		slot = p ? p : (void *)1;
		pthread_cond_broadcast(&c);
		pthread_mutex_unlock(&m);
	}
	return x;
}
static void *cons(void *x)
{
	for (;;) {
		pthread_mutex_lock(&m);
		while (!slot)
			pthread_cond_wait(&c, &m);
		void *p = slot;
		slot = 0;
		pthread_cond_broadcast(&c);
		pthread_mutex_unlock(&m);
		if (p == (void *)1)
			return x;
		free(p);
	}
}
int main(int argc, char **argv)
{
	n = atoi(argv[1]);
	pthread_t a, b;
	pthread_create(&a, 0, prod, 0);
	pthread_create(&b, 0, cons, 0);
	pthread_join(a, 0);
	pthread_join(b, 0);
	return 0;
}
"""

# A pipeline of 4 stages joined by queues of 16: A mallocs, B and C
# realloc (B grows, C shrinks), D frees.
PIPE4 = r"""
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#define QN 16
struct item { void *p; size_t sz; };
struct queue { struct item b[QN]; int h, t, n; pthread_mutex_t m; pthread_cond_t ne, nf; };
static struct queue q[3];
static int n;
static void put(struct queue *x, struct item it)
{
	pthread_mutex_lock(&x->m);
	while (x->n == QN)
		pthread_cond_wait(&x->nf, &x->m);
	x->b[x->t] = it, x->t = (x->t + 1) % QN, x->n++;
	pthread_cond_signal(&x->ne);
	pthread_mutex_unlock(&x->m);
}
static struct item get(struct queue *x)
{
	pthread_mutex_lock(&x->m);
	while (!x->n)
		pthread_cond_wait(&x->ne, &x->m);
	struct item it = x->b[x->h];
	x->h = (x->h + 1) % QN, x->n--;
	pthread_cond_signal(&x->nf);
	pthread_mutex_unlock(&x->m);
	return it;
}
static void *a(void *x)
{
	unsigned s = 1;
	for (int i = 0; i < n; i++) {
		s = s * 1103515245 + 12345;
		struct item it = {0, 16 + (s >> 8) % 4000};
		it.p = malloc(it.sz);
		memset(it.p, 1, it.sz);
		put(&q[0], it);
	}
	put(&q[0], (struct item){0, 0});
	return x;
}
static void *mid(void *x)
{
	long k = (long)x;
	for (;;) {
		struct item it = get(&q[k]);
		if (it.p) {
			it.sz = k == 0 ? it.sz * 2 : it.sz / 3 + 1;
			it.p = realloc(it.p, it.sz);
		}
		put(&q[k + 1], it);
		if (!it.p)
			return 0;
	}
}
static void *d(void *x)
{
	for (;;) {
		struct item it = get(&q[2]);
		if (!it.p)
			return x;
		free(it.p);
	}
}
int main(int argc, char **argv)
{
	n = atoi(argv[1]);
	for (int i = 0; i < 3; i++) {
		pthread_mutex_init(&q[i].m, 0);
		pthread_cond_init(&q[i].ne, 0);
		pthread_cond_init(&q[i].nf, 0);
	}
	pthread_t t[4];
	pthread_create(&t[0], 0, a, 0);
	pthread_create(&t[1], 0, mid, (void *)0);
	pthread_create(&t[2], 0, mid, (void *)1);
	pthread_create(&t[3], 0, d, 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], 0);
	return 0;
}
"""

NOP = "int main(void) { return 0; }\n"

# Every function of the malloc family once (compare's columns).
EVERY_FN = r"""
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>
int main(void)
{
	void *p = malloc(100), *q = calloc(4, 25), *r = NULL;
	p = realloc(p, 200);
	q = reallocarray(q, 8, 25);
	void *a = memalign(64, 100), *b = aligned_alloc(64, 128), *v = valloc(100);
	void *pv = pvalloc(100);
	if (posix_memalign(&r, 64, 100))
		return 1;
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	malloc_trim(0);
	free(p), free(q), free(r), free(a), free(b), free(v), free(pv);
	return 0;
}
"""


def jrun(t, args, rc=0, timeout=120):
    r = t.tool(args, timeout=timeout)
    if r.rc != rc:
        fail("expected exit %d from %s" % (rc, r.describe()))
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        fail("no JSON from %s (%s)" % (r.describe(), e))


def workload(t, name, source, args, flags=("-pthread",)):
    """Compiles, records and converts: (stats JSON, convert JSON, .wl)."""
    exe = compile_c(t, name, source, flags=list(flags) + ["-O2"])
    ht, wl = t.path(name + ".ht"), t.path(name + ".wl")
    t.record(ht, [exe] + list(args))
    s = t.stats(ht)
    c = jrun(t, ["convert", "--json", wl, ht])
    eq(c["max_ideal_rss_bytes"], s["peak_live_bytes"], "%s: the ideal is the trace's peak" % name)
    return s, c, wl


@case(timeout=240, labels=("replay",), locks=("cpu",))
def test_replay_live_follows_trace(t):
    """The replay's own peak of live requested bytes (replay --json
    live_peak_bytes, compare's too) stays within the trace's (the ideal),
    in both modes, on a producer/consumer of depth 1 (2 or 3 blocks live) and a 4-stage
    pipeline: no thread allocates ahead of the frees that came before its
    allocation in the trace beyond max(4 KiB, 1/64 of the peak), and the
    measure is exact with --threads-as-one, at most 16 KiB a thread above
    with threads.  Before: the producer ran ahead by up to 144 blocks
    (7.9 MiB for 176 KiB) and Max RSS grew by 8 MiB."""
    block = 60000
    s, c, wl = workload(t, "pc1", PC1, ["2000"])
    peak = s["peak_live_bytes"]
    check(2 * block <= peak < 4 * block, "pc1's peak %d: 2 or 3 blocks and the threads' TLS" % peak)
    tol = max(4096, peak // 64)
    for mode in ([], ["--threads-as-one"]):
        for _ in range(2):
            j = jrun(t, ["replay", "--json"] + mode + [wl])
            what = "pc1 %s" % (mode or "threads")
            # 3 blocks of 60,000 in the heap, not 144
            check(j["max_rss_growth_kb"] < 2048,
                  "%s: Max RSS grew by %d KiB" % (what, j["max_rss_growth_kb"]))
            if "live_peak_bytes" not in j:
                fail("%s: replay --json has no live_peak_bytes" % what)
            lp, slack = j["live_peak_bytes"], j["live_peak_slack_bytes"]
            eq(slack, 0 if mode else 16384 * 3, "%s: live_peak_slack_bytes" % what)
            check(peak - block <= lp <= peak + tol + slack,
                  "%s: the replay's live peak %d, the trace's %d" % (what, lp, peak))
            eq(j["live_excess_bytes"], 0, "%s: live_excess_bytes" % what)
    check(c.get("live_waits", 0) > 0, "convert's live_waits: %s" % c.get("live_waits"))
    r = t.tool(["replay", "--threads-as-one", wl])
    eq(r.rc, 0, r.describe())
    m = re.search(r"^live peak: ([\d,]+) bytes requested in the replay, ([\d,]+) in the trace "
                  r"\(the ideal\)$", r.stdout, re.M)
    check(m is not None, "the live peak line:\n" + r.stdout)
    eq(int(m.group(2).replace(",", "")), peak, "the text's trace peak")
    check("warning: the replay held" not in r.stdout, "a warning:\n" + r.stdout)
    cj = jrun(t, ["compare", "-q", "--json", "-n", "1", "--threads-as-one", "-o",
                  t.path("pc1.svg"), wl])
    res = cj["results"][0]
    check(peak - block <= res["live_peak_bytes"] <= peak + tol,
          "compare's live_peak_bytes %d, the trace's %d" % (res["live_peak_bytes"], peak))
    eq(res["live_excess_bytes"], 0, "compare's live_excess_bytes")

    s, c, wl = workload(t, "pipe4", PIPE4, ["3000"])
    peak = s["peak_live_bytes"]
    tol = max(4096, peak // 64)
    for mode in ([], ["--threads-as-one"]):
        j = jrun(t, ["replay", "--json"] + mode + [wl])
        what = "pipe4 %s" % (mode or "threads")
        if "live_peak_bytes" not in j:
            fail("%s: replay --json has no live_peak_bytes" % what)
        check(j["live_peak_bytes"] <= peak + tol + j["live_peak_slack_bytes"],
              "%s: the replay's live peak %d, the trace's %d" % (what, j["live_peak_bytes"], peak))
        eq(j["live_excess_bytes"], 0, "%s: live_excess_bytes" % what)
        eq(j["slot_errors"], 0, "%s: slot errors" % what)
        eq(j["calls"]["realloc"], 2 * 3000, "%s: reallocs" % what)


@case(timeout=120, labels=("replay",))
def test_replay_live_excess_said(t):
    """A workload whose replay holds more than the trace did is said so,
    in replay's text and JSON and under compare's table: here one a test
    writes by hand, a producer that mallocs 100 blocks of 1000 bytes
    before the consumer frees any, with an ideal peak of 1000 (as a
    workload converted before the live bound could be)."""
    producer = [("spawn", 1)] + [("malloc", i + 1, 1000) for i in range(100)]
    consumer = [("wait", 0, 101)] + [("free", i + 1) for i in range(100)]
    path = write_workload(t.path("ahead.wl"), [producer, consumer], 100, ideal=1000)
    j = jrun(t, ["replay", "--json", "--threads-as-one", path])
    if "live_peak_bytes" not in j:
        fail("replay --json has no live_peak_bytes")
    eq(j["live_peak_bytes"], 100000, "live_peak_bytes")
    eq(j["live_excess_bytes"], 99000, "live_excess_bytes")
    r = t.tool(["replay", "--threads-as-one", path])
    check("warning: the replay held 99,000 bytes more live than the trace ever did" in r.stdout,
          "the warning:\n" + r.stdout)
    r = t.tool(["compare", "-q", "-n", "1", "--threads-as-one", "-o", t.path("a.svg"), path])
    check("warning: the replays of glibc held up to 100000 live bytes where the trace held at "
          "most 1000" in r.stdout, "compare's warning:\n" + r.stdout)


@case(timeout=120, labels=("replay",))
def test_replay_tunable_values(t):
    """-t checks each value as glibc's loader reads it: a decimal without
    a leading 0 or a 0x number, within the range --list-tunables prints.
    Before, 64K (glibc: 64 bytes), -5 (2^64 - 5), abc (0) and out-of-range
    values ran and were labelled as applied."""
    _, _, wl = workload(t, "nop", NOP, [], flags=())
    bad = [
        ("glibc.malloc.mmap_threshold=65536;glibc.malloc.mmap_threshold=64K",
         "-t glibc.malloc.mmap_threshold=64K: glibc.malloc.mmap_threshold=64K is not a number as "
         "glibc reads one (a decimal without a leading 0, or 0x and hexadecimal digits; no sign, "
         "no K/M/G: glibc would read the start of it and ignore the rest): give a number from "
         "0x0 to 0xffffffffffffffff"),
        ("glibc.malloc.arena_max=-5", "glibc.malloc.arena_max=-5 is not a number"),
        ("glibc.malloc.perturb=abc", "glibc.malloc.perturb=abc is not a number"),
        ("glibc.malloc.perturb=010", "glibc.malloc.perturb=010 is not a number"),
        ("glibc.malloc.arena_max=0", "glibc.malloc.arena_max=0 is out of its range, 0x1 to "
         "0xffffffffffffffff"),
        ("glibc.malloc.perturb=0x100", "glibc.malloc.perturb=0x100 is out of its range, 0 to 255"),
    ]
    r = t.run(["/bin/sh", "-c", "ldd /bin/true | grep -o '/[^ ]*ld-linux[^ ]*' | head -1"])
    ld = r.stdout.strip()
    if not ld or t.run([ld, "--list-tunables"]).rc != 0:
        skip("this glibc's loader has no --list-tunables (glibc 2.33)")
    for spec, msg in bad:
        r = t.tool(["compare", "-q", "-n", "1", "-o", t.path("t.svg"), "-t", spec, wl])
        eq(r.rc, 2, "compare -t %s: %s" % (spec, r.describe()))
        check(msg in r.stderr, "compare -t %s: expected %r in:\n%s" % (spec, msg, r.stderr))
        r = t.tool(["replay", "-t", spec.split(";")[-1], wl])
        eq(r.rc, 2, "replay -t %s: %s" % (spec, r.describe()))
        check("is not a number" in r.stderr or "is out of its range" in r.stderr, r.describe())
    for spec in ("glibc.malloc.perturb=255:glibc.malloc.mmap_threshold=0x10000",
                 "glibc.malloc.arena_max=1", "glibc.malloc.perturb=0"):
        r = t.tool(["replay", "-t", spec, wl])
        eq(r.rc, 0, "replay -t %s: %s" % (spec, r.describe()))


@case(timeout=120, labels=("replay",), locks=("cpu",))
def test_replay_nop_rss_growth(t):
    """A workload of 0 ops grows Max RSS by at most 64 KiB in every one of
    5 runs (measured: 0 in 110 of 110 runs, 50 of them beside two busy
    loops), in both modes: the RSS sampler is created before the start
    readings, which wait for its warm-up (its first read of statm, the
    first page of its samples), and leaves after the end ones, and the
    engine's code is mapped before.  Before: 228 to 460 KiB in every run
    (the sampler's thread created after the start reading, joined before
    the end); until 2026-11-28, 4 KiB in most runs and 72 to 160 KiB in
    some (the sampler's warm-up after the start readings: all 5 runs of
    a ctest on a busy machine), and the test asked only the least of 5
    runs to stay under 64."""
    _, c, wl = workload(t, "nop", NOP, [], flags=())
    eq(c["ops"], 0, "ops")
    for mode in ([], ["--threads-as-one"]):
        growth = []
        for _ in range(5):
            j = jrun(t, ["replay", "--json"] + mode + [wl])
            growth.append(j["max_rss_growth_kb"])
        check(max(growth) <= 64, "%s: Max RSS growth of a 0-op workload, KiB: %s"
              % (mode or "threads", growth))


@case(timeout=180, labels=("replay",))
def test_compare_svg_legend(t):
    """compare's chart: every variant's label whole in the legend (under
    the plot, the SVG widened for the longest one; before, text at x=730
    of 900 px cut "glibc glibc.malloc.arena_ma..."), and no two curves
    drawn alike for 12 variants (colour and dash; the colours repeated
    after 8)."""
    _, _, wl = workload(t, "nop", NOP, [], flags=())
    sets = ["glibc.malloc.arena_max=1:glibc.malloc.tcache_count=0:glibc.malloc.mmap_threshold="
            "65536:glibc.malloc.trim_threshold=131072", "glibc.malloc.arena_max=2"]
    svg = t.path("c.svg")
    r = t.tool(["compare", "-q", "-n", "1", "-a", ",".join(["glibc"] * 10), "-t", ";".join(sets),
                "-o", svg, wl], timeout=150)
    eq(r.rc, 0, r.describe())
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    width = float(root.get("width"))
    labels = ["glibc"] * 10 + ["glibc " + s for s in sets]
    texts = [e for e in root.iter(ns + "text")]
    for lab in set(labels):
        found = [e for e in texts if e.text == lab]
        check(found, "the legend has no text %r" % lab)
        for e in found:
            check(float(e.get("x")) + 7 * len(lab) <= width,
                  "%r at x=%s does not fit in %s px" % (lab, e.get("x"), width))
    strokes = [(e.get("stroke"), e.get("stroke-dasharray")) for e in root.iter(ns + "polyline")]
    eq(len(strokes), 12, "curves")
    eq(len(set(strokes)), 12, "distinct strokes %s" % strokes)


@case(timeout=120, labels=("replay",))
def test_compare_table_columns(t):
    """compare's table with every function of the family: each column's
    figures end where its name ends (aligned_alloc and malloc_trim were
    printed 8 wide under names of 13 and 11)."""
    _, c, wl = workload(t, "every", EVERY_FN, [], flags=())
    for f in ("aligned_alloc", "malloc_trim", "posix_memalign", "reallocarray"):
        check(c["calls"].get(f, 0) >= 1, "the workload calls %s: %s" % (f, c["calls"]))
    r = t.tool(["compare", "-q", "-n", "1", "-a", "glibc,glibc", "-o", t.path("e.svg"), wl])
    eq(r.rc, 0, r.describe())
    lines = r.stdout.splitlines()
    head = lines[0]
    ends = [m.end() for m in re.finditer(r"\S+", head[head.index("RSS/ideal"):])]
    base = head.index("RSS/ideal")
    for row in lines[1:3]:
        cells = [m.end() for m in re.finditer(r"\S+", row[base:])]
        eq(cells, ends, "the ends of the columns of row %r under %r" % (row, head))


@case(timeout=60, labels=("replay",))
def test_replay_compare_usage(t):
    """replay -a '' is a usage error as compare's empty list is (it ran
    glibc); --mallopt under another allocator warns that it does nothing;
    compare -n 0 names --reps."""
    _, _, wl = workload(t, "nop", NOP, [], flags=())
    r = t.tool(["replay", "-a", "", wl])
    eq(r.rc, 2, r.describe())
    eq(r.heaptrail_lines(), ["heaptrail: error: --allocator '': give glibc, jemalloc, tcmalloc, "
                             "mimalloc, or the path of a preloadable allocator library"],
       "replay -a ''")
    r = t.tool(["compare", "-q", "-n", "0", "-o", t.path("u.svg"), wl])
    eq(r.rc, 2, r.describe())
    eq(r.heaptrail_lines(), ["heaptrail: error: --reps 0: give a count of 1 or more"], "-n 0")
    r = t.tool(["compare", "-q", "-n", "99999999999999999999", "-o", t.path("u.svg"), wl])
    eq(r.rc, 2, r.describe())
    check("1 or more" not in r.stderr, "-n 99999999999999999999 is too large, not too small:\n"
          + r.stderr)
    r = t.tool(["replay", "--mallopt", "M_ARENA_MAX=1", "-a", "jemalloc", wl])
    if r.rc == 2 and "not found" in r.stderr:
        skip("jemalloc is not installed")
    eq(r.rc, 0, r.describe())
    eq(r.heaptrail_lines(), ["heaptrail: warning: --mallopt M_ARENA_MAX=1: mallopt() is glibc's "
                             "and sets glibc's allocator, which does not serve this run's calls "
                             "under jemalloc: it does nothing here"], "--mallopt -a jemalloc")


# A shared library with no allocator in it (replay's --allocator check).
NOT_ALLOC_SO = "int not_an_allocator(int x) { return x + 1; }\n"


@case(timeout=120, labels=("replay",))
def test_allocator_not_preloadable(t):
    """replay -a and compare -a with a file that is no preloadable
    allocator (a shared library without malloc, a program, a text file):
    a usage error (exit 2) that says what the file is, before the workload
    is read and before any run.  Before, the re-executed replay found
    malloc still glibc's and failed with exit 1 after reading the
    workload, and compare did so after every glibc run."""
    _, _, wl = workload(t, "nop", NOP, [], flags=())
    so = compile_c(t, "notalloc.so", NOT_ALLOC_SO, flags=("-shared", "-fPIC"))
    prog = compile_c(t, "aprog", NOP)
    text = t.path("alloc.txt")
    with open(text, "w") as f:
        f.write("not a library\n")
    want = {so: "a shared library that does not define malloc()",
            prog: "a program, not a shared library",
            text: "not an ELF file"}
    tail = "; give a preloadable allocator library (one that defines malloc and free)"
    for path, what in want.items():
        r = t.tool(["replay", "-a", path, wl])
        eq((r.rc, r.stdout), (2, ""), "replay -a %s: %s" % (path, r.describe()))
        eq(r.heaptrail_lines(), ["heaptrail: error: --allocator: allocator library %s: %s%s" %
                                 (path, what, tail)], "replay -a %s" % path)
        r = t.tool(["compare", "-n", "1", "-a", "glibc," + path, "-o", t.path("c.svg"), wl])
        eq((r.rc, r.stdout), (2, ""), "compare -a glibc,%s: %s" % (path, r.describe()))
        eq(r.heaptrail_lines(), ["heaptrail: error: --allocators: allocator library %s: %s%s" %
                                 (path, what, tail)], "compare -a glibc,%s" % path)
    # a workload that is not there comes second: the allocator is refused first
    r = t.tool(["replay", "-a", so, t.path("none.wl")])
    eq(r.rc, 2, "replay -a %s none.wl: %s" % (so, r.describe()))


@case(timeout=120, labels=("replay",))
def test_inherited_tunables_said(t):
    """GLIBC_TUNABLES from the environment: replay's text names what the
    run had (its JSON did, its text did not), the inherited list first and
    --tunable's after; an item glibc does not have is a warning, once from
    replay and once from compare (not once a run), and the runs go on."""
    _, _, wl = workload(t, "nop", NOP, [], flags=())
    env = {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}
    r = t.run([t.heaptrail, "replay", "-t", "glibc.malloc.arena_max=2", wl], env=env)
    eq(r.rc, 0, r.describe())
    eq(r.heaptrail_lines(), [], "replay with good tunables: messages")
    eq([l for l in r.stdout.splitlines() if l.startswith("glibc tunables:")],
       ["glibc tunables: glibc.malloc.mmap_threshold=65536:glibc.malloc.arena_max=2"],
       "replay's text: the tunables")
    r = t.tool(["replay", wl])
    eq([l for l in r.stdout.splitlines() if "tunables" in l], [], "no tunables: no line")
    bad = {"GLIBC_TUNABLES": "glibc.malloc.no_such_one=1"}
    warn = ("heaptrail: warning: GLIBC_TUNABLES from the environment, "
            "glibc.malloc.no_such_one=1: this glibc has no tunable glibc.malloc.no_such_one")
    r = t.run([t.heaptrail, "replay", wl], env=bad)
    eq(r.rc, 0, r.describe())
    lines = r.heaptrail_lines()
    eq(len(lines), 1, "replay: one warning: %r" % lines)
    check(lines[0].startswith(warn), "replay's warning: %r" % lines[0])
    check("glibc tunables: glibc.malloc.no_such_one=1" in r.stdout, "replay's text:\n" + r.stdout)
    r = t.run([t.heaptrail, "compare", "-q", "-n", "2", "-a", "glibc,glibc", "-o",
               t.path("c.svg"), wl], env=bad, timeout=120)
    eq(r.rc, 0, r.describe())
    lines = r.heaptrail_lines()
    eq(len(lines), 1, "compare, 4 runs: one warning: %r" % lines)
    check(lines[0].startswith(warn), "compare's warning: %r" % lines[0])
