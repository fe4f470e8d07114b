"""Nothing recorded is lost: a program killed with SIGKILL at a random
moment leaves a trace that is an exact prefix of what each thread did, and
a full disk stops the recording with one warning while the program
finishes normally (tests/progs/stress.c)."""

import json
import os
import random
import shutil
import signal
import struct
import subprocess
import time

from htlib import case, check, children, comm, eq, fail, mallocs_in, reap, skip

PERIOD = 4000  # stress_size(i, k) repeats every 4000 calls (gcd(2654435761 % 4000, 4000) = 1)


def stress_size(i, k):
    """tests/progs/stress.c's size of thread i's k-th malloc."""
    return 16 + (k * 2654435761 + i * 977) % 4000


def prefix_bytes(i, n):
    """Bytes of thread i's first n mallocs."""
    full = sum(stress_size(i, k) for k in range(PERIOD))
    q, r = divmod(n, PERIOD)
    return q * full + sum(stress_size(i, k) for k in range(r))


def check_prefix(t, trace, nthreads, ended=False):
    """Each worker thread's calls in the trace are exactly its first n
    calls: n mallocs of the known sizes in order (their byte sum is only
    right for that prefix), the frees of all but the last one or two (of
    all of them when the program ended normally: ended), the one
    free(NULL); the reader found no hole in any thread's sequence numbers
    (it reports missing events as an error)."""
    s = t.stats(trace)
    r = s["_run"]
    check(s["complete"], "the reader found a hole or damage:\n" + r.describe())
    if ended:
        check(s["closed"] and not s["orphaned"], "the trace was not closed by its program")
    eq(s["unknown_frees"], 0, "frees of blocks the trace never handed out")
    eq(s["address_reuse_while_live"], 0, "addresses handed out while live")
    workers = {th["name"]: th for th in s["per_thread"] if th["name"].startswith("w")}
    eq(sorted(workers), ["w%d" % i for i in range(nthreads)], "worker threads")
    total = 0
    for i in range(nthreads):
        th = workers["w%d" % i]
        n = th["allocations"]
        check(n > 1000, "thread w%d recorded only %d allocations" % (i, n))
        eq(th["bytes_allocated"], prefix_bytes(i, n),
           "w%d: bytes of its %d mallocs (an exact prefix of the known sizes)" % (i, n))
        want = (n,) if ended else (n - 1, n - 2)
        check(th["frees"] in want,
              "w%d: %d frees after %d mallocs (expected %s)" % (i, th["frees"], n, want))
        # thread_start, thread_name, the mallocs, free(NULL), the frees;
        # ended: glibc's two free(NULL) at the thread's end, its thread_exit
        eq(th["events"], 2 + n + 1 + th["frees"] + (3 if ended else 0),
           "w%d: events (no duplicate, no hole)" % i)
        total += n
    return total



def writer_processes(pid, timeout=10):
    """The writer processes (heaptrail-write) of program pid, polled for:
    the helper names itself once it runs, under load a moment later."""
    deadline = time.time() + timeout
    helpers = []
    while not helpers and time.time() < deadline:
        helpers = [c for c in children(pid) if comm(c) == "heaptrail-write"]
        if not helpers:
            time.sleep(0.01)
    return helpers

def stress_writer(p, run):
    """The pids of stress under record p and of its writer process, once
    stress said it is ready."""
    eq(p.stdout.readline(), b"ready\n", "run %d: the program started" % run)
    prog = [c for c in children(p.pid) if comm(c) == "stress"]
    eq(len(prog), 1, "run %d: the program under record" % run)
    helpers = writer_processes(prog[0])
    eq(len(helpers), 1, "run %d: the writer process" % run)
    return prog[0], helpers[0]


def kill_while_running(prog, writer):
    """SIGKILL to the writer process if the program still runs; False when
    the program had already ended (a loaded machine slept past its run:
    the kill would land in the end step, or on no process at all)."""
    if comm(prog) != "stress" or zombie(prog):
        return False
    try:
        os.kill(writer, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def kill9_runs(t, name, runs, extra_env, delays, wait_writer=False):
    """stress (2 threads) under LD_PRELOAD with extra_env, SIGKILLed after
    a random delay in delays, runs times; each trace an exact prefix.
    wait_writer: the writer process must end within 30 s of the program
    and close the trace, marked orphaned."""
    rng = random.Random(os.getpid())
    for run in range(runs):
        trace = t.path("%s%d.ht" % (name, run))
        env = dict(extra_env, LD_PRELOAD=t.preload, HEAPTRAIL_OUT=trace)
        p = subprocess.Popen([t.prog("stress"), "10", "2"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=t.base_env(env), cwd=t.dir)
        line = p.stdout.readline()
        if line != b"ready\n":
            p.kill()
            fail("stress did not start: %r %r" % (line, p.stderr.read()))
        helpers = writer_processes(p.pid) if wait_writer else []
        if wait_writer:
            eq(len(helpers), 1, "the writer process of the program")
        delay = rng.uniform(*delays)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        eq(p.returncode, -signal.SIGKILL, "stress killed")
        p.stdout.close()
        p.stderr.close()
        if wait_writer:
            deadline = time.time() + 30
            while not zombie(helpers[0]) and time.time() < deadline:
                time.sleep(0.02)
            check(zombie(helpers[0]), "run %d: the writer process did not end within 30 s of "
                  "the program's death (waiting for the lock a dead thread held?)" % run)
        n = check_prefix(t, trace, 2)
        if wait_writer:
            s = t.stats(trace)
            check(s["closed"] and s["orphaned"], "run %d: the trace was not closed by the "
                  "writer process after the kill" % run)
        t.note("run %d: killed after %.2fs, %d mallocs recorded" % (run, delay, n))


@case(timeout=240, labels=("cpu",), locks=("cpu",))
def test_kill9_prefix(t):
    """2 threads allocating as fast as they can, killed with SIGKILL at a
    random moment (three times): every trace is an exact prefix."""
    kill9_runs(t, "stress", 3, {}, (0.2, 0.8))


@case(timeout=240, labels=("cpu",), locks=("cpu",))
def test_kill9_prefix_self_write(t):
    """As kill9_prefix, with the threads writing their full buffers
    themselves (HEAPTRAIL_SELF_WRITE=2, what they do when the helper finds
    no CPU free) and 4 KiB buffers, so that the SIGKILL often comes while
    a thread of the program holds the writer's lock in the middle of a
    chunk: the helper takes the lock over, puts the chunk right and closes
    the trace (it waited for the lock forever before it knew to), and the
    trace is an exact prefix, six times."""
    kill9_runs(t, "sw", 6, {"HEAPTRAIL_SELF_WRITE": "2", "HEAPTRAIL_BUFFER_SIZE": "4096"},
               (0.1, 0.5), wait_writer=True)


@case(timeout=180)
def test_no_lost_chunk(t):
    """20 recordings of 3 threads x 20000 malloc/free pairs with the writer
    compressing (slow rounds): every call is in every trace, and the reader
    finds no hole in any thread's sequence numbers.  Before the fix, the
    writer put back the buffer of a thread it judged dead while the thread
    had ended normally and handed the same buffer over: about 1 recording
    in 13 lost a chunk (so this fails about 4 times in 5 on that code)."""
    for run in range(20):
        out = t.path("t%d.ht" % run)
        t.traced(out, [t.prog("threads"), 3, 20000], env={"HEAPTRAIL_ZSTD_LEVEL": "1"})
        r = t.tool(["stats", "--json", out])
        check("missing" not in r.stderr, "run %d: %s" % (run, r.stderr.strip()))
        eq(json.loads(r.stdout)["calls"]["malloc"], 60000, "run %d: mallocs" % run)
        os.unlink(out)


def zombie(pid):
    """pid is a zombie, or gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return True
    return st[st.rindex(")") + 2] in "ZX"


def kill_writer(p):
    """The writer process of paced under record p (started, "ready" not
    read yet) killed with SIGKILL, and gone; returns paced's pid."""
    eq(p.stdout.readline(), b"ready\n", "the program started")
    prog = [c for c in children(p.pid) if comm(c) == "paced"]
    eq(len(prog), 1, "the program under record")
    helpers = writer_processes(prog[0])
    eq(len(helpers), 1, "the writer process of the program")
    os.kill(helpers[0], signal.SIGKILL)
    # the program goes on once the writer is gone (not a sleep: dead or
    # a zombie, whenever the scheduler got round to it)
    deadline = time.time() + 60
    while comm(helpers[0]) == "heaptrail-write" and not zombie(helpers[0]):
        check(time.time() < deadline, "the killed writer process is still running")
        time.sleep(0.01)
    return prog[0]


@case(timeout=120)
def test_writer_killed(t):
    """The recorder's writer process killed with SIGKILL while the program
    runs (an administrator, the OOM killer): the program does not hang
    waiting for buffers no one empties.  Its threads write the trace
    themselves from then on, say so once, and nothing is lost: the trace
    holds every call.  (Before: the program slept forever in malloc.)"""
    n = 3000000  # 6M events: more than the 16 MiB pool of 4 KiB buffers holds
    trace = t.path("wk.ht")
    env = t.base_env()
    p = subprocess.Popen([t.heaptrail, "record", "--buffer-size=4K", "-o", trace, "--",
                          t.prog("paced"), str(n)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, cwd=t.dir)
    try:
        kill_writer(p)
        p.stdin.write(b"go\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        fail("the program hung after its writer process was killed")
    finally:
        reap(p)
    err = err.decode("utf-8", "replace")
    eq(p.returncode, 0, "record's exit status (the program's):\n" + err)
    said = [l for l in err.splitlines() if "writer process died" in l]
    eq(len(said), 1, "one line says the writer died:\n" + err)
    check("wk.ht" in said[0], "the line names the trace: %r" % said[0])
    s = t.stats(trace)
    eq(s["calls"]["malloc"], n + 1, "mallocs in the trace")
    eq(s["calls"]["free"], n + 1, "frees in the trace")
    check(s["complete"] and s["closed"], "the trace was closed: %r" % {
        k: s.get(k) for k in ("complete", "closed")})


@case(timeout=120)
def test_writer_killed_then_program(t):
    """The writer process killed, then the program killed with SIGKILL
    before its next full buffer (where it would learn of its writer's
    death): the events recorded since its buffers were last written are
    lost, and record says so in a line of its own, naming the trace, under
    its summary (exit 137).  (Before: only the summary, as if the trace
    held everything up to the kill.)"""
    trace = t.path("wkp.ht")
    p = subprocess.Popen([t.heaptrail, "record", "-o", trace, "--", t.prog("paced"), "10"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=t.base_env(), cwd=t.dir)
    try:
        os.kill(kill_writer(p), signal.SIGKILL)
        out, err = p.communicate(timeout=60)
    finally:
        reap(p)
    err = err.decode("utf-8", "replace")
    eq(p.returncode, 137, "record's exit status (the program's):\n" + err)
    lines = [l for l in err.splitlines() if l.startswith("heaptrail")]
    eq(len(lines), 2, "the summary and the warning:\n" + err)
    check("killed by signal 9" in lines[0] and "wrote" in lines[0], "the summary: " + lines[0])
    eq(lines[1], "heaptrail: warning: %s was not closed: its writer process died before the "
       "program ended (killed?), and the program did not end cleanly, so what it recorded "
       "since its buffers were last written is lost; the trace holds what came before" % trace,
       "the warning")


@case(timeout=180)
def test_cancel_inside_malloc_untouched(t):
    """Threads cancelled (deferred) while they loop on malloc, realloc,
    calloc and free, none of which is a cancellation point, with the
    recorder writing the trace itself (tests/progs/cancelme.c kills the
    writer process first): no thread is cancelled inside its loop, and
    with 4 KiB buffers nothing hangs.  Before, the recorder's own pread,
    write and nanosleep in those calls were cancellation points: a thread
    was cancelled inside free, and, holding a buffer, left the others
    waiting for it for good."""
    for size in ("64K", "4K"):
        out = t.path("cancel-%s.ht" % size)
        r = t.run([t.heaptrail, "record", "-q", "--buffer-size", size, "-o", out, "--",
                   t.prog("cancelme")], timeout=90)
        said = dict(l.split(": ") for l in r.stdout.splitlines())
        check(int(said.get("writer", "0")) > 0, "the program found no writer to kill:\n"
              + r.describe())
        eq((r.rc, said.get("cancelled_inside")), (0, "0"),
           "--buffer-size %s: status, threads cancelled inside a call:\n%s" % (size,
                                                                               r.describe()))


@case(timeout=120)
def test_writer_death_noticed_early(t):
    """The writer process killed while the program waits; the program then
    makes 100,000 malloc/free pairs (about 50 buffers of records, far from
    all of them) and is killed with SIGKILL: it noticed the death at its
    next full buffer, said so, and wrote its full buffers itself, so that
    the trace lacks at most the buffer it was filling.  (Before: only a
    thread that found every buffer full noticed, and the trace ended where
    the writer died: one malloc.)"""
    n = 100000
    trace = t.path("early.ht")
    p = subprocess.Popen([t.heaptrail, "record", "-o", trace, "--", t.prog("paced"), str(n),
                          "hold"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=t.base_env(), cwd=t.dir)
    try:
        prog = kill_writer(p)
        p.stdin.write(b"go\n")
        p.stdin.flush()
        eq(p.stdout.readline(), b"done\n", "the pairs made")
        os.kill(prog, signal.SIGKILL)
        out, err = p.communicate(timeout=60)
    finally:
        reap(p)
    err = err.decode("utf-8", "replace")
    eq(p.returncode, 137, "record's exit status:\n" + err)
    said = [l for l in err.splitlines() if "the trace writer process died" in l]
    eq(len(said), 1, "the program said its writer died:\n" + err)
    check(any("was not closed: its writer process died" in l for l in err.splitlines()),
          "record's warning:\n" + err)
    s = t.stats(trace, rc=None)
    # 64 KiB of records hold about 8,000 pairs here
    check(n + 1 - 10000 <= s["calls"]["malloc"] <= n + 1,
          "mallocs in the trace: %d of %d" % (s["calls"]["malloc"], n + 1))


@case(timeout=240, labels=("cpu",), locks=("cpu",))
def test_writer_killed_while_writing(t):
    """The writer process killed with SIGKILL in the middle of writing a
    chunk, while two threads allocate as fast as they can: strace makes
    each of the helper's write() and pwrite() calls return 50 ms late, and the helper is
    killed in one of those waits, after a chunk's header or after its
    payload (before it noted the chunk in its index), 8 times.  The
    program ends normally, one line says the writer died (whoever noticed
    it: the buffers running out, or the program's end), and the trace is
    whole and exact: every thread's calls an exact prefix ending
    where the program stopped, no event twice, the file closed by the
    program.  (Before: the program's threads went on writing after the cut
    chunk, and every such trace read as damaged: record exited 125.)"""
    st = shutil.which("strace")
    check(st, "strace is not installed (scripts/deps.sh test installs it)")
    rng = random.Random(os.getpid())
    landed = 0
    for run in range(16):
        if landed == 8:
            break
        trace = t.path("wkw%d.ht" % run)
        p = subprocess.Popen([t.heaptrail, "record", "-o", trace, "--", t.prog("stress"), "1",
                              "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=t.base_env(), cwd=t.dir)
        tracer = None
        try:
            prog, writer = stress_writer(p, run)
            # (the writer writes with pwrite at its own offset: the
            # program's threads write beside it, docs/record.md)
            tracer = subprocess.Popen([st, "-p", str(writer), "-e", "trace=write,pwrite64",
                                       "-e", "inject=write,pwrite64:delay_exit=50000", "-o",
                                       os.devnull],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            line = tracer.stderr.readline().decode("utf-8", "replace")
            check("attached" in line, "run %d: strace did not attach: %r" % (run, line))
            time.sleep(rng.uniform(0.1, 0.4))  # (a dozen delayed writes)
            killed = kill_while_running(prog, writer)
            out, err = p.communicate(timeout=60)
            tracer.wait(timeout=30)
        finally:
            for q in (p, tracer):
                if q and q.poll() is None:
                    q.kill()
                    q.wait()
            if tracer:
                tracer.stderr.close()
        if not killed:  # (not counted: tried again)
            if os.path.exists(trace):
                os.unlink(trace)
            continue
        landed += 1
        err = err.decode("utf-8", "replace")
        eq(p.returncode, 0, "run %d: record's exit status:\n%s" % (run, err))
        lines = [l for l in err.splitlines() if "wrote" not in l]
        check(len(lines) == 1 and "writer process died" in lines[0] and trace in lines[0],
              "run %d: one line says the writer died, and names the trace:\n%s" % (run, err))
        check_prefix(t, trace, 2, ended=True)
        os.unlink(trace)
    eq(landed, 8, "kills that landed while the program ran (16 tries)")


@case(timeout=240, labels=("cpu",), locks=("cpu",))
def test_writer_killed_while_threads_write(t):
    """The writer process killed with SIGKILL at a random moment while the
    program's two threads write their own full buffers
    (HEAPTRAIL_SELF_WRITE=2, 4 KiB buffers: one of them holds the writer's
    lock most of the time), 8 times: the program ends normally and the
    trace is whole and exact.  The first thread to notice the writer's
    death let go of the writer's lock whoever held it, so that another
    thread's round ran beside the writing one's and wrote over its chunks:
    a trace read as damaged (a run of zeros where a chunk should start)."""
    rng = random.Random(os.getpid())
    landed = 0
    for run in range(16):
        if landed == 8:
            break
        trace = t.path("wkt%d.ht" % run)
        p = subprocess.Popen([t.heaptrail, "record", "--buffer-size", "4096", "-o", trace, "--",
                              t.prog("stress"), "1", "2"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=t.base_env({"HEAPTRAIL_SELF_WRITE": "2"}),
                             cwd=t.dir)
        try:
            prog, writer = stress_writer(p, run)
            time.sleep(rng.uniform(0.05, 0.4))
            killed = kill_while_running(prog, writer)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        if not killed:  # (not counted: tried again)
            if os.path.exists(trace):
                os.unlink(trace)
            continue
        landed += 1
        err = err.decode("utf-8", "replace")
        eq(p.returncode, 0, "run %d: record's exit status:\n%s" % (run, err))
        check("writer process died" in err, "run %d: no line says the writer died:\n%s" % (run, err))
        check_prefix(t, trace, 2, ended=True)
        os.unlink(trace)
    eq(landed, 8, "kills that landed while the program ran (16 tries)")


@case(timeout=120)
def test_read_while_written(t):
    """stats on the trace of a program that still runs says the trace is
    still being written and calls what is live "live now", not "killed" nor
    "live at exit"; once the program has ended, the same trace reads as
    closed."""
    trace = t.path("live.ht")
    p = subprocess.Popen([t.heaptrail, "record", "-o", trace, "--", t.prog("paced"), "1000"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=t.base_env(), cwd=t.dir)
    try:
        eq(p.stdout.readline(), b"ready\n", "the program started")
        # the writer's first round: the program's first malloc in the file
        # (waited for, not slept for)
        deadline = time.time() + 60
        while time.time() < deadline and mallocs_in(t, trace) < 1:
            time.sleep(0.02)
        r = t.tool(["stats", trace])
        s = t.stats(trace, rc=None)
        lk = t.tool(["leaks", trace])
        p.stdin.write(b"go\n")
        p.stdin.flush()
        p.communicate(timeout=60)
    finally:
        reap(p)
    eq(p.returncode, 0, "record's exit status")
    with t.soft():
        check("still being written" in r.stderr and "killed" not in r.stderr,
              "stats on a running trace:\n" + r.describe())
        first = lk.stdout.splitlines()[0] if lk.stdout else ""
        check("not freed yet (the program still runs: live now)" in first and
              "at exit" not in first, "leaks on a running trace: %r" % first)
        check("live now" in r.stdout and "live at exit" not in r.stdout,
              "stats text on a running trace:\n" + r.stdout)
        check(s["being_written"] and not s["closed"] and not s["disk_full"],
              "JSON while running: %r" % {k: s[k] for k in ("being_written", "closed", "disk_full")})
    s2 = t.stats(trace)
    check(s2["closed"] and not s2["being_written"], "JSON after the end: %r" % {
        k: s2[k] for k in ("being_written", "closed")})
    eq(s2["calls"]["malloc"], 1001, "mallocs of the finished trace")


def small_tmpfs(t, size):
    """A tmpfs of size (mount's size=) at the test's "small" directory, or
    the test is skipped (mounting needs root); the caller unmounts it."""
    mnt = t.path("small")
    os.mkdir(mnt)
    r = t.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", mnt])
    if r.rc != 0:
        skip("cannot mount a tmpfs here (needs root): " + r.stderr.strip())
    return mnt


@case(timeout=120, labels=("cpu",), locks=("cpu",))
def test_disk_full(t):
    """A 2 MiB tmpfs as the output: recording stops with one warning, the
    program finishes normally with its own output, and what was written
    reads back as a prefix, whole (the chunk being written when the disk
    filled up is cut off the file: no "truncated" error), with the writer
    process and with --writer=thread.  (Before, with --writer=thread the
    warning went nowhere, the writer thread's descriptor table having no
    stderr, and both left a half chunk that the readers called a cut
    file.)"""
    mnt = small_tmpfs(t, "2m")
    try:
        trace = os.path.join(mnt, "full.ht")
        for writer in ("process", "thread"):
            if os.path.exists(trace):
                os.unlink(trace)
            r = t.run([t.heaptrail, "record", "--writer", writer, "-o", trace, "--",
                       t.prog("stress"), "1", "2"], timeout=60)
            eq(r.rc, 0, "%s: the program's exit status:\n%s" % (writer, r.describe()))
            eq(r.stdout, "ready\n", "the program's own output")
            lines = r.heaptrail_lines()
            eq(len(lines), 2, "%s: the 'wrote' line and one warning:\n%s" % (writer,
                                                                           r.describe()))
            warn = [l for l in lines if "recording stopped" in l]
            eq(len(warn), 1, "%s: one warning that recording stopped:\n%s" % (writer,
                                                                            r.describe()))
            check("full.ht" in warn[0] and "No space left" in warn[0],
                  "the warning names the file and the reason: %r" % warn[0])
            check(any("until a write failed" in l for l in lines),
                  "the 'wrote' line says the trace stops early:\n" + r.describe())
            s = t.stats(trace)
            check(s["events"] > 1000, "the trace kept what was written before the disk filled up")
            check(s["disk_full"] and not s["being_written"] and s["complete"],
                  "%s: stats says the disk filled up, the file whole: %r" % (writer, {
                      k: s[k] for k in ("disk_full", "being_written", "closed", "complete")}))
            r2 = t.tool(["stats", trace])
            check("a write failed" in r2.stderr and "killed" not in r2.stderr
                  and "error" not in r2.stderr,
                  "the warning names the failed write, not a kill:\n" + r2.describe())
            eq(s["unknown_frees"], 0, "frees of blocks the trace never handed out")
            # its duration reaches its last event, in the text as in the
            # JSON (the text said the last CLOCK sample's, 1.4 ms where the
            # events went on to 49.6 ms: probe Q)
            last = t.tool(["dump", "-q", trace]).stdout.strip().splitlines()[-1]
            last_ns = round(float(last.split()[0]) * 1e9)
            check(s["duration_ns"] >= last_ns, "%s: duration %d ns, last event at %d ns"
                  % (writer, s["duration_ns"], last_ns))
            line = [l for l in r2.stdout.splitlines() if l.startswith("duration ")][0]
            val, unit = line.split()[1:3]
            ns = float(val) * {"ns,": 1, "us,": 1e3, "ms,": 1e6, "s,": 1e9}[unit]
            check(abs(ns - s["duration_ns"]) <= 0.001 * s["duration_ns"] + 1000,
                  "%s: stats says %r, --json %d ns" % (writer, line, s["duration_ns"]))
        # without record: the recorder's own one warning
        os.unlink(trace)
        r = t.traced(trace, [t.prog("stress"), "1", "2"])
        eq(r.stdout, "ready\n", "the program's own output (LD_PRELOAD)")
        lines = r.heaptrail_lines()
        check(len(lines) == 1 and "recording stopped" in lines[0] and "full.ht" in lines[0],
              "one warning from the recorder naming the file:\n" + r.describe())
    finally:
        t.run(["umount", "-l", mnt])


@case(timeout=120)
def test_index_disk_full(t):
    """The disk fills up after the program's last call, so that only the
    index the close writes finds no room (tests/progs/fillatend.c: 500
    chunks, their index more than the file's last page holds; recording
    stopped, then the disk filled): the trace is closed without an index,
    every event in it, and reads back whole with no warning; record says
    nothing but its summary and exits 0, with the writer process and the
    writer thread.  (Before, the half-written index stayed at the file's
    end: every analyzer called the trace truncated, "trace ends inside a
    chunk", and exited 1; record said "recording stopped" and "until a
    write failed".)"""
    mnt = small_tmpfs(t, "2m")
    try:
        trace = os.path.join(mnt, "idx.ht")
        filler = os.path.join(mnt, "filler")
        for writer in ("process", "thread"):
            for f in (trace, filler):
                if os.path.exists(f):
                    os.unlink(f)
            r = t.run([t.heaptrail, "record", "--writer", writer, "-o", trace, "--",
                       t.prog("fillatend"), "100000", "500", filler], timeout=60)
            eq(r.rc, 0, "%s: record's exit status:\n%s" % (writer, r.describe()))
            check(r.stdout.startswith("pairs 100000\nfilled "), "the program's own output:\n"
                  + r.describe())
            lines = r.heaptrail_lines()
            wrote = [l for l in lines if " wrote " in l]
            bad = [l for l in lines if any(w in l.replace(trace, "TRACE") for w in (
                "write failed", "stopped", "index", "truncated", "damaged", "error"))]
            check(len(wrote) == 1 and not bad, "%s: record's summary, and no word of a failed "
                  "write or damage:\n%s" % (writer, r.describe()))
            os.unlink(filler)
            s = t.stats(trace)
            check(s["complete"] and s["closed"] and not s["disk_full"],
                  "%s: stats: %r" % (writer, {k: s[k] for k in ("complete", "closed",
                                                               "disk_full")}))
            eq((s["calls"]["malloc"], s["calls"]["free"]), (100000, 100000),
               "%s: the program's calls" % writer)
            eq(wrote_events(wrote[0]), s["events"], "%s: events record counted" % writer)
            for cmd in ("stats", "leaks"):
                r2 = t.tool([cmd, trace])
                eq(r2.rc, 0, "%s: %s's exit status:\n%s" % (writer, cmd, r2.describe()))
                said = r2.stderr.replace(trace, "TRACE")
                check("index" not in said and "truncated" not in said and "error" not in said,
                      "%s: %s warns:\n%s" % (writer, cmd, r2.describe()))
    finally:
        t.run(["umount", "-l", mnt])


@case(timeout=120)
def test_end_step_disk_full(t):
    """The disk fills up during the end step, not the recording: a raw
    trace (3.5 MB) on a 5 MiB tmpfs, whose rewrite (2.6 MB) does not fit.
    `compact --fast` (what record's end step does, its workers compressing
    while the calling thread writes) says which trace and why in one line,
    exits 1, and leaves the trace as it was, byte for byte, with no
    temporary file behind; it reads back whole."""
    mnt = small_tmpfs(t, "5m")
    try:
        trace = os.path.join(mnt, "raw.ht")
        t.traced(trace, [t.prog("randloop"), "700000"], env={"HEAPTRAIL_ZSTD_LEVEL": "0"})
        with open(trace, "rb") as f:
            before = f.read()
        check(len(before) > 3 << 20, "the raw trace: %d bytes" % len(before))
        r = t.tool(["compact", "--fast", trace])
        eq(r.rc, 1, "compact --fast with no room: exit status\n" + r.describe())
        eq(r.stderr.strip(), "heaptrail: error: %s: cannot write its rewrite (No space left "
           "on device): the trace is left as it was" % trace, "the message")
        with open(trace, "rb") as f:
            check(f.read() == before, "the trace changed")
        eq(os.listdir(mnt), ["raw.ht"], "files left in the directory")
        s = t.stats(trace)
        eq(s["calls"]["malloc"], 700000, "mallocs read back")
    finally:
        t.run(["umount", "-l", mnt])


def wrote_events(line):
    """The N of record's "wrote N events" line."""
    check(" wrote " in line and " events " in line, "record's summary: %r" % line)
    return int(line.split(" wrote ")[1].split()[0])


@case(timeout=180, labels=("cpu",), locks=("cpu",))
def test_record_trace_taken_at_end(t):
    """The trace is moved away, or moved and another file put at its name,
    just after the program ends, while record reads it back and finishes
    it (tests/progs/takeaway.c: a child the program leaves behind does it
    once its parent is gone, at once or 60 ms later, during a --compact
    end step): record says in one line that the trace was taken away
    (or, if it saw it happen while the program ran, where it went), calls
    nothing damaged, writes nothing at the name, and the moved trace is
    whole.  (Before: "could not compact the trace" and "the trace ... is
    damaged: cannot open" or "not a heaptrail trace", with a hint to
    inspect a file that is gone or is not a trace.)"""
    pairs = 2000000
    for action, delay, opts in (("mv", 0, []), ("mv", 0, []), ("mv", 60, ["--compact"]),
                                ("replace", 60, ["--compact"]), ("replace", 0, [])):
        what = "%s %d %s" % (action, delay, " ".join(opts))
        trace, moved = t.path("taken.ht"), t.path("moved.ht")
        for f in (trace, moved):
            if os.path.exists(f):
                os.unlink(f)
        r = t.run([t.heaptrail, "record", "--no-follow-fork"] + opts + [
            "-o", trace, "--", t.prog("takeaway"), str(pairs), trace, action, moved,
            str(delay)], timeout=120)
        eq(r.stdout, "pairs %d\n" % pairs, "%s: the program's output" % what)
        for _ in range(500): # the child acts once record has seen its parent end
            if os.path.exists(moved) and (action == "mv" or os.path.exists(trace)):
                break
            time.sleep(0.01)
        lines = r.heaptrail_lines()
        eq(len(lines), 1, "%s: record's lines:\n%s" % (what, r.describe()))
        l = lines[0]
        check("damaged" not in l and "error" not in l and "warning" not in l,
              "%s: record's line: %s" % (what, l))
        if "while record finished it" in l:
            eq(r.rc, 125, "%s: record's exit status:\n%s" % (what, r.describe()))
            check("which was moved, removed or replaced while record finished it: nothing "
                  "to report" in l, "%s: record's line: %s" % (what, l))
        elif "renamed to" in l:
            eq(r.rc, 0, "%s: record's exit status:\n%s" % (what, r.describe()))
            check("renamed to %s while it ran" % moved in l, "%s: record's line: %s" % (what, l))
        else: # (the child was slower than all of record)
            check(delay == 0 and " wrote " in l and r.rc == 0,
                  "%s: record's line and status %d: %s" % (what, r.rc, l))
        s = t.stats(moved)
        check(s["complete"] and s["calls"]["malloc"] >= pairs and s["calls"]["free"] >= pairs,
              "%s: the moved trace: %r" % (what, {k: s[k] for k in ("complete", "calls")}))
        if action == "replace":
            with open(trace) as f:
                eq(f.read(), "not a trace\n", "%s: the file put at the trace's name" % what)


@case(timeout=120)
def test_record_damaged_trace(t):
    """record reads the trace back from the disk when it is final: a trace
    damaged while it was recorded (the program overwrites one chunk header
    in it, tests/progs/scribble.c) is reported as damaged, in one line that
    says what is damaged, that figures may be incomplete and how to
    inspect it, and record exits with 125, with the default end step,
    --compact, --no-compact and the writer thread.  (Before: "wrote N
    events" and exit 0, and stats found the damage.)"""
    for opts in ([], ["--compact"], ["--no-compact"], ["--writer=thread"]):
        what = " ".join(opts) or "default"
        out = t.path("scribbled%d.ht" % len(os.listdir(t.dir)))
        r = t.run([t.heaptrail, "record"] + opts + ["-o", out, "--", t.prog("scribble"),
                                                    "20000", out])
        eq(r.rc, 125, "%s: record's exit status:\n%s" % (what, r.describe()))
        off = int(r.stdout.split("damaged: ")[1])
        lines = r.heaptrail_lines()
        eq(len(lines), 1, "%s: record's lines:\n%s" % (what, r.describe()))
        l = lines[0]
        check(l.startswith("heaptrail: error: the trace %s is damaged: " % out) and
              "offset %d: not a chunk header" % off in l and "may be incomplete" in l and
              "'heaptrail stats %s'" % out in l, "%s: record's line: %s" % (what, l))
        s = t.stats(out, rc=None)
        check(not s["complete"], "%s: stats finds the trace whole" % what)
        readable = int(l.split("(")[-1].split()[0])
        eq(readable, s["events"], "%s: events record says can be read, and stats reads" % what)


@case(timeout=120)
def test_record_counts_from_disk(t):
    """A good recording: the events record says it wrote are the events
    stats reads from the file, with the default end step, --compact and
    --no-compact.  And a fork child's trace damaged while it was recorded
    is reported in a line of its own, with exit status 125, the program's
    own trace summarized as usual."""
    for opts in ([], ["--compact"], ["--no-compact"]):
        what = " ".join(opts) or "default"
        out = t.path("good%d.ht" % len(os.listdir(t.dir)))
        r = t.run([t.heaptrail, "record"] + opts + ["-o", out, "--", t.prog("threads"),
                                                    "3", "20000"])
        eq(r.rc, 0, "%s: record's exit status:\n%s" % (what, r.describe()))
        lines = r.heaptrail_lines()
        eq(len(lines), 1, "%s: record's lines:\n%s" % (what, r.describe()))
        eq(wrote_events(lines[0]), t.stats(out)["events"],
           "%s: events record wrote, and stats reads" % what)
    out = t.path("kid.ht")
    r = t.run([t.heaptrail, "record", "-o", out, "--", t.prog("scribble"), "20000", out, "child"])
    eq(r.rc, 125, "child: record's exit status:\n" + r.describe())
    kids = [f for f in os.listdir(t.dir) if f.startswith("kid.ht.")]
    eq(len(kids), 1, "child traces")
    kid = t.path(kids[0])
    lines = r.heaptrail_lines()
    eq(len(lines), 2, "child: record's lines:\n" + r.describe())
    check(lines[0].startswith("heaptrail: error: the trace %s is damaged: " % kid) and
          "not a chunk header" in lines[0], "child: the line about it: " + lines[0])
    eq(wrote_events(lines[1]), t.stats(out)["events"], "child: the program's events")


# Two threads allocating as fast as they can while main opens a file of
# its own and dup2()s it over every descriptor 3..1023 (the trace's among
# them) 100 times, 1 ms apart, then says how big the file is: the program never
# writes to it.
DUP2_C = r"""
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;

static void *loop(void *arg)
{
	void *volatile sink;
	(void)arg;
	while (!stop) {
		sink = malloc(64);
		free(sink);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, loop, NULL);
	struct timespec ts = {0, 20000000};
	nanosleep(&ts, NULL);
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	for (int r = 0; r < 100; r++) {
		for (int d = 3; d < 1024; d++) /* (the recorder's is high) */
			if (d != fd)
				dup2(fd, d);
		ts.tv_nsec = 1000000;
		nanosleep(&ts, NULL);
	}
	stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	struct stat st;
	fstat(fd, &st);
	printf("size %lld\n", (long long)st.st_size);
	return 0;
}
"""


@case(timeout=120, labels=("cpu",), locks=("cpu",))
def test_dup2_over_trace_no_clobber(t):
    """A program whose main thread dup2()s a file of its own over every
    descriptor number (the trace's too) while two threads allocate as fast
    as they can, three runs under record (default options but 4 KiB
    buffers): the file stays empty, and the trace is whole.  With the program's threads
    writing their own buffers (HEAPTRAIL_SELF_WRITE, on by default for a
    day), a thread checked the descriptor, the program dup2()ed its file onto the
    number, and the thread's writes went into the program's file (2.2 to
    2.7 MB of records in 5 of 16 runs of a probe): the option was off by
    default until dup2 and the like stopped the threads' writing first
    (trace_fd_juggled_no_clobber)."""
    from htlib import compile_c
    exe = compile_c(t, "dup2", DUP2_C, flags=("-O2", "-pthread"))
    for run in range(3):
        trace, victim = t.path("d%d.ht" % run), t.path("victim%d.txt" % run)
        # (4 KiB buffers: a write every few microseconds, for the race to show)
        r = t.run([t.heaptrail, "record", "-q", "--buffer-size", "4096", "-o", trace, "--", exe,
                   victim], timeout=60)
        eq(r.rc, 0, "run %d: record's exit status:\n%s" % (run, r.describe()))
        eq(r.stdout.strip(), "size 0", "run %d: the program's own file, as it saw it" % run)
        eq(os.path.getsize(victim), 0, "run %d: the program's own file on disk" % run)
        s = t.stats(trace)
        check(s["complete"] and s["closed"], "run %d: the trace is not whole" % run)


@case(timeout=180, labels=("cpu",), locks=("cpu",))
def test_trace_fd_juggled_no_clobber(t):
    """tests/progs/fdjuggle: a thread dup2()s the program's own file onto
    the number of the trace's descriptor and a copy of the trace's back,
    200,000 times, while three threads make 300,000 malloc/free pairs
    each; under record with 4 KiB buffers, the threads writing their own
    buffers always (HEAPTRAIL_SELF_WRITE=2, three runs) and when they
    keep the CPUs busy (HEAPTRAIL_SELF_WRITE=1, two runs).  The program's file stays empty, the trace is whole and
    has every call.  Before (HEAPTRAIL_SELF_WRITE=2): 4.3 to 6.0 MB of
    records went into the program's file in 3 of 3 runs, and the trace
    read as damaged: a thread's check of the number (fd_is_ours) passed
    while the trace was there, and its write came after the dup2."""
    runs = [{"HEAPTRAIL_SELF_WRITE": "2"}] * 3 + [{"HEAPTRAIL_SELF_WRITE": "1"}] * 2
    for run, env in enumerate(runs):
        trace, own = t.path("j%d.ht" % run), t.path("own%d" % run)
        r = t.run([t.heaptrail, "record", "-q", "--buffer-size", "4096", "-o", trace, "--",
                   t.prog("fdjuggle"), "3", "300000", "200000", own], env=env, timeout=90)
        eq(r.rc, 0, "run %d: record's exit status:\n%s" % (run, r.describe()))
        said = dict(l.split(" ", 1) for l in r.stderr.splitlines()
                    if l.split(" ", 1)[0] in ("pairs", "juggled", "foreign"))
        eq(said, {"pairs": "900000", "juggled": "200000", "foreign": "0"},
           "run %d (%s): the program's own counts" % (run, env))
        eq(os.path.getsize(own), 0, "run %d: the program's own file on disk" % run)
        s = t.stats(trace)
        check(s["complete"] and s["closed"], "run %d: the trace is not whole" % run)
        # (and the one malloc(100) before the threads)
        eq(s["calls"]["malloc"], 900001, "run %d: the trace's mallocs" % run)


@case(timeout=240, labels=("reliability",))
def test_trace_fd_juggled_raw_said(t):
    """fdjuggle with raw dup2 system calls, a swap every microsecond or
    so, which the recorder's wrappers of dup2 and close never see, under
    record with 4 KiB buffers.  The threads writing their own buffers
    (HEAPTRAIL_SELF_WRITE=2, then the default) cannot be kept from every
    such swap: what they lose is never silent (the trace is whole and has
    every call, or record says it is damaged, exit 125), and once a
    thread sees the number taken it hands its chunk back to the writer
    process (which cuts it off and writes it again from the buffer) and
    the threads write nothing more.  With HEAPTRAIL_SELF_WRITE=0 (the
    writer process writes everything, through its own descriptor table)
    the program's file stays empty and the trace exact.  The same with
    a pipe in place of the program's file.  Before: record
    exited 0 with "recording stopped" when the swap put a pipe there
    ("Illegal seek"), and the threads' writes went on into the program's
    file (1.5 MB in 2 runs of 4 in probe I)."""
    runs = [({"HEAPTRAIL_SELF_WRITE": "2"}, "raw")] * 2 + [({}, "raw")] * 2 + \
        [({"HEAPTRAIL_SELF_WRITE": "2"}, "rawpipe")] * 2 + [({}, "rawpipe")] + \
        [({"HEAPTRAIL_SELF_WRITE": "0"}, "raw")] * 2
    for run, (env, how) in enumerate(runs):
        trace, own = t.path("r%d.ht" % run), t.path("rown%d" % run)
        r = t.run([t.heaptrail, "record", "-q", "--buffer-size", "4096", "-o", trace, "--",
                   t.prog("fdjuggle"), "3", "300000", "200000", own, how], env=env,
                  timeout=90)
        said = dict(l.split(" ", 1) for l in r.stderr.splitlines()
                    if l.split(" ", 1)[0] in ("pairs", "juggled", "data", "foreign"))
        eq((said.get("pairs"), said.get("juggled")), ("900000", "200000"),
           "run %d (%s): the program's own counts:\n%s" % (run, env, r.describe()))
        check("recording stopped" not in r.stderr, "run %d: %s" % (run, r.stderr))
        if r.rc == 125:
            check("is damaged" in r.stderr and env.get("HEAPTRAIL_SELF_WRITE") != "0",
                  "run %d (%s): exit 125:\n%s" % (run, env, r.describe()))
            continue
        eq(r.rc, 0, "run %d: record's exit status:\n%s" % (run, r.describe()))
        s = t.stats(trace)
        check(s["complete"] and s["closed"], "run %d: the trace is not whole" % run)
        eq(s["calls"]["malloc"], 900001, "run %d (%s): the trace's mallocs" % (run, env))
        if env.get("HEAPTRAIL_SELF_WRITE") == "0":
            eq(said.get("data"), "0", "run %d: bytes of records in the program's file" % run)
        if how == "rawpipe":
            eq(said.get("foreign"), "0", "run %d: the file (the pipe was juggled)" % run)


# Two threads allocating as fast as they can; after 20 ms main execs a
# path that does not exist (the exec fails), then /bin/true.
EXEC_BUSY_C = r"""
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *loop(void *arg)
{
	void *volatile sink;
	(void)arg;
	for (;;) {
		sink = malloc(64);
		free(sink);
	}
	return NULL;
}

int main(void)
{
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, loop, NULL);
	struct timespec ts = {0, 20000000};
	nanosleep(&ts, NULL);
	execl("/nonexistent/x", "x", (char *)NULL);
	nanosleep(&ts, NULL);
	execl("/bin/true", "true", (char *)NULL);
	return 9;
}
"""


@case(timeout=120, labels=("cpu",), locks=("cpu",))
def test_exec_while_threads_allocate_no_false_death(t):
    """A program whose main thread execs (once failing, then /bin/true)
    while two threads allocate, five runs: record says nothing of a
    writer that died, exits 0, and the traces of both images are whole.
    Before, a thread that reaped the writer process, which had ended on
    purpose for the exec, said "the trace writer process died; the
    program's threads write ... themselves" at every such exec (and so
    never said it again when one really died)."""
    from htlib import compile_c
    exe = compile_c(t, "execbusy", EXEC_BUSY_C, flags=("-O2", "-pthread"))
    for run in range(5):
        trace = t.path("e%d.ht" % run)
        r = t.run([t.heaptrail, "record", "-o", trace, "--", exe], timeout=60)
        eq(r.rc, 0, "run %d: record's exit status:\n%s" % (run, r.describe()))
        check("writer process died" not in r.stderr, "run %d: %s" % (run, r.stderr))
        for f in (trace + ".exec1", trace):
            s = t.stats(f)
            check(s["complete"] and s["closed"], "run %d: %s is not whole" % (run, f))


# chain CNT N: image N (counting in slot N of the shared file CNT, after
# each call returns) starts two threads that allocate and free without
# end, allocates 2000 blocks itself, waits 20 ms and execs itself with
# N - 1; image 0 exits.
EXEC_CHAIN_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

struct slot { _Atomic long malloc, free; long pad[6]; };
static struct slot *S;
static int me;
static void *volatile sink;

static void *cm(size_t n)
{
	void *p = malloc(n);
	sink = p;
	atomic_fetch_add(&S[me].malloc, 1);
	return p;
}

static void cf(void *p)
{
	free(p);
	atomic_fetch_add(&S[me].free, 1);
}

static void *loop(void *a)
{
	unsigned s = (unsigned)(long)a + 1;
	void *keep[64] = {0};
	for (;;) {
		s = s * 1103515245 + 12345;
		int i = (s >> 10) & 63;
		if (keep[i])
			cf(keep[i]);
		keep[i] = cm(16 + (s >> 16) % 1000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int fd = open(argv[1], O_RDWR | O_CREAT, 0644);
	if (fd < 0 || ftruncate(fd, 64 * sizeof(struct slot)))
		return 3;
	S = mmap(NULL, 64 * sizeof(struct slot), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	me = atoi(argv[2]);
	pthread_t t;
	for (long i = 0; i < 2; i++)
		pthread_create(&t, NULL, loop, (void *)i);
	for (int k = 0; k < 2000; k++)
		cf(cm(100));
	usleep(20000);
	if (me > 0) {
		char b[16];
		snprintf(b, sizeof(b), "%d", me - 1);
		char *a[] = {argv[0], argv[1], b, NULL};
		execv("/proc/self/exe", a);
		return 4;
	}
	return 0;
}
"""


@case(timeout=300, labels=("reliability",))
def test_exec_chain_threads_counted(t):
    """A chain of six images (--follow-exec), each with two threads that
    allocate without end when it execs the next: each image's trace holds
    the calls the image counted (after each call returned), and the last
    image's, which exits with its threads running, its calls plus those
    counted as not recorded.  Before, each exec'd image's trace missed
    the calls the other threads made between the trace's finalizing and
    the end of the exec, 20,000 to 400,000 of them (4 to 8%), not counted
    anywhere and every trace "complete" (probe I): the other threads now
    wait in their next heap call while the process execs."""
    from htlib import compile_c
    exe = compile_c(t, "execchain", EXEC_CHAIN_C, flags=("-O2", "-pthread"))
    for run in range(2):
        trace, cnt = t.path("c%d.ht" % run), t.path("cnt%d" % run)
        r = t.run([t.heaptrail, "record", "-q", "--follow-exec", "-o", trace, "--", exe, cnt,
                   "5"], timeout=120)
        eq(r.rc, 0, "run %d: record's exit status:\n%s" % (run, r.describe()))
        with open(cnt, "rb") as f:
            data = f.read()
        own = [struct.unpack_from("2q", data, i * 64) for i in range(6)]
        for n in range(6):
            # (image 5 ran first: its trace is .exec1; image 0's is the trace)
            f = trace if n == 0 else trace + ".exec%d" % (6 - n)
            s = t.stats(f, dropped_ok=True)
            check(s["complete"] and s["closed"], "run %d: %s is not whole" % (run, f))
            got = (s["calls"]["malloc"], s["calls"]["free"])
            if n == 0:
                # (exits with its threads running: counted as not recorded)
                eq(got[0] + got[1] + s["dropped"] - (own[0][0] + own[0][1]) in (-1, 0, 1, 2),
                   True, "run %d: the last image: trace %r + %d not recorded against its "
                   "own %r" % (run, got, s["dropped"], own[0]))
                continue
            eq(s["dropped"], 0, "run %d: image %d, calls not recorded" % (run, n))
            # (a call a thread was recording when the exec began can land
            # after the final round, and one recorded can be ended by the
            # exec before the thread counts it: a call a thread at most)
            check(all(abs(o - g) <= 2 for g, o in zip(got, own[n])),
                  "run %d: image %d (%s): trace %r, its own count %r" % (run, n, f, got, own[n]))


@case(timeout=300)
def test_cancel_async_no_orphan(t):
    """Threads cancelled asynchronously (PTHREAD_CANCEL_ASYNCHRONOUS) while
    they loop on malloc/free, 3 at a time, 150 times (tests/progs/
    cancelasync.c), recorded 4 times: each trace is finished by record and
    reads without an error, with every thread, every worker's calls but
    the one each cancellation cut short, and the calls left out counted.
    Before: a thread cancelled between handing its full buffer over and
    taking the next handed it over again at its exit, which linked the
    writer's queue into a ring: the writer process drained it at 100% CPU
    after the program ended ('not finished'), or a chunk was written from
    a buffer another thread was filling ('does not decompress'): 3 runs
    of 4 failed."""
    rounds = 150
    for run in range(4):
        out = t.path("acancel-%d.ht" % run)
        r = t.run([t.heaptrail, "record", "-o", out, "--", t.prog("cancelasync"),
                   str(rounds)], timeout=120)
        eq((r.rc, r.stdout), (0, "rounds: %d\n" % rounds), "run %d: status, output:\n%s"
           % (run, r.describe()))
        check("not finished" not in r.stderr and "damaged" not in r.stderr
              and "error" not in r.stderr, "run %d: record said:\n%s" % (run, r.stderr))
        s = t.tool(["stats", "--json", out])
        eq(s.rc, 0, "run %d: stats:\n%s" % (run, s.describe()))
        d = json.loads(s.stdout)
        eq((d["threads"], d["complete"]), (3 * rounds + 1, True),
           "run %d: threads, complete" % run)
        # each worker: malloc/free pairs; the call a cancellation cut
        # short leaves a block live, or frees one whose malloc it cut
        # (the frees of NULL are the threads' ends)
        live, unknown = d["live_blocks_at_exit"], d["unknown_frees"]
        check(live <= 3 * rounds + 10 and unknown <= 3 * rounds,
              "run %d: %d blocks live at exit, %d unknown frees" % (run, live, unknown))
        eq(d["calls"]["malloc"] + d["calls"]["calloc"] - live,
           d["calls"]["free"] - d["free_null"] - unknown, "run %d: blocks freed" % run)
        check(0 < d["dropped"] <= 3 * 3 * rounds, "run %d: %d calls not recorded"
              % (run, d["dropped"]))
        os.unlink(out)


@case(timeout=120)
def test_read_while_chunk_half_written(t):
    """A trace read while its writer is between a chunk's header and its
    payload (two writes; probe S saw `report` call a running pipeline's
    trace truncated once in 60): the file ends inside that chunk, its
    writer holds the lock, its program runs.  Made here from the raw trace
    of a program that waits, cut a few bytes into its last event chunk,
    with this test holding the lock in the writer's place and named as the
    program: stats reads the chunks before the cut and says the trace is
    being written; it called it truncated (exit 1)."""
    import fcntl
    import htformat
    from htlib import paced_held
    trace = t.path("raw.ht")
    p = None
    try:
        p = paced_held(t, trace, ("--no-compact", "--buffer-size", "4096"))
        with open(trace, "rb") as f:
            data = bytearray(f.read())
        p.stdin.write(b"go\n")
        p.stdin.flush()
        p.communicate(timeout=60)
    finally:
        reap(p)
    pos = struct.unpack_from("<Q", data, htformat.HEADER.size - 16 * 8 + 16 * htformat.SEC_CHUNKS)[0]
    last = None
    while pos + htformat.CHUNK.size <= len(data):
        f = htformat.CHUNK.unpack_from(data, pos)
        if f[1] == htformat.CHUNK_EVENTS and f[5] > 16:
            last = pos
        pos += htformat.CHUNK.size + f[5]
    check(last is not None, "no event chunk in the raw trace")
    cut = data[:last + htformat.CHUNK.size + 10]
    struct.pack_into("<i", cut, 24, os.getpid())  # (the header's pid: a live process)
    half = t.path("half.ht")
    with open(half, "wb") as f:
        f.write(cut)
    fd = os.open(half, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        r = t.tool(["stats", "--json", half])
    finally:
        os.close(fd)
    eq(r.rc, 0, r.describe())
    check("truncated" not in r.stderr and "still being written" in r.stderr,
          "the warnings:\n" + r.stderr)
    s = json.loads(r.stdout)
    check(s["being_written"] and s["calls"]["malloc"] >= 1, "being_written %r, mallocs %d" % (
        s["being_written"], s["calls"]["malloc"]))
