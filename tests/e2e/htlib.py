"""Helpers for the heaptrail end-to-end tests (stdlib only).

A test case is a function `test_NAME(t)` in a module `cases_*.py`, taking a
`T` (below): it runs programs under the tracer, reads the traces back with
`heaptrail stats --json` and `heaptrail dump`, and asserts exact numbers.
tests/e2e/run.py finds the cases and runs one of them; tests/CMakeLists.txt
registers each case with ctest.
"""

import glob
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time

SKIP = 77  # ctest SKIP_RETURN_CODE

# Every function the recorder interposes, as named in stats' "calls".
CALL_KINDS = [
    "malloc", "free", "calloc", "realloc", "reallocarray", "memalign",
    "posix_memalign", "aligned_alloc", "valloc", "pvalloc", "mallopt",
    "malloc_trim", "mmap", "munmap", "mremap", "brk", "sbrk", "shmget",
    "shmat", "shmdt", "shmctl",
]

# Kinds that hand out a heap block, and the index of the block's address
# among the values dump prints (arguments first, then results).
ALLOC_KINDS = {
    "malloc", "calloc", "realloc", "reallocarray", "memalign",
    "posix_memalign", "aligned_alloc", "valloc", "pvalloc",
}

# glibc 2.36 calls free(NULL) twice in every thread that ends through
# pthread_exit or a return from its start routine, after the thread's
# TSD destructors have run (__libc_thread_freeres).  The recorder sees
# these calls like any other: tests account for them explicitly.
GLIBC_THREAD_EXIT_FREE_NULLS = 2

# glibc allocates the DTV of every new thread with calloc, in the thread
# that calls pthread_create; it is kept with the cached thread stack and
# never freed before the process ends.
GLIBC_DTV_CALLOCS_PER_THREAD = 1


def case(timeout=60, labels=(), locks=()):
    """Decorator: sets the ctest TIMEOUT, LABELS and RESOURCE_LOCK of a case.
    Cases that keep both cores busy take the lock "cpu"; cases whose timing
    matters (kill -9 after N flush intervals) take it too, so that they
    never run next to the busy ones."""
    def deco(fn):
        fn.ht_case = {"timeout": timeout, "labels": ("e2e",) + tuple(labels),
                      "locks": tuple(locks)}
        return fn
    return deco


class Failure(Exception):
    pass


class Skipped(Exception):
    pass


def skip(why):
    raise Skipped(why)


def fail(msg):
    raise Failure(msg)


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def eq(actual, expected, what):
    if actual != expected:
        raise Failure("%s: got %r, expected %r" % (what, actual, expected))


class Run:
    """Result of a program run: rc, stdout, stderr (bytes) and timing."""

    def __init__(self, argv, rc, out, err, secs):
        self.argv = argv
        self.rc = rc
        self.out = out
        self.err = err
        self.secs = secs

    @property
    def stdout(self):
        return self.out.decode("utf-8", "replace")

    @property
    def stderr(self):
        return self.err.decode("utf-8", "replace")

    def heaptrail_lines(self):
        return [l for l in self.stderr.splitlines() if l.startswith("heaptrail:")]

    def describe(self):
        return "%s: exit %s\n--- stdout\n%s\n--- stderr\n%s" % (
            " ".join(self.argv), self.rc, self.stdout[:600], self.stderr[-2000:])


class _Soft:
    def __init__(self, t):
        self.t = t

    def __enter__(self):
        return self

    def __exit__(self, typ, val, tb):
        if typ is Failure:
            self.t.problems.append(str(val))
            return True
        return False


class T:
    """The context of one test case."""

    def __init__(self, build_dir, progs_dir, name, keep=False):
        self.build_dir = os.path.abspath(build_dir)
        self.progs_dir = os.path.abspath(progs_dir)
        self.heaptrail = os.path.join(self.build_dir, "heaptrail")
        self.preload = os.path.join(self.build_dir, "libheaptrail.so")
        self.name = name
        self.keep = keep
        self.dir = tempfile.mkdtemp(prefix="ht-%s-" % name)
        self.log = []
        self.problems = []

    def soft(self):
        """with t.soft(): a failed check inside is noted and the case goes
        on; the case fails at its end with every noted problem."""
        return _Soft(self)

    # ---- paths ----------------------------------------------------------
    def prog(self, name):
        p = os.path.join(self.progs_dir, name)
        check(os.access(p, os.X_OK), "test program %s is not built" % p)
        return p

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def note(self, msg):
        self.log.append(msg)

    # ---- running --------------------------------------------------------
    def base_env(self, extra=None):
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("HEAPTRAIL_") or k in ("MTRACE_CTL_FILE", "LD_PRELOAD",
                                                  "GLIBC_TUNABLES", "DEBUGINFOD_URLS"):
                del env[k]
        env["LC_ALL"] = "C"
        # HT_TEST_RECORDER_ENV="HEAPTRAIL_X=1 HEAPTRAIL_Y=2": recorder
        # options for every run of a test session (docs/TESTING.md: the
        # order, process and reliability cases with HEAPTRAIL_SELF_WRITE=2)
        for kv in os.environ.get("HT_TEST_RECORDER_ENV", "").split():
            k, _, v = kv.partition("=")
            env[k] = v
        if extra:
            for k, v in extra.items():
                if v is None:
                    env.pop(k, None)
                else:
                    env[k] = v
        return env

    def run(self, argv, env=None, stdin=None, timeout=60, cwd=None, check_rc=None):
        """Runs argv with a clean environment plus env; returns a Run.
        Arguments given as bytes are passed as those bytes."""
        argv = [os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in argv]
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, input=stdin if stdin is not None else b"",
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=self.base_env(env), timeout=timeout,
                               cwd=cwd or self.dir)
        except subprocess.TimeoutExpired as e:
            fail("%s: did not finish within %ss\n--- stderr\n%s" % (
                " ".join(argv), timeout, (e.stderr or b"").decode("utf-8", "replace")))
        r = Run(argv, p.returncode, p.stdout, p.stderr, time.monotonic() - t0)
        self.note(r.describe())
        if check_rc is not None and r.rc != check_rc:
            fail("expected exit %d from %s" % (check_rc, r.describe()))
        return r

    def record(self, out, argv, env=None, stdin=None, timeout=60, rc=0, cwd=None):
        """heaptrail record -o OUT -- argv; checks the exit status and the
        one 'heaptrail:' line on stderr naming OUT."""
        cmd = [self.heaptrail, "record"]
        if out is not None:
            cmd += ["-o", out]
        r = self.run(cmd + ["--"] + list(argv), env=env, stdin=stdin, timeout=timeout, cwd=cwd)
        if rc is not None and r.rc != rc:
            fail("expected exit %s from %s" % (rc, r.describe()))
        # Exactly one 'heaptrail:' line is the contract; test_record_stderr
        # checks that.  Here: exactly one of them names the trace.
        lines = r.heaptrail_lines()
        name = os.path.basename(out) if out is not None else ".ht"
        naming = [l for l in lines if name in l]
        check(len(naming) == 1, "expected one 'heaptrail:' line naming %s on stderr, got %d:\n%s"
              % (name, len(naming), r.describe()))
        r.trace_line = naming[0]
        return r

    def traced(self, out, argv, env=None, stdin=None, timeout=60, rc=0):
        """Runs argv with LD_PRELOAD=libheaptrail.so and HEAPTRAIL_OUT=out."""
        e = {"LD_PRELOAD": self.preload, "HEAPTRAIL_OUT": out}
        e.update(env or {})
        r = self.run(argv, env=e, stdin=stdin, timeout=timeout)
        if rc is not None and r.rc != rc:
            fail("expected exit %s from %s" % (rc, r.describe()))
        return r

    # ---- reading traces -------------------------------------------------
    def tool(self, args, timeout=120):
        return self.run([self.heaptrail] + list(args), timeout=timeout)

    def stats(self, path, rc=0, timeout=120, dropped_ok=False):
        """heaptrail stats --json PATH, parsed.  Checks the exit status,
        that every key of the contract is there, and that the recorder
        dropped no call (a call the tracer makes itself while it records,
        counted as the program's, would show there: src/preload/nested.c)
        unless dropped_ok."""
        r = self.tool(["stats", path, "--json"], timeout=timeout)
        if rc is not None and r.rc != rc:
            fail("expected exit %s from %s" % (rc, r.describe()))
        try:
            s = json.loads(r.stdout)
        except ValueError as e:
            fail("stats --json printed no JSON (%s):\n%s" % (e, r.describe()))
        check_stats_keys(s)
        if not dropped_ok and s.get("dropped"):
            fail("%s: the recorder dropped %d calls (header's dropped):\n%s"
                 % (path, s["dropped"], r.describe()))
        s["_run"] = r
        return s

    def dump(self, path, args=(), rc=0, timeout=300):
        """heaptrail dump PATH ARGS, parsed into DumpEvents."""
        r = self.tool(["dump", path] + list(args), timeout=timeout)
        if rc is not None and r.rc != rc:
            fail("expected exit %s from %s" % (rc, r.describe()))
        evs = []
        for n, line in enumerate(r.stdout.splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            try:
                evs.append(DumpEvent(line))
            except (ValueError, IndexError) as e:
                fail("%s: dump line %d not understood (%s): %r" % (path, n, e, line))
        return evs

    def cleanup(self, ok):
        if ok and not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)


# ---- stats -------------------------------------------------------------------

STATS_KEYS = [
    "events", "threads", "duration_ns", "complete", "closed", "calls", "failed",
    "free_null", "bytes_allocated", "usable_bytes_allocated", "peak_live_bytes",
    "peak_live_usable_bytes", "peak_live_blocks", "live_blocks_at_peak",
    "live_usable_bytes_at_peak", "peak_time_ns",
    "live_bytes_at_exit", "live_blocks_at_exit", "live_usable_bytes_at_exit",
    "cross_thread_frees", "unknown_frees", "realloc", "mmap", "mmapped_chunks",
    "heap_break", "size_histogram", "lifetime_histogram", "per_thread", "marks",
    "thread_starts", "thread_exits", "forks", "order_exact", "order_events_concerned",
    "being_written", "disk_full",
]
SUBKEYS = {
    "realloc": ["calls", "moved", "in_place", "as_malloc", "as_free", "failed"],
    "mmap": ["calls", "bytes_mapped", "bytes_unmapped", "live_mapped_bytes",
             "peak_mapped_bytes"],
    "mmapped_chunks": ["allocations", "bytes"],
    "heap_break": ["initial", "final", "growth_bytes", "changes"],
}


def check_stats_keys(s):
    check(isinstance(s, dict), "stats --json: not an object")
    missing = [k for k in STATS_KEYS if k not in s]
    check(not missing, "stats --json lacks %s" % missing)
    for k in ("calls", "failed"):
        miss = [c for c in CALL_KINDS if c not in s[k]]
        check(not miss, "stats --json %s lacks %s" % (k, miss))
    for k, subs in SUBKEYS.items():
        miss = [c for c in subs if c not in s[k]]
        check(not miss, "stats --json %s lacks %s" % (k, miss))
    check(isinstance(s["complete"], bool) and isinstance(s["closed"], bool),
          "complete/closed are not booleans")
    for b in s["size_histogram"]:
        check({"min", "max", "count"} <= set(b), "size_histogram bucket %r" % b)
    for b in s["lifetime_histogram"]:
        check({"max_ns", "count"} <= set(b), "lifetime_histogram bucket %r" % b)
    for p in s["per_thread"]:
        check({"tid", "name", "events", "allocations", "frees", "bytes_allocated"} <= set(p),
              "per_thread entry %r" % p)
    for m in s["marks"]:
        check({"time_ns", "tid", "label"} <= set(m), "marks entry %r" % m)


def expect_calls(s, expected, key="calls"):
    """Every function's count: those in expected must match, all others 0."""
    bad = []
    for k in CALL_KINDS:
        want = expected.get(k, 0)
        if s[key][k] != want:
            bad.append("%s %s=%s (expected %s)" % (key, k, s[key][k], want))
    extra = set(expected) - set(CALL_KINDS)
    check(not extra, "unknown kinds in the expectation: %s" % extra)
    check(not bad, "; ".join(bad))


def expect(s, **fields):
    """Top-level (or dotted via __) stats fields."""
    bad = []
    for k, want in fields.items():
        v = s
        for part in k.split("__"):
            v = v[part]
        if v != want:
            bad.append("%s=%r (expected %r)" % (k.replace("__", "."), v, want))
    check(not bad, "stats: " + "; ".join(bad))


def thread(s, tid=None, name=None):
    for p in s["per_thread"]:
        if (tid is None or p["tid"] == tid) and (name is None or p["name"] == name):
            return p
    fail("no per_thread entry with tid=%s name=%s in %r" % (tid, name, s["per_thread"]))


def check_histogram(s, sizes):
    """size_histogram must count exactly the given allocation sizes."""
    total = 0
    for b in s["size_histogram"]:
        want = sum(1 for x in sizes if b["min"] <= x <= b["max"])
        check(b["count"] == want, "size_histogram bucket [%d, %d]: count %d, expected %d"
              % (b["min"], b["max"], b["count"], want))
        total += b["count"]
    eq(total, len(sizes), "size_histogram total")


def check_event_sum(s, extra=0):
    """events = every call + the thread/mark/fork/heap-break records."""
    calls = sum(s["calls"][k] for k in CALL_KINDS)
    want = (calls + s["thread_starts"] + s["thread_exits"] + len(s["marks"]) +
            s["forks"] + s["heap_break"]["changes"] + extra)
    eq(s["events"], want, "events (calls %d + thread starts %d + exits %d + marks %d + "
       "forks %d + heap_break changes %d + %d other)" % (
           calls, s["thread_starts"], s["thread_exits"], len(s["marks"]), s["forks"],
           s["heap_break"]["changes"], extra))


# ---- dump --------------------------------------------------------------------

_NUM = re.compile(r"^[-+]?(0x[0-9a-fA-F]+|\d+)$")
_TOKEN = re.compile(r'[^\s=]+="[^"]*"|"[^"]*"|\S+')


def _num(tok):
    if tok in ("NULL", "(nil)", "nil"):
        return 0
    if tok.startswith("-0x"):
        return -int(tok[1:], 16)
    return int(tok, 0)


def _time_ns(tok):
    """dump's time column: integer ns, or seconds with a fraction."""
    if "." not in tok:
        return int(tok)
    sec, frac = tok.split(".", 1)
    return int(sec) * 1000000000 + int((frac + "000000000")[:9])


class DumpEvent:
    """One line of `heaptrail dump`: TIME_NS TID SEQ KIND args... = result.

    args and res hold the numbers (key=value tokens are reduced to their
    value, text that is no number is kept in text)."""
    __slots__ = ("time_ns", "tid", "seq", "kind", "args", "res", "text", "fields", "line")

    def __init__(self, line):
        self.line = line
        toks = _TOKEN.findall(line)
        self.time_ns = _time_ns(toks[0])
        self.tid = int(toks[1])
        self.seq = int(toks[2])
        self.kind = toks[3]
        self.args = []
        self.res = []
        self.text = []
        self.fields = {}
        cur = self.args
        for tok in toks[4:]:
            if tok == "=":
                cur = self.res
                continue
            name = None
            if "=" in tok and not tok.startswith("="):
                name, tok = tok.split("=", 1)
            if len(tok) >= 2 and tok[0] == tok[-1] == '"':
                self.text.append(tok[1:-1])
                if name:
                    self.fields[name] = tok[1:-1]
                continue
            tok = tok.strip(",()[]")
            if _NUM.match(tok) or tok in ("NULL", "(nil)", "nil"):
                cur.append(_num(tok))
                if name:
                    self.fields[name] = cur[-1]
            else:
                self.text.append(tok)
                if name:
                    self.fields[name] = tok

    def result_ptr(self):
        return self.res[0] if self.res else 0

    def freed_ptr(self):
        """The block this event gives back (free, realloc's old block)."""
        if self.kind == "free":
            return self.args[0] if self.args else 0
        if self.kind in ("realloc", "reallocarray"):
            old = self.args[0]
            new = self.result_ptr()
            size = self.args[1] if self.kind == "realloc" else self.args[1] * self.args[2]
            if old and (new or size == 0):
                return old
        return 0

    def __repr__(self):
        return self.line


class _Quick:
    """A malloc, calloc or free line of dump, parsed with as little work as
    possible (the hand-off test reads millions of them)."""
    __slots__ = ("kind", "line", "ptr")

    def __init__(self, kind, parts, line):
        self.kind = kind
        self.line = line
        if kind == "free":
            self.ptr = int(parts[4].rpartition("=")[2], 16)
        else:
            self.ptr = int(parts[parts.index("=") + 1].rpartition("=")[2], 16)

    def freed_ptr(self):
        return self.ptr if self.kind == "free" else 0

    def result_ptr(self):
        return 0 if self.kind == "free" else self.ptr

    def __repr__(self):
        return self.line.rstrip("\n")


def quick_events(lines):
    """DumpEvent-like objects from dump lines; fast for malloc/calloc/free."""
    for line in lines:
        parts = line.split()
        if len(parts) < 4 or line.startswith("#"):
            continue
        kind = parts[3]
        if kind in ("malloc", "calloc", "free"):
            yield _Quick(kind, parts, line)
        else:
            yield DumpEvent(line)


class LiveCheck:
    """Result of live_set_check: counts and the first few examples."""

    def __init__(self):
        self.reuse = 0          # allocations of an address that was live
        self.unknown = 0        # frees of an address that was not live
        self.examples = []      # (what, earlier event or None, event)
        self.live = {}          # address -> event that allocated it
        self.events = 0

    def note(self, what, before, e):
        if len(self.examples) < 5:
            self.examples.append((what, before, e))

    def summary(self):
        lines = ["%d allocations of a live address, %d frees of a block not live"
                 % (self.reuse, self.unknown)]
        for what, before, e in self.examples:
            lines.append("  %s: %r%s" % (what, e, (" (allocated by %r)" % before)
                                         if before is not None else ""))
        return "\n".join(lines)


def live_set_check(events):
    """Replays malloc-family events in dump order and checks that no address
    is handed out while live and no free names a block not live."""
    c = LiveCheck()
    live = c.live
    for e in events:
        c.events += 1
        k = e.kind
        if k == "free":
            p = e.freed_ptr()
            if p:
                if live.pop(p, None) is None:
                    c.unknown += 1
                    c.note("free of a block not live", None, e)
            continue
        if k not in ALLOC_KINDS:
            continue
        old = e.freed_ptr()
        new = e.result_ptr()
        if k == "posix_memalign" and len(e.res) > 1 and e.res[1] != 0:
            new = 0
        if old and old == new:  # realloc in place
            if old not in live:
                c.unknown += 1
                c.note("realloc of a block not live", None, e)
            live[new] = e
            continue
        if old and live.pop(old, None) is None:
            c.unknown += 1
            c.note("realloc of a block not live", None, e)
        if new:
            if new in live:
                c.reuse += 1
                c.note("address allocated while live", live[new], e)
            live[new] = e
    return c


def dump_live_check(t, path, args=(), timeout=300):
    """Streams `heaptrail dump PATH ARGS` through live_set_check."""
    cmd = [t.heaptrail, "dump", path] + list(args)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=t.base_env(), text=True, bufsize=1 << 20)
    try:
        c = live_set_check(quick_events(p.stdout))
        err = p.stderr.read()
        rc = p.wait(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check(rc == 0, "%s: exit %d\n%s" % (" ".join(cmd), rc, err))
    return c


# ---- processes ---------------------------------------------------------------

def proc_stats():
    """(pid, the fields of /proc/PID/stat after the command: state, ppid,
    ...) of every process, in order of pid."""
    for d in sorted((d for d in os.listdir("/proc") if d.isdigit()), key=int):
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        yield int(d), st[st.rindex(")") + 2:].split()


def children(pid):
    """The pids whose parent is pid (from /proc)."""
    return [p for p, fields in proc_stats() if int(fields[1]) == pid]


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def paced_held(t, trace, opts=()):
    """`record OPTS -o trace -- paced 1000 hold`, once the program made its
    pairs and holds (its 1001 mallocs in the trace, still being written):
    the process, to be let go with a line on its stdin (then communicate,
    and reap)."""
    p = subprocess.Popen([t.heaptrail, "record"] + list(opts) + ["-o", trace, "--",
                          t.prog("paced"), "1000", "hold"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=t.base_env(),
                         cwd=t.dir)
    try:
        eq(p.stdout.readline(), b"ready\n", "the program started")
        p.stdin.write(b"go\n")
        p.stdin.flush()
        eq(p.stdout.readline(), b"done\n", "the program made its pairs")
        deadline = time.time() + 60
        while time.time() < deadline and mallocs_in(t, trace) < 1001:
            time.sleep(0.05)
    except BaseException:
        reap(p)
        raise
    return p


def mallocs_in(t, path):
    """The mallocs the trace at path (maybe still being written) holds so
    far; 0 while it has no readable header."""
    r = t.tool(["stats", "--json", path])
    try:
        return json.loads(r.stdout)["calls"]["malloc"]
    except (ValueError, KeyError):
        return 0


def record_syscalls(t, argv, opts=("--stacks",), timeout=150):
    """System calls of `strace -f -c heaptrail record -q OPTS -- ARGV` (the
    recorder, its writer and the program): ({name: calls}, the trace)."""
    st = shutil.which("strace")
    check(st, "strace is not installed (scripts/deps.sh test installs it)")
    log = t.path("strace-%d.txt" % len(os.listdir(t.dir)))
    r = t.run([st, "-f", "-c", "-o", log, t.heaptrail, "record", "-q"] + list(opts) +
              ["-o", log + ".ht", "--"] + list(argv), timeout=timeout)
    eq(r.rc, 0, "strace heaptrail record:\n" + r.describe())
    calls = {}
    with open(log) as f:
        for line in f:
            w = line.split()
            if len(w) >= 5 and w[0][0].isdigit() and w[-1] != "total":
                calls[w[-1]] = int(w[3])
    return calls, log + ".ht"


def unwind_check(t, argv, min_stacks, timeout=150):
    """`heaptrail record --stacks --unwind check -- ARGV`: at least
    min_stacks stacks taken both ways, none that differ from libunwind's."""
    r = t.run([t.heaptrail, "record", "-q", "--stacks", "--unwind", "check", "-o",
               t.path("check-%d.ht" % len(os.listdir(t.dir))), "--"] + list(argv),
              timeout=timeout)
    eq(r.rc, 0, "record --unwind check:\n" + r.describe())
    m = re.search(r"unwind check: (\d+) stacks, (\d+) differ", r.stderr)
    check(m, "no unwind check summary:\n" + r.stderr)
    check(int(m.group(1)) >= min_stacks, "%s stacks checked" % m.group(1))
    eq(int(m.group(2)), 0, "stacks that differ from libunwind's:\n" + r.stderr)


def next_pids(n):
    """The next n pids the kernel will probably hand out.  A test that
    counts on them takes the "pids" lock, which a test that makes
    thousands of threads takes too (test_more_threads_than_buffers, which
    also runs alone: the lock "serial", ctest's RUN_SERIAL)."""
    with open("/proc/sys/kernel/ns_last_pid") as f:
        last = int(f.read())
    with open("/proc/sys/kernel/pid_max") as f:
        top = int(f.read())
    return [(last + i) % top for i in range(1, n + 1)]


# ---- files -------------------------------------------------------------------

def files_like(pattern):
    return sorted(glob.glob(pattern))


def file_mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def which(name, candidates=()):
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return shutil.which(name)


def bad_compare_files(t):
    """Two files that `report --compare` must refuse: junk.json, JSON cut
    short, and other.json, JSON that is not `compare --json`'s output.
    Returns their paths (junk, other)."""
    junk, other = t.path("junk.json"), t.path("other.json")
    with open(junk, "w") as f:
        f.write('{"workload": "x", "results": [1, 2,')
    with open(other, "w") as f:
        f.write('{"events": 3}')
    return junk, other


def compile_c(t, name, source, flags=(), cxx=False):
    """Compiles source into the case's directory with gcc -O0 -g
    -fno-builtin (every malloc/free pair stays) and the project's include/
    (heaptrail.h), then flags (a later -O wins); returns the program's
    path.  cxx: C++ source, compiled with g++.  Skips the case without the
    compiler."""
    gcc = which("g++" if cxx else "gcc")
    if not gcc:
        skip("%s is not installed" % ("g++" if cxx else "gcc"))
    src = t.path(name + (".cpp" if cxx else ".c"))
    with open(src, "w") as f:
        f.write(source)
    exe = t.path(name)
    include = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include")
    r = t.run([gcc, "-O0", "-g", "-fno-builtin", "-I", include] + list(flags) + ["-o", exe, src])
    eq(r.rc, 0, "%s:\n%s" % (os.path.basename(gcc), r.describe()))
    return exe


def reap(p):
    """Kills the subprocess p if it still runs, and waits for it (the end
    of a test's try: nothing left running, whatever failed)."""
    if p is not None and p.poll() is None:
        p.kill()
        p.wait()


def kill_quietly(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
