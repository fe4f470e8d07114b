"""Bad input for every command that reads a file: one table, every command
times every kind of bad file (issue 7, item 4).

Each command is given a missing file, an empty file, a /proc file (its size
says 0 bytes, but it reads), /dev/zero, a FIFO
(not maps, which reads pipes), a file of another kind
(a workload to an analyzer, a trace to replay), a truncated file, a file
from a newer format version, a directory, a trace cut inside a chunk (whose
readable part is still analyzed: an output file may be written, but whole) and a file it may not read (run as
the unprivileged user nobody through setpriv, since the tests run as root).
Each must: exit 1 (a data error; 2 is for usage errors only), print one
error line naming the file and the problem, every stderr line prefixed with
"heaptrail:", die of no signal, print no sanitizer report, and leave no
output file behind (-o, the default outputs of report, timeline and compare,
convert's workload, compact's rewrite in place)."""

import os
import re
import shutil
import struct
import subprocess

from htlib import Failure, case, check, eq, skip

# What the error line must say, per kind of bad file.
PROBLEM = {
    "missing": r"no such file|does not exist|not found",
    "empty": r"empty",
    # a /proc file: its size says 0 bytes, but it reads (it was called empty)
    "proc": r"bad magic",
    # by the type the command reads: an analyzer given a workload, replay a
    # trace, maps a trace
    "other": {"trace": r"workload", "workload": r"is a trace", "smaps": r"not an smaps"},
    "truncated": r"truncat|offset \d+|ends|short|incomplete|cut",
    "cut": r"offset \d+: .*truncated",
    "newer": r"version",
    "directory": r"directory",
    "unreadable": r"permission denied",
    # a FIFO must not block the reader; /dev/zero must not run forever
    "fifo": r"FIFO|not a regular file",
    "device": {"trace": r"device", "workload": r"not a regular file",
               "smaps": r"binary data"},
}

SANITIZER = re.compile(r"AddressSanitizer|LeakSanitizer|runtime error:|ThreadSanitizer")


def nobody_ids():
    """uid and gid of the user nobody, or None when setpriv cannot run as it."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    try:
        import pwd
        pw = pwd.getpwnam("nobody")
    except (ImportError, KeyError):
        return None
    return pw.pw_uid, pw.pw_gid


def build_inputs(t):
    """The good files and, per input type (trace, workload, smaps), every
    kind of bad one: {type: {kind: path}}."""
    d = t.path("in")
    os.mkdir(d)
    os.chmod(t.dir, 0o755)
    os.chmod(d, 0o755)
    trace = os.path.join(d, "good.ht")
    t.record(trace, [t.prog("threads"), "2", "2000"], env={"HEAPTRAIL_STACKS": "8"})
    os.chmod(trace, 0o644)  # diff reads it as nobody next to the unreadable one
    wl = os.path.join(d, "good.wl")
    r = t.tool(["convert", "-q", wl, trace])
    eq(r.rc, 0, "convert of the good trace:\n" + r.describe())
    smaps = os.path.join(d, "good.smaps")
    with open("/proc/self/smaps", "rb") as f, open(smaps, "wb") as o:
        o.write(f.read())

    def put(name, data, mode=0o644):
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, mode)
        return p

    def read(p):
        with open(p, "rb") as f:
            return f.read()

    def bump(data, off):
        v = struct.unpack_from("<I", data, off)[0]
        return data[:off] + struct.pack("<I", v + 1) + data[off + 4:]

    tr, wb, sm = read(trace), read(wl), read(smaps)
    inputs = {}
    for typ, good, other, newer in (
            ("trace", tr, wb, bump(tr, 8)),
            ("workload", wb, tr, bump(wb, 8)),
            ("smaps", sm, tr, None)):
        kinds = {
            "missing": os.path.join(d, "missing-%s" % typ),
            "empty": put("empty-%s" % typ, b""),
            "other": put("other-%s" % typ, other),
            # the trace: cut inside the header, so that no chunk is whole;
            # the workload: in its op blocks; smaps: inside a line
            "truncated": put("trunc-%s" % typ, good[:100] if typ == "trace" else
                             good[:len(good) // 2].rstrip(b"\n")),
            "directory": os.path.join(d, "dir-%s" % typ),
            "unreadable": put("noread-%s" % typ, good, 0o000),
        }
        os.mkdir(kinds["directory"])
        kinds["device"] = "/dev/zero"
        if typ != "smaps":  # maps reads pipes (maps <(cat smaps)), as cat would
            kinds["fifo"] = os.path.join(d, "fifo-%s" % typ)
            os.mkfifo(kinds["fifo"])
        if newer is not None:
            kinds["newer"] = put("newer-%s" % typ, newer)
        if typ != "smaps":  # (maps reads /proc files)
            kinds["proc"] = "/proc/self/status"
        if typ == "trace":
            kinds["cut"] = put("cut-trace", good[:len(good) * 6 // 10])
        inputs[typ] = kinds
    return trace, wl, inputs


# Every command that reads a file: (name, input type, argv builder, outputs).
# The builder gets (bad file, output dir) and returns the arguments; outputs
# lists the files (in the output dir, or given by a function of the bad
# file) that must not exist afterwards.
def commands(good_trace):
    def out(o, name):
        return os.path.join(o, name)

    return [
        ("dump", "trace", lambda f, o: ["dump", f], []),
        ("stats", "trace", lambda f, o: ["stats", f], []),
        ("stats-json", "trace", lambda f, o: ["stats", "--json", f], []),
        ("leaks", "trace", lambda f, o: ["leaks", f], []),
        ("top", "trace", lambda f, o: ["top", f], []),
        ("live", "trace", lambda f, o: ["live", "--batch", f], []),
        ("timeline", "trace", lambda f, o: ["timeline", "-o", out(o, "t.svg"), f], ["t.svg"]),
        ("timeline-default", "trace", lambda f, o: ["timeline", f],
         [lambda f: f + "-timeline.svg"]),
        ("events", "trace", lambda f, o: ["events", f], []),
        ("diff-before", "trace", lambda f, o: ["diff", "-o", out(o, "d.txt"), f, good_trace],
         ["d.txt"]),
        ("diff-after", "trace", lambda f, o: ["diff", "-o", out(o, "d.txt"), good_trace, f],
         ["d.txt"]),
        ("heap", "trace", lambda f, o: ["heap", f], []),
        ("flamegraph", "trace", lambda f, o: ["flamegraph", "-o", out(o, "f.svg"), f],
         ["f.svg"]),
        ("export", "trace", lambda f, o: ["export", "--format", "pprof", "-o",
                                          out(o, "p.pb.gz"), f], ["p.pb.gz"]),
        ("export-csv", "trace", lambda f, o: ["export", "--format", "csv", "-o",
                                              out(o, "p.csv"), f], ["p.csv"]),
        ("report", "trace", lambda f, o: ["report", "-o", out(o, "r.html"), f], ["r.html"]),
        ("report-default", "trace", lambda f, o: ["report", f],
         [lambda f: os.path.splitext(f)[0] + ".html", lambda f: f + ".html"]),
        ("maps", "smaps", lambda f, o: ["maps", f], []),
        ("convert", "trace", lambda f, o: ["convert", out(o, "c.wl"), f], ["c.wl"]),
        ("replay", "workload", lambda f, o: ["replay", f], []),
        ("compare", "workload", lambda f, o: ["compare", "-o", out(o, "c.svg"), f], ["c.svg"]),
        ("compact", "trace", lambda f, o: ["compact", f], []),
    ]


def run_one(t, argv, as_nobody, ids, cwd):
    if as_nobody:
        uid, gid = ids
        argv = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups", "--"] + argv
    return t.run(argv, cwd=cwd, timeout=120)


def check_case(name, typ, kind, path, r, leftovers):
    what = "%s on a %s file" % (name, kind)
    check(r.rc >= 0, "%s: killed by signal %d\n%s" % (what, -r.rc, r.describe()))
    check(not SANITIZER.search(r.stderr), "%s: sanitizer report\n%s" % (what, r.describe()))
    eq(r.rc, 1, "%s: exit status\n%s" % (what, r.describe()))
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    other = [l for l in lines if not l.startswith("heaptrail")]
    check(not other, "%s: stderr lines without the heaptrail: prefix: %r" % (what, other))
    errs = [l for l in lines if "error" in l]
    eq(len(errs), 1, "%s: error lines on stderr\n%s" % (what, r.stderr))
    check(path in errs[0], "%s: the error does not name %s: %r" % (what, path, errs[0]))
    want = PROBLEM[kind] if isinstance(PROBLEM[kind], str) else PROBLEM[kind][typ]
    check(re.search(want, errs[0], re.I),
          "%s: the error does not say the problem (%s): %r" % (what, want, errs[0]))
    left = [p for p in leftovers if os.path.lexists(p)]
    if kind == "cut":
        # a trace cut inside a chunk (a killed program) is still analyzed
        # up to the cut: an output file may be written, but whole
        left = [p for p in left if not whole(p)]
    check(not left, "%s: output left behind: %s" % (what, left))


def check_salvaged(t, path, r):
    what = "compact on a trace cut inside a chunk"
    eq(r.rc, 0, "%s: exit status\n%s" % (what, r.describe()))
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    check(len(lines) == 1 and lines[0].startswith("heaptrail:") and path in lines[0] and
          "damaged chunk" in lines[0], "%s: one line naming the file and the damage:\n%s"
          % (what, r.stderr))
    s = t.stats(path)
    eq(s["_run"].rc, 0, "stats of the salvaged trace")
    # it reads cleanly, but says that events were lost: its header keeps
    # the count its recorder closed it with
    m = re.search(r"warning: .*: its header counts (\d+) events but its chunks hold (\d+): the "
                  r"rest was lost", s["_run"].stderr)
    check(m and int(m.group(2)) == s["events"] < int(m.group(1)),
          "stats of the salvaged trace: no word of the events lost (%d read):\n%s"
          % (s["events"], s["_run"].stderr))


def whole(path):
    """Whether an output file is complete: by its kind, it ends as it must."""
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".svg"):
        return data.rstrip().endswith(b"</svg>")
    if path.endswith(".html"):
        return data.rstrip().endswith(b"</html>")
    if path.endswith(".gz"):
        import gzip
        try:
            return len(gzip.decompress(data)) > 0
        except (OSError, EOFError):
            return False
    if path.endswith(".wl"):
        return False  # convert writes no workload of a damaged trace
    return data.endswith(b"\n")


@case(timeout=600, labels=("analyzers",))
def test_bad_input_every_command(t):
    """Every command that reads a file, given every kind of bad file."""
    good_trace, good_wl, inputs = build_inputs(t)
    ids = nobody_ids()
    # compact rewrites in place, so it is given copies (it must leave them
    # as they were); the others get the shared inputs
    problems, ran, skipped = [], 0, []
    for name, typ, argv_of, outs in commands(good_trace):
        for kind in ("missing", "empty", "proc", "other", "truncated", "cut", "newer",
                     "directory", "unreadable"):
            path = inputs[typ].get(kind)
            if kind == "cut" and typ != "trace":
                continue  # a workload or smaps cut anywhere: "truncated" above
            if kind == "proc" and typ == "smaps":
                continue
            if path is None:
                skipped.append("%s/%s (no format version in a smaps file)" % (name, kind))
                continue
            if kind == "unreadable" and ids is None:
                skipped.append("%s/%s (not root, or no setpriv/nobody)" % (name, kind))
                continue
            o = t.path("out-%s-%s" % (name, kind))
            os.mkdir(o)
            os.chmod(o, 0o777)
            before = None
            if name == "compact" and os.path.isfile(path):
                # compact rewrites in place: it gets a copy
                copy = os.path.join(o, os.path.basename(path))
                shutil.copyfile(path, copy)
                os.chmod(copy, os.stat(path).st_mode & 0o777)
                path = copy
            if os.path.isfile(path) and kind != "proc":  # (a /proc file changes)
                with open(path, "rb") as f:
                    before = f.read()
            argv = [t.heaptrail] + argv_of(path, o)
            r = run_one(t, argv, kind == "unreadable", ids, o)
            leftovers = [os.path.join(o, x) if isinstance(x, str) else x(path) for x in outs]
            leftovers += [os.path.join(o, x) for x in os.listdir(o)
                          if os.path.join(o, x) not in leftovers + [path]]
            leftovers += [os.path.join(os.path.dirname(path), x)
                          for x in os.listdir(os.path.dirname(path)) if ".tmp" in x]
            try:
                if name == "compact" and kind == "cut":
                    # compact is the repair: it keeps the chunks before the
                    # damaged one, says so, and the result reads cleanly
                    check_salvaged(t, path, r)
                    ran += 1
                    continue
                check_case(name, typ, kind, path, r, leftovers)
                if before is not None and kind != "unreadable":
                    with open(path, "rb") as f:
                        check(f.read() == before, "%s on a %s file: the input was changed"
                              % (name, kind))
            except Failure as e:
                problems.append(str(e))
            ran += 1
            for p in leftovers:
                if os.path.isfile(p):
                    os.unlink(p)
    t.note("%d runs; skipped: %s" % (ran, skipped))
    if problems:
        raise Failure("%d of %d runs failed:\n\n%s" % (len(problems), ran,
                                                        "\n\n".join(problems)))


@case(labels=("analyzers",))
def test_usage_every_command(t):
    """Usage errors exit 2, data errors 1: every command that reads a file,
    without its file and with an unknown option, exits 2 with a message on
    stderr and nothing on stdout."""
    problems = []
    for cmd in ("dump", "stats", "leaks", "top", "live", "timeline", "events", "diff", "heap",
                "flamegraph", "export", "report", "maps", "convert", "replay", "compare",
                "compact"):
        for args in ([cmd], [cmd, "--no-such-option", t.path("x")]):
            r = t.tool(args)
            lines = [l for l in r.stderr.splitlines() if l.strip()]
            if r.rc != 2 or not lines or not lines[0].startswith("heaptrail") or r.stdout:
                problems.append(r.describe())
    check(not problems, "usage errors:\n\n" + "\n\n".join(problems))


@case(labels=("analyzers",))
def test_usage_time_window_backwards(t):
    """--to before --from is a usage error (exit 2, one line, nothing on
    stdout) for every command that takes both (before: dump and events
    printed nothing and exited 0); leaks --at after the trace's end shows
    its end and says so (before: "not freed at 999.000 s").  Times no
    clock holds (nan, inf, 1e400s) are refused (before: they wrapped)."""
    trace = t.path("w.ht")
    t.record(trace, [t.prog("api_all")])
    for cmd in ("dump", "events", "heap", "timeline"):
        r = t.tool([cmd, "--from", "5s", "--to", "1s", trace])
        eq((r.rc, r.stdout), (2, ""), "%s: status, stdout:\n%s" % (cmd, r.describe()))
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        check(len(lines) == 1 and "--to" in lines[0] and "--from" in lines[0],
              "%s: the line:\n%s" % (cmd, r.stderr))
    # times no clock holds (they used to wrap): refused, one line, exit 2
    for cmd, opt in (("dump", "--from"), ("events", "--to"), ("heap", "--to"),
                     ("timeline", "--from"), ("leaks", "--at"), ("diff", "--at")):
        for v in ("nan", "inf", "1e400s", "1e12h"):
            r = t.tool([cmd, opt, v, trace])
            eq((r.rc, r.stdout), (2, ""), "%s %s %s: status, stdout:\n%s" % (cmd, opt, v,
                                                                          r.describe()))
            lines = [l for l in r.stderr.splitlines() if l.strip()]
            check(len(lines) == 1 and v in lines[0], "%s %s %s: the line:\n%s" % (
                cmd, opt, v, r.stderr))
    # a time after the trace's end: leaks shows its end, and says so
    r = t.tool(["leaks", "--at", "999s", trace])
    eq(r.rc, 0, "leaks --at 999s: " + r.describe())
    first = r.stdout.splitlines()[0]
    # (not "999" alone: the pid in the line may hold it)
    check("999.000" not in first and "999 s" not in first and " not freed at " in first,
          "leaks --at 999s: %r" % first)
    check(re.search(r"^heaptrail: note: --at 999\.000 s is after the end of .*w\.ht \(.*\): the "
                    r"blocks live at its end$", r.stderr, re.M), "the note:\n" + r.stderr)


@case(labels=("analyzers",))
def test_usage_past_the_trace(t):
    """--from after the end of the trace (heap, timeline) and --thread of a
    thread the trace does not have (top, flamegraph) are usage errors: exit
    2, one line that says why, nothing on stdout.  Before, heap printed a
    peak "at 0 ns" of 0 B beside the end's figures, and top empty tables,
    both with exit 0."""
    trace = t.path("w.ht")
    t.record(trace, [t.prog("leaky"), t.prog("libleaklib.so")])
    for cmd in ("heap", "timeline"):
        r = t.tool([cmd, "--from", "100s", trace])
        eq((r.rc, r.stdout), (2, ""), "%s --from 100s:\n%s" % (cmd, r.describe()))
        check(re.search(r"^heaptrail: error: --from=100\.000 s: the trace .*w\.ht lasts [\d.]+ [mu]?s$",
                        r.stderr, re.M), "%s: the line:\n%s" % (cmd, r.stderr))
    stacked = t.path("s.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", stacked, "--", t.prog("leaky"),
           t.prog("libleaklib.so")], check_rc=0)
    for cmd in ("top", "flamegraph"):
        r = t.tool([cmd, "--thread", "4000000", stacked])
        eq((r.rc, r.stdout), (2, ""), "%s --thread 4000000:\n%s" % (cmd, r.describe()))
        check("--thread=4000000: no event of thread 4000000 in " in r.stderr,
              "%s: the line:\n%s" % (cmd, r.stderr))


@case(labels=("analyzers",))
def test_usage_zero_and_empty(t):
    """Values that mean nothing are usage errors (exit 2, one line, nothing
    on stdout), not a silent default: dump -n 0 (it printed every event),
    --kind '' (dump printed nothing with exit 0, events said "no  calls"),
    compact --level 0 (taken as the default level), -d 0 of the probes
    (they ran until killed), live --width 0 and --at nan; and an option of
    another export format (ignored without a word)."""
    trace = t.path("z.ht")
    t.record(trace, [t.prog("api_all")])
    copy = t.path("c.ht")
    shutil.copy(trace, copy)
    for args, said in ((["dump", "-n", "0", trace], "-n 0: give 1 or more events"),
                       (["dump", "--kind", "", trace], "--kind '': name at least one kind"),
                       (["events", "--kind", ",", trace], "--kind ',': name at least one kind"),
                       # (events' own kinds: it named dump's, which it then refused)
                       (["events", "--kind", "mmap,foo", trace],
                        "unknown event kind 'foo'; kinds are the ones events shows: mmap, munmap,"),
                       (["compact", "--level", "0", copy], "--level must be between 1 and 19"),
                       (["compact", "--fast", "--level", "0", copy], "--level must be between"),
                       (["mmapsnoop", "-d", "0", "-c", "true"], "is not a duration above 0"),
                       (["faults", "-d", "0", "-c", "true"], "is not a duration above 0"),
                       (["live", "--batch", "--width", "0", trace], "give 40 to 10000 columns"),
                       (["live", "--batch", "--at", "nan", trace], "--at nan: a time like"),
                       (["export", "-f", "csv", "--at-peak", trace],
                        "--format csv: --at-peak is pprof's, not this format's"),
                       (["export", "-f", "pprof", "--snapshots", "3", "-o", t.path("p.pb"), trace],
                        "--format pprof: --snapshots, --time-unit"),
                       (["export", "-f", "massif", "--all-events", trace],
                        "--format massif: --max-points, --big and --all-events are perfetto's")):
        r = t.tool(args)
        eq((r.rc, r.stdout), (2, ""), "%s: status, stdout\n%s" % (" ".join(args[:3]), r.describe()))
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        check(len(lines) == 1 and said in lines[0], "%s: the line:\n%s" % (" ".join(args[:3]),
                                                                        r.stderr))
    eq(len([l for l in t.tool(["dump", "-n", "3", trace]).stdout.splitlines() if l.strip()]), 3,
       "dump -n 3: three events")


@case(labels=("analyzers",))
def test_usage_typos_suggested(t):
    """A mistyped command or long option (one or two edits, a swap of two
    letters, the start of the only name that begins so) gets the name meant
    in its error, as git does; a word near nothing, or near two names, gets
    the plain message.  Exit 2 either way."""
    for args, said in ((["stat", "x.ht"], "did you mean 'stats'?"),
                       (["recrod", "--", "true"], "did you mean 'record'?"),
                       (["flamegrap"], "did you mean 'flamegraph'?"),
                       (["rec"], "did you mean 'record'?"),
                       (["stats", "--jsn", "x.ht"], "did you mean '--json'?"),
                       (["record", "--sampel-bytes", "4K", "--", "true"],
                        "did you mean '--sample-bytes'?"),
                       (["leaks", "--suppresions", "f", "x.ht"], "did you mean '--suppressions'?"),
                       (["xyz"], "'xyz' is not a heaptrail command; run 'heaptrail help' for "
                                 "the list"),
                       (["com"], "'com' is not a heaptrail command; run 'heaptrail help' for "
                                 "the list"),
                       (["stats", "--zzzzzz", "x.ht"], "unknown option '--zzzzzz'; run "
                                                       "'heaptrail stats --help'")):
        r = t.tool(args)
        eq(r.rc, 2, "%s: exit status" % args)
        check(said in r.stderr, "%s: want %r in:\n%s" % (args, said, r.stderr))
        eq(len(r.stderr.splitlines()), 1, "%s: one line" % args)


@case(labels=("analyzers",))
def test_stdout_write_errors(t):
    """Output that does not reach stdout is an error, as with coreutils: a
    full device (/dev/full: "No space left on device") or a closed
    descriptor makes every command that writes to stdout exit 1 with one
    line saying so, instead of exit 0 with
    the output lost (`stats --json > out.json` on a full disk left half an
    object).  The same command with a working stdout exits 0."""
    trace = t.path("t.ht")
    t.record(trace, [t.prog("leaky"), t.prog("libleaklib.so")])
    cmds = [["stats", trace], ["stats", "--json", trace], ["top", trace], ["leaks", trace],
            ["dump", "-n", "5", trace], ["heap", trace], ["events", trace],
            ["timeline", "--csv", "-o", "-", trace], ["flamegraph", "--folded", trace],
            ["export", "-f", "csv", trace], ["diff", trace, trace], ["--help"], ["stats", "--help"],
            ["--version"]]
    wl = t.path("t.wl")
    t.run([t.heaptrail, "convert", "-q", wl, trace], check_rc=0)
    cmds += [["replay", wl], ["maps", "/proc/self/smaps"]]
    problems = []
    for args in cmds:
        ok = t.tool(args)
        if ok.rc != 0 or not ok.stdout:
            problems.append("with a working stdout: " + ok.describe())
            continue
        for how in ("full", "closed"):
            argv = [t.heaptrail] + args
            if how == "full":
                with open("/dev/full", "wb") as full:
                    p = subprocess.run(argv, stdout=full, stderr=subprocess.PIPE,
                                       env=t.base_env(), timeout=120)
            else:
                p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   env=t.base_env(), timeout=120,
                                   preexec_fn=lambda: os.close(1))
            lines = [l for l in p.stderr.decode().splitlines()
                     if "write" in l and "standard output" in l]
            if p.returncode != 1 or len(lines) != 1 or not lines[0].startswith("heaptrail: error"):
                problems.append("%s, stdout %s: exit %d, stderr:\n%s" % (
                    " ".join(args), how, p.returncode, p.stderr.decode()))
            # and why: /dev/full fails every write with ENOSPC (it said
            # "a write failed" where the error had come too early to keep)
            elif how == "full" and not lines[0].endswith(": No space left on device"):
                problems.append("%s, stdout on /dev/full: %s" % (" ".join(args), lines[0]))
    check(not problems, "\n\n".join(problems))
