"""Rewrites of damaged traces and the end of a recording whose writer does
not finish: `compact --fast` on a cut trace leaves it alone and says so
(it read past the end of the file: SIGBUS), plain `compact` keeps every
event the reader reads from a trace with a damaged chunk (it dropped
every chunk after it, of every thread), `record` waits for a stopped
writer process once and says what is so (2.5 minutes, and three wrong
lines), and counts the events of a damaged trace as the reader reads
them, naming the chunk that does not decompress."""

import os
import shutil
import signal
import struct
import subprocess
import time

from htlib import case, check, children, comm, compile_c, eq, fail, reap

import htformat as F

EVENTS = 1  # HT_CHUNK_EVENTS
ZSTD = 1    # HT_CHUNK_F_ZSTD


def event_chunks(path):
    """(offset, tid, nevents, flags, comp_size) of every event chunk of the
    trace at path, in file order."""
    with open(path, "rb") as f:
        data = f.read()
    start = F.HEADER.unpack_from(data, 0)[22 + 2 * F.SEC_CHUNKS]
    return [(off, h[3], h[4], h[2], h[5]) for off, h in F.chunk_headers(data, start)
            if h[1] == EVENTS]


def record_raw(t, out):
    """A trace of 3 threads of 20000 malloc/free pairs, its chunks raw."""
    t.run([t.heaptrail, "record", "-q", "--no-compact", "--zstd-level=0", "-o", out, "--",
           t.prog("threads"), "3", "20000"], check_rc=0)


def per_thread(s):
    return sorted((x["tid"], x["events"]) for x in s["per_thread"])


@case(timeout=120)
def test_compact_fast_cut_trace(t):
    """`compact --fast` on a trace cut at four points (inside a chunk's
    payload, inside a chunk header, at a chunk boundary, inside the index)
    leaves it as it was, byte for byte, says so in one error line naming
    why and what to run, and exits 1.  (Before: SIGBUS, exit 135, at some
    cut points, for it read the chunks up to where the header put the
    index, past the end of the file; at others exit 0 and "N events",
    chunks it never looked at.)"""
    out = t.path("raw.ht")
    record_raw(t, out)
    chunks = event_chunks(out)
    check(len(chunks) >= 4, "event chunks of the trace: %d" % len(chunks))
    off, _, _, _, size = chunks[len(chunks) // 2]
    index_at = os.path.getsize(out) - 20
    with open(out, "rb") as f:
        data = f.read()
    for what, cut in (("inside a payload", off + 32 + size // 2),
                      ("inside a chunk header", off + 10),
                      ("at a chunk boundary", off),
                      ("inside the index", index_at)):
        cutf = t.path("cut%d.ht" % cut)
        with open(cutf, "wb") as f:
            f.write(data[:cut])
        r = t.tool(["compact", "--fast", cutf])
        eq(r.rc, 1, "%s: exit status of compact --fast:\n%s" % (what, r.describe()))
        eq(r.heaptrail_lines(),
           ["heaptrail: error: %s: left as it was: it is damaged (the file ends before its "
            "index: cut); 'heaptrail stats %s' says what it holds, 'heaptrail compact %s' "
            "rewrites what can be read of it" % (cutf, cutf, cutf)],
           "%s: what compact --fast says" % what)
        with open(cutf, "rb") as f:
            check(f.read() == data[:cut], "%s: compact --fast changed the file" % what)


@case(timeout=120)
def test_compact_keeps_damaged_chunk(t):
    """A trace of 3 threads (compressed with `compact --fast`) with 8 bytes
    overwritten inside a compressed chunk after the first of a thread (the
    lowest tid that has one, not the last): the reader stops that thread
    there and reads
    every other to its end; `compact` keeps exactly what the reader read,
    thread by thread (the damaged chunk copied as it is, so that readers
    stop there as before), and says so.  (Before: it dropped every chunk
    after the damaged one, of every thread, said "the trace ends in a
    damaged chunk: kept what came before" and replaced the file: the
    other threads' events were lost.)"""
    out = t.path("threads.ht")
    record_raw(t, out)
    eq(t.tool(["compact", "--fast", "-q", out]).rc, 0, "compact --fast")
    chunks = event_chunks(out)
    tids = sorted(set(c[1] for c in chunks))
    # a compressed chunk after the first of a thread that is not the last
    # (compact --fast leaves a chunk raw when it is small or does not
    # shrink: which one varies from run to run)
    cands = [c for tid in tids[:-1] for c in [c for c in chunks if c[1] == tid][1:]
             if c[3] & ZSTD]
    check(cands, "no compressed chunk after a thread's first: %r" % chunks)
    off, tid, _, flags, size = cands[0]
    with open(out, "r+b") as f:
        f.seek(off + 32 + size // 2)
        f.write(b"\xff" * 8)
    before = t.stats(out, rc=None)
    check("offset %d: chunk of thread %d does not decompress" % (off, tid)
          in before["_run"].stderr, "stats of the damaged trace:\n" + before["_run"].describe())
    r = t.tool(["compact", out])
    eq(r.rc, 0, "compact:\n" + r.describe())
    eq(r.heaptrail_lines()[-1].split(" events")[1],
       " (1 damaged chunk, the first of thread %d, copied as it is: readers stop that thread "
       "there, as before)" % tid, "what compact says")
    after = t.stats(out, rc=None)
    eq(per_thread(after), per_thread(before), "events per thread before and after compact")
    eq(after["events"], before["events"], "events before and after compact")
    check("chunk of thread %d does not decompress" % tid in after["_run"].stderr,
          "stats after compact:\n" + after["_run"].describe())


STOPPABLE = r"""
#include <stdio.h>
#include <stdlib.h>
#include "heaptrail.h"
static void pairs(int n)
{
	for (int i = 0; i < n; i++) {
		void *volatile p = malloc(16 + i % 256);
		free(p);
	}
}
int main(void)
{
	char line[16];
	pairs(3000);
	heaptrail_sync();
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	pairs(3000);
	return 0;
}
"""


@case(timeout=120)
def test_record_writer_stopped(t):
    """The writer process stopped (SIGSTOP) while the program runs: the
    program ends (its exit waits 10 s for the writer), and record waits
    for the writer once (HEAPTRAIL_WAIT_WRITER_MS, 500 ms here), then says
    in one warning that the trace is not finished, that the writer (its
    pid) is stopped, and the events the file holds now, those stats
    reads; no other line (before: the wait was 30 s at each of five looks
    at the trace; then "could not compress ... the program N runs", "wrote
    N events", "its writer process died ... lost", and the writer taken
    for a child still running).  Once it goes on (SIGCONT), the trace is
    whole: nothing was lost, and it is closed as the program asked, not as
    an orphan (before: readers warned that the program ended without
    shutting the tracer down)."""
    prog = compile_c(t, "stoppable", STOPPABLE)
    out = t.path("st.ht")
    env = t.base_env({"HEAPTRAIL_WAIT_WRITER_MS": "500"})
    p = subprocess.Popen([t.heaptrail, "record", "-o", out, "--", prog], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=t.dir)
    writer = None
    try:
        eq(p.stdout.readline(), b"ready\n", "the program's first line")
        progs = [c for c in children(p.pid) if comm(c) == "stoppable"]
        eq(len(progs), 1, "the program")
        deadline = time.time() + 10
        while not writer and time.time() < deadline:
            w = [c for c in children(progs[0]) if comm(c) == "heaptrail-write"]
            writer = w[0] if w else None
            if not writer:
                time.sleep(0.01)
        check(writer, "no writer process")
        os.kill(writer, signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            _, err = p.communicate(b"go\n", timeout=40)
        except subprocess.TimeoutExpired:
            fail("record did not end within 40 s of the program's 10 (the writer stopped)")
        secs = time.monotonic() - t0
        err = err.decode("utf-8", "replace")
        lines = [l for l in err.splitlines() if l.startswith("heaptrail:")]
        eq(p.returncode, 0, "record's exit status:\n" + err)
        check(secs < 25, "record took %.1f s with the writer stopped" % secs)
        eq(len(lines), 1, "record's lines:\n" + err)
        now = t.run([t.heaptrail, "stats", "--json", out],
                    env={"HEAPTRAIL_WAIT_WRITER_MS": "0"})
        held = int(now.stdout.split('"events": ')[1].split(",")[0])
        pid = int(now.stdout.split('"pid": ')[1].split(",")[0])
        check("%s: the trace is not finished: its program (pid %d) has ended but its writer "
              "process still holds the file" % (out, pid) in now.stderr,
              "stats with the writer stopped: %r" % now.stderr)
        eq(lines[0],
           "heaptrail: warning: the trace %s is not finished: the program has ended, but the "
           "recorder's writer process (pid %d) is stopped ('kill -CONT %d' lets it finish); "
           "the file holds %d events from 1 thread so far, and the rest when that process "
           "has written them (nothing is lost; it is not compressed: 'heaptrail compact "
           "--fast %s' does it then)" % (out, writer, writer, held, out),
           "record's line")
        os.kill(writer, signal.SIGCONT)
        writer = None
        s = t.stats(out)
        check(s["closed"] and s["calls"]["malloc"] >= 6000 and s["events"] > held + 6000,
              "the trace once its writer went on: closed %s, %d mallocs, %d events"
              % (s["closed"], s["calls"]["malloc"], s["events"]))
        # the program shut the tracer down (it asked for the close): the
        # writer, late, does not close it as an orphan (before: every
        # reader warned "the program ended without shutting the tracer
        # down")
        eq(s["orphaned"], False, "orphaned")
        r = t.tool(["stats", out])
        eq((r.rc, r.stderr), (0, ""), "stats once the writer went on")
    finally:
        if writer:
            os.kill(writer, signal.SIGCONT)
        reap(p)


SCRIBBLE2 = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "heaptrail.h"
#include "%(src)s/trace/format.h"
int main(int argc, char **argv)
{
	for (int i = 0; i < 20000; i++) {
		void *volatile p = malloc(16 + i %% 256);
		free(p);
	}
	heaptrail_sync();
	int fd = open(argv[1], O_RDWR);
	struct ht_file_header h;
	struct ht_chunk_header c;
	if (fd < 0 || pread(fd, &h, sizeof(h), 0) != sizeof(h))
		return 2;
	unsigned long long off = h.sec[HT_SEC_CHUNKS].offset, first = 0, last = 0;
	while (pread(fd, &c, sizeof(c), off) == sizeof(c) && c.magic == HT_CHUNK_MAGIC) {
		if (c.type == HT_CHUNK_EVENTS && !first)
			first = off;
		else if (c.type == HT_CHUNK_EVENTS)
			last = off;
		off += sizeof(c) + c.comp_size;
	}
	if (!first || !last || pread(fd, &c, sizeof(c), first) != sizeof(c))
		return 3;
	/* the first chunk: said to be compressed, and is not one (or is
	 * one no more): it does not decompress; the last: not a chunk */
	c.flags |= HT_CHUNK_F_ZSTD;
	static char zeros[64];
	if (pwrite(fd, &c, sizeof(c), first) != sizeof(c) ||
	    pwrite(fd, zeros, sizeof(zeros), first + sizeof(c)) != sizeof(zeros) ||
	    pwrite(fd, "SCRB", 4, last) != 4)
		return 4;
	printf("first: %%llu last: %%llu\n", first, last);
	return 0;
}
"""


@case(timeout=120)
def test_record_damaged_count(t):
    """A program that damages its own trace while it is recorded: its first
    event chunk made one that does not decompress, its last one's header
    overwritten.  record says the trace is damaged, names both (the
    chunk header where reading stops, and the chunk before it that does
    not decompress), and the events that can be read are those stats
    reads: 0 from the first chunk.  (Before: it counted the events the
    chunks' headers hold, and the error named the header only, while
    stats and dump read nothing from that chunk.)"""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")
    prog = compile_c(t, "scribble2", SCRIBBLE2 % {"src": os.path.abspath(src)})
    out = t.path("sc.ht")
    r = t.run([t.heaptrail, "record", "-o", out, "--", prog, out])
    eq(r.rc, 125, "record's exit status:\n" + r.describe())
    first, last = (int(x) for x in r.stdout.split()[1::2])
    lines = r.heaptrail_lines()
    eq(len(lines), 1, "record's lines:\n" + r.describe())
    l = lines[0]
    check("offset %d: not a chunk header (bad magic 0x42524353)" % last in l and
          "; and before it, offset %d: chunk of thread " % first in l and
          " does not decompress (" in l, "record's line: " + l)
    s = t.stats(out, rc=None)
    readable = l.split("(")[-1].split()
    eq(int(readable[0]), s["events"], "events record says can be read, and stats reads")
    eq(int(readable[3]), s["threads"], "threads record says can be read, and stats reads")
    check("; and before it, offset %d: chunk of thread " % first in s["_run"].stderr,
          "stats names the chunk that does not decompress:\n" + s["_run"].describe())


@case(timeout=180, labels=("compact",))
def test_compact_twice_at_once(t):
    """Two `heaptrail compact` of one raw trace, the second started while
    the first rewrites it: both exit 0 and the trace is whole, with every
    event.  The second waited for the first's lock, then rewrote the file
    the first had replaced, all of it, and failed at its rename ("moved or
    replaced", exit 1, probe O); it now compacts the trace that is there."""
    raw = t.path("raw.ht")
    t.run([t.heaptrail, "record", "-q", "--no-compact", "--zstd-level=0", "-o", raw, "--",
           t.prog("prodcons"), "500000"], check_rc=0)
    events = t.stats(raw)["events"]
    for run in range(2):
        tr = t.path("c%d.ht" % run)
        shutil.copy(raw, tr)
        first = subprocess.Popen([t.heaptrail, "compact", tr], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=t.base_env(), cwd=t.dir,
                                 universal_newlines=True)
        time.sleep(0.1)
        r = t.run([t.heaptrail, "compact", tr], timeout=120)
        out, err = first.communicate(timeout=120)
        eq(first.returncode, 0, "run %d: the first compact:\n%s" % (run, err))
        eq(r.rc, 0, "run %d: the second compact:\n%s" % (run, r.describe()))
        s = t.stats(tr)
        check(s["complete"] and s["closed"], "run %d: the trace is not whole" % run)
        eq(s["events"], events, "run %d: the trace's events" % run)


@case(labels=("compact",))
def test_compact_fast_nothing_raw_said(t):
    """compact --fast of a trace with no chunk written raw (the writer kept
    up) leaves it as it is and says so: it printed "X MiB -> X MiB" as if
    it had rewritten it (probe O)."""
    tr = t.path("k.ht")
    t.record(tr, [t.prog("threads"), "2", "1000"])
    with open(tr, "rb") as f:
        before = f.read()
    r = t.tool(["compact", "--fast", tr])
    eq(r.rc, 0, r.describe())
    check(r.stderr.startswith("heaptrail: %s: nothing to compress (no chunk was written raw): "
                              "left as it is, " % tr), "the line:\n" + r.stderr)
    with open(tr, "rb") as f:
        check(f.read() == before, "the trace was changed")


@case(labels=("compact", "badinput"))
def test_compact_fast_bad_files_said(t):
    """compact --fast of an empty file, a directory and a FIFO says what
    each is, as plain compact does: it said "not a heaptrail trace" of all
    (probe O).  Exit 1, the FIFO not waited on.  A trace of a newer format
    version is said so, as the other commands say it (probe Q)."""
    empty, d, fifo = t.path("empty.ht"), t.path("adir"), t.path("fifo")
    open(empty, "w").close()
    os.mkdir(d)
    os.mkfifo(fifo)
    for path, what in ((empty, "empty file"), (d, "is a directory"), (fifo, "is a FIFO")):
        r = t.tool(["compact", "--fast", path], timeout=30)
        eq(r.rc, 1, "%s: %s" % (what, r.describe()))
        check(r.stderr.startswith("heaptrail: error: %s: %s, not a heaptrail trace" % (path, what)),
              "%s: the line:\n%s" % (what, r.stderr))
    # a trace of a newer format version: said as every command says it
    # (it was "left as it was: it is damaged (its header does not fit the
    # file)", and the suggested `compact` refused it too)
    newer = t.path("newer.ht")
    t.record(newer, [t.prog("threads"), "1", "100"])
    with open(newer, "r+b") as f:
        f.seek(8)
        f.write(struct.pack("<I", F.VERSION + 1))
    for args in (["compact", "--fast", newer], ["compact", newer], ["stats", newer]):
        r = t.tool(args)
        eq((r.rc, r.stderr.strip()), (1, "heaptrail: error: %s: trace format version %d is newer "
                                         "than this heaptrail reads (%d): use a newer heaptrail"
                                      % (newer, F.VERSION + 1, F.VERSION)), " ".join(args[:-1]))


@case(timeout=120, labels=("compact", "analyzers"))
def test_compacted_cut_trace_order_cause(t):
    """A trace cut short (60% of its bytes) and compacted: it reads
    cleanly, and its header counts more events than its chunks hold.  The
    order warning names the missing events as the likely cause, as it did
    before the compaction; it said "calls hidden from the tracer, or a
    recorder that missed an order" (probe O)."""
    full, cut = t.path("full.ht"), t.path("cut.ht")
    t.run([t.heaptrail, "record", "-q", "--no-compact", "-o", full, "--", t.prog("prodcons"),
           "300000"], check_rc=0)
    with open(full, "rb") as f:
        data = f.read()
    with open(cut, "wb") as f:
        f.write(data[:len(data) * 6 // 10])
    r = t.tool(["compact", "-q", cut])
    eq(r.rc, 0, r.describe())
    r = t.tool(["stats", cut])
    check("across threads is not exact (events missing from a trace that is cut" in r.stderr,
          "the order warning:\n" + r.stderr)


@case(labels=("compact",), timeout=300)
def test_compact_started_together(t):
    """Two `compact --fast` (and two plain `compact`) started at the same
    moment on one raw trace: both exit 0 and the trace is whole.  Both
    found no writer's lock, and the one that did not get the trace's lock
    first gave up at once ("another heaptrail process took the trace ...
    a recording starting on the same path?", exit 1: 4 runs of 21 with
    --fast, probe Q); it now waits for the lock as it waits for a writer,
    then finds the trace the other put there."""
    raw = t.path("raw.ht")
    t.run([t.heaptrail, "record", "-q", "--no-compact", "--zstd-level=0", "-o", raw, "--",
           t.prog("threads"), "2", "2000000"], check_rc=0)
    events = t.stats(raw)["events"]
    failed = []
    for run in range(12):
        opts = ["--fast"] if run % 3 else []
        tr = t.path("c%d.ht" % run)
        shutil.copy(raw, tr)
        procs = [subprocess.Popen([t.heaptrail, "compact", "-q"] + opts + [tr],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=t.base_env(), cwd=t.dir, universal_newlines=True)
                 for _ in range(2)]
        for p in procs:
            out, err = p.communicate(timeout=120)
            if p.returncode != 0:
                failed.append("run %d (%s): exit %d: %s" % (run, " ".join(opts) or "plain",
                                                             p.returncode, err.strip()))
        s = t.stats(tr)
        check(s["complete"] and s["closed"], "run %d: the trace is not whole" % run)
        eq(s["events"], events, "run %d: the trace's events" % run)
    check(not failed, "compacts that failed:\n" + "\n".join(failed))
