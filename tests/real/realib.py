"""Helpers of the transparency suite (tests/real): run a program with and
without the tracer, compare what it did, and validate every trace it left.

What "the same" means: exit status, stdout and stderr byte for byte, after
removing `record`'s own summary line from the traced stderr.  A case that
must normalize inherent nondeterminism (a duration a program prints, a pid)
does it with a `norm` function that says what it removes; nothing else is
normalized, so any message of the tracer shows up as a difference."""

import glob
import os
import subprocess

from htlib import check, eq, expect


def strip_record_line(err, trace):
    """stderr of `heaptrail record -o TRACE` without its one summary line."""
    name = os.path.basename(trace).encode()
    lines = err.splitlines(keepends=True)
    keep = [l for l in lines if not (l.startswith(b"heaptrail: ") and b" wrote " in l and
                                     name in l)]
    eq(len(lines) - len(keep), 1, "record's summary lines naming %s" % name.decode())
    return b"".join(keep)


def show(b, tail=1500):
    s = b.decode("utf-8", "replace")
    return s[-tail:]


def same(t, what, plain, rec, trace, norm=None, compare_out=True, norm_out=None):
    """plain and rec (Runs) did the same: status, stdout, stderr (norm(bytes)
    applied to both streams when given; norm_out to stdout instead)."""
    n = norm or (lambda b: b)
    # record exits 128+N when signal N killed its program
    want = 128 - plain.rc if plain.rc < 0 else plain.rc
    eq(rec.rc, want, "%s: exit status traced (record) vs untraced" % what)
    if compare_out:
        no = norm_out or n
        po, ro = no(plain.out), no(rec.out)
        check(po == ro, "%s: stdout differs traced vs untraced:\n--- untraced\n%s\n--- traced\n%s"
              % (what, show(po), show(ro)))
    pe, re_ = n(plain.err), n(strip_record_line(rec.err, trace))
    check(pe == re_, "%s: stderr differs traced vs untraced:\n--- untraced\n%s\n--- traced\n%s"
          % (what, show(pe), show(re_)))


def both(t, argv, name, env=None, stdin=None, cwd=None, timeout=120, prep=None, norm=None,
         compare_out=True, norm_out=None, record_args=()):
    """Runs argv untraced, then under `heaptrail record -o NAME.ht`; checks
    that both did the same.  prep() runs before each (to reset state).
    Returns (plain, traced, trace path)."""
    if prep:
        prep()
    plain = t.run(argv, env=env, stdin=stdin, cwd=cwd, timeout=timeout)
    if prep:
        prep()
    out = t.path(name + ".ht")
    cmd = [t.heaptrail, "record", "-o", out] + list(record_args) + ["--"] + list(argv)
    rec = t.run(cmd, env=env, stdin=stdin, cwd=cwd, timeout=timeout)
    same(t, name, plain, rec, out, norm=norm, compare_out=compare_out, norm_out=norm_out)
    return plain, rec, out


ORPHANED = b"without shutting the tracer down"


def seq_check(t, path, timeout=300, orphaned=False, dropped_ok=False):
    """Streams `heaptrail dump PATH`: exit 0, nothing on stderr (but the
    one line that says a trace is orphaned, when it is, or that calls were
    not recorded, when dropped_ok), every
    thread's sequence numbers 0, 1, 2, ... without a hole or a repeat.
    Returns {tid: events}."""
    cmd = [t.heaptrail, "dump", path]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=t.base_env(), bufsize=1 << 20)
    nxt = {}
    bad = []
    try:
        for line in p.stdout:
            f = line.split(None, 3)
            if len(f) < 3 or line.startswith(b"#"):
                continue
            tid, seq = int(f[1]), int(f[2])
            want = nxt.get(tid, 0)
            if seq != want and len(bad) < 5:
                bad.append("thread %d: seq %d after %d" % (tid, seq, want - 1))
            nxt[tid] = seq + 1
        err = p.stderr.read()
        rc = p.wait(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    warn = [l for l in err.strip().splitlines() if not (orphaned and ORPHANED in l) and
            not (dropped_ok and b"the recorder could not record" in l)]
    check(rc == 0 and not warn, "%s: exit %d\n%s" % (" ".join(cmd), rc, show(err)))
    check(not bad, "%s: sequence numbers not contiguous: %s" % (path, "; ".join(bad)))
    return nxt


def validate(t, path, orphaned=False, dropped_ok=False):
    """The trace reads to its end without a damage report: stats says
    complete and closed (orphaned when its program was killed and the
    writer process closed it; orphaned=None: either, for the traces of
    children a test suite kills on purpose; dropped_ok: calls counted as
    not recorded are expected), dump reads every event with
    contiguous per-thread sequence numbers, and their count is stats'
    events."""
    s = t.stats(path, dropped_ok=dropped_ok)
    expect(s, complete=True, closed=True)
    if orphaned is None:
        orphaned = s.get("orphaned", False)
    if "orphaned" in s:
        eq(s["orphaned"], orphaned, "%s: orphaned" % path)
    warn = s["_run"].err.strip().splitlines()
    if orphaned:  # stats says so, in one line
        warn = [l for l in warn if ORPHANED not in l]
    if dropped_ok:  # (and says how many calls were not recorded)
        warn = [l for l in warn if b"the recorder could not record" not in l]
    check(not warn, "stats %s warned:\n%s" % (path, show(s["_run"].err)))
    per_tid = seq_check(t, path, orphaned=orphaned, dropped_ok=dropped_ok)
    eq(sum(per_tid.values()), s["events"], "%s: events dumped vs stats' events" % path)
    return s


def traces(t, trace):
    """TRACE and every TRACE.* file next to it (fork children, exec images)."""
    return [trace] + sorted(glob.glob(glob.escape(trace) + ".*"))


def validate_all(t, trace, **kw):
    """validate() on TRACE and its children's traces; {path: stats}."""
    res = {}
    for p in traces(t, trace):
        res[p] = validate(t, p, **kw)
    return res


def plausible(s, min_malloc=100, threads=1):
    """Counts a real program's trace must have."""
    check(s["calls"]["malloc"] > min_malloc, "only %d mallocs" % s["calls"]["malloc"])
    check(s["calls"]["free"] > 0, "no frees")
    check(s["threads"] >= threads, "threads %d < %d" % (s["threads"], threads))
    check(s["bytes_allocated"] > 0 and s["peak_live_bytes"] > 0, "no bytes")
    check(s["unknown_frees"] <= s["calls"]["free"], "unknown_frees")
    check(s["events"] >= s["calls"]["malloc"] + s["calls"]["free"], "events")
    return s


def need(path_or_name, what=None):
    """The program's path, or skip the case."""
    from htlib import skip, which
    p = which(path_or_name, [path_or_name] if os.path.isabs(path_or_name) else [])
    if not p:
        skip("%s is not installed%s" % (path_or_name, (" (%s)" % what) if what else ""))
    return p

