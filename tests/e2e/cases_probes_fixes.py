"""The eBPF probe commands where they went wrong: a process whose other
threads map and unmap while its faults are looked up, stdout blocked when
a signal comes, a main thread that called pthread_exit, frames outside any
module, --folded with -c, a full counts map, and -p / -n values that are
not usable.  Each case compiles a small C program when it needs one (gcc),
and skips where BPF cannot be used.  Label "probes"."""

import json
import os
import subprocess
import time

import htlib
from htlib import case, check, eq, fail, proc_stats
from htprobe import need_bpf, probe_json

PAGE = 4096


def compile_c(t, name, source, extra=()):
    """htlib.compile_c with frame pointers and threads."""
    return htlib.compile_c(t, name, source, ("-fno-omit-frame-pointer", "-pthread") + tuple(extra))


# Maps a 64-page file ITERS times and writes a byte of each page (64 faults
# on the file each time) while SPINNERS threads map and unmap 1 MiB of
# anonymous memory without touching it (each holds the mmap lock for
# writing, over and over).
RACE_C = r"""
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#define N 64
static volatile int stop;
static void *spinner(void *a)
{
	while (!stop) {
		void *p = mmap(0, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		munmap(p, 1 << 20);
	}
	return a;
}
int main(int argc, char **argv)
{
	int iters = atoi(argv[2]), nsp = atoi(argv[3]);
	int fd = open(argv[1], O_RDONLY);
	pthread_t t[8];
	for (int i = 0; i < nsp; i++)
		pthread_create(&t[i], 0, spinner, 0);
	for (int k = 0; k < iters; k++) {
		char *p = mmap(0, N * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		for (int i = 0; i < N; i++)
			p[i * 4096] = 1;
		munmap(p, N * 4096);
	}
	stop = 1;
	for (int i = 0; i < nsp; i++)
		pthread_join(t[i], 0);
	return 0;
}
"""


@case(timeout=90, labels=("probes", "analyzers"))
def test_probes_fix_race_lookup(t):
    """While two threads map and unmap in a loop (holding the mmap lock for
    writing, so that bpf_find_vma fails with EBUSY), a third maps a file 100
    times and writes its 64 pages: ffaults counts exactly 6400 faults on the
    file (before: a few hundred, the rest counted as anonymous), says how
    many could not be looked up ("unknown", never "anonymous"), and
    mmapsnoop names the file of every one of its 100 mmaps (before: most
    had no file)."""
    need_bpf(t, "ffaults")
    exe = compile_c(t, "race", RACE_C)
    with open(t.path("race.dat"), "wb") as f:
        f.write(b"\1" * 64 * PAGE)
    cmd = "%s %s 100 2" % (exe, t.path("race.dat"))
    doc, r = probe_json(t, ["ffaults", "--json", "-n", "0", "-c", cmd])
    rep = doc["intervals"][-1]
    files = {f["file"]: f["faults"] for f in rep["files"]}
    eq(files.get("race.dat"), 6400, "faults on race.dat: %r" % files)
    eq(rep["total"], rep["anonymous"] + rep["unknown"] + sum(files.values()), "total")
    check(rep["unknown"] <= 64, "faults left unknown: %d" % rep["unknown"])
    doc, r = probe_json(t, ["mmapsnoop", "--json", "-c", cmd])
    maps = [e for e in doc["events"] if e["call"] == "mmap" and e["size"] == 64 * PAGE]
    eq(len(maps), 100, "mmaps of the file")
    eq([e["file"] for e in maps], ["race.dat"] * 100, "the file of each mmap")
    anon = [e for e in doc["events"] if e["call"] == "mmap" and e["size"] == 1 << 20]
    check(anon, "the spinners' mmaps were not seen")
    eq({(e["file"], e["file_unknown"]) for e in anon}, {(None, False)},
       "anonymous mmaps: no file, and known to have none")


STORM_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
int main(int argc, char **argv)
{
	int n = atoi(argv[1]);
	for (int i = 0; i < n; i++) {
		void *p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		munmap(p, 4096);
	}
	return 0;
}
"""


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_fix_blocked_stdout(t):
    """mmapsnoop --json into a pipe whose reader waits a second: stdout
    blocks, the command's SIGCHLD comes meanwhile; the document must still
    be whole, with all 2 x 3000 calls (before: the write failed with EINTR,
    the JSON was cut and the error said "No space left on device", of a
    pipe)."""
    need_bpf(t, "mmapsnoop")
    exe = compile_c(t, "storm", STORM_C)
    p = subprocess.Popen([t.heaptrail, "mmapsnoop", "--json", "-c", "%s 3000" % exe],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=t.base_env(),
                         cwd=t.dir)
    time.sleep(1.5)
    out, err = p.communicate(timeout=40)
    err = err.decode()
    eq(p.returncode, 0, "mmapsnoop: %s" % err)
    try:
        doc = json.loads(out)
    except ValueError as e:
        fail("not JSON (%s): %s" % (e, err))
    calls = [e for e in doc["events"] if e["size"] == PAGE and e["call"] in ("mmap", "munmap")]
    eq(len(calls), 6000, "the calls of the program")


MAINEXIT_C = r"""
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
static void *worker(void *a)
{
	printf("%ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	sleep(4);
	return a;
}
int main(void)
{
	pthread_t t;
	pthread_create(&t, 0, worker, 0);
	pthread_exit(0);
}
"""


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_fix_main_thread_exited(t):
    """A process whose main thread called pthread_exit lives on in its
    other thread: -p PID (and -p with the thread's id) traces it until -d
    ends the probe (before: "PID N exited" at once), and maps PID shows
    its memory (before: "kernel thread or has exited")."""
    need_bpf(t, "mmapsnoop")
    exe = compile_c(t, "mainexit", MAINEXIT_C)
    p = subprocess.Popen([exe], stdout=subprocess.PIPE, env=t.base_env(), cwd=t.dir)
    try:
        tid = int(p.stdout.readline())
        time.sleep(0.2)
        for target in (p.pid, tid):
            doc, r = probe_json(t, ["mmapsnoop", "--json", "-d", "300ms", "-p", str(target)])
            eq(doc["stopped"], "300.000 ms passed (-d)", "why -p %d stopped" % target)
            eq(doc["pid"], p.pid, "the process traced")
        r = t.run([t.heaptrail, "maps", "--json", str(p.pid)])
        eq(r.rc, 0, "maps of the process: %s" % r.describe())
        check(json.loads(r.stdout)["total"]["size_kb"] > 0, "no memory: %s" % r.stdout[:200])
    finally:
        p.kill()
        p.wait()


JIT_C = r"""
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
int main(void)
{
	/* mov byte ptr [rdi], 1; ret: the fault is at the first byte */
	static const unsigned char code[] = {0xc6, 0x07, 0x01, 0xc3};
	unsigned char *buf = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *data = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memcpy(buf, code, sizeof(code));
	fprintf(stderr, "code at %p\n", (void *)buf);
	((void (*)(char *))buf)(data);
	return 0;
}
"""


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_fix_json_address(t):
    """A fault made by code outside any module (copied into anonymous
    memory, as a JIT does): its frame in faults --json has no function nor
    module, and its "address" is the code's address (before: only
    "offset":"0x0", the address lost; the text showed it)."""
    need_bpf(t, "faults")
    exe = compile_c(t, "jit", JIT_C)
    doc, r = probe_json(t, ["faults", "--json", "-n", "0", "-c", exe])
    at = [l.split(" at ")[1] for l in r.stderr.splitlines() if l.startswith("code at ")]
    eq(len(at), 1, "the code's address: %s" % r.stderr)
    addr = "0x%x" % int(at[0], 16)
    firsts = [s["frames"][0] for s in doc["intervals"][-1]["stacks"] if s["frames"]]
    hit = [f for f in firsts if f.get("address") == addr]
    eq(len(hit), 1, "the stack faulting at %s: %r"
       % (addr, [f for f in firsts if f["module"] is None]))
    eq((hit[0]["function"], hit[0]["module"]), (None, None), "an address outside any module")


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_fix_folded_command_output(t):
    """--folded on stdout with -c: the command's own output goes to stderr,
    as with --json (before: its "HELLO" was a line of the folded stacks)."""
    need_bpf(t, "brkstack")
    for cmd in ("brkstack", "faults"):
        r = t.run([t.heaptrail, cmd, "--folded", "-c", "/bin/echo HELLO"])
        eq(r.rc, 0, "%s --folded: %s" % (cmd, r.describe()))
        lines = r.stdout.splitlines()
        check(lines, "%s --folded printed nothing" % cmd)
        bad = [l for l in lines if not (l.startswith("echo;") and l.rsplit(" ", 1)[1].isdigit())]
        eq(bad, [], "%s --folded: lines that are not folded stacks" % cmd)
        check("HELLO" in r.stderr, "the command's output: %s" % r.stderr)


# 40000 page faults (one page written, then dropped with MADV_DONTNEED), each
# from a stack of its own: 16 levels of recursion through one of two call
# sites, chosen by the bits of the iteration.
STACKS_C = r"""
#include <sys/mman.h>
static char *pg;
__attribute__((noinline)) static void touch(void)
{
	pg[0] = 1;
	madvise(pg, 4096, MADV_DONTNEED);
}
__attribute__((noinline)) static void down(int d, unsigned bits)
{
	if (!d) {
		touch();
		return;
	}
	if (bits & 1)
		down(d - 1, bits >> 1);
	else
		down(d - 1, bits >> 1);
}
int main(void)
{
	pg = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (unsigned i = 0; i < 40000; i++)
		down(16, i);
	return 0;
}
"""

COUNT_ENTRIES = 32768  # HT_COUNT_ENTRIES (src/probes/stacks.h)


@case(timeout=90, labels=("probes", "analyzers"))
def test_probes_fix_not_counted(t):
    """40000 faults from 40000 distinct stacks fill the counts map
    (32768 entries): faults --json says how many faults were not counted
    ("not_counted", before: only in the text's warning), as many as the
    warning says, and with the counted ones they make at least 40000."""
    need_bpf(t, "faults")
    exe = compile_c(t, "stacks", STACKS_C)
    doc, r = probe_json(t, ["faults", "--json", "-n", "1", "-c", exe], timeout=80)
    rep = doc["intervals"][-1]
    eq(rep["distinct_stacks"], COUNT_ENTRIES, "stacks counted (the map full)")
    lost = doc["not_counted"]
    check(lost > 0, "not_counted is 0")
    check("%d page faults not counted (the counts map was full)" % lost in r.stderr, r.stderr)
    check(rep["total"] + lost >= 40000, "counted %d + not counted %d" % (rep["total"], lost))


def kernel_thread():
    """The pid of a kernel thread, None if none is visible here."""
    for pid, fields in proc_stats():
        if int(fields[6]) & 0x00200000:  # PF_KTHREAD
            return pid
    return None


@case(timeout=30, labels=("probes", "analyzers"))
def test_probes_fix_bad_pid_and_top(t):
    """-p 0 is refused (before: it traced every process), -p of a kernel
    thread is refused with that reason (before: it ran, with no events), and
    -n past 2^64-1 is refused by the option parser, in every command
    (before: taken as 2^64-1): exit 2 each."""
    need_bpf(t, "mmapsnoop")
    r = t.run([t.heaptrail, "mmapsnoop", "-d", "100ms", "-p", "0"])
    eq(r.rc, 2, "-p 0: %s" % r.describe())
    eq(r.heaptrail_lines(), ["heaptrail: error: mmapsnoop: -p 0 is not a process id (leave -p "
                             "out to trace every process)"], "-p 0")
    r = t.run([t.heaptrail, "faults", "-d", "100ms", "-n", "99999999999999999999"])
    eq(r.rc, 2, "-n too large: %s" % r.describe())
    eq(r.heaptrail_lines(), ["heaptrail: error: -n: '99999999999999999999' is out of range "
                             "(at most 18446744073709551615)"], "-n too large")
    # (the option parser's rule, every command's: stats --at-peak N alike)
    r = t.run([t.heaptrail, "top", "-n", "18446744073709551616", "x.ht"])
    eq(r.rc, 2, "top -n 2^64: %s" % r.describe())
    eq(r.heaptrail_lines(), ["heaptrail: error: -n: '18446744073709551616' is out of range "
                             "(at most 18446744073709551615)"], "top -n 2^64")
    k = kernel_thread()
    if k is None:
        t.note("no kernel thread visible here: -p of a kernel thread not tried")
        return
    r = t.run([t.heaptrail, "ffaults", "-d", "100ms", "-p", str(k)])
    eq(r.rc, 2, "-p of a kernel thread: %s" % r.describe())
    eq(r.heaptrail_lines(), ["heaptrail: error: ffaults: %d is a kernel thread: it has no user "
                             "memory and makes no page faults or memory calls to trace" % k],
       "-p of a kernel thread")


# 300 pages of shared anonymous memory (MAP_SHARED | MAP_ANONYMOUS: the
# kernel backs it with a shmem file it names "dev/zero"), each written once.
SHARED_ANON_C = r"""
#include <sys/mman.h>

int main(void)
{
	char *p = mmap(0, 300 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	for (int i = 0; i < 300; i++)
		p[i * 4096] = 1;
	return 0;
}
"""


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_shared_anonymous(t):
    """Shared anonymous memory is anonymous: ffaults counted its 300
    faults on a file "dev/zero" (96% of the program's faults "on files"),
    mmapsnoop named that file for a MAP_ANONYMOUS call."""
    need_bpf(t, "ffaults")
    exe = compile_c(t, "sharedanon", SHARED_ANON_C)
    doc, r = probe_json(t, ["ffaults", "--json", "-n", "0", "-c", exe])
    rep = doc["intervals"][-1]
    files = {f["file"]: f["faults"] for f in rep["files"]}
    check("dev/zero" not in files, "faults on a file dev/zero: %r" % files)
    check(rep["anonymous"] >= 300, "anonymous faults %d < the 300 pages written"
          % rep["anonymous"])
    doc, r = probe_json(t, ["mmapsnoop", "--json", "-c", exe])
    shared = [e for e in doc["events"] if e.get("call") == "mmap"
              and e.get("size") == 300 * 4096]
    eq(len(shared), 1, "the program's mmap: %r" % doc["events"][-5:])
    check(not shared[0].get("file"), "a file for a MAP_ANONYMOUS mmap: %r" % shared[0])
