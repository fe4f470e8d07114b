"""The interposed API, one program calling every function (tests/progs/api_all.c),
the control API of heaptrail.h, peaks, leaks and histograms."""

import json
import os
import re
import shutil

import htformat
from htlib import (case, check, check_event_sum, check_histogram, eq, expect,
                   expect_calls, live_set_check, skip, thread, which)

API_ALL_CALLS = {
    "malloc": 1, "free": 9, "calloc": 1, "realloc": 3, "reallocarray": 2,
    "memalign": 1, "posix_memalign": 2, "aligned_alloc": 1, "valloc": 1,
    "pvalloc": 1, "mallopt": 1, "malloc_trim": 1, "mmap": 4, "munmap": 4,
    "mremap": 1, "brk": 1, "sbrk": 3, "shmget": 1, "shmat": 1, "shmdt": 1,
    "shmctl": 1,
}
API_ALL_FAILED = {"reallocarray": 1, "posix_memalign": 1, "mmap": 1, "munmap": 1}
# Requested sizes of the successful allocations, in program order.
API_ALL_SIZES = [100, 200, 50, 5000, 100, 100, 100, 128, 100, 100]
# mmap 1 MiB + mmap64 64 KiB + mmap 8 KiB grown by mremap to 16 KiB.
API_ALL_MAPPED = (1 << 20) + 65536 + 16384


def said(run):
    """The 'name: number' lines a test program says on stdout."""
    out = {}
    for line in run.stdout.splitlines():
        k, sep, v = line.partition(": ")
        if sep and v.strip().isdigit():
            out[k] = int(v)
    return out


def check_api_all(t, s, run):
    v = said(run)
    with t.soft():
        expect_calls(s, API_ALL_CALLS)
    with t.soft():
        expect_calls(s, API_ALL_FAILED, key="failed")
    with t.soft():
        expect(s, complete=True, closed=True, threads=1, thread_starts=1, forks=0,
               free_null=1, bytes_allocated=sum(API_ALL_SIZES),
               usable_bytes_allocated=v["usable"], live_bytes_at_exit=0,
               live_blocks_at_exit=0, live_usable_bytes_at_exit=0,
               cross_thread_frees=0, unknown_frees=0, marks=[])
    with t.soft():
        # the live bytes peak right after the grow to 5000: p1, p2, p3 live
        expect(s, peak_live_bytes=5300, peak_live_usable_bytes=v["peak_usable"])
    with t.soft():
        # the most blocks live at once: 8, just before the final frees
        expect(s, peak_live_blocks=8)
    with t.soft():
        # realloc counts reallocarray too: realloc(NULL, 50) and
        # reallocarray(NULL, ...) act as malloc, the overflow fails
        expect(s, realloc__calls=5, realloc__as_malloc=2, realloc__as_free=1,
               realloc__failed=1, realloc__moved=v["moved"],
               realloc__in_place=1 - v["moved"])
    with t.soft():
        # calls: mmap, munmap and mremap; bytes: the 8 KiB mapping grown by
        # mremap to 16 KiB counts 16 KiB mapped (it is unmapped as 16 KiB)
        expect(s, mmap__calls=9, mmap__bytes_mapped=API_ALL_MAPPED,
               mmap__bytes_unmapped=API_ALL_MAPPED, mmap__live_mapped_bytes=0,
               mmap__peak_mapped_bytes=API_ALL_MAPPED,
               mmapped_chunks__allocations=0, mmapped_chunks__bytes=0)
    with t.soft():
        # The break moves four times: the heap's first growth, malloc_trim's
        # shrink, sbrk(4096) and brk() back.
        expect(s, heap_break__final=v["brk"], heap_break__changes=4)
        eq(s["heap_break"]["growth_bytes"],
           s["heap_break"]["final"] - s["heap_break"]["initial"], "heap_break.growth_bytes")
    with t.soft():
        check(s["thread_exits"] in (0, 1), "thread_exits %d" % s["thread_exits"])
        check_event_sum(s)
    with t.soft():
        check_histogram(s, API_ALL_SIZES)
    with t.soft():
        me = thread(s, tid=v["pid"])
        eq(len(s["per_thread"]), 1, "per_thread entries")
        eq(me["allocations"], len(API_ALL_SIZES), "per_thread allocations")
        eq(me["bytes_allocated"], sum(API_ALL_SIZES), "per_thread bytes_allocated")
        eq(me["events"], s["events"], "per_thread events")
        check(s["duration_ns"] > 0, "duration_ns %r" % s["duration_ns"])


@case(labels=("analyzers",))
def test_api_all(t):
    """Every interposed function, through heaptrail record."""
    out = t.path("api.ht")
    r = t.record(out, [t.prog("api_all")])
    s = t.stats(out)
    check_api_all(t, s, r)
    # the stderr line gives the event count
    line = r.trace_line
    check(str(s["events"]) in line.replace(",", ""),
          "the heaptrail line does not give the event count %d: %r" % (s["events"], line))


@case()
def test_api_all_preload(t):
    """The same with LD_PRELOAD and HEAPTRAIL_OUT; and the dump agrees."""
    out = t.path("api.ht")
    r = t.traced(out, [t.prog("api_all")])
    s = t.stats(out)
    check_api_all(t, s, r)
    evs = t.dump(out)
    eq(len(evs), s["events"], "dump lines")
    kinds = [e.kind for e in evs]
    for k, n in API_ALL_CALLS.items():
        eq(kinds.count(k), n, "dump %s lines" % k)
    c = live_set_check(evs)
    check(c.reuse == 0 and c.unknown == 0, c.summary())
    eq(c.live, {}, "blocks live at the end")
    # time order, sequence numbers per thread from 0 without gaps
    times = [e.time_ns for e in evs]
    eq(times, sorted(times), "dump time order")
    eq([e.seq for e in evs], list(range(len(evs))), "sequence numbers of the one thread")


@case()
def test_api_all_mtrace_alias(t):
    """MTRACE_CTL_FILE names the output when HEAPTRAIL_OUT is not set."""
    out = t.path("mtrace.ht")
    r = t.run([t.prog("api_all")], env={"LD_PRELOAD": t.preload, "MTRACE_CTL_FILE": out},
              check_rc=0)
    check(os.path.isfile(out), "no trace at %s" % out)
    expect_calls(t.stats(out), API_ALL_CALLS)


@case()
def test_out_pid_pattern(t):
    """HEAPTRAIL_OUT=...%p... puts the pid in the name."""
    r = t.traced(t.path("t.%p.ht"), [t.prog("api_all")])
    pid = said(r)["pid"]
    eq(sorted(os.listdir(t.dir)), ["t.%d.ht" % pid], "files written")
    expect_calls(t.stats(t.path("t.%d.ht" % pid)), API_ALL_CALLS)


@case()
def test_record_default_name(t):
    """record without -o writes heaptrail.<pid>.ht in the current directory."""
    r = t.record(None, [t.prog("api_all")])
    pid = said(r)["pid"]
    name = "heaptrail.%d.ht" % pid
    eq(sorted(os.listdir(t.dir)), [name], "files written")
    check(name in r.trace_line, "the heaptrail line does not name %s" % name)
    expect_calls(t.stats(t.path(name)), API_ALL_CALLS)


@case(labels=("analyzers",))
def test_oracle_cross_check(t):
    """An independent decoder of the format (htformat.py) reads the same
    events as the C reader: event counts per kind and per thread."""
    if not shutil.which("zstd"):
        skip("no zstd tool for the independent decoder")
    for name, argv in (("api", [t.prog("api_all")]),
                       ("threads", [t.prog("threads"), "3", "5000"]),
                       ("raw", [t.prog("threads"), "2", "3000"])):
        out = t.path(name + ".ht")
        env = {"HEAPTRAIL_ZSTD_LEVEL": "0"} if name == "raw" else None
        t.traced(out, argv, env=env)
        s = t.stats(out)
        tr = htformat.Trace(out)
        eq(tr.error, None, "%s: independent decoder error" % name)
        eq(tr.closed, s["closed"], "%s: closed" % name)
        eq(len(tr.events), s["events"], "%s: events" % name)
        eq(tr.events_hdr, s["events"], "%s: events in the header" % name)
        for k in s["calls"]:
            eq(tr.count(k), s["calls"][k], "%s: %s calls" % (name, k))
        eq(len({e.tid for e in tr.events}), s["threads"], "%s: threads" % name)
        eq(tr.count("thread_start"), s["thread_starts"], "%s: thread starts" % name)
        eq(tr.count("thread_exit"), s["thread_exits"], "%s: thread exits" % name)
        for p in s["per_thread"]:
            eq(sum(1 for e in tr.events if e.tid == p["tid"]), p["events"],
               "%s: events of thread %d" % (name, p["tid"]))


# ---- the control API (include/heaptrail.h) -----------------------------------

@case()
def test_api_marks(t):
    """marks, pause/resume, sync, stop/start: events while paused or
    stopped are absent."""
    out = t.path("marks.ht")
    r = t.traced(out, [t.prog("api_marks"), "marks"])
    eq(r.stdout, "traced\n", "stdout")
    s = t.stats(out)
    expect_calls(s, {"malloc": 6, "free": 6})
    expect(s, complete=True, closed=True, bytes_allocated=3 * 10 + 2 * 30 + 50,
           live_blocks_at_exit=0, unknown_frees=0)
    eq([m["label"] for m in s["marks"]], ["phase1", "phase2"], "mark labels")
    times = [m["time_ns"] for m in s["marks"]]
    eq(times, sorted(times), "mark times in order")
    evs = t.dump(out)
    kinds = [e.kind for e in evs]
    eq(kinds.count("mark"), 2, "mark lines in dump")
    # sizes recorded: 10 (x3), 30 (x2), 50 (x1); never 20 or 40
    sizes = sorted(e.args[0] for e in evs if e.kind == "malloc")
    eq(sizes, [10, 10, 10, 30, 30, 50], "sizes of the recorded mallocs")
    # phase1 mark before the 10-byte mallocs, phase2 before the 30-byte ones
    i1 = kinds.index("mark")
    i2 = kinds.index("mark", i1 + 1)
    eq([e.args[0] for e in evs[i1:i2] if e.kind == "malloc"], [10, 10, 10],
       "mallocs between the marks")


@case(labels=("analyzers",))
def test_api_paused_said(t):
    """Recording off for a while (heaptrail_pause() or _stop(), SIGUSR2, a
    start paused): the calls meanwhile are not in the trace, and the
    analyzers say so.  pausefree frees a block while paused: stats counts
    the pause and its time, says that unknown frees may be blocks allocated
    while it was off; leaks reports the block (1000 bytes) and says it was
    live when recording went off (maybe freed meanwhile), in its text, its
    JSON and per group; the report's summary has the note.  marks (a pause
    and a stop) counts 2, a start paused 1 (no block live then), a trace
    with no pause 0 and says nothing."""
    out = t.path("pausefree.ht")
    r = t.traced(out, [t.prog("api_marks"), "pausefree"])
    eq(r.stdout, "traced\n", "stdout")
    s = t.stats(out)
    expect_calls(s, {"malloc": 2, "free": 2})
    expect(s, live_blocks_at_exit=1, live_bytes_at_exit=1000, unknown_frees=1, paused_count=1)
    check(0 < s["paused_ns"] < s["duration_ns"], "paused_ns %d of %d"
          % (s["paused_ns"], s["duration_ns"]))
    text = t.tool(["stats", out]).stdout
    check("\npaused     1 time, " in text, "stats: no paused line:\n" + text)
    check("unknown frees    1 (blocks allocated before recording started, or while it was off, "
          "or by calls hidden from the tracer)" in text, "stats: unknown frees not explained:\n" + text)
    lk = t.tool(["leaks", out]).stdout
    check("1000 B in 1 block not freed at exit, from 1 stack; recording was off 1 time: "
          "1000 B in 1 of these blocks were live then, and may have been freed meanwhile" in lk,
          "leaks: no word of the pause:\n" + lk)
    check("1000 bytes in 1 allocation from stack (1000 bytes in 1 of them allocated before "
          "recording went off: maybe freed meanwhile)" in lk, "leaks: the group:\n" + lk)
    j = json.loads(t.tool(["leaks", "--json", out]).stdout)
    eq((j["leaked_bytes"], j["paused_count"], j["live_when_paused_bytes"],
        j["live_when_paused_blocks"]), (1000, 1, 1000, 1), "leaks --json")
    eq((j["groups"][0]["live_when_paused_bytes"], j["groups"][0]["live_when_paused_blocks"]),
       (1000, 1), "leaks --json: the group")
    top = t.tool(["top", out]).stdout
    check("(recording was off 1 time: the calls meanwhile are not in the trace)" in top,
          "top: no word of the pause:\n" + top)
    eq(json.loads(t.tool(["top", "--json", out]).stdout)["paused_count"], 1, "top --json")
    html = t.path("pausefree.html")
    eq(t.tool(["report", "-q", "-o", html, out]).rc, 0, "report")
    with open(html) as f:
        check('id="paused-note">Note: recording was off 1 time' in f.read(),
              "report: no note of the pause")
    # every analyzer that reads the blocks says it once on stderr, as a
    # note (not with -q); the raw event lists (dump, events, csv) show the
    # control events themselves
    note = re.compile(r"^heaptrail: note: %s: recording was off 1 time, [0-9.]+ [mun]?s of "
                      r"[0-9.]+ [mun]?s \(heaptrail_pause\(\) or _stop\(\), SIGUSR2, a start paused\): "
                      r"the calls meanwhile are not in the trace, so blocks freed then stay live "
                      r"in it and frees of blocks allocated then are unknown$" % re.escape(out))
    o = lambda ext: t.path("pausefree." + ext)
    for args, want in ((["stats"], 1), (["leaks"], 1), (["top"], 1), (["heap"], 1),
                       (["flamegraph", "-o", o("svg")], 1), (["timeline", "-o", o("svg")], 1),
                       (["report", "-o", html], 1), (["diff", out], 2),
                       (["export", "-f", "pprof", "-o", o("pb.gz")], 1),
                       (["export", "-f", "massif", "-o", o("massif")], 1),
                       (["export", "-f", "perfetto", "-o", o("json")], 1),
                       (["export", "-f", "csv", "-o", o("csv")], 0), (["dump"], 0)):
        r = t.tool(args + [out])
        eq(r.rc, 0, "%s: %s" % (args[0], r.describe()))
        lines = [l for l in r.stderr.splitlines() if "recording was off" in l]
        eq(len(lines), want, "%s: lines on the pause:\n%s" % (" ".join(args), r.stderr))
        check(all(note.match(l) for l in lines), "%s: the note:\n%s" % (args[0], r.stderr))
        if want:
            q = t.tool(args[:1] + ["-q"] + args[1:] + [out])
            check("recording was off" not in q.stderr, "%s -q: %s" % (args[0], q.stderr))
    marks = t.path("marks.ht")
    t.traced(marks, [t.prog("api_marks"), "marks"])
    eq(t.stats(marks)["paused_count"], 2, "marks: a pause and a stop")
    started = t.path("started.ht")
    t.traced(started, [t.prog("api_marks"), "paused"], env={"HEAPTRAIL_START_PAUSED": "1"})
    s = t.stats(started)
    eq(s["paused_count"], 1, "a start paused")
    j = json.loads(t.tool(["leaks", "--json", started]).stdout)
    eq((j["paused_count"], j["live_when_paused_blocks"]), (1, 0), "a start paused: leaks")
    plain = t.path("plain.ht")
    t.traced(plain, [t.prog("api_marks"), "reset"])
    s = t.stats(plain)
    eq((s["paused_count"], s["paused_ns"]), (0, 0), "no pause")
    text = "".join(t.tool([c, plain]).stdout + t.tool([c, plain]).stderr
                   for c in ("stats", "leaks", "top", "heap"))
    check("\npaused " not in text and "recording was off" not in text,
          "a trace without a pause: said paused:\n" + text)


@case(labels=("analyzers",))
def test_api_marks_many(t):
    """12,000 marks: stats and timeline keep the first 10,000 (their memory
    must not grow with the trace) and count the rest; the events between
    them are all there."""
    out = t.path("many.ht")
    t.traced(out, [t.prog("api_marks"), "many"])
    s = t.stats(out)
    expect_calls(s, {"malloc": 12000, "free": 12000})
    eq(len(s["marks"]), 10000, "marks kept by stats")
    eq(s["marks_not_kept"], 2000, "marks counted by stats, not kept")
    eq([m["label"] for m in s["marks"][:2]] + [s["marks"][-1]["label"]], ["m0", "m1", "m9999"],
       "the marks stats keeps")
    r = t.tool(["stats", out])
    check("(2000 later marks counted, not kept)" in r.stdout, "stats text: %r" % r.stdout[-300:])
    r = t.tool(["timeline", "--json", "-o", "-", out])
    eq(r.rc, 0, "timeline --json: " + r.describe())
    tl = json.loads(r.stdout)
    eq((len(tl["marks"]), tl["marks_not_kept"]), (10000, 2000), "timeline's marks kept / not kept")


@case()
def test_api_start_paused(t):
    out = t.path("paused.ht")
    r = t.traced(out, [t.prog("api_marks"), "paused"], env={"HEAPTRAIL_START_PAUSED": "1"})
    eq(r.stdout, "traced\n", "stdout")
    s = t.stats(out)
    expect_calls(s, {"malloc": 2, "free": 2})
    expect(s, bytes_allocated=40, complete=True, closed=True)


@case()
def test_api_toggle_signal(t):
    out = t.path("toggle.ht")
    t.traced(out, [t.prog("api_marks"), "toggle"], env={"HEAPTRAIL_TOGGLE_SIGNAL": "1"})
    s = t.stats(out)
    expect_calls(s, {"malloc": 3, "free": 3})
    expect(s, bytes_allocated=10 + 2 * 30, complete=True)


@case()
def test_api_untraced(t):
    """A program built against heaptrail.h runs without the tracer."""
    for mode in ("marks", "paused"):
        r = t.run([t.prog("api_marks"), mode], check_rc=0)
        eq(r.stdout, "untraced\n", "stdout of api_marks %s" % mode)
    for prog in ("peak", "cxx_new"):
        t.run([t.prog(prog)], check_rc=0)
    t.run([t.prog("dl_main"), t.prog("libtpdl.so")], check_rc=0)


@case()
def test_bad_env_values(t):
    """Bad option values: a warning naming the variable, defaults kept."""
    out = t.path("bad.ht")
    env = {"HEAPTRAIL_FLUSH_INTERVAL": "soon", "HEAPTRAIL_START_PAUSED": "perhaps",
           "HEAPTRAIL_FOLLOW_FORK": "2"}
    r = t.traced(out, [t.prog("forker")], env=env)
    for var in env:
        check(any(var in l for l in r.stderr.splitlines()),
              "no warning about %s on stderr:\n%s" % (var, r.stderr))
    s = t.stats(out)  # not paused: recorded
    expect_calls(s, {"malloc": 15, "free": 15})
    child = int(r.stdout.split("child: ")[1])
    check(os.path.isfile(out + ".%d" % child), "fork child file missing (default follow)")


# ---- peaks, leaks, histograms -------------------------------------------------

PEAK_SIZES = [1000] * 10 + [5000] * 3 + [100] + [8] + [100] * 2 + [3000] * 3


@case(labels=("analyzers",))
def test_peak_and_leaks(t):
    out = t.path("peak.ht")
    t.traced(out, [t.prog("peak")])
    s = t.stats(out)
    expect_calls(s, {"malloc": 20, "free": 18})
    expect(s, bytes_allocated=sum(PEAK_SIZES), peak_live_bytes=15000,
           live_bytes_at_exit=5100, live_blocks_at_exit=2,
           unknown_frees=0, cross_thread_frees=0, complete=True, closed=True)
    with t.soft():
        # the most blocks live at once: the ten 1000-byte ones (the byte peak
        # has three 5000-byte blocks)
        expect(s, peak_live_blocks=10, live_blocks_at_peak=3)
    check(s["live_usable_bytes_at_exit"] >= 5100, "live_usable_bytes_at_exit")
    check(s["peak_live_usable_bytes"] >= 15000, "peak_live_usable_bytes")
    check(s["usable_bytes_allocated"] >= sum(PEAK_SIZES), "usable_bytes_allocated")
    marks = {m["label"]: m["time_ns"] for m in s["marks"]}
    eq(sorted(marks), ["a", "b", "c", "d"], "marks")
    check(marks["b"] <= s["peak_time_ns"] <= marks["c"],
          "peak_time_ns %d not between marks b (%d) and c (%d)"
          % (s["peak_time_ns"], marks["b"], marks["c"]))
    check_histogram(s, PEAK_SIZES)
    # lifetimes: one per freed block
    eq(sum(b["count"] for b in s["lifetime_histogram"]), 18, "lifetime_histogram total")
    bounds = [b["max_ns"] for b in s["lifetime_histogram"]]
    check(all(b is not None for b in bounds[:-1]), "unbounded bucket before the last")
    finite = [b for b in bounds if b is not None]
    eq(finite, sorted(finite), "lifetime_histogram bucket order")
    check_event_sum(s)


@case(labels=("analyzers",))
def test_huge(t):
    out = t.path("huge.ht")
    t.traced(out, [t.prog("huge")])
    s = t.stats(out)
    expect_calls(s, {"malloc": 3, "calloc": 1, "realloc": 1, "free": 2})
    expect_calls(s, {"malloc": 1, "calloc": 1, "realloc": 1}, key="failed")
    gib = 1 << 30
    expect(s, bytes_allocated=10 + gib, peak_live_bytes=10 + gib, peak_live_blocks=2,
           live_blocks_at_exit=0, live_bytes_at_exit=0, unknown_frees=0,
           realloc__calls=1, realloc__failed=1, realloc__moved=0, realloc__in_place=0,
           mmapped_chunks__allocations=1, mmapped_chunks__bytes=gib, mmap__calls=0)
    check_histogram(s, [10, gib])


@case()
def test_fast_path_same_records(t):
    """malloc and free write their common records on a fast path of their
    own (src/preload/hooks.c); HEAPTRAIL_FAST_PATH=0 sends them through the
    general one.  Without address randomization the two runs of each
    program dump the same events, field for field, but for the measured
    durations and the System V segment id: NULL frees, mmapped and failed
    blocks, buffer refills and every other kind included."""
    if not which("setarch"):
        skip("no setarch to turn address randomization off")
    probe = t.run(["setarch", "-R", "true"])
    if probe.rc != 0:
        skip("setarch -R is refused here: " + probe.describe())
    norm = re.compile(r"\b(duration|id)=\d+")
    for name, argv in (("api", [t.prog("api_all")]),
                       ("huge", [t.prog("huge")]),
                       ("loop", [t.prog("randloop"), "60000"]),
                       ("cxx", [t.prog("cxx_new")])):
        dumps = {}
        for fp in ("1", "0"):
            out = t.path("%s-%s.ht" % (name, fp))
            t.traced(out, ["setarch", "-R"] + argv, env={"HEAPTRAIL_FAST_PATH": fp})
            lines = [norm.sub(r"\1=N", " ".join(e.line.split()[2:])) for e in t.dump(out)]
            dumps[fp] = lines
        eq(len(dumps["1"]), len(dumps["0"]), "%s: events, fast path vs general" % name)
        diff = [(a, b) for a, b in zip(dumps["1"], dumps["0"]) if a != b]
        check(not diff, "%s: fast path and general path differ, first: %r" % (name, diff[:3]))
        if name == "loop":
            check(len(dumps["1"]) > 120000, "loop: %d events" % len(dumps["1"]))


@case()
def test_cxx_new_delete(t):
    """new/delete reach malloc/free; nothrow new of a huge size fails.
    Counted after the mark "main": 10 x new Foo (24 bytes), new char[1000],
    vector reserve (4000), a failed nothrow new (its std::bad_alloc, thrown
    and caught inside libstdc++, allocates 136 bytes); and before main,
    libstdc++'s emergency exception pool (one malloc of 72704 bytes,
    GCC 12), freed at exit (__gnu_cxx::__freeres, after the mark "end")."""
    out = t.path("cxx.ht")
    t.traced(out, [t.prog("cxx_new")])
    evs = t.dump(out)
    marks = [i for i, e in enumerate(evs) if e.kind == "mark"]
    eq(len(marks), 2, "marks")
    body = evs[marks[0]:marks[1]]
    mallocs = [e.args[0] for e in body if e.kind == "malloc"]
    eq(mallocs[:12], [24] * 10 + [1000, 4000], "operator new sizes")
    eq(len(mallocs), 14, "mallocs in main: %r" % mallocs)
    eq(sum(1 for e in body if e.kind == "free"), 13, "frees in main")
    failed = [e for e in body if e.kind == "malloc" and e.result_ptr() == 0]
    eq(len(failed), 1, "failed mallocs in main")
    before = [e for e in evs[:marks[0]] if e.kind in ("malloc", "calloc", "realloc")]
    eq([(e.kind, e.args[0]) for e in before], [("malloc", 72704)],
       "allocations before main (libstdc++'s emergency pool)")
    after = [e for e in evs[marks[1]:] if e.kind == "free"]
    eq([e.args[0] for e in after], [before[0].result_ptr()], "the pool freed at exit")
    s = t.stats(out)
    expect_calls(s, {"malloc": 15, "free": 14})
    expect_calls(s, {"malloc": 1}, key="failed")
    expect(s, unknown_frees=0, live_blocks_at_exit=0, live_bytes_at_exit=0)


@case(labels=("analyzers",))
def test_reallocs(t):
    """realloc up to 1 MiB (into mmapped chunks) and back down."""
    out = t.path("r.ht")
    r = t.traced(out, [t.prog("reallocs")])
    v = said(r)
    eq(v["moved"] + v["in_place"], 41, "resizes")
    s = t.stats(out)
    expect_calls(s, {"malloc": 1, "realloc": 40, "reallocarray": 1, "free": 1})
    up = sum(1 << k for k in range(1, 21))
    down = sum(1 << k for k in range(0, 20))
    expect(s, bytes_allocated=1 + up + down + 100, peak_live_bytes=1 << 20,
           live_blocks_at_exit=0, live_bytes_at_exit=0, unknown_frees=0,
           realloc__calls=41, realloc__moved=v["moved"], realloc__in_place=v["in_place"],
           realloc__as_malloc=0, realloc__as_free=0, realloc__failed=0,
           complete=True, closed=True)
    evs = t.dump(out)
    c = live_set_check(evs)
    check(c.reuse == 0 and c.unknown == 0, c.summary())
    eq(c.live, {}, "blocks live at the end (dump replay)")
    # heap: the mmapped chunks, and of them the reallocs that resized one
    # (they were counted as chunks of their own, without a word)
    mm, made, resized = {}, 0, 0
    for e in evs:
        if e.kind in ("malloc", "realloc", "reallocarray") and e.res and e.res[0]:
            was = e.kind != "malloc" and mm.pop(e.args[0], False)
            if "[mmapped]" in e.line:
                made += 1
                resized += was
            mm[e.res[0]] = "[mmapped]" in e.line
    check(made > 3 and resized > 3, "the program's mmapped chunks: %d, resized %d" % (made, resized))
    h = json.loads(t.tool(["heap", "--json", out]).stdout)["summary"]
    eq((h["mmapped_chunks"], h["mmapped_resized"]), (made, resized), "heap: mmapped chunks, resized")
    text = t.tool(["heap", out]).stdout
    check("%d of them reallocs resizing one, at most 1.0 MiB at once" % resized in text,
          "heap's mmapped line:\n" + text)


def valgrind_summary(text):
    """The heap summary and leak summary numbers of a valgrind memcheck run."""
    import re
    num = lambda s: int(s.replace(",", ""))
    out = {}
    m = re.search(r"in use at exit: ([\d,]+) bytes in ([\d,]+) blocks", text)
    check(m is not None, "valgrind printed no heap summary:\n%s" % text[-2000:])
    out["in_use_bytes"], out["in_use_blocks"] = num(m.group(1)), num(m.group(2))
    m = re.search(r"total heap usage: ([\d,]+) allocs, ([\d,]+) frees, ([\d,]+) bytes allocated",
                  text)
    out["allocs"], out["frees"], out["bytes"] = (num(m.group(i)) for i in (1, 2, 3))
    m = re.search(r"definitely lost: ([\d,]+) bytes in ([\d,]+) blocks", text)
    out["lost_bytes"], out["lost_blocks"] = (num(m.group(1)), num(m.group(2))) if m else (0, 0)
    return out


@case(timeout=120)
def test_valgrind_agrees(t):
    """valgrind's memcheck, run on the same programs without the tracer,
    counts the same allocations, frees, bytes and leaks as stats does.
    (Single-threaded programs: valgrind's own preload changes the size of
    glibc's per-thread DTV allocations, and its freeres frees them.)"""
    vg = which("valgrind")
    if not vg:
        skip("valgrind is not installed (scripts/deps.sh test installs it)")
    for prog, leaked in (("peak", (5100, 2)), ("reallocs", (0, 0))):
        r = t.run([vg, "--leak-check=full", "--errors-for-leak-kinds=none", "--error-exitcode=99", t.prog(prog)], timeout=90)
        eq(r.rc, 0, "%s under valgrind: status" % prog)
        v = valgrind_summary(r.stderr)
        out = t.path(prog + ".ht")
        t.traced(out, [t.prog(prog)])
        s = t.stats(out)
        allocs = sum(s["calls"][k] - s["failed"][k] for k in
                     ("malloc", "calloc", "realloc", "reallocarray", "memalign",
                      "posix_memalign", "aligned_alloc", "valloc", "pvalloc"))
        with t.soft():
            eq(s["live_bytes_at_exit"], v["in_use_bytes"], "%s: live bytes at exit vs valgrind" % prog)
            eq(s["live_blocks_at_exit"], v["in_use_blocks"], "%s: live blocks vs valgrind" % prog)
            eq((v["lost_bytes"], v["lost_blocks"]), leaked, "%s: valgrind's definitely lost" % prog)
            eq(s["bytes_allocated"], v["bytes"], "%s: bytes allocated vs valgrind" % prog)
            # valgrind counts every realloc as one alloc and one free
            eq(allocs, v["allocs"], "%s: allocations vs valgrind" % prog)
            frees = s["calls"]["free"] - s["free_null"] + s["calls"]["realloc"] + \
                s["calls"]["reallocarray"] - s["realloc"]["as_malloc"] - s["realloc"]["failed"]
            eq(frees, v["frees"], "%s: frees vs valgrind" % prog)


@case(labels=("analyzers",))
def test_api_reset(t):
    """heaptrail_reset(): every analyzer forgets the blocks allocated
    before it, the same way whether it runs alone or in report's shared
    pass: only the block allocated after the reset and never freed is live
    at exit, the frees of forgotten blocks take nothing off the live bytes
    (or the mmapped-chunk bytes) and are not unknown to stats; heap counts
    them as unknown and moves no threshold for the forgotten mmapped one."""
    out = t.path("reset.ht")
    r = t.traced(out, [t.prog("api_marks"), "reset"])
    eq(r.stdout, "traced\n", "stdout")
    s = t.stats(out)
    expect_calls(s, {"malloc": 5, "free": 3})
    expect(s, bytes_allocated=1000 + 2000 + (1 << 20) + 300 + 400,
           peak_live_bytes=1000 + 2000 + (1 << 20), live_bytes_at_exit=400,
           live_blocks_at_exit=1, unknown_frees=0)
    h = json.loads(t.tool(["heap", "--json", out]).stdout)
    eq(h["summary"]["end_requested_bytes"], 400, "heap: requested bytes live at the end")
    eq(h["summary"]["peak_requested_bytes"], 1000 + 2000 + (1 << 20), "heap: peak")
    eq(h["summary"]["unknown_frees"], 2, "heap: frees of the forgotten b and big")
    eq(h["thresholds"], [], "heap: threshold changes (the forgotten chunk's size is unknown)")
    csv = t.tool(["timeline", "--csv", "-o", "-", out]).stdout.splitlines()
    head, last = csv[0].split(","), csv[-1].split(",")
    row = dict(zip(head, last))
    eq(int(row["live_bytes"]), 400, "timeline: live bytes at the end")
    eq(int(row["mmapped_chunk_bytes"]), 0, "timeline: mmapped-chunk bytes at the end")
    html = t.path("reset.html")
    r = t.tool(["report", "-q", "-o", html, out])
    eq(r.rc, 0, "report:\n" + r.describe())
    page = open(html).read()
    check("in 1 block never freed" in page, "report: live at exit is not the one block")
    check(">400 B<" in page, "report: 400 B live at exit not shown")


@case(labels=("analyzers",))
def test_exit_frees_in_libraries(t):
    """Frees made at exit by the program's libraries, after the recorder's
    own destructor has run, are in the trace: an ELF destructor of a
    linked library (1111 bytes), of a library dlopen'ed and never closed
    (2222), and the destructor of a C++ object with static storage in a
    linked library (a vector of 3333).  The recorder used to close the
    trace in its destructor, which _dl_fini runs first: the three blocks
    were reported as leaks (valgrind: nothing in use).  With the default
    writer, --writer=thread and --stacks."""
    progs = os.path.dirname(t.prog("finiprog"))
    for extra in ([], ["--writer=thread"], ["--stacks"]):
        out = t.path("fini%d.ht" % len(os.listdir(t.dir)))
        r = t.run([t.heaptrail, "record", "-q", "-o", out] + extra + ["--",
                  t.prog("finiprog"), progs])
        eq(r.rc, 0, "record %s:\n%s" % (extra, r.describe()))
        d = t.run([t.heaptrail, "dump", out], check_rc=0).stdout
        for size in (1111, 2222, 3333):
            m = re.search(r" (?:malloc|calloc) size=%d = ptr=(0x[0-9a-f]+)" % size, d)
            check(m is not None, "%s: the allocation of %d bytes:\n%s" % (extra, size, d[-3000:]))
            check(re.search(r" free ptr=%s\b" % m.group(1), d[m.end():]),
                  "%s: the %d bytes freed at exit" % (extra, size))
        lk = json.loads(t.run([t.heaptrail, "leaks", "--json", out], check_rc=0).stdout)
        eq([g["bytes"] for g in lk["groups"] if g["bytes"] in (1111, 2222, 3333)], [],
           "%s: none of them a leak" % extra)


@case(labels=("analyzers",))
def test_cxx_runtime_pool_freed(t):
    """A C++ program that frees all it allocates has nothing left at exit:
    libstdc++'s pool for exceptions (72 KiB, allocated as it loads) is
    freed by __gnu_cxx::__freeres, which the recorder calls at exit as
    valgrind and heaptrack do; every C++ program had a leak of 72,704 bytes
    in libstdc++ that valgrind does not report.  A C program's trace gets
    no call from it."""
    out = t.path("cxx.ht")
    t.run([t.heaptrail, "record", "-q", "-o", out, "--", t.prog("cxx_new")], check_rc=0)
    lk = json.loads(t.tool(["leaks", "--json", out]).stdout)
    eq([(g["bytes"], g["blocks"]) for g in lk["groups"]], [], "leaks of cxx_new")
    c = t.path("c.ht")
    t.run([t.heaptrail, "record", "-q", "-o", c, "--", "true"], check_rc=0)
    eq(t.stats(c)["events"], 0, "events of true")
