"""record where an exec chain meets what earlier runs left: this run's
image traces named when the last image is untraced, an image's trace that
could not be renamed at its exec, shell stubs in the summary, and a low
limit of open files.  Each case builds what it needs (gcc, a static
program where it must)."""
import os

from cases_process_fixes import KID, static_prog
from htlib import case, check, children, comm, compile_c, eq


@case(timeout=120)
def test_untraced_exec_second_run(t):
    """Two records of one chain (bash runs a traced child, then execs a
    static program) onto one OUTPUT: the second run's images are
    OUTPUT.exec1.2 on (the first run's OUTPUT.exec1 stays), and its line
    names OUTPUT.exec1.2, not the first run's OUTPUT.exec1."""
    kid = compile_c(t, "kid", KID)
    st = static_prog(t, "st", 3)
    out = t.path("w.ht")
    for run in (1, 2):
        r = t.run([t.heaptrail, "record", "-o", out, "--", "bash", "-c",
                   "%s 1000; exec %s" % (kid, st)])
        eq(r.rc, 3, "run %d: the program's status\n%s" % (run, r.describe()))
        lines = r.heaptrail_lines()
        eq(len(lines), 1, "run %d: one 'heaptrail:' line:\n%s" % (run, r.describe()))
        first = out + (".exec1" if run == 1 else ".exec1.2")
        check(lines[0].startswith(
            "heaptrail: bash exec'd a program that was not traced, so nothing was written to "
            "%s; the traces of its images before that exec are %s and on, and the run wrote "
            % (out, first)), "run %d: %s" % (run, lines[0]))
        check(lines[0].endswith("(see 'heaptrail stats %s')" % first),
              "run %d: the trace to look at: %s" % (run, lines[0]))
        check("%s (bash" % first in lines[0], "run %d: %s listed: %s" % (run, first, lines[0]))
        if run == 2:
            check(" %s.exec1 (" % out not in lines[0],
                  "the first run's trace named as this run's: " + lines[0])
    eq(t.stats(out + ".exec1.2")["complete"], True, "the second run's image trace")


@case(timeout=120)
def test_exec_rename_failed_old_named(t):
    """The image's trace cannot be renamed at its exec (every name from
    OUTPUT.exec1 to OUTPUT.exec1.999 taken): it stays at OUTPUT, which the
    next image keeps as OUTPUT.old; record's summary names OUTPUT.old with
    its command (it was named nowhere), and it reads whole."""
    out = t.path("x.ht")
    for k in range(1, 1000):
        open(out + (".exec1" if k == 1 else ".exec1.%d" % k), "w").close()
    r = t.run([t.heaptrail, "record", "-o", out, "--", t.prog("execer"), "parent"])
    eq(r.rc, 0, r.describe())
    lines = r.heaptrail_lines()
    summary = [l for l in lines if l.startswith("heaptrail: wrote ")]
    eq(len(summary), 1, "the summary:\n" + r.describe())
    check("%s.old (execer parent)" % out in summary[0], "OUTPUT.old named: " + summary[0])
    s = t.stats(out + ".old")
    eq((s["complete"], s["calls"]["malloc"]), (True, 4), "the first image's trace")
    eq(t.stats(out)["calls"]["malloc"], 6, "the second image's trace")


@case(timeout=120)
def test_summary_marks_exec_stubs(t):
    """A shell's fork children that allocate before they exec leave stub
    traces (their calls, then the exec): the summary marks each with the
    program it exec'd, `[exec'd sort, untraced]` (`[exec'd sort]` with
    --follow-exec, where sort writes a trace of its own), and not a forked
    child that did its own work (a subshell running echo)."""
    out = t.path("s.ht")
    r = t.run([t.heaptrail, "record", "-o", out, "--", "bash", "-c",
               "sort /etc/passwd >/dev/null; echo hi | tr h H"])
    eq(r.rc, 0, r.describe())
    line = [l for l in r.heaptrail_lines() if l.startswith("heaptrail: wrote ")]
    eq(len(line), 1, r.describe())
    check(line[0].count("[exec'd sort, untraced]") == 1 and
          line[0].count("[exec'd tr, untraced]") == 1, "stubs marked: " + line[0])
    eq(line[0].count("[exec'd"), 2, "only the stubs marked: " + line[0])
    out = t.path("f.ht")
    r = t.run([t.heaptrail, "record", "--follow-exec", "-o", out, "--", "bash", "-c",
               "sort /etc/passwd >/dev/null; true"])
    eq(r.rc, 0, r.describe())
    line = [l for l in r.heaptrail_lines() if l.startswith("heaptrail: wrote ")][0]
    check("[exec'd sort]" in line and "untraced" not in line, "--follow-exec: " + line)
    check("(sort /etc/passwd)" in line, "sort's own trace: " + line)


@case(timeout=120)
def test_low_fd_limit_children_named(t):
    """With `ulimit -n` 5 or 6 the fork child's trace is named in the
    summary as with any limit (it was left out silently: record held the
    trace, its directory watch and the listing's two files at once)."""
    for n in (5, 6):
        out = t.path("u%d.ht" % n)
        r = t.run(["bash", "-c", 'ulimit -n %d; exec "$@"' % n, "sh", t.heaptrail, "record",
                   "-o", out, "--", t.prog("forker")])
        eq(r.rc, 0, "ulimit -n %d: %s" % (n, r.describe()))
        child = int(r.stdout.split("child: ")[1].split()[0])
        line = [l for l in r.heaptrail_lines() if l.startswith("heaptrail: wrote ")]
        eq(len(line), 1, "ulimit -n %d: %s" % (n, r.describe()))
        check("and 1 trace of child processes and earlier exec images: %s.%d (forker)"
              % (out, child) in line[0], "ulimit -n %d: the child's trace: %s" % (n, line[0]))
        eq(t.stats("%s.%d" % (out, child))["calls"]["malloc"], 7, "the child's trace")


@case(timeout=120)
def test_low_fd_limit_end_step_says_limit(t):
    """At `ulimit -n 5` the end step of `record --compact` has no
    descriptor left to read its rewrite back (the input, the rewrite and
    the read-back take three): its warning names the limit, as record's
    other lines at the limit do (probe T: "cannot open: Too many open
    files" alone), and the traces are left as they were, readable."""
    out = t.path("c5.ht")
    r = t.run(["bash", "-c", 'ulimit -n 5; exec "$@"', "sh", t.heaptrail, "record", "--compact",
               "-o", out, "--", t.prog("forker")])
    eq(r.rc, 0, r.describe())
    warn = [l for l in r.heaptrail_lines() if "could not compact the trace" in l]
    check(warn and all("the limit of open files (ulimit -n) is 5" in l for l in warn),
          "the end step's warnings:\n%s" % r.stderr)
    eq(t.stats(out)["calls"]["malloc"], 15, "the program's trace, left as it was")


FULL_FDS_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void *volatile sink;
int main(void)
{
	sink = malloc(10);
	free(sink);
	while (open("/dev/null", O_RDONLY) >= 0)
		;
	pid_t p = fork();
	if (p == 0) {
		for (int i = 0; i < 5; i++) {
			sink = malloc(100);
			free(sink);
		}
		_exit(0);
	}
	int st;
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
"""


@case(timeout=120)
def test_fork_child_at_fd_limit_named(t):
    """A program that uses every descriptor its limit allows, then forks:
    the child, at its first call, cannot open /proc/self/cmdline for its
    trace's header, which named no command (probe T: `command     (pid
    N)`); the parent's command, read before the fork, is the child's."""
    exe = compile_c(t, "fullfds", FULL_FDS_C)
    out = t.path("full.ht")
    r = t.run(["bash", "-c", 'ulimit -n 32; exec "$@"', "sh", t.heaptrail, "record", "-q", "-o",
               out, "--", exe])
    eq(r.rc, 0, r.describe())
    kids = [f for f in os.listdir(t.dir) if f.startswith("full.ht.")]
    eq(len(kids), 1, "the child's trace: %s" % kids)
    cs = t.stats(t.path(kids[0]))
    eq(cs["calls"]["malloc"], 5, "the child's mallocs")
    eq(cs["command"], exe, "the child's command")


LOOP_C = r"""
#include <stdlib.h>
static void *volatile sink;
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	for (long i = 0; i < n; i++) {
		sink = malloc(16 + i % 4000);
		free(sink);
	}
	return 0;
}
"""


@case(timeout=180)
def test_end_step_holds_trace(t):
    """A second record on the same -o while the first one compacts its
    trace (--compact, the end step under way: its temporary is there): the
    second leaves the trace to it and writes OUTPUT.PID, saying that
    another heaptrail command is using it (since 2026-11-28; "being
    written by another recording" before), and both traces are whole.  Before, it moved the first run's trace to
    OUTPUT.old and wrote OUTPUT, and the end step then renamed the first
    run's compacted trace over it: the second run's events were lost, and
    both summaries named files that held the first run."""
    import subprocess
    import time
    exe = compile_c(t, "loop", LOOP_C, ("-O2",))
    out = t.path("e.ht")
    first = subprocess.Popen([t.heaptrail, "record", "--compact", "-o", out, "--", exe,
                              "10000000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=t.base_env(), cwd=t.dir)
    end = time.monotonic() + 60
    while time.monotonic() < end and first.poll() is None and \
            not any(f.startswith("e.ht.tmp-") for f in os.listdir(t.dir)):
        time.sleep(0.01)
    check(first.poll() is None, "the first record ended before its end step was seen")
    second = t.run([t.heaptrail, "record", "-o", out, "--", exe, "1000"])
    _, err1 = first.communicate(timeout=120)
    eq((first.returncode, second.rc), (0, 0), "exit statuses: %s\n%s" % (err1.decode(),
                                                                      second.describe()))
    check("%s is a finished trace that another heaptrail command is using (compact rewriting "
          "it, or a record finishing it); this recording writes %s." % (out, out)
          in second.stderr, "the second record's trace: " + second.stderr)
    s = t.stats(out)
    check(20000000 <= s["events"] < 20000020, "the first run's trace at OUTPUT: %d events"
          % s["events"])
    others = [f for f in os.listdir(t.dir) if f.startswith("e.ht.") and "tmp" not in f]
    eq(len(others), 1, "the second run's trace beside it: %r" % others)
    n = t.stats(t.path(others[0]))["events"]
    check(2000 <= n < 2020, "the second run's trace: %d events" % n)
    check(not os.path.exists(out + ".old"), "OUTPUT.old made")


@case(timeout=120)
def test_diverted_second_name_found(t):
    """OUTPUT.old is a file of the user's that is not a trace (the
    recorder leaves OUTPUT and writes OUTPUT.<pid>), and OUTPUT.<pid> is
    taken too (symlinks planted for the next pids): the recorder writes
    OUTPUT.<pid>.2, and record's summary names it.  Before, record looked
    for OUTPUT.<pid> only and said the program wrote no trace ("statically
    linked, or setuid ...?"), and the trace got no end step."""
    exe = compile_c(t, "loop", LOOP_C)
    out = t.path("d.ht")
    t.run([t.heaptrail, "record", "-q", "-o", out, "--", exe, "10"], check_rc=0)
    with open(out + ".old", "w") as f:
        f.write("junk\n")
    with open("/proc/sys/kernel/ns_last_pid") as f:
        last = int(f.read())
    for pid in range(last + 1, last + 200):
        os.symlink("victim", "%s.%d" % (out, pid))
    r = t.run([t.heaptrail, "record", "-o", out, "--", exe, "1000"])
    eq(r.rc, 0, r.describe())
    line = [l for l in r.heaptrail_lines() if "wrote " in l]
    eq(len(line), 1, "the summary:\n" + r.describe())
    m = [f for f in os.listdir(t.dir) if f.startswith("d.ht.") and f.endswith(".2")]
    eq(len(m), 1, "OUTPUT.<pid>.2: %r" % m)
    check(line[0].startswith("heaptrail: wrote ") and " to %s " % t.path(m[0]) in line[0],
          "the summary names %s: %s" % (m[0], line[0]))
    check(2000 <= t.stats(t.path(m[0]))["events"] < 2020, "its events")


@case(timeout=120)
def test_killed_writer_no_children_note(t):
    """The writer process killed mid-run (SIGKILL) after it had compressed
    for a while: record says the writer died, and does not say that the
    program's child processes did untraced work (it has none; the CPU time
    the kernel counts among its children was the dead writer's, which the
    writer notes in the trace's header only when it closes it: 0.15 to
    1.02 s were said before)."""
    import subprocess
    import time
    exe = compile_c(t, "loop", LOOP_C, ("-O2",))
    out = t.path("k.ht")
    rec = subprocess.Popen([t.heaptrail, "record", "-o", out, "--", exe, "60000000"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=t.base_env(),
                           cwd=t.dir)
    writer = None
    end = time.monotonic() + 30
    while writer is None and time.monotonic() < end and rec.poll() is None:
        time.sleep(0.05)
        # the writer: a child of the program, whose parent is this record
        for prog in children(rec.pid):
            for c in children(prog):
                if comm(c) == "heaptrail-write":
                    writer = c
    check(writer is not None, "no writer process found")
    time.sleep(0.8)
    os.kill(writer, 9)
    _, err = rec.communicate(timeout=120)
    err = err.decode()
    eq(rec.returncode, 0, err)
    check("the trace writer process died" in err, "the writer's death said:\n" + err)
    check("child processes used" not in err, "a note of untraced children:\n" + err)


@case(timeout=60)
def test_other_users_output_refused(t):
    """A file of another user at OUTPUT (a trace or not; the test runs as
    root and gives it to nobody): record refuses it before it starts the
    program, exit 2, and the file stays as it was.  Before, the program
    ran untraced (the recorder refused the file) and record said it had
    written no trace, "statically linked, or setuid ...?", exit 0."""
    if os.geteuid() != 0:
        from htlib import skip
        skip("needs root to give a file to another user")
    exe = compile_c(t, "loop", LOOP_C)
    out = t.path("u.ht")
    t.run([t.heaptrail, "record", "-q", "-o", out, "--", exe, "10"], check_rc=0)
    for content in (None, b"not a trace\n"):
        if content is not None:
            with open(out, "wb") as f:
                f.write(content)
        os.chown(out, 65534, 65534)
        before = open(out, "rb").read()
        r = t.run([t.heaptrail, "record", "-o", out, "--", exe, "10"])
        eq(r.rc, 2, r.describe())
        eq(r.heaptrail_lines(), ["heaptrail: error: %s belongs to another user (uid 65534): "
                                 "heaptrail neither moves nor replaces it; choose another -o, "
                                 "or remove it" % out], "the message")
        eq(open(out, "rb").read(), before, "the file")
        check(not os.path.exists(out + ".old"), "moved to OUTPUT.old")


@case(timeout=60)
def test_full_disk_before_header(t):
    """OUTPUT on a file system with no room left (a full 1 MiB tmpfs): the
    recorder says it cannot write the header, leaves no file, and record's
    line says the file system is full; the program runs and exits 0.
    Before, an empty OUTPUT was left (the header failed in the unnamed
    file, then in a named one) and record guessed at a static program."""
    import subprocess
    from htlib import skip
    if os.geteuid() != 0:
        skip("needs root to mount a tmpfs")
    mnt = t.path("full")
    os.makedirs(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "none", mnt]).returncode != 0:
        skip("cannot mount a tmpfs here")
    try:
        with open(os.path.join(mnt, "fill"), "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
            except OSError:
                pass
        exe = compile_c(t, "loop", LOOP_C)
        out = os.path.join(mnt, "t.ht")
        r = t.run([t.heaptrail, "record", "-o", out, "--", exe, "100"])
        eq(r.rc, 0, r.describe())
        eq(sorted(os.listdir(mnt)), ["fill"], "files left on the full file system")
        check("heaptrail: cannot write %s (header: No space left on device)" % out in r.stderr,
              r.stderr)
        check("wrote no trace to %s (the file system it was to be written to is full: free some "
              "space (df))" % out in r.stderr, r.stderr)
    finally:
        subprocess.run(["umount", mnt])


def shell_words(t, words):
    """What bash reads words (a piece of a command line) as: its list of
    arguments."""
    r = t.run(["bash", "-c", "printf '%s\\n' " + words])
    eq(r.rc, 0, "bash read %s:\n%s" % (words, r.describe()))
    return r.stdout.splitlines()


@case(timeout=60)
def test_record_paths_quoted(t):
    """Every path record's lines name is one shell word, as the summary's:
    in a directory named "it's a dir", the recorder's line when OUTPUT is
    in use (a finished trace whose lock another heaptrail command holds, as
    compact does: said so since 2026-11-28, "being written by another
    recording" before) names OUTPUT and the OUTPUT.<pid> it writes instead, the refusal of a directory that
    does not exist names it, and that of an -o ending in '/' names it, as
    do the summary of a program killed by a signal and the refusal of one
    that cannot be run (the command's name); bash reads each back as the
    path.  Before, they were printed bare (the
    absolute path of OUTPUT, split into three words by a shell)."""
    import fcntl
    import re
    d = t.path("it's a dir")
    os.makedirs(d)
    out = os.path.join(d, "x.ht")
    r = t.run([t.heaptrail, "record", "-q", "-o", out, "--", t.prog("oneline")])
    eq(r.rc, 0, r.describe())
    with open(out, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # (as its writer holds it)
        r = t.run([t.heaptrail, "record", "-o", out, "--", t.prog("oneline")])
    eq(r.rc, 0, r.describe())
    alt = [f for f in os.listdir(d) if f.startswith("x.ht.")]
    eq(len(alt), 1, "the trace written instead: %r" % alt)
    m = [re.match(r"heaptrail: (.*) is a finished trace that another heaptrail command is "
                  r"using \(compact rewriting it, or a record finishing it\); this recording "
                  r"writes (.*)$", line) for line in r.heaptrail_lines()]
    m = [x for x in m if x]
    eq(len(m), 1, "the line that says so:\n" + r.describe())
    eq(shell_words(t, "%s %s" % m[0].groups()), [out, os.path.join(d, alt[0])],
       "the paths in: " + m[0].group(0))
    missing = os.path.join(d, "no dir")
    r = t.run([t.heaptrail, "record", "-o", os.path.join(missing, "x.ht"), "--",
               t.prog("oneline")])
    eq(r.rc, 2, r.describe())
    m = re.search(r": its directory (.*): No such file or directory; choose another -o$",
                  r.stderr, re.M)
    check(m, "the refusal:\n" + r.describe())
    eq(shell_words(t, m.group(1)), [missing], "the directory in: " + m.group(0))
    r = t.run([t.heaptrail, "record", "-o", d + "/", "--", t.prog("oneline")])
    eq(r.rc, 2, r.describe())
    m = re.search(r"error: -o (.*) ends in '/': ", r.stderr)
    check(m, "the refusal:\n" + r.describe())
    eq(shell_words(t, m.group(1)), [d + "/"], "the path in: " + m.group(0))
    # the command, in a line that names it (since 2026-11-28: bare before)
    import shutil
    crash = os.path.join(d, "crash")
    shutil.copy(t.prog("crash"), crash)
    r = t.run([t.heaptrail, "record", "-o", t.path("c.ht"), "--", crash, "segv"])
    eq(r.rc, 128 + 11, r.describe())
    m = re.match(r"heaptrail: (.*) was killed by signal 11 ", r.heaptrail_lines()[0])
    check(m, "the summary:\n" + r.describe())
    eq(shell_words(t, m.group(1)), [crash], "the command in: " + m.group(0))
    gone = os.path.join(d, "not here")
    r = t.run([t.heaptrail, "record", "-o", t.path("g.ht"), "--", gone])
    eq(r.rc, 127, r.describe())
    m = re.match(r"heaptrail: cannot run (.*): No such file or directory$",
                 r.heaptrail_lines()[0])
    check(m, "the refusal:\n" + r.describe())
    eq(shell_words(t, m.group(1)), [gone], "the command in: " + m.group(0))


ABORTS_C = r"""
#include <stdlib.h>
int main(void)
{
	void *volatile p = malloc(10);
	(void)p;
	abort();
}
"""


@case(labels=("record",))
def test_record_killed_names_last_image(t):
    """record -- env X=1 PROG, PROG aborting: record names PROG, the image
    the signal killed, and the command it started that exec'd it.  It
    named env (probe P: `env was killed by signal 6`, where stats said
    ./cxx died of SIGABRT)."""
    exe = compile_c(t, "aborts", ABORTS_C)
    out = t.path("a.ht")
    r = t.run([t.heaptrail, "record", "-o", out, "--", "env", "X=1", exe])
    eq(r.rc, 128 + 6, "record's status:\n" + r.describe())
    check(r.stderr.startswith("heaptrail: %s (which env exec'd) was killed by signal 6 (Aborted); "
                              "wrote " % exe), "the line:\n" + r.stderr)
    r = t.run([t.heaptrail, "record", "-o", t.path("b.ht"), "--", exe])
    check(r.stderr.startswith("heaptrail: %s was killed by signal 6 (Aborted); wrote " % exe),
          "without an exec:\n" + r.stderr)


@case(timeout=120)
def test_file_size_limit_no_signal(t):
    """Under RLIMIT_FSIZE of 256 KiB, a program with its own SIGXFSZ
    handler (tests/progs/fsizesig.c; it writes no file) sees no SIGXFSZ:
    the trace's writes stop with EFBIG, said as documented, and the
    program ends normally, with the program's threads writing their own
    full buffers (HEAPTRAIL_SELF_WRITE=2) or the writer thread in the
    program's process.  Before (probe T): the kernel sent SIGXFSZ to the
    program's thread that wrote the trace, and its handler ran for a file
    it never wrote."""
    import resource
    import subprocess

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))

    for args, env in (([], {"HEAPTRAIL_SELF_WRITE": "2"}), (["--writer=thread"], {})):
        out = t.path("fs%d.ht" % len(args))
        p = subprocess.run([t.heaptrail, "record", "--buffer-size", "4096", "-o", out] + args +
                           ["--", t.prog("fsizesig"), "100000"], capture_output=True, text=True,
                           env=t.base_env(env), cwd=t.dir, preexec_fn=limit, timeout=100)
        eq((p.returncode, p.stdout), (0, "fsizesig: 0 SIGXFSZ\n"),
           "%s %s:\n%s" % (args, env, p.stderr))
        check("(write: File too large); recording stopped, the program goes on" in p.stderr and
              "until a write failed" in p.stderr, "%s: the lines:\n%s" % (args, p.stderr))


PRCTL_NAME_C = r"""
#include <pthread.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
static void *volatile sink;
static void *by_syscall(void *arg)
{
	(void)arg;
	syscall(SYS_prctl, PR_SET_NAME, "raw-named", 0, 0, 0);
	sink = malloc(20);
	free(sink);
	return NULL;
}
int main(void)
{
	prctl(PR_SET_NAME, "prctl-named-thread", 0, 0, 0);
	sink = malloc(10);
	free(sink);
	pthread_t t;
	pthread_create(&t, NULL, by_syscall, NULL);
	pthread_join(t, NULL);
	return 0;
}
"""


@case(timeout=120)
def test_thread_named_by_prctl(t):
    """A thread named with prctl(PR_SET_NAME), or with the same through
    syscall(), is named in the trace as one named by pthread_setname_np,
    as the kernel keeps it (15 bytes): stats showed "-" (probe U)."""
    import json
    exe = compile_c(t, "pname", PRCTL_NAME_C, ("-pthread",))
    out = t.path("pname.ht")
    t.run([t.heaptrail, "record", "-q", "-o", out, "--", exe], check_rc=0)
    s = t.stats(out)
    names = sorted(x["name"] for x in s["per_thread"])
    eq(names, ["prctl-named-thr", "raw-named"], "the threads' names")


NOMMAP_FORK_C = r"""
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
static void *volatile sink;
int main(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
	sink = malloc(10);
	free(sink);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return 3;
	pid_t p = fork();
	if (p == 0) {
		sink = malloc(20);
		free(sink);
		_exit(0);
	}
	int st;
	waitpid(p, &st, 0);
	printf("child: %d\n", (int)p);
	return 0;
}
"""


@case(timeout=120)
def test_fork_child_untraced_said_as_child(t):
    """mmap refused by a seccomp filter, then a fork: the child cannot map
    the recorder's buffers and runs untraced, and its line says so of
    itself, with its pid, not of "the program" (probe U: it read as if
    the whole run went untraced, while the parent's trace is whole)."""
    exe = compile_c(t, "nommap", NOMMAP_FORK_C)
    out = t.path("nm.ht")
    r = t.run([t.heaptrail, "record", "-o", out, "--", exe])
    eq(r.rc, 0, r.describe())
    child = int(r.stdout.split("child: ")[1].split()[0])
    check("this fork child (pid %d) runs untraced, its parent's trace goes on" % child
          in r.stderr and
          "the program runs untraced" not in r.stderr, "the line:\n" + r.stderr)
    check(t.stats(out)["calls"]["malloc"] >= 1, "the parent's trace")
