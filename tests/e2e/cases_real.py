"""Real programs, each run with and without the tracer: same exit status,
same stdout, and a trace with plausible counts.  A case is skipped when
its program is not installed."""

import glob
import os

from htlib import case, check, eq, expect, skip, which

SQL = """
create table t(id integer primary key, name text, score real);
with recursive n(i) as (select 1 union all select i + 1 from n where i < 2000)
insert into t(name, score) select 'name' || i, i * 1.5 from n;
create index t_score on t(score);
select count(*), sum(score), max(name) from t;
select name from t where score between 100 and 110 order by name;
update t set name = upper(name) where id % 7 = 0;
select count(*) from t where name like 'NAME%';
delete from t where id > 1000;
select count(*), min(id), max(id) from t;
"""

PY_THREADS = r"""
import threading, hashlib
results = {}
def work(i):
    data = [str(j) * (j % 17) for j in range(3000 + i)]
    results[i] = hashlib.sha256("".join(data).encode()).hexdigest()[:16]
ts = [threading.Thread(target=work, args=(i,), name="py-%d" % i) for i in range(6)]
for t in ts: t.start()
for t in ts: t.join()
for i in sorted(results): print(i, results[i])
print(sum(len(v) for v in results.values()))
"""

C_SRC = r"""
#include <stdio.h>
#include <stdlib.h>
struct node { int v; struct node *next; };
int main(void) {
    struct node *h = NULL;
    for (int i = 0; i < 100; i++) {
        struct node *n = malloc(sizeof *n);
        n->v = i; n->next = h; h = n;
    }
    long s = 0;
    while (h) { struct node *n = h->next; s += h->v; free(h); h = n; }
    printf("sum %ld\n", s);
    return 0;
}
"""


def plausible(t, path, min_malloc=100, threads=1):
    s = t.stats(path)
    expect(s, complete=True, closed=True)
    check(s["calls"]["malloc"] > min_malloc, "only %d mallocs" % s["calls"]["malloc"])
    check(s["calls"]["free"] > 0, "no frees")
    check(s["threads"] >= threads, "threads %d < %d" % (s["threads"], threads))
    check(s["bytes_allocated"] > 0 and s["peak_live_bytes"] > 0, "no bytes")
    check(s["unknown_frees"] <= s["calls"]["free"], "unknown_frees")
    check(s["events"] >= s["calls"]["malloc"] + s["calls"]["free"], "events")
    return s


def both(t, argv, name, env=None, stdin=None, cwd=None, timeout=120, prep=None):
    """Runs argv untraced, then under `heaptrail record`; same status and
    stdout.  prep() is called before each run (to reset state)."""
    if prep:
        prep()
    plain = t.run(argv, env=env, stdin=stdin, cwd=cwd, timeout=timeout)
    if prep:
        prep()
    out = t.path(name + ".ht")
    rec = t.record(out, argv, env=env, stdin=stdin, timeout=timeout, rc=plain.rc)
    eq(rec.rc, plain.rc, "%s: exit status traced vs untraced" % name)
    check(rec.out == plain.out, "%s: stdout differs traced vs untraced:\n%s\n---\n%s"
          % (name, plain.stdout[-1500:], rec.stdout[-1500:]))
    return plain, rec, out


@case(timeout=120, labels=("real",))
def test_real_sqlite3(t):
    sqlite = which("sqlite3")
    if not sqlite:
        skip("sqlite3 is not installed")
    script = t.path("s.sql")
    with open(script, "w") as f:
        f.write(SQL)
    db = t.path("t.db")

    def prep():
        if os.path.exists(db):
            os.unlink(db)
    plain, rec, out = both(t, [sqlite, db], "sqlite", stdin=SQL.encode(), prep=prep)
    eq(plain.rc, 0, "sqlite3 status")
    check("2000|" in plain.stdout, "sqlite3 output: %r" % plain.stdout[:200])
    plausible(t, out, min_malloc=1000)


@case(timeout=120, labels=("real",))
def test_real_python_threads(t):
    py = which("python3", ["/usr/bin/python3"])
    if not py:
        skip("python3 is not installed")
    py = os.path.realpath(py)
    plain, rec, out = both(t, [py, "-c", PY_THREADS], "python")
    eq(plain.rc, 0, "python status")
    eq(len(plain.stdout.splitlines()), 7, "python output lines")
    s = plausible(t, out, min_malloc=1000, threads=7)
    # Python's join() returns before the OS thread has finished ending, so
    # the process may exit before a thread's exit is recorded.
    eq(s["thread_starts"], 7, "thread starts")
    check(s["thread_exits"] <= 6, "thread exits %d" % s["thread_exits"])


@case(timeout=120, labels=("real",))
def test_real_git(t):
    git = which("git")
    if not git:
        skip("git is not installed")
    env = {"GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
           "GIT_CONFIG_NOSYSTEM": "1", "HOME": t.dir}
    ident = ["-c", "user.name=Heap Trail", "-c", "user.email=ht@example.invalid",
             "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]
    repos = {}
    for label in ("plain", "traced"):
        repo = t.path("repo-" + label)
        os.mkdir(repo)
        for i in range(20):
            with open(os.path.join(repo, "f%02d.txt" % i), "w") as f:
                f.write("line %d\n" % i * (i + 1))
        repos[label] = repo
    results = {}
    for label, repo in repos.items():
        steps = [["init", "-q"], ["add", "."], ["commit", "-q", "-m", "first"],
                 ["log", "--format=%H %s"], ["ls-tree", "-r", "HEAD"]]
        outs = []
        for n, step in enumerate(steps):
            argv = [git] + ident + step
            if label == "plain":
                r = t.run(argv, env=env, cwd=repo, check_rc=0)
            else:
                tr = t.path("git-%d.ht" % n)
                r = t.record(tr, argv, env=env, cwd=repo)
                plausible(t, tr, min_malloc=20 if step[0] == "init" else 100)
            outs.append(r.out)
        results[label] = outs
    eq(results["traced"], results["plain"], "git outputs traced vs untraced")


@case(timeout=180, labels=("real",))
def test_real_gcc(t):
    gcc = which("gcc")
    if not gcc:
        skip("gcc is not installed")
    src = t.path("prog.c")
    with open(src, "w") as f:
        f.write(C_SRC)
    objs = {}
    for label in ("plain", "traced"):
        obj = t.path("prog-%s.o" % label)
        argv = [gcc, "-O1", "-c", src, "-o", obj]
        if label == "plain":
            t.run(argv, check_rc=0, timeout=120)
        else:
            t.record(t.path("gcc.ht"), argv, timeout=120)
        with open(obj, "rb") as f:
            objs[label] = f.read()
    check(objs["plain"] == objs["traced"], "object files differ traced vs untraced")
    plausible(t, t.path("gcc.ht"))
    # the compiler proper too: follow the exec'ed children
    exe = t.path("prog")
    r = t.traced(t.path("all.ht"), [gcc, "-O1", src, "-o", exe],
                 env={"HEAPTRAIL_FOLLOW_EXEC": "1"}, timeout=150)
    eq(t.run([exe], check_rc=0).stdout, "sum 4950\n", "the compiled program's output")
    files = sorted(glob.glob(t.path("all.ht*")))
    check(len(files) >= 3, "expected traces of gcc, cc1, as and ld: %s" % files)
    big = 0
    for f in files:
        s = t.stats(f)
        expect(s, complete=True, closed=True)
        big = max(big, s["calls"]["malloc"])
    check(big > 10000, "the busiest process (cc1) made only %d mallocs" % big)
