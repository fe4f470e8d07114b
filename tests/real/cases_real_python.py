"""The transparency suite, Python: Debian's python3 (/usr/bin/python3: the
interpreter libpython3.11-testsuite's modules are for; a pyenv python3 may
come first on PATH) running a threaded script, modules of its own
regression test suite that exercise threads, fork, subprocess and signals,
and a script that ends on Ctrl-C.  Same status, stdout and stderr with and
without the tracer; every trace, the fork children's too, reads to its end."""

import os
import re
import signal
import subprocess

from htlib import case, check, eq, skip
from realib import both, plausible, traces, validate, validate_all

PY = "/usr/bin/python3"

PY_THREADS = r"""
import threading, hashlib
results = {}
def work(i):
    data = [str(j) * (j % 17) for j in range(3000 + i)]
    results[i] = hashlib.sha256("".join(data).encode()).hexdigest()[:16]
ts = [threading.Thread(target=work, args=(i,), name="py-%d" % i) for i in range(6)]
for t in ts: t.start()
for t in ts: t.join()
for i in sorted(results): print(i, results[i])
print(sum(len(v) for v in results.values()))
"""


def python():
    if not os.access(PY, os.X_OK):
        skip("%s is not installed (Debian's python3)" % PY)
    return PY


@case(timeout=120, labels=("real",))
def test_real_python_threads(t):
    py = python()
    plain, rec, out = both(t, [py, "-c", PY_THREADS], "python")
    eq(plain.rc, 0, "python status")
    eq(len(plain.stdout.splitlines()), 7, "python output lines")
    # Python's join() returns before the OS thread has finished ending, so
    # the process may exit before a thread's exit is recorded, and the
    # calls of its end that come while the recorder closes the trace are
    # counted as not recorded (docs/record.md, "Calls at exit").
    s = plausible(validate(t, out, dropped_ok=True), min_malloc=1000, threads=7)
    eq(s["thread_starts"], 7, "thread starts")
    check(s["thread_exits"] <= 6, "thread exits %d" % s["thread_exits"])


# unittest prints how long the run took: the one thing that differs.
_RAN = re.compile(rb"^(Ran \d+ tests?) in [0-9.]+s$", re.M)


def norm_unittest(b):
    return _RAN.sub(rb"\1 in Xs", b)


def norm_verbose_out(b):
    """stdout of these tests in verbose mode is written by many threads at
    once (test_thread's and test_threading's tasks print their random
    delays, "task 3 will run for 69us", and their lines interleave, even
    within a line): the same bytes, digits aside, in any order."""
    return bytes(sorted(re.sub(rb"\d+", b"", b)))


def regrtest(t, name, modules, timeout):
    py = python()
    mods = sorted(set(".".join(m.split(".")[:2]) for m in modules))
    r = t.run([py, "-c", "import test.support, " + ", ".join(mods)])
    if r.rc:
        skip("python3's test suite is not installed (Debian package libpython3.11-testsuite)")
    # -v: one line per test with its result, so a difference names the test
    plain, rec, out = both(t, [py, "-m", "unittest", "-v"] + modules, name,
                           norm=norm_unittest, norm_out=norm_verbose_out, timeout=timeout)
    eq(plain.rc, 0, "%s: unittest status\n%s" % (name, plain.stderr[-2000:]))
    check(re.search(rb"^OK\b", plain.err, re.M), "no OK line:\n%s" % plain.stderr[-1500:])
    ran = int(re.search(rb"^Ran (\d+) test", plain.err, re.M).group(1))
    # the suites kill some of their fork children (test_os, test_subprocess:
    # kill before exec): those traces are orphaned, and must read whole
    res = {out: validate(t, out)}
    for p in traces(t, out)[1:]:
        res[p] = validate(t, p, orphaned=None)
    main = plausible(res[out], min_malloc=10000, threads=2)
    return ran, main, res


@case(timeout=240, labels=("real",))
def test_real_python_test_threading(t):
    """test_thread, test_threading, test_fork1 (threads, locks, fork from
    threads, interrupt_main) and test_signal's POSIX tests: every test's
    result the same traced; the fork children's traces complete."""
    ran, main, res = regrtest(t, "pythreading",
                              ["test.test_thread", "test.test_threading", "test.test_fork1",
                               "test.test_signal.PosixTests", "test.test_signal.RaiseSignalTest",
                               "test.test_signal.WakeupSignalTests"], 200)
    check(ran > 200, "only %d tests ran" % ran)
    check(main["threads"] > 50, "threads in the main trace: %d" % main["threads"])
    check(main["forks"] >= 10, "forks in the main trace: %d" % main["forks"])
    children = [s for p, s in res.items() if not p.endswith(".ht")]
    check(len(children) >= 10, "fork children's traces: %d" % len(children))
    check(sum(s["calls"]["malloc"] for s in children) > 0, "the children made no malloc")


@case(timeout=240, labels=("real",))
def test_real_python_test_subprocess(t):
    """test_subprocess (pipes, communicate, timeouts, fork+exec with
    user=, group=, preexec_fn, close_fds) and test_os's fork/exec/wait
    tests: every test's result the same traced."""
    ran, main, res = regrtest(t, "pysubprocess",
                              ["test.test_subprocess", "test.test_os.ForkTests",
                               "test.test_os.ExecTests", "test.test_os.PidTests",
                               "test.test_os.SpawnTests"], 200)
    check(ran > 300, "only %d tests ran" % ran)


PY_CTRL_C = r"""
import _thread, os, signal, sys, time
print("SIGINT handler:", signal.getsignal(signal.SIGINT))
print("SIGTERM default:", signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
try:
    _thread.interrupt_main()
    time.sleep(5)
except KeyboardInterrupt:
    print("interrupt_main: KeyboardInterrupt")
data = [bytearray(100 * i) for i in range(1000)]
sys.stdout.flush()
os.kill(os.getpid(), signal.SIGINT)
time.sleep(5)
print("not reached")
"""


@case(timeout=60, labels=("real",))
def test_real_python_ctrl_c(t):
    """The recorder's fatal-signal handlers are invisible: python3 finds
    SIG_DFL for SIGINT and SIGTERM and installs its KeyboardInterrupt
    handler (with a visible handler it did not, and Ctrl-C killed it
    outright); a SIGINT ends it with its traceback, killed by SIGINT
    (status 130 from record), and the trace is complete."""
    py = python()
    plain, rec, out = both(t, [py, "-c", PY_CTRL_C], "ctrlc")
    eq(plain.rc, -signal.SIGINT, "untraced: killed by SIGINT")
    eq(plain.stdout.splitlines(), [
        "SIGINT handler: <built-in function default_int_handler>",
        "SIGTERM default: True",
        "interrupt_main: KeyboardInterrupt"], "python's view of its signals")
    check("KeyboardInterrupt" in plain.stderr, "traceback: %r" % plain.stderr)
    plausible(validate(t, out), min_malloc=1000)


@case(timeout=60, labels=("real",))
def test_real_python_sigterm(t):
    """python3 killed by SIGTERM from outside while its threads allocate:
    killed by SIGTERM untraced, status 143 from record, the same output,
    and a complete trace (the recorder's handler wrote it and re-raised),
    where the calls its other threads made while the handler closed it
    are counted as not recorded (docs/record.md, "Calls at exit")."""
    py = python()
    script = r"""
import threading, sys, time
def spin():
    while True:
        [str(i) for i in range(1000)]
for i in range(2):
    threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
time.sleep(30)
"""
    rcs = {}
    for label in ("plain", "traced"):
        out = t.path("term.ht")
        cmd = [py, "-c", script]
        if label == "traced":
            cmd = [t.heaptrail, "record", "-o", out, "--"] + cmd
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=t.base_env(), cwd=t.dir)
        line = p.stdout.readline()
        eq(line, b"ready\n", "%s: first line" % label)
        # signal the python process itself (record's child when traced)
        pid = p.pid
        if label == "traced":
            kids = open("/proc/%d/task/%d/children" % (p.pid, p.pid)).read().split()
            eq(len(kids), 1, "record's children")
            pid = int(kids[0])
        os.kill(pid, signal.SIGTERM)
        rest, err = p.communicate(timeout=30)
        rcs[label] = (p.returncode, rest, err)
    eq(rcs["plain"][0], -signal.SIGTERM, "untraced: killed by SIGTERM")
    eq(rcs["traced"][0], 128 + signal.SIGTERM, "record's status")
    eq(rcs["traced"][1], rcs["plain"][1], "the rest of stdout")
    eq(rcs["plain"][2], b"", "untraced stderr")
    s = validate(t, t.path("term.ht"), dropped_ok=True)
    check(s["threads"] >= 3, "threads %d" % s["threads"])
