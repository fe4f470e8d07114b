"""The recorder and `record` around the edges of a process: a C++ new that
runs out of memory on another allocator (its new-handler and bad_alloc),
the errno of aligned_alloc there, a failed exec, a dlmopen'd namespace, the
last image untraced while its children wrote traces, a program with file
capabilities."""

import os
import shutil

from htlib import case, check, compile_c, eq, fail, skip, which

LIBDIR = "/usr/lib/x86_64-linux-gnu"
ALLOCATORS = {"jemalloc": "libjemalloc.so.2", "tcmalloc": "libtcmalloc_minimal.so.4"}


def allocator(name):
    p = os.path.join(LIBDIR, ALLOCATORS[name])
    if not os.path.exists(p):
        skip("%s is not installed (scripts/deps.sh)" % ALLOCATORS[name])
    return p


def live_at_end(evs):
    """The blocks a dump's malloc-family events leave live: {ptr: size}."""
    live = {}
    for e in evs:
        if e.freed_ptr():
            live.pop(e.freed_ptr(), None)
        if e.kind in ("malloc", "calloc") and e.result_ptr():
            live[e.result_ptr()] = e.args[0]
    return live


def freed_sizes(evs):
    """The sizes of the blocks a dump's free events give back, in order."""
    live, out = {}, []
    for e in evs:
        if e.freed_ptr() and e.freed_ptr() in live:
            out.append(live.pop(e.freed_ptr()))
        if e.kind in ("malloc", "calloc") and e.result_ptr():
            live[e.result_ptr()] = e.args[0]
    return out


# A new-handler that frees a reserve and notes it (strdup), then throws
# bad_alloc when called again; a new[] too large for any allocator, caught;
# a nothrow new[] of the same, whose handler's bad_alloc the operator
# catches itself.  Every block of the program's is freed but the first
# note (the second reserve's handler writes a second one) and stdout's
# buffer.
NEW_HANDLER = r"""
#include <new>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
static char *reserve, *note;
static int calls;
static void on_oom()
{
	calls++;
	if (reserve) {
		free(reserve);
		reserve = nullptr;
		note = strdup("ran out of memory, reserve released");
		return;
	}
	throw std::bad_alloc();
}
int main()
{
	reserve = (char *)malloc(1 << 20);
	std::set_new_handler(on_oom);
	if (std::get_new_handler() != on_oom)
		return 3;
	try {
		char *p = new char[SIZE_MAX / 4];
		printf("%p\n", (void *)p);
	} catch (const std::bad_alloc &) {
		printf("caught: %d\n", calls);
	}
	reserve = (char *)malloc(1 << 20);
	char *q = new (std::nothrow) char[SIZE_MAX / 4];
	printf("nothrow: %d %d\n", q == nullptr, calls);
	free(note);
	if (std::set_new_handler(nullptr) != on_oom)
		return 4;
	return 0;
}
"""


@case(timeout=120, labels=("analyzers",))
def test_cxx_new_handler_other_allocator(t):
    """A C++ operator new of jemalloc or tcmalloc that runs out of memory
    calls the program's new-handler and throws bad_alloc: what the handler
    does (free the reserve, strdup a note) and the exception object are the
    program's, recorded as with glibc's allocator.  Before, the operator's
    guard hid them: the freed reserve stayed live at exit (1 MiB leaked by
    the trace's account) and the exceptions' frees were unknown frees.
    The program still sees its own handler (std::get_new_handler and
    set_new_handler's answer)."""
    exe = compile_c(t, "nh", NEW_HANDLER, cxx=True)
    want_out = "caught: 2\nnothrow: 1 4\n"
    runs = [("glibc", None)] + [(n, allocator(n)) for n in sorted(ALLOCATORS)]
    for name, lib in runs:
        out = t.path(name + ".ht")
        argv = ["env", "LD_PRELOAD=" + lib, exe] if lib else [exe]
        r = t.record(out, argv)
        eq(r.stdout, want_out, name + ": the program's output")
        s = t.stats(out)
        eq(s["unknown_frees"], 0, name + ": unknown frees (the exception objects' frees)")
        evs = t.dump(out)
        live = sorted(live_at_end(evs).values())
        eq(live.count(1 << 20), 0, name + ": reserves live at exit (%r)" % live)
        eq(live.count(36), 1, name + ": notes live at exit, the first one (%r)" % live)
        eq(live.count(4096), 1, name + ": stdout's buffer (%r)" % live)
        notes = [e for e in evs if e.kind == "malloc" and e.args[0] == 36]
        eq(len(notes), 2, name + ": the handler's strdup, once a reserve")
        eq(freed_sizes(evs).count(1 << 20), 2, name + ": the handler's free of each reserve")


# aligned_alloc and posix_memalign where they fail: their return values and
# errno, printed as the program sees them
ALIGNED_ERRNO = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
int main(void)
{
	size_t huge = SIZE_MAX - 100;
	void *p = (void *)0x1234;
	errno = 0;
	int r = posix_memalign(&p, 64, huge);
	printf("posix_memalign huge: r=%d errno=%d unchanged=%d\n", r, errno, p == (void *)0x1234);
	errno = 0;
	r = posix_memalign(&p, 3, 100);
	printf("posix_memalign align 3: r=%d errno=%d\n", r, errno);
	errno = 0;
	void *q = aligned_alloc(4096, huge);
	printf("aligned_alloc huge: null=%d errno=%d\n", q == NULL, errno);
	errno = 0;
	q = aligned_alloc(3, 100);
	printf("aligned_alloc align 3: null=%d errno=%d\n", q == NULL, errno);
	free(q);
	errno = 0;
	q = memalign(64, huge);
	printf("memalign huge: null=%d errno=%d\n", q == NULL, errno);
	errno = 0;
	q = aligned_alloc(64, 100);
	printf("aligned_alloc(64, 100): null=%d errno=%d\n", q == NULL, errno);
	free(q);
	return 0;
}
"""


@case(timeout=90, labels=("analyzers",))
def test_aligned_alloc_errno_other_allocator(t):
    """On jemalloc and tcmalloc, aligned_alloc and posix_memalign traced
    return and set errno as they do untraced: the calls go to the
    allocator's own aligned_alloc and posix_memalign, not its memalign.
    Before, jemalloc's aligned_alloc(3, 100) and aligned_alloc(4096,
    SIZE_MAX - 100) left errno 0 when traced (22 and 12 untraced)."""
    exe = compile_c(t, "pm", ALIGNED_ERRNO)
    for name in [None] + sorted(ALLOCATORS):
        env = {"LD_PRELOAD": allocator(name)} if name else None
        plain = t.run([exe], env=env, check_rc=0).stdout
        out = t.path("%s.ht" % (name or "glibc"))
        argv = ["env", "LD_PRELOAD=" + allocator(name), exe] if name else [exe]
        r = t.record(out, argv)
        eq(r.stdout, plain, "%s: traced against untraced" % (name or "glibc"))
        if name == "jemalloc":
            check("aligned_alloc align 3: null=1 errno=22\n" in plain and
                  "aligned_alloc huge: null=1 errno=12\n" in plain,
                  "jemalloc's own aligned_alloc checks, untraced:\n" + plain)
        # the trace has the calls, failed as the program saw them
        evs = [e for e in t.dump(out) if e.kind == "aligned_alloc"]
        eq([e.args[:2] for e in evs], [[4096, (1 << 64) - 101], [3, 100], [64, 100]],
           "aligned_alloc events")
        eq(evs[0].result_ptr(), 0, "the failed aligned_alloc")


EXEC_FAILS = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
int main(int argc, char **argv)
{
	char *a[] = {"nothere", NULL};
	for (int i = 0; i < 10; i++)
		free(malloc(32));
	int r = execve("./nothere", a, environ);
	printf("execve %d %s\n", r, strerrorname_np(errno));
	r = execvp("nothere-either", a);
	printf("execvp %d %s\n", r, strerrorname_np(errno));
	r = execv(argv[1], a); /* a file that is not executable */
	printf("execv %d %s\n", r, strerrorname_np(errno));
	for (int i = 0; i < 10; i++)
		free(malloc(48));
	/* a fork child that execs before any call of its own (its exec
	 * event waits for the outcome: record --follow-exec) */
	pid_t pid = fork();
	if (pid == 0) {
		execv("./nothere", a);
		_exit(errno == ENOENT ? 7 : 1);
	}
	int st;
	waitpid(pid, &st, 0);
	printf("child %d\n", WEXITSTATUS(st));
	return 0;
}
"""


@case(timeout=90)
def test_exec_failed_recorded(t):
    """A failed exec is followed in the trace by its outcome: a second exec
    event whose path is "(failed: ENOENT)" (the errno's name), and the
    image's events go on after it; a fork child that execs before any call
    of its own records both when the exec fails.  Before, a failed exec
    looked exactly like one that succeeded.  Readers that do not know the
    outcome read it as an exec event (the base build's dump reads the
    trace whole: checked by hand)."""
    exe = compile_c(t, "ex", EXEC_FAILS)
    noexec = t.path("ex.c")
    out = t.path("ex.ht")
    r = t.run([t.heaptrail, "record", "--follow-exec", "-o", out, "--", exe, noexec],
              check_rc=0, cwd=t.dir)
    eq(r.stdout, "execve -1 ENOENT\nexecvp -1 ENOENT\nexecv -1 EACCES\nchild 7\n",
       "the program's output")
    evs = t.dump(out)
    execs = [e.fields["path"] for e in evs if e.kind == "exec"]
    eq(execs, ["./nothere", "(failed: ENOENT)", "nothere-either", "(failed: ENOENT)",
               noexec, "(failed: EACCES)"], "exec events")
    # the image goes on: its mallocs of 48 bytes come after the last outcome
    last = max(i for i, e in enumerate(evs) if e.kind == "exec")
    eq(sum(1 for e in evs[last:] if e.kind == "malloc" and e.args[0] == 48), 10,
       "the mallocs after the failed execs")
    kids = [f for f in os.listdir(t.dir) if f.startswith("ex.ht.") and f[6:].isdigit()]
    eq(len(kids), 1, "the fork child's trace (%r)" % os.listdir(t.dir))
    kid = [e.fields["path"] for e in t.dump(t.path(kids[0])) if e.kind == "exec"]
    eq(kid, ["./nothere", "(failed: ENOENT)"], "the fork child's exec events")
    # JSON: the same path
    j = t.tool(["dump", "--json", "--kind", "exec", out])
    eq(j.rc, 0, j.describe())
    check('"path":"(failed: EACCES)"' in j.stdout, "dump --json:\n" + j.stdout)


# Two threads allocate while the main thread vforks 200 children that each
# exec a missing file and _exit: a vfork child runs on the parent's thread,
# with its buffer and the file the parent's writer writes.
VFORK_EXEC_FAILS = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void *churn(void *a)
{
	(void)a;
	for (int i = 0; i < 200000; i++) {
		void *volatile p = malloc(64 + i % 512);
		free(p);
	}
	return NULL;
}
int main(void)
{
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, churn, NULL);
	int failed = 0;
	for (int i = 0; i < 200; i++) {
		pid_t pid = vfork();
		if (pid == 0) {
			char *argv[] = {"nothere", NULL};
			execv("./nothere", argv);
			_exit(127);
		}
		int st;
		waitpid(pid, &st, 0);
		failed += WIFEXITED(st) && WEXITSTATUS(st) == 127;
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	printf("%d\n", failed);
	return 0;
}
"""


@case(timeout=90)
def test_vfork_exec_failed_leaves_parent_alone(t):
    """vfork children whose exec fails record nothing (the outcome of a
    failed exec is the exec'ing process's own): the parent's trace is
    whole, with its 400,000 mallocs (and stdout's buffer) and no exec event.  (The first version
    of the outcome record wrote it from the vfork child into the parent's
    buffer and file, beside the parent's writer: python3's test_subprocess
    under record left a damaged trace, exit 125.)"""
    exe = compile_c(t, "vforkfail", VFORK_EXEC_FAILS, flags=("-pthread",))
    out = t.path("vf.ht")
    r = t.record(out, [exe], cwd=t.dir)
    eq(r.stdout, "200\n", "children whose exec failed")
    s = t.stats(out)
    eq(s["calls"]["malloc"], 400001, "mallocs (and stdout's buffer)")
    eq(t.tool(["stats", "-q", out]).stderr, "", "stats' warnings")
    eq([e for e in t.dump(out) if e.kind == "exec"], [], "exec events in the parent's trace")


DLMOPEN = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
	for (int round = 0; round < 2; round++) {
		void *h = dlmopen(LM_ID_NEWLM, argv[1], RTLD_NOW);
		if (!h) {
			printf("dlmopen: %s\n", dlerror());
			return 1;
		}
		void *(*la)(size_t) = (void *(*)(size_t))dlsym(h, "lib_alloc");
		void (*lf)(void *) = (void (*)(void *))dlsym(h, "lib_free");
		for (int i = 0; i < 100; i++)
			lf(la(4321));
	}
	void *same = dlmopen(LM_ID_BASE, "libm.so.6", RTLD_NOW);
	for (int i = 0; i < 100; i++)
		free(malloc(60));
	printf("base: %d\n", same != NULL);
	return 0;
}
"""
DLMOPEN_LIB = r"""
#include <stdlib.h>
void *lib_alloc(size_t n) { return malloc(n); }
void lib_free(void *p) { free(p); }
"""


@case(timeout=60)
def test_dlmopen_namespace_noted(t):
    """A library dlmopen'd into a new link-map namespace calls a C library
    of its own, which the recorder cannot reach: the recorder says so once,
    in one line naming the library (before: its 100 allocations and frees
    were missing without a word); a dlmopen into the program's own
    namespace says nothing, and the program's calls are recorded.  The
    trace's header says it (HT_FILE_F_NAMESPACE): every reader warns, and
    stats' JSON has untraced_namespace."""
    lib = compile_c(t, "libns.so", DLMOPEN_LIB, flags=("-shared", "-fPIC"))
    exe = compile_c(t, "dlm", DLMOPEN, flags=("-ldl",))
    out = t.path("dlm.ht")
    r = t.record(out, [exe, lib])
    eq(r.stdout, "base: 1\n", "the program's output")
    lines = [l for l in r.heaptrail_lines() if out not in l]
    eq(lines, ["heaptrail: dlmopen() loads %s in a link-map namespace of its own, with a C "
               "library of its own: the calls made in it (malloc, free, mmap...) are not "
               "recorded" % lib], "the recorder's line")
    evs = t.dump(out)
    eq(sum(1 for e in evs if e.kind == "malloc" and e.args[0] == 60), 100, "the program's mallocs")
    eq(sum(1 for e in evs if e.kind == "malloc" and e.args[0] == 4321), 0,
       "the namespace's mallocs (not recorded: said)")
    # the trace says it too (HT_FILE_F_NAMESPACE), to every reader, and
    # stats' JSON (before: the figures missed those calls without a word)
    r = t.tool(["stats", out])
    eq(r.stderr, "heaptrail: warning: %s: the program loaded a library with dlmopen() into a "
       "link-map namespace of its own: the calls made there (malloc, free, mmap...) went to "
       "that namespace's C library and are not in the trace; figures miss them\n" % out,
       "stats' warning")
    eq(t.stats(out)["untraced_namespace"], True, "stats --json untraced_namespace")
    plain = t.path("plain.ht")
    t.record(plain, [t.prog("oneline")])
    eq(t.stats(plain)["untraced_namespace"], False, "untraced_namespace of a plain trace")


STATIC_EXIT = r"""
#include <stdio.h>
int main(void) { fprintf(stderr, "tool: no such applet\n"); return %d; }
"""
KID = r"""
#include <stdlib.h>
int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	void *volatile p;
	for (int i = 0; i < n; i++) {
		p = malloc(32 + i % 100);
		free(p);
	}
	p = malloc(1000); /* left */
	return 0;
}
"""


def static_prog(t, name, status):
    gcc = which("gcc")
    if not gcc:
        skip("gcc is not installed")
    src = t.path(name + ".c")
    with open(src, "w") as f:
        f.write(STATIC_EXIT % status)
    exe = t.path(name)
    if t.run([gcc, "-static", "-o", exe, src]).rc != 0:
        skip("gcc cannot link statically here (libc6-dev's libc.a)")
    return exe


@case(timeout=120)
def test_untraced_last_image_children(t):
    """A shell that runs a traced child, then execs a static program that
    exits 127 (or 3): the program started, so record does not take the 127
    for a command that could not run.  The traces the run wrote (the
    shell's image before the exec, its fork, the child's) get the end step
    (compacted: --zstd-level=0) and the damage check, and one line names
    them.  Before, with 127 record said nothing and left the 300000-pair
    child trace raw; with 3 it named only OUTPUT.exec1 and left them
    raw too."""
    kid = compile_c(t, "kid", KID)
    for status in (127, 3):
        st = static_prog(t, "st%d" % status, status)
        out = t.path("w%d.ht" % status)
        r = t.run([t.heaptrail, "record", "--zstd-level=0", "--follow-exec", "-o", out, "--",
                   "bash", "-c", "%s 300000; exec %s" % (kid, st)])
        eq(r.rc, status, "record's exit status: the program's\n" + r.describe())
        eq(r.stderr.count("tool: no such applet"), 1, "the program's stderr")
        traces = sorted(f for f in os.listdir(t.dir) if f.startswith("w%d.ht." % status))
        eq(len(traces), 3, "traces of the run (%r)" % traces)
        lines = r.heaptrail_lines()
        eq(len(lines), 1, "one 'heaptrail:' line:\n" + r.describe())
        check(lines[0].startswith("heaptrail: bash exec'd a program that was not traced, so "
                                  "nothing was written to %s; the traces of its images before "
                                  "that exec are %s.exec1 and on, and the run wrote 3 traces "
                                  "of child processes and earlier exec images: " % (out, out)),
              lines[0])
        for f in traces:
            check("%s/%s (" % (t.dir, f) in lines[0], "%s is not named: %s" % (f, lines[0]))
        big = [f for f in traces if t.stats(t.path(f))["events"] > 600000]
        eq(len(big), 1, "the child's trace")
        size = os.path.getsize(t.path(big[0]))
        check(size < 200000, "%s was left raw (%d bytes): no end step" % (big[0], size))
    # a command that cannot be run still says so alone, with 127 and 126
    r = t.run([t.heaptrail, "record", "-o", t.path("nx.ht"), "--", t.path("nothere")])
    eq((r.rc, r.heaptrail_lines()), (127, ["heaptrail: cannot run '%s': No such file or "
                                           "directory" % t.path("nothere")]), r.describe())
    r = t.run([t.heaptrail, "record", "-o", t.path("nx.ht"), "--", t.path("kid.c")])
    eq((r.rc, r.heaptrail_lines()), (126, ["heaptrail: cannot run '%s': Permission denied"
                                           % t.path("kid.c")]), r.describe())


@case(timeout=60)
def test_file_capabilities_reason(t):
    """A program with file capabilities (setcap) run by a user other than
    root runs in secure mode, without LD_PRELOAD: record says so (before:
    the guess 'statically linked, or setuid, or the path is not
    writable?').  Needs root and setcap, to give the file its capability
    and run record as nobody."""
    setcap = which("setcap", ("/usr/sbin/setcap", "/sbin/setcap"))
    setpriv = which("setpriv")
    if os.geteuid() != 0 or not setcap or not setpriv:
        skip("needs root, setcap and setpriv")
    exe = compile_c(t, "capprog", "#include <stdlib.h>\nint main(void) { free(malloc(9)); "
                                  "return 0; }\n")
    if t.run([setcap, "cap_net_raw+ep", exe]).rc != 0:
        skip("setcap cannot set a capability here (file system without xattrs?)")
    os.chmod(t.dir, 0o777)
    nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    if t.run(nobody + [t.heaptrail, "--version"]).rc != 0:
        skip("user 65534 cannot run %s" % t.heaptrail)
    out = t.path("cap.ht")
    r = t.run(nobody + [t.heaptrail, "record", "-o", out, "--", exe], check_rc=0)
    eq(r.heaptrail_lines(), ["heaptrail: %s wrote no trace to %s (it has file capabilities "
                             "(setcap), and the loader ignores LD_PRELOAD in such a program "
                             "run by a user other than root, as in a setuid one)" % (exe, out)],
       "record's line")
    # root is traced (no secure mode for it)
    t.record(t.path("root.ht"), [exe])
