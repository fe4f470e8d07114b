"""record where an exec chain meets what earlier runs left: this run's
image traces named when the last image is untraced, an image's trace that
could not be renamed at its exec, shell stubs in the summary, and a low
limit of open files.  Each case builds what it needs (gcc, a static
program where it must)."""
import os

from cases_process_fixes import KID, static_prog
from htlib import case, check, compile_c, eq


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
