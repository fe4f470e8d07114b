"""`heaptrail attach` on busy processes and its -o trace: every call made
while attached is seen (the probes are armed only once all are in), no
block is blamed on --max-blocks, an existing trace at -o is replaced, and
a process's shared anonymous memory is not taken for a deleted file.
And `heaptrail live` on such traces: the callers of inlined allocation
wrappers, and how it ends on a signal.

The attach cases need BPF (root, BTF, uprobes): they skip with the reason
`heaptrail attach --check` gives when it cannot be used here."""

import json
import os
import re
import signal
import subprocess
import time

from cases_allocators import find_lib
from cases_attach import Attach, attach_until_exit, read_line, until_stacks_taken
from cases_live import Term, table_rows
from htlib import case, check, children, compile_c, eq, reap, skip
from htprobe import need_bpf

# Threads of malloc(64)/free pairs as fast as they can, each counting its
# own calls; "count" on stdin prints the calls made so far, "quit" ends it.
BUSY_C = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define NTHREADS 2
static long calls[NTHREADS];
static volatile int stop;
static void *loop(void *arg)
{
	long *n = arg;
	while (!stop) {
		void *p = malloc(64);
		free(p);
		__atomic_add_fetch(n, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}
int main(void)
{
	pthread_t th[NTHREADS];
	char line[64];
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, loop, &calls[i]);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin) && strcmp(line, "quit\n")) {
		long sum = 0;
		for (int i = 0; i < NTHREADS; i++)
			sum += __atomic_load_n(&calls[i], __ATOMIC_RELAXED);
		printf("calls %ld\n", sum);
	}
	stop = 1;
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	return 0;
}
"""


def detached_counts(err):
    """(allocation calls, traced, frees of traced blocks) of attach's last line."""
    m = re.search(r"detached from pid \d+ \(.*\): (\d+) allocation calls, (\d+) traced, "
                  r"(\d+) frees of traced blocks", err)
    check(m, "no 'detached' line: %r" % err)
    return tuple(int(x) for x in m.groups())


@case(timeout=180, labels=("probes", "analyzers"), locks=("bpf",))
def test_attach_busy_threads(t):
    """Eight attaches to a process whose two threads make malloc/free pairs
    as fast as they can: each sees every call the program counts between
    two of its own readings taken while attach traces (at least that many,
    less one a thread for a call begun before the probes were armed; the
    program's own stdio may add a few), and says nothing of blocks
    "not traced".  Before, each function's entry probe went in a few
    milliseconds before its return probe; a thread that entered malloc
    between the two had a call whose return was never seen, and every
    later call of it counted as nested in that one, never traced: 0
    allocation calls in about one attach in three, one thread's calls
    missing in others, and false "N blocks not traced (more than
    --max-blocks live)" warnings."""
    need_bpf(t, "attach")
    exe = compile_c(t, "busy", BUSY_C, ("-pthread",))
    p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=t.dir)

    def count():
        p.stdin.write(b"count\n")
        p.stdin.flush()
        line = read_line(p.stdout, 10, "busy's count")
        check(line.startswith("calls "), "busy said %r" % line)
        return int(line.split()[1])

    try:
        eq(read_line(p.stdout, 10, "ready"), "ready\n", "busy's first line")
        bad = []
        for run in range(8):
            a = Attach(t, p.pid, [])
            try:
                c0 = count()
                time.sleep(0.3)
                c1 = count()
                out, err = a.stop(signal.SIGINT)
            finally:
                a.kill()
            calls, traced, frees = detached_counts(err)
            made = c1 - c0
            check(made > 1000, "run %d: busy made only %d calls in 0.3 s" % (run, made))
            # (a thread preempted inside a call that began before the
            # probes were armed counts it after its first reading: one
            # call a thread at most)
            if calls + 2 < made or "not traced" in err:
                bad.append("run %d: %d allocation calls seen, %d made while tracing; %s" % (
                    run, calls, made, err.strip().splitlines()[-1]))
            check(traced <= calls, "run %d: traced %d > calls %d" % (run, traced, calls))
        check(not bad, "attaches that missed calls:\n" + "\n".join(bad))
        p.stdin.write(b"quit\n")
        p.stdin.flush()
        eq(p.wait(timeout=20), 0, "busy's exit status")
    finally:
        reap(p)


# On jemalloc: 100 blocks of 200 bytes freed by dallocx (jemalloc's own
# free, which attach does not probe), each address at once handed out
# again to a malloc(210) that is kept (both in the 224-byte size class).
UNSEEN_FREE_C = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void *keep[100];
__attribute__((noinline)) void *gone_site(void) { return malloc(200); }
__attribute__((noinline)) void *kept_site(void) { return malloc(210); }
int main(void)
{
	void (*dallocx)(void *, int) = (void (*)(void *, int))dlsym(RTLD_DEFAULT, "dallocx");
	char line[16];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!dallocx) {
		printf("no dallocx\n");
		return 1;
	}
	printf("ready\n");
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	int reused = 0;
	for (int i = 0; i < 100; i++) {
		void *p = gone_site();
		dallocx(p, 0);
		keep[i] = kept_site();
		reused += keep[i] == p;
	}
	printf("reused %d\n", reused);
	return 0;
}
"""


def by_function(entries, key="stack"):
    """{gone_site or kept_site: (bytes, blocks)} of report entries."""
    got = {}
    for e in entries:
        fn = next((f["function"] for f in e[key] if f.get("function") in
                   ("gone_site", "kept_site")), "?")
        b, n = got.get(fn, (0, 0))
        got[fn] = (b + e["bytes"], n + e["blocks"])
    return got


@case(timeout=120, labels=("probes", "analyzers"), locks=("bpf",))
def test_attach_unseen_free_reused(t):
    """A traced block freed by a function attach does not probe (jemalloc's
    dallocx), whose address the allocator hands out again at once (100
    times): the new block is traced and replaces the old one, a warning
    says how many frees went unseen, and the -o trace frees the old block
    where its address was reused, so that its leaks are the 100 kept
    blocks (21,000 bytes at kept_site).  Before, the new block was
    dropped, "100 blocks not traced (more than --max-blocks live)" blamed
    a table that held a few entries, and the 100 freed blocks were
    reported outstanding at gone_site."""
    need_bpf(t, "attach")
    lib = find_lib("jemalloc")
    exe = compile_c(t, "unseen", UNSEEN_FREE_C, ("-ldl",))
    env = dict(os.environ, LD_PRELOAD=lib)
    p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=t.dir, env=env)
    a = None
    trace = t.path("unseen.ht")
    try:
        eq(read_line(p.stdout, 10, "ready"), "ready\n", "unseen's first line")
        a = Attach(t, p.pid, ["--json", "-o", trace])
        p.stdin.write(b"go\n")
        p.stdin.flush()
        eq(read_line(p.stdout, 10, "reuses"), "reused 100\n", "addresses jemalloc reused")
        out, err = a.stop(signal.SIGINT)
        p.stdin.close()
        eq(p.wait(timeout=20), 0, "unseen's exit status")
    finally:
        if a:
            a.kill()
        reap(p)
    check("not traced" not in err, "blocks blamed on --max-blocks:\n" + err)
    check("heaptrail: warning: attach: 100 traced blocks were freed by calls the probes do "
          "not see (their addresses were handed out again): each counts as freed when its "
          "address was reused\n" in err, "the unseen frees' warning:\n" + err)
    eq(by_function(json.loads(out)["entries"]), {"kept_site": (21000, 100)},
       "attach's outstanding blocks")
    r = t.tool(["leaks", "--json", "--top", "100", trace])
    eq(r.rc, 0, "leaks of the -o trace:\n" + r.describe())
    eq(by_function(json.loads(r.stdout)["groups"]), {"kept_site": (21000, 100)},
       "the -o trace's leaks")


@case(timeout=120, labels=("probes", "analyzers"), locks=("bpf",))
def test_attach_output_replaces_trace(t):
    """attach -o writes a trace, so it may replace one (docs/output-files.md,
    as compact and convert do): two attaches to the same -o both succeed
    and the second trace, of "echo two", replaces the first's, of "echo
    one".  Before, the second one said "cannot write z.ht: it is a
    heaptrail trace, which this output would replace (the input named
    again by -o?)", exit status 1, though attach has no input."""
    need_bpf(t, "attach")
    out = t.path("z.ht")
    for word in ("one", "two"):
        r = t.run([t.heaptrail, "attach", "-o", out, "-c", "/bin/echo " + word], timeout=60)
        eq(r.rc, 0, "attach -o z.ht -c 'echo %s':\n%s" % (word, r.describe()))
        eq(r.stdout.splitlines()[0], word, "echo's output")
        s = t.stats(out)
        eq(s["command"], "/bin/echo " + word, "the trace's command after 'echo %s'" % word)
    eq(sorted(os.listdir(t.dir)).count("z.ht"), 1, "one trace")
    check(not [f for f in os.listdir(t.dir) if f.startswith("z.ht.")],
          "files left beside z.ht: %r" % os.listdir(t.dir))


# Shared anonymous memory ("/dev/zero (deleted)" in the map), SysV shared
# memory ("/SYSV00000000 (deleted)") and a memfd ("/memfd:htdata
# (deleted)"), then 10 blocks of 1000 bytes leaked at leak_site.
SHARED_MEM_C = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>
static void *keep[10];
__attribute__((noinline)) void leak_site(int i) { keep[i] = malloc(1000); }
int main(void)
{
	char line[16];
	char *z = mmap(0, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int id = shmget(IPC_PRIVATE, 1 << 16, IPC_CREAT | 0600);
	char *v = shmat(id, NULL, 0);
	shmctl(id, IPC_RMID, NULL);
	int fd = memfd_create("htdata", 0);
	if (z == MAP_FAILED || v == (void *)-1 || fd < 0 || ftruncate(fd, 1 << 16))
		return 2;
	char *m = mmap(0, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 2;
	z[0] = v[0] = m[0] = 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	for (int i = 0; i < 10; i++)
		leak_site(i);
	return 0;
}
"""


@case(timeout=120, labels=("probes", "analyzers"), locks=("bpf",))
def test_attach_shared_memory_not_modules(t):
    """A process with shared anonymous memory, SysV shared memory and a
    memfd mapped (the first is in every process under heaptrail record):
    attach -o takes none of them for a module, says nothing of deleted
    files, and leaks reads the trace without a warning, with the 10 blocks
    at leak_site.  Before, attach said "/dev/zero was deleted since pid N
    mapped it: its symbols were read through /proc/N/map_files" (and the
    same of /SYSV00000000 and /memfd:htdata), wrote them into the trace as
    modules, and leaks warned "/dev/zero: not a valid ELF file"."""
    need_bpf(t, "attach")
    exe = compile_c(t, "shmem", SHARED_MEM_C)
    trace = t.path("shmem.ht")
    pid, out, err = attach_until_exit(t, [exe], "shmem", ["-o", trace])
    err = err.decode()
    check("was deleted since" not in err and "/dev/zero" not in err,
          "attach took shared memory for a deleted file:\n" + err)
    with open(trace, "rb") as f:
        data = f.read()
    for name in (b"/dev/zero", b"/SYSV", b"/memfd:"):
        check(name not in data, "%s named in the trace" % name.decode())
    check(os.path.realpath(exe).encode() in data, "the program is not a module of the trace")
    r = t.tool(["leaks", "--json", trace])
    eq(r.rc, 0, "leaks:\n" + r.describe())
    eq(r.stderr, "", "leaks' warnings")
    groups = json.loads(r.stdout)["groups"]
    eq([(g["bytes"], g["blocks"], g["stack"][0]["function"]) for g in groups],
       [(10000, 10, "leak_site")], "leaks of the trace")


# make() is inlined in both of its callers; lines 5, 6 and 7 are those of
# make, cache_fill and session_open.
INLINED_C = r"""#include <stdlib.h>
#include <string.h>
static inline __attribute__((always_inline)) void *make(size_t n)
{
	void *p = malloc(n); memset(p, 0, n); return p;
}
__attribute__((noinline)) void cache_fill(void **v) { for (int i = 0; i < 1000; i++) v[i] = make(1000); }
__attribute__((noinline)) void session_open(void **v) { for (int i = 0; i < 10; i++) v[i] = make(100); }
int main(void)
{
	static void *a[1000], *b[10];
	cache_fill(a);
	session_open(b);
	return 0;
}
"""


@case(timeout=120, labels=("live",))
def test_live_inlined_callers(t):
    """live on a trace of blocks allocated through an always-inline
    wrapper (make) from two functions: the table opens make onto its two
    callers, cache_fill (1000 blocks, 977 KiB) and session_open (10
    blocks, 1000 B), as top shows them, and the `w` snapshot's stacks name
    them.  Before, each return address kept only its innermost inlined
    frame: make opened onto its callers' call sites in main, "main
    (inl.c:12)" and "main (inl.c:13)", and neither caller was anywhere
    (with both calls on one line of main, one row of 1010 blocks)."""
    exe = compile_c(t, "inl", INLINED_C, ("-O2", "-fno-omit-frame-pointer"))
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", t.path("inl.ht"), "--", exe],
          check_rc=0)
    r = t.run([t.heaptrail, "live", "--batch", "--keys", "\n", "inl.ht"], check_rc=0)
    rows = table_rows(r.stdout)
    check(rows and rows[0][0] == "- make", "make is not the first row, open:\n" + r.stdout)
    callers = []
    for label, cols in rows[1:]:
        if not label.startswith("+ "):
            break
        callers.append((label, cols[0], cols[1]))  # (no own bytes: total, blocks)
    eq(callers, [("+ cache_fill (inl.c:7)", "977 KiB", "1000"),
                 ("+ session_open (inl.c:8)", "1000 B", "10")], "make's callers (total, blocks)")
    os.mkdir(t.path("snap"))
    t.run([t.heaptrail, "live", "--batch", "--keys", "w", "--snapshot-dir", "snap", "inl.ht"],
          check_rc=0)
    files = os.listdir(t.path("snap"))
    eq(len(files), 1, "snapshots written")
    with open(t.path("snap", files[0])) as f:
        snap = f.read()
    for n, fn, line in ((1000, "cache_fill", 7), (10, "session_open", 8)):
        want = "%d bytes in %d blocks (%d allocations) at:\n    make (inl.c:5)\n    %s (inl.c:%d)\n" % (
            n * (1000 if n == 1000 else 100), n, n, fn, line)
        check(want in snap, "the snapshot has no %r:\n%s" % (want, snap))


@case(timeout=120, labels=("live",))
def test_live_dies_of_signal(t):
    """heaptrail live TRACE on a terminal, ended by Ctrl-C and by SIGTERM:
    it dies of the signal (status 130, 143: docs/output-files.md), with
    the terminal restored (out of the alternate screen, the shell's next
    line shown).  Before, ncurses' own handler restored the terminal and
    exited 1."""
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", t.path("s.ht"), "--",
           t.prog("grower"), "1", "1"], check_rc=0)
    for sig, status in (("C-c", 130), (signal.SIGTERM, 143)):
        # (the shell catches SIGINT, which Ctrl-C sends it too, so that it
        # lives on to say live's status; live gets the default action)
        term = Term(t, "trap : INT; %s live s.ht; echo LIVE-EXIT=$?" % t.heaptrail)
        try:
            term.wait_text("function / callers")
            if sig == "C-c":
                term.keys("C-c")
            else:
                sh = int(term.tmux("display-message", "-p", "-t", "s", "#{pane_pid}"))
                kids = children(sh)
                eq(len(kids), 1, "the shell's children")
                os.kill(kids[0], sig)
            # (the line may have scrolled off the screen)
            term.wait_history("LIVE-EXIT=", 20)
            screen = term.history()
            check("LIVE-EXIT=%d\n" % status in screen, "after %s:\n%s" % (sig, screen))
            eq(term.tmux("display-message", "-p", "-t", "s", "#{alternate_on}").strip(), "0",
               "the alternate screen after %s" % sig)
        finally:
            term.close()


@case(timeout=120, labels=("probes",))
def test_attach_count_last_report_matches_trace(t):
    """attach -c 'pipeline 8 ...' -o TRACE --json 0.5 2: the second (last)
    report is made once the probes are out and the ring read to its end,
    so that its outstanding bytes, blocks and events are the trace's live
    set at its end and its event count (it was made before, and disagreed
    with the trace by what came in meanwhile: 1421536 B against 1193434)."""
    need_bpf(t, "attach")
    out = t.path("iv.ht")
    r = t.run([t.heaptrail, "attach", "-c", "%s 8 5000000 /dev/null" % t.prog("pipeline"),
               "-o", out, "--json", "0.5", "2"], timeout=90)
    reps = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    eq(len(reps), 2, "two reports: " + r.describe())
    last = reps[-1]
    eq(last.get("stopped"), "2 reports made", "why it stopped (the command is killed then)")
    eq(last["final"], False, "the last of COUNT reports: final")
    s = t.stats(out)
    eq((last["outstanding_bytes"], last["outstanding_blocks"], last["events"]),
       (s["live_bytes_at_exit"], s["live_blocks_at_exit"], s["events"]),
       "the last report against the trace: (bytes, blocks, events)")


@case(timeout=240, labels=("probes", "order", "analyzers"), locks=("bpf",))
def test_attach_trace_order_exact_across_threads(t):
    """attach -o on blocks that cross threads and are realloc'd on the way
    (tests/progs/pipeline 8, relay chain 4), three runs each: the trace's
    order is exact (no unknown free, no address handed out while live, no
    order warning), its calls are the program's own and its peak is the
    program's own within a block a thread.  Before, a realloc's event was
    dated at its return only: glibc frees the old block inside the call,
    another thread's malloc could get that address and return first, and
    the trace showed 7 to 108 unknown frees (an order warning, peaks and
    leaks off).  Now the event carries the call's start, when the reader
    releases the old block (docs/FORMAT.md, event kinds)."""
    need_bpf(t, "attach")
    runs = [("pipeline", [t.prog("pipeline"), "8", "40000"], 9),
            ("relay", [t.prog("relay"), "chain", "4", "20000"], 5)]
    for name, argv, threads in runs:
        for i in range(3):
            out, own_path = t.path("%s%d.ht" % (name, i)), t.path("%s%d.json" % (name, i))
            r = t.run([t.heaptrail, "attach", "-o", out, "-c", " ".join(argv + [own_path])],
                      timeout=90)
            eq(r.rc, 0, "attach -c %s: status\n%s" % (name, r.describe()))
            with open(own_path) as f:
                own = json.load(f)
            s = t.stats(out)
            eq((s.get("order_exact"), s.get("order_events_concerned"), s["unknown_frees"],
                s.get("address_reuse_while_live")), (True, 0, 0, 0),
               "%s run %d: order_exact, events concerned, unknown frees, reuse while live" %
               (name, i))
            eq((s["calls"]["malloc"], s["calls"]["realloc"]), (own["malloc"], own["realloc"]),
               "%s run %d: the program's mallocs and reallocs" % (name, i))
            # (and glibc's frees of the DTVs of the stacks it drops at joins)
            check(own["free"] <= s["calls"]["free"] <= own["free"] + threads,
                  "%s run %d: frees %d, the program's %d" % (name, i, s["calls"]["free"],
                                                            own["free"]))
            r2 = t.tool(["stats", out])
            check("not exact" not in r2.stderr and "unknown free" not in r2.stderr,
                  "%s run %d: stats warns:\n%s" % (name, i, r2.stderr))
            # a block a thread either way (acct.h counts inside the
            # recorder's interval), and glibc's DTVs (a few hundred bytes
            # a thread) above
            slack = threads * 4096
            check(own["peak_live_bytes"] - slack <= s["peak_live_bytes"]
                  <= own["peak_live_bytes"] + slack + threads * 1024,
                  "%s run %d: peak %d, the program's own %d" % (
                      name, i, s["peak_live_bytes"], own["peak_live_bytes"]))


@case(timeout=120, labels=("probes",), locks=("bpf",))
def test_attach_realloc_race_counted(t):
    """attach -c on tests/progs/reallocrace (one arena, no tcache: a
    realloc that moves a block frees the chunk another thread's malloc
    takes next, and keeps): the final report's outstanding blocks and
    bytes are the trace's live set at exit, and its blocks the program's
    own count plus glibc's few.  Before, when the malloc was seen before
    the realloc's return (often, under uprobes), the realloc's release of
    its input removed the other thread's block from the report: 292 to
    513 blocks short a run, against a trace that was right."""
    need_bpf(t, "attach")
    out = t.path("race.ht")
    env = {"GLIBC_TUNABLES": "glibc.malloc.arena_max=1:glibc.malloc.tcache_count=0"}
    r = t.run([t.heaptrail, "attach", "-c", "%s 20000" % t.prog("reallocrace"), "-o", out,
               "--json"], env=env, timeout=90)
    eq(r.rc, 0, "attach: " + r.describe())
    reps = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    eq(len(reps), 1, "one report: " + r.describe())
    rep = reps[0]
    eq(rep["final"], True, "the final report")
    kept = re.search(r"^kept (\d+)$", r.stderr, re.M)
    check(kept, "the program's count: " + r.describe())
    kept = int(kept.group(1))
    s = t.stats(out)
    eq((s["unknown_frees"], s["calls"]["realloc"]), (0, 20000), "the trace: unknown frees, reallocs")
    eq((rep["outstanding_bytes"], rep["outstanding_blocks"], rep["events"]),
       (s["live_bytes_at_exit"], s["live_blocks_at_exit"], s["events"]),
       "the report against the trace: (bytes, blocks, events)")
    # the taker's blocks, its array of them, and glibc's own (a DTV a thread)
    check(kept + 1 <= rep["outstanding_blocks"] <= kept + 4,
          "outstanding blocks %d, the program keeps %d" % (rep["outstanding_blocks"], kept))


# N blocks of 64 bytes, each reallocated to 200 (a guard after each, so
# that the realloc moves it), all kept to the end; "kept N" on stderr.
REALLOC_KEEP_C = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
	long n = atol(argv[1]);
	void **keep = malloc(2 * n * sizeof(*keep));
	for (long i = 0; i < n; i++) {
		void *p = malloc(64);
		keep[2 * i + 1] = malloc(64);
		keep[2 * i] = realloc(p, 200);
	}
	fprintf(stderr, "kept %ld\n", 2 * n + 1);
	return keep[0] == NULL;
}
"""


@case(timeout=120, labels=("probes",), locks=("bpf",))
def test_attach_sample_realloc_unbiased(t):
    """attach -c --sample 10 on a program that makes 20,000 blocks and
    20,000 guards, reallocates each block once and keeps everything (40,001
    blocks with its array): the final estimate is the program's count
    within five standard deviations (sqrt(k(N-1)) = 600 blocks).  Before,
    a realloc of a block not drawn when it was made was drawn again, and
    the estimate read about 58,000 (every reallocated block nearly twice
    as likely to be traced)."""
    need_bpf(t, "attach")
    exe = compile_c(t, "rkeep", REALLOC_KEEP_C, ("-O2",))
    runs = []
    for _ in range(2):
        r = t.run([t.heaptrail, "attach", "-c", "%s 20000" % exe, "--sample", "10", "--json"],
                  timeout=90)
        eq(r.rc, 0, "attach: " + r.describe())
        rep = [json.loads(l) for l in r.stdout.splitlines() if l.strip()][-1]
        kept = int(re.search(r"^kept (\d+)$", r.stderr, re.M).group(1))
        runs.append((rep["outstanding_blocks"], kept))
    for est, kept in runs:
        # (and glibc's own few blocks)
        check(abs(est - kept) <= 5 * 600 + 10 * 5,
              "estimate %d, the program keeps %d (runs: %r)" % (est, kept, runs))


# Keeps 5000 blocks of 32 bytes; with "segv", dies of SIGSEGV after them;
# with "slow", makes a malloc/free pair every 50 ms, 100 times, first.
ATTACH_END_C = r"""
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "slow"))
		for (int i = 0; i < 100; i++) {
			free(malloc(64));
			usleep(50000);
		}
	void **k = malloc(5000 * sizeof(*k));
	for (int i = 0; i < 5000; i++)
		k[i] = malloc(32);
	if (argc > 1 && !strcmp(argv[1], "segv"))
		*(volatile int *)0 = 1;
	return k[0] == NULL;
}
"""


@case(timeout=120, labels=("probes",), locks=("bpf",))
def test_attach_trace_end_said(t):
    """What an attach -o trace lacks, and how its -c command ended, are in
    the trace and said: past --max-blocks 1024, the blocks not traced are
    the trace's dropped calls and stats warns of them (it read as whole,
    988 of 26,665 blocks live, with no word); a command that dies of
    SIGSEGV gives a trace that says so (it read "[finished]", "at exit");
    a command that -d ends is killed, and attach says so (exit 137 with no
    word before)."""
    need_bpf(t, "attach")
    exe = compile_c(t, "aend", ATTACH_END_C, ("-O2",))
    out = t.path("mb.ht")
    r = t.run([t.heaptrail, "attach", "-c", exe, "--max-blocks", "1024", "-o", out], timeout=90)
    eq(r.rc, 0, r.describe())
    m = re.search(r"(\d+) blocks not traced \(more than --max-blocks live\)", r.stderr)
    check(m, "attach's own warning:\n" + r.stderr)
    s = t.stats(out, dropped_ok=True)
    eq(s["dropped"], int(m.group(1)), "the trace's dropped calls: attach's count")
    r2 = t.tool(["stats", out])
    check("heaptrail attach did not trace %s calls of the program" % m.group(1) in r2.stderr,
          "stats' warning:\n" + r2.stderr)
    out = t.path("segv.ht")
    r = t.run([t.heaptrail, "attach", "-c", exe + " segv", "-o", out], timeout=90)
    eq(r.rc, 128 + 11, r.describe())
    s = t.stats(out)
    eq(s.get("killed_by"), "SIGSEGV", "the trace: the signal the command died of")
    r2 = t.tool(["leaks", out])
    check("died of a signal" in r2.stdout, "leaks' first line:\n" + r2.stdout)
    r = t.run([t.heaptrail, "attach", "-c", exe + " slow", "-d", "300ms"], timeout=90)
    eq(r.rc, 128 + 9, r.describe())
    check("ended the command (pid " in r.stderr and "with SIGKILL: tracing stopped before it "
          "exited" in r.stderr, "attach says it killed the command:\n" + r.stderr)


@case(timeout=60, labels=("probes",), locks=("bpf",))
def test_attach_unreadable_maps_said(t):
    """attach -p PID of a process whose /proc/PID/maps this user cannot
    read (pid 1 where it is so, as on the machine of the tests: a
    non-dumpable init): exit 1 with a line that says what could not be
    read and why.  It exited 1 with no message (probe H)."""
    need_bpf(t, "attach")
    try:
        with open("/proc/1/maps") as f:
            f.read(1)
        skip("/proc/1/maps is readable here: no process to try it on")
    except OSError as e:
        why = e.strerror
    r = t.run([t.heaptrail, "attach", "-p", "1", "-d", "1s"], timeout=30)
    eq(r.rc, 1, r.describe())
    eq(r.heaptrail_lines(), ["heaptrail: error: attach: cannot read /proc/1/maps: %s: its modules "
                             "are needed to find the allocator (another user's process, or one "
                             "this user may not inspect?)" % why], "the error")


# 2^K distinct allocation stacks: a binary tree of calls K deep, each leaf
# mallocs 16 bytes and keeps it; "ready", a line on stdin, the walk, exit 0.
TREE_C = r"""
#include <stdio.h>
#include <stdlib.h>
static void *volatile keep[1 << 17];
static int nkeep;
__attribute__((noinline)) static void leaf(void) { keep[nkeep++] = malloc(16); }
__attribute__((noinline)) static void walk(int d);
__attribute__((noinline)) static void left(int d) { walk(d - 1); __asm__ volatile(""); }
__attribute__((noinline)) static void right(int d) { walk(d - 1); __asm__ volatile(""); }
__attribute__((noinline)) static void walk(int d)
{
	if (!d) {
		leaf();
		return;
	}
	left(d);
	right(d);
	__asm__ volatile("");
}
int main(int argc, char **argv)
{
	char line[16];
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	walk(atoi(argv[1]));
	return nkeep == 1 << atoi(argv[1]) ? 0 : 1;
}
"""


@case(timeout=180, labels=("probes",), locks=("bpf",))
def test_attach_many_stacks(t):
    """2048 distinct stacks (a tree of calls 11 deep): 2048 rows of one
    block each, every stack taken.  The kernel's stack-trace map attach
    used refused a stack whose hash bucket another held: 137 of 2048 came
    out without a stack (1786 of 8192), under "stacks not taken (stack map
    full or unwinding failed)", and now and then leak_realloc's of the
    attachee's dozen (e2e.attach_end_time in CI).  Past the map's 65,536
    stacks (2^17 here) the rest are counted without a stack, said as such,
    and leaks on the -o trace says they were not taken, not to record with
    --stacks."""
    need_bpf(t, "attach")
    exe = compile_c(t, "tree", TREE_C, flags=["-O1", "-fno-omit-frame-pointer",
                                              "-fno-optimize-sibling-calls"])

    def once(k, args):
        pid, out, err = attach_until_exit(t, [exe, str(k)], "tree", args)
        return out.decode(), err.decode()

    out, err = until_stacks_taken(t, lambda: once(11, ["--json", "--top", "0"]))
    j = json.loads(out.splitlines()[-1])
    eq((j["stacks"], j["outstanding_blocks"], len(j["entries"])), (2048, 2048, 2048),
       "rows, blocks and entries of 2^11 stacks:\n" + err)
    eq(sorted({e["blocks"] for e in j["entries"]}), [1], "blocks per row")
    eq(sum(1 for e in j["entries"] if not e["stack"]), 0, "rows without a stack")
    check("not taken" not in err and "not kept" not in err, "stacks lost:\n" + err)

    out, err = until_stacks_taken(t, lambda: once(17, ["--json", "--top", "1", "-o",
                                                        t.path("full.ht")]))
    j = json.loads(out.splitlines()[-1])
    eq((j["stacks"], j["outstanding_blocks"]), (65537, 131072),
       "2^17 stacks: 65,536 and the row without a stack")
    eq((j["entries"][0]["stack"], j["entries"][0]["blocks"]), ([], 65536),
       "the largest row, of the stacks not kept")
    check("heaptrail: warning: attach: the stacks of 65536 allocations not kept: the stack map "
          "holds 65536 distinct stacks as the kernel walked them" in err, "the warning:\n" + err)
    r = t.tool(["leaks", "--top", "1", t.path("full.ht")])
    eq(r.rc, 0, r.describe())
    check("1048576 bytes in 65536 allocations from stack\n"
          "\t(no stack: not taken when they were recorded)\n" in r.stdout, r.stdout)
    r = t.tool(["top", "-n", "1", t.path("full.ht")])
    eq(r.rc, 0, r.describe())
    check("65536 blocks  [no stack: not taken when they were recorded]\n" in r.stdout, r.stdout)


# N malloc/free pairs (churn), then 1000 blocks of 100 bytes kept at
# site_leak; "ready", a line on stdin, the work, exit 0.
WRAP_C = r"""
#include <stdio.h>
#include <stdlib.h>
static void *volatile sink;
static void *keep[1000];
__attribute__((noinline)) static void churn(int n)
{
	for (int i = 0; i < n; i++) {
		void *p = malloc(32);
		sink = p;
		free(p);
	}
}
__attribute__((noinline)) static void site_leak(void)
{
	for (int i = 0; i < 1000; i++)
		keep[i] = malloc(100);
	sink = keep[999];
}
int main(int argc, char **argv)
{
	char line[16];
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	churn(atoi(argv[1]));
	site_leak();
	return 0;
}
"""


@case(timeout=120, labels=("probes",), locks=("bpf",))
def test_attach_stacks_after_ring_wraps(t):
    """200,000 malloc/free pairs, more records than the 16 MiB ring holds
    (174,762), then 1000 blocks at site_leak: all 1000 at site_leak, none
    without a stack.  The BPF side set a record's stack_error only when the
    stack failed, and the ring's records are not zeroed: once the ring had
    wrapped, a record kept a free's, and half the blocks showed without a
    stack, with no warning (probe Z)."""
    need_bpf(t, "attach")
    exe = compile_c(t, "wrap", WRAP_C, flags=["-O1", "-fno-omit-frame-pointer"])

    def once():
        pid, out, err = attach_until_exit(t, [exe, "200000"], "wrap", ["--json", "--top", "0"])
        return out.decode(), err.decode()
    out, err = until_stacks_taken(t, once)
    j = json.loads(out.splitlines()[-1])
    rows = {(e["stack"][0]["function"] if e["stack"] else "[no stack]"): e["blocks"]
            for e in j["entries"]}
    eq(rows, {"site_leak": 1000}, "outstanding blocks by innermost function:\n" + err)


@case(timeout=120, labels=("probes",), locks=("bpf",))
def test_attach_stdout_closed(t):
    """attach -o T 0.3 | head -c 20: the reader of stdout gone, attach
    stops as an interrupt does, the -o trace made (exit 1: it could not
    write its report).  SIGPIPE killed it (exit 141), which left only its
    temporary (probe Z)."""
    need_bpf(t, "attach")
    p = subprocess.Popen(["sleep", "60"], cwd=t.dir)
    try:
        trace = t.path("pipe.ht")
        a = subprocess.Popen([t.heaptrail, "attach", "-p", str(p.pid), "-o", trace, "-d", "10s",
                              "0.3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=t.base_env(), cwd=t.dir)
        first = a.stdout.read(20)
        a.stdout.close()
        err = a.stderr.read().decode()
        rc = a.wait(timeout=60)
    finally:
        reap(p)
    check(first, "no report before the pipe was closed")
    eq(rc, 1, "attach's exit status:\n" + err)
    check("(interrupted (Broken pipe))" in err and "cannot write to standard output" in err,
          "attach's stderr:\n" + err)
    eq(sorted(os.listdir(t.dir)).count("pipe.ht"), 1, "the trace: %r" % os.listdir(t.dir))
    eq([f for f in os.listdir(t.dir) if f.startswith("pipe.ht.tmp")], [], "temporaries left")
    eq(t.stats(trace)["detached"], True, "stats --json detached")
