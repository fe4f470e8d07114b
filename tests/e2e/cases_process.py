"""Processes: fork, exec, dlopen, crashes, kill -9, ways to exit, and what
`heaptrail record` passes through (status, stdin/stdout), the output file's
mode and symlink safety."""

import json
import os
import re
import signal
import struct
import subprocess
import time

from htformat import FILE_F_FORK_CHILD, Trace
from htlib import (GLIBC_DTV_CALLOCS_PER_THREAD, case, check, children, comm, eq, expect,
                   expect_calls, fail, file_mode, kill_quietly, live_set_check, skip,
                   which)


def child_pid(run, name="child"):
    for line in run.stdout.splitlines():
        if line.startswith(name + ": "):
            return int(line.split(": ")[1])
    fail("no '%s: PID' line in the output:\n%s" % (name, run.describe()))


@case()
def test_fork(t):
    """Parent and child both allocate; each writes its own complete file."""
    out = t.path("fork.ht")
    r = t.record(out, [t.prog("forker")])
    child = child_pid(r)
    eq(sorted(os.listdir(t.dir)), sorted(["fork.ht", "fork.ht.%d" % child]), "files")
    s = t.stats(out)
    expect_calls(s, {"malloc": 15, "free": 15})
    expect(s, forks=1, complete=True, closed=True, threads=1, unknown_frees=0,
           live_blocks_at_exit=0, bytes_allocated=10 * 64 + 5 * 128)
    c = t.stats(out + ".%d" % child)
    expect_calls(c, {"malloc": 7, "free": 10})
    # the child frees 3 blocks its parent allocated before the fork
    expect(c, forks=0, complete=True, closed=True, threads=1, unknown_frees=3,
           live_blocks_at_exit=0, bytes_allocated=7 * 96)
    eq(c["per_thread"][0]["tid"], child, "the child's thread is the child")
    # its thread's frees are its 10 free calls, those 3 among them, and
    # the text says where they come from
    eq(c["per_thread"][0]["frees"], 10, "the child thread's frees")
    r = t.tool(["stats", out + ".%d" % child])
    check("unknown frees    3 (blocks allocated by the parent before the fork, or by calls "
          "hidden from the tracer)" in r.stdout,
          "the child's unknown frees explained:\n" + r.stdout)
    # the child's trace says it is one (its frees of the parent's blocks
    # are no order anomaly); the parent's does not
    check(Trace(out + ".%d" % child).flags & FILE_F_FORK_CHILD, "child trace without FORK_CHILD")
    check(not Trace(out).flags & FILE_F_FORK_CHILD, "parent trace with FORK_CHILD")
    expect(c, order_exact=True)


@case()
def test_fork_child_killed_marked(t):
    """record's list of the children's traces says how a child that did
    not end cleanly ended, as far as its trace tells (the child is its
    parent's to reap, not record's): forker's child kills itself with
    SIGSEGV (the recorder's handler closes its trace, naming the signal)
    or with SIGKILL (its writer process closes it, orphaned), with the
    writer process and with --writer=thread (nobody closes it); a child
    that exits is listed as before.  Before: no mark, the killed child
    listed as one that exited."""
    marks = {signal.SIGSEGV: " [killed by SIGSEGV]",
             signal.SIGKILL: " [ended without closing its trace (killed?)]", 0: ""}
    for writer in ("process", "thread"):
        for sig, mark in sorted(marks.items()):
            out = t.path("k%d-%s.ht" % (sig, writer))
            r = t.run([t.heaptrail, "record", "--writer", writer, "-o", out, "--",
                       t.prog("forker"), str(int(sig))])
            eq(r.rc, 0, "forker %d, --writer %s:\n%s" % (sig, writer, r.describe()))
            child = child_pid(r)
            row = "%s.%d (forker %d)%s" % (out, child, sig, mark)
            lines = r.heaptrail_lines()
            eq(len(lines), 1, "forker %d, --writer %s: one line:\n%s" % (sig, writer, r.stderr))
            check(row + ";" in lines[0], "forker %d, --writer %s: %r listed in:\n%s"
                  % (sig, writer, row, lines[0]))
            if writer == "thread" and sig == signal.SIGKILL:
                continue  # (its calls since the last flush are lost with it)
            c = t.stats(out + ".%d" % child, rc=None)
            expect_calls(c, {"malloc": 7, "free": 10})


def wait_for_file(path, timeout=30):
    """The contents of path once a program has written it (a daemon, which
    nothing else waits for)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.exists(path):
            time.sleep(0.05)  # (written in one write, then closed)
            with open(path) as f:
                text = f.read()
            if text.endswith("\n"):
                return text
        time.sleep(0.05)
    fail("%s: not written within %ds" % (path, timeout))


# A daemon by two forks: the parent exits at once; its child makes no heap
# call, starts a session, waits 50 ms and forks the daemon, which
# allocates for a second and writes "ok PID" to DONE.
DOUBLE_FORK_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *volatile sink;

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	if (fork() != 0)
		return 0;
	setsid();
	int fd = open("/dev/null", O_RDWR);
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	usleep(50000);
	if (fork() != 0)
		_exit(0);
	for (int i = 0; i < 1000; i++) {
		sink = malloc(100);
		free(sink);
		usleep(1000);
	}
	char line[32];
	int n = snprintf(line, sizeof(line), "ok %d\n", (int)getpid());
	int out = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (write(out, line, (size_t)n) != n)
		return 3;
	close(out);
	return 0;
}
"""


@case(timeout=120)
def test_daemon_second_generation_said(t):
    """A daemon made by two forks, its first child gone only after record's
    first look at the children: record says the daemon still runs and
    writes its trace.  It said nothing, and listed the growing trace as a
    finished one, when the second fork came after that look (13 runs of 24
    on a loaded machine, probe I): the children are looked for again while
    new ones turn up."""
    from htlib import compile_c
    exe = compile_c(t, "doublefork", DOUBLE_FORK_C)
    for run in range(2):
        out, done = t.path("df%d.ht" % run), t.path("dfdone%d.txt" % run)
        r = t.run([t.heaptrail, "record", "-o", out, "--", exe, done])
        eq(r.rc, 0, "run %d: record's exit status:\n%s" % (run, r.describe()))
        said = wait_for_file(done)
        check(said.startswith("ok "), "run %d: the daemon said %r" % (run, said))
        kid = int(said.split()[1])
        check("the program writing %s.%d (pid %d) still runs after the traced program "
              "ended" % (out, kid, kid) in r.stderr,
              "run %d: no note of the daemon still writing:\n%s" % (run, r.stderr))


@case(timeout=120)
def test_daemon(t):
    """daemon(3): glibc's forks and leaves the parent by calls of its own
    that no hook sees, which lost the parent's fork event and had the
    writer close its trace as if the program had been killed.  The
    parent's trace holds its calls and the fork and was shut down
    cleanly; the child's holds its own; record, which ends with the
    parent, says the child's trace is still being written; daemon() did
    what it does (new session, "/", stdio on /dev/null; or neither with
    nochdir and noclose).  A child makes its trace at its first call: one
    that waits 1.5 s before it (the 2 case: as a daemon the scheduler has
    not run yet when record ends, which happened in CI) has none when record
    ends, and is noted all the same."""
    for nochdir, noclose, wait in ((0, 0, 0), (1, 1, 0), (2, 0, 1500)):
        what = "daemon(%d, %d), first call after %d ms" % (nochdir, noclose, wait)
        out = t.path("d%d.ht" % nochdir)
        done = t.path("done%d.txt" % nochdir)
        r = t.run([t.heaptrail, "record", "-o", out, "--", t.prog("daemonize"),
                   str(min(nochdir, 1)), str(noclose), "2000", done, str(wait)])
        eq(r.rc, 0, "%s: record's exit status" % what)
        said = wait_for_file(done)
        check(said.startswith("ok "), "%s: the daemon found %r" % (what, said.strip()))
        kid = int(said.split()[1])
        if not noclose:  # (with noclose, record's pipes stay open until the daemon ends)
            check("the program writing %s.%d (pid %d) still runs after the traced program "
                  "ended" % (out, kid, kid) in r.stderr,
                  "%s: no note of the daemon still writing:\n%s" % (what, r.stderr))
        s = t.stats(out)
        expect_calls(s, {"malloc": 4})
        expect(s, forks=1, complete=True, closed=True, threads=1)
        check("warning" not in s["_run"].stderr,
              "%s: the parent's trace has warnings:\n%s" % (what, s["_run"].stderr))
        c = t.stats(out + ".%d" % kid)
        expect_calls(c, {"malloc": 1000, "free": 1002})
        expect(c, complete=True, closed=True, threads=1, unknown_frees=2, live_blocks_at_exit=0)
        check(Trace(out + ".%d" % kid).flags & FILE_F_FORK_CHILD, "child trace without FORK_CHILD")
    r = t.run([t.heaptrail, "record", "-q", "-o", t.path("q.ht"), "--", t.prog("daemonize"),
               "0", "0", "1000", t.path("doneq.txt")])
    eq(r.rc, 0, "record -q: exit status")
    eq(r.stderr, "", "record -q of a daemon: stderr")
    wait_for_file(t.path("doneq.txt"))


@case(timeout=60)
def test_child_about_to_exec(t):
    """`cmd &` as a shell runs it: the program ends while its fork child,
    which has made calls (so it has a trace), has not exec'd yet.  record
    gives such children a moment (100 ms in all): a child that execs 30 ms
    after the program's end closes its trace at the exec, and record
    neither says it "still runs" (before: it did, in about half the runs of
    `sh -c 'sleep 1 & echo'`, as the fork child had or had not reached its
    exec); one that waits 600 ms is noted."""
    for wait, noted in ((30, False), (600, True)):
        out = t.path("late%d.ht" % wait)
        r = t.run([t.heaptrail, "record", "-o", out, "--", t.prog("forkexec"), "late",
                   str(wait), "200"])
        eq(r.rc, 0, "late %d: record's exit status" % wait)
        kid = child_pid(r, "forked late")
        note = "the program writing %s.%d (pid %d) still runs" % (out, kid, kid)
        if noted:
            check(note in r.stderr, "late %d: no note of the child:\n%s" % (wait, r.stderr))
            continue
        check(note not in r.stderr and "still runs" not in r.stderr,
              "late %d: a child that exec'd said to run on:\n%s" % (wait, r.stderr))
        c = t.stats(out + ".%d" % kid)
        expect_calls(c, {"malloc": 2, "free": 2})
        expect(c, complete=True, closed=True, threads=1)


def sigalloc(t, name, maps, opts=(), env=None, calls=2000000):
    """record of tests/progs/sigalloc.c (a 100 us timer whose handler
    allocates); the trace's stats, the handler's runs and the calls the
    program made itself."""
    out = t.path(name + ".ht")
    r = t.run([t.heaptrail, "record", "-q"] + list(opts) + ["-o", out, "--", t.prog("sigalloc"),
              str(calls), "100", str(maps)], env=env, timeout=120)
    eq(r.rc, 0, "%s: exit status (%s)" % (name, r.stderr.strip()))
    h = child_pid(r, "handler")
    # (the loop takes 40 ms at the very least: hundreds of runs, of which
    # about two in five land in a record)
    check(h >= 100, "%s: the timer's handler ran %d times only" % (name, h))
    return out, t.stats(out, dropped_ok=True), h, calls


def sigalloc_check(name, s, h, calls, maps):
    """Every call of sigalloc.c's (its header) is in the trace or counted
    in `dropped`, none twice; dropped calls are the handler's maps, and
    heap calls only when the handler ran again and again before its thread
    recorded anything (a thread preempted in a record while the timer went
    on, on a loaded machine, fills the 16 places): at most 2%."""
    want = {"malloc": 1 + h, "calloc": h, "realloc": h, "free": 1 + calls + 2 * h,
            "posix_memalign": (calls + 3) // 4}
    c = s["calls"]
    got = {k: c[k] for k in want}
    maps_got = c["mmap"] + c["munmap"]
    for k in want:
        check(got[k] <= want[k], "%s: %s: %d calls in the trace, the program made %d"
              % (name, k, got[k], want[k]))
    heap_lost = sum(want.values()) - sum(got.values())
    eq(heap_lost + (2 * h - maps_got if maps else 0), s["dropped"],
       "%s: calls missing from the trace (%s of %s) against the header's dropped"
       % (name, got, want))
    check(heap_lost <= 5 * h // 50, "%s: %d of the handler's %d heap calls dropped"
          % (name, heap_lost, 5 * h))
    expect(s, order_exact=True, complete=True, closed=True)
    if not s["dropped"]:
        expect(s, unknown_frees=0, live_blocks_at_exit=0)
    return heap_lost


@case(timeout=300)
def test_signal_handler_allocates(t):
    """A signal handler that calls malloc, calloc, realloc and free while
    the program makes calls the recorder records: the handler's calls that
    land while the thread writes a record are kept and written right after
    it (src/preload/nested.c), so the trace has every call, in an exact
    order (before: a third of the handler's calls were missing, and nothing
    said so); the few it could not keep are counted in the header's
    `dropped`.  The same with --stacks and with the writer thread.  A
    handler that also maps a page: the maps the library does not keep are
    counted too (maps in the trace + dropped = the handler's), and readers
    say so."""
    lost = 0
    for name, opts, env in (("default", (), None), ("stacks", ("--stacks",), None),
                            ("thread", (), {"HEAPTRAIL_WRITER": "thread"})):
        out, s, h, calls = sigalloc(t, name, 0, opts, env)
        lost += sigalloc_check(name, s, h, calls, 0)
    out, s, h, calls = sigalloc(t, "maps", 1)
    sigalloc_check("maps", s, h, calls, 1)
    check(s["dropped"] > 0, "maps: no map of the handler's was dropped (%d runs)" % h)
    warn = "the recorder could not record %d calls of the program" % s["dropped"]
    check(warn in s["_run"].stderr, "stats --json: no warning of the dropped calls:\n%s"
          % s["_run"].stderr)
    r = t.tool(["stats", out])
    check("not recorded     %d calls" % s["dropped"] in r.stdout,
          "stats: no 'not recorded' line:\n%s" % r.stdout)
    if lost:
        t.note("%d heap calls of signal handlers dropped (counted): a loaded machine" % lost)


@case(timeout=120)
def test_signal_handler_small_altstack(t):
    """A SIGSEGV handler on an 8 KiB alternate signal stack that allocates
    (tests/progs/altstack.c, 200 times): the program runs as it does
    untraced, with and without --stacks (also --unwind=dwarf), and the
    trace holds the handler's 200 malloc(64) with their stacks.  Before,
    the stack walk's 4 KiB of frames and libunwind state on that stack
    overflowed it: SIGSEGV in the handler, exit 139.  On 6 KiB, too little
    for libunwind's walk, the handler's calls are recorded without a
    stack."""
    eq(t.run([t.prog("altstack")]).rc, 0, "untraced")
    for opts in ([], ["--stacks"], ["--stacks", "--unwind", "dwarf"]):
        out = t.path("alt%d.ht" % len(opts))
        r = t.run([t.heaptrail, "record", "-q", "-o", out] + opts + ["--", t.prog("altstack")])
        eq((r.rc, r.stdout), (0, "handled: 200\n"), "%s:\n%s" % (opts, r.describe()))
        s = t.stats(out)
        expect_calls(s, {"malloc": 201, "free": 200, "mmap": 1})
        if opts:
            fl = t.tool(["flamegraph", "-q", "--folded", "--metric", "allocations", out]).stdout
            check(any(";on_segv" in l for l in fl.splitlines()),
                  "%s: no stack through on_segv:\n%s" % (opts, fl))
    # 6 KiB: too little room left for libunwind's walk: the handler's calls
    # go without a stack (they crashed the program)
    if t.run([t.prog("altstack"), "6144"]).rc == 0:
        out = t.path("alt6k.ht")
        r = t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", t.prog("altstack"),
                   "6144"])
        eq((r.rc, r.stdout), (0, "handled: 200\n"), "6 KiB, --stacks:\n" + r.describe())
        expect_calls(t.stats(out), {"malloc": 201, "free": 200, "mmap": 1})


def limited(kib, argv):
    """argv under `ulimit -v KIB` (bash's)."""
    return ["bash", "-c", 'ulimit -v %d && exec "$@"' % kib, "sh"] + list(argv)


@case(timeout=180)
def test_address_space_limit(t):
    """Under an address-space limit (ulimit -v, as CI jobs and containers
    set) the recorder reserves at most an eighth of it for its buffers
    (fewer buffers, a smaller index, down to 1/32 of its ~340 MiB), so the
    program keeps its share and every call is recorded; below the smallest
    reservation the program runs untraced and the recorder says why, once.
    Before: the whole ~340 MiB was taken from the program's share (under
    `ulimit -v 1200000` tests/progs/huge.c's 1 GiB malloc failed, traced
    only, and the program with it) or, when it did not fit, the program
    ran untraced in silence and record blamed a static binary (and until
    probe T, record's own line still did: it names the limit now)."""
    out = t.path("huge.ht")
    r = t.run(limited(1200000, [t.heaptrail, "record", "-q", "-o", out, "--", t.prog("huge")]))
    eq(r.rc, 0, "huge under ulimit -v 1200000: exit status (%s)" % r.stderr.strip())
    s = t.stats(out)
    expect_calls(s, {"malloc": 3, "calloc": 1, "realloc": 1, "free": 2})
    expect_calls(s, {"malloc": 1, "calloc": 1, "realloc": 1}, key="failed")
    out = t.path("limited.ht")
    r = t.run(limited(150000, [t.heaptrail, "record", "-q", "-o", out, "--", t.prog("randloop"),
                               "20000"]))
    eq(r.rc, 0, "record under ulimit -v 150000: %s" % r.stderr.strip())
    s = t.stats(out)
    expect_calls(s, {"malloc": 20000, "free": 20000})
    expect(s, complete=True, closed=True)
    # Lower, under LD_PRELOAD: traced while an eighth of the limit holds the
    # smallest reservation, then untraced with the recorder's one line,
    # then the loader cannot map the program's libraries; never a program
    # that fails, never untraced in silence.
    said = traced = 0
    for kib in range(160000, 2000, -8000):
        w = t.path("w%d.ht" % kib)
        r = t.run(limited(kib, [t.prog("randloop"), "2000"]),
                  env={"LD_PRELOAD": t.preload, "HEAPTRAIL_OUT": w})
        if r.rc == 127:  # the loader's limit: below the program's own
            break
        eq(r.rc, 0, "ulimit -v %d: exit status (%s)" % (kib, r.stderr.strip()))
        if os.path.exists(w):
            expect_calls(t.stats(w), {"malloc": 2000, "free": 2000})
            traced += 1
            continue
        check("leaves no room for the recorder's buffers" in r.stderr and
              "the program runs untraced" in r.stderr,
              "ulimit -v %d: untraced, and nothing said:\n%s" % (kib, r.stderr))
        eq(r.stderr.count("heaptrail:"), 1, "ulimit -v %d: lines of the recorder's" % kib)
        said += 1
    check(traced and said, "between 160000 and 2000 KiB: %d limits traced, %d untraced with "
          "the recorder's line: want both" % (traced, said))
    # record's own line then names the limit, as the recorder's does
    # (probe T: it guessed "statically linked, or setuid, or the path is
    # not writable?", which record.md says it no longer does)
    r = t.run(limited(100000, [t.heaptrail, "record", "-o", t.path("low.ht"), "--",
                               t.prog("randloop"), "2000"]))
    eq(r.rc, 0, "record under ulimit -v 100000: %s" % r.stderr.strip())
    check("wrote no trace" in r.stderr and "the address-space limit of 97 MiB (ulimit -v) "
          "leaves the recorder no room for its buffers" in r.stderr and
          "statically linked" not in r.stderr, "record's line:\n%s" % r.stderr)


@case(timeout=120)
def test_own_data_limit(t):
    """A program that limits its own data (setrlimit(RLIMIT_DATA) to 16
    MiB, then 14.5 MiB in blocks of 1 KiB: tests/progs/datalimit.c) runs
    traced as it does untraced, with both writers and --stacks: the
    recorder adds its own private memory to the limit the kernel gets,
    and getrlimit/prlimit read back the program's figures.  Before, the
    recorder's ~2 MiB counted in it: 13,906 of the 14,848 blocks."""
    eq(t.run([t.prog("datalimit")]).stdout, "datalimit: ok\n", "datalimit untraced")
    for args in ([], ["--writer=thread"], ["--stacks"]):
        out = t.path("d%d.ht" % len(os.listdir(t.dir)))
        r = t.run([t.heaptrail, "record", "-q", "-o", out] + args + ["--", t.prog("datalimit")])
        eq((r.rc, r.stdout), (0, "datalimit: ok\n"), "datalimit traced %s:\n%s" % (
            args, r.describe()))
        s = t.stats(out)  # (stdio's buffer: one malloc more, not freed)
        eq((s["calls"]["malloc"], s["calls"]["free"]), (14849, 14848), "%s: the calls" % args)


@case(timeout=120)
def test_own_address_space_limit(t):
    """A program that limits its own address space (setrlimit(RLIMIT_AS)
    to 1 GiB, then a malloc of 800 MiB: tests/progs/aslimit.c) runs traced
    as it does untraced: the recorder adds its reservation to the limit
    the kernel gets, and getrlimit/prlimit read back the program's own
    figures.  Also with --stacks, and Python's resource module; a traced
    shell's `ulimit -v` reaches the program it execs unchanged.  Before,
    the ~340 MiB reserved at start-up counted in the program's 1 GiB and
    the malloc failed, traced only."""
    eq(t.run([t.prog("aslimit")]).rc, 0, "aslimit untraced")
    for args in ([], ["--stacks"]):
        out = t.path("as%d.ht" % len(args))
        r = t.run([t.heaptrail, "record", "-q", "-o", out] + args + ["--", t.prog("aslimit")])
        eq((r.rc, r.stdout), (0, "aslimit: ok\n"), "aslimit traced %s:\n%s" % (args,
                                                                             r.describe()))
        s = t.stats(out)
        expect_calls(s, {"malloc": 1, "free": 1})
        eq(s["peak_live_bytes"], 800 << 20, "the 800 MiB block")
    py = which("python3")
    if py:
        out = t.path("py.ht")
        code = ("import resource as r; r.setrlimit(r.RLIMIT_AS, (1 << 30, r.RLIM_INFINITY)); "
                "print(r.getrlimit(r.RLIMIT_AS)); b = bytearray(800 << 20); print(len(b))")
        r = t.run([t.heaptrail, "record", "-q", "-o", out, "--", py, "-c", code])
        eq((r.rc, r.stdout), (0, "(1073741824, -1)\n838860800\n"), "python3:\n" + r.describe())
    # a traced shell's `ulimit -v`, then exec: the new image gets exactly
    # the shell's limit (the recorder's share of the shell is not handed on)
    r = t.run([t.heaptrail, "record", "-q", "-o", t.path("sh.ht"), "--", "bash", "-c",
               "ulimit -v 500000 && exec cat /proc/self/limits"])
    eq(r.rc, 0, "bash, ulimit -v, exec cat:\n" + r.describe())
    check(re.search(r"^Max address space +512000000 +512000000 +bytes", r.stdout, re.M),
          "the limit after exec:\n" + r.stdout)


@case(timeout=240, locks=("pids", "serial"))
def test_more_threads_than_buffers(t):
    """4200 threads that each allocate and wait until all have started:
    more threads recording at once than the recorder's 4096 buffers, each
    of them some thread's current buffer.  The threads beyond go without
    (their calls counted in `dropped`, said by the readers) and try again
    once a buffer is put back; the program ends as it does untraced.
    Before: the 4097th thread waited for a buffer for good, and so did the
    program (a server with a thread per connection)."""
    n = 4200
    probe = t.run([t.prog("manythreads"), str(n)], timeout=120)
    if probe.rc == 3:
        skip("this machine lets a process make %s threads, not %d"
             % (probe.stdout.split(": ")[-1].strip(), n))
    eq(probe.rc, 0, "manythreads untraced: %s" % probe.describe())
    out = t.path("many.ht")
    r = t.run([t.heaptrail, "record", "-o", out, "--", t.prog("manythreads"), str(n)],
              timeout=120)
    eq(r.rc, 0, "record: exit status (%s)" % r.stderr.strip())
    check("threads: %d" % n in r.stdout, "the program did not end its way:\n%s" % r.stdout)
    s = t.stats(out, dropped_ok=True)
    expect(s, complete=True, closed=True)
    # (threads that went without get a buffer once others end: more than
    # 4096 may show in the trace, never all that ran at once)
    check(4096 <= s["threads"] <= n + 1, "%d threads in the trace" % s["threads"])
    # each thread beyond the buffers lost at least its malloc, counted
    lost = n + 1 - s["calls"]["malloc"]
    check(lost >= n - 4096, "%d mallocs of %d missing: fewer than the threads beyond the "
          "buffers" % (lost, n + 1))
    check(s["dropped"] >= lost, "dropped %d, but %d mallocs missing" % (s["dropped"], lost))
    check("could not record %d calls of the program" % s["dropped"] in s["_run"].stderr,
          "no warning of the calls not recorded:\n%s" % s["_run"].stderr)
    check(", %d calls not recorded (see 'heaptrail stats')" % s["dropped"] in r.stderr,
          "record's line does not say how many calls were not recorded:\n%s" % r.stderr)


@case()
def test_fork_not_followed(t):
    out = t.path("fork.ht")
    r = t.traced(out, [t.prog("forker")], env={"HEAPTRAIL_FOLLOW_FORK": "0"})
    child_pid(r)
    eq(sorted(os.listdir(t.dir)), ["fork.ht"], "files")
    s = t.stats(out)
    expect_calls(s, {"malloc": 15, "free": 15})
    expect(s, forks=1, complete=True, closed=True)


@case()
def test_clone_child_traced(t):
    """A child made without glibc's atfork handlers, by clone() without
    CLONE_VM, by _Fork(), or by _Fork() in a signal handler, is followed
    as a fork child, and so is one made by the system call through
    syscall() (fork, clone with SIGCHLD and no stack, clone3 without
    CLONE_VM: probe U found its calls lost in silence, the parent's trace
    unharmed): its trace OUTPUT.<pid> holds its own calls exactly and
    is closed; the parent's holds its own exactly, with the fork; not
    followed, the child is untraced and the parent's trace is the same.
    (Before: the child's calls went into the parent's trace as the
    parent's, or were lost, the parent's later calls were lost, and the
    trace was sometimes corrupt; record said nothing.)"""
    n = 50000
    for how in ("clone", "_Fork", "sigfork", "sysfork", "sysclone", "sysclone3"):
        out = t.path("cl-%s.ht" % how)
        r = t.record(out, [t.prog("clonefork"), str(n), how])
        pid = int(dict(l.split(": ") for l in r.stdout.splitlines())["child"])
        name = os.path.basename(out)
        eq(sorted(f for f in os.listdir(t.dir) if f.startswith(name)),
           [name, "%s.%d" % (name, pid)], "%s: files" % how)
        s = t.stats(out)
        expect_calls(s, {"malloc": 31, "free": 30})
        expect(s, forks=1, complete=True, closed=True, live_bytes_at_exit=65536)
        c = t.stats("%s.%d" % (out, pid))
        expect_calls(c, {"malloc": n + 10, "free": n})
        expect(c, complete=True, closed=True, live_bytes_at_exit=5550, live_blocks_at_exit=10)
        eq(c["pid"], pid, "%s: the child's trace: its pid" % how)
        check(not any("ended without shutting the tracer down" in l
                      for l in r.stderr.splitlines()),
              "%s: the child's trace closed by the child:\n%s" % (how, r.stderr))
        out2 = t.path("nf-%s.ht" % how)
        t.traced(out2, [t.prog("clonefork"), str(n), how], env={"HEAPTRAIL_FOLLOW_FORK": "0"})
        name = os.path.basename(out2)
        eq(sorted(f for f in os.listdir(t.dir) if f.startswith(name)), [name],
           "%s: not followed" % how)
        s = t.stats(out2)
        expect_calls(s, {"malloc": 31, "free": 30})
        expect(s, forks=1, complete=True, closed=True, live_bytes_at_exit=65536)


@case(timeout=120)
def test_child_after_privilege_drop(t):
    """A process that drops root (to nobody) and then forks a worker, as
    daemons do (tests/progs/dropfork.c): the worker, forked with the
    identity it runs under, is traced, its trace written as nobody in a
    directory that user may write.  Before, every child of a process whose
    user had changed since it started went untraced, and nothing said so.
    One that execs after the drop says why the new image is untraced (it
    was told to choose another output path)."""
    if os.geteuid() != 0:
        skip("needs root (to drop to nobody)")
    os.chmod(t.dir, 0o755)  # (nobody goes through it)
    d = t.path("shared")
    os.makedirs(d)
    os.chmod(d, 0o1777)
    out = os.path.join(d, "d.ht")
    r = t.record(out, [t.prog("dropfork")])
    pid = int(dict(l.split(": ") for l in r.stdout.splitlines())["child"])
    child = "%s.%d" % (out, pid)
    check(os.path.exists(child), "no trace of the worker: %s\n%s" % (os.listdir(d), r.describe()))
    eq(os.stat(child).st_uid, 65534, "the worker's trace: its owner")
    c = t.stats(child)
    eq((c["calls"]["malloc"], c["calls"]["free"]), (1000, 1000), "the worker's calls")
    expect(c, complete=True, closed=True)
    # dropped, then exec'd: the new image cannot go on with root's trace, and says why
    out = os.path.join(d, "e.ht")
    r = t.run([t.heaptrail, "record", "-o", out, "--", t.prog("dropfork"), "exec"])
    eq(r.rc, 4, "the program's status:\n" + r.describe())
    check("%s belongs to uid 0, and this process now runs as uid 65534 (it changed user, then "
          "exec'd sh): this image runs untraced" % out in r.stderr,
          "the line of the exec'd image:\n" + r.stderr)


def calls_by_file(t, prefix):
    """{file name: stats} of every trace in t.dir whose name starts with prefix."""
    return {f: t.stats(t.path(f)) for f in sorted(os.listdir(t.dir)) if f.startswith(prefix)}


def check_exec_self(t, files, pid):
    """The traced process exec'ed itself: OUT holds the new image (the
    program a wrapper finally runs), one OUT.* file the earlier image."""
    check("exec.ht" in files, "no exec.ht: %s" % sorted(files))
    s = files.pop("exec.ht")
    expect_calls(s, {"malloc": 6, "free": 6})
    expect(s, complete=True, closed=True, bytes_allocated=1800)
    eq(s["per_thread"][0]["tid"], pid, "exec keeps the pid")
    eq(len(files), 1, "files besides exec.ht: %s" % sorted(files))
    (name, e), = files.items()
    expect_calls(e, {"malloc": 4, "free": 4})
    expect(e, complete=True, closed=True, bytes_allocated=800)


@case()
def test_exec_self(t):
    """The traced program execs itself: both images are traced, with or
    without HEAPTRAIL_FOLLOW_EXEC (which is about children)."""
    for follow in ("0", "1"):
        for f in os.listdir(t.dir):
            os.unlink(t.path(f))
        out = t.path("exec.ht")
        if follow == "0":
            r = t.record(out, [t.prog("execer"), "parent"])
        else:
            r = t.traced(out, [t.prog("execer"), "parent"],
                         env={"HEAPTRAIL_FOLLOW_EXEC": follow})
        pid = child_pid(r, "parent")
        eq(child_pid(r, "child"), pid, "exec keeps the pid")
        with t.soft():
            check_exec_self(t, calls_by_file(t, "exec.ht"), pid)


@case()
def test_exec_children_not_followed(t):
    """Without HEAPTRAIL_FOLLOW_EXEC a forked child's exec runs untraced."""
    out = t.path("x.ht")
    r = t.traced(out, [t.prog("execer"), "spawn"])
    child = child_pid(r)
    files = calls_by_file(t, "x.ht")
    s = files.pop("x.ht")
    expect_calls(s, {"malloc": 4, "free": 4})
    expect(s, forks=1, complete=True, closed=True)
    for name, c in files.items():
        check(name.startswith("x.ht.%d" % child), "unexpected file %s" % name)
        expect_calls(c, {})  # the child made no call before its exec


@case()
def test_exec_children_followed(t):
    """With HEAPTRAIL_FOLLOW_EXEC=1 the forked child's new image is traced
    into a file of its own (NAME.CHILDPID...)."""
    out = t.path("x.ht")
    r = t.traced(out, [t.prog("execer"), "spawn"], env={"HEAPTRAIL_FOLLOW_EXEC": "1"})
    child = child_pid(r)
    files = calls_by_file(t, "x.ht")
    s = files.pop("x.ht")
    expect_calls(s, {"malloc": 4, "free": 4})
    expect(s, forks=1, complete=True, closed=True)
    images = [c for name, c in files.items() if c["calls"]["malloc"]]
    check(all(n.startswith("x.ht.%d" % child) for n in files), "files: %s" % sorted(files))
    eq(len(images), 1, "traces of the exec'ed child with calls (%s)" % sorted(files))
    expect_calls(images[0], {"malloc": 6, "free": 6})
    expect(images[0], complete=True, closed=True, bytes_allocated=1800)


@case()
def test_exec_followed_pid_pattern(t):
    """HEAPTRAIL_OUT=...%p... and a program that execs itself: exec keeps
    the pid, so both images expand to the same name; the first image's
    trace must survive next to the second's."""
    r = t.traced(t.path("t.%p.ht"), [t.prog("execer"), "parent"])
    pid = child_pid(r, "parent")
    files = sorted(os.listdir(t.dir))
    check(all(f.startswith("t.%d.ht" % pid) for f in files), "files: %s" % files)
    mallocs = sorted(t.stats(t.path(f))["calls"]["malloc"] for f in files)
    eq(mallocs, [4, 6], "mallocs per file (%s)" % files)


@case()
def test_fork_pid_pattern(t):
    """HEAPTRAIL_OUT=...%p...: the fork child's file has the child's pid."""
    r = t.traced(t.path("t.%p.ht"), [t.prog("forker")])
    child = child_pid(r)
    files = sorted(os.listdir(t.dir))
    eq(len(files), 2, "files: %s" % files)
    check("t.%d.ht" % child in files, "no file for the child %d: %s" % (child, files))
    expect_calls(t.stats(t.path("t.%d.ht" % child)), {"malloc": 7, "free": 10})
    parent = [f for f in files if f != "t.%d.ht" % child][0]
    expect_calls(t.stats(t.path(parent)), {"malloc": 15, "free": 15})


@case()
def test_exec_failed(t):
    """A failed exec: the same file goes on and closes cleanly at exit."""
    out = t.path("exec.ht")
    t.traced(out, [t.prog("execer"), "parent-fail"])
    eq(sorted(os.listdir(t.dir)), ["exec.ht"], "files")
    s = t.stats(out)
    expect_calls(s, {"malloc": 6, "free": 6})
    expect(s, complete=True, closed=True, bytes_allocated=4 * 200 + 2 * 210)


@case()
def test_dlopen(t):
    """dlopen/dlclose of a library that allocates in its constructor,
    destructor and functions; the marks split the trace."""
    out = t.path("dl.ht")
    t.traced(out, [t.prog("dl_main"), t.prog("libtpdl.so")])
    s = t.stats(out)
    eq([m["label"] for m in s["marks"]], ["dlopen", "opened", "dlclose", "closed"], "marks")
    expect(s, complete=True, closed=True, unknown_frees=0)
    evs = t.dump(out)
    at = {e.text[-1]: i for i, e in enumerate(evs) if e.kind == "mark"}
    # exactly the library's calls between "opened" and "dlclose"
    body = evs[at["opened"] + 1:at["dlclose"]]
    eq([(e.kind, e.args[:2]) for e in body if e.kind != "free"],
       [("malloc", [777])] * 5 + [("calloc", [3, 111])], "allocations in tpdl_work")
    eq(sum(1 for e in body if e.kind == "free"), 6, "frees in the body")
    eq({e.kind for e in body}, {"malloc", "calloc", "free"}, "kinds in the body")
    # the constructor's two blocks inside dlopen, freed inside dlclose
    opening = evs[at["dlopen"] + 1:at["opened"]]
    ctor = [e.result_ptr() for e in opening if e.kind == "malloc" and e.args[0] == 555]
    eq(len(ctor), 2, "constructor mallocs inside dlopen")
    closing = evs[at["dlclose"] + 1:at["closed"]]
    freed = {e.args[0] for e in closing if e.kind == "free"}
    check(set(ctor) <= freed, "the destructor's frees are not inside dlclose")
    c = live_set_check(evs)
    check(c.reuse == 0 and c.unknown == 0, c.summary())
    eq(len(c.live), s["live_blocks_at_exit"], "live blocks: replay vs stats")
    eq(s["calls"]["malloc"], sum(1 for e in evs if e.kind == "malloc"), "stats vs dump mallocs")


@case()
def test_crash_abort(t):
    out = t.path("abort.ht")
    t.record(out, [t.prog("crash"), "abort"], rc=128 + signal.SIGABRT)
    crashed(t, out, "SIGABRT")


@case()
def test_crash_segv(t):
    out = t.path("segv.ht")
    t.record(out, [t.prog("crash"), "segv"], rc=128 + signal.SIGSEGV)
    crashed(t, out, "SIGSEGV")
    # the same without record: the shell-visible status is the signal
    out2 = t.path("segv2.ht")
    r = t.traced(out2, [t.prog("crash"), "segv"], rc=-signal.SIGSEGV)
    crashed(t, out2, "SIGSEGV")
    check(r.rc == -signal.SIGSEGV, "killed by SIGSEGV")


def crashed(t, out, killed_by=None):
    """The trace of crash: its calls, and what the program died of (a
    signal it left to its default action: the recorder's handler closed
    the trace, HT_FILE_F_SIGNALED), said instead of "at exit"."""
    s = t.stats(out)
    expect_calls(s, {"malloc": 20, "free": 5})
    expect(s, complete=True, live_blocks_at_exit=15, live_bytes_at_exit=15 * 64,
           bytes_allocated=20 * 64)
    eq(s["killed_by"], killed_by, "stats --json killed_by")
    text = t.run([t.heaptrail, "stats", out], check_rc=0).stdout
    leaks = t.run([t.heaptrail, "leaks", out], check_rc=0).stdout.splitlines()[0]
    if killed_by:
        check("1 thread (the program died of %s)" % killed_by in text,
              "stats names the signal: %r" % text[:400])
        check("live at the end  960 B in 15 blocks" in text, "stats' live line: %r" % text)
        check("not freed by the trace's end (the program died of a signal it did not handle: "
              "not at exit)" in leaks, "leaks' first line: %r" % leaks)
    else:
        check("live at exit     960 B in 15 blocks" in text, "stats' live line: %r" % text)
        check("not freed at exit" in leaks, "leaks' first line: %r" % leaks)


@case()
def test_exit_status(t):
    """record exits with the program's status."""
    out = t.path("x.ht")
    t.record(out, [t.prog("crash"), "exit", "3"], rc=3)
    crashed(t, out)
    t.record(out, [t.prog("passthru"), "0"], rc=0)
    t.record(out, [t.prog("passthru"), "42"], rc=42)
    t.record(out, [t.prog("passthru"), "-%d" % signal.SIGTERM], rc=128 + signal.SIGTERM)
    t.record(out, [t.prog("passthru"), "-%d" % signal.SIGKILL], rc=128 + signal.SIGKILL)
    # commands that cannot run: 127 (not found) and 126 (not executable),
    # as env(1) and the shells do, with a message
    for argv, rc in (([t.path("no-such-program")], 127), ([t.path("x.ht")], 126)):
        with t.soft():
            r = t.run([t.heaptrail, "record", "-o", t.path("n.ht"), "--"] + argv)
            eq(r.rc, rc, "record of %s" % argv[0])
            check(any(argv[0] in l for l in r.heaptrail_lines()),
                  "no 'heaptrail:' line naming %s" % argv[0])


@case()
def test_record_stderr(t):
    """record adds exactly one 'heaptrail:' line to stderr, however the
    program ends."""
    for argv, rc in (([t.prog("passthru"), "0"], 0),
                     ([t.prog("passthru"), "3"], 3),
                     ([t.prog("crash"), "abort"], 128 + signal.SIGABRT),
                     ([t.prog("crash"), "segv"], 128 + signal.SIGSEGV),
                     ([t.prog("passthru"), "-%d" % signal.SIGTERM], 128 + signal.SIGTERM),
                     ([t.prog("passthru"), "-%d" % signal.SIGKILL], 128 + signal.SIGKILL)):
        out = t.path("s.ht")
        r = t.record(out, argv, rc=rc)
        with t.soft():
            eq(r.heaptrail_lines(), [r.trace_line],
               "'heaptrail:' lines of %s (exit %d)" % (os.path.basename(" ".join(argv)), rc))


@case()
def test_stdio_passthrough(t):
    """stdin and stdout pass through byte for byte; the program's stderr too."""
    data = bytes(range(256)) * 4096 + b"\0\n\r\x1b[0m end"
    out = t.path("p.ht")
    r = t.record(out, [t.prog("passthru"), "7"], stdin=data, rc=7)
    check(r.out == data, "stdout differs from stdin (%d vs %d bytes)" % (len(r.out), len(data)))
    lines = r.stderr.splitlines()
    check("passthru: %d bytes" % len(data) in lines, "the program's stderr line is missing")
    eq(len(lines), 2, "stderr lines (the program's and heaptrail's)")
    r0 = t.run([t.prog("passthru"), "7"], stdin=data)
    eq(r0.rc, 7, "untraced status")
    check(r0.out == r.out, "traced and untraced stdout differ")


def calls_in_file(t, path, calls, secs=60):
    """Waits until the trace at path (still being written) holds calls,
    i.e. the writer has flushed them; fails after secs.  No sleep stands in
    for the writer's rounds: a writer thread that the scheduler holds back
    only makes this wait longer."""
    deadline = time.time() + secs
    seen = None
    while time.time() < deadline:
        if os.path.exists(path):
            r = t.tool(["stats", path, "--json"])
            try:
                seen = json.loads(r.stdout)["calls"]
            except ValueError:
                seen = None  # no header yet, or a chunk being written
            if seen and all(seen[k] == v for k, v in calls.items()):
                return
        time.sleep(0.02)
    fail("the writer did not save %r within %ss (last seen: %r)" % (calls, secs, seen))


@case(locks=("cpu",))
def test_kill9(t):
    """kill -9 after the program said it was ready.  With the writer process
    (the default) every event is in the file and the writer closes it,
    marked orphaned, however soon the kill comes (right after "ready");
    with a writer thread (HEAPTRAIL_WRITER=thread), the program is killed
    once the file holds its events (the writer flushed them while it
    lived): they are all still there after the kill, and the file is not
    closed.  stats and leaks say the blocks were live by the trace's end,
    not at exit (they said "at exit" of a program killed with the writer
    process, which closes its trace)."""
    for name, env in (
            ("process", {}),
            ("process-20ms", {"HEAPTRAIL_FLUSH_INTERVAL": "20"}),
            ("thread", {"HEAPTRAIL_WRITER": "thread"}),
            ("thread-20ms", {"HEAPTRAIL_WRITER": "thread", "HEAPTRAIL_FLUSH_INTERVAL": "20"})):
        out = t.path("kill-%s.ht" % name)
        e = t.base_env({"LD_PRELOAD": t.preload, "HEAPTRAIL_OUT": out})
        e.update(env)
        p = subprocess.Popen([t.prog("killme")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=e, cwd=t.dir)
        try:
            line = p.stdout.readline().decode()
            check(line.startswith("ready "), "killme said %r" % line)
            if name.startswith("thread"):
                calls_in_file(t, out, {"malloc": 1000, "free": 400})
            p.kill()
            p.wait(timeout=30)
        finally:
            kill_quietly(p.pid)
            p.wait()
        eq(p.returncode, -signal.SIGKILL, "killme status")
        s = t.stats(out, rc=None)
        expect_calls(s, {"malloc": 1000, "free": 400})
        expect(s, live_blocks_at_exit=600, bytes_allocated=40000)
        # the blocks left live were not "at exit": the program was killed
        text = t.tool(["stats", out]).stdout
        check(re.search(r"^live at the end  23\.4 KiB in 600 blocks$", text, re.M),
              "%s: stats' line of live blocks:\n%s" % (name, text))
        first = t.tool(["leaks", out]).stdout.splitlines()[0]
        check("23.4 KiB in 600 blocks not freed by the trace's end (the program did not exit "
              "cleanly)" in first, "%s: leaks' first line: %r" % (name, first))
        if name.startswith("process"):
            expect(s, closed=True, orphaned=True, complete=True)
            check("writer process saved every event" in s["_run"].stderr,
                  "%s: no warning that the program was killed:\n%s" % (name, s["_run"].stderr))
            continue
        expect(s, closed=False, orphaned=False)
        rc = s["_run"].rc
        # The writer may have been killed while appending its periodic
        # clock record; then the tail is torn and the file is incomplete.
        eq(rc, 0 if s["complete"] else 1, "stats exit status (complete=%s)" % s["complete"])


def record_killme_killed(t, out):
    """record -o out -- killme, the program killed with SIGKILL right after
    it said it was ready; checks that record passed 128+9 through and
    returns record's stderr."""
    p = subprocess.Popen([t.heaptrail, "record", "-o", out, "--", t.prog("killme")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=t.base_env(), cwd=t.dir)
    try:
        line = p.stdout.readline().decode()
        check(line.startswith("ready "), "killme said %r" % line)
        os.kill(int(line.split()[1]), signal.SIGKILL)
        _, err = p.communicate(timeout=30)
    finally:
        kill_quietly(p.pid)
        p.wait()
    eq(p.returncode, 128 + signal.SIGKILL, "record status")
    return err.decode()


@case(locks=("cpu",))
def test_kill9_record(t):
    """record passes 128+9 through when the program is killed (right after
    it said it was ready: the writer process saves every event whenever
    the kill comes)."""
    out = t.path("k.ht")
    err = record_killme_killed(t, out)
    hl = [l for l in err.splitlines() if l.startswith("heaptrail:") and "k.ht" in l]
    eq(len(hl), 1, "heaptrail lines on stderr naming the trace")
    s = t.stats(out, rc=None)
    expect_calls(s, {"malloc": 1000, "free": 400})


@case(locks=("cpu",))
def test_kill9_record_killed_by(t):
    """A program killed by SIGKILL under record (right after it said it
    was ready): its writer process closes the trace (orphaned), and record,
    which saw the program die of SIGKILL, notes it in the header
    (HT_FILE_F_SIGNALED): stats --json says "killed_by": "SIGKILL" and the
    readers' warning names the signal.  Before: null, and "killed, ended
    by a signal it did not catch, or by the exit_group system call"."""
    out = t.path("k.ht")
    record_killme_killed(t, out)
    s = t.stats(out)
    expect_calls(s, {"malloc": 1000, "free": 400})
    expect(s, closed=True, orphaned=True, complete=True, exit_syscall=False)
    eq(s["killed_by"], "SIGKILL", "stats --json killed_by")
    check("the program was killed by SIGKILL without shutting the tracer down; its "
          "writer process saved every event it had recorded" in s["_run"].stderr,
          "the warning names the signal:\n" + s["_run"].stderr)
    text = t.tool(["stats", out]).stdout
    check("(the program died of SIGKILL)" in text, "stats names the signal:\n" + text)


@case()
def test_exit_modes(t):
    """_exit, _Exit, exit, atexit handlers, exit() from a thread."""
    for mode, rc, calls in (("_exit", 5, {"malloc": 10, "free": 4}),
                            ("_Exit", 6, {"malloc": 10, "free": 4}),
                            ("exit", 0, {"malloc": 10, "free": 4}),
                            ("atexit", 0, {"malloc": 11, "free": 5})):
        out = t.path(mode + ".ht")
        t.traced(out, [t.prog("exiter"), mode], rc=rc)
        s = t.stats(out)
        expect_calls(s, calls)
        expect(s, complete=True, closed=True, live_blocks_at_exit=6,
               live_bytes_at_exit=6 * 32)
    out = t.path("thread-exit.ht")
    t.traced(out, [t.prog("exiter"), "thread-exit"], rc=7)
    s = t.stats(out)
    expect_calls(s, {"malloc": 5, "free": 1, "calloc": GLIBC_DTV_CALLOCS_PER_THREAD})
    expect(s, complete=True, closed=True, threads=2,
           live_blocks_at_exit=4 + GLIBC_DTV_CALLOCS_PER_THREAD)


@case(timeout=120)
def test_exit_from_all_threads(t):
    """exit() from 8 threads and main at once (tests/progs/exitrace.c,
    20,000 malloc/free pairs in each thread first), with the writer process
    and with --writer=thread: every pair is in the trace and it is closed,
    and record prints no warning.  (Before, with --writer=thread, a second
    exit() ended the process while the first was closing the trace: 0 to
    125,000 of the 160,000 mallocs were kept, the trace was left unclosed,
    and record said nothing.)"""
    for writer in ("process", "thread"):
        for i in range(3):
            out = t.path("x-%s-%d.ht" % (writer, i))
            r = t.run([t.heaptrail, "record", "--writer", writer, "-o", out, "--",
                       t.prog("exitrace")], timeout=60)
            eq(r.rc, 5, "--writer %s: the program's status:\n%s" % (writer, r.describe()))
            check("warning" not in r.stderr, "--writer %s: record warned:\n%s" % (writer,
                                                                                 r.stderr))
            s = t.stats(out)
            eq((s["calls"]["malloc"], s["calls"]["free"]), (160000, 160000),
               "--writer %s: malloc, free" % writer)
            expect(s, complete=True, closed=True)


@case()
def test_exit_syscall(t):
    """A program that ends by the exit_group system call itself (Go's
    runtime does; exiter's exit_group: 10 x malloc(32), 4 freed, a thread's
    2 x malloc(48), then exit_group(3)) goes through no exit() or _exit()
    hook: its writer process closes the trace, which is whole.  Under
    record, which saw the program exit with status 3, the trace says so
    and no reader warns (it said "killed, or ended by a signal it did not
    catch"); with LD_PRELOAD alone the warning names the system call among
    its causes."""
    out = t.path("eg.ht")
    r = t.run([t.heaptrail, "record", "-o", out, "--", t.prog("exiter"), "exit_group"])
    eq(r.rc, 3, "record's exit status (the program's)")
    check("warning" not in r.stderr, "record warned:\n" + r.stderr)
    s = t.stats(out)
    expect(s, complete=True, closed=True, orphaned=True, exit_syscall=True, threads=2)
    eq(s["_run"].stderr, "", "stats' stderr")
    evs = t.dump(out, ["--kind", "malloc"])
    eq(sorted(e.args[0] for e in evs if e.args[0] in (32, 48)), [32] * 10 + [48] * 2,
       "the program's mallocs")
    out = t.path("pre.ht")
    t.traced(out, [t.prog("exiter"), "exit_group"], rc=3)
    s = t.stats(out)
    expect(s, complete=True, closed=True, orphaned=True, exit_syscall=False)
    check("exit_group system call" in s["_run"].stderr,
          "the warning of a trace recorded without record:\n" + s["_run"].stderr)
    # killed: the warning stays, and no exit_syscall
    out = t.path("k.ht")
    r = t.run([t.heaptrail, "record", "-o", out, "--", "sh", "-c", "kill -KILL $$"])
    eq(r.rc, 128 + 9, "record's exit status (killed)")
    s = t.stats(out)
    expect(s, orphaned=True, exit_syscall=False)
    check("killed" in s["_run"].stderr, "no warning of a killed program:\n" + s["_run"].stderr)


@case()
def test_main_pthread_exit(t):
    """main ends with pthread_exit; the process ends when its last thread
    does (the recorder's own thread must not keep it alive)."""
    r = t.run([t.prog("exiter"), "main-pthread-exit"], check_rc=0, timeout=20)
    eq(r.rc, 0, "untraced status")
    out = t.path("mpe.ht")
    t.traced(out, [t.prog("exiter"), "main-pthread-exit"], timeout=20)
    s = t.stats(out)
    expect(s, complete=True, closed=True, threads=2, unknown_frees=0)
    # pthread_exit unwinds, and glibc dlopens libgcc_s for that: its
    # allocations come on top; the program's own are these.
    evs = t.dump(out, ["--kind", "malloc"])
    eq(sorted(e.args[0] for e in evs if e.args[0] in (16, 64)), [16, 16, 64, 64, 64],
       "the program's mallocs")


@case()
def test_output_mode_0600(t):
    out = t.path("mode.ht")
    old = os.umask(0)
    try:
        t.record(out, [t.prog("api_all")])
    finally:
        os.umask(old)
    eq(oct(file_mode(out)), oct(0o600), "trace file mode")


@case()
def test_symlink_not_followed(t):
    """A symlink planted at the output path is not followed: its target is
    untouched; under LD_PRELOAD the program still runs, untraced, and the
    recorder says why in one line (record refuses before the program
    starts: e2e.record_output_symlink)."""
    target = t.path("precious.txt")
    with open(target, "w") as f:
        f.write("precious\n")
    os.chmod(target, 0o644)
    out = t.path("trap.ht")
    os.symlink(target, out)
    r = t.traced(out, [t.prog("passthru"), "0"], stdin=b"hello")
    eq(r.out, b"hello", "the program's output")
    eq(r.heaptrail_lines(), ["heaptrail: %s is a symbolic link; heaptrail does not write "
                             "through symlinks (remove it or choose another output path)" % out],
       "the recorder's message")
    with open(target) as f:
        eq(f.read(), "precious\n", "symlink target content")
    eq(oct(file_mode(target)), oct(0o644), "symlink target mode")
    check(os.path.islink(out), "the symlink was replaced")
    # a dangling symlink: nothing is created at its target
    ghost = t.path("ghost.txt")
    out2 = t.path("trap2.ht")
    os.symlink(ghost, out2)
    t.traced(out2, [t.prog("passthru"), "0"])
    check(not os.path.exists(ghost), "a file was created through a dangling symlink")


@case()
def test_old_trace_replaced(t):
    """An old regular file of the user's at the output path that is not a
    trace is neither overwritten nor moved: the recorder refuses it in one
    line, the program runs on untraced, and nothing is written next to it
    (docs/record.md, "Files"; e2e.previous_file_not_a_trace for record).
    A trace there is kept as OUTPUT.old (e2e.previous_trace_kept).
    (Before: the file was moved to OUTPUT.old as if it were a trace, and a
    second run replaced it there.)"""
    out = t.path("old.ht")
    with open(out, "wb") as f:
        f.write(b"junk" * 1000)
    r = t.traced(out, [t.prog("crash"), "exit", "0"])
    said = [l for l in r.stderr.splitlines() if "is not a heaptrail trace" in l]
    eq(len(said), 1, "one line says why:\n" + r.describe())
    with open(out, "rb") as f:
        eq(f.read(), b"junk" * 1000, "the old file, unchanged")
    eq(sorted(n for n in os.listdir(t.dir) if n.startswith("old.ht")), ["old.ht"],
       "files next to it")


@case()
def test_program_closes_fds(t):
    """The program closes every descriptor above stderr (as daemons and
    spawning libraries do) and opens a file of its own: the tracer must
    never write into the program's file.  Recording should go on."""
    data = t.path("data.txt")
    out = t.path("fd.ht")
    t.traced(out, [t.prog("fdclose"), data])
    with open(data, "rb") as f:
        content = f.read()
    check(content == b"hello\n", "the program's file holds %d bytes, not just its own 6: "
          "%r..." % (len(content), content[:40]))
    s = t.stats(out, rc=None)
    with t.soft():
        expect_calls(s, {"malloc": 20, "free": 20})


@case(timeout=120)
def test_writer_thread_fd_race(t):
    """--writer=thread: a program thread keeps dup2()ing its own file onto
    the descriptors the writer uses (1000 and up) and closing them while
    main allocates and flushes.  The writer never writes into the program's
    file (it keeps its descriptor in a table of its own), says nothing in a
    loop, and the trace is whole."""
    n = 200000
    for run in range(2):
        data = t.path("data%d.txt" % run)
        out = t.path("race%d.ht" % run)
        r = t.traced(out, [t.prog("fdrace"), data, n], env={"HEAPTRAIL_WRITER": "thread"})
        with open(data, "rb") as f:
            content = f.read()
        check(content == b"hello\n", "run %d: the program's file holds %d bytes, not just its "
              "own 6: %r..." % (run, len(content), content[:40]))
        lines = r.heaptrail_lines()
        check(len(lines) <= 1, "run %d: the tracer said %d lines:\n%s" % (run, len(lines),
                                                                          "\n".join(lines[:5])))
        s = t.stats(out)
        eq(s["calls"]["malloc"], n, "run %d: mallocs in the trace" % run)


@case(timeout=120, locks=("cpu",))
def test_fork_storm(t):
    """200 forks while two threads allocate: no child deadlocks on a lock
    held by another thread at fork time; every child's file is complete."""
    n = 200
    out = t.path("fs.ht")
    r = t.traced(out, [t.prog("forkstorm"), n], timeout=90)
    pairs = int(r.stdout.split("pairs: ")[1])
    s = t.stats(out)
    expect(s, forks=n, complete=True, closed=True, threads=3)
    eq(s["calls"]["malloc"], pairs, "the parent's mallocs")
    children = [f for f in os.listdir(t.dir) if f.startswith("fs.ht.")]
    eq(len(children), n, "child files")
    for f in children:
        c = t.stats(t.path(f))
        expect(c, complete=True, closed=True, threads=1)
        expect_calls(c, {"malloc": 3, "free": 3})


@case()
def test_writer_invisible(t):
    """The writer process is no child the program can wait for or get a
    SIGCHLD from; the forked child's trace is complete too."""
    for writer in ("process", "thread"):
        out = t.path("wait-%s.ht" % writer)
        r = t.traced(out, [t.prog("waiter")], env={"HEAPTRAIL_WRITER": writer}, rc=None)
        eq(r.rc, 0, "%s: waiter saw the writer: %s" % (writer, r.stdout.strip()))
        s = t.stats(out)
        expect(s, complete=True, closed=True, orphaned=False, forks=1)
        children = [f for f in os.listdir(t.dir) if f.startswith("wait-%s.ht." % writer)]
        eq(len(children), 1, "%s: child traces" % writer)
        c = t.stats(t.path(children[0]))
        expect(c, complete=True, closed=True)
        eq(c["calls"]["malloc"], 1, "%s: the child's mallocs" % writer)


def reaper_waiting(pid, nkids, secs=30):
    """The reaper run by record pid and its writer process, once it has
    forked its nkids children and sleeps in its wait (polled for, not
    slept for: a fixed delay found it not started, or done, on a loaded
    machine)."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        prog = [c for c in children(pid) if comm(c) == "reaper"]
        if len(prog) == 1:
            kids = children(prog[0])
            helpers = [c for c in kids if comm(c) == "heaptrail-write"]
            try:
                with open("/proc/%d/wchan" % prog[0]) as f:
                    waits = f.read() == "do_wait"
            except OSError:
                waits = False
            if len(helpers) == 1 and len(kids) == nkids + 1 and waits:
                return prog[0], helpers[0]
        time.sleep(0.01)
    check(False, "the reaper under record did not wait for %d children within %d s" % (nkids, secs))


def record_reaper(t, out, args, kill_helper=False, timeout=20):
    """heaptrail record (default options) -o OUT -- reaper ARGS, in a session
    of its own, so that a program that hangs is killed with its helper.
    kill_helper: the program's writer process is killed with SIGKILL once
    the program waits for its children.  Returns (rc, stdout, stderr) as
    text."""
    p = subprocess.Popen([t.heaptrail, "record", "-o", out, "--", t.prog("reaper")] +
                         [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=t.base_env(), cwd=t.dir, start_new_session=True)
    try:
        if kill_helper:
            _, helper = reaper_waiting(p.pid, int(args[1]))
            os.kill(helper, signal.SIGKILL)
        o, e = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        o, e = p.communicate()
        fail("reaper %s hung: waited %ds\n%s" % (" ".join(map(str, args)), timeout,
                                                  e.decode("utf-8", "replace")))
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return p.returncode, o.decode("utf-8", "replace"), e.decode("utf-8", "replace")


@case(timeout=180)
def test_wait_all_children(t):
    """A program that reaps every child until none is left, with
    waitpid(-1, ..., __WALL), waitpid(0, ..., __WALL), wait(),
    waitid(P_ALL, ..., WEXITED|__WALL), wait4(-1, ..., __WALL), a WNOHANG
    poll, or wait4(-1, ..., __WCLONE) (no clone children: ECHILD at once),
    ends under record with the default writer process, gets exactly its
    own children's pids and statuses, never the writer's, and leaves
    complete traces with exact counts.  (Before: every wait with __WALL or
    __WCLONE blocked forever on the writer process.)"""
    n = 4
    for mode, kids in (("waitpid", n), ("pgrp", n), ("wait", n), ("waitid", n),
                       ("wait4", n), ("nohang", n), ("wclone", 0)):
        out = t.path("%s.ht" % mode)
        rc, o, e = record_reaper(t, out, [mode, kids])
        eq(rc, 0, "%s: exit status (stdout %r, stderr %r)" % (mode, o, e))
        eq(o, "reaped: %d\nstrangers: 0\n" % kids, "%s: what the program reaped" % mode)
        s = t.stats(out)
        expect(s, complete=True, closed=True, orphaned=False, forks=kids)
        expect_calls(s, {"malloc": 1, "free": 1})
        files = sorted(f for f in os.listdir(t.dir) if f.startswith("%s.ht." % mode))
        eq(len(files), kids, "%s: child traces" % mode)
        for f in files:
            c = t.stats(t.path(f))
            expect(c, complete=True, closed=True)
            expect_calls(c, {"malloc": 1, "free": 1})


@case(timeout=120)
def test_wait_all_writer_killed(t):
    """The writer process killed (SIGKILL) while the program waits with
    waitpid(-1, ..., __WALL) for children that are still running: the wait
    reaps the writer in the kernel, but the program receives only its two
    children, and its trace is complete."""
    out = t.path("wk.ht")
    rc, o, e = record_reaper(t, out, ["waitpid", 2, 2000], kill_helper=True)
    eq(rc, 0, "exit status (stdout %r, stderr %r)" % (o, e))
    eq(o, "reaped: 2\nstrangers: 0\n", "what the program reaped")
    s = t.stats(out)
    expect(s, complete=True, closed=True, forks=2)
    expect_calls(s, {"malloc": 1, "free": 1})


@case(locks=("cpu",))
def test_writer_survives_group_signal(t):
    """A signal for the program's whole process group (what a shell or a
    supervisor sends) that the tracer does not catch (SIGUSR2): the program
    dies without closing its trace, and the writer process, which blocks
    every signal, lives on to write all of it."""
    out = t.path("usr2.ht")
    e = t.base_env({"LD_PRELOAD": t.preload, "HEAPTRAIL_OUT": out})
    p = subprocess.Popen([t.prog("killme")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=e, cwd=t.dir, start_new_session=True)
    try:
        line = p.stdout.readline().decode()
        check(line.startswith("ready "), "killme said %r" % line)
        os.killpg(p.pid, signal.SIGUSR2)
        p.wait(timeout=30)
    finally:
        kill_quietly(p.pid)
        p.wait()
    eq(p.returncode, -signal.SIGUSR2, "killme status")
    s = t.stats(out)
    expect_calls(s, {"malloc": 1000, "free": 400})
    expect(s, complete=True, closed=True, orphaned=True)


@case()
def test_record_static_program(t):
    """A statically linked program runs under record untraced (LD_PRELOAD
    cannot reach it), and record's line says why, by the file: statically
    linked, and `attach -c` probes such a program (before: a guess among
    static, setuid and an unwritable path)."""
    gcc = which("gcc")
    if not gcc:
        skip("gcc is not installed")
    src = t.path("st.c")
    with open(src, "w") as f:
        f.write("#include <stdio.h>\nint main(void) { puts(\"static\"); return 0; }\n")
    exe = t.path("st")
    if t.run([gcc, "-static", "-o", exe, src]).rc != 0:
        skip("gcc cannot link statically here (libc6-dev's libc.a)")
    out = t.path("st.ht")
    r = t.run([t.heaptrail, "record", "-o", out, "--", exe], check_rc=0)
    eq(r.stdout, "static\n", "the program's output")
    eq(r.heaptrail_lines(), ["heaptrail: %s wrote no trace to %s (it is statically linked, and "
                             "LD_PRELOAD does not reach it: 'heaptrail attach -c' probes such a "
                             "program)" % (exe, out)], "record's line")


@case(timeout=120)
def test_getpid_refused(t):
    """A program in a sandbox that refuses getpid (seccomp, EPERM;
    tests/progs/nogetpid.c) is recorded whole and its trace closed, with
    both writers: the recorder tells itself from a fork child by its pid,
    and a failed getpid made it take itself for one: it never closed the
    trace (with the writer thread, half the events were lost; with the
    process, the trace was marked orphaned)."""
    n = 100000
    for args in ([], ["--writer=thread"]):
        out = t.path("g%d.ht" % len(args))
        r = t.run([t.heaptrail, "record", "-q", "-o", out] + args + ["--", t.prog("nogetpid"), n])
        eq((r.rc, r.stdout), (0, "nogetpid: ok\n"), "%s:\n%s" % (args, r.describe()))
        s = t.stats(out)
        expect(s, complete=True, closed=True, orphaned=False)
        check(s["calls"]["malloc"] >= n and s["calls"]["free"] >= n, "%s: %s" % (args, s["calls"]))


@case(timeout=120)
def test_getpid_refused_fork_child(t):
    """getpid refused (seccomp, EPERM), then a fork child makes 1000 pairs
    (nogetpid N fork): its trace is OUTPUT.<its pid>, its header names that
    pid, and record's summary names it.  Before (probe U): OUTPUT.-1, pid
    -1, and left out of the summary."""
    out = t.path("gf.ht")
    r = t.run([t.heaptrail, "record", "-o", out, "--", t.prog("nogetpid"), 1000, "fork"])
    eq(r.rc, 0, r.describe())
    child = int(r.stdout.split("child: ")[1].split()[0])
    name = os.path.basename(out)
    eq(sorted(f for f in os.listdir(t.dir) if f.startswith(name)),
       [name, "%s.%d" % (name, child)], "the traces")
    c = t.stats("%s.%d" % (out, child))
    eq(c["pid"], child, "the child's trace: its pid")
    check(c["calls"]["malloc"] >= 1000, "the child's mallocs: %s" % c["calls"])
    check("%s.%d" % (out, child) in r.stderr, "the summary names it:\n" + r.stderr)


@case(timeout=120)
def test_gettid_refused(t):
    """A sandbox that refuses gettid (seccomp, EPERM) before it starts 3
    threads, each of which and main make 100,000 malloc/free pairs
    (nogetpid N gettid): every thread has a stream of its own, numbered
    by the recorder from 0x40000000 up and said so once on stderr, and
    every call is in the trace.  Before (probe T): every thread was
    (uint32_t)-1, their streams ran into one, some 6,000 of each call
    were lost, and the only sign was a thread 4294967295 missing events
    "18446744073709551615" on stats' stderr."""
    n = 100000
    for args in ([], ["--writer=thread"]):
        out = t.path("g%d.ht" % len(args))
        r = t.run([t.heaptrail, "record", "-o", out] + args +
                  ["--", t.prog("nogetpid"), n, "gettid"])
        eq((r.rc, r.stdout), (0, "nogetpid: ok\n"), "%s:\n%s" % (args, r.describe()))
        check("gettid() fails in this process (a seccomp filter?): its threads are numbered "
              "from 1073741824 in the trace" in r.stderr, "%s: the line:\n%s" % (args, r.stderr))
        st = t.tool(["stats", "--json", out])
        eq(st.rc, 0, st.describe())
        check("missing" not in st.stderr, "%s: stats' warnings:\n%s" % (args, st.stderr))
        s = json.loads(st.stdout)
        expect(s, complete=True, closed=True, dropped=0)
        check(4 * n <= s["calls"]["malloc"] <= 4 * n + 8 and
              4 * n <= s["calls"]["free"] <= 4 * n + 16, "%s: calls %s" % (args, s["calls"]))
        # (main's first heap call may come before the filter, or after)
        tids = sorted(x["tid"] for x in s["per_thread"])
        synth = [x for x in tids if x >= 0x40000000]
        check(len(tids) == 4 and len(synth) >= 3, "%s: threads %s" % (args, tids))


@case(timeout=120)
def test_tsc_turned_off(t):
    """A program that turns the timestamp counter off (tests/progs/tscoff.c,
    probe T).  prctl(PR_SET_TSC, PR_TSC_SIGSEGV), through prctl() or
    syscall(): the program ran its second half into SIGSEGV at the
    recorder's next timestamp (exit 139, --clock monotonic too: the vDSO
    reads the counter); now every call is in the trace, and its times go
    on (the 50 ms asleep after the prctl are in the duration).  A thread
    that enters seccomp's strict mode (the seccomp system call, or prctl):
    it died at its first call after, and the program went on without its
    work; now its calls after are counted as not recorded, exactly, and
    said.  And (probe U) four threads turning the counter off at once, a
    fork child after it, and a seccomp filter that also refuses
    clock_gettime: the program lives, every call in the traces."""
    n = 20000
    for mode in ("prctl", "syscall", "strict", "pstrict"):
        out = t.path("%s.ht" % mode)
        r = t.run([t.heaptrail, "record", "-q", "-o", out, "--", t.prog("tscoff"), n, mode])
        eq((r.rc, r.stdout), (0, "tscoff: ok\n"), "%s:\n%s" % (mode, r.describe()))
        st = t.tool(["stats", "--json", out])
        eq(st.rc, 0, st.describe())
        s = json.loads(st.stdout)
        if mode in ("prctl", "syscall"):
            expect(s, complete=True, closed=True, dropped=0, order_exact=True)
            check(2 * n <= s["calls"]["malloc"] <= 2 * n + 2, "%s: calls %s" % (mode, s["calls"]))
            check(50e6 <= s["duration_ns"] < 10e9, "%s: duration %d ns" % (mode, s["duration_ns"]))
        else:
            expect(s, complete=True, closed=True, dropped=2 * n, order_exact=True)
            check(2 * n <= s["calls"]["malloc"] <= 2 * n + 2, "%s: calls %s" % (mode, s["calls"]))
            check("in seccomp's strict mode" in st.stderr, "%s: the warning:\n%s" % (mode, st.stderr))
    # probe U: 4 threads turning it off at once (the second went on with
    # the counter and died of SIGSEGV); a fork child after (its header read
    # the vDSO's clock: SIGSEGV); clock_gettime refused too (the rate's
    # measure never ended: the program hung)
    for mode in ("race", "fork", "noclock"):
        out = t.path("%s.ht" % mode)
        r = t.run([t.heaptrail, "record", "-o", out, "--", t.prog("tscoff"), n, mode],
                  timeout=60)
        eq((r.rc, r.stdout), (0, "tscoff: ok\n"), "%s:\n%s" % (mode, r.describe()))
        s = t.stats(out)
        expect(s, complete=True, closed=True, dropped=0)
        want = 4 * n if mode == "race" else n if mode == "noclock" else 2 * n
        if mode == "fork":
            child = [f for f in os.listdir(t.dir) if f.startswith("fork.ht.")]
            eq(len(child), 1, "fork: the child's trace: %s" % child)
            eq(t.stats(t.path(child[0]))["calls"]["malloc"], n, "fork: the child's mallocs")
            want = n
        check(want <= s["calls"]["malloc"] <= want + 8, "%s: calls %s" % (mode, s["calls"]))
        if mode == "noclock":
            check("clock_gettime fails (a seccomp filter?): the trace's times from now on count "
                  "the calls, they are not real times" in r.stderr, "noclock: the line:\n" +
                  r.stderr)


@case(timeout=120)
def test_exit_while_threads_allocate_counted(t):
    """main calls exit(3) while three threads loop on malloc/free
    (tests/progs/exitbusy.c), which count every call that returned in a
    file mapped shared, so the count outlives the process: the trace's
    calls plus the calls it counts as not recorded are the program's own
    count (or a few more), and stats says how many were not recorded (when
    any were: some closes see no other thread's call and are exact).
    Before: the close stopped the recording, the other threads went on
    until the process ended, and 7 to 15% of their calls were missing
    from a trace that said nothing (dropped 0, complete); and until
    2026-11-28 the calls after the program's own update of the count, in
    the process's last microseconds, went uncounted (1,000 to 12,000: the
    writer process now puts the count in when the process is gone)."""
    for run in range(3):
        trace, cnt = t.path("eb%d.ht" % run), t.path("eb%d.cnt" % run)
        r = t.run([t.heaptrail, "record", "-o", trace, "--", t.prog("exitbusy"), cnt],
                  timeout=60)
        eq(r.rc, 3, "run %d: the program's exit status:\n%s" % (run, r.describe()))
        with open(cnt, "rb") as f:
            mallocs, frees = struct.unpack_from("<QQ", f.read())
        s = t.tool(["stats", "--json", trace])
        d = json.loads(s.stdout)
        check(d["complete"], "run %d: the trace is not complete:\n%s" % (run, s.describe()))
        traced = d["calls"]["malloc"] + d["calls"]["free"] - d["free_null"]
        prog = mallocs + frees
        # (a close that no other thread's call came during leaves an exact
        # trace and nothing to say: 8 runs of 20 here)
        check(not d["dropped"] or "could not record %d calls" % d["dropped"] in s.stderr,
              "run %d: %d calls counted as not recorded, said:\n%s"
              % (run, d["dropped"], s.stderr))
        # (more: main's own calls, in the trace and not in the count, and a
        # call a thread made when the process ended, before it counted it)
        check(prog <= traced + d["dropped"] <= prog + 20,
              "run %d: the program made %d calls; the trace holds %d and counts %d more"
              % (run, prog, traced, d["dropped"]))
