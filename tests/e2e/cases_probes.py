"""The eBPF probe commands (mmapsnoop, shmsnoop, brkstack, faults,
ffaults) on test programs making known calls (tests/progs/memcalls.c,
faulter.c): each command must see exactly those calls, with their sizes,
flags and files, and the stacks that made them.  Label "probes"; the cases
skip with heaptrail's reason where BPF cannot be used (not root, no BTF)."""

import json
import os
import signal
import shutil
import subprocess
import sys

from htlib import case, check, eq, fail, skip
from htprobe import need_bpf, probe_json

PAGE = 4096
MARK_BEGIN, MARK_END = 0x48540000, 0x48550000
MAP_SHARED, MAP_PRIVATE, MAP_ANONYMOUS = 0x01, 0x02, 0x20
MAP_NORESERVE, MAP_POPULATE = 0x4000, 0x8000
PROT_NONE, PROT_READ, PROT_WRITE = 0, 1, 2


def data_file(t, name="mapped.dat", size=5 * PAGE):
    p = t.path(name)
    with open(p, "wb") as f:
        f.write(bytes(range(256)) * (size // 256))
    return p


def framed(events):
    """The events between memcalls' two markers (exclusive)."""
    out, inside = [], False
    for e in events:
        if e["call"] == "munmap" and e.get("error") == "EINVAL" and e["addr"] in (MARK_BEGIN,
                                                                               MARK_END):
            if e["addr"] == MARK_END:
                return out
            inside = True
            continue
        if inside:
            out.append(e)
    fail("the markers of memcalls were not both seen: %r" % events[-5:])


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_mmapsnoop(t):
    need_bpf(t, "mmapsnoop")
    dat = data_file(t)
    doc, r = probe_json(t, ["mmapsnoop", "--json", "-c", "%s %s" % (t.prog("memcalls"), dat)])
    eq(doc["command"], "mmapsnoop", "command")
    pid = doc["pid"]
    check(doc["stopped"].startswith("the command exited with status 0"), doc["stopped"])
    evs = [e for e in doc["events"] if e["pid"] == pid]
    eq(len(evs), len(doc["events"]), "events of other processes with -c")
    got = framed(evs)
    calls = [(e["call"], e["size"]) for e in got]
    eq(calls, [("mmap", 3 * PAGE), ("munmap", 3 * PAGE), ("mmap", 2 * PAGE),
               ("munmap", 2 * PAGE), ("mmap", 5 * PAGE), ("mremap", 9 * PAGE),
               ("munmap", 9 * PAGE), ("mmap", PAGE), ("munmap", PAGE)], "calls and sizes")
    anon, fmap, pop, rem, none = got[0], got[2], got[4], got[5], got[7]
    eq((anon["prot"], anon["flags"], anon["fd"]),
       (PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1), "anonymous mmap")
    eq(anon["flags_text"], "PRIVATE|ANONYMOUS", "flags decoded")
    eq(anon["file"], None, "anonymous mmap's file")
    eq((fmap["prot_text"], fmap["flags_text"], fmap["offset"], fmap["file"]),
       ("R--", "SHARED", PAGE, "mapped.dat"), "file mmap")
    eq(pop["flags"], MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, "MAP_POPULATE mmap")
    eq((rem["old_size"], rem["size"], rem["flags_text"], rem["addr"]),
       (5 * PAGE, 9 * PAGE, "MAYMOVE", pop["result"]), "mremap")
    eq(got[6]["addr"], rem["result"], "munmap of the moved mapping")
    eq((none["prot_text"], none["flags_text"]), ("NONE", "PRIVATE|ANONYMOUS|NORESERVE"),
       "PROT_NONE mmap")
    for e in got:
        check(e["result"] is not None, "a call failed: %r" % e)


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_shmsnoop(t):
    need_bpf(t, "shmsnoop")
    dat = data_file(t)
    key = 0x48000000 + os.getpid() % 0x10000  # no other test run shares it
    doc, r = probe_json(t, ["shmsnoop", "--json", "-c",
                            "%s %s 0x%x" % (t.prog("memcalls"), dat, key)])
    done = [l for l in r.stderr.splitlines() if l.startswith("done ")]
    check(done, "memcalls did not finish: %s" % r.describe())
    shmid = int(done[0].split()[1])
    evs = doc["events"]
    eq([e["call"] for e in evs], ["shmget", "shmat", "shmdt", "shmctl"], "calls")
    get, at, dt, ctl = evs
    eq((get["key"], get["size"], get["flags"], get["flags_text"], get["result"]),
       (key, 16 * PAGE, 0o1000 | 0o600, "IPC_CREAT|0600", shmid), "shmget")
    eq((at["shmid"], at["addr"], at["flags_text"]), (shmid, 0, "0"), "shmat")
    check(at["result"] > 0, "shmat's address: %r" % at)
    eq((dt["addr"], dt["result"]), (at["result"], 0), "shmdt")
    eq((ctl["shmid"], ctl["cmd_text"], ctl["result"]), (shmid, "IPC_RMID", 0), "shmctl")
    for e in evs:
        eq(e["pid"], doc["pid"], "pid")


@case(timeout=30, labels=("probes", "analyzers"))
def test_probes_usage(t):
    """Bad usage: exit 2 with one clear line, before any BPF is needed; a
    command given as record takes it (`-- ./app`) is answered with -c."""
    bad = [
        (["mmapsnoop", "5"], "unexpected argument '5'"),
        (["shmsnoop", "-p", "1", "-c", "true"], "-p and -c exclude each other"),
        (["mmapsnoop", "-c", " "], "-c needs a command"),
        (["mmapsnoop", "--bogus"], "bogus"),
        (["mmapsnoop", "-d", "soon"], "soon"),
        (["faults", "1", "2", "3"], "too many arguments ('3')"),
        (["faults", "soon"], "INTERVAL 'soon' is not a duration"),
        (["brkstack", "1", "0"], "COUNT '0' is not a positive number"),
        (["ffaults", "1", "-5"], "-5"),
        # record's way of giving a command: said how it is given here
        (["shmsnoop", "--", "./shm"], "use -d TIME to stop after a while; to run a command, "
         "use -c 'CMD ARGS'"),
        (["faults", "--", "./flt"], "INTERVAL './flt' is not a duration (e.g. 1, 2s, 500ms); "
         "to run a command, use -c 'CMD ARGS'"),
        (["faults", "--", "./flt", "10", "10"], "to run a command, use -c 'CMD ARGS'"),
    ]
    for args, msg in bad:
        r = t.run([t.heaptrail] + args)
        eq(r.rc, 2, "exit of %s" % " ".join(args))
        check(msg in r.stderr, "%s: %r not in %r" % (" ".join(args), msg, r.stderr))


def functions(stack):
    return [f["function"] for f in stack["frames"]]


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_brkstack(t):
    """memcalls moves the break 4 times from its own code: brk(0) from main,
    then +64, +128, +192 KiB from grow_break_1/2/3, each called by main."""
    need_bpf(t, "brkstack")
    dat = data_file(t)
    doc, r = probe_json(t, ["brkstack", "--json", "-n", "0", "-c",
                            "%s %s" % (t.prog("memcalls"), dat)])
    eq(len(doc["intervals"]), 1, "reports without INTERVAL")
    rep = doc["intervals"][0]
    check(rep["final"], "the report is the final one")
    mine = {}
    for s in rep["stacks"]:
        eq(s["pid"], doc["pid"], "pid of a stack")
        fns = functions(s)
        for g in ("grow_break_1", "grow_break_2", "grow_break_3"):
            if g in fns:
                check(g not in mine, "%s in two stacks" % g)
                mine[g] = s
                i = fns.index(g)
                check(i + 1 < len(fns) and fns[i + 1] == "main",
                      "the caller of %s is main: %r" % (g, fns))
    eq(sorted(mine), ["grow_break_1", "grow_break_2", "grow_break_3"], "brk stacks found")
    for g, kib in (("grow_break_1", 64), ("grow_break_2", 128), ("grow_break_3", 192)):
        eq((mine[g]["count"], mine[g]["bytes"]), (1, kib * 1024), "%s: calls, bytes" % g)
    zero = [s for s in rep["stacks"] if functions(s)[:2] == ["raw_brk", "main"]]
    eq([(s["count"], s["bytes"]) for s in zero], [(1, 0)], "brk(0) from main")
    # glibc's malloc moves it too (the stdout buffer): every call counted
    eq(rep["total"], sum(s["count"] for s in rep["stacks"]), "total")
    check(rep["total"] >= 4, "total %d" % rep["total"])


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_faults(t):
    """faulter writes one byte in each of 3000 fresh pages (no huge pages) in
    touch_buffer: at least 3000 faults in stacks through touch_buffer, called
    by main; the SVG and the folded stacks say the same."""
    need_bpf(t, "faults")
    pages = 3000
    svg = t.path("faults.svg")
    doc, r = probe_json(t, ["faults", "--json", "-n", "0", "-o", svg, "-c",
                            "%s %d" % (t.prog("faulter"), pages)])
    rep = doc["intervals"][-1]
    touch = [s for s in rep["stacks"] if "touch_buffer" in functions(s)]
    n = sum(s["count"] for s in touch)
    check(n >= pages, "faults in touch_buffer: %d < %d" % (n, pages))
    check(n <= pages + 16, "faults in touch_buffer: %d, far more than %d pages" % (n, pages))
    top = rep["stacks"][0]
    eq(functions(top)[:2], ["touch_buffer", "main"], "the top stack")
    eq(top["frames"][0]["file"].split("/")[-1], "faulter.c", "its file")
    with open(svg) as f:
        text = f.read()
    check(text.startswith("<?xml") and "touch_buffer" in text and "</svg>" in text,
          "flame graph: %s" % text[:300])
    r = t.run([t.heaptrail, "faults", "--folded", "-c", "%s %d" % (t.prog("faulter"), pages)])
    eq(r.rc, 0, "faults --folded: %s" % r.describe())
    got = 0
    for line in r.stdout.splitlines():
        stack, _, count = line.rpartition(" ")
        if ";main;touch_buffer" in stack:
            check(stack.startswith("faulter;"), "the process name is the root frame: %r" % line)
            got += int(count)
    check(pages <= got <= pages + 16, "folded faults in touch_buffer: %d" % got)


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_ffaults(t):
    """faulter maps a 256-page file, reads a byte of each page, unmaps it,
    then the same with a second file (at the same address, which must not
    be taken for the first: mappings are cached per process and forgotten
    at munmap): each file is named with 256/16 to 256 faults (fault-around
    maps up to 16 pages a fault); the anonymous pages it touches are
    counted apart."""
    need_bpf(t, "ffaults")
    one = data_file(t, "paged-in.dat", 256 * PAGE)
    two = data_file(t, "second.dat", 256 * PAGE)
    doc, r = probe_json(t, ["ffaults", "--json", "-n", "0", "-c",
                            "%s 500 %s %s" % (t.prog("faulter"), one, two)])
    at = [l.split(" at ")[1] for l in r.stderr.splitlines() if l.startswith("read ")]
    eq(len(at), 2, "files read: %s" % r.stderr)
    if at[0] != at[1]:
        t.note("the two files were mapped at different addresses: %r" % at)
    rep = doc["intervals"][-1]
    files = {f["file"]: f["faults"] for f in rep["files"]}
    for name in ("paged-in.dat", "second.dat"):
        check(name in files, "%s is not named: %r" % (name, files))
        check(256 // 16 <= files[name] <= 256, "faults on %s: %d" % (name, files[name]))
    check(rep["anonymous"] >= 500, "anonymous faults %d < 500 pages touched" % rep["anonymous"])
    eq(rep["total"], rep["anonymous"] + sum(files.values()), "total")
    for f in rep["files"]:
        eq(f["pid"], doc["pid"], "pid")


class Held:
    """memcalls in its "wait" mode: started, held before its calls and
    again before it exits."""

    def __init__(self, t, key):
        self.p = subprocess.Popen([t.prog("memcalls"), data_file(t), "0x%x" % key, "wait"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=t.base_env(), cwd=t.dir)
        line = self.p.stdout.readline().decode()
        check(line.startswith("ready "), "memcalls did not start: %r" % line)
        self.pid = int(line.split()[1])

    def step(self):
        """Lets it go on to the next hold (or its end)."""
        self.p.stdin.write(b"go\n")
        self.p.stdin.flush()

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def start_probe(t, args):
    """heaptrail ARGS in the background, once it says it is tracing."""
    p = subprocess.Popen([t.heaptrail] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=t.base_env(), cwd=t.dir)
    line = p.stderr.readline().decode()
    if "Ctrl-C to end" not in line:
        out, err = p.communicate(timeout=30)
        fail("heaptrail %s did not start: %s%s" % (" ".join(args), line, err.decode()))
    return p


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_pid_sigint(t):
    """-p PID: brkstack counts the brk calls of a running process until
    Ctrl-C (SIGINT), reports, exits 0, and leaves the process running; it
    then ends normally. mmapsnoop -p sees only that process."""
    need_bpf(t, "brkstack")
    held = Held(t, 0x48100000 + os.getpid() % 0x10000)
    try:
        p = start_probe(t, ["brkstack", "--json", "-n", "0", "-p", str(held.pid)])
        q = start_probe(t, ["mmapsnoop", "--json", "-p", str(held.pid)])
        held.step()
        line = held.p.stdout.readline().decode()
        check(line.startswith("done "), "memcalls: %r" % line)
        for proc in (p, q):
            proc.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        eq(p.returncode, 0, "brkstack's exit after SIGINT: %s" % err.decode())
        doc = json.loads(out)
        check(doc["stopped"].startswith("interrupted"), doc["stopped"])
        eq(doc["pid"], held.pid, "pid")
        grow = [s for s in doc["intervals"][-1]["stacks"]
                if any(f["function"] and f["function"].startswith("grow_break_")
                       for f in s["frames"])]
        eq(sorted(s["bytes"] // 1024 for s in grow), [64, 128, 192], "brk growth by stack")
        out, err = q.communicate(timeout=30)
        eq(q.returncode, 0, "mmapsnoop's exit after SIGINT: %s" % err.decode())
        doc = json.loads(out)
        eq({e["pid"] for e in doc["events"]}, {held.pid}, "mmapsnoop -p: processes")
        eq(len(framed(doc["events"])), 9, "mmapsnoop -p: the program's calls")
        check(held.p.poll() is None, "the process traced ended with the tracer")
        held.step()
        eq(held.p.wait(timeout=30), 0, "the process's exit status")
    finally:
        held.stop()


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_interval_count(t):
    """INTERVAL COUNT: faults -p PID 0.2 3 makes three reports and ends by
    itself; -d ends a snoop; -p of a process that exits ends the probe."""
    need_bpf(t, "faults")
    held = Held(t, 0x48200000 + os.getpid() % 0x10000)
    try:
        r = t.run([t.heaptrail, "faults", "--json", "-p", str(held.pid), "0.2", "3"], timeout=30)
        eq(r.rc, 0, "faults: %s" % r.describe())
        doc = json.loads(r.stdout)
        eq(len(doc["intervals"]), 3, "reports")
        eq(doc["stopped"], "3 reports made", "why it stopped")
        check(not any(i["final"] for i in doc["intervals"][:2]), "final flags")
        r = t.run([t.heaptrail, "shmsnoop", "-d", "300ms", "-p", str(held.pid)], timeout=30)
        eq(r.rc, 0, "shmsnoop -d: %s" % r.describe())
        check("stopped: 300.000 ms passed (-d)" in r.stderr, "why it stopped: %s" % r.stderr)
        p = start_probe(t, ["shmsnoop", "--json", "-p", str(held.pid)])
        held.step()
        held.p.stdout.readline()
        held.step()
        eq(held.p.wait(timeout=30), 0, "memcalls' exit")
        out, err = p.communicate(timeout=30)
        eq(p.returncode, 0, "shmsnoop: %s" % err.decode())
        doc = json.loads(out)
        eq(doc["stopped"], "PID %d exited" % held.pid, "why it stopped")
        eq([e["call"] for e in doc["events"]], ["shmget", "shmat", "shmdt", "shmctl"], "calls")
    finally:
        held.stop()


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_no_tracefs(t):
    """The probes need no tracefs (raw tracepoints and perf events): with
    tracefs unmounted in a private mount namespace (unshare -m) mmapsnoop
    and faults still work."""
    need_bpf(t, "mmapsnoop")
    if not shutil.which("unshare"):
        skip("unshare (util-linux) is not installed")
    dat = data_file(t)
    script = ("for m in $(awk '$3==\"tracefs\"{print $2}' /proc/mounts | sort -r); do "
              "umount \"$m\" || exit 99; done; "
              "awk '$3==\"tracefs\"' /proc/mounts | grep -q . && exit 98; "
              "\"$0\" mmapsnoop --json -c \"$1 $2\" > snoop.json && "
              "\"$0\" faults --json -c \"$3 500\" > faults.json")
    r = t.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, t.heaptrail,
               t.prog("memcalls"), dat, t.prog("faulter")])
    if r.rc in (98, 99) or "unshare failed" in r.stderr:
        skip("cannot unmount tracefs in a private mount namespace: %s" % r.stderr.strip())
    eq(r.rc, 0, "without tracefs: %s" % r.describe())
    with open(t.path("snoop.json")) as f:
        eq(len(framed(json.load(f)["events"])), 9, "mmapsnoop without tracefs: calls")
    with open(t.path("faults.json")) as f:
        rep = json.load(f)["intervals"][-1]
    n = sum(s["count"] for s in rep["stacks"]
            if any(fr["function"] == "touch_buffer" for fr in s["frames"]))
    check(n >= 500, "faults without tracefs: %d in touch_buffer" % n)


@case(timeout=30, labels=("probes", "analyzers"))
def test_probes_bad_target(t):
    """A -p process that does not exist: exit 2, one line naming it; a -c
    command that is not found: 127, one that cannot be run: 126, as record
    (before: 2 for both); an unwritable -o: exit 1, one line, no file left
    behind (the report is still printed)."""
    need_bpf(t, "faults")
    r = t.run([t.heaptrail, "mmapsnoop", "-p", "999999999"])
    eq(r.rc, 2, "no such -p: %s" % r.describe())
    check("no process 999999999" in r.stderr, r.stderr)
    r = t.run([t.heaptrail, "faults", "-c", t.path("no-such-program") + " x"])
    eq(r.rc, 127, "no such -c: %s" % r.describe())
    check("cannot run '%s': No such file or directory" % t.path("no-such-program") in r.stderr,
          r.stderr)
    with open(t.path("not-runnable"), "w") as f:
        f.write("data\n")
    for cmd in ("faults", "attach"):
        r = t.run([t.heaptrail, cmd, "-c", t.path("not-runnable")])
        eq(r.rc, 126, "%s -c of a file that is not executable: %s" % (cmd, r.describe()))
        check("cannot run '%s': Permission denied" % t.path("not-runnable") in r.stderr, r.stderr)
    r = t.run([t.heaptrail, "attach", "-c", t.path("no-such-program")])
    eq(r.rc, 127, "attach -c, no such program: %s" % r.describe())
    os.mkdir(t.path("ro"))
    os.chmod(t.path("ro"), 0o555)
    out = t.path("ro", "f.svg")
    r = t.run(["setpriv", "--reuid=0", "--inh-caps=-all", "--bounding-set=-dac_override",
               t.heaptrail, "faults", "-o", out, "-c", "%s 10" % t.prog("faulter")])
    if "setpriv" in r.stderr and r.rc not in (0, 1):
        r = None  # no setpriv here: root writes anywhere, nothing to test
    if r is not None:
        # refused before the program runs (it used to run, print its
        # report, and lose the picture at the end)
        eq(r.rc, 1, "unwritable -o: %s" % r.describe())
        check("cannot write %s: %s: Permission denied" % (out, t.path("ro")) in r.stderr, r.stderr)
        check("touch_buffer" not in r.stdout, "the program ran: %s" % r.stdout)
        eq(os.listdir(t.path("ro")), [], "files left behind")


@case(timeout=30, labels=("probes", "analyzers"))
def test_probes_thread_id(t):
    """-p with the id of a thread (not the main one) traces its process, and
    says so."""
    need_bpf(t, "mmapsnoop")
    code = ("import threading, sys\n"
            "e = threading.Event()\n"
            "th = threading.Thread(target=e.wait)\n"
            "th.start()\n"
            "print(th.native_id, flush=True)\n"
            "sys.stdin.readline()\n"
            "e.set()\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=t.base_env(), cwd=t.dir)
    try:
        tid = int(p.stdout.readline())
        doc, r = probe_json(t, ["mmapsnoop", "--json", "-d", "100ms", "-p", str(tid)])
        eq(doc["pid"], p.pid, "the process traced")
        check("%d is a thread of process %d" % (tid, p.pid) in r.stderr, r.stderr)
    finally:
        p.stdin.close()
        p.wait(timeout=30)
