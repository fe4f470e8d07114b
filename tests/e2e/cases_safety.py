"""Safety of the recorder (issue 7, item 6): the output never follows a
symlink another user planted (at the output path, at a %p-expanded path,
at a fork child's path), files are 0600, a set-user-ID program ignores the
library, every environment option's bad value is one warning naming the
variable and what it accepts, and children are traced only when asked."""

import os
import shutil
import stat
import subprocess

from htlib import case, check, eq, file_mode, next_pids, skip, which

NOBODY = 65534


@case(labels=("safety",), locks=("pids",))
def test_symlink_at_pid_path(t):
    """HEAPTRAIL_OUT with %p: symlinks planted at the names the next 300
    pids expand to (and at the fork child's NAME.PID) point at a file of
    someone else's; the program runs as without the tracer, the target
    stays untouched, the refusal is one warning naming the path."""
    target = t.path("precious.txt")
    with open(target, "w") as f:
        f.write("precious\n")
    os.chmod(target, 0o644)
    planted = []
    for pid in next_pids(300):
        for name in ("t.%d.ht" % pid,):
            os.symlink(target, t.path(name))
            planted.append(t.path(name))
    r = t.run([t.prog("passthru"), "0"], stdin=b"hello",
              env={"LD_PRELOAD": t.preload, "HEAPTRAIL_OUT": t.path("t.%p.ht")})
    eq((r.rc, r.out), (0, b"hello"), "the program's status and output")
    with open(target) as f:
        eq(f.read(), "precious\n", "the symlink's target")
    eq(oct(file_mode(target)), oct(0o644), "the target's mode")
    check(all(os.path.islink(p) for p in planted), "a planted symlink was replaced")
    lines = r.heaptrail_lines()
    eq(len(lines), 1, "warnings: %s" % lines)
    check("is a symbolic link" in lines[0] and "t." in lines[0], "warning: %s" % lines[0])
    # the fork child's name: NAME.CHILDPID planted; the parent's trace is
    # written, the child's refused, the target untouched
    for f_ in planted:
        os.unlink(f_)
    out = t.path("f.ht")
    planted = [out + ".%d" % pid for pid in next_pids(300)]
    for p in planted:
        os.symlink(target, p)
    r = t.traced(out, [t.prog("forker")])
    with open(target) as f:
        eq(f.read(), "precious\n", "the symlink's target (fork child)")
    check(all(os.path.islink(p) for p in planted), "a planted symlink was replaced (fork)")
    eq(t.stats(out)["calls"]["malloc"], 15, "the parent's trace")


@case(labels=("safety",))
def test_child_files_0600(t):
    """With umask 0, the trace of the program, of a fork child and of an
    exec'ed image are all created 0600."""
    old = os.umask(0)
    try:
        t.record(t.path("m.ht"), [t.prog("forker")])
        t.traced(t.path("x.ht"), [t.prog("execer"), "parent"])
    finally:
        os.umask(old)
    files = sorted(os.listdir(t.dir))
    check(len(files) >= 4, "files: %s" % files)
    for f in files:
        eq(oct(file_mode(t.path(f))), oct(0o600), "mode of %s" % f)


SETUID_SRC = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int heaptrail_active(void);
int main(void) {
    char *p = malloc(1000);
    strcpy(p, "hello");
    printf("%s ruid=%d euid=%d active=%d\n", p, (int)getuid(), (int)geteuid(),
           heaptrail_active());
    free(p);
    return 0;
}
"""


@case(labels=("safety",))
def test_setuid_ignored(t):
    """A set-user-ID-root program run by nobody (AT_SECURE) ignores the
    library: the program is linked against libheaptrail.so by an absolute
    RUNPATH (which the loader honours in secure mode, unlike LD_PRELOAD
    paths), so the library is loaded and its start-up must see AT_SECURE:
    heaptrail_active() is 0, no file is created in a directory anyone can
    write, nothing on stderr.  The same program without the setuid bit,
    run by nobody, is traced (so the library was there to refuse)."""
    gcc = which("gcc")
    if not gcc:
        skip("gcc is not installed")
    if os.geteuid() != 0:
        skip("needs root to make a setuid-root program")
    setpriv = which("setpriv")
    if not setpriv:
        skip("setpriv (util-linux) is not installed")
    st = os.statvfs(t.dir)
    if st.f_flag & os.ST_NOSUID:
        skip("%s is mounted nosuid" % t.dir)
    # nobody must reach the library and the program
    lib = t.preload
    d = os.path.dirname(lib)
    while d != "/":
        if not os.stat(d).st_mode & stat.S_IXOTH:
            skip("%s is not searchable by others: nobody cannot load the library" % d)
        d = os.path.dirname(d)
    os.chmod(t.dir, 0o1777)
    src = t.path("su.c")
    with open(src, "w") as f:
        f.write(SETUID_SRC)
    plain = t.path("plainprog")
    t.run([gcc, src, "-o", plain, "-L" + os.path.dirname(lib), "-lheaptrail",
           "-Wl,-rpath," + os.path.dirname(lib), "-Wl,--enable-new-dtags"], check_rc=0)
    suid = t.path("suidprog")
    shutil.copy(plain, suid)
    os.chown(suid, 0, 0)
    os.chmod(suid, 0o4755)
    os.chmod(plain, 0o755)
    as_nobody = [setpriv, "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
    env = {"HEAPTRAIL_OUT": t.path("out.%p.ht")}
    r = t.run(as_nobody + [plain], env=env)
    eq((r.rc, r.stdout), (0, "hello ruid=%d euid=%d active=1\n" % (NOBODY, NOBODY)),
       "the plain program, traced")
    traces = [f for f in os.listdir(t.dir) if f.startswith("out.")]
    eq(len(traces), 1, "the plain program's trace: %s" % traces)
    eq(t.stats(t.path(traces[0]))["calls"]["malloc"] >= 1, True, "the plain program's mallocs")
    os.unlink(t.path(traces[0]))
    r = t.run(as_nobody + [suid], env=env)
    eq((r.rc, r.stdout), (0, "hello ruid=%d euid=0 active=0\n" % NOBODY),
       "the setuid program: not traced")
    eq(r.err, b"", "the setuid program's stderr")
    eq([f for f in os.listdir(t.dir) if f.startswith("out.")], [], "files of the setuid program")


# Every option of the recorder's table (src/preload/options.c) with a bad
# value, and the words its warning must hold (the accepted values).
BAD_OPTIONS = [
    ("HEAPTRAIL_OUT", "x" * 5000, "too long"),
    ("HEAPTRAIL_START_PAUSED", "maybe", "1/true/yes/on, 0/false/no/off"),
    ("HEAPTRAIL_FOLLOW_EXEC", "2", "1/true/yes/on, 0/false/no/off"),
    ("HEAPTRAIL_FOLLOW_FORK", "sometimes", "1/true/yes/on, 0/false/no/off"),
    ("HEAPTRAIL_FLUSH_INTERVAL", "0", "from 1 to 60000"),
    ("HEAPTRAIL_RSS_INTERVAL", "10 parsecs", "from 0 to 60000"),
    ("HEAPTRAIL_BUFFER_SIZE", "1G", "from 4096 to 524288"),
    ("HEAPTRAIL_TOGGLE_SIGNAL", "SIGUSR2", "1/true/yes/on, 0/false/no/off"),
    ("HEAPTRAIL_ZSTD_LEVEL", "99", "from -7 to 19"),
    ("HEAPTRAIL_CLOCK", "sundial", "tsc or monotonic"),
    ("HEAPTRAIL_TIMESTAMP_EVERY", "-1", "from 1 to 65536"),
    ("HEAPTRAIL_QUIET", "shh", "1/true/yes/on, 0/false/no/off"),
    ("HEAPTRAIL_WRITER", "fibre", "process or thread"),
    ("HEAPTRAIL_STACKS", "deep", "from 0 to 256"),
    ("HEAPTRAIL_UNWIND", "fp", "auto, dwarf or check"),
    ("HEAPTRAIL_SAMPLE_BYTES", "12Q", "from 0 to 1073741824"),
    ("HEAPTRAIL_DURATIONS", "always", "1/true/yes/on, 0/false/no/off"),
    ("HEAPTRAIL_FAST_PATH", "fastest", "1/true/yes/on, 0/false/no/off"),
    ("HEAPTRAIL_SELF_WRITE", "3", "from 0 to 2"),
    ("HEAPTRAIL_SCAN_DELAY_US", "2000000", "from 0 to 1000000"),
]


@case(labels=("safety",))
def test_bad_option_each(t):
    """Each option of the recorder's table with a bad value, one at a time:
    exactly one warning, naming the variable and the values it accepts;
    the program runs as without the tracer and is traced with the default
    (every call of the program, to the default file or the one asked for)."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "src", "preload",
                           "options.c")) as f:
        src = f.read()
    table = set(l.split('"')[1] for l in src.splitlines() if l.strip().startswith('{"HEAPTRAIL_'))
    eq(table, set(v for v, _, _ in BAD_OPTIONS), "the options this case covers vs the table")
    prog = [t.prog("crash"), "exit", "0"]  # malloc 20, free 5
    plain = t.run(prog)
    for var, value, words in BAD_OPTIONS:
        for f in os.listdir(t.dir):
            os.unlink(t.path(f))
        out = t.path("o.ht")
        env = {"LD_PRELOAD": t.preload, "HEAPTRAIL_OUT": out, var: value}
        r = t.run(prog, env=env)
        eq((r.rc, r.out), (plain.rc, plain.out), "%s=%s: the program's status and output"
           % (var, value[:20]))
        lines = r.heaptrail_lines()
        eq(len(lines), 1, "%s: warnings %s" % (var, lines))
        check(var in lines[0] and words in lines[0] and "default" in lines[0],
              "%s: the warning names it and %r: %s" % (var, words, lines[0][:300]))
        eq(r.stderr.replace(lines[0] + "\n", ""), plain.stderr, "%s: the rest of stderr" % var)
        files = os.listdir(t.dir)
        trace = out if var != "HEAPTRAIL_OUT" else t.path(
            [f for f in files if f.startswith("heaptrail.")][0])
        s = t.stats(trace)
        eq(s["complete"] and s["closed"], True, "%s: the trace" % var)
        eq((s["calls"]["malloc"], s["calls"]["free"]), (20, 5), "%s: the calls" % var)


@case(labels=("safety",))
def test_children_only_when_asked(t):
    """A shell that runs other programs: `record` without --follow-exec
    traces the shell and its fork children until they exec, not the
    programs they exec (sort); with --follow-exec sort too."""
    sh = which("sh")
    script = "printf 'b\\na\\n' | sort; echo done"
    for follow in (False, True):
        for f in os.listdir(t.dir):
            os.unlink(t.path(f))
        out = t.path("sh.ht")
        args = ["--follow-exec"] if follow else []
        r = t.run([t.heaptrail, "record", "-o", out] + args + ["--", sh, "-c", script])
        eq((r.rc, r.stdout), (0, "a\nb\ndone\n"), "the script's output")
        cmds = {f: t.stats(t.path(f))["command"] for f in os.listdir(t.dir)}
        progs = sorted(c.split()[0].rsplit("/", 1)[-1] for c in cmds.values())
        # the shell's fork children are traced (until they exec)
        check(progs.count("sh") >= 2, "the shell and its fork children: %s" % cmds)
        eq("sort" in progs, follow, "sort traced (%s): %s" % (args, cmds))


@case(labels=("safety",))
def test_child_switches_user(t):
    """A fork child that switches to another user before it execs (Python's
    subprocess with user=, as su and daemons do): it goes untraced,
    silently.  Before, it could not create its file where its parent
    writes, said so twice on the program's stderr, and the retry crashed it
    (SIGSEGV in the child: python3's test_subprocess test_user failed)."""
    py = "/usr/bin/python3"
    if not os.access(py, os.X_OK) or os.geteuid() != 0:
        skip("needs root and /usr/bin/python3")
    code = ("import subprocess; print(subprocess.check_output([%r, '-c', "
            "'import os; print(os.getuid())'], user=%d).decode(), end='')" % (py, NOBODY))
    out = t.path("u.ht")
    r = t.record(out, [py, "-c", code])
    eq(r.stdout, "%d\n" % NOBODY, "the child's output")
    eq([l for l in r.stderr.splitlines() if "wrote" not in l], [], "stderr")
    eq(sorted(os.listdir(t.dir)), ["u.ht"], "files (none for the child)")
    s = t.stats(out)
    eq((s["complete"], s["closed"], s["forks"] >= 0), (True, True, True), "the parent's trace")
