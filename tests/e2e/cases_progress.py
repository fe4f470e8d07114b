"""Progress of long analyses (issue 21, item 4; src/common/util.c,
ht_progress): on a terminal, once an analysis has run for a second
(HEAPTRAIL_PROGRESS_AFTER, in ms), a line on stderr with the percent of
the file read, its size, the events read and the rate; never with -q,
never when stderr is not a terminal, never for an analysis quicker than
the delay.  The terminal is a real pseudo-terminal: script(1) from
util-linux/bsdutils."""

import re

from htlib import case, check, eq, skip, which

LINE = re.compile(r"reading: +\d+\.\d% of [\d.]+ [KMG]?i?B, [\d.]+ [kMG]? ?events, [\d.]+ M/s")


def on_tty(t, cmd, after):
    script = which("script")
    if not script:
        skip("script (bsdutils) is not installed")
    r = t.run([script, "-qec", cmd, "/dev/null"], env={"HEAPTRAIL_PROGRESS_AFTER": str(after)},
              timeout=120)
    eq(r.rc, 0, "script -c %s:\n%s" % (cmd, r.describe()))
    return r.out.decode("utf-8", "replace")


@case(labels=("analyzers",))
def test_progress_on_terminal(t):
    """Every command that reads a trace (stats, leaks, top, heap, dump,
    flamegraph, export, timeline, diff) on a terminal prints the progress line (delay 0
    here: the machine's speed does not matter), with a rate that is not 0,
    and clear it at the end;
    -q and a stderr that is not a terminal keep it off; with the default
    delay a quick analysis shows none."""
    out = t.path("p.ht")  # with stacks: diff and flamegraph have nothing to say otherwise
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", t.prog("threads"), "3",
           "100000"], check_rc=0)
    for c in ("stats", "leaks", "top", "heap", "dump", "flamegraph --folded", "export -f csv",
              "timeline --csv -o -", "diff %s" % out):
        seen = on_tty(t, "%s %s %s > /dev/null" % (t.heaptrail, c, out), 0)
        lines = [l for l in seen.replace("\r", "\n").splitlines() if "reading:" in l]
        check(lines, "%s on a terminal: no progress line in %r" % (c, seen[-300:]))
        check(all(LINE.search(l) for l in lines), "%s: progress lines %r" % (c, lines[:3]))
        # the rate counts from the command's start: never 0.0 on a line
        # that has read events (the first one with no delay said 0.0)
        check(not any(" 0.0 M/s" in l for l in lines), "%s: a rate of 0: %r" % (c, lines[:3]))
        check(seen.rstrip("\n").endswith("\x1b[K"), "%s: the line is not cleared: %r" % (c, seen[-80:]))
        quiet = on_tty(t, "%s %s -q %s > /dev/null" % (t.heaptrail, c, out), 0)
        check("reading:" not in quiet, "%s -q: %r" % (c, quiet[-200:]))
    r = t.run([t.heaptrail, "stats", out], env={"HEAPTRAIL_PROGRESS_AFTER": "0"})
    eq(r.rc, 0, r.describe())
    check("reading:" not in r.err.decode(), "stderr not a terminal: %r" % r.err[-200:])
    small = t.path("small.ht")
    t.record(small, [t.prog("threads"), "1", "10"])
    quick = on_tty(t, "%s stats %s > /dev/null" % (t.heaptrail, small), 60000)
    check("reading:" not in quick, "a quick analysis showed progress: %r" % quick[-200:])


@case(labels=("analyzers",))
def test_progress_of_end_steps(t):
    """The end steps that rewrite a trace show their progress too on a
    terminal: `compact` ("compacting:") and `compact --fast`, which is
    record's default end step ("compressing:"), with the same line and
    its clearing; -q keeps it off.  The trace is recorded raw so that
    --fast has chunks to compress."""
    import shutil
    raw = t.path("raw.ht")
    t.run([t.heaptrail, "record", "-q", "--zstd-level", "0", "--no-compact", "-o", raw, "--",
           t.prog("threads"), "3", "100000"], check_rc=0)
    for opt, word in (("--fast", "compressing"), ("", "compacting")):
        for quiet in ("", "-q"):
            copy = t.path("copy%s%s.ht" % (opt, quiet))
            shutil.copyfile(raw, copy)
            seen = on_tty(t, "%s compact %s %s %s" % (t.heaptrail, opt, quiet, copy), 0)
            lines = [l for l in seen.replace("\r", "\n").splitlines() if word + ":" in l]
            if quiet:
                check(not lines, "compact %s -q: %r" % (opt, seen[-200:]))
                continue
            check(lines, "compact %s on a terminal: no %s line in %r" % (opt, word, seen[-300:]))
            pat = re.compile(word + r": +\d+\.\d% of [\d.]+ [KMG]?i?B, [\d.]+ [kMG]? ?events")
            check(all(pat.search(l) for l in lines), "compact %s: lines %r" % (opt, lines[:3]))
            check("\x1b[K" in seen.split(lines[-1])[-1],
                  "compact %s: the line is not cleared: %r" % (opt, seen[-120:]))
            r = t.run([t.heaptrail, "stats", "--json", copy], check_rc=0)
            check(b'"events"' in r.out, "compact %s: the trace does not read: %s" % (opt, r.describe()))


@case(timeout=180, labels=("analyzers",))
def test_progress_cleared_on_interrupt(t):
    """An analysis interrupted (SIGINT) while it shows its progress on a
    terminal clears the line before it ends (exit 130): the shell's next
    output ran on after the progress text (probe O: compact, export,
    leaks, report, stats)."""
    out = t.path("big.ht")
    t.run([t.heaptrail, "record", "-q", "--no-compact", "--zstd-level=0", "-o", out, "--",
           t.prog("prodcons"), "3000000"], check_rc=0)
    for c in ("leaks", "report -o %s" % t.path("r.html")):
        seen = on_tty(t, "set -m; %s %s %s > /dev/null & p=$!; sleep 0.3; kill -INT $p; "
                      "wait $p; echo rc=$?" % (t.heaptrail, c, out), 0)
        check("rc=130" in seen, "%s: not interrupted: %r" % (c, seen[-300:]))
        last = seen[:seen.index("rc=130")]
        check("reading:" in last, "%s: no progress shown before the interrupt: %r"
              % (c, last[-300:]))
        tail = last[last.rindex("reading:"):]
        check("\x1b[K" in tail, "%s: the line is not cleared: %r" % (c, tail[-120:]))


@case(labels=("analyzers",))
def test_progress_massif_second_pass(t):
    """export -f massif reads the trace twice: each pass's progress line
    counts its own events, never more than the trace holds (probe V: the
    second pass counted on from the first's, "32.9 M events" of 20 M)."""
    out = t.path("m.ht")
    t.run([t.heaptrail, "record", "-q", "-o", out, "--", t.prog("threads"), "3", "200000"],
          check_rc=0)
    events = t.stats(out)["events"]
    seen = on_tty(t, "%s export -f massif -o %s %s" % (t.heaptrail, t.path("m.ms"), out), 0)
    lines = 0
    for l in seen.replace("\r", "\n").splitlines():
        m = re.search(r"reading: +([\d.]+)% .*, ([\d.,]+)( [kMG])? events", l)
        if not m:
            continue
        lines += 1
        pct = float(m.group(1))
        n = float(m.group(2).replace(",", "")) * {" k": 1e3, " M": 1e6, " G": 1e9}.get(
            m.group(3), 1)
        # (the percent is of the file's bytes, the events' share near it;
        # a line comes every 65,536 events)
        check(n <= events * min(1.0, pct / 100 + 0.25) + 131072,
              "%r: %d events counted at %.1f%% of a trace of %d" % (l, n, pct, events))
    check(lines, "no progress line: %r" % seen[-300:])
