"""The analyzers under valgrind memcheck (issue 7, item 3): no invalid
read or write, no use of uninitialised memory, no definite leak, on a small
multi-threaded trace with stacks, on a trace cut inside a chunk (the error
paths) and on files that are no trace at all.  The normal build (valgrind
cannot run the ASan one)."""

import os
import shutil

from htlib import case, check, skip

VALGRIND = ["valgrind", "-q", "--error-exitcode=99", "--leak-check=full",
            "--errors-for-leak-kinds=definite"]


def commands(trace, other, o):
    p = lambda name: os.path.join(o, name)  # noqa: E731
    return [
        ["stats", trace], ["stats", "--json", trace], ["leaks", trace], ["leaks", "--json", trace],
        ["top", trace], ["top", "--json", trace], ["timeline", "-o", p("t.svg"), trace],
        ["timeline", "--csv", "-o", p("t.csv"), trace], ["heap", trace],
        ["heap", "--json", trace], ["report", "-o", p("r.html"), trace],
        ["export", "--format", "pprof", "-o", p("p.pb.gz"), trace],
        ["export", "--format", "perfetto", "-o", p("p.json"), trace],
        ["export", "--format", "massif", "-o", p("massif.out"), trace],
        ["export", "--format", "csv", "-o", p("p.csv"), trace],
        ["diff", trace, other], ["diff", "--json", other, trace],
        ["convert", "-q", p("c.wl"), trace], ["dump", trace], ["flamegraph", "-o", p("f.svg"), trace],
        ["events", trace],
    ]


@case(timeout=900, labels=("valgrind",), locks=("cpu",))
def test_valgrind_analyzers(t):
    if not shutil.which("valgrind"):
        skip("valgrind is not installed (scripts/deps.sh test)")
    with open(t.heaptrail, "rb") as f:
        if b"__asan_init" in f.read():
            skip("an ASan build: valgrind runs on the normal one")
    trace, other = t.path("threads.ht"), t.path("leaky.ht")
    t.record(trace, [t.prog("threads"), "3", "300"], env={"HEAPTRAIL_STACKS": "16"})
    t.record(other, [t.prog("leaky")], env={"HEAPTRAIL_STACKS": "16"})
    with open(trace, "rb") as f:
        data = f.read()
    cut = t.path("cut.ht")
    with open(cut, "wb") as f:
        f.write(data[:len(data) * 6 // 10])
    wl = t.path("w.wl")
    t.run([t.heaptrail, "convert", "-q", wl, trace], check_rc=0)
    o = t.path("out")
    os.mkdir(o)
    bad = []
    runs = [(c, 0) for c in commands(trace, other, o)]
    runs += [(c, 1) for c in commands(cut, other, o)]          # error paths: a damaged trace
    runs += [(c, 1) for c in commands(wl, other, o)[:8]]       # no trace at all
    runs += [(["replay", "--no-mlock", "--threads-as-one", wl], 0),
             (["replay", "--no-mlock", wl], 0), (["replay", trace], 1)]
    for args, rc in runs:
        r = t.run(VALGRIND + [t.heaptrail] + args, timeout=300)
        if r.rc == 99 or r.rc != rc or "==" in r.stderr:
            bad.append(r.describe())
    check(not bad, "%d of %d runs under memcheck failed:\n\n%s" % (len(bad), len(runs),
                                                                   "\n\n".join(bad)))
