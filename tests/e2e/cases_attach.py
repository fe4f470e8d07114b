"""`heaptrail attach`: uprobes on a running process (tests/progs/attachee.c,
which leaks known blocks at five known sites while the tracer is attached
and prints its own accounting), compared with attach's outstanding bytes
and blocks by site, exactly at --sample 1; the process goes on unchanged
after the detach; the -o trace read by leaks and stats; bad usage.

Needs BPF (root, BTF, uprobes): the cases skip with the reason
`heaptrail attach --check` gives when it cannot be used here."""

import csv
import json
import os
import select
import signal
import subprocess
import time

from htlib import GLIBC_DTV_CALLOCS_PER_THREAD, case, check, eq, fail, reap, skip
from htprobe import need_bpf

# tests/progs/attachee.c: site -> (bytes, blocks) leaked in phase 1
SITES = {
    "leak_small": (1000, 10),
    "leak_calloc": (5000, 5),
    "leak_big": (1000000, 5),
    "leak_realloc": (12000, 4),
    "leak_aligned": (3792, 5),
}
PHASE2 = "phase2 blocks 39 bytes 1022792\n"  # its last line, after the detach
EXIT_STATUS = 3


def read_line(stream, timeout, what):
    """A line from a pipe within timeout seconds."""
    end = time.monotonic() + timeout
    buf = b""
    fd = stream.fileno()
    while not buf.endswith(b"\n"):
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            fail("no %s within %ss (got %r)" % (what, timeout, buf))
        c = os.read(fd, 1)
        if not c:
            fail("end of output while waiting for %s (got %r)" % (what, buf))
        buf += c
    return buf.decode()


class Target:
    """attachee running, stopped at its "ready" line."""

    def __init__(self, t, env=None):
        self.t = t
        self.p = subprocess.Popen([t.prog("attachee")], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=t.base_env(env), cwd=t.dir)
        eq(read_line(self.p.stdout, 10, "ready"), "ready\n", "attachee's first line")

    def say(self, line):
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()

    def phase1(self):
        """go; returns its accounting {site: (bytes, blocks)}."""
        self.say("go")
        acct = {}
        while True:
            line = read_line(self.p.stdout, 20, "phase 1 accounting")
            if line == "phase1 done\n":
                return acct
            w = line.split()
            check(w[0] == "site" and len(w) == 6, "attachee printed %r" % line)
            acct[w[1]] = (int(w[3]), int(w[5]))

    def finish(self):
        """next; checks that it ends as it would have without a tracer."""
        self.say("next")
        out, err = self.p.communicate(timeout=30)
        eq(out.decode(), PHASE2, "attachee's output after the detach")
        eq(self.p.returncode, EXIT_STATUS, "attachee's exit status (stderr %r)" % err)

    def kill(self):
        reap(self.p)


class Attach:
    """heaptrail attach -p PID ARGS running; wait() until it says it traces."""

    def __init__(self, t, pid, args):
        self.t = t
        self.argv = [t.heaptrail, "attach", "-p", str(pid)] + list(args)
        self.p = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=t.base_env(), cwd=t.dir)
        self.line = read_line(self.p.stderr, 60, "attach's 'tracing' line")
        check(self.line.startswith("heaptrail attach: tracing pid %d" % pid),
              "attach said %r" % self.line)

    def stop(self, sig=signal.SIGINT):
        self.p.send_signal(sig)
        out, err = self.p.communicate(timeout=60)
        self.t.note("%s: exit %s\n--- stdout\n%s\n--- stderr\n%s" % (
            " ".join(self.argv), self.p.returncode, out.decode()[:3000], err.decode()))
        eq(self.p.returncode, 0, "attach's exit status after a signal (stderr %r)" % err)
        return out.decode(), self.line + err.decode()

    def kill(self):
        reap(self.p)


def by_site(entries, key="stack"):
    """{innermost attachee function: (bytes, blocks)} of report entries."""
    got = {}
    for e in entries:
        fn = next((f["function"] for f in e[key] if f.get("function") in SITES), None)
        if fn is None:
            fn = (e[key][0].get("function") if e[key] else None) or "?"
        b, n = got.get(fn, (0, 0))
        got[fn] = (b + e["bytes"], n + e["blocks"])
    return got


def run_attach(t, args, sig=signal.SIGINT, env=None):
    target = Target(t, env)
    a = None
    try:
        a = Attach(t, target.p.pid, args)
        acct = target.phase1()
        out, err = a.stop(sig)
        target.finish()
        return acct, out, err
    finally:
        if a:
            a.kill()
        target.kill()


@case(timeout=120, labels=("probes", "analyzers"), locks=("bpf",))
def test_attach_sites(t):
    """--sample 1: outstanding bytes and blocks by site equal the program's
    own accounting (not the blocks from before the attach, not the churn);
    after the detach it runs on and ends with its own output and status."""
    need_bpf(t, "attach")
    acct, out, err = run_attach(t, ["--json", "--top", "100"])
    eq(acct, SITES, "attachee's own accounting")
    docs = [json.loads(l) for l in out.splitlines() if l.strip()]
    eq(len(docs), 1, "reports without an interval")
    j = docs[0]
    check(j["final"], "final report")
    eq(by_site(j["entries"]), SITES, "outstanding by site")
    eq((j["outstanding_bytes"], j["outstanding_blocks"]),
       (sum(b for b, n in SITES.values()), sum(n for b, n in SITES.values())), "totals")
    check("detached from pid" in err, "detach message: %r" % err)


@case(timeout=120, labels=("probes", "analyzers"), locks=("bpf",))
def test_attach_at_entry(t):
    """--at-entry (every probe on the function's first instruction, where
    the kernel single-steps it) gives the same exact figures as the probes
    attach places on an instruction it emulates."""
    need_bpf(t, "attach")
    acct, out, err = run_attach(t, ["--json", "--top", "100", "--at-entry"])
    check("free+" not in err.splitlines()[0], "--at-entry moved a probe: %r" % err)
    eq(by_site(json.loads(out)["entries"]), SITES, "outstanding by site, --at-entry")


@case(timeout=120, labels=("probes", "analyzers"), locks=("bpf",))
def test_attach_text_sigterm(t):
    """The text report names the sites with file:line; SIGTERM detaches
    like Ctrl-C."""
    need_bpf(t, "attach")
    acct, out, err = run_attach(t, ["--top", "3"], sig=signal.SIGTERM)
    lines = out.splitlines()
    check(lines and "blocks outstanding" in lines[0], "header line: %r" % out[:300])
    eq(lines[0].split("pid ")[1].split(":")[1].strip().split(" blocks")[0],
       "997.8 KiB in 29", "header totals")
    check("leak_big (attachee.c:" in lines[1], "the largest site first: %r" % lines[1])
    check(len([l for l in lines if " in " in l and "oldest" in l]) == 3, "--top 3 rows:\n" + out)


@case(timeout=120, labels=("probes", "analyzers"), locks=("bpf",))
def test_attach_sample(t):
    """--sample 5: every 5th allocation call traced, weight 5: runs of 10
    and 5 calls at one site come out exact; the churn's frees of untraced
    blocks do not count against anything (no site goes negative or shows
    churn)."""
    need_bpf(t, "attach")
    acct, out, err = run_attach(t, ["--json", "--sample", "5"])
    j = json.loads(out)
    eq(j["sample_every"], 5, "sample_every")
    got = by_site(j["entries"])
    # phase 1 starts with leak_small's 10 mallocs at calls 0..9 (0 and 5 traced),
    # then leak_calloc's 5 (10), then leak_big's 5 (15)
    for site in ("leak_small", "leak_calloc", "leak_big"):
        eq(got.get(site), SITES[site], "estimate for " + site)
    check("churn" not in got, "churn blocks reported: %r" % got)
    for site, (b, n) in got.items():
        check(n % 5 == 0 and b > 0, "site %s: %d bytes in %d blocks" % (site, b, n))


@case(timeout=120, labels=("probes", "analyzers"), locks=("bpf",))
def test_attach_older(t):
    """--older: blocks younger than TIME are left out (1h: nothing), older
    ones in (1ns: every site)."""
    need_bpf(t, "attach")
    acct, out, err = run_attach(t, ["--json", "--older", "1h"])
    j = json.loads(out)
    eq((j["older_ns"], j["outstanding_bytes"], j["outstanding_blocks"], j["entries"]),
       (3600 * 10**9, 0, 0, []), "--older 1h")
    acct, out, err = run_attach(t, ["--json", "--older", "1ns", "--top", "100"])
    eq(by_site(json.loads(out)["entries"]), SITES, "--older 1ns")


@case(timeout=120, labels=("probes", "analyzers"), locks=("bpf",))
def test_attach_interval_count(t):
    """INTERVAL COUNT: COUNT reports, then attach detaches by itself (no
    final report) and the process, idle meanwhile, goes on and ends as
    it would have."""
    need_bpf(t, "attach")
    target = Target(t)
    a = None
    try:
        a = Attach(t, target.p.pid, ["--json", "0.2", "3"])
        out, err = a.p.communicate(timeout=60)
        eq(a.p.returncode, 0, "attach's exit status (stderr %r)" % err)
        docs = [json.loads(l) for l in out.decode().splitlines() if l.strip()]
        eq([d["final"] for d in docs], [False] * 3, "three interval reports, no final one")
        check("3 reports made" in err.decode(), "the reason of the detach: %r" % err)
        eq(target.phase1(), SITES, "the program's accounting after the detach")
        target.finish()
    finally:
        if a:
            a.kill()
        target.kill()


@case(timeout=120, labels=("probes", "analyzers"), locks=("bpf",))
def test_attach_target_exits(t):
    """The process ends while attached: attach notices, reports what it
    left outstanding (phase 2 leaks 10 more blocks of leak_small) and
    exits 0 by itself; -o's trace has RSS samples for timeline."""
    need_bpf(t, "attach")
    target = Target(t)
    a = None
    try:
        a = Attach(t, target.p.pid, ["--json", "--top", "100", "-o", t.path("x.ht")])
        eq(target.phase1(), SITES, "the program's accounting")
        target.finish()
        out, err = a.p.communicate(timeout=60)
        eq(a.p.returncode, 0, "attach's exit status (stderr %r)" % err)
        check("PID %d exited" % target.p.pid in err.decode(), "the reason: %r" % err)
        want = dict(SITES)
        want["leak_small"] = (2000, 20)
        eq(by_site(json.loads(out)["entries"]), want, "outstanding at the end of the process")
    finally:
        if a:
            a.kill()
        target.kill()
    r = t.tool(["timeline", "--csv", "-o", "-", t.path("x.ht")])
    eq(r.rc, 0, "timeline:\n" + r.describe())
    rows = list(csv.DictReader(r.stdout.splitlines()))
    check(any(row["rss_bytes"] and int(row["rss_bytes"]) > 100000 for row in rows),
          "no RSS in the attach trace's timeline")


@case(timeout=150, labels=("probes", "analyzers"), locks=("bpf",))
def test_attach_trace(t):
    """-o: a trace that leaks and stats read, with the same sites and the
    symbols from the same code as offline traces; --sample marks it sampled."""
    need_bpf(t, "attach")
    out_path = t.path("live.ht")
    acct, out, err = run_attach(t, ["-o", out_path, "--json"])
    check(os.path.exists(out_path) and not os.path.exists(out_path + ".tmp"), "trace written")
    r = t.tool(["leaks", "--json", "--top", "1000", out_path])
    eq(r.rc, 0, "leaks:\n" + r.describe())
    lk = json.loads(r.stdout)
    eq(by_site(lk["groups"]), SITES, "leaks of the attach trace by site")
    s = t.stats(out_path)
    eq(s["sampled"], False, "sampled")
    eq(s["live_at_exit_bytes"] if "live_at_exit_bytes" in s else lk["leaked_bytes"],
       sum(b for b, n in SITES.values()), "live at the end")
    eq(json.loads(out)["outstanding_bytes"], lk["leaked_bytes"], "attach and leaks agree")

    out_path = t.path("sampled.ht")
    acct, out, err = run_attach(t, ["-o", out_path, "--sample", "5", "--json"])
    s = t.stats(out_path)
    eq((s["sampled"], s["sample_every"]), (True, 5), "sampled trace header")
    r = t.tool(["leaks", "--json", "--top", "1000", out_path])
    got = by_site(json.loads(r.stdout)["groups"])
    for site in ("leak_small", "leak_calloc", "leak_big"):
        eq(got.get(site), SITES[site], "sampled trace estimate for " + site)
    for args in (["flamegraph", "-o", t.path("f.svg")], ["top"], ["report", "-o", t.path("r.html")]):
        r = t.tool(args + [out_path])
        eq(r.rc, 0, "%s of the attach trace:\n%s" % (args[0], r.describe()))
    check(os.path.getsize(t.path("f.svg")) > 1000 and os.path.getsize(t.path("r.html")) > 1000,
          "flame graph and report written")


@case(timeout=180, labels=("probes", "analyzers"), locks=("bpf",))
def test_attach_realloc_across_threads(t):
    """attach -c on blocks reallocated along a chain of threads
    (tests/progs/relay chain 4 2000), six runs: no block is lost and no
    warning blames --max-blocks (2000 blocks at most in flight, against its
    1,048,576).  Before, in about one run in three, a realloc freed its
    block inside glibc, another thread's malloc got the address and
    returned before the realloc did, and that block was dropped and
    counted as "more than --max-blocks live"."""
    need_bpf(t, "attach")
    for i in range(6):
        out = t.path("relay%d.ht" % i)
        r = t.run([t.heaptrail, "attach", "-o", out, "-c",
                   "%s chain 4 2000" % t.prog("relay")], timeout=60)
        eq(r.rc, 0, "attach -c relay: status\n" + r.describe())
        check("not traced" not in r.stderr, "run %d: blocks lost:\n%s" % (i, r.stderr))
        own = json.loads(r.stdout.splitlines()[0])
        s = t.stats(out)
        eq((s["calls"]["malloc"], s["calls"]["realloc"], s["calls"]["free"]),
           (own["malloc"], own["realloc"], own["free"]), "run %d: the program's calls" % i)
        check(0 <= s["calls"]["calloc"] - own["calloc"] <= 4 * GLIBC_DTV_CALLOCS_PER_THREAD,
              "run %d: callocs %d, the program's %d (and its threads' DTVs)" % (
                  i, s["calls"]["calloc"], own["calloc"]))


@case(timeout=60, labels=("probes", "analyzers"))
def test_attach_bad_usage(t):
    """No such process, no process at all, a bad --sample: exit 2 or 1 with
    a message that says what is wrong; without root, the reason."""
    r = t.tool(["attach", "-p", "999999999"])
    check(r.rc in (1, 2) and "999999999" in r.stderr, "no such pid:\n" + r.describe())
    r = t.tool(["attach"])
    eq(r.rc, 2, "no target:\n" + r.describe())
    check("-p PID" in r.stderr, "no target message:\n" + r.describe())
    r = t.tool(["attach", "-p", str(os.getpid()), "--sample", "0"])
    eq(r.rc, 2, "--sample 0:\n" + r.describe())
    check("--sample" in r.stderr, "--sample message:\n" + r.describe())
    r = t.tool(["attach", "-p", str(os.getpid()), "x"])
    eq(r.rc, 2, "bad interval:\n" + r.describe())
    # an output that cannot be written: exit 1 before any probe, no file left
    bad = t.path("no-such-dir", "x.ht")
    r = t.tool(["attach", "-p", str(os.getpid()), "-d", "1s", "-o", bad])
    if r.rc != 3:  # (3: no BPF here; the rest of the case still runs)
        eq(r.rc, 1, "unwritable -o:\n" + r.describe())
        check("cannot write %s: No such file or directory" % bad in r.stderr,
              "unwritable -o message:\n" + r.describe())
        check(not os.path.exists(t.path("no-such-dir")), "something was created")
    # not root: setpriv drops to nobody (util-linux, in scripts/deps.sh)
    if os.geteuid() == 0 and os.path.exists("/usr/bin/setpriv"):
        target = Target(t)
        try:
            r = t.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                       t.heaptrail, "attach", "-p", str(target.p.pid)])
            eq(r.rc, 3, "not root:\n" + r.describe())
            check("root" in r.stderr or "CAP_BPF" in r.stderr, "not root message:\n" + r.describe())
        finally:
            target.kill()


ALLOCATORS = {
    "jemalloc": "libjemalloc.so.2",
    "tcmalloc": "libtcmalloc_minimal.so.4",
    "mimalloc": "libmimalloc.so.2",
}


def allocator_case(name):
    @case(timeout=120, labels=("probes", "analyzers"), locks=("bpf",))
    def test(t):
        need_bpf(t, "attach")
        lib = next((os.path.join(d, ALLOCATORS[name]) for d in
                    ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")
                    if os.path.exists(os.path.join(d, ALLOCATORS[name]))), None)
        if not lib:
            skip("%s is not installed (%s, scripts/deps.sh)" % (ALLOCATORS[name], name))
        acct, out, err = run_attach(t, ["--json", "--top", "100"], env={"LD_PRELOAD": lib})
        check(os.path.basename(lib) in err, "attach did not probe %s: %r" % (lib, err))
        eq(by_site(json.loads(out)["entries"]), SITES, "outstanding by site under " + name)
    test.__doc__ = ("The process runs on %s (LD_PRELOAD): attach probes its functions, "
                    "not glibc's, and the sites come out exact." % name)
    return test


test_attach_jemalloc = allocator_case("jemalloc")
test_attach_tcmalloc = allocator_case("tcmalloc")
test_attach_mimalloc = allocator_case("mimalloc")


def leaks_by_function(t, path):
    r = t.tool(["leaks", "--json", "--top", "1000", path])
    eq(r.rc, 0, "leaks:\n" + r.describe())
    got = {}
    for g in json.loads(r.stdout)["groups"]:
        fns = [f.get("function") or "?" for f in g["stack"]]
        key = "[dtv]" if "allocate_dtv" in fns else (fns[0] if fns else "[no stack]")
        b, n = got.get(key, (0, 0))
        got[key] = (b + g["bytes"], n + g["blocks"])
    return got


@case(timeout=120, labels=("probes", "analyzers"), locks=("bpf",))
def test_attach_matches_record(t):
    """attach -c on tests/progs/leaky.c (two threads, a dlopened library)
    with -o, against record --stacks of the same program: leaks by the
    allocating function agree, blocks and bytes; only glibc's DTV of the
    second thread differs in bytes (the recorder's library is one more
    TLS module in the recorded process)."""
    need_bpf(t, "attach")
    leaky, lib = t.prog("leaky"), t.prog("libleaklib.so")
    r = t.run([t.heaptrail, "record", "--stacks", "-q", "-o", t.path("rec.ht"), "--", leaky, lib])
    eq(r.rc, 0, "record:\n" + r.describe())
    # The kernel's walk of a user stack cannot fault pages in: a stack it
    # could not take is said ("N stacks not taken") and its block shows as
    # [no stack]; that happened once in CI.  Up to three runs for one
    # where every stack was taken.
    for attempt in range(3):
        r = t.run([t.heaptrail, "attach", "-o", t.path("att.ht"), "-c", "%s %s" % (leaky, lib)])
        eq(r.rc, 0, "attach -c:\n" + r.describe())
        if "stacks not taken" not in r.stderr:
            break
    check("stacks not taken" not in r.stderr, "three runs with stacks not taken:\n" + r.stderr)
    rec, att = leaks_by_function(t, t.path("rec.ht")), leaks_by_function(t, t.path("att.ht"))
    eq(set(att), set(rec), "leaking functions")
    for k in rec:
        if k == "[dtv]":
            eq(att[k][1], rec[k][1], "DTV blocks")
        else:
            eq(att[k], rec[k], "leaks of " + k)
