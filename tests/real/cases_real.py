"""The transparency suite, tools from Debian's packages: each runs with and
without the tracer and must give the same exit status, stdout and stderr
(realib.same), and every trace it leaves must read to its end
(realib.validate).  A case is skipped when its program is not installed."""

import hashlib
import os
import random

from htlib import case, check, eq
from realib import both, need, plausible, same, validate, validate_all

SQL = """
create table t(id integer primary key, name text, score real);
with recursive n(i) as (select 1 union all select i + 1 from n where i < 2000)
insert into t(name, score) select 'name' || i, i * 1.5 from n;
create index t_score on t(score);
select count(*), sum(score), max(name) from t;
select name from t where score between 100 and 110 order by name;
update t set name = upper(name) where id % 7 = 0;
select count(*) from t where name like 'NAME%';
create table u as select id, group_concat(name) over (order by id rows 5 preceding) g from t;
select count(*), max(length(g)) from u;
delete from t where id > 1000;
vacuum;
select count(*), min(id), max(id) from t;
"""

# the same with an error in the middle: sqlite3 goes on, says it on
# stderr and exits 1 (SQL alone is what cases_replay.py records)
SQL_WITH_ERROR = SQL.replace("delete from", "select * from no_such_table;\ndelete from")


@case(timeout=120, labels=("real",))
def test_real_sqlite3(t):
    """sqlite3 on a script with an error in it: exit 1, the error on
    stderr, the same results."""
    sqlite = need("sqlite3")
    db = t.path("t.db")

    def prep():
        if os.path.exists(db):
            os.unlink(db)
    plain, rec, out = both(t, [sqlite, db], "sqlite", stdin=SQL_WITH_ERROR.encode(),
                           prep=prep)
    eq(plain.rc, 1, "sqlite3 status (the script has an error)")
    check("2000|" in plain.stdout and "no such table" in plain.stderr,
          "sqlite3 output: %r / %r" % (plain.stdout[:200], plain.stderr[:200]))
    plausible(validate(t, out), min_malloc=1000)


GIT_ENV = {"GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
GIT_IDENT = ["-c", "user.name=Heap Trail", "-c", "user.email=ht@example.invalid",
             "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]


@case(timeout=150, labels=("real",))
def test_real_git(t):
    """git on a small repository: init, add, commit, a change, diff, a
    second commit, log -p, ls-tree, gc, fsck; a command that fails."""
    git = need("git")
    env = dict(GIT_ENV, HOME=t.dir)
    repos = {}
    for label in ("plain", "traced"):
        repo = t.path("repo-" + label)
        os.mkdir(repo)
        for i in range(40):
            with open(os.path.join(repo, "f%02d.txt" % i), "w") as f:
                f.write("line %d\n" % i * (i + 1))
        repos[label] = repo

    def edit(repo):
        for i in range(0, 40, 3):
            with open(os.path.join(repo, "f%02d.txt" % i), "a") as f:
                f.write("more %d\n" % i)
    steps = [["init", "-q"], ["add", "."], ["commit", "-q", "-m", "first"], edit,
             ["diff", "--stat"], ["diff"], ["commit", "-q", "-a", "-m", "second"],
             ["log", "-p", "--format=%H %s"], ["ls-tree", "-r", "HEAD"],
             ["gc", "-q"], ["fsck", "--no-progress"], ["show", "no-such-ref"],
             ["rev-list", "--count", "--all"]]
    n = 0
    for step in steps:
        if callable(step):
            step(repos["plain"])
            step(repos["traced"])
            continue
        argv = [git] + GIT_IDENT + step
        plain = t.run(argv, env=env, cwd=repos["plain"])
        tr = t.path("git-%d.ht" % n)
        n += 1
        rec = t.run([t.heaptrail, "record", "-o", tr, "--"] + argv, env=env,
                    cwd=repos["traced"])
        # the repositories' names differ: the only normalization
        same(t, "git " + step[0], plain, rec, tr,
             norm=lambda b: b.replace(b"repo-traced", b"repo-plain"))
        s = validate(t, tr)
        if step[0] not in ("show", "rev-list"):
            plausible(s, min_malloc=20 if step[0] == "init" else 100)
    eq(plain.stdout, "2\n", "commits")


C_SRC = r"""
#include <stdio.h>
#include <stdlib.h>
struct node { int v; struct node *next; };
int main(void) {
    struct node *h = NULL;
    int unused;
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


@case(timeout=180, labels=("real",))
def test_real_gcc(t):
    """gcc compiling a file with a warning (on stderr): the same object file
    and the same warning; then, following exec, every process (gcc, cc1,
    as, collect2, ld) traced, and the program it built runs."""
    gcc = need("gcc")
    src = t.path("prog.c")
    with open(src, "w") as f:
        f.write(C_SRC)
    objs = {}

    def build(label):
        return [gcc, "-O1", "-Wall", "-c", src, "-o", t.path("prog-%s.o" % label)]
    plain = t.run(build("plain"), timeout=120)
    rec = t.run([t.heaptrail, "record", "-o", t.path("gcc.ht"), "--"] + build("traced"),
                timeout=120)
    same(t, "gcc", plain, rec, t.path("gcc.ht"))
    eq(plain.rc, 0, "gcc status")
    check(b"unused variable" in plain.err, "gcc's warning: %r" % plain.stderr)
    for label in ("plain", "traced"):
        with open(t.path("prog-%s.o" % label), "rb") as f:
            objs[label] = f.read()
    check(objs["plain"] == objs["traced"], "object files differ traced vs untraced")
    plausible(validate(t, t.path("gcc.ht")))
    # the compiler proper too: follow the exec'ed children
    exe = t.path("prog")
    t.run([t.heaptrail, "record", "--follow-exec", "-o", t.path("all.ht"), "--",
           gcc, "-O1", src, "-o", exe], timeout=150, check_rc=0)
    eq(t.run([exe], check_rc=0).stdout, "sum 4950\n", "the compiled program's output")
    res = validate_all(t, t.path("all.ht"))
    check(len(res) >= 3, "expected traces of gcc, cc1, as and ld: %s" % sorted(res))
    big = max(s["calls"]["malloc"] for s in res.values())
    check(big > 10000, "the busiest process (cc1) made only %d mallocs" % big)


PERL = r"""
use strict; use warnings;
my %count; my %first;
my @words = map { sprintf("w%03d_%s", $_ % 397, "x" x ($_ % 13)) } 1 .. 20000;
for my $i (0 .. $#words) {
    my $w = $words[$i];
    $count{$w}++;
    $first{$w} //= $i;
}
my $re = qr/^w(\d)(\d)\d_(x{3,7})$/;
my %bydigit;
for my $w (keys %count) {
    if ($w =~ $re) { push @{ $bydigit{"$1$2"} }, length($3); }
}
for my $k (sort keys %bydigit) {
    my @v = sort { $a <=> $b } @{ $bydigit{$k} };
    print "$k ", scalar(@v), " ", join(",", @v[0 .. 2]), "\n";
}
(my $s = join(" ", @words[0 .. 999])) =~ s/(w\d+)_(x*)/$2$1/g;
print length($s), " ", ($s =~ tr/x//), "\n";
pipe(my $r, my $w) or die;
my $pid = fork();
die "fork: $!" unless defined $pid;
if ($pid == 0) {
    close $r;
    my %h = map { $_ => $_ * $_ } 1 .. 5000;
    my $sum = 0; $sum += $h{$_} for keys %h;
    print $w "child $sum\n";
    close $w;
    exit 3;
}
close $w;
my $line = <$r>;
waitpid($pid, 0);
print $line, "child exit ", $? >> 8, "\n";
warn "perl: done with ", scalar(keys %count), " words\n";
exit 5;
"""


@case(timeout=120, labels=("real",))
def test_real_perl(t):
    """perl: hashes, regular expressions, substitutions, a pipe and a fork
    (the child's trace too), a warning on stderr, exit 5."""
    perl = need("perl")
    script = t.path("s.pl")
    with open(script, "w") as f:
        f.write(PERL)
    plain, rec, out = both(t, [perl, script], "perl")
    eq(plain.rc, 5, "perl status")
    check("child exit 3" in plain.stdout, "perl output: %r" % plain.stdout[-300:])
    res = validate_all(t, out)
    eq(len(res), 2, "traces of perl and its fork child: %s" % sorted(res))
    parent, child = res[out], [s for p, s in res.items() if p != out][0]
    plausible(parent, min_malloc=5000)
    eq(parent["forks"], 1, "the parent's forks")
    plausible(child, min_malloc=1000)


def big_input(path, mb):
    """mb MiB of text lines, half compressible, the same every run."""
    rnd = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    with open(path, "w") as f:
        size = 0
        n = 0
        while size < mb << 20:
            if n % 2:
                line = "%08x %s\n" % (rnd.getrandbits(32), rnd.randbytes(24).hex())
            else:
                line = "%s %d %s\n" % (rnd.choice(words), rnd.randrange(100000),
                                       " ".join(rnd.choice(words) for _ in range(6)))
            f.write(line)
            size += len(line)
            n += 1


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@case(timeout=240, labels=("real",))
def test_real_xz_threads(t):
    """`xz -T2 -1` on 16 MiB (3 MiB blocks, so both worker threads work):
    the same compressed bytes traced and untraced; `xz -d -T2` gives the
    input back; both traces read with their threads."""
    xz = need("xz")
    data = t.path("in.txt")
    big_input(data, 16)
    want = sha(data)
    plain, rec, out = both(t, [xz, "-T2", "-1", "-c", data], "xz", compare_out=False,
                           timeout=200)
    eq(plain.rc, 0, "xz status")
    eq(hashlib.sha256(rec.out).hexdigest(), hashlib.sha256(plain.out).hexdigest(),
       "compressed output (sha256) traced vs untraced")
    with open(t.path("out.xz"), "wb") as f:
        f.write(plain.out)
    s = validate(t, out)
    check(s["threads"] >= 3, "xz -T2 ran %d threads" % s["threads"])
    plausible(s, min_malloc=10)
    # decompression, traced, through stdin/stdout
    plain, rec, out = both(t, [xz, "-d", "-T2", "-c", t.path("out.xz")], "unxz",
                           compare_out=False)
    eq(hashlib.sha256(rec.out).hexdigest(), want, "xz -d gives the input back")
    validate(t, out)


@case(timeout=240, labels=("real",))
def test_real_sort_parallel(t):
    """`sort --parallel=2` on 32 MiB of lines (a multi-threaded merge sort
    in memory): the same sorted output (sha256) and a trace with its
    threads; then a numeric, reversed, keyed sort with unique."""
    sort = need("sort")
    data = t.path("in.txt")
    big_input(data, 32)
    for name, argv in (("sort", [sort, "--parallel=2", "-S", "256M", data]),
                       ("sortk", [sort, "--parallel=2", "-S", "256M", "-u", "-k2,2nr", "-k1,1",
                                  data])):
        plain, rec, out = both(t, argv, name, compare_out=False, timeout=200)
        eq(plain.rc, 0, "%s status" % name)
        eq(hashlib.sha256(rec.out).hexdigest(), hashlib.sha256(plain.out).hexdigest(),
           "%s output (sha256) traced vs untraced" % name)
        s = validate(t, out)
        check(s["threads"] >= 2, "%s ran %d threads" % (name, s["threads"]))
    lines = plain.out.count(b"\n")
    check(lines > 1000, "sort -u lines: %d" % lines)
