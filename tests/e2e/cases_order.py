"""Cross-thread order with the default options (issue 16): blocks that
pass through pipelines of 2 to 16 threads, a thread pool sharing one
queue, blocks reallocated in 3 or more threads in turn, and blocks that
come back to the thread that allocated them (tests/progs/pipeline.c,
pool.c, relay.c).  Each program keeps its own count of its calls, live
bytes and peak with C11 atomics (tests/progs/acct.h) and prints it as one
JSON line; `heaptrail record` with no option at all must agree with it.

What a trace must give, against the program's own count:
  - calls per function exactly (plus glibc's: the DTV callocs and frees the
    main thread makes, read from its own events, and two free(NULL)s per
    thread exit), bytes allocated exactly, reallocs moved exactly;
  - no free of a block not live (unknown_frees) and no address handed out
    while live (address_reuse_while_live), in stats, and for the 2-stage
    pipeline (no realloc) in an independent replay of `dump`'s merged order
    (htlib.live_set_check);
  - `convert` skips no free and no realloc and keeps every call;
  - live at exit: glibc's DTVs only, to the byte; `leaks` the same;
  - the peak of live bytes within PEAK_SLACK_BLOCKS_PER_THREAD blocks of
    ACCT_MAX_BLOCK bytes per thread of the program's own peak (plus the
    glibc blocks of the main thread live at most at once), see peak_slack.
  - timeline's peak and events (live's events too), heap's live bytes, blocks and allocations over its
    arenas, and flamegraph's bytes allocated (no flags either) those of
    stats.

HEAPTRAIL_TEST_ORDER_RECORD_ARGS (for checking by hand, e.g.
"--timestamp-every=1"): options added to every `record` of these cases.
The cases themselves record with none: the default must be right.
"""

import json
import re
import os
import shlex

from htlib import (GLIBC_THREAD_EXIT_FREE_NULLS, case, check, dump_live_check, eq, expect,
                   expect_calls, fail)

# tests/progs/acct.h
ACCT_MAX_BLOCK = 4096

# The bound on the peak.  The program adds a block's size right after its
# allocation returns and subtracts it right before its free (and around a
# realloc); the recorder dates an allocation after the real call returns
# and a free before the real call.  So the program's live interval of each
# block lies inside the recorder's: in an exact order the recorder's live
# set at any moment is the program's at that moment plus at most one block
# per thread (one the thread has just been given or is about to give
# back, not yet counted or already uncounted by the program), and its
# peak lies in [program's peak, program's peak + threads x ACCT_MAX_BLOCK]
# (plus glibc's own blocks).  The check allows that slack on both sides.
PEAK_SLACK_BLOCKS_PER_THREAD = 1

EXTRA_RECORD_ARGS = shlex.split(os.environ.get("HEAPTRAIL_TEST_ORDER_RECORD_ARGS", ""))

COUNTED = ("malloc", "calloc", "realloc", "free")


def peak_slack(threads):
    return threads * PEAK_SLACK_BLOCKS_PER_THREAD * ACCT_MAX_BLOCK


def reuse_none(s):
    """address_reuse_while_live=0 for expect(), if stats has the key (its
    absence is a failure of its own)."""
    return {"address_reuse_while_live": 0} if "address_reuse_while_live" in s else {}


def record(t, name, argv, opts=(), env=None):
    """record [opts] -o NAME.ht -- argv NAME.json (with env); returns
    (trace, the program's own count)."""
    out = t.path(name + ".ht")
    counts = t.path(name + ".json")
    cmd = ([t.heaptrail, "record", "-q", "-o", out] + list(opts) + EXTRA_RECORD_ARGS +
           ["--"] + [str(a) for a in argv] + [counts])
    r = t.run(cmd, timeout=120, env=env)
    if r.rc != 0:
        fail("expected exit 0 from %s" % r.describe())
    with open(counts) as f:
        prog = json.load(f)
    for k in COUNTED + ("peak_live_bytes", "live_bytes_at_exit", "live_blocks_at_exit",
                        "bytes_allocated", "realloc_moved", "threads", "max_block"):
        check(k in prog, "%s: no %s in the program's count %r" % (name, k, prog))
    eq(prog["max_block"], ACCT_MAX_BLOCK, "the program's largest block (acct.h)")
    eq((prog["live_bytes_at_exit"], prog["live_blocks_at_exit"]), (0, 0),
       "%s: the program's own live bytes and blocks at exit" % name)
    return out, prog


class Glibc:
    """The heap calls of the main thread, which makes none of its own:
    glibc's DTV callocs at pthread_create, and at pthread_join the frees
    of the DTVs (and free(NULL) per DTV slot) of the thread stacks it drops
    from its cache (more than 40 MiB of stacks)."""

    def __init__(self, t, trace, s):
        main = t.dump(trace, ["--tid", str(s["pid"]), "--kind", "malloc,calloc,realloc,free"])
        self.calls = {k: 0 for k in COUNTED}
        self.free_null = 0
        self.bytes = 0
        self.live = {}
        live_bytes = self.max_live_bytes = 0
        for e in main:
            if e.kind not in ("calloc", "free"):
                fail("the main thread made a %s the test does not expect: %r" % (e.kind, e))
            self.calls[e.kind] += 1
            if e.kind == "calloc":
                size = e.args[0] * e.args[1]
                self.bytes += size
                self.live[e.result_ptr()] = size
                live_bytes += size
                self.max_live_bytes = max(self.max_live_bytes, live_bytes)
            elif e.args[0] == 0:
                self.free_null += 1
            else:
                size = self.live.pop(e.args[0], None)
                check(size is not None, "the main thread freed a block it did not "
                      "allocate: %r" % e)
                live_bytes -= size
        self.live_blocks = len(self.live)
        self.live_bytes = sum(self.live.values())


def check_trace(t, name, trace, prog, convert=True):
    """Every check of the module docstring on one trace (soft: all of them
    are tried and reported together)."""
    s = t.stats(trace)
    g = Glibc(t, trace, s)
    n = prog["threads"]
    exits = n * GLIBC_THREAD_EXIT_FREE_NULLS
    with t.soft():
        expect_calls(s, {"malloc": prog["malloc"],
                         "calloc": prog["calloc"] + g.calls["calloc"],
                         "realloc": prog["realloc"],
                         "free": prog["free"] + g.calls["free"] + exits})
    with t.soft():
        check("address_reuse_while_live" in s, "stats --json has no address_reuse_while_live")
    with t.soft():
        expect(s, complete=True, closed=True, threads=n + 1, unknown_frees=0,
               **reuse_none(s))
    with t.soft():
        expect(s, free_null=g.free_null + exits,
               bytes_allocated=prog["bytes_allocated"] + g.bytes,
               realloc__calls=prog["realloc"], realloc__moved=prog["realloc_moved"],
               realloc__as_malloc=0, realloc__as_free=0, realloc__failed=0,
               live_blocks_at_exit=prog["live_blocks_at_exit"] + g.live_blocks,
               live_bytes_at_exit=prog["live_bytes_at_exit"] + g.live_bytes)
    with t.soft():
        slack = peak_slack(n)
        lo = prog["peak_live_bytes"] - slack
        hi = prog["peak_live_bytes"] + g.max_live_bytes + slack
        check(lo <= s["peak_live_bytes"] <= hi,
              "peak_live_bytes %d, the program's own peak %d: expected %d..%d (%d threads x "
              "%d B slack, glibc's blocks %d B), off by %+d B" % (
                  s["peak_live_bytes"], prog["peak_live_bytes"], lo, hi, n,
                  PEAK_SLACK_BLOCKS_PER_THREAD * ACCT_MAX_BLOCK, g.max_live_bytes,
                  s["peak_live_bytes"] - g.max_live_bytes - prog["peak_live_bytes"]))
    if prog["realloc"] == 0:
        # dump prints a moving realloc once, at its end, although the
        # reader releases its old block at its start (docs/FORMAT.md, event
        # kinds): dump's lines alone cannot be replayed in the reader's
        # order when a realloc was preempted and another thread got its old
        # address meanwhile.  So this independent check is for traces
        # without reallocs; stats counts both parts.
        with t.soft():
            c = dump_live_check(t, trace, ["--kind", "malloc,calloc,free"])
            check(not c.reuse and not c.unknown, "dump's merged order: " + c.summary())
            eq(len(c.live), prog["live_blocks_at_exit"] + g.live_blocks,
               "blocks live at the end of dump's merged order")
    with t.soft():
        r = t.tool(["leaks", "--json", trace])
        eq(r.rc, 0, "leaks --json: exit status\n" + r.describe())
        lk = json.loads(r.stdout)
        # with stacks, glibc's DTVs are suppressed by default (they show
        # with --no-default-suppressions); without, they have no stack
        # to be told by and are listed
        stacked = bool(lk.get("groups")) and any(gr.get("stack") for gr in lk["groups"]) \
            or lk.get("suppressed_blocks", 0) > 0
        eq((lk["leaked_bytes"] + lk["suppressed_bytes"], lk["leaked_blocks"] + lk["suppressed_blocks"]),
           (g.live_bytes, g.live_blocks),
           "leaks --json: leaked and suppressed bytes and blocks (glibc's DTVs only)")
        if stacked:
            eq((lk["leaked_bytes"], lk["leaked_blocks"]), (0, 0),
               "leaks --json with stacks: glibc's DTVs suppressed by default")
    # the other analyzers that keep the live blocks, with no flags, agree
    # with stats (checked against the program above)
    with t.soft():
        r = t.tool(["timeline", "--json", "-o", "-", trace])
        eq(r.rc, 0, "timeline --json: exit status\n" + r.describe())
        eq(json.loads(r.stdout)["peak_live_bytes"], s["peak_live_bytes"],
           "timeline's peak, stats'")
        # (a moving realloc is one event: timeline and live counted its
        # release half too)
        eq(json.loads(r.stdout)["events"], s["events"], "timeline's events, stats'")
        r = t.tool(["live", "--batch", trace])
        m = re.search(r"live: (\d+) events read", r.stderr)
        check(m and int(m.group(1)) == s["events"], "live's events, stats' %d:\n%s" % (
            s["events"], r.stderr))
        r = t.tool(["heap", "--json", trace])
        eq(r.rc, 0, "heap --json: exit status\n" + r.describe())
        arenas = json.loads(r.stdout)["arenas"]
        eq((sum(a["live_requested_bytes"] for a in arenas), sum(a["live_blocks"] for a in arenas),
            sum(a["allocations"] for a in arenas)),
           (s["live_bytes_at_exit"], s["live_blocks_at_exit"],
            s["calls"]["malloc"] + s["calls"]["calloc"] + s["calls"]["realloc"]),
           "heap's arenas: live bytes and blocks at the end, allocations (stats')")
        r = t.tool(["flamegraph", "--folded", trace])
        eq(r.rc, 0, "flamegraph --folded: exit status\n" + r.describe())
        eq(sum(int(l.rsplit(" ", 1)[1]) for l in r.stdout.splitlines() if l.strip()),
           s["bytes_allocated"], "flamegraph's bytes allocated, stats'")
    if convert:
        with t.soft():
            r = t.tool(["convert", "--json", t.path(name + ".wl"), trace])
            eq(r.rc, 0, "convert: exit status\n" + r.describe())
            cv = json.loads(r.stdout)
            got = {k: cv[k] for k in ("skipped_frees", "skipped_reallocs", "inversions")}
            got.update({k: cv["calls"].get(k, 0) for k in COUNTED})
            want = dict.fromkeys(("skipped_frees", "skipped_reallocs", "inversions"), 0)
            want.update({k: s["calls"][k] for k in COUNTED})
            eq(got, want, "convert --json: skipped frees and reallocs, inversions, calls")
            check("skipped" not in r.stderr, "convert warns: " + r.stderr)
    return s


def untraced_counts(t, argv):
    """The program's count untraced: the calls and bytes must be those of
    the traced run (they depend on no scheduling)."""
    out = t.path("untraced.json")
    t.run([str(a) for a in argv] + [out], check_rc=0)
    with open(out) as f:
        return json.load(f)


def same_calls(t, prog, argv):
    ref = untraced_counts(t, argv)
    with t.soft():
        for k in COUNTED + ("bytes_allocated",):
            eq(prog[k], ref[k], "the program's %s traced and untraced" % k)


def pipeline(t, n, blocks=30000):
    argv = [t.prog("pipeline"), n, blocks]
    trace, prog = record(t, "pipeline%d" % n, argv)
    eq(prog["malloc"] + prog["calloc"], blocks, "the program's allocations")
    if n >= 3:
        check(prog["realloc_moved"] > 0, "no realloc moved a block")
    same_calls(t, prog, argv)
    check_trace(t, "pipeline%d" % n, trace, prog)


@case(labels=("order", "analyzers"))
def test_order_pipeline_2(t):
    """A 2-thread pipeline, 30000 blocks: each freed by the thread after
    the one that allocated it."""
    pipeline(t, 2)


@case(labels=("order", "analyzers"))
def test_order_pipeline_3(t):
    """A 3-thread pipeline, 30000 blocks: the middle stage reallocs one in
    four, so a block is allocated, moved and freed in three threads."""
    pipeline(t, 3)


@case(labels=("order", "analyzers"))
def test_order_pipeline_4(t):
    """The pipeline of issue 16 (4 stages), 30000 blocks."""
    pipeline(t, 4)


@case(labels=("order", "analyzers"))
def test_order_pipeline_8(t):
    pipeline(t, 8)


@case(timeout=120, labels=("order", "analyzers"))
def test_order_pipeline_16(t):
    pipeline(t, 16, blocks=20000)


@case(labels=("order", "analyzers"))
def test_order_pipeline_stacks(t):
    """`record --stacks` of the 4-stage pipeline: the same checks, among
    them no munmap (the program makes none: the recorder's own per-thread
    stack tables, unmapped at thread exit, are not the program's)."""
    argv = [t.prog("pipeline"), 4, 20000]
    trace, prog = record(t, "stacks", argv, ["--stacks"])
    check_trace(t, "stacks", trace, prog)


@case(labels=("order", "analyzers"))
def test_order_pipeline_sampled(t):
    """`record --sample-bytes 64K` of the 4-stage pipeline (60000 blocks): the
    sampled blocks and their frees are in order: no unknown free, no
    address allocated while live, and every sampled block of the program
    freed (what may stay live at exit: glibc's DTVs, if sampled, each
    weighing at most one sampling period per thread)."""
    argv = [t.prog("pipeline"), 4, 60000]
    trace, prog = record(t, "sampled", argv, ["--sample-bytes", "64K"])
    s = t.stats(trace)
    n = prog["threads"]
    with t.soft():
        check("address_reuse_while_live" in s, "stats --json has no address_reuse_while_live")
    with t.soft():
        expect(s, sampled=True, sample_bytes=64 * 1024, complete=True, closed=True,
               unknown_frees=0, **reuse_none(s))
    with t.soft():
        calls = sum(prog[k] for k in COUNTED)
        check(100 < s["events"] < calls // 10,
              "%d events in the sampled trace of %d calls" % (s["events"], calls))
    with t.soft():
        check(s["live_bytes_at_exit"] <= n * 64 * 1024,
              "live_bytes_at_exit %d (scaled), %d blocks: the program freed every block; "
              "at most glibc's %d DTVs could be sampled" % (
                  s["live_bytes_at_exit"], s["live_blocks_at_exit"], n))


@case(labels=("order", "analyzers"))
def test_order_pool(t):
    """8 workers, 20000 tasks of 1..8 blocks through one shared queue: most
    blocks are freed (one in four first reallocated) by another worker
    than the one that allocated them."""
    argv = [t.prog("pool"), 8, 20000]
    trace, prog = record(t, "pool", argv)
    same_calls(t, prog, argv)
    s = check_trace(t, "pool", trace, prog)
    # how many depends on the scheduling (99% here, on 2 cores)
    check(s["cross_thread_frees"] > prog["free"] // 4,
          "%d cross-thread frees of %d" % (s["cross_thread_frees"], prog["free"]))


@case(labels=("order", "analyzers"))
def test_order_realloc_chain(t):
    """Every block reallocated by each of 3 threads in turn (4 threads),
    then by each of 7 (8 threads), before the last one frees it."""
    for n, blocks in ((4, 20000), (8, 8000)):
        argv = [t.prog("relay"), "chain", n, blocks]
        trace, prog = record(t, "chain%d" % n, argv)
        eq(prog["realloc"], (n - 1) * blocks, "the program's reallocs")
        same_calls(t, prog, argv)
        check_trace(t, "chain%d" % n, trace, prog)


@case(labels=("order", "analyzers"))
def test_order_return_to_owner(t):
    """Blocks allocated by thread A, touched and reallocated (one in two) by
    B and C (and D, E), then freed by A."""
    for n, blocks in ((3, 30000), (5, 15000)):
        argv = [t.prog("relay"), "return", n, blocks]
        trace, prog = record(t, "return%d" % n, argv)
        same_calls(t, prog, argv)
        check_trace(t, "return%d" % n, trace, prog)


@case(labels=("order", "analyzers"))
def test_order_self_write(t):
    """A pipeline of 8 threads, a pool of 8 workers and a realloc chain
    through 4 threads, with the threads writing every full buffer to the
    trace themselves (HEAPTRAIL_SELF_WRITE=2: what they do when they fill
    the CPUs, docs/record.md "Compression"), with 4 KiB buffers so that
    they do it often and at once: every check of the module, as when the
    helper writes."""
    env = {"HEAPTRAIL_SELF_WRITE": "2"}
    opts = ["--buffer-size", "4096"]
    for name, argv in (("pipe8", [t.prog("pipeline"), 8, 30000]),
                       ("pool", [t.prog("pool"), 8, 20000]),
                       ("chain4", [t.prog("relay"), "chain", 4, 20000])):
        trace, prog = record(t, "sw-" + name, argv, opts=opts, env=env)
        check_trace(t, "sw-" + name, trace, prog)
