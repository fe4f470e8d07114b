"""How every command writes its files (issue 17, items 8 and 9;
docs/output-files.md): a temporary of an unpredictable name created with
O_EXCL|O_NOFOLLOW, renamed into place.  A symlink planted at the output
path, or at the temporary names the code used before (OUT.tmp, OUT.tmp-PID,
OUT.compact.PID), is never followed: a symlink at the output is refused
with one error (exit 1), its target stays untouched; once it is gone the
output is a regular file of the documented mode (0600 for traces,
workloads and exports, 0666 less the umask for reports and pictures).  A
path too long for the temporary's name is one clear error, never a
truncated name.  SIGINT, SIGTERM or SIGHUP during a long export leaves no
temporary behind."""

import os
import signal
import stat
import subprocess
import time

from htlib import case, check, eq, next_pids, reap
from htprobe import need_bpf

PRIVATE, PUBLIC = 0o600, 0o644  # (PUBLIC: 0666 with the umask 022 these cases set)


class Planted:
    """A precious file of someone else's, and symlinks to it at OUT and at
    the names a temporary of OUT could predictably get."""

    def __init__(self, t, out, extra=()):
        self.t = t
        self.out = out
        self.target = t.path("precious-%s" % os.path.basename(out))
        with open(self.target, "w") as f:
            f.write("precious\n")
        os.chmod(self.target, 0o644)
        names = [out + ".tmp", out + ".tmp-XXXXXX"] + list(extra)
        names += [out + ".tmp-%d" % p for p in next_pids(300)]
        self.links = []
        for n in [out] + names:
            os.symlink(self.target, n)
            self.links.append(n)

    def attempt(self, t, args, mode, what, timeout=120):
        """Runs heaptrail ARGS (refused: the symlink at OUT), then again
        once it is gone (the file written, the other links left alone)."""
        self.refused(t.tool(args, timeout=timeout), what)
        run_ok(t, args, what, timeout=timeout)
        self.check(mode, what)

    def refused(self, r, what):
        """r, the command run with the symlink at OUT, was refused: exit
        status 1, one error naming the symbolic link, the target, the
        links and the directory as they were.  Then the link at OUT goes,
        for the run that must succeed (check)."""
        eq(r.rc, 1, "%s with a symlink at the output: exit status\n%s" % (what, r.describe()))
        check("is a symbolic link" in r.stderr and self.out in r.stderr,
              "%s: the error does not name the symlink:\n%s" % (what, r.stderr))
        with open(self.target, "rb") as f:
            eq(f.read(), b"precious\n", "%s: the planted symlink's target" % what)
        for n in self.links:
            check(os.path.islink(n), "%s: the planted %s was replaced" % (what, n))
        d, base = os.path.split(self.out)
        left = [n for n in os.listdir(d) if n.startswith(base + ".")
                and os.path.join(d, n) not in self.links]
        eq(left, [], "%s: files left beside the output" % what)
        os.unlink(self.out)

    def check(self, mode, what):
        with open(self.target, "rb") as f:
            eq(f.read()[:40], b"precious\n", "%s: the planted symlink's target" % what)
        eq(oct(stat.S_IMODE(os.stat(self.target).st_mode)), oct(0o644),
           "%s: the target's mode" % what)
        st = os.lstat(self.out)
        check(stat.S_ISREG(st.st_mode), "%s: the output is not a regular file" % what)
        check(st.st_size > 0, "%s: the output is empty" % what)
        eq(oct(stat.S_IMODE(st.st_mode)), oct(mode), "%s: the output's mode" % what)
        for n in self.links[1:]:
            check(os.path.islink(n), "%s: the planted %s was replaced" % (what, n))
        d, base = os.path.split(self.out)
        left = [n for n in os.listdir(d) if n.startswith(base + ".")
                and os.path.join(d, n) not in self.links]
        eq(left, [], "%s: files left beside the output" % what)

    def remove(self):
        for n in self.links[1:]:
            if os.path.lexists(n):
                os.unlink(n)
        os.unlink(self.target)


def traces(t):
    """Two small traces with stacks (diffsites 1 and 2)."""
    a, b = t.path("a.ht"), t.path("b.ht")
    for out, arg in ((a, "1"), (b, "2")):
        r = t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--",
                   t.prog("diffsites"), arg])
        eq(r.rc, 0, "record diffsites %s:\n%s" % (arg, r.describe()))
    return a, b


def run_ok(t, args, what, timeout=120):
    r = t.tool(args, timeout=timeout)
    eq(r.rc, 0, "%s:\n%s" % (what, r.describe()))
    return r


@case(timeout=120, labels=("analyzers", "safety"), locks=("pids",))
def test_outfile_symlinks(t):
    """export (each format), report, flamegraph, timeline and diff (each
    output): symlinks planted at the output and at the temporary's
    predictable names are replaced or left alone, never followed; the modes
    are as documented."""
    old = os.umask(0o022)
    try:
        a, b = traces(t)
        for fmt in ("csv", "pprof", "perfetto", "massif"):
            out = t.path("x." + fmt)
            p = Planted(t, out)
            with t.soft():
                p.attempt(t, ["export", "--format", fmt, "-o", out, a], PRIVATE,
                          "export --format " + fmt)
            p.remove()
        jobs = [
            ("report", "x.html", ["report", "-q", "-o", "@", a]),
            ("flamegraph", "x.svg", ["flamegraph", "-o", "@", a]),
            ("flamegraph --folded", "x.folded", ["flamegraph", "--folded", "-o", "@", a]),
            ("timeline", "t.svg", ["timeline", "-q", "-o", "@", a]),
            ("timeline --csv", "t.csv", ["timeline", "-q", "--csv", "-o", "@", a]),
            ("timeline --json", "t.json", ["timeline", "-q", "--json", "-o", "@", a]),
            ("diff", "d.svg", ["diff", "-o", "@", a, b]),
            ("diff --json", "d.json", ["diff", "--json", "-o", "@", a, b]),
        ]
        for what, name, args in jobs:
            out = t.path(name)
            p = Planted(t, out)
            with t.soft():
                p.attempt(t, [out if x == "@" else x for x in args], PUBLIC, what)
            p.remove()
    finally:
        os.umask(old)


@case(timeout=180, labels=("replay", "safety"), locks=("pids",))
def test_outfile_symlinks_replay(t):
    """convert, replay --rss-csv, compare -o: the same, and compact (its
    temporary was TRACE.compact.PID: files planted there made it fail)."""
    old = os.umask(0o022)
    try:
        a, _ = traces(t)
        wl = t.path("a.wl")
        p = Planted(t, wl)
        with t.soft():
            p.attempt(t, ["convert", "-q", wl, a], PRIVATE, "convert")
        p.remove()
        csv = t.path("rss.csv")
        p = Planted(t, csv)
        with t.soft():
            p.attempt(t, ["replay", "--rss-csv", csv, wl], PUBLIC, "replay --rss-csv")
        p.remove()
        svg = t.path("c.svg")
        p = Planted(t, svg)
        with t.soft():
            p.attempt(t, ["compare", "-a", "glibc", "-n", "1", "-o", svg, wl], PUBLIC,
                      "compare -o", timeout=150)
        p.remove()
        # compact: regular files and symlinks at TRACE.compact.PID and
        # TRACE.finish.PID of the next pids
        tr = t.path("c.ht")
        r = t.run([t.heaptrail, "record", "-q", "--no-compact", "--zstd-level", "0", "-o", tr,
                   "--", t.prog("randloop"), "20000"])
        eq(r.rc, 0, "record:\n" + r.describe())
        target = t.path("precious")
        with open(target, "w") as f:
            f.write("precious\n")
        pids = next_pids(300)
        files = [tr + ".compact.%d" % p for p in pids[::2]] + [tr + ".finish.%d" % p for p in pids[::2]]
        links = [tr + ".compact.%d" % p for p in pids[1::2]] + [tr + ".finish.%d" % p for p in pids[1::2]]
        for n in files:
            with open(n, "w") as f:
                f.write("planted\n")
        for n in links:
            os.symlink(target, n)
        for args in (["compact", "--fast"], ["compact"]):
            with t.soft():
                r = t.tool(args + [tr])
                check(r.rc == 0, "%s with files planted at its old temporary names:\n%s"
                      % (" ".join(args), r.describe()))
                st = os.lstat(tr)
                check(stat.S_ISREG(st.st_mode), "%s: the trace is not a regular file" % args)
                eq(oct(stat.S_IMODE(st.st_mode)), oct(PRIVATE), "%s: the trace's mode" % args)
        with open(target, "rb") as f:
            eq(f.read()[:40], b"precious\n", "compact: the planted symlinks' target")
        check(all(os.path.islink(n) for n in links), "compact replaced a planted symlink")
        for n in files:
            with open(n) as f:
                eq(f.read(), "planted\n", "compact: a planted file")
        t.stats(tr)
        left = [n for n in os.listdir(t.dir) if n.startswith("c.ht.") and t.path(n) not in files + links]
        eq(left, [], "compact: files left beside the trace")
    finally:
        os.umask(old)


def long_path(t, name, length=4090):
    """An absolute path of length characters in directories that exist,
    ending in name."""
    d = t.dir
    while len(d) + 1 + 200 + 1 + len(name) < length:
        d = os.path.join(d, "d" * 200)
    rest = length - len(d) - 1 - len(name) - 1
    if rest > 0:
        d = os.path.join(d, "e" * rest)
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, name)
    eq(len(p), length, "the long path's length")
    return p


@case(timeout=180, labels=("analyzers", "replay", "safety"))
def test_outfile_long_path(t):
    """-o of 4090 characters (in directories that exist): one line saying
    the path is too long, the command's usual error status, nothing
    written, no name truncated to another."""
    a, b = traces(t)
    wl = t.path("a.wl")
    run_ok(t, ["convert", "-q", wl, a], "convert")
    jobs = [
        ("export csv", ["export", "--format", "csv", "-o", "@", a]),
        ("export pprof", ["export", "--format", "pprof", "-o", "@", a]),
        ("report", ["report", "-q", "-o", "@", a]),
        ("flamegraph", ["flamegraph", "-o", "@", a]),
        ("timeline", ["timeline", "-q", "-o", "@", a]),
        ("diff", ["diff", "-o", "@", a, b]),
        ("convert", ["convert", "-q", "@", a]),
        ("replay --rss-csv", ["replay", "--rss-csv", "@", wl]),
        ("compare", ["compare", "-a", "glibc", "-n", "1", "-o", "@", wl]),
    ]
    for what, args in jobs:
        out = long_path(t, "out-" + what.replace(" ", "_"))
        r = t.tool([out if x == "@" else x for x in args], timeout=150)
        with t.soft():
            check(r.rc in (1, 2), "%s: exit status %s:\n%s" % (what, r.rc, r.describe()))
            lines = [l for l in r.heaptrail_lines() if "error" in l]
            check(len(lines) == 1 and "path is too long" in lines[0] and len(lines[0]) < 400,
                  "%s: no short, clear error:\n%s" % (what, r.describe()))
            d = os.path.dirname(out)
            eq(os.listdir(d), [], "%s: files written" % what)
    # compact of a trace at such a path: refused, the trace untouched
    tr = long_path(t, "c.ht")
    with open(a, "rb") as f, open(tr, "wb") as g:
        data = f.read()
        g.write(data)
    r = t.tool(["compact", tr])
    with t.soft():
        check(r.rc in (1, 2) and "path is too long" in r.stderr,
              "compact of a long path: no clear error:\n" + r.describe())
        with open(tr, "rb") as f:
            check(f.read() == data, "compact changed the trace")
        eq(os.listdir(os.path.dirname(tr)), ["c.ht"], "compact: files left")


def wait_temp(d, prefix, p, secs=30):
    """The export's temporary once it holds some data."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        for n in os.listdir(d):
            if n.startswith(prefix + ".tmp") and os.path.getsize(os.path.join(d, n)) > 4096:
                return n
        check(p.poll() is None, "the export ended before its temporary was seen")
        time.sleep(0.005)
    check(False, "no temporary within %ss" % secs)


def stop_while_running(p, secs=10):
    """SIGSTOP to p; True once it is stopped, False if it ended first."""
    os.kill(p.pid, signal.SIGSTOP)
    end = time.monotonic() + secs
    while time.monotonic() < end:
        try:
            with open("/proc/%d/stat" % p.pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state in ("T", "t"):
            return True
        if state in ("Z", "X"):
            return False
        time.sleep(0.002)
    check(False, "the export did not stop within %ss" % secs)


@case(timeout=120, labels=("analyzers",))
def test_output_never_replaces_a_trace(t):
    """-o naming the input trace (or any trace, or a workload) of a command
    whose output is an export, a page or a picture: refused before the
    file is touched, one line saying what the file is, exit 1; the trace is
    byte for byte as it was.  Before, export, timeline, report, flamegraph
    and diff replaced the trace with their output, and compare its
    workload, with exit 0.  compact still rewrites a trace in place, and
    convert writes a workload over a workload."""
    trace = t.path("t.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", trace, "--", t.prog("leaky"),
           t.prog("libleaklib.so")], check_rc=0)
    with open(trace, "rb") as f:
        data = f.read()
    for args in (["export", "-f", "csv", "-o", trace, trace],
                 ["export", "-f", "pprof", "-o", trace, trace],
                 ["export", "-f", "perfetto", "-o", trace, trace],
                 ["export", "-f", "massif", "-o", trace, trace],
                 ["timeline", "-o", trace, trace],
                 ["report", "-o", trace, trace],
                 ["flamegraph", "-o", trace, trace],
                 ["diff", "-o", trace, trace, trace]):
        r = t.tool(args)
        eq(r.rc, 1, "%s: status\n%s" % (" ".join(args[:3]), r.describe()))
        check("cannot write %s: it is a heaptrail trace, which this output would replace" % trace
              in r.stderr, "%s: the line:\n%s" % (" ".join(args[:3]), r.stderr))
        with open(trace, "rb") as f:
            eq(f.read() == data, True, "%s: the trace unchanged" % " ".join(args[:3]))
    wl = t.path("w.wl")
    t.run([t.heaptrail, "convert", wl, trace], check_rc=0)
    with open(wl, "rb") as f:
        wdata = f.read()
    r = t.tool(["compare", "-o", wl, wl])
    check(r.rc != 0 and "it is a heaptrail workload" in r.stderr, "compare -o W W:\n" + r.describe())
    with open(wl, "rb") as f:
        eq(f.read() == wdata, True, "compare: the workload unchanged")
    # what writes a trace or a workload may replace one
    eq(t.tool(["convert", wl, trace]).rc, 0, "convert over its workload")
    eq(t.tool(["compact", trace]).rc, 0, "compact, in place")


@case(labels=("analyzers", "safety"))
def test_outfile_devices(t):
    """An output path that is a character device (a node like /dev/null,
    made here in the test's directory) or a FIFO is written to itself: the
    node stays what it is, and a reader of the FIFO gets the output.
    (Before: the temporary was renamed over it: as root, `-o /dev/null`
    replaced /dev/null with a file, which broke tmux and every daemon()
    on the machine.)"""
    trace = t.path("d.ht")
    t.record(trace, [t.prog("api_all")])
    nul = t.path("nulldev")
    try:
        os.mknod(nul, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        nul = None
    fifo = t.path("fifo")
    os.mkfifo(fifo)
    cmds = (["export", "-f", "csv", "-o"], ["export", "-f", "pprof", "-o"],
            ["report", "-o"], ["flamegraph", "-o"], ["timeline", "-o"])
    for args in cmds:
        if nul:
            r = t.tool(args + [nul, trace])
            eq(r.rc, 0, "%s %s: %s" % (" ".join(args), nul, r.describe()))
            check(stat.S_ISCHR(os.stat(nul).st_mode), "%s: the device node was replaced" % args)
        got = t.path("got")
        with open(got, "wb") as f:  # (a file: a pipe would fill and stall both)
            reader = subprocess.Popen(["cat", fifo], stdout=f)
            r = t.tool(args + [fifo, trace])
            reader.wait(timeout=30)
        with open(got, "rb") as f:
            out = f.read()
        eq(r.rc, 0, "%s fifo: %s" % (" ".join(args), r.describe()))
        check(stat.S_ISFIFO(os.stat(fifo).st_mode), "%s: the FIFO was replaced" % args)
        check(len(out) > 0, "%s: the FIFO's reader got nothing" % args)
        eq(sorted(n for n in os.listdir(t.dir) if ".tmp" in n), [], "temporaries left")
        os.unlink(got)
    if not nul:
        t.note("no character device made (not root): FIFO only")


@case(timeout=120, labels=("analyzers", "safety"), locks=("cpu",))
def test_outfile_signals(t):
    """export --format csv of a big trace stopped by SIGTERM, SIGINT or
    SIGHUP (and by timeout -s TERM, as in the issue) while it writes: it
    dies of the signal and leaves no temporary."""
    big = t.path("big.ht")
    r = t.run([t.heaptrail, "record", "-q", "-o", big, "--", t.prog("randloop"), "1500000"])
    eq(r.rc, 0, "record randloop:\n" + r.describe())
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        out = t.path("x-%d.csv" % sig)
        # the export takes ~0.6 s: on a busy machine this process may get
        # the CPU back only after it ended; such a try does not count
        for attempt in range(5):
            p = subprocess.Popen([t.heaptrail, "export", "--format", "csv", "-o", out, big],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 env=t.base_env(), cwd=t.dir)
            try:
                wait_temp(t.dir, os.path.basename(out), p)
                # stopped, then signalled while stopped: it gets the signal
                # while it writes
                stopped = stop_while_running(p)
                if stopped:
                    p.send_signal(sig)
                    os.kill(p.pid, signal.SIGCONT)
                p.wait(timeout=30)
            finally:
                reap(p)
            if stopped:
                break
            eq(p.returncode, 0, "the export that ended before the signal:\n%s"
               % p.stderr.read().decode(errors="replace"))
            os.unlink(out)
        check(stopped, "the export ended before every one of 5 signals")
        eq(p.returncode, -sig, "export's end after %s" % signal.Signals(sig).name)
        left = [n for n in os.listdir(t.dir) if n.startswith("x-")]
        eq(left, [], "files left after %s" % signal.Signals(sig).name)
    # timeout(1): a fixed delay; repeated with longer delays until one
    # stopped the export while it wrote (a loaded machine may be slower)
    for delay in ("0.15", "0.3", "0.6"):
        out = t.path("y.csv")
        r = t.run(["timeout", "-s", "TERM", delay, t.heaptrail, "export", "--format", "csv",
                   "-o", out, big])
        left = [n for n in os.listdir(t.dir) if n.startswith("y.csv")]
        if r.rc == 124:
            # (the signal may come between the rename and the exit: then
            # the whole file is there, and only it)
            eq([n for n in left if n != "y.csv"], [],
               "files left after timeout -s TERM %s" % delay)
        else:
            eq(r.rc, 0, "export under timeout:\n" + r.describe())
        for n in left:
            os.unlink(t.path(n))


@case(timeout=120, labels=("probes", "safety"), locks=("bpf",))
def test_outfile_probes(t):
    """The probes' flame graph and folded stacks (faults -o, --folded -o;
    brkstack writes through the same code): symlinks at the output and the
    temporary's names are never followed; the files are 0666 less the
    umask, as the other pictures; an -o that cannot be written (a
    directory, a missing one) is refused before the program starts."""
    need_bpf(t, "faults")
    old = os.umask(0o022)
    try:
        for what, name, args in (("faults -o", "f.svg", []),
                                 ("faults --folded -o", "f.folded", ["--folded"])):
            out = t.path(name)
            p = Planted(t, out)
            with t.soft():
                p.attempt(t, ["faults", "-n", "0"] + args + ["-o", out, "-c",
                                                             "%s 100" % t.prog("faulter")],
                          PUBLIC, what)
            p.remove()
    finally:
        os.umask(old)
    # an -o that cannot be written is said before the program runs (a
    # minute-long run's picture was lost at its end): a directory there,
    # a missing directory, a file where the directory should be
    os.makedirs(t.path("dir.svg"))
    with open(t.path("plain"), "w") as f:
        f.write("x")
    for cmd in ("faults", "brkstack"):
        for out, why in ((t.path("dir.svg"), "it is a directory"),
                         (t.path("missing", "x.svg"), "No such file or directory"),
                         (t.path("plain", "x.svg"), "Not a directory")):
            start = time.monotonic()
            r = t.tool([cmd, "-o", out, "-c", "sleep 5"], timeout=60)
            took = time.monotonic() - start
            eq(r.rc, 1, "%s -o %s: status\n%s" % (cmd, out, r.describe()))
            check("cannot write %s" % out in r.stderr and why in r.stderr,
                  "%s -o %s: the line:\n%s" % (cmd, out, r.stderr))
            check(took < 4.5, "%s -o %s: refused after %.1f s (the program ran)" % (cmd, out, took))


@case(timeout=150, labels=("probes", "safety"), locks=("bpf",))
def test_outfile_attach(t):
    """attach -o (as root): symlinks at OUT, OUT.tmp (the old temporary's
    name) and the like are never followed; the trace is 0600, as record's."""
    need_bpf(t, "attach")
    from cases_attach import run_attach
    old = os.umask(0o022)
    try:
        out = t.path("live.ht")
        p = Planted(t, out)
        p.refused(t.tool(["attach", "-o", out, "-p", str(os.getpid())], timeout=60), "attach -o")
        run_attach(t, ["-o", out, "--json"])
        p.check(PRIVATE, "attach -o")
        p.remove()
        t.stats(out)
    finally:
        os.umask(old)
