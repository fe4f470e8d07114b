"""replay and compare where a prober found them wrong (second round): the
replay's live peak after a free on the fast path, compare's RSS/ideal on
a replay that kept less live than the trace or whose process outweighs
the ideal, tunable values glibc's setters ignore, allocator paths
LD_PRELOAD cannot hold, and outputs refused only after the run."""
import json
import os
import subprocess
import time

from cases_replay import OP, find_lib, write_workload
from cases_replay_fixes import jrun, workload
from htlib import case, check, compile_c, eq, fail, reap, skip

# One thread: a block of 1,000,000 freed, then calloc and malloc of as many
# into the slots it left, ten times: 2,000,000 live at the most.
STALE = r"""
#include <stdlib.h>
static void *volatile sink;
int main(void)
{
	for (int i = 0; i < 10; i++) {
		void *p = malloc(1000000);
		sink = p;
		free(p);
		void *a = calloc(1, 1000000), *b = malloc(1000000);
		sink = a, sink = b;
		free(a);
		free(b);
	}
	return 0;
}
"""


@case(timeout=120, labels=("replay",))
def test_replay_live_peak_after_fast_free(t):
    """A slot freed on the engine's fast path kept its size, so that a
    calloc into it later counted the difference: the replay's live peak was
    1,000,000 where the trace's is 2,000,000 (gcc's cc1: 765,481 against
    3,908,250), and the warnings that compare the two were blind.  Exact
    with --threads-as-one, within its slack with threads."""
    s, _, wl = workload(t, "stale", STALE, [], flags=())
    peak = s["peak_live_bytes"]
    check(2000000 <= peak < 2000000 + 65536, "the trace's peak %d" % peak)
    j = jrun(t, ["replay", "--json", "--threads-as-one", wl])
    eq(j["live_peak_bytes"], peak, "--threads-as-one: the replay's live peak")
    j = jrun(t, ["replay", "--json", wl])
    check(peak <= j["live_peak_bytes"] <= peak + j["live_peak_slack_bytes"],
          "threads: the replay's live peak %d, the trace's %d" % (j["live_peak_bytes"], peak))


@case(timeout=120, labels=("replay",))
def test_compare_less_live_and_baseline_said(t):
    """A replay that held far less live than the trace (here a workload
    written with an ideal of 1,000,000 whose ops hold 1,000 bytes at a
    time, a thousand times over: the loader refuses an ideal above all the
    ops ask for) has a
    Max RSS of a smaller heap: compare says so under its table, and its
    JSON gives rss_live_ratio (Max RSS over the run's own live peak) and
    max_rss_growth_kb; the replay process with its workload, more than
    the ideal before the first op, is said in a note.  Before: no word, and
    RSS/ideal read as an allocator below the ideal."""
    ops = [("malloc", 1, 1000), ("free", 1)] * 1000
    path = write_workload(t.path("less.wl"), [ops], 1, ideal=1000000)
    r = t.tool(["compare", "-q", "-n", "1", "--threads-as-one", "-o", t.path("l.svg"), path])
    eq(r.rc, 0, r.describe())
    check("warning: the replays of glibc held at most 1000 live bytes where the trace held "
          "1000000: " in r.stdout, "the warning:\n" + r.stdout)
    check("note: Max RSS counts the replay process and the workload it holds in memory, up to "
          in r.stdout, "the note:\n" + r.stdout)
    j = jrun(t, ["compare", "-q", "--json", "-n", "1", "--threads-as-one", "-o",
                 t.path("l.svg"), path])
    res = j["results"][0]
    eq(res["live_peak_bytes"], 1000, "live_peak_bytes")
    check(abs(res["rss_live_ratio"] - res["max_rss_kb"] * 1024 / 1000) < 1,
          "rss_live_ratio %r, max_rss_kb %r" % (res["rss_live_ratio"], res["max_rss_kb"]))
    check(0 <= res["max_rss_growth_kb"] <= res["max_rss_kb"]
          and res["max_rss_start_kb"] + res["max_rss_growth_kb"] >= res["max_rss_kb"] - 1024,
          "max_rss_start_kb %r + growth %r, max %r" % (res["max_rss_start_kb"],
                                                      res["max_rss_growth_kb"], res["max_rss_kb"]))
    # nothing live at all: no ratio (it was 0)
    path = write_workload(t.path("none.wl"), [[]], 0, ideal=0)
    j = jrun(t, ["compare", "-q", "--json", "-n", "1", "-o", t.path("n.svg"), path])
    eq((j["results"][0]["rss_ideal_ratio"], j["results"][0]["rss_live_ratio"]), (None, None),
       "a workload with nothing live: ratios")


@case(timeout=120, labels=("replay",))
def test_replay_compare_refused_early(t):
    """Refused before any run, with what to do: a tunable value
    above what glibc's malloc takes (tcache_count 65536, tcache_max 1033:
    the loader lists 2^64-1, the setter ignores them silently); an
    allocator path with a space or ':' (LD_PRELOAD splits it: the run then
    asked whether the library defines malloc); --rss-csv naming a symlink
    or a missing directory and a --result-fd not open (both failed after
    the whole run; exit 1, as an output refused then); compare --reps too
    large (out of memory); a variant given twice is numbered (two rows
    read alike)."""
    path = write_workload(t.path("w.wl"), [[("malloc", 1, 100), ("free", 1)]], 1, ideal=100)
    r = t.run(["/bin/sh", "-c", "ldd /bin/true | grep -o '/[^ ]*ld-linux[^ ]*' | head -1"])
    ld = r.stdout.strip()
    if ld and t.run([ld, "--list-tunables"]).rc == 0:
        for spec, most in (("glibc.malloc.tcache_count=65536", 65535),
                           ("glibc.malloc.tcache_max=1033", 1032)):
            for cmd in (["replay", "-t", spec, path],
                        ["compare", "-q", "-n", "1", "-t", spec, "-o", t.path("x.svg"), path]):
                r = t.tool(cmd)
                eq(r.rc, 2, "%s: %s" % (cmd, r.describe()))
                check("%s is above %d, the most glibc's malloc takes" % (spec, most) in r.stderr,
                      r.stderr)
        r = t.tool(["replay", "-t", "glibc.malloc.tcache_count=65535:glibc.malloc.tcache_max=1032",
                    path])
        eq(r.rc, 0, "the largest values taken: " + r.describe())
    else:
        t.note("no --list-tunables: the tunables part skipped")
    for d in ("sp ace", "co:lon"):
        os.makedirs(t.path(d))
        lib = t.path(d, "liballoc.so")
        open(lib, "w").close()
        for cmd in (["replay", "-a", lib, path],
                    ["compare", "-q", "-n", "1", "-a", "glibc," + lib, "-o", t.path("x.svg"), path]):
            r = t.tool(cmd)
            eq(r.rc, 2, "%s: %s" % (cmd, r.describe()))
            check("its path holds a space or ':', which LD_PRELOAD takes as separators" in r.stderr,
                  r.stderr)
    os.symlink("/etc/hostname", t.path("link.csv"))
    # (/proc: root passes access(), and no file can be made there; it was
    # refused only after the run, probe Y)
    for csv in ("link.csv", t.path("nodir", "r.csv"), "/proc/r.csv"):
        r = t.tool(["replay", "--rss-csv", csv, path])
        eq((r.rc, r.stdout), (1, ""), "--rss-csv %s: refused before the run: %s" % (csv, r.describe()))
        check("--rss-csv: cannot write" in r.stderr, r.stderr)
    r = t.tool(["replay", "--result-fd=99", path])
    eq((r.rc, r.stdout), (1, ""), "--result-fd=99: " + r.describe())
    check("--result-fd=99: Bad file descriptor" in r.stderr, r.stderr)
    r = t.tool(["compare", "-n", "2147483647", path])
    eq(r.rc, 2, r.describe())
    check("--reps 2147483647: at most 10000 runs of each" in r.stderr, r.stderr)
    r = t.tool(["compare", "-q", "-n", "1", "-a", "glibc,glibc", "-o", t.path("d.svg"), path])
    eq(r.rc, 0, r.describe())
    rows = [l.split("  ")[0] for l in r.stdout.splitlines()[1:3]]
    eq(rows, ["glibc", "glibc #2"], "a variant given twice is numbered:\n" + r.stdout)


# Eight threads handed a block each by the main thread, all at once: each
# frees it and calls malloc_trim, its first call to glibc's malloc when
# another allocator serves malloc.
TRIMS_TOGETHER = r"""
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#define N 8
static pthread_barrier_t go;
static void *blk[N];
static void *worker(void *arg)
{
	pthread_barrier_wait(&go);
	free(blk[(long)arg]);
	malloc_trim(0);
	return NULL;
}
int main(void)
{
	pthread_t t[N];
	pthread_barrier_init(&go, NULL, N + 1);
	for (long i = 0; i < N; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < N; i++)
		blk[i] = malloc(64);
	pthread_barrier_wait(&go);
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	return 0;
}
"""


@case(timeout=240, labels=("replay",))
def test_replay_first_trims_together(t):
    """glibc sets its malloc up on the first malloc_trim or mallopt, and
    not thread-safely: under jemalloc or mimalloc (which have no
    malloc_trim) two replay threads trimming first at once both took the
    main arena, and the replay crashed at their exit (SIGSEGV, or glibc's
    "a->attached_threads > 0" abort; the TSan build's replay met it in
    CI): 1 replay in 100 to 300 of this workload.  The engine now sets
    glibc's malloc up in the main thread before the run.  300 replays under
    each allocator, none may fail."""
    _, c, wl = workload(t, "together", TRIMS_TOGETHER, [])
    eq(c["calls"].get("malloc_trim"), 8, "malloc_trim calls in the workload")
    ran = 0
    for name in ("jemalloc", "mimalloc"):
        if find_lib(name) is None:
            continue
        for i in range(300):
            r = t.tool(["replay", "--no-mlock", "-a", name, wl])
            if r.rc != 0:
                fail("replay %d under %s: %s" % (i + 1, name, r.describe()))
        ran += 1
    if not ran:
        skip("neither jemalloc nor mimalloc is installed (scripts/deps.sh)")


@case(timeout=120, labels=("replay",))
def test_replay_inherited_preload(t):
    """An allocator in LD_PRELOAD from the environment: under -a glibc
    (the default) jemalloc's malloc served the run, which said glibc (and
    compare labelled jemalloc's figures glibc's); a workload that calls
    pvalloc died of SIGSEGV with no word; under -a jemalloc an inherited
    mimalloc's reallocarray got jemalloc's blocks: SIGSEGV (probe Y).
    Each is refused before the run, exit 1, with the library and what to
    do.  Under heaptrail record (its recorder passes every call on to
    glibc) the glibc replay runs."""
    je, mi = find_lib("jemalloc"), find_lib("mimalloc")
    if not je or not mi:
        skip("jemalloc and mimalloc are needed (scripts/deps.sh)")
    OP.setdefault("reallocarray", 4)
    plain = write_workload(t.path("plain.wl"), [[("malloc", 1, 16), ("free", 1)]], 1, ideal=16)
    pv = write_workload(t.path("pv.wl"), [[("pvalloc", 1, 100), ("free", 1)]], 1, ideal=100)
    ra = write_workload(t.path("ra.wl"), [[("malloc", 1, 16), ("reallocarray", 1, 1, 4, 8),
                                           ("free", 1)]], 1, ideal=32)
    for wl in (plain, pv):
        r = t.run([t.heaptrail, "replay", wl], env={"LD_PRELOAD": je})
        eq((r.rc, r.stdout), (1, ""), "LD_PRELOAD=jemalloc, replay %s:\n%s" % (wl, r.describe()))
        check("heaptrail: error: replay: this process's malloc comes from %s, not from glibc's "
              % je in r.stderr and "(LD_PRELOAD=%s): the run would not be glibc's; unset "
              "LD_PRELOAD, or replay it with --allocator %s\n" % (je, je) in r.stderr,
              "the error:\n" + r.stderr)
    r = t.run([t.heaptrail, "replay", "-a", "jemalloc", ra], env={"LD_PRELOAD": mi})
    eq((r.rc, r.stdout), (1, ""), "LD_PRELOAD=mimalloc, replay -a jemalloc:\n" + r.describe())
    check("the workload calls reallocarray (1 time), and this process's reallocarray comes from "
          "%s, not from jemalloc (" % mi in r.stderr and "unset LD_PRELOAD in the environment"
          in r.stderr, "the error:\n" + r.stderr)
    for wl in (ra, pv):  # without the inherited library: runs
        r = t.tool(["replay", "-a", "mimalloc", wl])
        eq(r.rc, 0, r.describe())
    r = t.run([t.heaptrail, "record", "-q", "-o", t.path("r.ht"), "--", t.heaptrail, "replay",
               "--json", ra])
    eq(r.rc, 0, "replay under heaptrail record:\n" + r.describe())
    eq(json.loads(r.stdout)["calls"]["reallocarray"], 1, "the replay's calls:\n" + r.stdout)


@case(timeout=120, labels=("replay",))
def test_compare_workload_replaced(t):
    """compare's replays read the workload by its path, one run after the
    other: a workload replaced meanwhile (mv of another over it) gave
    medians of two workloads (wall 5 ms to 484 ms) with the first one's
    calls and ideal, exit 0 and no word (probe Y).  Now compare checks
    the file before and after each run and stops, exit 1, with no table
    and no chart."""
    one = write_workload(t.path("one.wl"), [[("malloc", 1, 16), ("free", 1)] * 100], 1, ideal=16)
    other = write_workload(t.path("other.wl"), [[("malloc", 1, 64), ("free", 1)] * 5000], 1,
                           ideal=64)
    p = subprocess.Popen([t.heaptrail, "compare", "-n", "400", "-a", "glibc,glibc",
                          "-o", t.path("c.svg"), one], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=t.base_env(), cwd=t.dir)
    try:
        time.sleep(0.5)
        os.rename(other, one)
        out, err = p.communicate(timeout=100)
    finally:
        reap(p)
    err = err.decode()
    eq((p.returncode, out.decode()), (1, ""), "compare with its workload replaced:\n" + err)
    check("heaptrail: error: compare: %s was replaced or rewritten while compare ran: its runs "
          "would mix two workloads; run compare again on a workload that stays as it is\n"
          % one in err, "the error:\n" + err)
    check(not os.path.exists(t.path("c.svg")), "a chart was written")


# Thread A: mmap 3 pages, mremap (MAYMOVE) to 9, munmap; thread B: mmap 3
# pages, munmap; ITERS times each.  B's mmap gets the range A's mremap
# gave back before that mremap returns, now and then.
MREMAP_RACE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
static int iters;
static void *a_main(void *x)
{
	for (int i = 0; i < iters; i++) {
		char *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		m[0] = 1;
		m = mremap(m, 3 * 4096, 9 * 4096, MREMAP_MAYMOVE);
		if (m == MAP_FAILED)
			abort();
		munmap(m, 9 * 4096);
	}
	return x;
}
static void *b_main(void *x)
{
	for (int i = 0; i < iters; i++) {
		char *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		m[0] = 1;
		munmap(m, 3 * 4096);
	}
	return x;
}
int main(int argc, char **argv)
{
	iters = atoi(argv[1]);
	pthread_t a, b;
	pthread_create(&a, NULL, a_main, NULL);
	pthread_create(&b, NULL, b_main, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	return 0;
}
"""


@case(timeout=180, labels=("replay",))
def test_convert_mremap_race(t):
    """convert --mmap: a moving mremap's old range, which the kernel frees
    within the call, taken by another thread's mmap before the mremap
    returned: the converter, which wrote the mremap whole at its end,
    took that mmap for a fixed map over the live one, unmapped it in the
    other thread and lost the mremap and its munmap (9 to 29 of 20,000,
    said as skipped "file, shared or foreign" maps; probe Y).  Every call
    is in the workload now, and the replay makes them all."""
    exe = compile_c(t, "mremap_race", MREMAP_RACE, flags=["-O2", "-pthread"])
    trace, wl = t.path("mr.ht"), t.path("mr.wl")
    t.record(trace, [exe, "20000"])
    c = jrun(t, ["convert", "--mmap", "--json", wl, trace])
    eq(({k: c["calls"].get(k) for k in ("mmap", "mremap", "munmap")}, c["skipped_maps"],
        c["failed_maps"]), ({"mmap": 40000, "mremap": 20000, "munmap": 40000}, 0, 0),
       "the workload's map calls, skipped and failed")
    j = jrun(t, ["replay", "--json", wl])
    eq(({k: j["calls"][k] for k in ("mmap", "mremap", "munmap")}, j["slot_errors"]),
       ({"mmap": 40000, "mremap": 20000, "munmap": 40000}, 0), "the replay's map calls")


@case(timeout=60, labels=("replay",))
def test_replay_compare_items_refused(t):
    """Usage errors (exit 2, before anything runs) that were taken (probe
    Y): an empty item in compare's -a or -t lists (dropped with no word),
    compare -o - (it wrote a file named '-'), an empty item in a tunable
    set (said as "()"), a --mallopt value above an int (said as "not a
    number"), an --rss-interval below 100us (1ns was taken and said as
    "interval_us": 0)."""
    wl = write_workload(t.path("w.wl"), [[("malloc", 1, 16), ("free", 1)]], 1, ideal=16)
    for args, said in (
            (["compare", "-a", "glibc,,glibc", wl],
             "--allocators 'glibc,,glibc': an empty item; give names separated by ','"),
            (["compare", "-a", "glibc,", wl],
             "--allocators 'glibc,': an empty item; give names separated by ','"),
            (["compare", "-t", "glibc.malloc.arena_max=1;", wl],
             "--tunables 'glibc.malloc.arena_max=1;': an empty item; give names separated by ';'"),
            (["compare", "-o", "-", wl],
             "-o -: compare writes its chart, an SVG, to a file: name one"),
            (["replay", "-t", ":glibc.malloc.arena_max=1", wl],
             "--tunable :glibc.malloc.arena_max=1: an empty item (a ':' too many)"),
            (["replay", "--mallopt", "M_MMAP_THRESHOLD=2G", wl],
             "--mallopt M_MMAP_THRESHOLD=2G: mallopt takes an int: at most 2147483647"),
            (["replay", "--rss-interval", "1ns", wl],
             "--rss-interval: at least 100us"),
            (["compare", "--rss-interval", "50us", wl],
             "--rss-interval: at least 100us")):
        r = t.tool(args)
        with t.soft():
            eq((r.rc, r.stdout), (2, ""), "%s:\n%s" % (" ".join(args), r.describe()))
            check("heaptrail: error: " + said in r.stderr, "%s: %r" % (" ".join(args), r.stderr))
    check(not os.path.exists(t.path("-")) and not os.path.exists("-"), "a file named '-'")
