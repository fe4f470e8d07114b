"""live following a trace of threads that hand blocks to each other while
it is written, and the writer's order of a thread's chunks in the file it
follows."""
import os
import signal
import subprocess
import sys
import time

from cases_live import wait_file
from htformat import CHUNK, CHUNK_MAGIC, HEADER, SEC_CHUNKS
from htlib import case, check, children, eq

CHUNK_EVENTS = 1


def chunk_order_faults(path):
    """(event chunks, chunks of a thread written after a later one of it)."""
    with open(path, "rb") as f:
        data = f.read()
    pos = HEADER.unpack_from(data, 0)[22 + 2 * SEC_CHUNKS]
    last, n, bad = {}, 0, 0
    while pos + CHUNK.size <= len(data):
        magic, ctype, _, tid, _, csize, _, seq = CHUNK.unpack_from(data, pos)
        if magic != CHUNK_MAGIC:
            break
        if ctype == CHUNK_EVENTS:
            n += 1
            bad += tid in last and seq < last[tid]
            last[tid] = max(seq, last.get(tid, 0))
        pos += CHUNK.size + csize
    return n, bad


@case(timeout=180, labels=("live",))
def test_live_follow_threads_no_loss(t):
    """prodcons (a producer, consumers that free what it made): live
    --batch started while record writes the trace reads every event, with
    no "chunk was lost" and no order warning, three times (before: in about
    half the runs, 5,000 to 16,000 events missing and the live figures
    wrong: the recorder's flush round wrote a thread's new buffer before
    its full one still queued, and the follower took the late chunk for a
    lost one).  And the recorder writes each thread's chunks in sequence
    order (--no-compact: the file as written; 2 to 15 of ~1150 were not)."""
    for k in range(3):
        out = t.path("p%d.ht" % k)
        rec = subprocess.Popen([t.heaptrail, "record", "-q", "-o", out, "--",
                                t.prog("prodcons"), "1000000"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env=t.base_env(), cwd=t.dir)
        wait_file(out)
        time.sleep(0.2)
        follow = t.run([t.heaptrail, "live", "--batch", out], timeout=120)
        _, err = rec.communicate(timeout=120)
        eq(rec.returncode, 0, "record: " + err.decode())
        eq(follow.rc, 0, follow.describe())
        check("missing" not in follow.stderr and "not exact" not in follow.stderr,
              "run %d: the follower's warnings:\n%s" % (k, follow.stderr))
        events = t.stats(out)["events"]
        check("%d events read" % events in follow.stderr,
              "run %d: the follower read %d events? %s" % (k, events, follow.stderr))
    for k in range(3):
        out = t.path("raw%d.ht" % k)
        t.run([t.heaptrail, "record", "-q", "--no-compact", "-o", out, "--",
               t.prog("prodcons"), "1000000"], check_rc=0)
        n, bad = chunk_order_faults(out)
        check(n > 500, "event chunks: %d" % n)
        eq(bad, 0, "run %d: chunks written after a later one of their thread (of %d)" % (k, n))


@case(timeout=60, labels=("live",))
def test_live_killed_said(t):
    """A program killed with SIGKILL under record (its writer closes the
    trace for it, record notes the signal): live's header says `[ended:
    died of SIGKILL]`, where it said `[finished]`, then `[ended, killed?]`
    while the trace did not name the signal; stats warns that it ended
    without shutting the tracer down.  A program that crashed (SIGSEGV,
    the recorder's handler closes the trace): `[ended: died of SIGSEGV]`,
    where it said `[finished]` until 2026-11-28."""
    out = t.path("k.ht")
    rec = subprocess.Popen([t.heaptrail, "record", "-q", "-o", out, "--", t.prog("grower"), "20"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=t.base_env(),
                           cwd=t.dir)
    wait_file(out)
    time.sleep(1.0)
    for pid in children(rec.pid):
        os.kill(pid, 9)
    rec.communicate(timeout=60)
    r = t.run([t.heaptrail, "live", "--batch", out])
    eq(r.rc, 0, r.describe())
    check(r.stdout.splitlines()[0].endswith("[ended: died of SIGKILL]"), "the header: " +
          r.stdout.splitlines()[0])
    s = t.run([t.heaptrail, "stats", out])
    check("without shutting the tracer down" in s.stderr, "stats: " + s.stderr)
    # Followed while it is written: the follower reaches the end (the
    # writer's close) before record notes the signal; it said `[ended,
    # killed?]` (probe H).  Twice: with the writer keeping up, and with
    # the trace recorded raw and compacted by record's end step, which
    # puts a rewritten file in its place.
    for k, opts in enumerate(([], ["--zstd-level=0"])):
        out = t.path("f%d.ht" % k)
        rec = subprocess.Popen([t.heaptrail, "record", "-q"] + opts +
                               ["-o", out, "--", t.prog("grower"), "20"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env=t.base_env(), cwd=t.dir)
        wait_file(out)
        live = subprocess.Popen([t.heaptrail, "live", "--batch", out], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=t.base_env(), cwd=t.dir,
                                universal_newlines=True)
        time.sleep(1.0)
        for pid in children(rec.pid):
            os.kill(pid, 9)
        rec.communicate(timeout=60)
        lo, le = live.communicate(timeout=60)
        eq(live.returncode, 0, "live, followed:\n" + le)
        check(lo.splitlines()[0].endswith("[ended: died of SIGKILL]"),
              "run %d, followed: the header: %s" % (k, lo.splitlines()[0]))
    seg = t.path("s.ht")
    r = t.run([t.heaptrail, "record", "-q", "-o", seg, "--", t.prog("crash"), "segv"])
    eq(r.rc, 128 + signal.SIGSEGV, r.describe())
    r = t.run([t.heaptrail, "live", "--batch", seg])
    eq(r.rc, 0, r.describe())
    check(r.stdout.splitlines()[0].endswith("[ended: died of SIGSEGV]"), "the header: " +
          r.stdout.splitlines()[0])


@case(timeout=120, labels=("live",))
def test_live_cut_trace_said(t):
    """live --batch on a trace cut short (the first 60% of its bytes,
    flushed every 100 ms, under --no-compact so that the chunks are in
    time order): the header says it is cut and how far it was read, and
    the time shown is that point, not the file's duration (it read
    "[finished]" at 2 s with the heap of 1.2 s, and the error came only
    on leaving)."""
    full, cut = t.path("g.ht"), t.path("cut.ht")
    t.run([t.heaptrail, "record", "-q", "--no-compact", "-o", full, "--", t.prog("grower"), "2"],
          check_rc=0)
    with open(full, "rb") as f:
        data = f.read()
    with open(cut, "wb") as f:
        f.write(data[:len(data) * 6 // 10])
    r = t.tool(["live", "--batch", cut])
    lines = r.stdout.splitlines()
    check(lines and "[cut short or damaged: read to " in lines[0], "the header:\n" + r.stdout)
    to = lines[0].split("read to ")[1].rstrip("]")
    check(len(lines) > 1 and lines[1].startswith("time %s " % to),
          "the time shown is where reading stopped (%s):\n%s" % (to, r.stdout))
    check(float(to.rstrip("s")) < 1.9, "read to %s of a 2 s run" % to)
    r = t.tool(["live", "--batch", full])
    check("[finished]" in r.stdout.splitlines()[0], "the whole trace:\n" + r.stdout)
