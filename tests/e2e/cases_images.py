"""Process images under `record --follow-exec`: one trace per image that
recorded an event, named by the rule of docs/output-files.md, and record's
summary naming each with its command (issue 17, item 13)."""

import os

from htformat import FILE_F_FORK_CHILD, Trace
from htlib import case, check, eq, expect, expect_calls, fail


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
    listed = ", ".join("%s (%s)" % (t.path(n), c) for n, c in zip(names, cmds))
    check(", and 5 traces of child processes and earlier exec images: %s; see" % listed
          in main[0], "the summary names each trace with its command:\n%s\nnot:\n%s"
          % (main[0], listed))
