"""leaks, diff and stats at the end of a trace, and on one that is cut short
or damaged: `leaks --older` and `--interval` count to the trace's end, not
to its last event (a program idles after its last heap call); a time past
where a cut trace's events stop, or past where one thread's stop, is said
to be, in leaks and diff, text and JSON, with timeline's figures; stats
gives the cut or damage as the likely reason for unknown frees."""

import json

import htformat
from cases_reader import fmt_ns
from htlib import case, check, compile_c, eq

# One block of 1000 bytes, then 1.2 s without a heap call.
IDLER_C = r"""
#include <stdlib.h>
#include <unistd.h>

static void *volatile keep;

int main(void)
{
	keep = malloc(1000);
	usleep(1200 * 1000);
	return 0;
}
"""

# 50,000 blocks of 64 bytes kept for 400 ms, then freed: at any time of
# the wait, all 50,000 are live; at the end none.
PLATEAU_C = r"""
#include <stdlib.h>
#include <unistd.h>

#define N 50000
static void *volatile keep[N];

int main(void)
{
	for (int i = 0; i < N; i++)
		keep[i] = malloc(64);
	usleep(400 * 1000);
	for (int i = 0; i < N; i++)
		free(keep[i]);
	return 0;
}
"""


def events_chunks(path):
    """(offset, header) of the trace's event chunks, in file order."""
    with open(path, "rb") as f:
        data = f.read()
    tr = htformat.Trace(path)
    chunks = htformat.chunk_headers(data, tr.sections[htformat.SEC_CHUNKS][0])
    return data, [c for c in chunks if c[1][1] == htformat.CHUNK_EVENTS]


def json_of(t, args, rc):
    r = t.tool(args)
    eq(r.rc, rc, "exit status of `heaptrail %s`:\n%s" % (" ".join(args), r.describe()))
    return json.loads(r.stdout), r


def timeline_damage(t, path):
    """timeline's account of where a damaged trace's events stop."""
    j, _ = json_of(t, ["timeline", "--json", "-q", "--bins", "20", "-o", "-", path], 1)
    eq(j["complete"], False, "timeline: complete")
    return j


@case(timeout=60, labels=("analyzers",))
def test_leaks_older_interval_to_trace_end(t):
    """A program that allocates 1000 bytes, then idles 1.2 s: `leaks --older
    1s` said "0 B in 0 blocks ... allocated at least 1.000 s before" (the
    age was counted to the last event, 0.2 ms in), `--interval 250ms`
    printed no step at all (a step was taken only when a later event came),
    and the JSON's at_ns was the last event's time.  Now they count to the
    trace's end, its duration: the block is 1.2 s old, and every step up to
    the end is there."""
    exe = compile_c(t, "idler", IDLER_C)
    out = t.path("idle.ht")
    t.record(out, [exe])
    s = t.stats(out)
    dur = s["duration_ns"]
    check(dur >= 1200 * 1000 * 1000, "the trace lasts %d ns" % dur)
    o, r = json_of(t, ["leaks", "--json", "--older", "1s", out], 0)
    eq((o["leaked_bytes"], o["leaked_blocks"], o["at_ns"]), (1000, 1, dur),
       "--older 1s: leaked bytes, blocks, at_ns (the trace's duration)")
    first = t.tool(["leaks", "--older", "1s", out]).stdout.splitlines()[0]
    check("1000 B in 1 block not freed at exit, allocated at least 1.000 s before" in first,
          "--older 1s, the first line: %r" % first)
    iv, _ = json_of(t, ["leaks", "--json", "--interval", "250ms", out], 0)
    steps = [(x["at_ns"], x["leaked_bytes"], x["leaked_blocks"]) for x in iv.get("intervals", [])]
    want = [(k * 250 * 1000 * 1000, 1000, 1) for k in range(1, dur // (250 * 1000 * 1000) + 1)]
    eq(steps, want, "--interval 250ms: the steps (time, bytes, blocks) up to the trace's end")
    text = t.tool(["leaks", "-q", "--interval", "250ms", out]).stdout
    eq(text.count("1000 B in 1 block live"), len(want), "steps in the text:\n" + text)


def cut_plateau(t):
    """A trace of PLATEAU_C cut inside an event chunk of its allocations:
    its events stop a few ms in, its header says it lasts 400 ms.
    Returns (path, the header's duration, timeline's read_to_ns)."""
    exe = compile_c(t, "plateau", PLATEAU_C)
    out = t.path("plateau.ht")
    t.run([t.heaptrail, "record", "-q", "--flush-interval", "20ms", "-o", out, "--", exe],
          check_rc=0)
    dur = t.stats(out)["duration_ns"]
    data, events = events_chunks(out)
    check(len(events) >= 4, "the trace has only %d event chunks" % len(events))
    off, h = events[len(events) // 4]
    eq(h[3], events[0][1][3], "the thread of the chunk cut")
    check(0 < h[7] < 50000, "the chunk cut starts at event %d, not among the mallocs" % h[7])
    cut = t.path("cut.ht")
    with open(cut, "wb") as f:
        f.write(data[:off + htformat.CHUNK.size + h[5] // 2])
    tl = timeline_damage(t, cut)
    read_to = tl["read_to_ns"]
    eq(tl["exact_to_ns"], read_to, "timeline: one thread, exact_to_ns = read_to_ns")
    check(read_to * 10 < dur, "events read to %d ns of %d" % (read_to, dur))
    return cut, dur, read_to


@case(timeout=90, labels=("analyzers",))
def test_leaks_at_past_cut_end(t):
    """`leaks --at T` on a cut trace, T after its events stop (but within
    the header's duration): it said "N in M blocks not freed at T" with no
    word of the cut, while the figures were those of where the events stop.
    Now the first line says so ("by the trace's end at R, before --at T (the
    trace is cut short or damaged: ...)"), and the JSON has at_ns = R,
    complete false, read_to_ns and exact_to_ns (timeline's) and
    at_past_read_to."""
    cut, dur, read_to = cut_plateau(t)
    at = dur // 2
    r = t.tool(["leaks", "-q", "--at", "%dns" % at, cut])
    eq(r.rc, 1, "exit status on the cut trace:\n" + r.describe())
    first = r.stdout.splitlines()[0]
    want = (" not freed by the trace's end at %s, before --at %s (the trace is cut short or "
            "damaged: frees after it are not in it)," % (fmt_ns(read_to), fmt_ns(at)))
    check(want in first, "leaks --at past the cut, the first line:\n%s\nwithout\n%s"
          % (first, want))
    j, _ = json_of(t, ["leaks", "-q", "--json", "--at", "%dns" % at, cut], 1)
    eq((j["at_ns"], j.get("complete"), j.get("read_to_ns"), j.get("exact_to_ns"),
        j.get("at_past_read_to")), (read_to, False, read_to, read_to, True),
       "leaks --json --at past the cut: at_ns, complete, read_to_ns, exact_to_ns, "
       "at_past_read_to")
    check("missing_thread" not in j, "one thread: missing_thread %s" % j.get("missing_thread"))
    # before where the events stop: the time as it was, no word of the cut
    early = read_to // 2
    j, _ = json_of(t, ["leaks", "-q", "--json", "--at", "%dns" % early, cut], 1)
    eq((j["at_ns"], j.get("at_past_read_to")), (early, False), "--at before the cut")
    first = t.tool(["leaks", "-q", "--at", "%dns" % early, cut]).stdout.splitlines()[0]
    check(" not freed at %s, from " % fmt_ns(early) in first,
          "--at before the cut, the first line: %r" % first)
    # a complete trace keeps its JSON as it was (no complete member)
    whole, _ = json_of(t, ["leaks", "--json", "--at", "%dns" % at, t.path("plateau.ht")], 0)
    eq((whole["at_ns"], whole["leaked_blocks"], "complete" in whole), (at, 50000, False),
       "the whole trace at the same time: at_ns, blocks, a complete member")


@case(timeout=90, labels=("analyzers",))
def test_diff_at_past_cut_end(t):
    """`diff --at T1 --at T2` on a cut trace, T2 after its events stop: the
    side was "at T2" with no word of the cut, and "end" was the header's
    duration (400 ms) with the figures of where the events stop.  Now the
    side says "at T2: what was live by the trace's end at R (the trace is
    cut short or damaged: ...)", "end" is R and says so, and each side's
    JSON has complete, read_to_ns, exact_to_ns and at_past_read_to."""
    cut, dur, read_to = cut_plateau(t)
    early, late = read_to // 2, dur // 2
    r = t.tool(["diff", "-q", "--at", "%dns" % early, "--at", "%dns" % late, cut])
    eq(r.rc, 1, "exit status on the cut trace:\n" + r.describe())
    lines = r.stdout.splitlines()
    check(lines[0].endswith(") at %s" % fmt_ns(early)), "the before side: %r" % lines[0])
    want = (") at %s: what was live by the trace's end at %s (the trace is cut short or "
            "damaged: frees after it are not in it)" % (fmt_ns(late), fmt_ns(read_to)))
    check(lines[1].endswith(want), "the after side:\n%s\nnot ending in\n%s" % (lines[1], want))
    j, _ = json_of(t, ["diff", "-q", "--json", "--at", "%dns" % early, "--at", "%dns" % late,
                       cut], 1)
    for side, at, past in (("before", early, False), ("after", late, True)):
        x = j[side]
        eq((x["at_ns"], x.get("complete"), x.get("read_to_ns"), x.get("exact_to_ns"),
            x.get("at_past_read_to")), (at, False, read_to, read_to, past),
           "%s: at_ns, complete, read_to_ns, exact_to_ns, at_past_read_to" % side)
    # "end": where the events stop, said so
    r = t.tool(["diff", "-q", "--at", "start", "--at", "end", cut])
    after = r.stdout.splitlines()[1]
    want = (") at the end (%s), where the trace is cut short or damaged: frees after it are "
            "not in it" % fmt_ns(read_to))
    check(after.endswith(want), "--at end, the after side:\n%s\nnot ending in\n%s"
          % (after, want))
    j, _ = json_of(t, ["diff", "-q", "--json", "--at", "start", "--at", "end", cut], 1)
    eq((j["after"]["at_ns"], j["after"]["at"], j["after"]["at_past_read_to"]),
       (read_to, "end", False), "--at end: at_ns, at, at_past_read_to")


def damaged_handoff(t):
    """A trace of handoff (two threads, each frees what the other
    allocates) with one compressed chunk of one thread damaged a third of
    the way through its chunks.  Returns (path, that thread)."""
    out = t.path("handoff.ht")
    t.run([t.heaptrail, "record", "-q", "--flush-interval", "20ms", "-o", out, "--",
           t.prog("handoff"), "100000"], check_rc=0)
    data, events = events_chunks(out)
    by_tid = {}
    for off, h in events:
        if h[2] & htformat.F_ZSTD:
            by_tid.setdefault(h[3], []).append((off, h))
    tid, mine = max(by_tid.items(), key=lambda kv: len(kv[1]))
    check(len(mine) >= 6, "thread %d has only %d compressed chunks" % (tid, len(mine)))
    off, h = mine[len(mine) // 3]
    b = bytearray(data)
    pos = off + htformat.CHUNK.size + h[5] // 2
    for i in range(pos, pos + 16):
        b[i] ^= 0xff
    bad = t.path("handoff-bad.ht")
    with open(bad, "wb") as f:
        f.write(b)
    return bad, tid


@case(timeout=120, labels=("analyzers",))
def test_stats_unknown_frees_damaged(t):
    """One thread's chunk damaged in handoff's trace: the other thread's
    frees of the blocks allocated in the lost events are unknown frees.
    stats explained them as "(blocks allocated before recording started)",
    although recording started before main; now it gives the damage as the
    likely reason.  leaks --at after that thread's events stop names it,
    with timeline's exact_to_ns."""
    bad, tid = damaged_handoff(t)
    s = t.stats(bad, rc=1)
    check(s["unknown_frees"] > 0, "no unknown frees in the damaged trace")
    text = t.tool(["stats", "-q", bad]).stdout
    want = ("unknown frees    %d (blocks allocated in the part of the trace that is cut off or "
            "damaged, most likely; or before recording started, or by calls hidden from the "
            "tracer)\n" % s["unknown_frees"])
    check(want in text, "stats' unknown frees line is not\n%s\n%s" % (want, text))
    tl = timeline_damage(t, bad)
    eq(tl.get("missing_thread"), tid, "timeline: missing_thread")
    stop = tl["exact_to_ns"]
    at = (stop + tl["read_to_ns"]) // 2
    first = t.tool(["leaks", "-q", "--at", "%dns" % at, bad]).stdout.splitlines()[0]
    want = (" not freed at %s (the trace is cut short or damaged: thread %d's events stop at %s, "
            "and its frees after that may be missing)," % (fmt_ns(at), tid, fmt_ns(stop)))
    check(want in first, "leaks --at after the thread's events stop, the first line:\n%s\n"
          "without\n%s" % (first, want))
    j, _ = json_of(t, ["leaks", "-q", "--json", "--at", "%dns" % at, bad], 1)
    eq((j["at_ns"], j.get("complete"), j.get("missing_thread"), j.get("exact_to_ns"),
        j.get("at_past_read_to")), (at, False, tid, stop, False),
       "leaks --json: at_ns, complete, missing_thread, exact_to_ns, at_past_read_to")
