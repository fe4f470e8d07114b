"""The traced program's environment (issue 17, item 10): `record` passes its
options in one variable, HEAPTRAIL_OPTIONS, and the recorder takes it and
its own entry of LD_PRELOAD out of the program's environment at start-up:
the program sees its own environment, allocates what it would untraced
when it copies it, and the programs it starts without --follow-exec
inherit nothing of the recorder's."""

from htlib import case, check, eq, expect, expect_calls, fail

# the variables of the test's own, besides the environment the tests run in
USER_VARS = dict(("HT_ENV_TEST_%02d" % i, "value %d" % i) for i in range(25))
# a variable of the recorder's set by the user for something else: under
# record it is the program's, untouched, and counts for nothing
USER_VARS["HEAPTRAIL_STACKS"] = "7"
OURS = ("LD_PRELOAD", "HEAPTRAIL_OPTIONS")


def environments(run):
    """(the program's environment, its exec'd child's), as lists of
    entries in order, from envcopy's output."""
    mine, child, copied = [], [], None
    for line in run.stdout.splitlines():
        if line.startswith("env: "):
            mine.append(line[5:])
        elif line.startswith("copied: "):
            copied = int(line[8:])
        else:
            child.append(line)
    eq(copied, len(mine), "envcopy's count")
    return mine, child


def same_env(got, want, what):
    """got == want, entry for entry and in order; else a failure that says
    what was added and what is missing."""
    if got == want:
        return
    added = [e for e in got if e not in want]
    missing = [e for e in want if e not in got]
    fail("%s: %d entries, %d expected; added %s, missing %s%s" % (
        what, len(got), len(want), added, missing,
        "" if added or missing else " (the order differs)"))


def names(env):
    return [e.split("=", 1)[0] for e in env]


def without_ours(env):
    return [e for e in env if e.split("=", 1)[0] not in OURS]


@case()
def test_record_environment_untouched(t):
    """record (default options): the program's environment is exactly the
    one it gets untraced, entry for entry, in order; so is that of the
    child it forks and that child's exec'd image (/usr/bin/env, not
    followed); and the program's copy of its environment is exactly one
    malloc and one free per entry of it (before: 18 HEAPTRAIL_* variables
    and LD_PRELOAD more, copied by every program that copies its
    environment, and inherited by every program it started)."""
    prog = [t.prog("envcopy"), "exec"]
    plain_mine, plain_child = environments(t.run(prog, env=USER_VARS, check_rc=0))
    check(len(plain_mine) >= len(USER_VARS), "the test's variables: %s" % plain_mine)
    out = t.path("e.ht")
    r = t.record(out, prog, env=USER_VARS)
    mine, child = environments(r)
    same_env(mine, plain_mine, "the program's environment under record")
    same_env(child, plain_child, "its exec'd child's environment under record")
    s = t.stats(out)
    n = len(plain_mine)
    expect_calls(s, {"malloc": n, "free": n})
    expect(s, bytes_allocated=sum(len(e) + 1 for e in plain_mine), complete=True)


@case()
def test_record_follow_exec_environment(t):
    """record --follow-exec: the program and the images its children exec
    see their own environment plus LD_PRELOAD and HEAPTRAIL_OPTIONS, no
    other variable (and LD_PRELOAD names only the library); the copy is
    one malloc per entry the program sees."""
    prog = [t.prog("envcopy"), "exec"]
    plain_mine, plain_child = environments(t.run(prog, env=USER_VARS, check_rc=0))
    out = t.path("f.ht")
    r = t.run([t.heaptrail, "record", "--follow-exec", "-o", out, "--"] + prog,
              env=USER_VARS, check_rc=0)
    mine, child = environments(r)
    for what, env, plain in (("the program", mine, plain_mine),
                             ("its exec'd child", child, plain_child)):
        same_env(without_ours(env), plain, "%s's environment besides ours" % what)
        eq(sorted(set(names(env)) - set(names(plain))), sorted(OURS),
           "%s: the variables added" % what)
        eq(len(env), len(plain) + 2, "%s: the number of entries" % what)
        check("LD_PRELOAD=%s" % t.preload in env, "%s: LD_PRELOAD: %s" % (what, env))
        opts = [e for e in env if e.startswith("HEAPTRAIL_OPTIONS=")][0]
        check("follow_exec=1" in opts and opts.endswith(",out=%s" % out),
              "%s: %s" % (what, opts))
    n = len(mine)
    expect_calls(t.stats(out), {"malloc": n, "free": n})


@case()
def test_preload_environment(t):
    """LD_PRELOAD=libheaptrail.so HEAPTRAIL_OUT=... by hand: the program
    sees the variables the user set (HEAPTRAIL_OUT among them), but not the
    library in LD_PRELOAD; its untraced child neither."""
    prog = [t.prog("envcopy"), "exec"]
    out = t.path("p.ht")
    user = dict(USER_VARS, HEAPTRAIL_OUT=out)
    plain_mine, plain_child = environments(t.run(prog, env=user, check_rc=0))
    r = t.run(prog, env=dict(user, LD_PRELOAD=t.preload), check_rc=0)
    mine, child = environments(r)
    same_env(mine, plain_mine, "the program's environment")
    same_env(child, plain_child, "its exec'd child's environment")
    n = len(plain_mine)
    expect_calls(t.stats(out), {"malloc": n, "free": n})


@case()
def test_record_help_names_options_variable(t):
    """record --help names HEAPTRAIL_OPTIONS, the one variable of the
    recorder's, for plain LD_PRELOAD."""
    r = t.tool(["record", "--help"])
    eq(r.rc, 0, "record --help status")
    check("HEAPTRAIL_OPTIONS=" in r.stdout, "record --help:\n%s" % r.stdout)


@case()
def test_preload_options_variable(t):
    """HEAPTRAIL_OPTIONS by hand with LD_PRELOAD: its options are used and
    the individual variables are not (HEAPTRAIL_SAMPLE_BYTES below); out=
    comes last and takes the rest, commas included; an unknown name is one
    warning naming it; the program sees neither the variable nor the
    library."""
    prog = [t.prog("envcopy")]
    out = t.path("a,b.ht")
    user = dict(USER_VARS, HEAPTRAIL_SAMPLE_BYTES="999")
    plain_mine, _ = environments(t.run(prog, env=user, check_rc=0))
    opts = "sample_bytes=4096,bogus=1,out=%s" % out
    r = t.run(prog, env=dict(user, LD_PRELOAD=t.preload, HEAPTRAIL_OPTIONS=opts), check_rc=0)
    mine, _ = environments(r)
    same_env(mine, plain_mine, "the program's environment")
    eq(r.heaptrail_lines(), ["heaptrail: warning: HEAPTRAIL_OPTIONS: bogus: no such option; "
                             "ignored"], "the recorder's lines")
    s = t.stats(out)
    expect(s, sampled=True, sample_bytes=4096, complete=True)
