"""Stacks and leaks: `record --stacks` and `heaptrail leaks` on tests/progs/
leaky.c, whose leaks sit at known lines (LEAK: markers): the right
function, file and line for each, exact bytes and blocks, and the same
totals as valgrind's "definitely lost"."""

import json
import os
import re
import shutil

from htlib import case, check, eq, expect_calls, fail, record_syscalls, skip, unwind_check, which

HERE = os.path.dirname(os.path.abspath(__file__))
PROGS_SRC = os.path.join(HERE, "..", "progs")

# site -> (bytes, blocks, innermost function, inlined)
SITES = {
    "direct": (300, 3, "leak_direct", False),
    "helper_alloc": (250, 1, "xalloc", False),
    "inline": (64, 1, "leak_inline", True),
    "thread": (77, 1, "leak_thread", False),
    "lib": (123, 1, "leaklib_inner", False),
}


def marker_lines(name):
    """LEAK:<site> marker -> line number, in tests/progs/<name>."""
    lines = {}
    with open(os.path.join(PROGS_SRC, name)) as f:
        for no, text in enumerate(f, 1):
            m = re.search(r"LEAK:(\w+)", text)
            if m:
                lines[m.group(1)] = no
    return lines


def record_leaky(t, name, stacks=True):
    out = t.path(name + ".ht")
    args = ["--stacks"] if stacks else []
    r = t.run([t.heaptrail, "record", "-q", "-o", out] + args + ["--", t.prog("leaky"),
                                                                   t.prog("libleaklib.so")])
    eq(r.rc, 0, "record leaky:\n" + r.describe())
    return out


def leaks_json(t, path, *args):
    r = t.tool(["leaks", "--json", "--top", "1000"] + list(args) + [path])
    eq(r.rc, 0, "leaks --json:\n" + r.describe())
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        fail("leaks --json is not JSON (%s):\n%s" % (e, r.stdout[:2000]))


def own_site(g):
    """The group's innermost frame, if it is in leaky or its library."""
    st = g["stack"]
    if st and st[0]["module"] in ("leaky", "libleaklib.so"):
        return st[0]
    return None


def find_group(j, function):
    hits = [g for g in j["groups"] if own_site(g) and own_site(g)["function"] == function]
    eq(len(hits), 1, "groups whose innermost frame is %s" % function)
    return hits[0]


@case(timeout=120, labels=("analyzers",))
def test_leaks_sites(t):
    """Every leak site of leaky: its function, file and line, the frames
    around it (the helper's caller, the function an inline call sits in,
    main through a library without frame pointers), exact bytes and
    blocks; the freed block is not reported."""
    out = record_leaky(t, "leaky")
    j = leaks_json(t, out)
    lines = marker_lines("leaky.c")
    lines.update({"lib": marker_lines("leaklib.c")["lib"]})
    for site, (size, blocks, fn, inlined) in SITES.items():
        g = find_group(j, fn)
        eq((g["bytes"], g["blocks"]), (size, blocks), "%s: bytes, blocks" % site)
        f0 = g["stack"][0]
        src = "leaklib.c" if site == "lib" else "leaky.c"
        eq(os.path.basename(f0["file"] or ""), src, "%s: file" % site)
        eq(f0["line"], lines[site], "%s: line" % site)
        eq(f0["inlined"], inlined, "%s: inlined" % site)
    fns = lambda g: [f["function"] for f in g["stack"]]
    g = find_group(j, "xalloc")
    eq(fns(g)[1:3], ["leak_helper", "main"], "helper: callers")
    eq(g["stack"][1]["line"], lines["helper_call"], "helper: line of the call")
    g = find_group(j, "leak_inline")
    eq(fns(g)[1], "outer", "inline: the function it was inlined into")
    eq(g["stack"][1]["line"], lines["outer_call"], "inline: line of the inlined call")
    eq(g["stack"][1]["inlined"], False, "inline: outer is a real frame")
    g = find_group(j, "leaklib_inner")
    eq(fns(g)[1], "leaklib_leak", "library: caller inside the library")
    check("main" in fns(g), "library: the stack does not reach main "
          "(unwinding through code without frame pointers): %s" % fns(g))
    mainf = [f for f in g["stack"] if f["function"] == "main"][0]
    eq(mainf["line"], lines["lib_call"], "library: main's line")
    g = find_group(j, "leak_thread")
    check(any(f["function"] == "start_thread" for f in g["stack"]),
          "thread: its stack starts in start_thread: %s" % fns(g))
    # the malloc(10) that is freed is nowhere
    check(not any(g["bytes"] == 10 and own_site(g) for g in j["groups"]),
          "a freed block is reported")
    # the text report says the same, memleak style
    r = t.tool(["leaks", out])
    eq(r.rc, 0, "leaks")
    check("300 bytes in 3 allocations from stack" in r.stdout, "text report:\n" + r.stdout)
    check(re.search(r"leak_direct .*leaky\.c:%d \[leaky\]" % lines["direct"], r.stdout),
          "text report: the leak_direct frame:\n" + r.stdout)


@case(timeout=180)
def test_leaks_match_valgrind(t):
    """The program's own leaks (innermost frame in leaky or its library)
    add up to valgrind's "definitely lost", bytes and blocks."""
    vg = shutil.which("valgrind")
    check(vg, "valgrind is not installed (scripts/deps.sh test installs it)")
    r = t.run([vg, "--leak-check=full", t.prog("leaky"), t.prog("libleaklib.so")], timeout=150)
    eq(r.rc, 0, "valgrind leaky:\n" + r.describe())
    m = re.search(r"definitely lost: ([\d,]+) bytes in ([\d,]+) blocks", r.stderr)
    check(m, "no 'definitely lost' line from valgrind:\n" + r.stderr[-3000:])
    vbytes, vblocks = (int(x.replace(",", "")) for x in m.groups())
    j = leaks_json(t, record_leaky(t, "leaky"))
    own = [g for g in j["groups"] if own_site(g)]
    eq((sum(g["bytes"] for g in own), sum(g["blocks"] for g in own)), (vbytes, vblocks),
       "the program's leaks vs valgrind's definitely lost")
    eq(vbytes, sum(s[0] for s in SITES.values()), "valgrind's total vs the sites")


@case(timeout=120, labels=("analyzers",))
def test_leaks_options(t):
    """--suppressions, --older, --at, and a trace without stacks."""
    out = record_leaky(t, "leaky")
    full = leaks_json(t, out)
    # glibc's thread vector (DTV) of leaky's one thread is suppressed by
    # default, and listed with --no-default-suppressions
    every = leaks_json(t, out, "--no-default-suppressions")
    dtv = (full["suppressed_bytes"], full["suppressed_blocks"])
    eq(dtv[1], 1, "blocks suppressed by default (the DTV of leaky's thread)")
    eq((every["leaked_bytes"], every["leaked_blocks"], every["suppressed_blocks"]),
       (full["leaked_bytes"] + dtv[0], full["leaked_blocks"] + 1, 0),
       "--no-default-suppressions lists the DTV")
    check(any(any(f.get("function") in ("allocate_dtv", "_dl_allocate_tls", "__GI__dl_allocate_tls")
                  for f in g["stack"]) for g in every["groups"]),
          "no group allocated by allocate_dtv/_dl_allocate_tls with --no-default-suppressions")
    r = t.tool(["leaks", out])
    check("%d B suppressed" % dtv[0] in r.stdout or "suppressed" in r.stdout.splitlines()[0],
          "the text says what was suppressed:\n" + r.stdout[:400])
    supp = t.path("known.supp")
    with open(supp, "w") as f:
        f.write("# known\nleak:leak_direct\n\n  leaklib_*  \n")
    s = leaks_json(t, out, "--suppressions", supp)
    eq((s["suppressed_bytes"], s["suppressed_blocks"]), (300 + 123 + dtv[0], 4 + dtv[1]),
       "suppressed")
    eq(s["leaked_bytes"], full["leaked_bytes"] - 423, "leaked bytes after suppression")
    check(not any(own_site(g) and own_site(g)["function"] in ("leak_direct", "leaklib_inner")
                  for g in s["groups"]), "a suppressed group is listed")
    # nothing is an hour old
    o = leaks_json(t, out, "--older", "1h")
    eq((o["leaked_bytes"], o["leaked_blocks"], o["groups"]), (0, 0, []), "--older 1h")
    # at the time of the helper's malloc(250): the direct leaks and that
    # one, not those that come after it
    d = t.tool(["dump", "--json", "--kind", "malloc", out])
    at = [json.loads(l)["time_ns"] for l in d.stdout.splitlines()
          if json.loads(l).get("size") == 250]
    eq(len(at), 1, "mallocs of 250 bytes")
    a = leaks_json(t, out, "--at", "%dns" % at[0])
    names = {own_site(g)["function"] for g in a["groups"] if own_site(g)}
    eq(names, {"leak_direct", "xalloc"}, "program leaks live at the helper's malloc")
    # --interval: every step, what was live then
    iv = leaks_json(t, out, "--interval", "%dns" % at[0])
    check(iv["intervals"], "no intervals")
    eq(iv["intervals"][0]["at_ns"], at[0], "the first interval's time")
    first = {own_site(g)["function"] for g in iv["intervals"][0]["groups"] if own_site(g)}
    eq(first, {"leak_direct", "xalloc"}, "program leaks live at the first interval")
    steps = [x["at_ns"] for x in iv["intervals"]]
    eq(steps, [at[0] * (i + 1) for i in range(len(steps))], "interval times")
    check(all(a["leaked_bytes"] <= b["leaked_bytes"] for a, b in
              zip(iv["intervals"], iv["intervals"][1:])), "leaky only grows")
    eq((iv["leaked_bytes"], iv["leaked_blocks"]), (full["leaked_bytes"], full["leaked_blocks"]),
       "the totals at the end, with --interval")
    # without --stacks: the same blocks, in one group without a stack
    plain = record_leaky(t, "plain", stacks=False)
    p = leaks_json(t, plain)
    eq(p["blocks_without_stack"], p["leaked_blocks"], "blocks without stack")
    eq(len(p["groups"]), 1, "groups without stacks")
    eq(p["groups"][0]["stack"], [], "the group's stack")
    # (without stacks nothing tells glibc's DTV apart: it is listed)
    eq((p["leaked_bytes"], p["leaked_blocks"]), (every["leaked_bytes"], every["leaked_blocks"]),
       "the same leaks with and without stacks")
    r = t.tool(["leaks", plain])
    check("record with --stacks" in r.stdout, "no hint to record stacks:\n" + r.stdout)


@case()
def test_leaks_usage_errors(t):
    """Bad arguments: exit 2 and a message that says what to do."""
    out = record_leaky(t, "leaky")
    for args, what in ((["leaks"], "no trace given"),
                       (["leaks", out, out], "one trace at a time"),
                       (["leaks", "--top"], "needs a value"),
                       (["leaks", "--older", "soon", out], "--older"),
                       (["leaks", "--suppressions", t.path("missing.supp"), out],
                        "--suppressions: cannot open")):
        r = t.tool(args)
        eq(r.rc, 2, "exit status of %s" % args)
        check(what in r.stderr, "%s: stderr does not say %r:\n%s" % (args, what, r.stderr))
    r = t.tool(["record", "--stacks=999", "--", "/bin/true"])
    eq(r.rc, 2, "record --stacks=999")
    check("--stacks" in r.stderr, "record --stacks=999: " + r.stderr)


@case(timeout=120, labels=("analyzers",))
def test_stacks_every_kind(t):
    """Every interposed function with --stacks (api_all): the same calls
    as without; a stack on every record that hands out memory (the malloc
    family, mmap, mremap, brk, sbrk, shmat) and on nothing else; the
    Python decoder reads the trace as the recorder wrote it, as record
    leaves it by default and compacted alike."""
    import htformat
    plain = t.path("plain.ht")
    t.record(plain, [t.prog("api_all")])
    for compact, end in enumerate((["--no-compact"], [], ["--compact"])):
        out = t.path("stacks%d.ht" % compact)
        args = ["--stacks"] + end
        r = t.run([t.heaptrail, "record", "-q", "-o", out] + args + ["--", t.prog("api_all")])
        eq(r.rc, 0, "record --stacks api_all:\n" + r.describe())
        s, p = t.stats(out), t.stats(plain)
        eq(s["calls"], p["calls"], "calls with and without stacks")
        eq(s["events"], p["events"], "events with and without stacks")
        d = t.tool(["dump", "--json", out])
        eq(d.rc, 0, "dump")
        stacked = {"malloc", "calloc", "realloc", "reallocarray", "memalign", "posix_memalign",
                   "aligned_alloc", "valloc", "pvalloc", "mmap", "mremap", "brk", "sbrk", "shmat"}
        for line in d.stdout.splitlines():
            e = json.loads(line)
            if e["kind"] in stacked:
                check(e.get("stack", 0) > 0, "no stack on %s" % line)
            else:
                check("stack" not in e, "a stack on %s" % line)
        tr = htformat.Trace(out)
        eq(tr.error, None, "Python decoder (record %s)" % " ".join(end))
        eq(len(tr.events), s["events"], "Python decoder: events")


def folded(t, path, *args):
    r = t.tool(["flamegraph", "--folded"] + list(args) + [path])
    eq(r.rc, 0, "flamegraph --folded %s:\n%s" % (" ".join(args), r.describe()))
    out = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^(\S(?:.*\S)?) (\d+)$", line)
        check(m, "not a folded line (frames;... VALUE): %r" % line)
        frames = m.group(1).split(";")
        check(all(frames), "an empty frame in %r" % line)
        check(m.group(1) not in out, "the same stack twice: %r" % line)
        out[m.group(1)] = int(m.group(2))
    return out


@case(timeout=120, labels=("analyzers",))
def test_flamegraph_folded(t):
    """Folded stacks as flamegraph.pl reads them ('a;b;c VALUE', outermost
    first, each stack once), for every metric, with totals that agree with
    stats and leaks; --reverse puts the allocating function first; --thread
    keeps one thread's blocks."""
    out = record_leaky(t, "leaky")
    s = t.stats(out)
    lk = leaks_json(t, out)
    alloc = folded(t, out)  # --metric allocated
    eq(sum(alloc.values()), s["bytes_allocated"], "allocated: total vs stats bytes_allocated")
    leaked = folded(t, out, "--metric", "leaked")
    # the flame graph draws every block not freed; leaks counts glibc's
    # DTVs as suppressed by default
    eq(sum(leaked.values()), lk["leaked_bytes"] + lk["suppressed_bytes"],
       "leaked: total vs leaks (leaked and suppressed)")
    direct = [k for k in leaked if k.endswith(";main;leak_direct")]
    eq(len(direct), 1, "leaked: the leak_direct stack")
    eq(leaked[direct[0]], 300, "leaked: leak_direct bytes")
    check(any(k.endswith(";main;outer;leak_inline") for k in leaked),
          "leaked: the inlined call as a frame of its own: %s" % list(leaked))
    peak = folded(t, out, "--metric", "peak")
    eq(sum(peak.values()), s["peak_live_bytes"], "peak: total vs stats peak_live_bytes")
    d = t.tool(["dump", "--json", out])
    acquired = 0
    for line in d.stdout.splitlines():
        e = json.loads(line)
        if e["kind"] in ("malloc", "calloc", "realloc", "reallocarray", "memalign",
                         "posix_memalign", "aligned_alloc", "valloc", "pvalloc") and e.get("ptr"):
            acquired += 1
    calls = folded(t, out, "--metric", "allocations")
    eq(sum(calls.values()), acquired, "allocations: total vs the allocations in dump")
    temp = folded(t, out, "--metric", "temporary")
    main_temp = [v for k, v in temp.items() if k.endswith("__libc_start_call_main;main")]
    eq(main_temp, [1], "temporary: main's malloc(10) freed at once")
    rev = folded(t, out, "--reverse", "--metric", "leaked")
    check(any(k.startswith("leak_direct;main;") for k in rev), "--reverse: %s" % list(rev))
    eq(sum(rev.values()), sum(leaked.values()), "--reverse: the same total")
    tids = {json.loads(l)["tid"] for l in d.stdout.splitlines()
            if json.loads(l)["kind"] == "malloc" and json.loads(l).get("size") == 77}
    eq(len(tids), 1, "the thread of malloc(77)")
    th = folded(t, out, "--thread", str(tids.pop()), "--metric", "leaked")
    check(th and all("start_thread" in k for k in th), "--thread: %s" % list(th))


@case(labels=("analyzers",))
def test_flamegraph_without_stacks(t):
    """A trace recorded without --stacks: one "[no stack]" frame holding
    every byte, and a warning that says why and what to do (as export -f
    pprof gives), for the SVG and the folded stacks alike."""
    out = t.path("plain.ht")
    t.record(out, [t.prog("threads"), "2", "1000"])
    for args in (["--folded"], ["-o", t.path("plain.svg")]):
        r = t.tool(["flamegraph"] + args + [out])
        eq(r.rc, 0, "flamegraph %s:\n%s" % (args, r.describe()))
        check("plain.ht has no stacks: one frame \"[no stack]\" (record with --stacks" in r.stderr,
              "flamegraph %s: no warning: %r" % (args, r.stderr))
    lines = t.tool(["flamegraph", "--folded", out]).stdout.splitlines()
    eq(len(lines), 1, "folded lines: %r" % lines[:3])
    check(lines[0].startswith("[no stack] "), "the frame: %r" % lines)
    # -q keeps the advice to itself, as for export -f pprof (it was said)
    for args in (["flamegraph", "-q", "-o", t.path("q.svg")],
                 ["export", "-q", "-f", "pprof", "-o", t.path("q.pb")],
                 ["diff", "-q", "-o", t.path("q-diff.svg"), out],
                 ["events", "-q", "--stacks"]):
        r = t.tool(args + [out])
        eq((r.rc, r.stderr), (0, ""), "%s -q: exit status and stderr" % args[0])


@case(timeout=120, labels=("analyzers",))
def test_flamegraph_svg(t):
    """The SVG is well-formed and self-contained (its script inline, no
    external reference), has one frame (title, rect, text) per node of the
    folded stacks' tree, each as wide as its share of the total."""
    import xml.etree.ElementTree as ET
    out = record_leaky(t, "leaky")
    svg = t.path("leaks.svg")
    r = t.tool(["flamegraph", "-o", svg, "--metric", "allocated", out])
    eq(r.rc, 0, "flamegraph -o:\n" + r.describe())
    fl = folded(t, out, "--metric", "allocated")
    with open(svg) as f:
        text = f.read()
    check("<script" in text and "function zoom" in text and "function search" in text,
          "no zoom/search script in the SVG")
    check(not re.search(r'(href|src)="', text), "the SVG refers to something outside it")
    root = ET.fromstring(text)
    ns = {"s": "http://www.w3.org/2000/svg"}
    total = int(root.get("data-total"))
    fw = float(root.get("data-fw"))
    eq(total, sum(fl.values()), "total in the SVG vs folded")
    # the tree of the folded stacks: path -> value
    tree = {}
    for stack, v in fl.items():
        frames = stack.split(";")
        for i in range(1, len(frames) + 1):
            key = tuple(frames[:i])
            tree[key] = tree.get(key, 0) + v
    want = sorted((k[-1], v) for k, v in tree.items() if v * fw / total >= 0.1)
    got = []
    for g in root.findall(".//s:g[@class='f']", ns):
        title = g.find("s:title", ns).text
        rect = g.find("s:rect", ns)
        name = title[:title.rindex(" (")]
        value = int(re.search(r"\((\d+) bytes", title).group(1))
        check(abs(float(rect.get("width")) - value * fw / total) < 0.02,
              "frame %s: width %s for %d of %d bytes" % (name, rect.get("width"), value, total))
        check(g.find("s:text", ns) is not None, "frame %s has no text element" % name)
        got.append((name, value))
    eq(sorted(got), want, "frames in the SVG vs the folded stacks' tree")
    for args, what in ((["--metric", "bogus", out], "--metric"),
                       (["--width", "5", out], "--width"),
                       ([], "no trace given")):
        r = t.tool(["flamegraph"] + args)
        eq(r.rc, 2, "flamegraph %s" % args)
        check(what in r.stderr, "flamegraph %s: %s" % (args, r.stderr))


@case(labels=("analyzers",))
def test_top_rows_distinct(t):
    """Two call paths that share their three innermost frames (a wrapper of
    three levels): top's rows show as many frames as it takes to tell them
    apart (--depth is a minimum), and the same path repeated (the largest
    blocks) does not make its row longer."""
    out = t.path("wrappers.ht")
    r = t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", t.prog("wrappers")],
              check_rc=0)
    r = t.tool(["top", out])
    eq(r.rc, 0, "top: exit status\n" + r.describe())
    text = r.stdout
    peak = text.split("held the most at the peak:")[1].split("\n\n")[0].strip().splitlines()
    eq(len(peak), 2, "rows at the peak:\n" + text)
    for row, fn in zip(sorted(peak, key=lambda l: "path_b" in l), ("path_a", "path_b")):
        check(fn in row and "wrap3" in row, "a row names its own path (%s): %r" % (fn, row))
        check("main" not in row, "a row shows more frames than it needs: %r" % row)
    big = text.split("biggest single allocations:")[1].strip().splitlines()
    check(big and all(l.rstrip().endswith("(wrappers.c:27)") for l in big),
          "the largest blocks (one path each) keep --depth 3:\n" + "\n".join(big))


@case(labels=("analyzers",))
def test_top_rows_alike_merged(t):
    """Three allocations on one source line (tests/progs/oneline.c): three
    call sites whose stacks read the same.  top and the report's stack
    tables show them as one row of 6000 bytes in 30 blocks, as leaks and
    flamegraph do; before, three rows that read exactly alike, each ranked
    by a third of the bytes."""
    out = t.path("oneline.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", t.prog("oneline")],
          check_rc=0)
    line = marker_lines_text("oneline.c", "ONELINE")
    j = json.loads(t.tool(["top", "--json", out]).stdout)
    mine = [x for x in j["peak"]["entries"] if x["stack"] and x["stack"][0]["function"] == "make"]
    eq([(x["bytes"], x["blocks"], x["stack"][0]["line"]) for x in mine], [(6000, 30, line)],
       "top's rows for make()")
    calls = [x for x in j["calls"]["entries"] if x["stack"] and x["stack"][0]["function"] == "make"]
    eq([(x["calls"], x["bytes_allocated"]) for x in calls], [(30, 6000)], "top: calls of make()")
    text = t.tool(["top", out]).stdout
    tables = text.split("biggest single allocations:")[0]
    eq(len(re.findall(r"make \(oneline\.c:%d\)" % line, tables)), 2,
       "one row in each of top's two tables:\n" + text)
    html = t.path("oneline.html")
    t.run([t.heaptrail, "report", "-q", "-o", html, out], check_rc=0)
    with open(html) as f:
        page = f.read()
    stacks = page.split('<section id="stacks">')[1].split("</section>")[0]
    peak = stacks.split('id="peak"')[1].split("</table>")[0]
    eq(peak.count("oneline.c:%d" % line), 1, "the report's peak table: one row for make()")
    # Debian's python3 (symbols, no lines: calls at two places of one
    # function read alike), many stacks: every row of every table reads
    # differently, and the peak's rows add up to the peak
    py = "/usr/bin/python3"
    if not os.path.exists(py):
        return
    out = t.path("py.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", py, "-c",
           "import json; print(len(json.dumps([{'a': i, 'b': str(i)} for i in range(20000)])))"],
          check_rc=0, timeout=120)
    j = json.loads(t.tool(["top", "--json", "--top", "1000000", out]).stdout)

    def reads(f):
        return (f["function"], f["file"], f["line"], f["module"], f["inlined"],
                f["offset"] if not f["function"] and not f["file"] else None)
    for table in ("peak", "calls", "temporary"):
        rows = [tuple(reads(f) for f in e["stack"]) for e in j[table]["entries"]]
        check(len(rows) > 50, "python3: %d rows in %s" % (len(rows), table))
        eq(len(set(rows)), len(rows), "python3: rows of %s that read alike" % table)
    eq(sum(e["bytes"] for e in j["peak"]["entries"]), j["peak"]["bytes"], "python3: the peak's rows")


def marker_lines_text(name, marker):
    """The line of tests/progs/<name> that holds marker."""
    with open(os.path.join(PROGS_SRC, name)) as f:
        for no, text in enumerate(f, 1):
            if marker in text:
                return no
    fail("no %s in %s" % (marker, name))


@case(timeout=120, labels=("analyzers",))
def test_top(t):
    """top: the peak's contributors add up to stats' peak, calls to the
    allocations, main's malloc(10)/free is the one temporary allocation, the
    biggest single allocations in order; --by function sums stacks."""
    out = record_leaky(t, "leaky")
    s = t.stats(out)
    r = t.tool(["top", "--json", "--top", "1000", out])
    eq(r.rc, 0, "top --json:\n" + r.describe())
    j = json.loads(r.stdout)
    eq(j["peak"]["bytes"], s["peak_live_bytes"], "peak bytes")
    eq(sum(x["bytes"] for x in j["peak"]["entries"]), s["peak_live_bytes"], "peak entries")
    eq(sum(x["blocks"] for x in j["peak"]["entries"]), s["peak_live_blocks"], "peak blocks")
    flat = folded(t, out, "--metric", "allocations")
    eq(sum(x["calls"] for x in j["calls"]["entries"]), sum(flat.values()), "calls")
    temp = j["temporary"]["entries"]
    eq([(x["count"], x["stack"][0]["function"]) for x in temp], [(1, "main")], "temporary")
    sizes = [x["bytes"] for x in j["largest"]]
    eq(sizes, sorted(sizes, reverse=True), "largest: biggest first")
    d = t.tool(["dump", "--json", "--kind", "alloc", out])
    biggest = max(json.loads(l).get("size", 0) for l in d.stdout.splitlines())
    eq(sizes[0], biggest, "largest: the biggest allocation")
    f = json.loads(t.tool(["top", "--json", "--by", "function", "--top", "1000", out]).stdout)
    rows = [x for x in f["calls"]["entries"] if x["function"][0]["function"] == "leak_direct"]
    eq([x["calls"] for x in rows], [3], "--by function: leak_direct's calls")
    r = t.tool(["top", out])
    eq(r.rc, 0, "top")
    check("held the most at the peak" in r.stdout and "leak_direct (leaky.c:" in r.stdout,
          "text output:\n" + r.stdout)
    r = t.tool(["top", "--by", "module", out])
    eq(r.rc, 2, "top --by module")
    check("--by" in r.stderr, r.stderr)


TEMP_SRC = r"""
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) void *mk(size_t n) { void *p = malloc(n); memset(p, 0, n); return p; }
/* 100 temporaries of 64 bytes */
__attribute__((noinline)) void churn(void) { for (int i = 0; i < 100; i++) free(mk(64)); }
/* 500 blocks of 32 bytes, freed newest first: only the last made, freed
 * first, is temporary */
__attribute__((noinline)) void hold(void)
{
	void *a[500];
	for (int i = 0; i < 500; i++)
		a[i] = mk(32);
	for (int i = 499; i >= 0; i--)
		free(a[i]);
}
int main(int argc, char **argv)
{
	if (argc > 1) { /* keep: three blocks, none freed, no temporary */
		for (int i = 0; i < 3; i++)
			memset(mk(100 * (i + 1)), 1, 10);
		return 0;
	}
	churn();
	hold();
	return 0;
}
"""


def temp_program(t):
    gcc = which("gcc")
    if not gcc:
        skip("gcc is not installed")
    src, exe = t.path("temp.c"), t.path("temp")
    with open(src, "w") as f:
        f.write(TEMP_SRC)
    t.run([gcc, "-g", "-O1", "-o", exe, src], check_rc=0)
    return exe


def top_rows(text, heading):
    """The rows under a heading of top's text."""
    return text.split(heading)[1].split("\n\n")[0].strip("\n").splitlines()[1:]


@case(timeout=120, labels=("analyzers",))
def test_top_temporary_bytes(t):
    """The temporary allocations' bytes are their own: hold() makes 500
    blocks of 32 bytes of which one is temporary (32 bytes, not the 16000
    its stack allocated, which top showed there and which stays in
    bytes_allocated), churn() 100 temporaries of 64 bytes."""
    exe = temp_program(t)
    out = t.path("temp.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", exe], check_rc=0)
    j = json.loads(t.tool(["top", "--json", out]).stdout)
    got = {e["stack"][1]["function"]: (e["count"], e.get("temporary_bytes"), e["bytes_allocated"])
           for e in j["temporary"]["entries"]
           if len(e["stack"]) > 1 and e["stack"][0]["function"] == "mk"}
    eq(got, {"churn": (100, 6400, 6400), "hold": (1, 32, 16000)},
       "temporaries of mk() by caller: (count, temporary_bytes, bytes_allocated)")
    text = t.tool(["top", out]).stdout
    rows = top_rows(text, "most temporary allocations")
    hold = [l for l in rows if "<- hold (" in l]
    eq(len(hold), 1, "hold()'s row:\n" + text)
    check(re.match(r"^ +1 call, +32 B  mk \(", hold[0]), "hold()'s row: %r" % hold[0])
    calls = [l for l in top_rows(text, "most allocation calls") if "<- hold (" in l]
    check(len(calls) == 1 and re.match(r"^ +500 calls, +15\.6 KiB  mk \(", calls[0]),
          "hold()'s row of calls keeps the bytes allocated: %r" % calls)


# Temporaries by heaptrack's rule: an allocation is temporary when its
# thread's next heap call after it frees it.
TEMP_RULE_SRC = r"""
#include <stdlib.h>
__attribute__((noinline)) void *mk(size_t n) { return malloc(n); }
/* b then a, b freed first: a free in between, no temporary */
__attribute__((noinline)) void crossed(void)
{
	for (int i = 0; i < 1000; i++) {
		void *b = mk(16), *a = mk(32);
		free(b);
		free(a);
	}
}
/* made and freed at once: 300 temporaries */
__attribute__((noinline)) void churn(void) { for (int i = 0; i < 300; i++) free(mk(48)); }
/* reallocs: one frees the latest block (temporary), one another */
__attribute__((noinline)) void grow(void)
{
	for (int i = 0; i < 200; i++) {
		void *p = mk(24), *guard = mk(24);
		void *q = mk(8);
		p = realloc(p, 4000); /* not the latest (q): no temporary */
		q = realloc(q, 5000); /* the latest is p's new block: none */
		free(q);              /* q's new block, the latest: temporary */
		free(p);
		free(guard);
		void *r = mk(16);
		r = realloc(r, 6000); /* r, the latest, moved: temporary */
		free(r);              /* r's new block: temporary */
	}
}
int main(void)
{
	crossed();
	churn();
	grow();
	return 0;
}
"""


@case(timeout=120, labels=("analyzers",))
def test_top_temporary_heaptrack_rule(t):
    """Temporary allocations by heaptrack's rule, per thread: freed by the
    thread's next heap call.  crossed() makes b, then a, frees b, then a
    (1000 times): none is temporary (before, a was: nothing allocated in
    between, so cc1 had 1,018,274 temporaries where heaptrack counts
    877,357); churn() makes 300; in grow(), a realloc that moves the
    thread's latest block and the frees of blocks just made are 600.  Where heaptrack is
    installed, its own count of the same program is the same."""
    from htlib import compile_c, which
    exe = compile_c(t, "rule", TEMP_RULE_SRC, flags=("-O1", "-fno-omit-frame-pointer"))
    out = t.path("rule.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", exe], check_rc=0)
    j = json.loads(t.tool(["top", "--json", "-n", "0", out]).stdout)
    by = {}
    for e in j["temporary"]["entries"]:
        fns = [f["function"] for f in e["stack"]]
        for fn in ("crossed", "churn", "grow"):
            if fn in fns:
                by[fn] = by.get(fn, 0) + e["count"]
    eq(by, {"churn": 300, "grow": 600}, "temporaries by caller")
    if not (which("heaptrack") and which("heaptrack_print")):
        return
    t.run(["heaptrack", "-o", t.path("hk"), exe], check_rc=0)
    hk = [f for f in os.listdir(t.dir) if f.startswith("hk")]
    eq(len(hk), 1, "heaptrack's file: %r" % hk)
    r = t.run(["heaptrack_print", "-f", t.path(hk[0])], check_rc=0)
    # its sites by innermost function: (heaptrack's own libstdc++, which it
    # brings into the process, has one of its own at start-up)
    theirs = {}
    for n, fn in re.findall(r"^(\d+) temporary allocations of \d+ allocations in total "
                            r"\([^)]*\) from\n(\S+)", r.stdout, re.M):
        if fn in ("mk", "grow", "churn", "crossed"):
            theirs[fn] = theirs.get(fn, 0) + int(n)
    mine = {}
    for e in j["temporary"]["entries"]:
        fn = e["stack"][0]["function"]
        mine[fn] = mine.get(fn, 0) + e["count"]
    eq(mine, theirs, "temporaries by innermost function: heaptrail's against heaptrack's")


@case(timeout=120, labels=("analyzers",))
def test_top_zero_and_empty(t):
    """-n 0 is every row, as in diff (it printed the headings alone);
    --depth 0 is a usage error (it printed rows without a frame); a table
    with no row says none (it said nothing under its heading)."""
    exe = temp_program(t)
    out = t.path("temp.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", exe], check_rc=0)
    one = json.loads(t.tool(["top", "--json", "-n", "1", out]).stdout)
    every = json.loads(t.tool(["top", "--json", "-n", "1000000", out]).stdout)
    zero = json.loads(t.tool(["top", "--json", "-n", "0", out]).stdout)
    eq(len(one["calls"]["entries"]), 1, "-n 1")
    eq(len(every["calls"]["entries"]), 2, "the stacks: churn's and hold's")
    for table in ("peak", "calls", "temporary"):
        eq(zero[table]["entries"], every[table]["entries"], "-n 0: every row of %s" % table)
    eq(zero["largest"], every["largest"], "-n 0: every row of largest")
    text = t.tool(["top", "-n", "0", out]).stdout
    eq(len(top_rows(text, "most allocation calls")), len(every["calls"]["entries"]),
       "-n 0: text rows of calls:\n" + text)
    r = t.tool(["top", "--depth", "0", out])
    eq((r.rc, r.stdout), (2, ""), "--depth 0: exit status and output")
    eq(r.stderr.strip().splitlines(),
       ["heaptrail: error: --depth=0: a row shows at least one frame; expected 1 or more"],
       "--depth 0: the error")
    keep = t.path("keep.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", keep, "--", exe, "keep"], check_rc=0)
    j = json.loads(t.tool(["top", "--json", keep]).stdout)
    eq(j["temporary"]["entries"], [], "keep: no temporary (the premise)")
    text = t.tool(["top", keep]).stdout
    eq(top_rows(text, "most temporary allocations"), ["  none"],
       "keep: the temporary table says none:\n" + text)


@case(timeout=120, labels=("stacks",))
def test_unwind_modes_agree(t):
    """The frame-pointer walk (HEAPTRAIL_UNWIND=auto, the default: rbp chain
    where functions keep it, libunwind through those that do not, cached)
    gives the same stacks as libunwind alone (dwarf), for leaky (built with
    frame pointers) through its library (built without) and glibc's
    start-up and thread frames (without)."""
    groups = {}
    for mode in ("auto", "dwarf"):
        out = t.path("%s.ht" % mode)
        r = t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--",
                   t.prog("leaky"), t.prog("libleaklib.so")], env={"HEAPTRAIL_UNWIND": mode})
        eq(r.rc, 0, "record (%s):\n%s" % (mode, r.describe()))
        j = leaks_json(t, out)
        groups[mode] = sorted((g["bytes"], g["blocks"],
                               tuple((f["function"], f["line"]) for f in g["stack"]))
                              for g in j["groups"])
    eq(groups["auto"], groups["dwarf"], "leak groups, frame pointers vs libunwind")
    r = t.run([t.prog("leaky")], env={"LD_PRELOAD": t.preload, "HEAPTRAIL_OUT": t.path("x.ht"),
                                      "HEAPTRAIL_STACKS": "8", "HEAPTRAIL_UNWIND": "sideways"})
    check("HEAPTRAIL_UNWIND=sideways" in r.stderr and "auto, dwarf or check" in r.stderr,
          "no warning for a bad HEAPTRAIL_UNWIND:\n" + r.stderr)


@case(timeout=180, locks=("cpu",))
def test_sampling(t):
    """--sample-bytes: a Poisson sample of the allocations by bytes (and
    their frees); the trace says so, and the totals analyzers compute from
    it fall near the exact ones on a large run (2M malloc/free pairs of
    16..4096 bytes, 4 GB; about 16,000 samples at 256K).  Bytes: within 5%
    (a standard deviation of 0.8%).  Calls: within 7.5%, as each sampled
    block stands for 1/p calls, and the rare small ones weigh up to 16,384
    each: a standard deviation of 1.3% (1.4% measured over 12 runs), with a
    heavy tail (one CI run was 5.6% off)."""
    n = 2000000
    exact = t.path("exact.ht")
    r = t.run([t.heaptrail, "record", "-q", "-o", exact, "--", t.prog("randloop"), str(n)],
              timeout=150)
    eq(r.rc, 0, "record:\n" + r.describe())
    e = t.stats(exact)
    samp = t.path("sampled.ht")
    r = t.run([t.heaptrail, "record", "-q", "--sample-bytes", "256K", "-o", samp, "--",
               t.prog("randloop"), str(n)], timeout=150)
    eq(r.rc, 0, "record --sample-bytes:\n" + r.describe())
    s = t.stats(samp)
    eq((s["sampled"], s["sample_bytes"]), (True, 262144), "sampled, sample_bytes")
    eq((e["sampled"], e["sample_bytes"]), (False, 0), "the exact trace: sampled")
    check(s["events"] * 50 < e["events"], "the sampled trace has %d events of %d"
          % (s["events"], e["events"]))
    for key in ("bytes_allocated",):
        check(abs(s[key] - e[key]) <= 0.05 * e[key], "%s: %d sampled vs %d exact"
              % (key, s[key], e[key]))
    for call in ("malloc", "free"):
        check(abs(s["calls"][call] - n) <= 0.075 * n, "calls.%s: %d sampled vs %d"
              % (call, s["calls"][call], n))
    eq(s["live_blocks_at_exit"], e["live_blocks_at_exit"], "live blocks at exit")
    r = t.tool(["record", "--sample-bytes", "2G", "--", "/bin/true"])
    eq(r.rc, 2, "record --sample-bytes 2G")
    r = t.tool(["record", "--sample-bytes", "256K", "-o", t.path("s2.ht"), "--",
                t.prog("randloop"), "1000"])
    check(", a sample of about one allocation per 256.0 KiB; see 'heaptrail stats" in r.stderr,
          "record's line does not say the trace is a sample:\n" + r.stderr)
    sampled_says_so(t, samp, exact)


@case(timeout=150, labels=("analyzers",))
def test_sampling_realloc(t):
    """--sample-bytes and realloc: a realloc is in the trace because the
    block it resizes was sampled (by its size at malloc), so it counts as
    that block, and its result keeps that block's weight
    (tests/progs/rshrink.c: 200,000 rounds of malloc 1..5 KiB, realloc to a
    quarter, free).  Before, the reader's weight by the new, smaller size
    counted some 790,000 reallocs and frees for 200,000.  stats, heap and
    timeline agree on the sampled trace, and stats is near the exact one:
    calls within 7.5%, bytes within 5% (test_sampling's bounds), at 32K:
    some 19,000 samples as in test_sampling (at 256K, 2,300 samples gave a
    standard deviation of about 2% and a run 6.3% off)."""
    n = 200000
    exact = t.path("exact.ht")
    t.run([t.heaptrail, "record", "-q", "-o", exact, "--", t.prog("rshrink"), str(n)],
          timeout=120, check_rc=0)
    e = t.stats(exact)
    expect_calls(e, {"malloc": n, "realloc": n, "free": n})
    samp = t.path("sampled.ht")
    t.run([t.heaptrail, "record", "-q", "--sample-bytes", "32K", "-o", samp, "--",
           t.prog("rshrink"), str(n)], timeout=120, check_rc=0)
    s = t.stats(samp)
    for call in ("malloc", "realloc", "free"):
        check(abs(s["calls"][call] - n) <= 0.075 * n, "calls.%s: %d sampled vs %d"
              % (call, s["calls"][call], n))
    check(abs(s["realloc"]["calls"] - n) <= 0.075 * n, "realloc.calls: %d sampled vs %d"
          % (s["realloc"]["calls"], n))
    eq(s["realloc"]["calls"], s["calls"]["realloc"], "realloc.calls vs calls.realloc")
    check(abs(s["bytes_allocated"] - e["bytes_allocated"]) <= 0.05 * e["bytes_allocated"],
          "bytes_allocated: %d sampled vs %d exact" % (s["bytes_allocated"], e["bytes_allocated"]))
    r = t.tool(["heap", "--json", samp])
    h = json.loads(r.stdout)["summary"]
    eq((h["malloc"], h["free"], h["realloc"]),
       (s["calls"]["malloc"], s["calls"]["free"], s["calls"]["realloc"]), "heap's calls vs stats'")
    eq((h["peak_requested_bytes"], h["end_requested_bytes"]),
       (s["peak_live_bytes"], s["live_bytes_at_exit"]), "heap's peak and end vs stats'")
    r = t.tool(["timeline", "--json", "-o", "-", samp])
    eq(json.loads(r.stdout)["peak_live_bytes"], s["peak_live_bytes"],
       "timeline's peak vs stats'")


def sampled_says_so(t, samp, exact):
    """Every analyzer says a sampled trace's numbers are estimates: one note
    on stderr (not with -q), a line or a remark in the text, the HTML
    report's summary, "sampled" in the JSON, the timeline's SVG, massif's
    desc and Perfetto's otherData; of a trace of every call, none of it
    ("sampled": false)."""
    note = ("heaptrail: note: %s: a sampled trace (about one allocation per 256.0 KiB "
            "recorded, --sample-bytes): counts, bytes and blocks are estimates" % samp)
    html = t.path("sampled.html")
    for args, text in ((["stats"], "\nsampled    about one allocation per 256.0 KiB recorded"),
                       (["leaks"], "(estimates: a sampled trace, about one allocation per "
                                   "256.0 KiB)"),
                       (["top"], "(estimates: a sampled trace, about one allocation per "
                                 "256.0 KiB)"),
                       (["timeline", "-o", t.path("tl.svg")], None),
                       (["report", "-o", html], None),
                       (["dump"], None)):
        r = t.tool(args + [samp])
        eq(r.rc, 0, "%s:\n%s" % (args[0], r.describe()))
        eq(r.stderr.count(note), 1, "%s: the note on stderr, once:\n%s" % (args[0], r.stderr))
        if text:
            check(text in r.stdout, "%s: no %r in its text:\n%s" % (args[0], text,
                                                                    r.stdout[:600]))
        e = t.tool(args + [exact])
        check("note:" not in e.stderr and "estimates" not in e.stdout,
              "%s of a trace of every call: said sampled:\n%s" % (args[0], e.describe()))
        q = t.tool(args[:1] + ["-q"] + args[1:] + [samp])
        check("note" not in q.stderr, "%s -q: the note:\n%s" % (args[0], q.stderr))
    with open(html) as f:
        check('id="sampled-note">Note: a sampled trace' in f.read(), "report: no note")
    for args in (["leaks", "--json"], ["top", "--json"], ["heap", "--json"],
                 ["timeline", "--json", "-o", "-"]):
        for path, want in ((samp, True), (exact, False)):
            r = t.tool(args + [path])
            eq(r.rc, 0, "%s:\n%s" % (" ".join(args), r.describe()))
            j = json.loads(r.stdout)
            j = j.get("timeline", j)
            eq(j["sampled"], want, "%s: sampled" % " ".join(args))
            if want:
                eq(j["sample_bytes"], 262144, "%s: sample_bytes" % " ".join(args))
    # and the files made for other tools: the timeline's SVG, massif's desc:
    # line, Perfetto's otherData (they said nothing of it)
    for path, want in ((samp, True), (exact, False)):
        svg = t.path("s.svg")
        t.run([t.heaptrail, "timeline", "-q", "-o", svg, path], check_rc=0)
        with open(svg) as f:
            eq("(estimates: a sampled trace)" in f.read(), want, "timeline SVG of %s" % path)
        ms = t.path("s.massif")
        t.run([t.heaptrail, "export", "-q", "-f", "massif", "-o", ms, path], check_rc=0)
        with open(ms) as f:
            desc = f.readline()
        eq("a sampled trace (about one allocation per 256.0 KiB" in desc, want,
           "massif desc of %s: %r" % (path, desc))
        pf = t.path("s.json")
        t.run([t.heaptrail, "export", "-q", "-f", "perfetto", "-o", pf, path], check_rc=0)
        with open(pf) as f:
            other = json.load(f)["otherData"]
        eq(other["sampled"], want, "perfetto otherData of %s" % path)
        eq("sample_note" in other, want, "perfetto sample_note of %s" % path)


@case(timeout=120)
def test_symbols_offline(t):
    """Stacks resolve from the files the trace names, moved elsewhere too
    (--sysroot: a trace from another machine with its files copied here);
    C++ names come out demangled."""
    app = os.path.join(t.dir, "opt", "app")
    os.makedirs(app)
    for f in ("leaky", "libleaklib.so"):
        shutil.copy(t.prog(f), os.path.join(app, f))
    out = t.path("moved.ht")
    r = t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--",
               os.path.join(app, "leaky"), os.path.join(app, "libleaklib.so")])
    eq(r.rc, 0, "record:\n" + r.describe())
    sysroot = t.path("sysroot")
    os.makedirs(os.path.dirname(sysroot + app))
    os.rename(app, sysroot + app)  # the program is no longer where it ran

    def direct(args):
        r = t.tool(["leaks", "--json", "--top", "1000"] + args + [out])
        eq(r.rc, 0, "leaks %s:\n%s" % (args, r.describe()))
        gs = [g for g in json.loads(r.stdout)["groups"]
              if g["stack"] and g["stack"][0]["module"] == "leaky" and g["bytes"] == 300]
        eq(len(gs), 1, "the leak_direct group (%s)" % args)
        return gs[0]["stack"][0], r.stderr

    f, err = direct([])
    eq(f["function"], None, "without the files: no function")
    check(re.match(r"0x[0-9a-f]+$", f["offset"]), "without the files: module+offset")
    check(os.path.join(app, "leaky") in err, "no warning naming the missing file:\n" + err)
    f, err = direct(["--sysroot", sysroot])
    eq(f["function"], "leak_direct", "with --sysroot")
    eq(f["line"], marker_lines("leaky.c")["direct"], "with --sysroot: line")
    # separate debug information, found by build-id under --debug-dir
    stripped = t.path("stripped")
    os.makedirs(stripped)
    exe = os.path.join(stripped, "leaky")
    shutil.copy(t.prog("leaky"), exe)
    notes = t.run(["readelf", "-n", exe]).stdout
    bid = re.search(r"Build ID: ([0-9a-f]+)", notes).group(1)
    dbg = t.path("debug", ".build-id", bid[:2])
    os.makedirs(dbg)
    eq(t.run(["objcopy", "--only-keep-debug", exe, os.path.join(dbg, bid[2:] + ".debug")]).rc, 0,
       "objcopy")
    eq(t.run(["strip", "-g", exe]).rc, 0, "strip")
    out = t.path("stripped.ht")
    eq(t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", exe]).rc, 0, "record")
    r = t.tool(["leaks", "--json", out])
    g = [g for g in json.loads(r.stdout)["groups"] if g["bytes"] == 300][0]
    eq((g["stack"][0]["function"], g["stack"][0]["file"]), ("leak_direct", None),
       "stripped: the symbol, no line")
    r = t.tool(["leaks", "--json", "--debug-dir", t.path("debug"), out])
    g = [g for g in json.loads(r.stdout)["groups"] if g["bytes"] == 300][0]
    eq(g["stack"][0]["line"], marker_lines("leaky.c")["direct"], "--debug-dir: the line")
    # C++
    cx = t.path("cxx.ht")
    r = t.run([t.heaptrail, "record", "-q", "--stacks", "-o", cx, "--", t.prog("cxx_new")])
    eq(r.rc, 0, "record cxx_new:\n" + r.describe())
    fl = folded(t, cx, "--metric", "allocations")
    check(any(k.endswith(";main;operator new(unsigned long)") and v == 11 for k, v in fl.items()),
          "operator new, demangled, 11 calls from main: %s" % list(fl))
    check(any("std::vector<int, std::allocator<int> >::reserve(unsigned long)" in k for k in fl),
          "vector<int>::reserve, demangled: %s" % list(fl))


class _Silent:
    """A TCP server on 127.0.0.1 that accepts connections, counts them and
    never answers: a debuginfod server that hangs."""

    def __init__(self):
        import socket
        import threading
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


@case(timeout=300, labels=("analyzers",))
def test_symbols_without_debuginfod(t):
    """Debug files are looked up on disk only: with DEBUGINFOD_URLS naming
    a server that never answers, `leaks` does not connect to it (libdw's
    standard look-up waited up to 90 s a module), and still finds the
    debug files on disk through .gnu_debuglink, beside the program and in
    its .debug directory.  A program with no debug file gets one note
    naming it (not with -q, nor with HEAPTRAIL_DEBUGINFOD=0).
    HEAPTRAIL_DEBUGINFOD=1 asks the server (the check that the server
    would see a query)."""
    srv = _Silent()
    try:
        for where in ("beside", ".debug", "none"):
            tag = where.strip(".")
            d = t.path("app-" + tag)
            os.makedirs(d)
            exe = os.path.join(d, "leaky")
            shutil.copy(t.prog("leaky"), exe)
            ddir = d if where == "beside" else os.path.join(d, ".debug")
            os.makedirs(ddir, exist_ok=True)
            dbg = os.path.join(ddir, "leaky.debug")
            eq(t.run(["objcopy", "--only-keep-debug", exe, dbg]).rc, 0, "objcopy")
            link = [] if where == "none" else ["--add-gnu-debuglink=" + dbg]
            # (the build-id removed where the debuglink finds the file, so
            # that only the debuglink can; kept where there is no debug
            # file, for debuginfod to be asked by it at the end)
            bid = [] if where == "none" else ["--remove-section=.note.gnu.build-id"]
            eq(t.run(["objcopy", "--strip-debug"] + bid + link + [exe]).rc, 0,
               "objcopy --strip-debug")
            if where == "none":
                os.unlink(dbg)
            out = t.path(tag + ".ht")
            eq(t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", exe]).rc, 0,
               "record")
            env = {"DEBUGINFOD_URLS": "http://127.0.0.1:%d" % srv.port,
                   "DEBUGINFOD_CACHE_PATH": t.path("dcache-" + tag),
                   "DEBUGINFOD_TIMEOUT": "1"}
            for extra in ({}, {"HEAPTRAIL_DEBUGINFOD": "0"}):
                r = t.run([t.heaptrail, "leaks", "--json", out], env=dict(env, **extra),
                          timeout=60)
                eq(r.rc, 0, "leaks (%s, %s):\n%s" % (where, extra, r.describe()))
                g = [g for g in json.loads(r.stdout)["groups"] if g["bytes"] == 300][0]
                eq((g["stack"][0]["function"], g["stack"][0]["line"]),
                   ("leak_direct", marker_lines("leaky.c")["direct"] if where != "none" else 0),
                   "%s: the function, and the line from the debug file" % where)
                notes = [l for l in r.stderr.splitlines() if "DEBUGINFOD_URLS is set" in l]
                check(len(notes) <= 1, "one note at most:\n" + r.stderr)
                named = [l for l in notes if "(leaky has none there)" in l]
                eq(len(named), 1 if where == "none" and not extra else 0,
                   "%s %s: the note naming leaky:\n%s" % (where, extra, r.stderr))
            r = t.run([t.heaptrail, "leaks", "-q", out], env=env, timeout=60)
            eq((r.rc, r.stderr), (0, ""), "%s: -q, nothing on stderr" % where)
        eq(len(srv.conns), 0, "no connection to debuginfod")
        # with debuginfod asked for, the server sees the queries
        r = t.run([t.heaptrail, "leaks", "-q", out], env=dict(env, HEAPTRAIL_DEBUGINFOD="1"),
                  timeout=120)
        eq(r.rc, 0, "HEAPTRAIL_DEBUGINFOD=1:\n" + r.describe())
        check(len(srv.conns) > 0, "HEAPTRAIL_DEBUGINFOD=1: debuginfod was asked")
    finally:
        srv.close()


@case(timeout=120, labels=("analyzers",))
def test_symbols_relative_paths(t):
    """A library the loader names by a relative path (dlopen("./x.so"),
    LD_LIBRARY_PATH=.) resolves from any directory: the recorder stores
    the file's absolute path.  A trace of an older recorder, which stored
    the relative name (tests/e2e/data), resolves from the directory the
    program ran in, and says so from anywhere else."""
    app = t.path("app")
    os.makedirs(app)
    for f in ("leaky", "libleaklib.so"):
        shutil.copy(t.prog(f), os.path.join(app, f))
    out = t.path("rel.ht")
    r = t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", "./leaky",
               "./libleaklib.so"], cwd=app, env={"LD_LIBRARY_PATH": "."})
    eq(r.rc, 0, "record:\n" + r.describe())

    def lib_site(path, cwd):
        r = t.run([t.heaptrail, "leaks", "--json", "--top", "1000", path], cwd=cwd)
        eq(r.rc, 0, "leaks:\n" + r.describe())
        gs = [g for g in json.loads(r.stdout)["groups"]
              if g["bytes"] == 123 and g["stack"] and g["stack"][0]["module"] == "libleaklib.so"]
        eq(len(gs), 1, "the library's leak of 123 bytes:\n" + r.stdout[:3000])
        return gs[0]["stack"][0], r.stderr

    f, err = lib_site(out, t.dir)
    eq(f["function"], "leaklib_inner", "recorded now, read from another directory")
    check("relative" not in err and "addresses only" not in err, "a warning:\n" + err)
    # the older trace: from elsewhere, said; from the program's directory, resolved
    data = os.path.join(HERE, "data")
    f, err = lib_site(os.path.join(data, "relative-module.ht"), t.dir)
    eq(f["function"], None, "older trace, another directory: no function")
    check("./libleaklib.so: recorded by a relative path, not found from this directory" in err,
          "no warning naming the relative path:\n" + err)
    ran = t.path("ran")
    os.makedirs(ran)
    shutil.copy(os.path.join(data, "libleaklib.so"), os.path.join(ran, "libleaklib.so"))
    f, err = lib_site(os.path.join(data, "relative-module.ht"), ran)
    eq(f["function"], "leaklib_inner", "older trace, from the program's directory")
    # (about the library: the system's own libraries that trace names may
    # have been updated since it was recorded, which leaks says too)
    said = [ln for ln in err.splitlines() if "relative" in ln or "libleaklib" in ln]
    eq(said, [], "a warning about the library")


@case(timeout=120)
def test_leaks_cxx(t):
    """C++ leaks (tests/progs/leaky_cxx.cpp): new in a member function,
    demangled, at its line; a leaked std::vector and its storage; the
    program's groups add up to valgrind's definitely + indirectly lost."""
    out = t.path("cxx.ht")
    r = t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", t.prog("leaky_cxx")])
    eq(r.rc, 0, "record:\n" + r.describe())
    j = leaks_json(t, out)
    lines = marker_lines("leaky_cxx.cpp")

    def in_prog(g):
        return [f for f in g["stack"] if f["module"] == "leaky_cxx"]
    make = [g for g in j["groups"] if in_prog(g) and in_prog(g)[0]["function"] == "shop::Factory::make(long)"]
    eq(len(make), 1, "the Factory::make group")
    g = make[0]
    eq((g["bytes"], g["blocks"]), (4 * 48, 4), "Factory::make: bytes, blocks")
    eq(g["stack"][0]["function"], "operator new(unsigned long)", "innermost: operator new")
    eq(in_prog(g)[0]["line"], lines["cxx_new"], "Factory::make: line")
    vec = [g for g in j["groups"] if in_prog(g) and not in_prog(g)[0]["function"].startswith("shop::")]
    eq(sorted(g["bytes"] for g in vec), [24, 400], "the vector and its storage")
    check(all(f["line"] == lines["cxx_vector"] for g in vec for f in in_prog(g)
              if f["function"] == "main"), "the vector's line in main")
    vg = shutil.which("valgrind")
    check(vg, "valgrind is not installed (scripts/deps.sh test installs it)")
    r = t.run([vg, "--leak-check=full", t.prog("leaky_cxx")], timeout=100)
    d = re.search(r"definitely lost: ([\d,]+) bytes", r.stderr)
    i = re.search(r"indirectly lost: ([\d,]+) bytes", r.stderr)
    check(d and i, "valgrind's summary:\n" + r.stderr[-2000:])
    lost = int(d.group(1).replace(",", "")) + int(i.group(1).replace(",", ""))
    eq(sum(g["bytes"] for g in j["groups"] if in_prog(g)), lost,
       "the program's groups vs valgrind's definitely + indirectly lost")


def stacks_by_address(t, path):
    """Every allocation stack of a trace (heaptrail top's "calls" table, all
    of it): calls, bytes and the frames as (module, offset), sorted."""
    r = t.tool(["top", "--json", "--top", "1000000", path])
    eq(r.rc, 0, "top --json:\n" + r.describe())
    j = json.loads(r.stdout)
    return sorted((e["calls"], e["bytes_allocated"],
                   tuple((f["module"], f["offset"], f["function"] or "") for f in e["stack"]))
                  for e in j["calls"]["entries"])


@case(timeout=120, labels=("stacks",))
def test_unwind_nofp_equal(t):
    """The walk from .eh_frame (auto, the default) gives exactly libunwind's
    stacks (dwarf), return address by return address, for nofp: a program
    and a library built as Debian builds them (-O2, no frame pointers),
    allocating through recursion, glibc's qsort (the comparator allocates)
    and tsearch, a function whose CFA comes from rbp (a variable-length
    array), one that realigns its stack (a CFA expression: libunwind steps
    it), a signal handler (a signal frame) and threads that exit.  The
    threads' exits leave no munmap in the trace (the recorder's own tables
    are not the program's)."""
    got = {}
    for mode in ("auto", "dwarf"):
        out = t.path("%s.ht" % mode)
        r = t.run([t.heaptrail, "record", "-q", "--stacks", "--unwind", mode, "-o", out, "--",
                   t.prog("nofp"), "3", "40"])
        eq(r.rc, 0, "record (%s):\n%s" % (mode, r.describe()))
        got[mode] = stacks_by_address(t, out)
        s = t.stats(out)
        eq((s["calls"]["munmap"], s["calls"]["mmap"]), (0, 0),
           "%s: munmap, mmap calls (the program makes none)" % mode)
    fns = {f[2] for e in got["auto"] for f in e[2]}
    for fn in ("chain", "by_value", "vla", "realigned", "on_signal", "start_thread", "main"):
        check(fn in fns, "no stack through %s: %s" % (fn, sorted(fns)))
    check(max(len(e[2]) for e in got["auto"]) >= 15, "no deep stack (recursion through chain)")
    eq(len(got["auto"]), len(got["dwarf"]), "distinct stacks, auto vs dwarf")
    for a, d in zip(got["auto"], got["dwarf"]):
        eq(a, d, "a stack, auto vs dwarf")
    # the same stack taken both ways in the same run (--unwind=check)
    unwind_check(t, [t.prog("nofp"), "3", "40"], 5001)


@case(timeout=120, labels=("stacks",))
def test_unwind_jit_frames(t):
    """Frames that no unwind information covers (jitframes.c: code in an
    anonymous executable mapping, as a JIT makes it, and assembly in the
    program's .text without an FDE, as V8's builtins in node): the walk
    guesses them as libunwind does (a frame-pointer frame), so the stacks
    go on to main, equal to libunwind's address by address (dwarf, and
    --unwind=check in one run), and with no system call per allocation
    (libunwind masks signals around each lookup that finds nothing, and
    validates the addresses it reads with system calls: node with --stacks
    took 48 s instead of 0.7)."""
    rounds = 3000
    got = {}
    for mode in ("auto", "dwarf"):
        out = t.path("%s.ht" % mode)
        r = t.run([t.heaptrail, "record", "-q", "--stacks", "--unwind", mode, "-o", out, "--",
                   t.prog("jitframes"), str(rounds)])
        eq(r.rc, 0, "record (%s):\n%s" % (mode, r.describe()))
        # (the JIT's page lies elsewhere in each run: its offset in the page)
        got[mode] = [(c, b, tuple((m, o if m else hex(int(o, 16) & 0xfff), f)
                                  for m, o, f in frames))
                     for c, b, frames in stacks_by_address(t, out)]
    eq(got["auto"], got["dwarf"], "the stacks, auto vs dwarf")
    by_size = {}
    for calls, size, frames in got["auto"]:
        by_size.setdefault(size // rounds, []).append((calls, frames))
    eq(sorted(by_size), [100, 200, 300], "allocation sizes (one stack each)")
    for size, through in ((100, None), (200, "stub_frame"), (300, "main")):
        eq(len(by_size[size]), 1, "stacks of the %d-byte blocks: %s" % (size, by_size[size]))
        calls, frames = by_size[size][0]
        eq(calls, rounds, "%d-byte allocations" % size)
        fns = [f[2] for f in frames]
        eq(fns[0], "leaf", "innermost frame of the %d-byte blocks: %s" % (size, frames))
        check("main" in fns, "the %d-byte blocks' stack stops before main: %s" % (size, frames))
        if size == 100:  # (the frame in no module: no module, no function)
            eq(frames[1][:3:2], (None, ""), "the JIT frame: %s" % (frames,))
            eq(frames[1][1], "0xc", "the JIT frame's return address in its page")
            eq(fns[2], "main", "the JIT frame's caller: %s" % (frames,))
        elif through:
            eq(fns[1], through, "the %d-byte blocks' second frame: %s" % (size, frames))
    unwind_check(t, [t.prog("jitframes"), str(rounds)], 3 * rounds)
    calls = record_syscalls(t, [t.prog("jitframes"), str(rounds)])[0]
    check(sum(calls.values()) < rounds, "%d system calls for %d allocations: %s"
          % (sum(calls.values()), 3 * rounds, calls))


@case(labels=("stacks", "analyzers"))
def test_perf_map_names_jit_frames(t):
    """A JIT's perf map (/tmp/perf-PID.map, as node --perf-basic-prof or
    java's perf-map-agent write it; jitframes.c writes one line for its
    copied code) names the frames in no module, in every command that
    shows stacks; HEAPTRAIL_PERF_MAP=0 leaves them addresses, and
    HEAPTRAIL_PERF_MAP=FILE reads another map (a saved one)."""
    out = t.path("m.ht")
    r = t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--",
               t.prog("jitframes"), "100", "map"])
    eq(r.rc, 0, "record:\n" + r.describe())
    pid = t.stats(out)["pid"]
    pmap = "/tmp/perf-%d.map" % pid
    check(os.path.exists(pmap), "jitframes wrote no %s" % pmap)
    try:
        def jit_frame(env=None):
            r = t.run([t.heaptrail, "top", "--json", "--top", "100", out], env=env)
            eq(r.rc, 0, "top --json:\n" + r.describe())
            for e in json.loads(r.stdout)["calls"]["entries"]:
                st = e["stack"]
                if e["bytes_allocated"] == 100 * 100:
                    eq(st[0]["function"], "leaf", "the 100-byte blocks' stack: %s" % st)
                    return st[1]["module"], st[1]["function"]
            fail("no stack of the 100-byte blocks:\n" + r.stdout)
        eq(jit_frame(), (None, "jit_frame_code"), "the JIT frame, named by the map")
        eq(jit_frame({"HEAPTRAIL_PERF_MAP": "0"}), (None, None), "with HEAPTRAIL_PERF_MAP=0")
        saved = t.path("saved.map")
        with open(pmap) as f:
            addr = f.read().split()[0]
        with open(saved, "w") as f:
            f.write("garbage line\n%s e saved_name\n" % addr)
        os.unlink(pmap)
        eq(jit_frame(), (None, None), "the map removed")
        eq(jit_frame({"HEAPTRAIL_PERF_MAP": saved}), (None, "saved_name"),
           "HEAPTRAIL_PERF_MAP=FILE")
        r = t.run([t.heaptrail, "flamegraph", "--folded", out], env={"HEAPTRAIL_PERF_MAP": saved})
        check(";saved_name;leaf " in r.stdout, "flamegraph --folded:\n" + r.stdout)
        r = t.run([t.heaptrail, "top", out], env={"HEAPTRAIL_PERF_MAP": t.path("none.map")})
        eq(r.rc, 0, "top with a map that is not there:\n" + r.describe())
        check("none.map" in r.stderr and "frames in no module stay addresses" in r.stderr,
              "no warning of the missing map:\n" + r.stderr)
        for cmd in ("leaks", "top", "flamegraph", "report"):
            r = t.run([t.heaptrail, cmd, "--help"])
            check("/tmp/perf-PID.map" in r.stdout and "HEAPTRAIL_PERF_MAP" in r.stdout,
                  "%s --help does not say where JIT frames get their names" % cmd)
    finally:
        if os.path.exists(pmap):
            os.unlink(pmap)


@case(timeout=180, labels=("stacks",))
def test_stacks_no_syscall_per_allocation(t):
    """`record --stacks` of nofp (about 80,000 allocations through code
    without frame pointers, 4 threads) makes system calls by the module and
    the thread, not by the allocation: in all, fewer than one per 50
    allocations, and rt_sigprocmask no more than for the threads (libunwind
    with its global cache blocks signals around every lookup: about one
    per allocation)."""
    calls, out = record_syscalls(t, [t.prog("nofp"), "3", "500"])
    s = t.stats(out)
    allocs = s["calls"]["malloc"] + s["calls"]["calloc"]
    check(allocs > 50000, "%d allocations" % allocs)
    total = sum(calls.values())
    check(total * 50 < allocs, "%d system calls for %d allocations: %s" % (total, allocs, calls))
    check(calls.get("rt_sigprocmask", 0) < 200, "%d rt_sigprocmask" % calls.get("rt_sigprocmask", 0))


@case(labels=("analyzers", "stacks"))
def test_symbols_module_changed(t):
    """A module replaced since the recording (another file, another
    build-id, at the same path) gets one warning that names it, and its
    frames show as module+offset; the recorder's own library replaced
    since (heaptrail rebuilt or upgraded) gets none: its frames are never
    shown, and every older trace would warn for nothing."""
    d = t.path("mods")
    os.mkdir(d)
    lib = os.path.join(d, "libheaptrail.so")
    prog = os.path.join(d, "churn")
    shutil.copy(t.preload, lib)
    shutil.copy(t.prog("churn"), prog)
    out = t.path("m.ht")
    r = t.run([prog, "3"], env={"LD_PRELOAD": lib, "HEAPTRAIL_OUT": out,
                                "HEAPTRAIL_STACKS": "64"})
    eq(r.rc, 0, "churn under the copied recorder:\n" + r.describe())
    fg = [t.heaptrail, "flamegraph", "--folded", out]
    r = t.run(fg)
    eq(r.rc, 0, "flamegraph before:\n" + r.describe())
    check("not the file" not in r.stderr, "a warning before anything changed:\n" + r.stderr)
    check(";one" in r.stdout, "churn's thread function in the stacks:\n" + r.stdout[:1000])
    # both replaced by other ELF files of other build-ids
    shutil.copy(t.prog("peak"), prog)
    shutil.copy(os.path.join(os.path.dirname(t.prog("nofp")), "libnofplib.so"), lib)
    r = t.run(fg)
    eq(r.rc, 0, "flamegraph after:\n" + r.describe())
    warned = [l for l in r.stderr.splitlines() if "not the file that was traced" in l]
    eq(len(warned), 1, "warnings about changed files:\n" + r.stderr)
    check(warned[0].lstrip().startswith(prog + ":"), "the warning names the program: %r" % warned[0])
    check("libheaptrail" not in r.stderr, "a warning about the recorder's own library:\n" + r.stderr)
    check(";one" not in r.stdout and "churn+0x" in r.stdout,
          "the replaced program's frames as module+offset:\n" + r.stdout[:1000])
    # and never named from the file now at the path: a library rebuilt
    # from other code, whose functions would cover the recorded addresses
    # (the warning said "addresses only", and its frames were named
    # zeta_other and pad2, functions that never ran)
    gcc = which("gcc")
    if not gcc:
        return
    src1, src2, lib = t.path("v1.c"), t.path("v2.c"), t.path("libswap.so")
    with open(src1, "w") as f:
        f.write("#include <stdlib.h>\n"
                "__attribute__((noinline)) void *alpha_alloc(size_t n)"
                " { char *p = malloc(n); p[0] = 1; return p; }\n"
                "void *entry(size_t n) { return alpha_alloc(n); }\n")
    with open(src2, "w") as f:
        f.write("#include <stdlib.h>\n"
                "int pad1(int x) { return x * 3 + 1; }\nint pad2(int x) { return x * 5 + 1; }\n"
                "int pad3(int x) { return x * 7 + 1; }\nint pad4(int x) { return x * 9 + 1; }\n"
                "__attribute__((noinline)) void *zeta_other(size_t n)"
                " { char *p = calloc(1, n); p[1] = 1; return p; }\n"
                "void *entry(size_t n) { return zeta_other(n + 1); }\n")
    main_c, main_exe = t.path("m.c"), t.path("m")
    with open(main_c, "w") as f:
        f.write("#include <dlfcn.h>\n"
                "int main(int argc, char **argv) { void *h = dlopen(argv[1], RTLD_NOW);\n"
                "  void *(*e)(unsigned long) = h ? (void *(*)(unsigned long))dlsym(h, \"entry\")"
                " : 0;\n  return e && e(777) ? 0 : 1; }\n")
    t.run([gcc, "-o", main_exe, main_c, "-ldl"], check_rc=0)
    t.run([gcc, "-g", "-O1", "-fPIC", "-shared", "-o", lib, src1], check_rc=0)
    out = t.path("swap.ht")
    r = t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", main_exe, lib])
    if r.rc != 0:
        fail("dl_main:\n" + r.describe())
    before = t.tool(["flamegraph", "--folded", out]).stdout
    check(any("alpha_alloc" in l and l.endswith(" 777") for l in before.splitlines()),
          "the library's function before the rebuild:\n" + before)
    t.run([gcc, "-g", "-O1", "-fPIC", "-shared", "-o", lib, src2], check_rc=0)
    r = t.tool(["flamegraph", "--folded", out])
    check("not the file that was traced" in r.stderr, "the warning:\n" + r.stderr)
    row = [l for l in r.stdout.splitlines() if l.endswith(" 777")]
    eq(len(row), 1, "the 777 bytes' stack:\n" + r.stdout)
    for name in ("pad1", "pad2", "pad3", "pad4", "zeta_other", "alpha_alloc"):
        check(name not in row[0], "named from the rebuilt file: " + row[0])
    check("libswap.so+0x" in row[0], "as module+offset: " + row[0])


@case(labels=("stacks",))
def test_stacks_through_signal_frames(t):
    """A stack taken in a signal handler goes on through the signal frame
    to the interrupted function and its callers, with every unwinder: the
    handler of a SIGILL allocates (tests/progs/sigtrap.c).  trap_first
    stops at its first instruction, where the address before it is another
    function's: the interrupted frame is named by the instruction it
    stopped at (it was named after the function before it, in every mode).
    trap_pushed stops after a push: with --unwind=auto the walk stepped the
    interrupted frame with the rule of the instruction before it, and the
    stack ended there or went on through a stack address; it must reach
    call_pushed and main, as libunwind alone does, and --unwind=check must
    find no difference."""
    for how in ("auto", "dwarf", "check"):
        out = t.path("sig-%s.ht" % how)
        r = t.run([t.heaptrail, "record", "-q", "--stacks", "--unwind=" + how, "-o", out, "--",
                   t.prog("sigtrap")])
        eq(r.rc, 0, "record --unwind=%s:\n%s" % (how, r.describe()))
        if how == "check":
            check(re.search(r"unwind check: \d+ stacks, 0 differ", r.stderr),
                  "--unwind=check: the walks differ:\n" + r.stderr)
        lk = json.loads(t.tool(["leaks", "--json", out]).stdout)
        for size, trap, caller in ((6161, "trap_first", "call_first"),
                                   (6262, "trap_pushed", "call_pushed")):
            gs = [g for g in lk["groups"] if g["bytes"] == size]
            eq(len(gs), 1, "--unwind=%s: one group of %d bytes" % (how, size))
            names = [f["function"] for f in gs[0]["stack"]]
            check("handler" in names, "--unwind=%s %d: the handler: %s" % (how, size, names))
            i = names.index("handler")
            # the trampoline (glibc's __restore_rt, named or not), then
            # the interrupted function, its caller and main
            rest = [n for n in names[i + 2:]]
            eq(rest[:3], [trap, caller, "main"],
               "--unwind=%s %d: after the handler and the trampoline: %s" % (how, size, names))


@case(labels=("stacks",))
def test_symbols_no_line_without_debug_info(t):
    """A function built without -g gets no file:line, even when it lies
    after a function whose line table ends with an empty row (main calls
    a function GCC knows does not return): libdw answers an address past a
    unit's last row with that row, and the frame was given main's file and
    line (addr2line and gdb: no line).  The frames with debug info keep
    theirs."""
    gcc = which("gcc")
    if not gcc:
        skip("gcc is not installed")
    withdbg, nodbg, exe = t.path("withdbg.c"), t.path("nodbg.c"), t.path("prog")
    with open(withdbg, "w") as f:
        f.write("#include <stdlib.h>\n#include <unistd.h>\nvoid *nodbg_alloc(size_t n);\n"
                "void *keep;\n"
                "__attribute__((noinline)) void finish(void) { keep = nodbg_alloc(4242); _exit(0); }\n"
                "__attribute__((noinline)) int helper(int x) { return x * 3 + 1; }\n"
                "int main(int argc, char **argv) { (void)argv; finish(); return helper(argc); }\n")
    with open(nodbg, "w") as f:
        f.write("#include <stdlib.h>\n__attribute__((noinline)) void *nodbg_alloc(size_t n)"
                " { void *p = malloc(n); __asm__ volatile(\"\" ::: \"memory\"); return p; }\n")
    t.run([gcc, "-O2", "-c", nodbg, "-o", nodbg + ".o"], check_rc=0)
    t.run([gcc, "-O2", "-g", "-c", withdbg, "-o", withdbg + ".o"], check_rc=0)
    t.run([gcc, "-o", exe, nodbg + ".o", withdbg + ".o"], check_rc=0)
    out = t.path("t.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", exe], check_rc=0)
    lk = json.loads(t.tool(["leaks", "--json", out]).stdout)
    g = [g for g in lk["groups"] if g["bytes"] == 4242]
    eq(len(g), 1, "the 4242 bytes")
    frames = {f["function"]: f for f in g[0]["stack"]}
    check("nodbg_alloc" in frames and "finish" in frames, "the frames: %s" % list(frames))
    eq((frames["nodbg_alloc"]["file"], frames["nodbg_alloc"]["line"] or 0), (None, 0),
       "nodbg_alloc: no line")
    check(frames["finish"]["file"].endswith("withdbg.c") and frames["finish"]["line"] == 5,
          "finish keeps its line: %s" % frames["finish"])


@case(labels=("stacks",))
def test_symbols_lto_inlined(t):
    """A program linked with -flto: code inlined across files shows each
    inlined frame at its line, as addr2line -i and gdb do (h_alloc at
    h.h:3, in x_mid at x.c:3, in y_top at y.c:4, in driver at y.c:5).
    dwarf_getscopes finds no scope in the unit an LTO link makes, whose
    inlined subroutines name their origins in other units: the frames were
    lost and driver got the innermost line (h.h:3)."""
    gcc = which("gcc")
    if not gcc:
        skip("gcc is not installed")
    files = {
        "h.h": "#include <stdlib.h>\nstatic inline void *h_alloc(size_t n) {\n"
               "  void *p = malloc(n);\n  return p;\n}\n",
        "x.c": "#include \"h.h\"\nextern void *keep[]; extern int nk;\n"
               "void *x_mid(size_t n) { void *p = h_alloc(n + 3); keep[nk++] = p; return p; }\n",
        "y.c": "#include <stdio.h>\nvoid *x_mid(size_t n);\nvoid *keep[1000]; int nk;\n"
               "static void *y_top(size_t n) { void *p = x_mid(n); return p; }\n"
               "__attribute__((noinline)) void driver(int k) "
               "{ for (int i = 0; i < k; i++) y_top(8000 + i); }\n"
               "int main(int argc, char **argv) { (void)argv; driver(argc + 4);\n"
               "  for (int i = 0; i < nk; i++) printf(\"%p\\n\", keep[i]); return 0; }\n",
    }
    for name, text in files.items():
        with open(t.path(name), "w") as f:
            f.write(text)
    exe = t.path("p")
    r = t.run([gcc, "-O2", "-g", "-flto", "-o", exe, t.path("x.c"), t.path("y.c")])
    if r.rc != 0:
        skip("gcc -flto cannot link here:\n" + r.describe())
    out = t.path("p.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", exe], check_rc=0)
    lk = json.loads(t.tool(["leaks", "--json", out]).stdout)
    g = [g for g in lk["groups"] if g["bytes"] == sum(range(8003, 8008))]
    eq(len(g), 1, "the 5 blocks of 8003..8007 bytes: %s" % [x["bytes"] for x in lk["groups"]])
    got = [(f["function"], os.path.basename(f["file"] or ""), f["line"], f["inlined"])
           for f in g[0]["stack"][:4]]
    eq(got, [("h_alloc", "h.h", 3, True), ("x_mid", "x.c", 3, True), ("y_top", "y.c", 4, True),
             ("driver", "y.c", 5, False)], "the frames")


@case(labels=("analyzers",))
def test_sampling_reused_address(t):
    """--sample-bytes on a program that allocates at one address over and
    over (tests/progs/sameaddr.c: 20,000 x malloc(4096), each freed): the
    estimates stay within a few percent of the truth in every run.  A
    4096-byte block weighs 1.58 and is rounded to 1 or 2 at random; the
    rounding was a function of the address alone, so every reuse rounded
    the same way and the estimate was 12,600 or 25,250 calls (-37% or
    +26%); it is now a function of the event as well."""
    n = 20000
    for run in range(4):
        out = t.path("s%d.ht" % run)
        t.run([t.heaptrail, "record", "-q", "--sample-bytes", "4096", "-o", out, "--",
               t.prog("sameaddr"), n], check_rc=0)
        s = json.loads(t.tool(["stats", "-q", "--json", out]).stdout)
        calls = s["calls"]["malloc"]
        check(abs(calls - n) <= n * 0.05, "run %d: %d calls estimated for %d" % (run, calls, n))
        check(abs(s["bytes_by_function"]["malloc"] - n * 4096) <= n * 4096 * 0.05,
              "run %d: bytes %d for %d" % (run, s["bytes_by_function"]["malloc"], n * 4096))
