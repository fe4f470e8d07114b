"""Golden outputs (tests/golden/README.md): the analyzers on small
committed traces (threads, stacks, sampling, mmap/brk/shm, marks, a fork's
parent and child), their standard output compared byte for byte with
tests/golden/expected/.  A refactoring of the analyzers, the reader or the
escapers that changes one byte of any of them fails here; a change meant
is written with tests/golden/update.sh and reviewed as a diff."""

import difflib
import os
import sys
import tempfile

from htlib import case, fail

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "golden"))
import golden  # noqa: E402

TRACES = sorted({trace for _, trace, _ in golden.commands()})


def check_trace(t, trace):
    bad = []
    with tempfile.TemporaryDirectory() as empty:
        for name, tr, args in golden.commands():
            if tr != trace:
                continue
            rc, out, err = golden.run(t.heaptrail, args, empty)
            t.note("heaptrail %s: exit %d\n%s" % (" ".join(args), rc, err[-1500:]))
            if rc != 0:
                bad.append("%s: heaptrail %s: exit %d\n%s" % (name, " ".join(args), rc, err[-800:]))
                continue
            want = golden.expected(name)
            if out == want:
                continue
            with open(t.path(name), "wb") as f:
                f.write(out)
            diff = difflib.unified_diff(want.decode("utf-8", "replace").splitlines(),
                                        out.decode("utf-8", "replace").splitlines(),
                                        "expected/" + name, "now", lineterm="", n=1)
            bad.append("%s differs (heaptrail %s):\n%s" % (name, " ".join(args),
                                                         "\n".join(list(diff)[:30])))
    if bad:
        fail("\n\n".join(bad) + "\n\n(if the change is meant: tests/golden/update.sh BUILD, "
             "then review git diff tests/golden/expected)")


def make_case(trace):
    def fn(t):
        check_trace(t, trace)
    fn.__name__ = "test_golden_" + trace.replace("-", "_")
    fn.__doc__ = "The golden outputs of tests/golden/%s.ht, byte for byte." % trace
    return case(labels=("analyzers",))(fn)


for _trace in TRACES:
    globals()["test_golden_" + _trace.replace("-", "_")] = make_case(_trace)
