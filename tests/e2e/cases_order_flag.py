"""Never silently wrong about the order: every analyzer says whether the
reader delivered the events in their true order across threads
(ht_reader__order, docs/FORMAT.md "Ordering guarantee"): one line on
stderr when it did not, and order_exact / order_events_concerned in its
JSON.  Older multi-threaded traces (undated malloc/free events in several
threads) are not exact; a single-threaded trace recorded now is; a trace
that claims HT_FILE_F_ORDERED but holds an address out of step with the
merged order is caught."""

import json
import os
import re
import struct

import htformat
from htlib import case, check, eq

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "fuzz", "corpus")
OLDER = [os.path.join(CORPUS, "real-v3-handoff.ht"),
         os.path.join(CORPUS, "real-v2-threads.ht"),
         os.path.join(HERE, "..", "fuzz", "corpus_convert", "ring.ht")]
FILE_F_SAMPLED = 0x2
FILE_F_ORDERED = 0x80
NOT_EXACT = re.compile(r"^heaptrail: warning: (.*): the order of (\d+) events? across threads "
                       r"is not exact \(.*\); peaks, leaks and live bytes may be wrong$")


def order_lines(r):
    """(path, count) of every order warning on stderr."""
    return [(m.group(1), int(m.group(2)))
            for m in map(NOT_EXACT.match, r.stderr.splitlines()) if m]


def json_orders(d, where=""):
    """(where, order_exact, order_events_concerned) of every object that has them."""
    out = []
    if isinstance(d, dict):
        if "order_exact" in d or "order_events_concerned" in d:
            out.append((where or ".", d.get("order_exact"), d.get("order_events_concerned")))
        for k, v in d.items():
            out += json_orders(v, where + "." + k)
    elif isinstance(d, list):
        for i, v in enumerate(d):
            out += json_orders(v, "%s[%d]" % (where, i))
    return out


def analyzers(t, trace, tag):
    """Every analyzer on trace: (name, run, JSON document or None)."""
    o = lambda ext: t.path("%s.%s" % (tag, ext))
    cmds = [
        ("stats", ["stats", "--json", trace], "stdout"),
        ("leaks", ["leaks", "--json", trace], "stdout"),
        ("top", ["top", "--json", trace], "stdout"),
        ("heap", ["heap", "--json", trace], "stdout"),
        ("timeline", ["timeline", "--json", "-o", "-", trace], "stdout"),
        ("diff", ["diff", "--json", trace, trace], "stdout"),
        ("export perfetto", ["export", "--format", "perfetto", "-o", o("json"), trace], o("json")),
        ("export pprof", ["export", "--format", "pprof", "-o", o("pb.gz"), trace], None),
        ("export massif", ["export", "--format", "massif", "-o", o("massif"), trace], None),
        ("export csv", ["export", "--format", "csv", "-o", o("csv"), trace], None),
        ("flamegraph", ["flamegraph", "-o", o("svg"), trace], None),
        ("report", ["report", "-o", o("html"), trace], None),
        ("dump", ["dump", trace], None),
        ("events", ["events", trace], None),
        ("convert", ["convert", "--json", o("wl"), trace], "stdout"),
    ]
    out = []
    for name, args, doc in cmds:
        r = t.tool(args)
        eq(r.rc, 0, "%s: exit status:\n%s" % (name, r.describe()))
        d = None
        if doc == "stdout":
            d = json.loads(r.stdout)
        elif doc:
            with open(doc) as f:
                d = json.load(f)
        out.append((name, r, d))
    with open(o("html")) as f:
        html = f.read()
    with open(o("massif")) as f:
        massif = f.read()
    return out, html, massif


@case(timeout=240, labels=("analyzers",))
def test_order_older_traces(t):
    """Traces of older recorders with undated events in several threads:
    not exact, said by every analyzer, the same count everywhere."""
    for trace in OLDER:
        name = os.path.basename(trace)
        s = t.stats(trace)
        eq(s["order_exact"], False, "%s: order_exact" % name)
        n = s["order_events_concerned"]
        check(n > 0, "%s: order_events_concerned %r" % (name, n))
        runs, html, massif = analyzers(t, trace, name)
        with t.soft():
            for cmd, r, d in runs:
                lines = order_lines(r)
                # diff reads the trace twice (two readers): one line each
                want = 2 if cmd == "diff" else 1
                eq(lines, [(trace, n)] * want, "%s %s: order warning lines on stderr:\n%s"
                   % (cmd, name, r.stderr))
                if d is None:
                    continue
                got = json_orders(d)
                check(got, "%s %s: no order_exact in its JSON" % (cmd, name))
                for where, exact, count in got:
                    eq(exact, False, "%s %s: %s order_exact" % (cmd, name, where))
                    total = 2 * n if cmd == "diff" and where == "." else n
                    eq(count, total, "%s %s: %s order_events_concerned" % (cmd, name, where))
            check('id="order-warning"' in html and "the order of %d events" % n in html,
                  "report %s: no visible order note in the HTML" % name)
            check("the order of %d events" % n in massif.splitlines()[0],
                  "export massif %s: no order note in desc:" % name)


@case(timeout=120, labels=("analyzers",))
def test_order_cut_trace_why(t):
    """A multi-threaded trace cut in the middle (pipeline: blocks cross
    threads): frees of blocks whose allocations were in the lost chunks
    put addresses out of step, and the order warning names the missing
    events as the likely cause, not only hidden calls; the whole trace is
    exact."""
    whole = t.path("pipe.ht")
    t.record(whole, [t.prog("pipeline"), "4", "100000"])
    eq(order_lines(t.stats(whole)["_run"]), [], "the whole trace: order")
    with open(whole, "rb") as f:
        data = f.read()
    # Where a cut falls decides whether it separates a block's free from
    # its allocation: a cut that happens to keep a prefix consistent in
    # time (the writer flushed every thread's chunk at about the same
    # moment) is exact, rightly without a warning.  So several cuts: each
    # one is reported as truncated, every order warning names the cause,
    # and at least one of them (in practice all but a rare one) has one.
    cut = t.path("pipe-cut.ht")
    warned = 0
    for tenths in range(2, 10):
        with open(cut, "wb") as f:
            f.write(data[:len(data) * tenths // 10])
        r = t.tool(["stats", cut])
        eq(r.rc, 1, "stats of the trace cut at %d/10: %s" % (tenths, r.describe()))
        lines = order_lines(r)
        check(len(lines) <= 1, "cut at %d/10: more than one order warning:\n%s"
              % (tenths, r.stderr))
        if not lines:
            continue
        warned += 1
        check("(events missing from a trace that is cut, damaged or was not closed, or calls "
              "hidden from the tracer)" in r.stderr,
              "cut at %d/10: the cause:\n%s" % (tenths, r.stderr))
    check(warned >= 1, "no cut of 8 gave an order warning")


@case(timeout=240, labels=("analyzers",))
def test_order_hidden_calls_counted(t):
    """Calls hidden from the tracer (glibc's __libc_malloc, __libc_free)
    in a program of two threads, around stop/start and pause/resume
    (tests/progs/hider.c): the addresses out of step are counted as the
    program counts them, the same by every analyzer.  The analyzers that
    keep the live blocks (stats, leaks, top, heap, timeline, flamegraph,
    report, export pprof) make the checks in their own lookups; the others
    (dump, events, convert, export perfetto/massif/csv, diff) leave them to
    the reader's set (ht_reader__hand_over_check): both follow the rule
    that blocks allocated before recording went back on are not judged."""
    trace = t.path("hider.ht")
    r = t.record(trace, [t.prog("hider")])
    m = re.search(r"^expected: (\d+)$", r.stdout, re.M)
    check(m, "hider: no expected count:\n" + r.stdout)
    n = int(m.group(1))
    check(n >= 1, "hider: expected %d (the hidden malloc's free counts anyway)" % n)
    runs, html, massif = analyzers(t, trace, "hider")
    with t.soft():
        for cmd, r, d in runs:
            want = 2 if cmd == "diff" else 1
            eq(order_lines(r), [(trace, n)] * want, "%s: order warning lines on stderr:\n%s"
               % (cmd, r.stderr))
            if d is None:
                continue
            got = json_orders(d)
            check(got, "%s: no order_exact in its JSON" % cmd)
            for where, exact, count in got:
                total = 2 * n if cmd == "diff" and where == "." else n
                eq((exact, count), (False, total), "%s: %s order" % (cmd, where))
        check("the order of %d events" % n in html, "report: no order note with %d" % n)
        # the hidden malloc's free: an unknown free, which stats put down
        # to "before recording started" alone (probe S)
        text = t.tool(["stats", "-q", trace]).stdout
        check(re.search(r"^unknown frees +\d+ \(blocks allocated before recording started, "
                        r"or while it was off, or by calls hidden from the tracer\)$", text,
                        re.M),
              "stats' unknown frees line:\n" + text)


@case(timeout=240, labels=("analyzers",))
def test_order_exact(t):
    """A single-threaded program recorded now, and a fork child's trace
    (frees of blocks its parent allocated): exact, and no analyzer says
    otherwise."""
    out = t.path("one.ht")
    t.record(out, [t.prog("api_all")])
    traces = [out, os.path.join(CORPUS, "real-forker-child.ht")]
    for trace in traces:
        name = os.path.basename(trace)
        s = t.stats(trace)
        if trace == out:
            eq(s["threads"], 1, "api_all: threads")
        eq((s["order_exact"], s["order_events_concerned"]), (True, 0), "%s: order" % name)
        runs, html, massif = analyzers(t, trace, name)
        with t.soft():
            for cmd, r, d in runs:
                eq(order_lines(r), [], "%s %s: order warning on stderr:\n%s"
                   % (cmd, name, r.stderr))
                check("not exact" not in r.stderr, "%s %s: stderr:\n%s" % (cmd, name, r.stderr))
                if d is None:
                    continue
                got = json_orders(d)
                check(got, "%s %s: no order_exact in its JSON" % (cmd, name))
                for where, exact, count in got:
                    eq((exact, count), (True, 0), "%s %s: %s order" % (cmd, name, where))
            check('id="order-warning"' not in html, "report %s: order note" % name)


def with_flags(t, src, name, set_bits):
    """A copy of src with header flag bits set."""
    with open(src, "rb") as f:
        data = bytearray(f.read())
    flags = struct.unpack_from("<Q", data, 16)[0]
    struct.pack_into("<Q", data, 16, flags | set_bits)
    dst = t.path(name)
    with open(dst, "wb") as f:
        f.write(data)
    return dst


def out_of_step(path):
    """Addresses out of step with the (ts, tid, seq) order, counted by the
    independent decoder: handed out while live, freed while not live (the
    reader's rules for a multi-threaded trace without control events)."""
    tr = htformat.Trace(path)
    live, n = set(), 0
    for e in tr.events:
        name = htformat.KIND_NAMES[e.kind]
        check(name not in ("realloc", "reallocarray", "control"),
              "%s: %s events: this count does not cover them" % (path, name))
        if name == "free":
            p = e.vals[0]
            if p:
                n += p not in live
                live.discard(p)
        elif name in ("malloc", "calloc", "memalign", "posix_memalign", "aligned_alloc",
                      "valloc", "pvalloc"):
            p = e.vals[htformat.KINDS[e.kind][2]]
            if p:
                n += p in live
                live.add(p)
    return n


@case(timeout=120, labels=("analyzers",))
def test_order_anomaly(t):
    """HT_FILE_F_ORDERED: the reader merges by (ts, tid, seq) alone, without
    holds.  A trace that claims it but holds addresses out of step (an older
    trace whose undated events the holds put right) is caught by its
    addresses, as many as the independent decoder counts; a trace that
    claims it truly is exact; a sampled one is not judged by addresses."""
    bad = with_flags(t, OLDER[0], "claims-ordered.ht", FILE_F_ORDERED)
    want = out_of_step(bad)
    check(want > 0, "the crafted trace has no address out of step")
    s = t.stats(bad)
    with t.soft():
        eq(s["order_exact"], False, "claims-ordered: order_exact")
        eq(s["order_events_concerned"], want, "claims-ordered: order_events_concerned")
        eq(s["unknown_frees"] + s["address_reuse_while_live"], want,
           "claims-ordered: stats' own counts")
        eq(order_lines(s["_run"]), [(bad, want)], "claims-ordered: stderr:\n" + s["_run"].stderr)
        check("calls hidden from the tracer" in s["_run"].stderr, "claims-ordered: why")
        for cmd in (["leaks", "--json", bad], ["convert", "--json", t.path("c.wl"), bad]):
            r = t.tool(cmd)
            d = json.loads(r.stdout)
            eq((d["order_exact"], d["order_events_concerned"]), (False, want), cmd[0])
            eq(order_lines(r), [(bad, want)], "%s: stderr:\n%s" % (cmd[0], r.stderr))
    # without the flag the holds put it right, and the undated events say
    # the order is a guess
    s0 = t.stats(OLDER[0])
    eq((s0["unknown_frees"], s0["address_reuse_while_live"]), (0, 0), "holds")
    check(s0["order_events_concerned"] > 0, "older trace: not exact")
    # a trace that claims the flag and is in order: exact (no holds needed)
    good = with_flags(t, OLDER[2], "ordered-ring.ht", FILE_F_ORDERED)
    eq(out_of_step(good), 0, "ordered ring: addresses out of step")
    s = t.stats(good)
    eq((s["order_exact"], s["order_events_concerned"]), (True, 0), "ordered ring: order")
    eq(order_lines(s["_run"]), [], "ordered ring: stderr")
    # sampled: frees of blocks never recorded are expected; not judged
    sampled = with_flags(t, OLDER[0], "sampled.ht", FILE_F_ORDERED | FILE_F_SAMPLED)
    s = t.stats(sampled)
    eq((s["order_exact"], s["order_events_concerned"]), (True, 0), "sampled: order")
