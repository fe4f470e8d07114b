"""`heaptrail maps`: a live process with a known memory map
(tests/progs/mapsprog.c: 3 threads with 256/320/384 KiB stacks, each with
its own glibc arena, a 3076 KiB anonymous mapping with 100 pages written,
a 64 KiB named one, a 40 KiB file, a dlopened library) against pmap -X
and against what the program made; a saved copy of its smaps against
the live PID; hand-written smaps texts with what kernels vary; bad
inputs."""

import json
import os
import pwd
import re
import shutil
import subprocess
import time

from htlib import case, check, eq, fail, skip

STACK_KIB = [256, 320, 384]
ANON_KIB, ANON_TOUCHED_KIB = 3076, 400
NAMED_KIB = 64
FILE_BYTES = 40000  # 40 KiB mapped
ARENA_KIB = 65536
KINDS = ["heap", "arena", "stack", "anon", "library", "executable", "file", "kernel"]


class Prog:
    """mapsprog running, stopped at its "ready" line; stop() ends it."""

    def __init__(self, t):
        self.t = t
        # private copies: no other process maps these files, so their PSS
        # stays put (the test runs pmap and heaptrail next to it).  The
        # private libc and loader (tests/CMakeLists.txt) are shared by every
        # mapsprog: the cases that start one hold the lock "mapsprog", so
        # that no two run at once (one starting or ending changed the
        # other's PSS between two reads)
        self.exe = t.path("mapsprog")
        shutil.copy(t.prog("mapsprog"), self.exe)
        self.lib = t.path("libtpdl-maps.so")
        shutil.copy(t.prog("libtpdl.so"), self.lib)
        self.data = t.path("data.bin")
        with open(self.data, "wb") as f:
            f.write(bytes(range(256)) * (FILE_BYTES // 256) + b"x" * (FILE_BYTES % 256))
        self.p = subprocess.Popen([self.exe, self.data, self.lib], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=t.base_env(), cwd=t.dir)
        line = self.p.stdout.readline().decode()
        m = re.match(r"ready (\d+) (\d+) (\d+) (\d+) (0x[0-9a-f]+) (0x[0-9a-f]+) ([01])$",
                     line.strip())
        if not m:
            self.stop()
            fail("mapsprog did not start: %r %s" % (line, self.p.stderr.read().decode()))
        self.pid = int(m.group(1))
        self.tids = [int(m.group(i)) for i in (2, 3, 4)]
        self.anon = int(m.group(5), 16)
        self.named_addr = int(m.group(6), 16)
        self.named = m.group(7) == "1"

    def stop(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=30)
        except (subprocess.TimeoutExpired, OSError):
            self.p.kill()
            self.p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.stop()


def maps_json(t, arg, stdin=None):
    r = t.run([t.heaptrail, "maps", "--json", str(arg)], stdin=stdin)
    eq(r.rc, 0, "maps --json %s:\n%s" % (arg, r.describe()))
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        fail("maps --json is not JSON (%s):\n%s" % (e, r.stdout[:2000]))


def pmap_total(t, pid):
    """pmap -X PID's total line, by column name."""
    r = t.run(["pmap", "-X", str(pid)])
    eq(r.rc, 0, "pmap -X:\n" + r.describe())
    lines = r.stdout.splitlines()
    head = [l for l in lines if l.split()[:2] == ["Address", "Perm"]]
    check(len(head) == 1, "pmap -X: no header line:\n" + r.stdout[:1000])
    cols = head[0].split()[5:]
    tot = lines[-1].split()
    eq(tot[-1], "KB", "pmap -X total line ends in KB")
    return dict(zip(cols, (int(x) for x in tot[:-1])))


def totals(j):
    return tuple(j["total"][k] for k in ("size_kb", "rss_kb", "pss_kb", "swap_kb"))


def check_sums(j):
    """Every group is the sum of its regions, the total the sum of the groups."""
    amounts = ("size_kb", "rss_kb", "pss_kb", "swap_kb", "dirty_kb")
    eq(sorted(j["regions"]), sorted(KINDS), "kinds in regions")
    for a in amounts:
        s = 0
        for k in KINDS:
            g = j["regions"][k]
            eq(g["count"], len(g["regions"]), "%s count" % k)
            eq(sum(r[a] for r in g["regions"]), g[a], "%s.%s = sum of its regions" % (k, a))
            s += g[a]
        eq(s, j["total"][a], "total.%s = sum of the kinds" % a)
    eq(sum(r["maps"] for k in KINDS for r in j["regions"][k]["regions"]), j["mappings"],
       "every mapping in one region")


def region_at(j, kind, addr):
    hits = [r for r in j["regions"][kind]["regions"] if int(r["start"], 16) == addr]
    eq(len(hits), 1, "%s regions starting at %#x" % (kind, addr))
    return hits[0]


def check_prog(t, j, prog, live):
    """What mapsprog made, found in maps --json."""
    check_sums(j)
    # thread stacks: the size asked for, and one guard page
    stacks = j["regions"]["stack"]["regions"]
    main = [r for r in stacks if r["main"]]
    eq(len(main), 1, "[stack] regions")
    threads = sorted((r for r in stacks if not r["main"]), key=lambda r: r["size_kb"])
    eq(len(threads), 3, "thread stacks (%s)" % [r["name"] for r in stacks])
    for r, kib, tid in zip(threads, STACK_KIB, prog.tids):
        eq(r["size_kb"], kib + 4, "stack of %d KiB with its guard page: size_kb" % kib)
        eq(r["reserve_kb"], 4, "its guard page")
        eq(r["maps"], 2, "stack and guard mappings")
        if live:
            eq(r["tid"], tid, "the thread whose stack is %d KiB" % kib)
            eq(r["name"], "stack of thread %d" % tid, "stack name")
        else:
            eq(r["tid"], None, "a saved copy knows no thread")
            eq(r["name"], "thread stack", "stack name in a saved copy")
    if live:
        eq(j["stacks_by_sp"], 3, "stacks found by the threads' stack pointers")
        eq(main[0]["tid"], prog.pid, "[stack] is the main thread's")
        eq(j["threads"], 4, "threads")
    # one arena per thread, each a 64 MiB reservation
    arenas = j["regions"]["arena"]["regions"]
    eq(len(arenas), 3, "arena heaps")
    for r in arenas:
        eq(r["size_kb"], ARENA_KIB, "arena heap with its reserve")
        eq(int(r["start"], 16) % (ARENA_KIB * 1024), 0, "arena heap alignment")
        check(r["rss_kb"] > 0 and r["reserve_kb"] > 0, "arena heap %r" % r)
    eq(j["regions"]["heap"]["count"], 1, "[heap]")
    check(j["regions"]["heap"]["rss_kb"] >= 1000, "the main heap holds the 1 MiB of blocks")
    a = region_at(j, "anon", prog.anon)
    eq((a["size_kb"], a["rss_kb"], a["dirty_kb"], a["maps"]),
       (ANON_KIB, ANON_TOUCHED_KIB, ANON_TOUCHED_KIB, 1), "the anonymous mapping")
    n = region_at(j, "anon", prog.named_addr)
    eq(n["size_kb"], NAMED_KIB, "the named mapping")
    eq(n["name"], "[anon:ht-test]" if prog.named else "anonymous", "its name")
    libs = {r["name"]: r for r in j["regions"]["library"]["regions"]}
    check(prog.lib in libs, "%s among the libraries %s" % (prog.lib, sorted(libs)))
    check(libs[prog.lib]["maps"] >= 4, "the library's segments in one region")
    eq([r["name"] for r in j["regions"]["executable"]["regions"]], [prog.exe], "executable")
    eq(j["executable"], prog.exe, "executable")
    f = [r for r in j["regions"]["file"]["regions"] if r["name"] == prog.data]
    eq(len(f), 1, "the mapped file")
    eq((f[0]["size_kb"], f[0]["rss_kb"]), (40, 40), "the mapped file, read whole")
    kernel = {r["name"] for r in j["regions"]["kernel"]["regions"]}
    check("[vdso]" in kernel, "[vdso] in kernel: %s" % kernel)


@case(timeout=120, labels=("analyzers",), locks=("mapsprog",))
def test_maps_live_pmap(t):
    """maps PID on mapsprog: total size, RSS, PSS and swap equal pmap -X's
    total line to the kB (read before and after, unchanged); three thread
    stacks named after their threads with the sizes asked for, three
    arena heaps, the anonymous and named mappings, the file, the library,
    the executable; every group sums its regions; the text output's total
    line and stack lines."""
    if not shutil.which("pmap"):
        skip("pmap (procps) is not installed")
    with Prog(t) as prog:
        for attempt in range(5):
            before = pmap_total(t, prog.pid)
            j = maps_json(t, prog.pid)
            after = pmap_total(t, prog.pid)
            if before == after:
                break
        else:
            fail("pmap -X kept changing: %r then %r" % (before, after))
        want = tuple(before[k] for k in ("Size", "Rss", "Pss", "Swap"))
        eq(totals(j), want, "maps total (size, rss, pss, swap) against pmap -X")
        check_prog(t, j, prog, live=True)
        r = t.run([t.heaptrail, "maps", str(prog.pid)])
        eq(r.rc, 0, "maps PID:\n" + r.describe())
        tot = [l for l in r.stdout.splitlines() if l.startswith("total ")]
        eq(len(tot), 1, "total line")
        eq([int(x) for x in tot[0].split()[1:6]],
           [j["total"][k] for k in ("size_kb", "rss_kb", "pss_kb", "dirty_kb", "swap_kb")],
           "text total line")
        for tid in prog.tids:
            check(re.search(r"^\s+\d+\s+\d+\s+\d+\s+\d+\s+\d+\s+2  stack of thread %d " % tid,
                            r.stdout, re.M), "a line for thread %d's stack:\n%s" % (tid, r.stdout))


@case(timeout=120, labels=("analyzers",), locks=("mapsprog",))
def test_maps_saved_copy(t):
    """A saved copy of mapsprog's smaps, as a file and on stdin, gives the
    live PID's figures: the same totals, kinds, regions and sizes (stacks
    by the guard-page layout instead of the threads' stack pointers)."""
    with Prog(t) as prog:
        saved = t.path("smaps.txt")
        with open("/proc/%d/smaps" % prog.pid, "rb") as f:
            text = f.read()
        with open(saved, "wb") as f:
            f.write(text)
        live = maps_json(t, prog.pid)
    j = maps_json(t, saved)
    check_prog(t, j, prog, live=False)
    eq(totals(j), totals(live), "saved copy totals against the live PID")
    eq(j["stacks_by_layout"], 3, "stacks found by the guard-page layout")

    def strip(doc):
        out = {}
        for k in KINDS:
            out[k] = sorted((r["start"], r["end"], r["maps"], r["size_kb"], r["rss_kb"],
                             r["pss_kb"], r["swap_kb"], r["dirty_kb"], r["reserve_kb"],
                             "" if k == "stack" else r["name"])
                            for r in doc["regions"][k]["regions"])
        return out
    eq(strip(j), strip(live), "regions of the saved copy against the live PID")
    piped = maps_json(t, "-", stdin=text)
    eq(strip(piped), strip(j), "the same copy on stdin")
    a = t.run([t.heaptrail, "maps", "--all", saved])
    b = t.run([t.heaptrail, "maps", "--all", "-"], stdin=text)
    eq((a.rc, b.rc), (0, 0), "maps FILE, maps -")
    eq(a.stdout.splitlines()[1:], b.stdout.splitlines()[1:], "text of FILE and of stdin")


# A hand-made smaps: fields in any order, unknown fields, VmFlags, fields
# missing (an old kernel: no Pss_Dirty, no SwapPss, no Swap in one), names
# with spaces, a deleted library, [anon:NAME], an old kernel's [stack:TID],
# CRLF line ends in one mapping, a mapping without Size.
EDGE = """\
00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/my server
Size:                328 kB
Rss:                 300 kB
Pss:                 150 kB
Shared_Dirty:          0 kB
Private_Dirty:         0 kB
Swap:                  0 kB
VmFlags: rd ex mr mw me dw
00651000-00652000 rw-p 00051000 08:02 173521      /usr/bin/my server
Rss:                   4 kB
Size:                  4 kB
Swap:                  8 kB
Pss:                   4 kB
Private_Dirty:         4 kB
Brand_New_Field:      77 kB
01000000-01100000 rw-p 00000000 00:00 0          [heap]
Size:               1024 kB
Rss:                 900 kB
Pss:                 900 kB
Private_Dirty:       900 kB
Swap:                100 kB
THPeligible:    0
ProtectionKey:         0
7f0000000000-7f0000200000 rw-p 00000000 00:00 0 \r
Size:               2048 kB\r
Rss:                1024 kB\r
Pss:                1024 kB\r
Swap:                  0 kB\r
7f0000200000-7f0004000000 ---p 00000000 00:00 0 
Size:              63488 kB
Rss:                   0 kB
Pss:                   0 kB
7f1000000000-7f1000001000 ---p 00000000 00:00 0 
Size:                  4 kB
Rss:                   0 kB
Pss:                   0 kB
7f1000001000-7f1000081000 rw-p 00000000 00:00 0          [stack:4243]
Size:                512 kB
Rss:                  16 kB
Pss:                  16 kB
7f2000000000-7f2000010000 rw-p 00000000 00:00 0          [anon:my pool]
Size:                 64 kB
Rss:                  64 kB
Pss:                  64 kB
7f2000010000-7f2000020000 rw-p 00000000 00:00 0          [anon:my pool]
Size:                 64 kB
Rss:                  32 kB
Pss:                  32 kB
7f3000000000-7f3000100000 r-xp 00000000 08:02 99      /opt/lib/libold.so.1 (deleted)
Size:               1024 kB
Rss:                 100 kB
Pss:                  50 kB
7f3000100000-7f3000101000 rw-p 00100000 08:02 99      /opt/lib/libold.so.1 (deleted)
Rss:                   4 kB
Pss:                   4 kB
7f3000200000-7f3000300000 r-xp 00000000 08:02 100      /opt/lib/libold.so.1
Size:               1024 kB
Rss:                  10 kB
Pss:                  10 kB
7f4000000000-7f4000004000 r--p 00000000 08:02 555      /var/data/a file.dat
Size:                 16 kB
Rss:                  16 kB
Pss:                   8 kB
7f4000004000-7f4000008000 r-xp 00000000 08:02 556      /opt/plugins/codec.bin
Size:                 16 kB
Rss:                  12 kB
Pss:                  12 kB
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0          [stack]
Size:                132 kB
Rss:                  20 kB
Pss:                  20 kB
7ffc00100000-7ffc00102000 r-xp 00000000 00:00 0          [vdso]
Size:                  8 kB
Rss:                   4 kB
Pss:                   0 kB
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  [vsyscall]
Size:                  4 kB
Rss:                   0 kB
Pss:                   0 kB
"""


def region(j, kind, name):
    hits = [r for r in j["regions"][kind]["regions"] if r["name"] == name]
    eq(len(hits), 1, "%s regions named %r in %s" % (kind, name,
                                                     [r["name"] for r in
                                                      j["regions"][kind]["regions"]]))
    return hits[0]


@case(labels=("analyzers",))
def test_maps_edge_cases(t):
    """A hand-written smaps with what kernels and programs vary: fields in
    any order, unknown and missing ones, a mapping without Size (its
    address range counts), CRLF, names with spaces, a deleted library kept
    apart from its replacement, [anon:NAME] regions gathered by name, an
    old kernel's [stack:TID], a plugin without .so that has code: exact
    totals and kinds."""
    p = t.path("edge.smaps")
    with open(p, "w", newline="") as f:
        f.write(EDGE)
    j = maps_json(t, p)
    check_sums(j)
    eq(j["mappings"], 17, "mappings")
    size = 328 + 4 + 1024 + 2048 + 63488 + 4 + 512 + 64 + 64 + 1024 + 4 + 1024 + 16 + 16 + 132 + 8 + 4
    rss = 300 + 4 + 900 + 1024 + 16 + 64 + 32 + 100 + 4 + 10 + 16 + 12 + 20 + 4
    pss = 150 + 4 + 900 + 1024 + 16 + 64 + 32 + 50 + 4 + 10 + 8 + 12 + 20
    eq(j["total"], {"size_kb": size, "rss_kb": rss, "pss_kb": pss, "swap_kb": 108,
                    "dirty_kb": 904}, "total")
    eq(j["executable"], "/usr/bin/my server", "executable from the lowest file mapping")
    exe = region(j, "executable", "/usr/bin/my server")
    eq((exe["maps"], exe["size_kb"], exe["swap_kb"]), (2, 332, 8), "executable")
    eq(region(j, "heap", "[heap]")["swap_kb"], 100, "heap swap")
    arena = region(j, "arena", "arena heap")
    eq((arena["maps"], arena["size_kb"], arena["rss_kb"], arena["reserve_kb"]),
       (2, 65536, 1024, 63488), "arena heap (CRLF) and its reserve")
    old = region(j, "stack", "stack of thread 4243")
    eq((old["tid"], old["size_kb"], old["maps"], old["reserve_kb"]), (4243, 516, 2, 4),
       "[stack:TID] and its guard page")
    eq(region(j, "stack", "[stack] (main thread)")["main"], True, "[stack]")
    pool = region(j, "anon", "[anon:my pool]")
    eq((pool["maps"], pool["size_kb"], pool["rss_kb"]), (2, 128, 96), "[anon:my pool]")
    eq(j["regions"]["anon"]["count"], 1, "anonymous regions: [anon:my pool] only")
    dele = [r for r in j["regions"]["library"]["regions"] if r.get("deleted")]
    eq(len(dele), 1, "deleted library regions")
    eq((dele[0]["name"], dele[0]["maps"], dele[0]["size_kb"]), ("/opt/lib/libold.so.1", 2, 1028),
       "the deleted library (one mapping without Size: 4 kB from its addresses)")
    eq(len([r for r in j["regions"]["library"]["regions"]
            if r["name"] == "/opt/lib/libold.so.1"]), 2,
       "the deleted library and its replacement apart")
    eq(region(j, "library", "/opt/plugins/codec.bin")["size_kb"], 16, "a file with code")
    eq(region(j, "file", "/var/data/a file.dat")["pss_kb"], 8, "a file with a space")
    eq(sorted(r["name"] for r in j["regions"]["kernel"]["regions"]), ["[vdso]", "[vsyscall]"],
       "kernel")
    r = t.run([t.heaptrail, "maps", p])
    eq(r.rc, 0, "maps FILE:\n" + r.describe())
    check("/opt/lib/libold.so.1 (deleted)" in r.stdout, "the deleted library in the text")


@case(labels=("analyzers",), locks=("mapsprog",))
def test_maps_bad_inputs(t):
    """No such process, another user's process, an empty file, a maps (not
    smaps) copy, a text that is no smaps, a missing file, usage errors: one
    'heaptrail:' line each, exit 1 (data) or 2 (usage)."""
    def bad(args, rc, pattern, stdin=None, run=None):
        r = (run or t.run)([t.heaptrail, "maps"] + args, stdin=stdin)
        eq(r.rc, rc, "exit of maps %s:\n%s" % (args, r.describe()))
        lines = r.stderr.strip().splitlines()
        eq(len(lines), 1, "one line on stderr for maps %s: %r" % (args, lines))
        check(re.search(pattern, lines[0]), "maps %s said %r, expected /%s/" % (
            args, lines[0], pattern))
        eq(r.stdout, "", "nothing on stdout for maps %s" % args)

    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    bad([str(pid_max + 1)], 1, r"^heaptrail: .*no process %d" % (pid_max + 1))
    empty = t.path("empty")
    open(empty, "w").close()
    bad([empty], 1, r"empty\b.*empty file|empty file")
    bad(["-"], 1, r"standard input: empty file", stdin=b"")
    maps_copy = t.path("maps.txt")
    shutil.copy("/proc/self/maps", maps_copy)
    bad([maps_copy], 1, r"maps.txt: a maps file, not smaps.*copy /proc/PID/smaps")
    junk = t.path("junk.txt")
    with open(junk, "w") as f:
        f.write("hello\nworld: 12 kB\n")
    bad([junk], 1, r"junk.txt: not an smaps file")
    bad([t.path("missing")], 1, r"missing: No such file")
    # what is no text: /dev/zero, and a 20 GB sparse file (a disk image)
    # that begins like an smaps copy: maps stops at the first NUL byte
    # (before, /dev/zero never ended and the sparse file took > 20 s)
    with open("/proc/self/smaps", "rb") as f:
        text = f.read()
    sparse = t.path("sparse.img")
    with open(sparse, "wb") as f:
        f.write(text)
        f.truncate(20 << 30)
    for what, path, off in (("/dev/zero", "/dev/zero", 0), ("sparse", sparse, len(text))):
        t0 = time.monotonic()
        bad([path], 1, r"binary data \(a NUL byte at offset %d\): not an smaps file" % off)
        secs = time.monotonic() - t0
        check(secs < 10, "maps %s took %.1f s" % (what, secs))
    os.unlink(sparse)
    bad([], 2, r"no process or file given")
    bad(["1", "2"], 2, r"one process or file at a time")
    bad(["--nope", "1"], 2, r"nope")
    # another user's process
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        t.note("not root or no setpriv: the permission case is not run")
        return
    nobody = pwd.getpwnam("nobody")
    for d in (t.heaptrail,):
        st = os.stat(d)
        if not st.st_mode & 0o001:
            t.note("heaptrail is not executable by others: the permission case is not run")
            return
    with Prog(t) as prog:
        def as_nobody(argv, stdin=None):
            return t.run(["setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid,
                          "--clear-groups"] + argv, stdin=stdin)
        bad([str(prog.pid)], 1, r"/proc/%d/smaps: permission denied.*another user.*"
            r"as that user or as root" % prog.pid, run=as_nobody)
