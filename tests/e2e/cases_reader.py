"""The analyzers on bad input: missing, empty, directory, random bytes,
truncated and corrupted traces, and usage errors.  Data errors exit 1 with
one line naming the file (and for a trace, the offset); usage errors exit 2;
nothing crashes."""

import json
import os
import random
import re

import htformat
from htlib import Failure, case, check, eq, expect_calls, skip, which

HEADER_SIZE = htformat.HEADER.size
CHUNK_SIZE = htformat.CHUNK.size


def error_lines(run, path):
    """The error lines on stderr that name the file (warnings aside)."""
    return [l for l in run.stderr.splitlines() if path in l and "error" in l.lower()]


def data_error(t, args, path, what):
    r = t.tool(args)
    eq(r.rc, 1, "%s: exit status of `heaptrail %s`:\n%s" % (what, " ".join(args), r.describe()))
    check(r.rc < 128, "crashed")
    lines = error_lines(r, path)
    eq(len(lines), 1, "%s: lines on stderr naming %s:\n%s" % (what, path, r.stderr))
    return r, lines[0]


@case()
def test_bad_files(t):
    missing = t.path("missing.ht")
    empty = t.path("empty.ht")
    open(empty, "wb").close()
    directory = t.path("dir.ht")
    os.mkdir(directory)
    rnd = t.path("random.ht")
    with open(rnd, "wb") as f:
        f.write(random.Random(7).randbytes(100000))
    magic_only = t.path("magic.ht")
    with open(magic_only, "wb") as f:
        f.write(htformat.MAGIC + b"\0" * 16)
    text = t.path("text.ht")
    with open(text, "w") as f:
        f.write("this is not a trace\n" * 100)
    for path in (missing, empty, directory, rnd, magic_only, text):
        for cmd in (["stats", path], ["stats", path, "--json"], ["dump", path]):
            data_error(t, cmd, path, os.path.basename(path))


def good_trace(t):
    out = t.path("good.ht")
    t.traced(out, [t.prog("threads"), "3", "20000"])
    s = t.stats(out)
    return out, s


def chunk_offsets(path):
    """(offset, header tuple) of every chunk, from the header's chunk section."""
    with open(path, "rb") as f:
        data = f.read()
    tr = htformat.Trace(path)
    return data, htformat.chunk_headers(data, tr.sections[htformat.SEC_CHUNKS][0])


@case()
def test_truncated(t):
    """Truncated copies of a good trace: partial results, complete=false,
    exit 1, a one-line error naming the file and an offset; stats and
    leaks name the blocks live where it ends "by the trace's end", not "at
    exit"."""
    out, full = good_trace(t)
    data, chunks = chunk_offsets(out)
    events = [c for c in chunks if c[1][1] == htformat.CHUNK_EVENTS]
    check(len(events) >= 4, "the trace has only %d event chunks" % len(events))
    mid = events[len(events) // 2][0]
    cuts = {
        "inside the header": HEADER_SIZE // 2,
        "between the header and the chunks": (HEADER_SIZE + chunks[0][0]) // 2,
        "after the header": chunks[0][0],
        "inside a chunk header": mid + CHUNK_SIZE // 2,
        "inside a chunk payload": mid + CHUNK_SIZE + events[len(events) // 2][1][5] // 2,
        "at a chunk boundary": mid,
        "before the index": chunks[-1][0] if chunks[-1][1][1] == htformat.CHUNK_INDEX
        else len(data) - 1,
        "one byte short": len(data) - 1,
    }
    problems = []
    for what, size in sorted(cuts.items(), key=lambda kv: kv[1]):
        try:
            check_cut(t, data, chunks, mid, full, what, size)
        except Failure as e:
            problems.append("cut %s (%d of %d bytes): %s" % (what, size, len(data), e))
    check(not problems, "\n".join(problems))


def check_cut(t, data, chunks, mid, full, what, size):
    path = t.path("cut-%d.ht" % size)
    with open(path, "wb") as f:
        f.write(data[:size])
    if size < chunks[0][0]:
        r, line = data_error(t, ["stats", path, "--json"], path, what)
        # said as a cut file, not as a corrupt header
        check(line.endswith(": truncated") and "corrupt" not in line, "%s: %s" % (what, line))
        return
    s = t.stats(path, rc=1)
    eq(s["complete"], False, "%s (%d bytes): complete" % (what, size))
    r = s["_run"]
    lines = error_lines(r, path)
    eq(len(lines), 1, "%s: error lines naming the file:\n%s" % (what, r.stderr))
    check(any(ch.isdigit() for ch in lines[0].replace(path, "")),
          "%s: the error gives no offset: %r" % (what, lines[0]))
    check(s["events"] <= full["events"], "%s: more events than the whole" % what)
    check(s["calls"]["malloc"] <= full["calls"]["malloc"], "%s: mallocs" % what)
    if size > mid + CHUNK_SIZE:
        check(s["events"] > 0, "%s: no partial results" % what)
    if size >= chunks[-1][0] and chunks[-1][1][1] == htformat.CHUNK_INDEX:
        # only the index is missing: every event is there
        eq(s["events"], full["events"], "%s: events" % what)
        expect_calls(s, {k: v for k, v in full["calls"].items() if v})
    # dump prints what it could read, then fails the same way
    r = t.tool(["dump", path])
    eq(r.rc, 1, "%s: dump exit status" % what)
    eq(len([l for l in r.stdout.splitlines() if l.strip()]), s["events"],
       "%s: dump lines vs stats events" % what)
    eq(len(error_lines(r, path)), 1, "%s: dump error lines" % what)
    # the blocks live where the file ends are not said to be live "at exit"
    text = t.tool(["stats", path]).stdout
    check(re.search(r"^live at the end  ", text, re.M), "%s: stats' live line:\n%s" % (what, text))
    first = (t.tool(["leaks", path]).stdout.splitlines() or [""])[0]
    check(" not freed by the trace's end (the trace is cut short or damaged" in first,
          "%s: leaks' first line: %r" % (what, first))


@case()
def test_corrupt_chunk(t):
    """A flipped byte in a chunk: detected (exit 1, one line with the file
    and an offset) where the format can tell, never a crash."""
    out, full = good_trace(t)
    data, chunks = chunk_offsets(out)
    events = [c for c in chunks if c[1][1] == htformat.CHUNK_EVENTS]
    off, h = events[len(events) // 2]

    def variant(name, pos, xor):
        b = bytearray(data)
        b[pos] ^= xor
        path = t.path(name + ".ht")
        with open(path, "wb") as f:
            f.write(b)
        return path

    # detectable: chunk magic, chunk type, sizes that disagree with the payload
    for name, pos in (("magic", off), ("type", off + 4), ("comp_size", off + 16 + 1),
                      ("raw_size", off + 20)):
        path = variant(name, pos, 0x40)
        s = t.stats(path, rc=1)
        eq(s["complete"], False, "%s flipped: complete" % name)
        lines = error_lines(s["_run"], path)
        eq(len(lines), 1, "%s flipped: error lines naming the file:\n%s"
           % (name, s["_run"].stderr))
        check(s["events"] < full["events"] or name == "type",
              "%s flipped: all events read" % name)
    # inside the payload: maybe detected, maybe not; never a crash
    rng = random.Random(11)
    for i in range(8):
        pos = off + CHUNK_SIZE + rng.randrange(h[5])
        path = variant("payload%d" % i, pos, 1 << rng.randrange(8))
        for cmd in (["stats", path, "--json"], ["dump", path]):
            r = t.tool(cmd)
            check(r.rc in (0, 1), "payload flip at %d: `%s` exit %d:\n%s"
                  % (pos, " ".join(cmd), r.rc, r.stderr[-2000:]))
            if r.rc == 1:
                eq(len(error_lines(r, path)), 1, "payload flip: error lines")


@case()
def test_usage_errors(t):
    out, _ = good_trace(t)
    for args in ([], ["frobnicate"], ["stats"], ["dump"], ["stats", out, "--nope"],
                 ["dump", out, "--kind", "nosuchkind"], ["dump", out, "--tid", "abc"],
                 ["dump", out, "--from", "later"], ["stats", out, out, "--json", "--x"]):
        with t.soft():
            r = t.tool(args)
            eq(r.rc, 2, "`heaptrail %s` exit status" % " ".join(args))
            check(r.stderr.strip() != "", "`heaptrail %s`: no message" % " ".join(args))
    with t.soft():
        r = t.tool(["record"])
        eq(r.rc, 2, "`heaptrail record` without a command")


@case()
def test_reader_regressions(t):
    """Inputs that once made the reader lose events or misread
    (tests/fuzz/regressions/logic-*): every event comes back, or a warning
    says which were skipped."""
    reg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "regressions")

    def stats(name):
        path = os.path.join(reg, name)
        events = sum(h[4] for _, h in chunk_offsets(path)[1] if h[1] == htformat.CHUNK_EVENTS)
        return t.stats(path), events

    # more than 64 threads, one starting in a continuation chunk: parked
    # and re-decoded from its SYNC chunk, nothing lost
    s, announced = stats("logic-parked-stream-loses-events.ht")
    eq(s["events"], announced, "parked stream: events")
    eq(s["events"], 67, "parked stream: events")
    # an empty chunk after a full one: no stale record decoded again
    s, announced = stats("logic-empty-chunk-decodes-stale-bytes.ht")
    eq(s["complete"], True, "empty chunk: complete")
    eq(s["events"], announced, "empty chunk: events")
    # a thread whose first chunk lost its SYNC flag: skipped, with a warning
    path = os.path.join(reg, "logic-chunk-without-sync-flag-dropped-silently.ht")
    s = t.stats(path)
    eq(s["events"], 0, "chunk without its start: events")
    check("skipped" in s["_run"].stderr and "offset" in s["_run"].stderr,
          "chunk without its start: no warning that says so:\n" + s["_run"].stderr)


# Two threads (with "two"; else the main thread alone) each allocating 200
# blocks of 10000 bytes one a millisecond, then freeing them one a
# millisecond: recorded with a short flush interval, each thread's events
# span many chunks, and both threads run to the end.
RAMPS_SRC = r"""
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#define N 200
static void *ramp(void *arg)
{
	struct timespec ms = {0, 1000000};
	void *b[N];
	for (int i = 0; i < N; i++) {
		if (!(b[i] = malloc(10000)))
			abort();
		nanosleep(&ms, NULL);
	}
	for (int i = 0; i < N; i++) {
		free(b[i]);
		nanosleep(&ms, NULL);
	}
	return arg;
}
int main(int argc, char **argv)
{
	pthread_t t;
	int two = argc > 1;
	(void)argv;
	if (two && pthread_create(&t, NULL, ramp, NULL))
		return 1;
	ramp(NULL);
	if (two)
		pthread_join(t, NULL);
	return 0;
}
"""


def fmt_ns(ns):
    """As heaptrail prints a time (src/common/util.c, ht_fmt_ns)."""
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= div:
            return "%.3f %s" % (ns / div, unit)
    return "%d ns" % ns


def damaged_ramps(t, name, args):
    """A trace of the ramps program with one compressed chunk damaged in
    its middle: a chunk a third of the way through its thread's chunks.
    Returns (path, the damaged chunk's thread)."""
    gcc = which("gcc")
    if not gcc:
        skip("gcc is not installed")
    src, exe = t.path("ramps.c"), t.path("ramps")
    if not os.path.exists(exe):
        with open(src, "w") as f:
            f.write(RAMPS_SRC)
        t.run([gcc, "-O0", "-fno-builtin", "-pthread", "-o", exe, src], check_rc=0)
    out = t.path(name + ".ht")
    t.run([t.heaptrail, "record", "-q", "--flush-interval", "20ms", "-o", out, "--", exe]
          + list(args), check_rc=0)
    data, chunks = chunk_offsets(out)
    by_tid = {}
    for off, h in chunks:
        if h[1] == htformat.CHUNK_EVENTS and h[2] & 2:  # (HT_CHUNK_F_ZSTD)
            by_tid.setdefault(h[3], []).append((off, h))
    tid, mine = max(by_tid.items(), key=lambda kv: len(kv[1]))
    check(len(mine) >= 6, "thread %d has only %d compressed chunks" % (tid, len(mine)))
    off, h = mine[len(mine) // 3]
    b = bytearray(data)
    pos = off + CHUNK_SIZE + h[5] // 2
    for i in range(pos, pos + 16):
        b[i] ^= 0xff
    bad = t.path(name + "-bad.ht")
    with open(bad, "wb") as f:
        f.write(b)
    return bad, tid


@case(timeout=120, labels=("analyzers",))
def test_corrupt_chunk_one_thread(t):
    """One thread's chunk damaged in a two-thread trace: the reader ends
    that thread's stream there and reads the other thread on to its end
    (docs/FORMAT.md); the error line said "(results above cover the
    events before it)", false then (the figures after it lack that
    thread's frees), and with -q it was the only line.  Now it names the
    thread, the time of its last event read and how far the other thread
    was read, with and without -q, -j 1 and -j 2; timeline's JSON says the
    same.  A single-thread trace keeps the old words, true there."""
    bad, tid = damaged_ramps(t, "two", ["two"])
    r = t.tool(["dump", "--json", bad])
    eq(r.rc, 1, "dump of the damaged trace:\n" + r.describe())
    evs = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    last_t = max(e["time_ns"] for e in evs if e["tid"] == tid)
    later = [e for e in evs if e["tid"] != tid and e["time_ns"] > last_t]
    check(len(later) > 100, "%d events of the other thread after the damage" % len(later))
    last = evs[-1]["time_ns"]
    want = ("(thread %d's events after %s are missing; the other threads were read on to %s, "
            "so the results from %s on, peaks, leaks and live bytes, may be wrong)"
            % (tid, fmt_ns(last_t), fmt_ns(last), fmt_ns(last_t)))
    for args in (["stats"], ["stats", "-q"], ["stats", "-q", "-j", "2"], ["leaks", "-q"]):
        r = t.tool(args + [bad])
        eq(r.rc, 1, "%s: exit status" % args)
        lines = error_lines(r, bad)
        eq(len(lines), 1, "%s: error lines:\n%s" % (args, r.stderr))
        check(lines[0].endswith("the trace is corrupt here " + want),
              "%s: the error line says\n%s\nnot\n... %s" % (args, lines[0], want))
        if "-q" in args:
            eq(len(r.heaptrail_lines()), 1, "%s: lines on stderr:\n%s" % (args, r.stderr))
    r = t.tool(["timeline", "--json", "-q", "--bins", "20", "-o", "-", bad])
    eq(r.rc, 1, "timeline of the damaged trace")
    j = json.loads(r.stdout)
    eq((j.get("complete"), j.get("missing_thread"), j.get("exact_to_ns"), j.get("bins_read")),
       (False, tid, last_t, 20), "timeline: complete, missing_thread, exact_to_ns, bins_read")
    # one thread: nothing is read past the damage, the old words hold
    bad1, _ = damaged_ramps(t, "one", [])
    r = t.tool(["stats", "-q", bad1])
    lines = error_lines(r, bad1)
    eq(len(lines), 1, "one thread: error lines:\n" + r.stderr)
    check(lines[0].endswith("(results above cover the events before it)"),
          "one thread: the error line: " + lines[0])
