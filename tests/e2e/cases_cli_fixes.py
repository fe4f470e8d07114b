"""Command-line edges that said one thing and did another: `--to 0` taken
for no `--to` by heap and events (the whole trace), `leaks -n 0` showing
no group, `record --compact-level=0` and `--stacks=0` accepted and doing
nothing, the progress line counting the two parts of a moving realloc,
dump saying nothing of a `--from` past the end or a `--tid` with no
event, `help` of an unknown command printing the general usage, record's
suggested command not pasting for a name with a space, `timeline -q`
still saying "wrote", and `-` as a trace taken for a missing file."""

import json
import os
import re
import shutil

from htlib import case, check, compile_c, eq
from cases_progress import on_tty
from cases_reader import fmt_ns

# Three leak sites of known sizes (3000, 2000 and 1000 bytes), nothing
# freed: one trace for the analyzers' cases.
LEAKS = r"""
#include <stdlib.h>
__attribute__((noinline)) void *site_a(void) { return malloc(1000); }
__attribute__((noinline)) void *site_b(void) { return malloc(1000); }
__attribute__((noinline)) void *site_c(void) { return malloc(1000); }
int main(void)
{
	for (int i = 0; i < 3; i++)
		site_a();
	for (int i = 0; i < 2; i++)
		site_b();
	site_c();
	return 0;
}
"""

# 30,000 realloc(p, 0) (each frees its block: the reader delivers it in
# two parts), 2000 callocs and their frees, 30,000 more: 124,000 events.
REALLOCS = r"""
#include <stdlib.h>
int main(void)
{
	void *c[2000];
	for (int i = 0; i < 30000; i++)
		c[0] = realloc(malloc(16), 0);
	for (int i = 0; i < 2000; i++)
		c[i] = calloc(1, 24);
	for (int i = 0; i < 2000; i++)
		free(c[i]);
	for (int i = 0; i < 30000; i++)
		c[0] = realloc(malloc(16), 0);
	return 0;
}
"""


def leaks_trace(t):
    out = t.path("lk.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--",
           compile_c(t, "lk", LEAKS)], check_rc=0)
    return out


def one_error(t, args, rc, line, cwd=None, stdin=None):
    """heaptrail ARGS: exit rc, nothing on stdout, exactly line on stderr."""
    r = t.run([t.heaptrail] + list(args), cwd=cwd, stdin=stdin)
    eq(r.rc, rc, "%s: exit status:\n%s" % (" ".join(args), r.describe()))
    eq(r.stdout, "", "%s: stdout" % " ".join(args))
    eq(r.stderr, line + "\n", "%s: stderr" % " ".join(args))


@case(labels=("analyzers",))
def test_cli_to_zero(t):
    """An explicit `--to 0` is a time, not "no --to": heap and events
    refuse it as timeline does (the window ends before it starts), exit 2;
    dump takes it as the window [0, 0] and prints nothing.  Before: heap
    reported the whole trace with no "window:" line, events listed the
    heap_break of the whole run.  heap also refuses --to equal to --from,
    as events and timeline; dump refuses --to 0 after --from (it took it
    for no --to there)."""
    tr = leaks_trace(t)
    for cmd in ("heap", "events", "timeline"):
        one_error(t, [cmd, "--to", "0", tr], 2, "heaptrail: error: --to must come after --from")
    one_error(t, ["heap", "--from", "1ms", "--to", "1ms", tr], 2,
              "heaptrail: error: --to must come after --from")
    r = t.tool(["dump", "--to", "0", tr])
    eq((r.rc, r.stdout), (0, ""), "dump --to 0:\n" + r.describe())
    one_error(t, ["dump", "--from", "1ms", "--to", "0", tr], 2,
              "heaptrail: error: --to must come after --from")
    # a --from past the end of a finished trace: a usage error naming how
    # long it lasts, from events as from dump, heap and timeline (probe V:
    # events said "no calls matched the filters", exit 0)
    for cmd in ("events", "dump"):
        r = t.tool([cmd, "--from", "1h", tr])
        eq(r.rc, 2, "%s --from 1h:\n%s" % (cmd, r.describe()))
        check(re.match(r"heaptrail: error: --from=3600\.000 s: the trace .* lasts ", r.stderr),
              "%s --from 1h: %r" % (cmd, r.stderr))
    # and diff, in the same words (it said "T: 3600.000 s is past the end of
    # the trace (D)"), naming the option that gave the time
    for args, opt in ((["--from", "1h"], "--from"), (["--at", "start", "--at", "1h"], "--at")):
        r = t.tool(["diff"] + args + [tr])
        eq(r.rc, 2, "diff %s:\n%s" % (args, r.describe()))
        check(re.match(r"heaptrail: error: %s=3600\.000 s: the trace .* lasts " % opt, r.stderr),
              "diff %s: %r" % (args, r.stderr))
    # a time that is no duration: timeline's words are every command's
    one_error(t, ["timeline", "--from", "1x", tr], 2, "heaptrail: error: --from: '1x' is not a "
              "duration like 1.5s, 200ms or 30us (under 292 years)")
    # a --to that is a time after the start still works, with its window
    r = t.tool(["heap", "--to", "1h", tr])
    eq(r.rc, 0, "heap --to 1h:\n" + r.describe())
    eq(r.stdout.splitlines()[1][:31], "window: 0 ns .. 3600.000 s: cal", "heap --to 1h")


@case(labels=("analyzers",))
def test_cli_leaks_top_zero(t):
    """`leaks -n 0` shows every group, as `top -n 0` and `diff -n 0` do:
    the three sites, 3000, 2000 and 1000 bytes, in the text and the JSON,
    and no "... and N more stacks".  Before: no group, then "... and 3
    more stacks (--top to see more)"; JSON "groups": []."""
    tr = leaks_trace(t)
    r = t.tool(["leaks", "-n", "0", tr])
    eq(r.rc, 0, "leaks -n 0:\n" + r.describe())
    heads = re.findall(r"^(\d+) bytes in (\d+) allocations? from stack\n\t(\w+) ", r.stdout, re.M)
    eq(heads, [("3000", "3", "site_a"), ("2000", "2", "site_b"), ("1000", "1", "site_c")],
       "leaks -n 0: the groups")
    check("more stacks" not in r.stdout, "leaks -n 0:\n" + r.stdout)
    r = t.tool(["leaks", "-n", "0", "--json", tr])
    eq(r.rc, 0, "leaks -n 0 --json:\n" + r.describe())
    groups = json.loads(r.stdout)["groups"]
    eq([(g["bytes"], g["blocks"], g["stack"][0]["function"]) for g in groups],
       [(3000, 3, "site_a"), (2000, 2, "site_b"), (1000, 1, "site_c")], "leaks -n 0 --json")
    # -n 1 still shows one
    r = t.tool(["leaks", "-n", "1", tr])
    check("\n... and 2 more stacks (--top to see more)" in r.stdout, "leaks -n 1:\n" + r.stdout)


@case()
def test_cli_record_zero_levels(t):
    """`record --compact-level=0` and `--stacks=0` are refused with the
    messages of their other bad values, exit 2, the program not run.
    Before: the first recorded without compacting (the help says it
    implies --compact), the second recorded no stacks."""
    mark = t.path("ran")
    prog = ["--", "/bin/sh", "-c", "touch " + mark]
    one_error(t, ["record", "--compact-level=0", "-o", "a.ht"] + prog, 2,
              "heaptrail: error: --zstd-level takes -7..19 (0: raw) and --compact-level 1..19")
    one_error(t, ["record", "--stacks=0", "-o", "b.ht"] + prog, 2,
              "heaptrail: error: --stacks=0: the depth goes from 1 to 256")
    check(not os.path.exists(mark), "the program ran")
    eq(sorted(os.listdir(t.dir)), [], "files written")
    # the bounds themselves are taken
    r = t.run([t.heaptrail, "record", "-q", "--compact-level=19", "--stacks=1", "-o", "c.ht",
               "--", t.prog("oneline")])
    eq(r.rc, 0, "--compact-level=19 --stacks=1:\n" + r.describe())


@case(labels=("analyzers",))
def test_cli_progress_counts_events(t):
    """The progress line counts the events stats counts: a realloc that
    frees its block is one event, though the reader delivers it in two
    parts.  A trace of 124,002 events of which 60,000 such reallocs: no
    line says more (before: "131.1 k events", the second part counted;
    3.9 M of a 3.0 M trace).  dump's output of the callocs in the middle
    is held in a pipe for 0.4 s, so that a later line is drawn."""
    tr = t.path("r.ht")
    t.run([t.heaptrail, "record", "-q", "-o", tr, "--", compile_c(t, "rl", REALLOCS)], check_rc=0)
    events = t.stats(tr)["events"]
    check(124000 <= events <= 124100, "events of the trace: %d" % events)
    seen = on_tty(t, "%s dump --kind calloc %s | (sleep 0.4; cat > /dev/null)"
                  % (t.heaptrail, tr), 0)
    counts = []
    for n, unit in re.findall(r"reading: .*?, ([\d.]+) ?([kMG]?) ?events", seen):
        counts.append(float(n) * {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}[unit])
    check(counts, "no progress line: %r" % seen[-300:])
    check(max(counts) <= events, "progress lines say %s events of a trace of %d"
          % (counts, events))


@case(labels=("analyzers",))
def test_cli_dump_window_and_thread(t):
    """dump says, as heap, timeline, top and flamegraph do, when --from is
    past the end of the trace and when a --tid thread has no event in it
    (after the events of the others), exit 2.  Before: nothing printed,
    no message, exit 0."""
    tr = leaks_trace(t)
    dur = t.stats(tr)["duration_ns"]
    one_error(t, ["dump", "--from", "1h", tr], 2,
              "heaptrail: error: --from=3600.000 s: the trace %s lasts %s" % (tr, fmt_ns(dur)))
    one_error(t, ["dump", "--tid", "1", tr], 2,
              "heaptrail: error: --tid=1: no event of thread 1 in %s (its threads: "
              "'heaptrail stats %s' lists them)" % (tr, tr))
    pid = json.loads(t.tool(["leaks", "--json", tr]).stdout)["pid"]
    whole = t.tool(["dump", tr])
    r = t.tool(["dump", "--tid", "%d,1" % pid, tr])
    eq(r.rc, 2, "dump --tid PID,1:\n" + r.describe())
    eq(r.stdout, whole.stdout, "dump --tid PID,1: the program's events")
    check("--tid=1: no event of thread 1" in r.stderr, r.stderr)
    # a --from within the trace, a --tid of its thread: no message
    r = t.tool(["dump", "--from", "%dns" % (dur // 2), "--tid", str(pid), tr])
    eq((r.rc, r.stderr), (0, ""), "dump --from half --tid PID:\n" + r.describe())


@case()
def test_cli_help_unknown_command(t):
    """`heaptrail help NAME` of no command is a usage error, as
    `heaptrail NAME` is: the name meant if it is clear, exit 2, nothing on
    stdout.  Before: the general usage, exit 0."""
    one_error(t, ["help", "nosuch"], 2, "heaptrail: error: 'nosuch' is not a heaptrail command; "
              "run 'heaptrail help' for the list")
    one_error(t, ["help", "stat"], 2, "heaptrail: error: 'stat' is not a heaptrail command; "
              "did you mean 'stats'? ('heaptrail help' lists them)")
    r = t.tool(["help", "stats"])
    eq(r.rc, 0, "help stats:\n" + r.describe())
    check(r.stdout.startswith("usage: heaptrail stats"), "help stats: " + r.stdout[:200])


@case()
def test_cli_record_name_pastes(t):
    """record's summary names the trace as one POSIX shell word, and the
    command it suggests pastes as one argument: as it is when plain; in
    single quotes (a quote as '\\'') for a space, '$', '*', a quote or a
    backslash; $'...' only for a control character.  Read back by sh and
    bash, the word is the file's name, and the suggested command runs.
    Before: 'tr ü ace.ht' was shown bare (three words), 'a$b *.ht' too;
    then a quoted word nested in the command's own quotes."""
    names = (("tr \u00fc ace.ht", "'tr \u00fc ace.ht'"), ("a$b *.ht", "'a$b *.ht'"),
             ("it's.ht", "'it'\\''s.ht'"), ("back\\slash.ht", "'back\\slash.ht'"),
             ("nl\nx.ht", "$'nl\\nx.ht'"), ("tab\t'q.ht", "$'tab\\t\\'q.ht'"),
             ("plain-1.ht", "plain-1.ht"))
    for name, word in names:
        r = t.run([t.heaptrail, "record", "-o", name, "--", t.prog("oneline")], cwd=t.dir)
        eq(r.rc, 0, "%r: %s" % (name, r.describe()))
        lines = r.stderr.splitlines()
        eq(len(lines), 1, "%r: one line:\n%s" % (name, r.stderr))
        see = ("see heaptrail stats %s" if word[0] in "'$" else "see 'heaptrail stats %s'") % word
        check(" to %s (" % word in lines[0] and lines[0].endswith(see),
              "%r: the line names %s and ends with %s: %s" % (name, word, see, lines[0]))
        check(os.path.isfile(t.path(name)), "%r: no such file" % name)
        # the command suggested, pasted into bash, reads the trace (before,
        # a quoted word nested in the outer quotes: "see 'heaptrail stats
        # 'a$b *.ht''")
        cmd = see[len("see "):].strip("'") if word[0] not in "'$" else see[len("see "):]
        b = t.run(["bash", "-c", cmd], cwd=t.dir,
                  env={"PATH": os.path.dirname(t.heaptrail) + ":" + os.environ["PATH"]})
        eq(b.rc, 0, "%r: the command %s pasted into bash:\n%s" % (name, cmd, b.describe()))
        shells = ["bash"] + (["sh"] if not word.startswith("$") else [])
        for sh in shells:
            b = t.run([sh, "-c", "printf %%s %s" % word], env={"LC_ALL": "C.UTF-8"})
            eq(b.stdout, name, "%r: the word read back by %s" % (name, sh))


@case(labels=("analyzers",))
def test_cli_timeline_quiet(t):
    """`timeline -q -o FILE` writes the file and says nothing, as
    flamegraph -q and report -q (before: "wrote FILE: ..."); without -q
    the line is there."""
    tr = leaks_trace(t)
    r = t.tool(["timeline", "-q", "-o", t.path("q.svg"), tr])
    eq((r.rc, r.stderr), (0, ""), "timeline -q:\n" + r.describe())
    with open(t.path("q.svg")) as f:
        check("<svg" in f.read(), "timeline -q wrote no SVG")
    r = t.tool(["timeline", "-o", t.path("v.svg"), tr])
    check(r.rc == 0 and r.stderr.startswith("heaptrail: wrote %s: 1000 time bins" % t.path("v.svg")),
          "timeline without -q:\n" + r.describe())


@case(labels=("analyzers",))
def test_cli_dash_trace(t):
    """`cat app.ht | heaptrail stats -` says that traces are read from
    files, not from standard input (before: "-: cannot open: No such file
    or directory"), exit 1, as for any missing file, in every command that
    reads a trace or a workload; a file named '-' is read."""
    tr = leaks_trace(t)
    with open(tr, "rb") as f:
        data = f.read()
    msg = ("heaptrail: error: -: no such file; traces are read from regular files, not from "
           "standard input: give the trace's file name (./- for a file named '-')")
    for cmd in (["stats"], ["leaks"], ["dump"], ["compact"], ["live"], ["export", "-f", "csv"],
                ["convert", t.path("x.wl")]):
        one_error(t, cmd + ["-"], 1, msg, stdin=data)
    # a workload likewise (replay and compare said "cannot open -: No such
    # file or directory", compact, live and export "-: cannot open: ...")
    wmsg = msg.replace("traces", "workloads").replace("trace's", "workload's")
    for cmd in ("replay", "compare"):
        one_error(t, [cmd, "-"], 1, wmsg, stdin=data)
    shutil.copy(tr, t.path("-"))
    r = t.tool(["stats", "-"])
    eq(r.rc, 0, "stats of a file named '-':\n" + r.describe())


@case()
def test_cli_compare_quiet(t):
    """`compare -q` leaves out the progress line on a terminal, as -q of
    every other command (before: no -q, an unknown option, exit 2); without
    -q the line is drawn."""
    tr = leaks_trace(t)
    wl = t.path("lk.wl")
    t.run([t.heaptrail, "convert", wl, tr], check_rc=0)
    for quiet in ("-q ", ""):
        seen = on_tty(t, "%s compare %s-n 1 -o %s %s > /dev/null"
                      % (t.heaptrail, quiet, t.path("c.svg"), wl), 0)
        eq("compare: runs:" in seen, not quiet, "compare %s-n 1 on a terminal: %r"
           % (quiet, seen[-300:]))


@case()
def test_cli_record_live_cannot_run(t):
    """`record --live -- ./typo` on a terminal says it cannot run it, exit
    127, and leaves no OUTPUT.out (before: only the exit status showed;
    the message was in OUTPUT.out, left behind)."""
    seen = on_tty(t, "cd %s && %s record --live -o nx.ht -- ./nonexist; echo rc=$?"
                  % (t.dir, t.heaptrail), 1000)
    check("heaptrail: cannot run './nonexist': No such file or directory" in seen,
          "on the terminal: %r" % seen[-400:])
    check("rc=127" in seen, "exit status: %r" % seen[-200:])
    eq(sorted(f for f in os.listdir(t.dir) if f.startswith("nx.ht")), [], "files left")


@case()
def test_cli_record_stacks_value_apart(t):
    """`record --stacks 8 -- prog`: getopt gives --stacks its default and
    takes 8 for the command; the error says how to give the value (probe
    V: "cannot run '8'" alone, which a perf or valgrind user does not
    expect).  A command that is not a number gets no such hint."""
    r = t.run([t.heaptrail, "record", "--stacks", "8", "-o", t.path("s.ht"), "--", "/bin/true"])
    eq(r.rc, 127, r.describe())
    eq(r.heaptrail_lines(), ["heaptrail: cannot run '8': No such file or directory (a value of "
                             "--stacks goes with '=': --stacks=DEPTH; given apart, it is taken "
                             "for the command)"], "the line")
    r = t.run([t.heaptrail, "record", "-o", t.path("n.ht"), "--", t.path("nonexist")])
    eq(r.rc, 127, r.describe())
    check("--stacks" not in r.stderr, "a command that is not a number:\n" + r.stderr)


@case()
def test_cli_output_name_chooses_format(t):
    """`timeline -o heap.csv` writes CSV and `-o heap.json` JSON, and
    `flamegraph -o app.folded` (or .txt) folded stacks, as diff's -o
    NAME.svg chooses its SVG (probe V: an SVG went into each, with no
    word); an explicit format flag still wins."""
    trace = t.path("s.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", trace, "--", t.prog("leaky")],
          check_rc=0)
    t.run([t.heaptrail, "timeline", "-q", "-o", t.path("h.csv"), trace], check_rc=0)
    with open(t.path("h.csv")) as f:
        check(f.readline().startswith("bin,start_ns,end_ns"), "h.csv is not CSV")
    t.run([t.heaptrail, "timeline", "-q", "-o", t.path("h.json"), trace], check_rc=0)
    with open(t.path("h.json")) as f:
        json.load(f)
    t.run([t.heaptrail, "timeline", "-q", "--json", "-o", t.path("j.csv"), trace], check_rc=0)
    with open(t.path("j.csv")) as f:
        json.load(f)  # (the flag wins)
    for name in ("a.folded", "a.txt"):
        t.run([t.heaptrail, "flamegraph", "-q", "-o", t.path(name), trace], check_rc=0)
        with open(t.path(name)) as f:
            text = f.read()
        check(text and not text.startswith("<") and all(
            l.rsplit(" ", 1)[1].isdigit() for l in text.splitlines()),
            "%s is not folded stacks:\n%s" % (name, text[:300]))


@case()
def test_cli_convert_output_option(t):
    """convert takes -o OUT.wl as every command that writes a file does
    (probe V: "unknown option '-o'"), and refuses "-" for its output, which
    it wrote as a file named "-"."""
    trace = t.path("p.ht")
    t.run([t.heaptrail, "record", "-q", "-o", trace, "--", t.prog("prodcons"), "100"],
          check_rc=0)
    r = t.run([t.heaptrail, "convert", "-q", "-o", t.path("o.wl"), trace])
    eq(r.rc, 0, r.describe())
    with open(t.path("o.wl"), "rb") as f:
        eq(f.read(8), b"HTWLOAD\n", "the workload's magic")
    r = t.run([t.heaptrail, "convert", "-q", "-o", t.path("o2.wl"), t.path("x.wl"), trace])
    eq((r.rc, r.heaptrail_lines()[:1]), (2, ["heaptrail: error: too many arguments; usage: "
                                              "heaptrail convert [options] OUT.wl TRACE"]),
       "-o and OUT.wl both")
    r = t.run([t.heaptrail, "convert", "-", trace], cwd=t.dir)
    eq(r.rc, 2, r.describe())
    check("not to standard output" in r.stderr, "convert -:\n" + r.stderr)
    check(not os.path.exists(t.path("-")), "a file named '-' was written")
