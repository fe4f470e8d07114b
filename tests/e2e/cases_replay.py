"""convert, replay and compare (docs/convert.md, replay.md, compare.md,
WORKLOAD.md): traces of programs written for the tests become workloads
that replay with exactly the traced calls and peak, under every allocator,
and bad workloads give clear errors."""

import json
import os
import re
import shutil
import signal
import struct
import subprocess
import time
import xml.etree.ElementTree as ET

from cases_api import said
from htlib import case, check, children, compile_c, eq, expect, fail, skip

WL_FNS = ["malloc", "calloc", "realloc", "reallocarray", "free", "memalign", "posix_memalign",
          "aligned_alloc", "valloc", "pvalloc", "mallopt", "malloc_trim", "mmap", "munmap",
          "mremap"]
ALLOCATORS = ["jemalloc", "tcmalloc", "mimalloc"]
# glibc, for the ring: every free goes back to the one arena at once, so the
# next malloc of the size, in any thread, gets the same address
RING_TUNABLES = "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1"


def jrun(t, args, rc=0, timeout=120):
    r = t.tool(args, timeout=timeout)
    if r.rc != rc:
        fail("expected exit %d from %s" % (rc, r.describe()))
    try:
        return json.loads(r.stdout), r
    except ValueError as e:
        fail("no JSON from %s (%s)" % (r.describe(), e))


def convert(t, wl, trace, extra=()):
    j, r = jrun(t, ["convert", "--json"] + list(extra) + [wl, trace])
    return j


def replay(t, wl, extra=(), rc=0, timeout=120):
    j, r = jrun(t, ["replay", "--json"] + list(extra) + [wl], rc=rc, timeout=timeout)
    return j


def traced_calls(s):
    return {f: s["calls"].get(f, 0) for f in WL_FNS}


def hist_bucket(v):
    """engine.c's bucket(): 16 sub-buckets per power of two from 32 on."""
    if v < 32:
        return v
    e = v.bit_length() - 1
    return 32 + (e - 5) * 16 + ((v >> (e - 4)) & 15)


def hist_value(b):
    """engine.c's bucket_value(): the middle of bucket b."""
    if b < 32:
        return b
    e, sub = (b - 32) // 16 + 5, (b - 32) % 16
    return ((16 + sub) << (e - 4)) + (1 << (e - 4)) // 2


def hist_low(b):
    """The lowest value of bucket b."""
    if b < 32:
        return b
    e, sub = (b - 32) // 16 + 5, (b - 32) % 16
    return (16 + sub) << (e - 4)


def check_stats(t, j, what):
    """The per-function statistics agree with each other: each percentile
    is the middle of a bucket of the histogram, in order, and the average
    is at least what the percentiles force (half the calls took at least
    the p50 bucket's low edge, 1% the p99's).  The engine counts short
    calls in an exact histogram that it folds into the buckets and the
    cycle sum at the end: calls or cycles lost there show here."""
    for f in WL_FNS:
        if not j["calls"][f]:
            continue
        p = [j[k][f] for k in ("p50_cycles", "p99_cycles", "p999_cycles")]
        avg = j["avg_cycles"][f]
        with t.soft():
            check(p[0] <= p[1] <= p[2], "%s: %s percentiles out of order: %s" % (what, f, p))
            for v in p:
                check(hist_value(hist_bucket(v)) == v,
                      "%s: %s percentile %d is not a bucket's middle" % (what, f, v))
            low = max(0.5 * hist_low(hist_bucket(p[0])), 0.01 * hist_low(hist_bucket(p[1])))
            check(avg >= low * (1 - 1e-6),
                  "%s: %s avg_cycles %.1f below what its percentiles force (%.1f; p50/p99 %s)"
                  % (what, f, avg, low, p[:2]))


def check_replay(t, s, j, what, times=1):
    """replay --json j against stats s: the same calls, the same peak."""
    want = {f: n * times for f, n in traced_calls(s).items()}
    with t.soft():
        eq({f: j["calls"][f] for f in WL_FNS}, want, "%s: calls" % what)
    with t.soft():
        eq(j["max_ideal_rss_bytes"], s["peak_live_bytes"], "%s: max_ideal_rss_bytes" % what)
    with t.soft():
        eq(j["slot_errors"], 0, "%s: slot_errors" % what)
    for k in ("avg_cycles", "wall_usec", "max_rss_kb", "cycles", "total_call_cycles"):
        check(k in j, "%s: no %s in replay --json" % (what, k))
    with t.soft():
        for f in WL_FNS:
            if j["calls"][f]:
                check(j["avg_cycles"][f] > 0, "%s: avg_cycles.%s is 0" % (what, f))
    check_stats(t, j, what)


def record_default(t, trace, argv, env=None, timeout=120):
    """record with the default options: the merged order of blocks handed
    between threads is exact (docs/FORMAT.md, "Ordering guarantee"), so the
    workload is too."""
    return t.run([t.heaptrail, "record", "-o", trace, "--"] + argv,
                 env=env, timeout=timeout, check_rc=0)


def prodcons(t, n=3000):
    trace = t.path("pc.ht")
    r = record_default(t, trace, [t.prog("prodcons"), str(n)])
    s = t.stats(trace)
    wl = t.path("pc.wl")
    c = convert(t, wl, trace)
    return trace, wl, s, c, said(r)


def huge_trace(t):
    """The trace of tests/progs/huge (a 1 GiB malloc) for replays under a
    512 MiB address-space limit (prlimit); skips without prlimit and in
    an ASan build (its shadow memory does not fit the limit)."""
    with open(t.heaptrail, "rb") as f:
        if b"__asan_init" in f.read():
            skip("an ASan build: its shadow memory does not fit in RLIMIT_AS")
    if not shutil.which("prlimit"):
        skip("prlimit is not installed (util-linux, scripts/deps.sh test)")
    trace = t.path("huge.ht")
    record_default(t, trace, [t.prog("huge")])
    return trace


@case(timeout=180, labels=("analyzers",))
def test_replay_prodcons(t):
    """Two producers hand blocks made by every allocation function to a
    consumer that reallocs and frees them: the workload replays with
    exactly the traced calls per function and the traced peak as ideal
    RSS, threaded and --threads-as-one, with no slot ever found in the
    wrong state (under ASan in the sanitizer build)."""
    trace, wl, s, c, prog = prodcons(t)
    n = 3000
    # the program's own calls, plus glibc's: a DTV calloc per thread and
    # two free(NULL) at each thread's exit
    with t.soft():
        expect(s, threads=4, unknown_frees=0)
        for f in ("memalign", "posix_memalign", "aligned_alloc", "valloc", "realloc", "malloc"):
            eq(s["calls"][f], prog[f], "stats calls.%s vs the program's count" % f)
        eq(s["calls"]["calloc"], prog["calloc"] + 3, "stats calls.calloc")
        eq(s["calls"]["free"], prog["free"] + 6, "stats calls.free")
        eq(prog["malloc"] + prog["calloc"] + prog["memalign"] + prog["posix_memalign"] +
           prog["aligned_alloc"] + prog["valloc"], 2 * n, "blocks the producers made")
    with t.soft():
        eq({f: c["calls"].get(f, 0) for f in WL_FNS}, traced_calls(s), "convert: calls")
        expect(c, threads=4, spawns=3, skipped_frees=0, skipped_reallocs=0, inversions=0,
               max_ideal_rss_bytes=s["peak_live_bytes"])
        # (a wait covers every earlier op of the thread it names: the waits
        # of the live bound, docs/WORKLOAD.md "Waits", cover several
        # hand-offs each, the more the longer each thread ran alone: 4,120
        # for 6,000 in one run, 2,879 in a sanitizer run on a loaded
        # machine; half of n stays far from none, which the replay's slot
        # checks below would also catch)
        check(c["waits"] >= n // 2, "only %d waits for %d hand-offs" % (c["waits"], 2 * n))
        # the slot table follows the live set, not the number of blocks
        # (new slots go to a thread 8 at a time, a cache line of the table,
        # and a slot another thread freed is reused once 256 ops old)
        check(c["slots"] <= s["peak_live_blocks"] + 8 * 4 + 256,
              "%d slots for a peak of %d live blocks" % (c["slots"], s["peak_live_blocks"]))
    j = replay(t, wl)
    check_replay(t, s, j, "replay")
    with t.soft():
        eq(j["threads"], 4, "threads")
        check(j["waits"] == c["waits"], "waits run %d, in the workload %d" % (j["waits"], c["waits"]))
    j1 = replay(t, wl, ["--threads-as-one"])
    check_replay(t, s, j1, "replay --threads-as-one")
    j3 = replay(t, wl, ["--repeat", "3", "--touch", "all"])
    check_replay(t, s, j3, "replay --repeat 3", times=3)
    check_spans(t, j, 3, "replay")
    check_spans(t, j1, 0, "replay --threads-as-one")
    check_spans(t, j3, 9, "replay --repeat 3")


def check_spans(t, j, spawns, what):
    """The run's span (cycles) ends at the last op of the thread that ends
    last, read by that thread: every thread's time from its first op to its
    last (busy, blocked in waits and in SPAWNs) fits in it, once per thread.
    The workers are created before the run and released by their SPAWN ops
    (each lent its releaser's CPU at most once), none with --threads-as-one."""
    with t.soft():
        spent = j["busy_cycles"] + j["wait_cycles"] + j["spawn_wait_cycles"]
        check(spent <= j["cycles"] * (j["threads"] if spawns else 1),
              "%s: the threads' time %d exceeds the run's %d cycles x %d threads"
              % (what, spent, j["cycles"], j["threads"]))
        check(0 <= j["spawn_lends"] <= spawns,
              "%s: %d threads lent a CPU for %d spawns" % (what, j["spawn_lends"], spawns))
        if not spawns:
            eq(j["spawn_wait_cycles"], 0, "%s: spawn_wait_cycles" % what)


@case(timeout=180, labels=("analyzers",))
def test_replay_ring_chain(t):
    """One address passed along a ring of three threads (each block freed
    by another thread than its allocator, its address reused by the third)
    for 6000 steps: recorded with the default options, the merged order is
    exact at any depth; the workload has a wait before every free and
    replays all calls with no slot ever in the wrong state.  The same with
    the sparsest clock sampling: the order does not depend on it."""
    steps = 6000
    trace = t.path("ring.ht")
    env = {"GLIBC_TUNABLES": RING_TUNABLES}
    record_default(t, trace, [t.prog("ring"), str(steps)], env=env)
    s = t.stats(trace)
    with t.soft():
        expect(s, unknown_frees=0, cross_thread_frees=steps // 2)
        eq(s["calls"]["malloc"], steps // 2, "mallocs")
    # the chain: consecutive blocks at one address, allocated by three
    # different threads in turn (A, C, B, A, ...)
    evs = [e for e in t.dump(trace, ["--kind", "malloc,free"]) if e.kind in ("malloc", "free")]
    owners = {}
    chain = 0
    longest = 0
    last_alloc_tid = {}
    for e in evs:
        if e.kind == "malloc":
            p = e.fields.get("ptr")
            prev = last_alloc_tid.get(p)
            chain = chain + 1 if prev is not None and prev != e.tid else 0
            longest = max(longest, chain)
            last_alloc_tid[p] = e.tid
            owners[p] = e.tid
    check(longest >= 100, "no chain of reuses across threads (longest %d): is the address "
          "reused? (tunables %s)" % (longest, RING_TUNABLES))
    wl = t.path("ring.wl")
    c = convert(t, wl, trace)
    with t.soft():
        expect(c, skipped_frees=0, inversions=0, max_ideal_rss_bytes=s["peak_live_bytes"])
        # every free waits for the malloc of another thread (reused slots
        # may add more, but a thread takes its own new slots first)
        check(c["waits"] >= steps // 2, "%d waits for %d frees" % (c["waits"], steps // 2))
        check(c["slots"] <= 8 * 4, "%d slots for one live block at a time" % c["slots"])
    j = replay(t, wl)
    check_replay(t, s, j, "replay")
    # the order does not depend on how often malloc/free read the clock:
    # with the sparsest sampling every hand-off is still dated by the
    # thread that receives the block
    sparse = t.path("ring-sparse.ht")
    t.run([t.heaptrail, "record", "--timestamp-every=65536", "-o", sparse, "--", t.prog("ring"),
           str(steps)], env=env, check_rc=0)
    ss = t.stats(sparse)
    c2 = convert(t, t.path("s.wl"), sparse)
    with t.soft():
        expect(ss, unknown_frees=0, address_reuse_while_live=0, peak_live_bytes=s["peak_live_bytes"])
        expect(c2, skipped_frees=0, inversions=0)
        check(ss["timestamps_taken"] >= steps, "%d of %d hand-offs dated with --timestamp-every=65536"
              % (ss["timestamps_taken"], steps))


@case(timeout=240, labels=("replay",), locks=("cpu",))
def test_replay_allocators(t):
    """The same workload under jemalloc, tcmalloc and mimalloc: malloc
    really comes from each library, and the calls are the traced ones."""
    trace, wl, s, c, prog = prodcons(t, 2000)
    for a in ALLOCATORS:
        j = replay(t, wl, ["--allocator", a])
        check_replay(t, s, j, "replay --allocator " + a)
        with t.soft():
            check(a in os.path.basename(j["allocator_library"]),
                  "--allocator %s: malloc came from %s" % (a, j["allocator_library"]))
    j = replay(t, wl, ["--tunable", "glibc.malloc.arena_max=1", "--mallopt",
                       "M_MMAP_THRESHOLD=64K,M_TRIM_THRESHOLD=128K", "--trim-interval", "500"])
    check_replay(t, s, j, "replay --tunable --mallopt")
    with t.soft():
        eq(j["glibc_tunables"], "glibc.malloc.arena_max=1", "GLIBC_TUNABLES in the replay")
        check("libc.so" in j["allocator_library"], "glibc replay: malloc from %s" % j["allocator_library"])
        check(j["trim_calls"] > 0, "--trim-interval made no malloc_trim call")
    # a tunable this glibc does not have (a typo), or no NAME=VALUE: a
    # usage error, before anything runs (glibc ignored the typo, and the
    # replay reported it as applied)
    for bad, said in (("glibc.malloc.arena_mx=1", "this glibc has no tunable glibc.malloc.arena_mx"),
                      ("bogus", "expected NAME=VALUE"),
                      ("glibc.malloc.arena_max=1:glibc.malloc.tcache_cnt=0",
                       "this glibc has no tunable glibc.malloc.tcache_cnt")):
        r = t.tool(["replay", "--tunable", bad, wl])
        with t.soft():
            eq((r.rc, r.stdout), (2, ""), "--tunable %s:\n%s" % (bad, r.describe()))
            check(said in r.stderr, "--tunable %s: the line:\n%s" % (bad, r.stderr))
    # every item refused is named, in one line (it stopped at the first)
    r = t.tool(["replay", "--tunable", "glibc.malloc.arena_mx=1:glibc.malloc.mmap_threshold=64K:"
                "glibc.malloc.tcache_cnt=0", wl])
    with t.soft():
        eq(r.rc, 2, "three bad items:\n" + r.describe())
        for said in ("no tunable glibc.malloc.arena_mx ", "mmap_threshold=64K is not a number",
                     "no tunable glibc.malloc.tcache_cnt "):
            check(said in r.stderr, "three bad items: %r not said:\n%s" % (said, r.stderr))
        eq(r.stderr.count("\n"), 1, "one line:\n" + r.stderr)
    # a library that is no allocator
    lib = t.preload  # libheaptrail.so: defines malloc, but is a tracer
    r = t.tool(["replay", "--allocator", "/etc/hostname", wl])
    with t.soft():
        check(r.rc != 0 and "/etc/hostname" in r.stderr, "a non-library as allocator:\n" + r.describe())
    r = t.tool(["replay", "--allocator", "nosuchalloc", wl])
    with t.soft():
        check(r.rc == 2 and "unknown allocator 'nosuchalloc'" in r.stderr, r.describe())
    del lib


@case(timeout=120, labels=("analyzers",))
def test_replay_trim_interval(t):
    """--trim-interval N calls malloc_trim after every N-th op of a thread,
    exactly: ops // N of them, also with --repeat, --threads-as-one, and an
    interval longer than the workload (none)."""
    trace = t.path("loop.ht")
    t.traced(trace, [t.prog("randloop"), "3000"])
    s = t.stats(trace)
    wl = t.path("loop.wl")
    convert(t, wl, trace)
    j = replay(t, wl, ["--touch", "none"])
    ops = j["ops"]
    eq(j["trim_calls"], 0, "no --trim-interval: malloc_trim calls")
    check_replay(t, s, j, "replay")
    for n, extra, times in ((7, [], 1), (500, ["--repeat", "3"], 3),
                            (64, ["--threads-as-one"], 1), (ops + 1, [], 1)):
        j = replay(t, wl, ["--trim-interval", str(n)] + extra)
        with t.soft():
            eq(j["trim_calls"], (ops // n) * times,
               "--trim-interval %d %s: malloc_trim calls" % (n, " ".join(extra)))
            check_replay(t, s, j, "replay --trim-interval %d" % n, times=times)


@case(timeout=120, labels=("replay",))
def test_replay_slot_error(t):
    """An allocation that succeeded in the trace fails in the replay (huge's
    malloc of 1 GiB under a 512 MiB address-space limit): the free of its
    slot then finds the slot empty, which replay counts (slot_errors 1, the
    warning line) and survives, with every call still made and timed, in
    each --touch instance of the engine.  Not under ASan: its shadow memory
    does not fit in the limit."""
    trace = huge_trace(t)
    s = t.stats(trace)
    wl = t.path("huge.wl")
    convert(t, wl, trace)
    limit = ["prlimit", "--as=%d" % (512 << 20), "--"]
    want = {f: n for f, n in traced_calls(s).items()}
    for touch in ("none", "page", "all"):
        r = t.run(limit + [t.heaptrail, "replay", "--json", "--touch", touch, wl], check_rc=0)
        j = json.loads(r.stdout)
        with t.soft():
            eq({f: j["calls"][f] for f in WL_FNS}, want, "--touch %s: calls" % touch)
            eq(j["slot_errors"], 1, "--touch %s: slot_errors" % touch)
    r = t.run(limit + [t.heaptrail, "replay", wl], check_rc=0)
    check("warning: 1 ops found their slot in the wrong state" in r.stdout,
          "no slot warning in the text output:\n%s" % r.stdout)
    # without the limit the 1 GiB block is there and nothing is wrong
    j = replay(t, wl, ["--touch", "none"])
    eq(j["slot_errors"], 0, "without the limit: slot_errors")


@case(timeout=120, labels=("analyzers",))
def test_replay_text_and_aliases(t):
    """trace2wl OUT IN and trace_run WL behave like the glibc tools: the
    summary lines in their order and wording, numbers with commas."""
    trace = t.path("pc.ht")
    record_default(t, trace, [t.prog("prodcons"), "500"])
    s = t.stats(trace)
    wl = t.path("pc.wl")
    t.run([os.path.join(t.build_dir, "trace2wl"), wl, trace], check_rc=0)
    r = t.run([os.path.join(t.build_dir, "trace_run"), wl], check_rc=0)
    lines = r.stdout.splitlines()
    pats = [r"^[\d,]+ cycles$", r"^[\d,]+ usec wall time$", r"^[\d,]+ usec across 4 threads$",
            r"^[\d,]+ Kb Max RSS \([\d,]+ -> [\d,]+\)$", r"^[\d,]+ Kb Max Ideal RSS$", r"^$",
            r"^Avg malloc time: +[\d,]+ in +[\d,]+ calls$",
            r"^Avg calloc time: +[\d,]+ in +[\d,]+ calls$",
            r"^Avg realloc time: +[\d,]+ in +[\d,]+ calls$",
            r"^Avg free time: +[\d,]+ in +[\d,]+ calls$", r"^Total call time: [\d,]+ cycles$"]
    for i, p in enumerate(pats):
        check(i < len(lines) and re.match(p, lines[i]),
              "line %d of trace_run: %r does not match %r" % (i + 1, lines[i] if i < len(lines) else None, p))
    calls = {m.group(1): int(m.group(2).replace(",", "")) for m in
             (re.match(r"^Avg (\w+) time: +[\d,]+ in +([\d,]+) calls$", l) for l in lines) if m}
    eq(calls, {f: s["calls"][f] for f in ("malloc", "calloc", "realloc", "free")}, "trace_run calls")
    ideal = int(re.match(r"^([\d,]+)", lines[4]).group(1).replace(",", ""))
    eq(ideal, (s["peak_live_bytes"] + 1023) // 1024, "Kb Max Ideal RSS")
    check(any(l.startswith("memalign ") for l in lines), "no percentile line for memalign")


@case(timeout=120, labels=("analyzers",))
def test_convert_mmap(t):
    """convert --mmap: the program's own anonymous maps are replayed too
    (api_all maps, remaps and unmaps)."""
    trace = t.path("api.ht")
    t.record(trace, [t.prog("api_all")])
    s = t.stats(trace)
    plain = convert(t, t.path("a.wl"), trace)
    eq(plain["calls"].get("mmap", 0), 0, "mmaps without --mmap")
    wl = t.path("m.wl")
    c = convert(t, wl, trace, ["--mmap"])
    with t.soft():
        check(c["calls"].get("mmap", 0) >= 2, "mmaps converted: %r" % c["calls"])
        check(c["calls"].get("munmap", 0) >= 2, "munmaps converted: %r" % c["calls"])
        eq(c["calls"].get("mremap", 0), 1, "mremaps converted")
        eq(c["failed_maps"], 2, "failed mmap family calls")
    j = replay(t, wl)
    with t.soft():
        eq({f: j["calls"][f] for f in WL_FNS}, {f: c["calls"].get(f, 0) for f in WL_FNS},
           "replayed calls")
        eq(j["slot_errors"], 0, "slot_errors")
        eq(j["max_ideal_rss_bytes"], s["peak_live_bytes"], "ideal")


def wl_bytes(t):
    trace = t.path("pc.ht")
    record_default(t, trace, [t.prog("prodcons"), "200"])
    wl = t.path("good.wl")
    convert(t, wl, trace)
    with open(wl, "rb") as f:
        return trace, wl, f.read()


def bad(t, args, rc, *needles):
    r = t.tool(args)
    with t.soft():
        eq(r.rc, rc, "exit status of heaptrail %s" % " ".join(args))
        errs = [l for l in r.stderr.splitlines() if l.startswith("heaptrail: error:")]
        eq(len(errs), 1, "one error line from heaptrail %s:\n%s" % (" ".join(args), r.stderr))
        for n in needles:
            check(n in r.stderr, "%r not in the error of heaptrail %s:\n%s" % (n, " ".join(args), r.stderr))
        check(r.stdout == "", "output despite the error: %r" % r.stdout[:200])
    return r


@case(timeout=120, labels=("analyzers",))
def test_replay_bad_input(t):
    """Missing, empty, truncated, corrupted, newer-version workloads, a
    trace given to replay, a directory: one error line naming the file and
    the problem, exit 1 (2 for usage); convert leaves no file behind."""
    trace, wl, data = wl_bytes(t)

    def write(name, b):
        p = t.path(name)
        with open(p, "wb") as f:
            f.write(b)
        return p

    bad(t, ["replay", t.path("nope.wl")], 1, "nope.wl", "No such file")
    bad(t, ["replay", write("empty.wl", b"")], 1, "empty.wl", "empty")
    bad(t, ["replay", trace], 1, "pc.ht", "trace, not a workload", "convert")
    bad(t, ["replay", t.dir], 1, "directory")
    bad(t, ["replay", write("junk.wl", b"hello world, not a workload" * 10)], 1, "bad magic")
    for cut in (20, 100, 200, len(data) // 2, len(data) - 1):
        bad(t, ["replay", write("cut%d.wl" % cut, data[:cut])], 1, "cut%d.wl" % cut)
    newer = bytearray(data)
    struct.pack_into("<I", newer, 8, 2)
    bad(t, ["replay", write("newer.wl", bytes(newer))], 1, "version 2")
    # an op byte in the first block changed to something no op is
    ops = bytearray(data)
    ops[128 + 16] = 0x7f
    bad(t, ["replay", write("badop.wl", bytes(ops))], 1, "badop.wl", "malformed op")
    # one bit of the header's ideal peak flipped (it replayed with an
    # ideal of 17 TB): more than all the ops ask for
    ideal = bytearray(data)
    ideal[48 + 5] ^= 0x10
    bad(t, ["replay", write("ideal.wl", bytes(ideal))], 1, "ideal.wl", "ideal peak")
    bad(t, ["replay"], 2, "no workload given")
    bad(t, ["replay", "--touch", "some", wl], 2, "--touch")
    bad(t, ["replay", "--mallopt", "M_BOGUS=1", wl], 2, "M_BOGUS")
    bad(t, ["compare", "-a", "glibc,nosuch", wl], 2, "nosuch")
    bad(t, ["compare", write("empty2.wl", b"")], 1, "empty2.wl")
    # convert
    bad(t, ["convert", t.path("x.wl")], 2, "need an output workload and a trace")
    bad(t, ["convert", t.path("x.wl"), t.path("missing.ht")], 1, "missing.ht")
    bad(t, ["convert", t.path("x.wl"), wl], 1, "good.wl")
    bad(t, ["convert", trace, wl], 2, "is a trace; the workload comes first")
    bad(t, ["convert", t.path("nodir", "x.wl"), trace], 1,
        "cannot write %s: %s: No such file or directory" % (t.path("nodir", "x.wl"),
                                                            t.path("nodir")))
    with open(trace, "rb") as f:
        tdata = f.read()
    bad(t, ["convert", t.path("t.wl"), write("trunc.ht", tdata[:len(tdata) // 2])], 1, "trunc.ht")
    leftovers = [f for f in os.listdir(t.dir) if f.startswith(("x.wl", "t.wl"))]
    eq(leftovers, [], "files convert left behind")
    sampled = t.path("sampled.ht")
    t.run([t.heaptrail, "record", "--sample-bytes=4096", "-o", sampled, "--",
           t.prog("prodcons"), "50"], check_rc=0)
    bad(t, ["convert", t.path("sm.wl"), sampled], 1, "sampled trace", "--sample-bytes")
    # the good one still loads
    replay(t, wl)


@case(timeout=240, labels=("replay",), locks=("cpu",))
def test_compare(t):
    """compare: interleaved runs of each allocator, one table, JSON with the
    replay fields per allocator, an SVG with one RSS curve per allocator."""
    trace, wl, s, c, prog = prodcons(t, 1500)
    svg = t.path("chart.svg")
    j, r = jrun(t, ["compare", "--json", "-a", "glibc,jemalloc", "-t",
                    "glibc.malloc.arena_max=1", "-n", "2", "-o", svg, wl], timeout=200)
    res = j["results"]
    eq([x["allocator"] for x in res], ["glibc", "jemalloc", "glibc"], "allocators")
    with t.soft():
        eq(res[2]["tunables"], "glibc.malloc.arena_max=1", "tunables of the third")
    for x in res:
        with t.soft():
            eq(x["runs"], 2, "runs")
            eq({f: x["calls"][f] for f in WL_FNS}, traced_calls(s), "%s: calls" % x["label"])
            eq(x["max_ideal_rss_bytes"], s["peak_live_bytes"], "ideal")
            for k in ("wall_usec", "max_rss_kb", "avg_cycles", "rss_ideal_ratio"):
                check(k in x, "no %s" % k)
            check(x["wall_usec_min"] <= x["wall_usec"] <= x["wall_usec_max"], "spread")
    check("jemalloc" in res[1]["allocator_library"], "jemalloc run used %s" % res[1]["allocator_library"])
    root = ET.parse(svg).getroot()
    lines = [e for e in root.iter() if e.tag.endswith("polyline")]
    eq(len(lines), 3, "RSS curves in the chart")
    r = t.tool(["compare", "-a", "glibc,mimalloc", "-n", "1", wl], timeout=200)
    eq(r.rc, 0, "compare exit status:\n" + r.describe())
    check(re.search(r"^glibc\s", r.stdout, re.M) and re.search(r"^mimalloc\s", r.stdout, re.M),
          "table rows:\n" + r.stdout)
    check(os.path.exists(t.path("pc-compare.svg")), "default chart pc-compare.svg not written")


def real_roundtrip(t, name, argv, stdin=None, timeout=180, threads=1):
    trace = t.path(name + ".ht")
    t.run([t.heaptrail, "record", "-o", trace, "--"] + argv, stdin=stdin,
          timeout=timeout, check_rc=0)
    s = t.stats(trace)
    check(s["threads"] >= threads, "%s: %d threads" % (name, s["threads"]))
    wl = t.path(name + ".wl")
    r = t.tool(["convert", "--json", wl, trace], timeout=timeout)
    eq(r.rc, 0, "convert exit status:\n" + r.describe())
    c = json.loads(r.stdout)
    for a in ["glibc"] + ALLOCATORS:
        j = replay(t, wl, ["--allocator", a], timeout=timeout)
        with t.soft():
            eq({f: j["calls"][f] for f in WL_FNS}, {f: c["calls"].get(f, 0) for f in WL_FNS},
               "%s under %s: calls" % (name, a))
            eq(j["slot_errors"], 0, "%s under %s: slot_errors" % (name, a))
            eq(j["max_ideal_rss_bytes"], c["max_ideal_rss_bytes"], "ideal")
    return s, c


@case(timeout=300, labels=("real", "replay"), locks=("cpu",))
def test_replay_real_sqlite3(t):
    """sqlite3 on a script: recorded, converted, replayed under the four
    allocators with the traced calls."""
    from cases_real import SQL
    sqlite = "/usr/bin/sqlite3"
    if not os.path.exists(sqlite):
        fail("sqlite3 is not installed (scripts/deps.sh test installs it)")
    s, c = real_roundtrip(t, "sqlite", [sqlite, t.path("db.sqlite")], stdin=SQL.encode())
    with t.soft():
        eq({f: c["calls"].get(f, 0) for f in WL_FNS}, traced_calls(s), "convert: calls")
        eq(c["skipped_frees"], 0, "skipped frees")


@case(timeout=300, labels=("real", "replay"), locks=("cpu",))
def test_replay_real_xz_threads(t):
    """xz -T2 compressing 24 MB: a multi-threaded Debian program, recorded,
    converted, replayed under the four allocators."""
    data = t.path("input.bin")
    with open(data, "wb") as f:
        for i in range(24 * 1024):
            f.write((b"%08d heaptrail replay " % i) * 32 + os.urandom(256))
    s, c = real_roundtrip(t, "xz", ["/usr/bin/xz", "-T2", "-k", "-f", "-3", data], threads=3)
    with t.soft():
        check(c["threads"] >= 3, "xz: %d threads in the workload" % c["threads"])
        eq(c["skipped_frees"], 0, "xz: skipped frees")


# ---- workloads written here, op by op (docs/WORKLOAD.md) ----------------

OP = {"malloc": 1, "free": 5, "aligned_alloc": 8, "pvalloc": 10, "wait": 16, "spawn": 17}


def leb128(v):
    out = bytearray()
    while True:
        b, v = v & 0x7f, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def write_workload(path, streams, nslots, ideal=0):
    """A version 1 workload: streams[i] is thread i's ops as tuples
    (name, args...), slot arguments given as slot + 1.  The loader checks
    every rule (a workload it refuses fails the test loudly)."""
    data = [b"".join(bytes([OP[o[0]]]) + b"".join(leb128(a) for a in o[1:]) for o in s)
            for s in streams]
    ops = b"".join(struct.pack("<IIII", i, 0, len(d), 0) + d for i, d in enumerate(data))
    threads = b"".join(struct.pack("<IIQQQ", 1000 + i, 0, len(s), len(d), 0)
                       for i, (s, d) in enumerate(zip(streams, data)))
    calls = [0] * len(WL_FNS)
    for s in streams:
        for o in s:
            if o[0] in WL_FNS:
                calls[WL_FNS.index(o[0])] += 1
    callsb = struct.pack("<15Q", *calls)
    src = b"trace=written by the test\n"
    secs, off = [], 128
    for b in (ops, threads, callsb, src):
        secs += [off, len(b)]
        off += len(b)
    hdr = b"HTWLOAD\n" + struct.pack("<IIQII", 1, 128, 0, len(streams), 0)
    hdr += struct.pack("<QQQQ", nslots, sum(len(s) for s in streams), ideal, 0)
    hdr += struct.pack("<8Q", *secs)
    with open(path, "wb") as f:
        f.write(hdr + ops + threads + callsb + src)
    return path


def fan_workload(path, n, consumers):
    """Thread 0 starts the consumers and mallocs n blocks; consumer c frees
    blocks c-1, c-1+consumers, ..., each after waiting for its malloc: every
    consumer waits for thread 0, at counts interleaved with the others'."""
    k = consumers
    t0 = [("spawn", c) for c in range(1, k + 1)] + [("malloc", i + 1, 16) for i in range(n)]
    streams = [t0]
    for c in range(1, k + 1):
        s = []
        for i in range(c - 1, n, k):
            s += [("wait", 0, k + i + 1), ("free", i + 1)]
        streams.append(s)
    return write_workload(path, streams, n, 16 * n)


def cpu_seconds(t, argv, timeout=120):
    """Runs argv; its exit status and the user + system CPU time it took
    (wait4: this child's own, whatever else runs on the machine)."""
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env=t.base_env(), cwd=t.dir)
    end = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > end:
            p.kill()
            p.wait()
            fail("%s: did not finish within %ss" % (" ".join(argv), timeout))
        time.sleep(0.01)
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode("utf-8", "replace")
    p.stderr.close()
    t.note("%s: exit %d, %.2fs CPU\n%s" % (" ".join(argv), p.returncode, ru.ru_utime + ru.ru_stime,
                                           err))
    return p.returncode, ru.ru_utime + ru.ru_stime


@case(timeout=300, labels=("replay",))
def test_replay_fan_in_setup(t):
    """replay's set-up sorts, per thread, the counts other threads wait
    for.  One producer whose 400,000 blocks 8 consumers free (each waits
    for thread 0 at counts interleaved with the other seven's) costs about
    the same CPU as with one consumer, whose counts come sorted: the
    insertion sort it replaced took ~11 s of CPU here for 0.1 s with one
    consumer.  Compared with the one-consumer run of the same size rather
    than timed, so that a slow or busy machine slows both alike (CPU time,
    from wait4, is not the wall clock a loaded machine stretches); the
    bound, 4 times plus 1 s, is far from both."""
    n = 400000
    one = fan_workload(t.path("fan1.wl"), n, 1)
    eight = fan_workload(t.path("fan8.wl"), n, 8)
    for wl in (one, eight):  # the calls, the slots: the workload is right
        j = replay(t, wl, ["--threads-as-one", "--touch", "none"], timeout=200)
        with t.soft():
            eq((j["calls"]["malloc"], j["calls"]["free"], j["slot_errors"]), (n, n, 0),
               "%s: malloc, free, slot_errors" % os.path.basename(wl))
    rc1, cpu1 = cpu_seconds(t, [t.heaptrail, "replay", "--threads-as-one", "--touch", "none", one])
    rc8, cpu8 = cpu_seconds(t, [t.heaptrail, "replay", "--threads-as-one", "--touch", "none",
                                eight], timeout=100)
    eq((rc1, rc8), (0, 0), "exit statuses")
    check(cpu8 <= 4 * cpu1 + 1.0,
          "8 consumers: %.2f s of CPU, 1 consumer: %.2f s: the set-up is not O(n log n)"
          % (cpu8, cpu1))


@case(timeout=120, labels=("replay",))
def test_replay_max_rss_covers_samples(t):
    """Max RSS is the process's peak resident set, read as VmHWM from
    /proc/self/status: never below an RSS sample of the same run.
    tests/progs/churn 300 (300 threads one after the other): ru_maxrss,
    read before, was 150 to 530 KiB below the sampled peak in every run on
    Linux 6.18 (its per-CPU counters, which getrusage reads approximately)."""
    trace = t.path("churn.ht")
    record_default(t, trace, [t.prog("churn"), "300"])
    wl = t.path("churn.wl")
    convert(t, wl, trace)
    for i in range(5):
        j = replay(t, wl, ["--rss-interval", "1ms"])
        with t.soft():
            check(j["max_rss_kb"] >= j["rss_peak_kb"],
                  "run %d: max_rss_kb %d below the sampled peak rss_peak_kb %d"
                  % (i + 1, j["max_rss_kb"], j["rss_peak_kb"]))
            check(j["max_rss_start_kb"] <= j["max_rss_kb"], "run %d: start above the end" % (i + 1))


@case(timeout=60, labels=("analyzers",))
def test_replay_rss_interval_zero(t):
    """--rss-interval 0 is a usage error (exit 2, nothing run) in replay and
    compare; before, replay took it and sampled every 10 ms.  A long one
    (1h) does not keep replay or compare waiting after the run."""
    wl = write_workload(t.path("one.wl"), [[("malloc", 1, 100), ("free", 1)]], 1, 100)
    for args in (["replay", "--rss-interval", "0", wl],
                 ["compare", "-n", "1", "--rss-interval", "0", "-o", t.path("c.svg"), wl]):
        bad(t, args, 2, "--rss-interval", "'0' is not a duration above 0")
    check(not os.path.exists(t.path("c.svg")), "compare wrote its chart")
    j = replay(t, wl, ["--rss-interval", "1ms"])
    eq(j["rss"]["interval_us"], 1000, "--rss-interval 1ms")
    # a long interval ends with the run: the sampler slept to its next
    # sample, and replay waited for it, an hour with 1h (probe R; the 20 s
    # bound is no timing: the run itself takes milliseconds)
    for args in (["replay", "--rss-interval", "1h", wl],
                 ["compare", "-n", "1", "--rss-interval", "1h", "-o", t.path("c.svg"), wl]):
        r = t.tool(args, timeout=20)
        eq(r.rc, 0, " ".join(args[:-1]) + ":\n" + r.describe())


@case(timeout=120, labels=("replay",))
def test_replay_function_missing_from_allocator(t):
    """jemalloc has no pvalloc: a workload's pvalloc would come from glibc,
    from glibc's heap, and its free from jemalloc, which crashed the replay
    (signal 11, no word).  replay checks every heap function the workload
    calls against the allocator and stops with one line naming it, exit 1;
    allocators that have pvalloc (tcmalloc, mimalloc) and glibc replay it."""
    wl = write_workload(t.path("pv.wl"), [[("pvalloc", 1, 1000), ("free", 1)] * 5], 1, 1000)
    if find_lib("jemalloc") is None:
        skip("jemalloc is not installed (libjemalloc2)")
    r = bad(t, ["replay", "-a", "jemalloc", wl], 1, "the workload calls pvalloc (5 times)",
            "which jemalloc", "does not define")
    check("libjemalloc" in r.stderr, "the library not named:\n" + r.stderr)
    for a in ["glibc"] + [a for a in ("tcmalloc", "mimalloc") if find_lib(a)]:
        j = replay(t, wl, ["-a", a])
        with t.soft():
            eq((j["calls"]["pvalloc"], j["calls"]["free"], j["slot_errors"]), (5, 5, 0),
               "under %s: pvalloc, free, slot_errors" % a)
    # compare: that variant fails, the others' figures stay
    j, r = jrun(t, ["compare", "--json", "-n", "2", "-a", "glibc,jemalloc", "-o",
                    t.path("pv.svg"), wl], rc=1)
    res = {x["label"]: x for x in j["results"]}
    with t.soft():
        eq((res["glibc"]["failed"], res["glibc"]["runs"]), (None, 2), "glibc: failed, runs")
        eq((res["jemalloc"]["failed"], res["jemalloc"]["runs"]), ("exit status 1", 0),
           "jemalloc: failed, runs")
        check("which jemalloc" in r.stderr and "pvalloc" in r.stderr,
              "replay's line not passed on:\n" + r.stderr)


def find_lib(name):
    for d in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"):
        for so in {"jemalloc": ["libjemalloc.so.2"], "tcmalloc": ["libtcmalloc_minimal.so.4"],
                   "mimalloc": ["libmimalloc.so.2"]}[name]:
            if os.path.exists(os.path.join(d, so)):
                return os.path.join(d, so)
    return None


def small_wl(t, name="pc.wl"):
    trace = t.path("pc.ht")
    record_default(t, trace, [t.prog("prodcons"), "200"])
    wl = t.path(name)
    convert(t, wl, trace)
    return wl


def unloadable_allocator(t):
    """A library that defines malloc and free (so that replay takes it for
    an allocator) but that the loader cannot preload: it needs a library
    that is gone.  Every replay under it fails in the run: the dynamic
    loader stops it (exit 127, "libgone.so: cannot open shared object
    file").  Built in DIR/deadlib."""
    d = t.path("deadlib")
    os.mkdir(d)
    gone = compile_c(t, "deadlib/libgone.so", "int gone_fn(void) { return 0; }\n",
                     ("-shared", "-fPIC"))
    lib = compile_c(t, "deadlib/libdead.so",
                    "#include <stddef.h>\nint gone_fn(void);\n"
                    "void *malloc(size_t n) { return (char *)0 + n + gone_fn(); }\n"
                    "void free(void *p) { (void)p; gone_fn(); }\n",
                    ("-shared", "-fPIC", "-Wl,--no-as-needed", "-L", d, "-lgone"))
    os.remove(gone)
    return lib


@case(timeout=120, labels=("replay",))
def test_compare_chart_path_checked_first(t):
    """compare's chart path is checked, and its file opened, before the
    first run: a directory, a symlink, a trace, a missing directory, an
    unwritable current directory (/proc) give one error and no run.  The
    variant here fails in every run (a library that cannot be preloaded),
    so a run made would say so; before, those paths failed after all the runs, and
    the default path in /proc with "No such file or directory" alone."""
    wl = small_wl(t)
    nomalloc = unloadable_allocator(t)
    trace = t.path("pc.ht")
    os.symlink(t.path("elsewhere.svg"), t.path("link.svg"))
    cases = [(t.dir, "it is a directory"), (t.path("link.svg"), "is a symbolic link"),
             (trace, "it is a heaptrail trace"),
             (t.path("nodir", "x.svg"), "No such file or directory")]
    for out, why in cases:
        r = bad(t, ["compare", "-n", "1", "-a", nomalloc, "-o", out, wl], 1,
                "compare: cannot write %s" % out, why)
        check("failed" not in r.stderr, "a run was made:\n" + r.stderr)
    r = t.run([t.heaptrail, "compare", "-n", "1", "-a", nomalloc, wl], cwd="/proc")
    with t.soft():
        eq(r.rc, 1, "in /proc: exit status")
        eq(r.heaptrail_lines(), ["heaptrail: error: compare: cannot write pc-compare.svg: No such "
                                 "file or directory (the chart's default path: choose another "
                                 "with -o FILE)"], "in /proc: the error")
    eq(sorted(os.listdir(t.dir)), sorted(["pc.ht", "pc.wl", "link.svg", "deadlib"]),
       "files left")


@case(timeout=180, labels=("replay",))
def test_compare_failed_variant_reported(t):
    """A variant whose runs fail is reported in the table (FAILED, why) and
    the JSON ("failed"), compare goes on with the others, prints their
    figures and the chart, and exits 1.  Its "run it alone" command is the
    same replay, with compare's options, in a shell's words: run by sh it
    fails the same way.  A chart that cannot be written (/dev/full, a
    character device written to itself, fails at the end) still leaves the
    table.  Before: the first failure discarded every run, the command
    dropped the options and did not quote the path, and a chart error
    printed nothing but itself."""
    wl0 = small_wl(t)
    wl = t.path("it's a.wl")
    os.rename(wl0, wl)
    nomalloc = unloadable_allocator(t)
    opts = ["--touch", "all", "--threads-as-one", "--repeat", "2", "--trim-interval", "5",
            "--rss-interval", "2ms"]
    r = t.tool(["compare", "-n", "2", "-a", "glibc," + nomalloc] + opts + ["-o", t.path("c.svg"),
                                                                          wl])
    with t.soft():
        eq(r.rc, 1, "exit status")
        rows = [l for l in r.stdout.splitlines() if l.startswith(("glibc ", nomalloc))]
        eq(len(rows), 2, "table rows:\n" + r.stdout)
        check(rows and re.match(r"glibc +[\d.]+ \(", rows[0]), "glibc's row:\n" + r.stdout)
        check(len(rows) > 1 and re.match(re.escape(nomalloc) + r" +FAILED \(exit status 127, run 1 of 2\)$",
                                         rows[1]), "the failed row:\n" + r.stdout)
        check("1 of 2 variants failed" in r.stdout, "no count of failures:\n" + r.stdout)
        check(os.path.exists(t.path("c.svg")), "no chart")
    m = re.search(r"run it alone to see why: (.*)$", r.stderr, re.M)
    check(m, "no command to run alone:\n" + r.stderr)
    cmd = m.group(1)
    for o in ("--touch=all", "--threads-as-one", "--repeat=2", "--trim-interval=5",
              "--rss-interval=2ms", "/it'\\''s a.wl'"):
        with t.soft():
            check(o in cmd, "%r not in the command: %s" % (o, cmd))
    check(cmd.startswith("heaptrail replay "), "the command: " + cmd)
    alone = t.run(["sh", "-c", t.heaptrail + cmd[len("heaptrail"):]])
    with t.soft():
        # (the dynamic loader's own status and message)
        eq(alone.rc, 127, "the command run alone: exit status")
        check("libgone.so" in alone.stderr, "run alone:\n" + alone.describe())
    j, r = jrun(t, ["compare", "--json", "-n", "1", "-a", "glibc," + nomalloc, "-o",
                    t.path("j.svg"), wl], rc=1)
    with t.soft():
        eq([(x["label"], x["failed"], x["runs"]) for x in j["results"]],
           [("glibc", None, 1), (nomalloc, "exit status 127", 0)], "results")
        eq(j["chart"], t.path("j.svg"), "chart")
    # the chart fails at the end: the table all the same, exit 1
    r = t.tool(["compare", "-n", "1", "-o", "/dev/full", wl])
    with t.soft():
        eq(r.rc, 1, "-o /dev/full: exit status")
        check(re.search(r"^glibc +[\d.]+ \(", r.stdout, re.M), "-o /dev/full: no table:\n" + r.stdout)
        check("RSS over time" not in r.stdout, "-o /dev/full: a chart said written")
        check("/dev/full" in r.stderr, "-o /dev/full: no error:\n" + r.stderr)
    j, r = jrun(t, ["compare", "--json", "-n", "1", "-o", "/dev/full", wl], rc=1)
    eq((j["chart"], j["results"][0]["runs"]), (None, 1), "-o /dev/full --json: chart, runs")


@case(timeout=120, labels=("replay",))
def test_compare_slot_errors_flagged(t):
    """A variant whose replay did not make the trace's calls (huge's 1 GiB
    malloc failing under a 512 MiB address-space limit: replay's
    slot_errors 1 and its warning) is flagged: '*' after its label and a
    line under the table, "slot_errors" in the JSON.  Before: a normal row,
    no slot_errors.  Not under ASan (its shadow does not fit the limit)."""
    trace = huge_trace(t)
    wl = t.path("huge.wl")
    convert(t, wl, trace)
    limit = ["prlimit", "--as=%d" % (512 << 20), "--"]
    r = t.run(limit + [t.heaptrail, "compare", "-n", "2", "--touch", "none", "-o",
                       t.path("h.svg"), wl])
    with t.soft():
        eq(r.rc, 0, "exit status:\n" + r.describe())
        check(re.search(r"^glibc \* +[\d.]+ \(", r.stdout, re.M), "no flagged row:\n" + r.stdout)
        check("* glibc did not replay the workload as traced: up to 1 ops per run found their "
              "slot in the wrong state" in r.stdout, "no line under the table:\n" + r.stdout)
    r = t.run(limit + [t.heaptrail, "compare", "--json", "-n", "1", "--touch", "none", "-o",
                       t.path("h.svg"), wl], check_rc=0)
    eq(json.loads(r.stdout)["results"][0].get("slot_errors"), 1, "JSON slot_errors")
    j, r = jrun(t, ["compare", "--json", "-n", "1", "--touch", "none", "-o", t.path("h.svg"), wl])
    eq(j["results"][0].get("slot_errors"), 0, "without the limit: slot_errors")


@case(timeout=120, labels=("replay",))
def test_compare_inherited_tunables(t):
    """GLIBC_TUNABLES in compare's environment reach every run (replay adds
    a set after them): the labels of glibc variants show them, the JSON's
    "tunables" is what each run had and "inherited_tunables" the
    environment's, the table says so.  Before: "glibc", tunables null."""
    wl = small_wl(t)
    env = {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}
    r = t.run([t.heaptrail, "compare", "--json", "-n", "1", "-t", "glibc.malloc.arena_max=1",
               "-o", t.path("c.svg"), wl], env=env, check_rc=0)
    j = json.loads(r.stdout)
    both = "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1"
    with t.soft():
        eq(j.get("inherited_tunables"), "glibc.malloc.tcache_count=0", "inherited_tunables")
        eq([(x["label"], x["tunables"]) for x in j["results"]],
           [("glibc glibc.malloc.tcache_count=0", "glibc.malloc.tcache_count=0"),
            ("glibc " + both, both)], "labels and tunables")
    r = t.run([t.heaptrail, "compare", "-n", "1", "-o", t.path("c.svg"), wl], env=env,
              check_rc=0)
    with t.soft():
        check(re.search(r"^glibc glibc\.malloc\.tcache_count=0 +[\d.]+ \(", r.stdout, re.M),
              "the row's label:\n" + r.stdout)
        check("every run had GLIBC_TUNABLES=glibc.malloc.tcache_count=0 from the environment"
              in r.stdout, "no word of the environment:\n" + r.stdout)
    j, r = jrun(t, ["compare", "--json", "-n", "1", "-o", t.path("c.svg"), wl])
    eq((j.get("inherited_tunables"), j["results"][0]["label"], j["results"][0]["tunables"]),
       (None, "glibc", None), "without GLIBC_TUNABLES")


@case(timeout=120, labels=("replay",), locks=("cpu",))
def test_compare_sigterm_ends_replay(t):
    """SIGTERM to compare ends its running replay too (PR_SET_PDEATHSIG in
    the child): before, the replay ran on under init to its end (here
    minutes: --repeat 1000000)."""
    wl = small_wl(t)
    p = subprocess.Popen([t.heaptrail, "compare", "-n", "1", "--repeat", "1000000", "-o",
                          t.path("c.svg"), wl], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=t.base_env(), cwd=t.dir)
    kids = []
    try:
        end = time.monotonic() + 30
        while not kids and time.monotonic() < end:
            kids = children(p.pid)
            time.sleep(0.02)
        check(kids, "no replay child within 30 s")
        time.sleep(0.3)  # (into the run)
        p.send_signal(signal.SIGTERM)
        eq(p.wait(timeout=30), -signal.SIGTERM, "compare's end")
        end = time.monotonic() + 10
        while time.monotonic() < end and any(os.path.exists("/proc/%d" % k) for k in kids):
            time.sleep(0.02)
        left = [k for k in kids if os.path.exists("/proc/%d/exe" % k)]
        eq(left, [], "replay children still running 10 s after compare ended")
    finally:
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass
        if p.poll() is None:
            p.kill()
            p.wait()
    eq([n for n in os.listdir(t.dir) if n.startswith("c.svg")], [], "chart files left")


@case(timeout=120, labels=("replay",))
def test_compare_bad_tunable_at_once(t):
    """A mistyped tunable in any -t set is a usage error before the first
    run (exit 2, one line naming it, nothing on stdout), as in replay -t;
    before, the glibc variant ran first and compare then failed with 1."""
    wl = small_wl(t)
    bad(t, ["compare", "-n", "1", "-a", "glibc", "-t", "glibc.malloc.arena_max=1;glibc.malloc.arena_mx=1",
            "-o", t.path("c.svg"), wl], 2, "this glibc has no tunable glibc.malloc.arena_mx")
    bad(t, ["compare", "-n", "1", "-t", "arena_max", "-o", t.path("c.svg"), wl], 2,
        "expected NAME=VALUE")
    check(not os.path.exists(t.path("c.svg")), "a chart written")


@case(timeout=120, labels=("analyzers",))
def test_convert_json_quiet(t):
    """convert --json -q prints the JSON (-q silences the warnings and the
    text summary); before it printed nothing.  The warnings of a trace
    whose order is not exact stay silenced."""
    trace = t.path("pc.ht")
    record_default(t, trace, [t.prog("prodcons"), "200"])
    r = t.tool(["convert", "--json", "-q", t.path("q.wl"), trace])
    eq(r.rc, 0, "exit status")
    check(r.stdout.startswith("{"), "convert --json -q printed no JSON: %r" % r.stdout)
    j = json.loads(r.stdout)
    eq((j["workload"], j["threads"]), (t.path("q.wl"), 4), "JSON of convert --json -q")
    eq(r.stderr, "", "stderr with -q")
    r = t.tool(["convert", "-q", t.path("q2.wl"), trace])
    eq((r.rc, r.stdout, r.stderr), (0, "", ""), "convert -q: status, stdout, stderr")


@case(timeout=120, labels=("analyzers",))
def test_convert_refuses_non_workload(t):
    """convert does not replace a file that is not a workload (a mistyped
    OUT.wl naming notes) unless --force: exit 2, one line, the file as it
    was.  A workload, an empty file or a new name are written; --force
    replaces the notes.  Before: the notes were replaced silently."""
    trace = t.path("pc.ht")
    record_default(t, trace, [t.prog("prodcons"), "100"])
    notes = t.path("notes.txt")
    with open(notes, "w") as f:
        f.write("my notes\n")
    bad(t, ["convert", notes, trace], 2, "notes.txt exists and is not a workload",
        "pass --force")
    with open(notes, "rb") as f:
        eq(f.read(), b"my notes\n", "the notes after convert")
    wl = t.path("a.wl")
    convert(t, wl, trace)
    convert(t, wl, trace)  # a workload is replaced
    empty = t.path("empty.wl")
    open(empty, "w").close()
    convert(t, empty, trace)
    c = convert(t, notes, trace, ["--force"])
    eq(c["threads"], 4, "convert --force")
    with open(notes, "rb") as f:
        eq(f.read(8), b"HTWLOAD\n", "the notes replaced by --force")


REALLOC_FAILS_C = r"""
#include <stdio.h>
#include <stdlib.h>
static void *volatile sink;
int main(void)
{
	void *q = malloc(100), *r;
	sink = q;
	r = realloc(q, 300u << 20); /* fails under the recording's address-space limit */
	sink = r;
	printf("%s\n", r ? "moved" : "failed");
	free(r ? r : q);
	return 0;
}
"""

GROW_C = r"""
#include <stdio.h>
#include <stdlib.h>
static void *volatile sink;
int main(void)
{
	void *p = NULL;
	for (int i = 1; i <= 40; i++) { /* to 10 MiB */
		p = realloc(p, (size_t)i * 262144);
		sink = p;
	}
	free(p);
	return 0;
}
"""

# glibc's allocator, but realloc above 1 MiB fails
FAIL_REALLOC_C = r"""
#define _GNU_SOURCE
#include <stddef.h>
extern void *__libc_malloc(size_t), *__libc_realloc(void *, size_t),
	*__libc_calloc(size_t, size_t), *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
void *malloc(size_t n) { return __libc_malloc(n); }
void free(void *p) { __libc_free(p); }
void *calloc(size_t a, size_t b) { return __libc_calloc(a, b); }
void *memalign(size_t a, size_t n) { return __libc_memalign(a, n); }
void *realloc(void *p, size_t n) { return n > (1u << 20) ? NULL : __libc_realloc(p, n); }
"""


@case(timeout=120, labels=("replay",))
def test_replay_failed_realloc(t):
    """A realloc that failed in the trace (the block stays) is made anyway
    on no block and its result freed at once, as a failed malloc is: the
    replay's heap stays the trace's 100 bytes.  It was written as a realloc
    in place, and replayed as one that succeeded: a 300 MiB heap, RSS
    300 MiB higher, a warning that blamed the threads' order (probe R).
    And a realloc that fails in the replay where the trace's succeeded
    counts as a slot error (compare's `*`), not as a smaller heap blamed
    on the threads' timing: it went uncounted."""
    prog = compile_c(t, "reallocfails", REALLOC_FAILS_C)
    trace = t.path("rf.ht")
    r = t.run(["sh", "-c", 'ulimit -v 256000 && exec "$@"', "sh", t.heaptrail, "record", "-q",
               "-o", trace, "--", prog], check_rc=0)
    eq(r.stdout.strip(), "failed", "the program's realloc under the limit")
    s = t.stats(trace)
    eq((s["calls"]["realloc"], s["failed"]["realloc"]), (1, 1), "stats: the failed realloc")
    wl = t.path("rf.wl")
    convert(t, wl, trace)
    j = replay(t, wl)
    eq(j["slot_errors"], 0, "replay: slot errors")
    eq(j["live_peak_bytes"], j["max_ideal_rss_bytes"], "replay: live peak against the trace's")
    check(j["live_peak_bytes"] < 1 << 20, "replay: a live peak of %d bytes (the failed realloc's "
          "300 MiB kept)" % j["live_peak_bytes"])
    check(j["max_rss_kb"] - j["max_rss_start_kb"] < 100 << 10, "replay: Max RSS grew from %d "
          "to %d KiB (the failed block kept)" % (j["max_rss_start_kb"], j["max_rss_kb"]))
    eq(j["calls"]["realloc"], 1, "replay: realloc calls")
    # failing in the replay only
    grow = compile_c(t, "grow", GROW_C)
    so = compile_c(t, "failrealloc.so", FAIL_REALLOC_C, ("-shared", "-fPIC"))
    gt = t.path("grow.ht")
    t.run([t.heaptrail, "record", "-q", "-o", gt, "--", grow], check_rc=0)
    gw = t.path("grow.wl")
    convert(t, gw, gt)
    j = replay(t, gw, ["--allocator", so])
    check(j["slot_errors"] > 30, "replay under an allocator whose realloc fails: %d slot "
          "errors (36 of its 40 reallocs fail)" % j["slot_errors"])
    r = t.tool(["compare", "-n", "1", "-a", "glibc," + so, "-o", t.path("c.svg"), gw])
    eq(r.rc, 0, "compare:\n" + r.describe())
    check("failrealloc.so *" in r.stdout and "did not replay the workload as traced" in r.stdout,
          "compare: no `*` line:\n" + r.stdout)
    check("timing" not in r.stdout, "compare blames the threads' timing:\n" + r.stdout)


@case(timeout=120, labels=("replay",))
def test_convert_trace_being_written_cause(t):
    """convert of a trace its program is still writing: frees whose
    allocations are not in the trace yet are skipped, and the line says
    that the trace is still being written, not that the blocks were
    allocated before recording began (probe R: it blamed the recording's
    start)."""
    trace = t.path("live.ht")
    rec = subprocess.Popen([t.heaptrail, "record", "-q", "--no-compact", "-o", trace, "--",
                            t.prog("prodcons"), "20000000"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=t.base_env(), cwd=t.dir,
                           start_new_session=True)
    try:
        seen = []
        for k in range(6):
            time.sleep(0.4)
            r = t.tool(["convert", t.path("live%d.wl" % k), trace])
            lines = [l for l in r.stdout.splitlines() if l.startswith("skipped ")]
            seen += lines
            for l in lines:
                check("(the trace is still being written: their allocations may not be in it "
                      "yet; convert it when the program has ended)" in l,
                      "convert %d: the cause:\n%s" % (k, r.describe()))
            # the order's warning, when there is one, gives the same
            # advice, not a new recording
            for l in r.stderr.splitlines():
                if "the workload follows that order" in l:
                    seen.append(l)
                    check("convert it again once the recording has ended" in l and
                          "record the program again" not in l,
                          "convert %d: the order's advice:\n%s" % (k, r.describe()))
        # (which of the two a read of a running trace meets depends on
        # where the flushes cut the threads' streams: either is the case)
        check(seen, "no convert of the trace being written skipped a free or said the order "
              "(the case untested)")
    finally:
        os.killpg(rec.pid, signal.SIGKILL)  # (record and the program)
        rec.wait()
