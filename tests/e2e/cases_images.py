"""Process images under `record --follow-exec`: one trace per image that
recorded an event, named by the rule of docs/output-files.md, and record's
summary naming each with its command (issue 17, item 13)."""

import os

from htformat import FILE_F_FORK_CHILD, Trace
from htlib import case, check, eq, expect, expect_calls, fail, which


def said(run, name):
    for line in run.stdout.splitlines():
        if line.startswith(name + ": "):
            return int(line.split(": ")[1])
    fail("no '%s: PID' line in the output:\n%s" % (name, run.describe()))


@case()
def test_fork_exec_one_trace_per_image(t):
    """forkexec 3: three children exec at once after fork (no heap call of
    their own between the two: each is one image, the exec'd one, and
    leaves one trace, OUT.<pid>, no stub), then a child that allocates
    before it execs (two images: OUT.<pid> is the forked image with its
    calls and its exec, OUT.<pid>.2 the exec'd one).  Before, each of the
    first three left OUT.<pid> with 2 events (thread_start, exec) and put
    its calls in OUT.<pid>.2."""
    out = t.path("x.ht")
    r = t.run([t.heaptrail, "record", "--follow-exec", "-o", out, "--",
               t.prog("forkexec"), "3"], check_rc=0)
    parent = said(r, "parent")
    kids = {k: said(r, "image %d" % k) for k in (1, 2, 3, 9)}
    for k, pid in kids.items():
        eq(said(r, "forked %d" % k), pid, "exec keeps the pid of child %d" % k)
    expected = {"x.ht": (parent, {"malloc": 3, "free": 3})}
    for k in (1, 2, 3):
        expected["x.ht.%d" % kids[k]] = (kids[k], {"malloc": k, "free": k})
    expected["x.ht.%d" % kids[9]] = (kids[9], {"malloc": 2, "free": 2})
    expected["x.ht.%d.2" % kids[9]] = (kids[9], {"malloc": 9, "free": 9})
    eq(sorted(os.listdir(t.dir)), sorted(expected), "files: one per image, no stubs")
    with t.soft():
        for name, (pid, calls) in sorted(expected.items()):
            s = t.stats(t.path(name))
            expect_calls(s, calls)
            expect(s, complete=True, closed=True)
            eq(s["per_thread"][0]["tid"], pid, "%s: the process" % name)
            tr = Trace(t.path(name))
            kinds = [e.name for e in tr.events]
            forked_image = name == "x.ht.%d" % kids[9]
            # exactly the image's calls, its thread's start and, in the
            # forked image of the last child, its exec: nothing else,
            # nothing lost
            want = {"malloc": calls["malloc"], "free": calls["free"], "thread_start": 1}
            if name == "x.ht":
                want["fork"] = 4
            if forked_image:
                want["exec"] = 1
            got = {k: kinds.count(k) for k in set(kinds) if k != "heap_break"}
            eq(got, want, "%s: events by kind" % name)
            eq(bool(tr.flags & FILE_F_FORK_CHILD), forked_image, "%s: FORK_CHILD flag" % name)
            if name == "x.ht" or forked_image:
                eq(tr.argv[1:], ["3"], "%s: command" % name)
            else:
                k = [k for k, p in kids.items() if p == pid][0]
                eq(tr.argv[1:], ["image", str(k)], "%s: command" % name)
    # the summary: the one 'heaptrail:' line names each child's trace with
    # its command, in the order they began
    main = r.heaptrail_lines()
    eq(len(main), 1, "'heaptrail:' lines: %s" % main)
    names = ["x.ht.%d" % kids[k] for k in (1, 2, 3, 9)] + ["x.ht.%d.2" % kids[9]]
    cmds = ["forkexec image 1", "forkexec image 2", "forkexec image 3", "forkexec 3",
            "forkexec image 9"]
    # (the fourth allocated, then exec'd: a stub, marked with what it exec'd)
    marks = ["", "", "", " [exec'd /proc/self/exe]", ""]
    listed = ", ".join("%s (%s)%s" % (t.path(n), c, m) for n, c, m in zip(names, cmds, marks))
    check(", and 5 traces of child processes and earlier exec images: %s; see" % listed
          in main[0], "the summary names each trace with its command:\n%s\nnot:\n%s"
          % (main[0], listed))


@case()
def test_untraced_children_noted(t):
    """A command whose child processes did the work in programs of their
    own (a shell running randloop: dash vforks and execs it) leaves a trace
    of the shell only; record says so in one note, with the CPU time the
    kernel counted for those children, and names --follow-exec (or, with
    --no-follow-fork, that option).  No note with --follow-exec (the
    child's trace is there), with -q, or when the program does the work
    itself.  A child that allocated before its exec (bash's) leaves a
    trace that ends with the exec: the note still comes, saying so."""
    loop = t.prog("randloop")
    note = "heaptrail: note: the program's child processes used "
    tail = " s of CPU and none of them was traced: the programs they ran are traced only " \
           "with --follow-exec"
    out = t.path("sh.ht")
    r = t.run([t.heaptrail, "record", "-o", out, "--", "sh", "-c", "%s 10000000; true" % loop],
              check_rc=0)
    lines = r.heaptrail_lines()
    eq(len(lines), 2, "summary and note: %s" % lines)
    check(lines[1].startswith(note) and lines[1].endswith(tail), "the note: %r" % lines[1])
    secs = float(lines[1][len(note):-len(tail)])
    check(0.05 <= secs < 30, "the children's CPU time: %r" % lines[1])
    mallocs = t.stats(out)["calls"]["malloc"]
    check(mallocs < 1000, "the shell's trace holds %d mallocs: randloop's?" % mallocs)
    follow = t.path("follow.ht")
    r = t.run([t.heaptrail, "record", "--follow-exec", "-o", follow, "--", "sh", "-c",
               "%s 200000; true" % loop], check_rc=0)
    check(not [l for l in r.heaptrail_lines() if "note:" in l], "--follow-exec: %s" % r.stderr)
    check([f for f in os.listdir(t.dir) if f.startswith("follow.ht.")],
          "--follow-exec: no trace of the child in %s" % os.listdir(t.dir))
    r = t.run([t.heaptrail, "record", "-q", "-o", t.path("q.ht"), "--", "sh", "-c",
               "%s 10000000; true" % loop], check_rc=0)
    eq(r.heaptrail_lines(), [], "-q")
    # --no-follow-fork: the note says that option left them out
    r = t.run([t.heaptrail, "record", "--no-follow-fork", "-o", t.path("nf.ht"), "--", "sh",
               "-c", "%s 10000000; true" % loop], check_rc=0)
    lines = r.heaptrail_lines()
    check(len(lines) == 2 and lines[1].startswith(note) and
          lines[1].endswith(" s of CPU and none of them was traced: --no-follow-fork leaves "
                            "them out"), "--no-follow-fork: %s" % lines)
    r = t.run([t.heaptrail, "record", "-o", t.path("self.ht"), "--", loop, "4000000"],
              check_rc=0)
    eq(len(r.heaptrail_lines()), 1, "the program's own work: %s" % r.heaptrail_lines())
    # bash forks a child that allocates before it execs randloop: a trace
    # of a few events, ending with the exec, which hid the note (the
    # summary listed it as if the work was traced)
    bash = which("bash")
    if bash:
        r = t.run([t.heaptrail, "record", "-o", t.path("bash.ht"), "--", bash, "-c",
                   "%s 10000000; true" % loop], check_rc=0)
        lines = r.heaptrail_lines()
        check(".ht." in lines[0], "bash's child left a trace: %s" % lines)
        eq(len(lines), 2, "bash: summary and note: %s" % lines)
        check(lines[1].startswith(note) and lines[1].endswith(
            " s of CPU in programs that were not traced (1 of them exec'd one): the programs "
            "they ran are traced only with --follow-exec"), "bash: the note: %r" % lines[1])


@case()
def test_summary_one_line(t):
    """A child's command with a newline in its arguments (env X='a
    b' ...) is named on the summary's one line, the newline a space."""
    out = t.path("nl.ht")
    r = t.run([t.heaptrail, "record", "--follow-exec", "-o", out, "--", "sh", "-c",
               "env X='a\nb' %s 100; true" % t.prog("randloop")], check_rc=0)
    lines = [l for l in r.stderr.splitlines() if l]
    eq(len(lines), 1, "stderr lines: %r" % r.stderr)
    check("(env X=a b " in lines[0], "the child's command: %r" % lines[0])
