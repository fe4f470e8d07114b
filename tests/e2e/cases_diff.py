"""heaptrail diff: two runs of tests/progs/diffsites.c, whose call sites
allocate and leak known amounts that change between runs (DIFF: markers
give their lines), compared by stack and by function; one run at two
marks or times; folded lines, the differential flame graph, identical
traces, traces without stacks, sampled traces and bad input."""

import json
import os
import re
import xml.etree.ElementTree as ET

from htlib import case, check, eq, fail

HERE = os.path.dirname(os.path.abspath(__file__))
PROGS_SRC = os.path.join(HERE, "..", "progs")

# run 1 vs run 2, per site: (before, after) of
# (alloc_bytes, alloc_blocks, live_bytes, live_blocks)
RUNS = {
    "site_a": ((1000, 10, 1000, 10), (5000, 50, 5000, 50)),
    "site_b": ((600, 2, 600, 2), (600, 2, 600, 2)),
    "site_c": ((0, 0, 0, 0), (768, 3, 768, 3)),
    "site_d": ((2000, 1, 2000, 1), (0, 0, 0, 0)),
    "site_e": ((1280, 10, 0, 0), (3840, 30, 0, 0)),
}
# "phases" at mark t1 vs mark t2 (site_b comes after t2: nowhere)
PHASES = {
    "site_a": ((1000, 10, 1000, 10), (5000, 50, 5000, 50)),
    "site_c": ((0, 0, 0, 0), (768, 3, 768, 3)),
    "site_d": ((2000, 1, 2000, 1), (2000, 1, 0, 0)),
    "site_e": ((0, 0, 0, 0), (2560, 20, 0, 0)),
}
FIELDS = ("alloc_bytes", "alloc_blocks", "live_bytes", "live_blocks")
# the sites in the order of growth, for each --sort (ties: the bigger after first)
ORDER = {
    "live": ["site_a", "site_c", "site_b", "site_e", "site_d"],
    "alloc": ["site_a", "site_e", "site_c", "site_b", "site_d"],
    "count": ["site_a", "site_e", "site_c", "site_b", "site_d"],
}


def marker_lines():
    lines = {}
    with open(os.path.join(PROGS_SRC, "diffsites.c")) as f:
        for no, text in enumerate(f, 1):
            m = re.search(r"DIFF:(\w+)", text)
            if m:
                lines["site_" + m.group(1)] = no
    return lines


def record(t, name, mode, *args):
    out = t.path(name + ".ht")
    r = t.run([t.heaptrail, "record", "-q", "-o", out] + list(args) +
              ["--", t.prog("diffsites"), mode])
    eq(r.rc, 0, "record diffsites %s:\n%s" % (mode, r.describe()))
    return out


def diff_json(t, *args):
    r = t.tool(["diff", "--json", "--top", "0"] + list(args))
    eq(r.rc, 0, "diff --json %s:\n%s" % (" ".join(args), r.describe()))
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        fail("diff --json is not JSON (%s):\n%s" % (e, r.stdout[:2000]))


def own(j, key="stack"):
    """The program's own entries: site function -> entry, in list order."""
    out = {}
    for e in j["entries"]:
        st = e[key]
        if st and st[0]["module"] == "diffsites" and st[0]["function"].startswith("site_"):
            check(st[0]["function"] not in out, "two entries for %s" % st[0]["function"])
            out[st[0]["function"]] = e
    return out


def vals(e, side):
    return tuple(e[side][f] for f in FIELDS)


def check_sites(j, want, key="stack", caller="run"):
    lines = marker_lines()
    sites = own(j, key)
    eq(sorted(sites), sorted(want), "the program's entries")
    for fn, (before, after) in want.items():
        e = sites[fn]
        eq(vals(e, "before"), before, "%s: before (%s)" % (fn, ", ".join(FIELDS)))
        eq(vals(e, "after"), after, "%s: after" % fn)
        eq(tuple(e["delta"][f] for f in FIELDS), tuple(a - b for a, b in zip(after, before)),
           "%s: delta" % fn)
        f0 = e[key][0]
        eq((os.path.basename(f0["file"] or ""), f0["line"]), ("diffsites.c", lines[fn]),
           "%s: file and line" % fn)
        if key == "stack":
            eq(e[key][1]["function"], caller, "%s: its caller" % fn)
            eq(e["key"].split(";")[-2:], [caller, fn], "%s: key" % fn)
        else:
            eq((len(e[key]), e["key"]), (1, fn), "%s: --by function" % fn)
    return sites


def totals_agree(j):
    for side in ("before", "after"):
        for f in FIELDS:
            eq(sum(e[side][f] for e in j["entries"]), j[side]["total"][f],
               "%s total %s vs the entries" % (side, f))


@case(timeout=120, labels=("analyzers",))
def test_diff_sites(t):
    """Two runs: each site's bytes and blocks allocated and live before,
    after and the change, its function, file and line and caller; the
    entries sorted by growth for each --sort; --by function; the text
    table with signs, percentages, new and gone."""
    r1, r2 = record(t, "r1", "1", "--stacks"), record(t, "r2", "2", "--stacks")
    for sort, order in ORDER.items():
        j = diff_json(t, "--sort", sort, r1, r2)
        eq((j["by"], j["sort"], j["normalized"]), ("stack", sort, False), "by, sort, normalized")
        eq([j["before"]["trace"], j["after"]["trace"]], [r1, r2], "the traces")
        eq((j["before"]["at"], j["before"]["stacks"]), ("end", True), "before: at, stacks")
        sites = check_sites(j, RUNS)
        eq([fn for fn in sorted(sites, key=lambda fn: j["entries"].index(sites[fn]))], order,
           "the sites in order of growth, --sort %s" % sort)
        m = {"live": "live_bytes", "alloc": "alloc_bytes", "count": "alloc_blocks"}[sort]
        ch = [e["delta"][m] for e in j["entries"]]
        eq(ch, sorted(ch, reverse=True), "every entry by growth of %s" % m)
        totals_agree(j)
        eq(j["entries_total"], len(j["entries"]), "entries_total")
    s1, s2 = t.stats(r1), t.stats(r2)
    for side, s in (("before", s1), ("after", s2)):
        eq((j[side]["total"]["alloc_bytes"], j[side]["total"]["live_bytes"],
            j[side]["total"]["live_blocks"]),
           (s["bytes_allocated"], s["live_bytes_at_exit"], s["live_blocks_at_exit"]),
           "%s totals vs stats" % side)
    f = diff_json(t, "--by", "function", r1, r2)
    eq(f["by"], "function", "by")
    check_sites(f, RUNS, key="function")
    top = diff_json(t, "--top", "2", r1, r2)
    eq(len(top["entries"]), 2, "--top 2")
    # the text table
    r = t.tool(["diff", r1, r2])
    eq(r.rc, 0, "diff:\n" + r.describe())
    rows = [l for l in r.stdout.splitlines() if re.search(r"\bsite_\w \(diffsites\.c", l)]
    eq([re.search(r"\b(site_\w) \(", l).group(1) for l in rows],
       ["site_a", "site_c", "site_e", "site_d"], "text rows (site_b unchanged)")
    for row, want in zip(rows, (r"^\s+\+3\.9 KiB\s+\+400\.0%\s+1000 B\s+4\.9 KiB\s+\+3\.9 KiB\s+\+40 ",
                                r"^\s+\+768 B\s+new\s+0 B\s+768 B\s+\+768 B\s+\+3 ",
                                r"^\s+0\s+0%\s+0 B\s+0 B\s+\+2\.5 KiB\s+\+20 ",
                                r"^\s+-2\.0 KiB\s+gone\s+2\.0 KiB\s+0 B\s+-2\.0 KiB\s+-1 ")):
        check(re.search(want, row), "text row %r does not match %r" % (row, want))
    check(re.search(r"site_a \(diffsites\.c:%d\) <- run \(diffsites\.c:\d+\)" %
                    marker_lines()["site_a"], rows[0]), "site_a's frames: " + rows[0])
    check(re.search(r"^bytes live\s+3\.5 KiB\s+6\.2 KiB\s+\+2\.7 KiB\s+\+76\.9%$", r.stdout, re.M),
          "the live bytes line:\n" + r.stdout)
    check("1 stack unchanged" in r.stdout, "site_b unchanged:\n" + r.stdout)


def folded(t, *args):
    r = t.tool(["diff", "--folded"] + list(args))
    eq(r.rc, 0, "diff --folded:\n" + r.describe())
    out = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^(\S(?:.*\S)?) (\d+) (\d+)$", line)
        check(m, "not a 'stack before after' line: %r" % line)
        check(m.group(1) not in out, "the same stack twice: %r" % line)
        check(all(m.group(1).split(";")), "an empty frame in %r" % line)
        out[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return out


def flame_folded(t, path, metric):
    r = t.tool(["flamegraph", "--folded", "--metric", metric, path])
    eq(r.rc, 0, "flamegraph --folded:\n" + r.describe())
    return {l.rsplit(" ", 1)[0]: int(l.rsplit(" ", 1)[1]) for l in r.stdout.splitlines()}


@case(timeout=120, labels=("analyzers",))
def test_diff_folded_svg(t):
    """--folded: 'stack before after' lines, outermost first, each stack
    once, the same stacks and values as flamegraph --folded of each trace;
    --normalize scales the before column to the after total; the
    differential SVG is well-formed, as wide as the after side, red where
    a frame grew, blue where it shrank (--negate: widths from before),
    grey where it stayed, with before/after/delta tooltips."""
    r1, r2 = record(t, "r1", "1", "--stacks"), record(t, "r2", "2", "--stacks")
    for sort, metric, i in (("live", "leaked", 2), ("alloc", "allocated", 0)):
        fl = folded(t, "--sort", sort, r1, r2)
        for fn, (before, after) in RUNS.items():
            hits = [v for k, v in fl.items() if k.endswith(";run;" + fn)]
            want = [(before[i], after[i])] if before[i] or after[i] else []
            eq(hits, want, "--sort %s: folded line of %s" % (sort, fn))
        eq({k: v[0] for k, v in fl.items() if v[0]}, flame_folded(t, r1, metric),
           "--sort %s: the before column vs flamegraph --metric %s" % (sort, metric))
        eq({k: v[1] for k, v in fl.items() if v[1]}, flame_folded(t, r2, metric),
           "--sort %s: the after column vs flamegraph --metric %s" % (sort, metric))
    fl = folded(t, r1, r2)
    tb, ta = sum(v[0] for v in fl.values()), sum(v[1] for v in fl.values())
    norm = folded(t, "--normalize", r1, r2)
    eq([v[1] for v in norm.values()], [v[1] for v in fl.values()], "--normalize: after column")
    for k, (b, a) in norm.items():
        eq(b, int(fl[k][0] * ta / tb + 0.5), "--normalize: %s" % k)
    j = diff_json(t, "--normalize", r1, r2)
    check(abs(j["before"]["scale"]["live_bytes"] / (ta / tb) - 1) < 1e-5, "scale in JSON")
    eq(j["normalized"], True, "normalized")
    # the SVG
    ns = {"s": "http://www.w3.org/2000/svg"}
    for negate in (False, True):
        svg = t.path("diff%d.svg" % negate)
        r = t.tool(["diff", "-o", svg, r1, r2] + (["--negate"] if negate else []))
        eq(r.rc, 0, "diff -o svg:\n" + r.describe())
        check("wrote %s" % svg in r.stderr, "no 'wrote' line: " + r.stderr)
        with open(svg) as f:
            text = f.read()
        check("function zoom" in text and not re.search(r'(href|src)="', text),
              "the SVG is not self-contained")
        root = ET.fromstring(text)
        total, fw = int(root.get("data-total")), float(root.get("data-fw"))
        eq(total, tb if negate else ta, "data-total (negate=%s)" % negate)
        frames = {}
        for g in root.findall(".//s:g[@class='f']", ns):
            title = g.find("s:title", ns).text
            name = title[:title.index(" (")]
            m = re.search(r"\(before (\d+), after (\d+) bytes, ([+-]\d+), (\S+)\)$", title)
            check(m, "tooltip %r" % title)
            b, a = int(m.group(1)), int(m.group(2))
            eq(int(m.group(3)), a - b, "tooltip delta of %s" % name)
            rect = g.find("s:rect", ns)
            w = a if not negate else b
            check(abs(float(rect.get("width")) - w * fw / total) < 0.02,
                  "%s: width %s for %d of %d" % (name, rect.get("width"), w, total))
            rgb = tuple(int(x) for x in re.match(r"rgb\((\d+),(\d+),(\d+)\)",
                                                 rect.get("fill")).groups())
            frames.setdefault(name, []).append((b, a, rgb))

        def colour(b, a, rgb):
            if a > b:
                return rgb[0] == 255 and rgb[1] == rgb[2] and rgb[1] <= 210
            if a < b:
                return rgb[2] == 255 and rgb[0] == rgb[1] and rgb[0] <= 210
            return rgb == (230, 230, 230)
        for name, fs in frames.items():
            for b, a, rgb in fs:
                check(colour(b, a, rgb), "%s (%d -> %d) has colour %s" % (name, b, a, rgb))
        eq([(b, a) for b, a, _ in frames.get("site_a", [])], [(1000, 5000)], "site_a")
        eq([rgb[0] for _, _, rgb in frames["site_a"]], [255], "site_a is red")
        eq([rgb for _, _, rgb in frames["site_b"]], [(230, 230, 230)], "site_b is grey")
        if negate:
            eq([(b, a, rgb[2]) for b, a, rgb in frames["site_d"]], [(2000, 0, 255)],
               "--negate: site_d is there, blue")
            check("site_c" not in frames, "--negate: site_c has no width")
        else:
            eq([(b, a) for b, a, _ in frames["site_c"]], [(0, 768)], "site_c")
            check("site_d" not in frames, "site_d has no width in the after side")
        # the biggest change is the deepest colour
        big = max(abs(a - b) for fs in frames.values() for b, a, _ in fs)
        deepest = [rgb for fs in frames.values() for b, a, rgb in fs if abs(a - b) == big]
        check(deepest and all(rgb in ((255, 0, 0), (0, 0, 255)) for rgb in deepest),
              "the largest change is not the deepest colour: %s" % deepest)
    # --svg to standard output, --by function
    r = t.tool(["diff", "--svg", "--by", "function", "--sort", "count", r1, r2])
    eq(r.rc, 0, "diff --svg:\n" + r.describe())
    root = ET.fromstring(r.stdout)
    names = [g.find("s:title", ns).text for g in root.findall(".//s:g[@class='f']", ns)]
    check(any(n.startswith("site_a (before 10, after 50 allocations, +40") for n in names),
          "--by function --sort count: %s" % names)
    # -q takes the "wrote" line away, as flamegraph's and timeline's
    # (probe V: diff -q still printed it)
    r = t.tool(["diff", "-q", "--svg", "-o", t.path("q.svg"), r1, r2])
    eq((r.rc, r.stderr), (0, ""), "diff -q --svg -o:\n" + r.describe())
    r = t.tool(["diff", "--svg", "-o", t.path("w.svg"), r1, r2])
    check("heaptrail: wrote %s: " % t.path("w.svg") in r.stderr, "without -q:\n" + r.stderr)


@case(timeout=120, labels=("analyzers",))
def test_diff_times(t):
    """One trace at two points: at marks t1 and t2 (live at each,
    allocated up to each: a block freed between is live before only, one
    allocated after t2 is nowhere); at the marks' times (recorded with a
    timestamp per call) the same, and the live totals equal leaks --at;
    --at once: from then to the end (the trace's, not its last event's);
    --to alone: from the start."""
    ph = record(t, "ph", "phases", "--stacks", "--timestamp-every=1")
    j = diff_json(t, "--from", "mark:t1", "--to", "mark:t2", ph)
    eq((j["before"]["at"], j["before"]["mark"], j["after"]["mark"]), ("mark", "t1", "t2"), "marks")
    check_sites(j, PHASES, caller="main")
    totals_agree(j)
    s = t.stats(ph)
    marks = {m["label"]: m["time_ns"] for m in s["marks"]}
    eq((j["before"]["at_ns"], j["after"]["at_ns"]), (marks["t1"], marks["t2"]), "at_ns")
    jt = diff_json(t, "--at", "%dns" % marks["t1"], "--at", "%dns" % marks["t2"], ph)
    eq(jt["before"]["at"], "time", "at")
    check_sites(jt, PHASES, caller="main")
    for side, label in (("before", "t1"), ("after", "t2")):
        r = t.tool(["leaks", "--json", "--at", "%dns" % marks[label], ph])
        lk = json.loads(r.stdout)
        eq((jt[side]["total"]["live_bytes"], jt[side]["total"]["live_blocks"]),
           (lk["leaked_bytes"], lk["leaked_blocks"]), "live at %s vs leaks --at" % label)
    # from t1 to the end: site_b too; from the start to t1: everything new
    end = diff_json(t, "--at", "mark:t1", ph)
    eq(end["after"]["at"], "end", "one --at: to the end")
    b = own(end)["site_b"]
    eq((vals(b, "before"), vals(b, "after")), ((0, 0, 0, 0), (600, 2, 600, 2)), "site_b to the end")
    eq(end["after"]["total"]["live_bytes"], s["live_bytes_at_exit"], "live at the end vs stats")
    # "the end" is the trace's end, not its last event: a time between the
    # two is before it (it was refused as "after the second time")
    eq(end["after"]["at_ns"], s["duration_ns"], "the end's time: the trace's duration")
    last = t.dump(ph)[-1].time_ns
    check(last < s["duration_ns"], "the last event (%d) before the end (%d)" % (last, s["duration_ns"]))
    mid = diff_json(t, "--at", "%dns" % ((last + s["duration_ns"]) // 2), ph)
    eq(mid["after"]["total"], end["after"]["total"], "between the last event and the end")
    start = diff_json(t, "--to", "mark:t1", ph)
    eq(start["before"]["total"], dict.fromkeys(FIELDS, 0), "--to alone: nothing before")
    eq(start["after"]["total"], end["before"]["total"], "--to t1 vs --from t1")
    # the same point twice: no change
    same = diff_json(t, "--at", "mark:t2", "--at", "mark:t2", ph)
    check(all(e["delta"] == dict.fromkeys(FIELDS, 0) for e in same["entries"]), "t2 vs t2")
    r = t.tool(["diff", "--from", "mark:t1", "--to", "mark:t2", ph])
    eq(r.rc, 0, "text")
    check('at mark "t1"' in r.stdout and 'at mark "t2"' in r.stdout, "text header:\n" + r.stdout)


@case(timeout=120, labels=("analyzers",))
def test_diff_identical(t):
    """A trace against itself, and two runs of the same program (other
    addresses: ASLR), compare to zero change in every stack."""
    a = record(t, "a", "1", "--stacks")
    b = record(t, "b", "1", "--stacks")
    j = diff_json(t, a, a)
    check(j["entries"], "no entries")
    check(all(e["delta"] == dict.fromkeys(FIELDS, 0) for e in j["entries"]), "a vs a")
    eq(j["delta"], dict.fromkeys(FIELDS, 0), "a vs a: total delta")
    r = t.tool(["diff", a, a])
    eq(r.rc, 0, "diff a a")
    check(re.search(r"^no change in any of \d+ stacks$", r.stdout, re.M), r.stdout)
    fl = folded(t, a, a)
    check(fl and all(x == y for x, y in fl.values()), "folded a a: %s" % fl)
    j = diff_json(t, a, b)
    sites = own(j)
    eq(sorted(sites), ["site_a", "site_b", "site_d", "site_e"], "run 1 vs run 1: sites")
    for fn, e in sites.items():
        eq(e["delta"], dict.fromkeys(FIELDS, 0), "run 1 vs run 1: %s" % fn)
        eq(vals(e, "after"), RUNS[fn][0], "run 1 vs run 1: %s after" % fn)


@case(timeout=120, labels=("analyzers",))
def test_diff_no_stacks_sampled(t):
    """Traces without stacks compare as one "[no stack]" entry, with a
    warning that says to record with --stacks; sampled traces compare with
    their weights (totals equal stats' for each)."""
    p1, p2 = record(t, "p1", "1"), record(t, "p2", "2")
    r = t.tool(["diff", "--json", p1, p2])
    eq(r.rc, 0, "diff without stacks:\n" + r.describe())
    j = json.loads(r.stdout)
    eq([(e["key"], e["stack"]) for e in j["entries"]], [("[no stack]", [])], "entries")
    e = j["entries"][0]
    eq(e["delta"]["live_bytes"], sum(a[2] - b[2] for b, a in RUNS.values()), "live delta")
    eq(e["delta"]["alloc_blocks"], sum(a[1] - b[1] for b, a in RUNS.values()), "alloc delta")
    eq(j["before"]["stacks"], False, "stacks")
    warn = [l for l in r.stderr.splitlines() if "record with --stacks" in l]
    eq(len(warn), 2, "a warning per trace without stacks:\n" + r.stderr)
    # sampled: weights, as stats counts them
    s1 = record(t, "s1", "1", "--stacks", "--sample-bytes", "512")
    s2 = record(t, "s2", "2", "--stacks", "--sample-bytes", "512")
    j = diff_json(t, s1, s2)
    eq(j["before"]["sample_bytes"], 512, "sample_bytes")
    for side, path in (("before", s1), ("after", s2)):
        st = t.stats(path)
        eq((j[side]["total"]["alloc_bytes"], j[side]["total"]["live_bytes"],
            j[side]["total"]["live_blocks"]),
           (st["bytes_allocated"], st["live_bytes_at_exit"], st["live_blocks_at_exit"]),
           "sampled %s totals vs stats" % side)
    check(j["after"]["total"]["alloc_blocks"] > 0, "sampled: no allocations")


@case(timeout=120, labels=("analyzers",))
def test_diff_bad_input(t):
    """A missing file, a file that is no trace, a time past the end, a mark
    the trace lacks, bad options: one error line each, exit 1 for data and 2
    for usage, and no output file left behind."""
    a = record(t, "a", "1", "--stacks")
    ph = record(t, "ph", "phases", "--stacks")
    junk = t.path("junk.ht")
    with open(junk, "w") as f:
        f.write("not a trace\n" * 20)
    missing = t.path("missing.ht")
    out = t.path("out.svg")
    cases = (
        (["diff", "-o", out, missing, a], 1, missing),
        (["diff", "-o", out, a, junk], 1, junk),
        (["diff", "-o", out, "--at", "1h", "--at", "2h", a], 2, "--at=3600.000 s: the trace "),
        (["diff", "-o", out, "--from", "mark:nope", a], 2, 'no heaptrail_mark("nope")'),
        (["diff", "--from", "mark:t2", "--to", "1us", ph], 2, "is before the first point"),
        (["diff", a], 2, "two traces to compare"),
        (["diff", a, a, a], 2, "two traces at most"),
        (["diff", "--at", "1ms", a, a], 2, "one trace with --at"),
        (["diff", "--at", "1", "--at", "2", "--at", "3", a], 2, "two times at most"),
        (["diff", "--at", "soon", a], 2, "--at 'soon'"),
        (["diff", "--from", "2s", "--to", "1s", a], 2, "is after the second"),
        (["diff", "--sort", "size", a, a], 2, "--sort"),
        (["diff", "--by", "module", a, a], 2, "--by"),
        (["diff", "--json", "--folded", a, a], 2, "one output at a time"),
        (["diff", "--width", "5", a, a], 2, "--width"),
        (["diff", "-o", t.path("no", "such", "dir.svg"), a, a], 1, "cannot write"),
    )
    for args, rc, what in cases:
        r = t.tool(args)
        eq(r.rc, rc, "exit status of %s:\n%s" % (args, r.describe()))
        lines = r.stderr.strip().splitlines()
        eq(len(lines), 1, "%s: one line on stderr:\n%s" % (args, r.stderr))
        check(lines[0].startswith("heaptrail: error:") and what in lines[0],
              "%s: stderr does not say %r: %s" % (args, what, lines[0]))
        eq(r.stdout, "", "%s: nothing on stdout" % args)
    eq(sorted(os.listdir(t.dir)), ["a.ht", "junk.ht", "ph.ht"], "files left behind")
    # a truncated trace: compared as far as it goes, with the reader's error, exit 1
    cut = t.path("cut.ht")
    with open(a, "rb") as f:
        data = f.read()
    with open(cut, "wb") as f:
        f.write(data[:len(data) * 3 // 4])
    r = t.tool(["diff", "--json", a, cut])
    eq(r.rc, 1, "diff with a truncated trace:\n" + r.describe())
    check("truncated" in r.stderr and cut in r.stderr, "the reader's error:\n" + r.stderr)
    j = json.loads(r.stdout)
    eq(j["before"]["total"]["live_bytes"], sum(b[2] for b, _ in RUNS.values()),
       "the complete side, next to a truncated one")


@case(timeout=120, labels=("analyzers",))
def test_diff_programs_differ(t):
    """Two traces of different executables (diffsites and leaky, whose
    stacks pair up by name at main and libc's frames): one note on stderr
    naming both, exit 0 (it said nothing); two runs of one executable with
    other arguments: one note saying so; a trace with itself and one trace
    at two times: none; -q: none.  The JSON says it in same_executable and
    same_command, and gives each side's executable."""
    d1, d2 = record(t, "d1", "1", "--stacks"), record(t, "d2", "2", "--stacks")
    lk = t.path("leaky.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", lk, "--", t.prog("leaky")], check_rc=0)
    exe_d, exe_l = (os.path.realpath(t.prog(n)) for n in ("diffsites", "leaky"))

    def notes(args):
        r = t.tool(["diff"] + args)
        eq(r.rc, 0, "diff %s:\n%s" % (args, r.describe()))
        return [l for l in r.stderr.splitlines() if l.startswith("heaptrail: note:")]

    eq(notes([d1, lk]), ["heaptrail: note: %s and %s are traces of different executables (%s, %s): "
                         "their stacks are matched by function names alone, so frames such as "
                         "main pair up across them" % (d1, lk, exe_d, exe_l)],
       "diffsites against leaky")
    eq(notes([d1, d2]), ["heaptrail: note: %s and %s ran different commands of %s ('%s 1', '%s 2')"
                         % (d1, d2, exe_d, t.prog("diffsites"), t.prog("diffsites"))],
       "diffsites 1 against diffsites 2")
    eq(notes([d1, d1]), [], "a trace against itself")
    eq(notes(["--at", "start", "--at", "end", d1]), [], "one trace at two times")
    eq(notes(["-q", d1, lk]), [], "-q")
    for args, same in (([d1, lk], (False, False)), ([d1, d2], (True, False)),
                       ([d1, d1], (True, True)), (["--at", "start", d1], (True, True))):
        j = diff_json(t, *args)
        eq((j.get("same_executable"), j.get("same_command")), same,
           "JSON same_executable, same_command of %s" % args)
    j = diff_json(t, d1, lk)
    eq((j["before"].get("executable"), j["after"].get("executable")), (exe_d, exe_l),
       "JSON executables")


@case(timeout=120, labels=("analyzers",))
def test_diff_points_order(t):
    """One rule for the two points, times and marks alike: the second may
    be the first (the same mark twice, the same time twice: no change) but
    not before it.  A mark that comes only before the first point is a
    second point in the wrong order, said so as for times (it said "no
    heaptrail_mark("t1") after the first point" of a trace that has one)."""
    ph = record(t, "ph", "phases", "--stacks")
    marks = {m["label"]: m["time_ns"] for m in t.stats(ph)["marks"]}

    for args in (["--at", "mark:t2", "--at", "mark:t2"], ["--from", "mark:t1", "--to", "mark:t1"],
                 ["--at", "%dns" % marks["t1"], "--at", "%dns" % marks["t1"]]):
        j = diff_json(t, *(args + [ph]))
        eq(j["delta"], dict.fromkeys(FIELDS, 0), "%s: the same point twice, no change" % args)
    for args, first in ((["--at", "mark:t2", "--at", "mark:t1"], "mark:t2 at "),
                        (["--from", "%dns" % (marks["t2"] + 1), "--to", "mark:t1"], "")):
        r = t.tool(["diff"] + args + [ph])
        eq((r.rc, r.stdout), (2, ""), "%s: exit status and output" % args)
        lines = r.stderr.strip().splitlines()
        eq(len(lines), 1, "%s: one line:\n%s" % (args, r.stderr))
        check(re.match(r"^heaptrail: error: %s: the second point \(mark:t1 at \S+ \S+\) is "
                       r"before the first point \(%s\S+ \S+\): the second must come at or after "
                       r"the first$" % (re.escape(ph), re.escape(first)), lines[0]),
              "%s: the error: %r" % (args, lines[0]))
    r = t.tool(["diff", "--from", "mark:t2", "--to", "%dns" % marks["t1"], ph])
    eq(r.rc, 2, "a second time before the first point")
    check("is before the first point" in r.stderr, r.stderr)


@case(timeout=120, labels=("analyzers",))
def test_diff_unsymbolized(t):
    """Frames without a symbol (the program moved away after recording)
    are keyed by module+offset, which is the same in every run of the
    file whatever the load address: the sites still pair up across runs,
    with their exact figures."""
    import shutil
    app = t.path("app")
    os.makedirs(app)
    exe = os.path.join(app, "diffsites")
    shutil.copy(t.prog("diffsites"), exe)
    traces = []
    for run in ("1", "2"):
        out = t.path("u%s.ht" % run)
        r = t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", exe, run])
        eq(r.rc, 0, "record:\n" + r.describe())
        traces.append(out)
    shutil.rmtree(app)
    j = diff_json(t, *traces)
    mine = [e for e in j["entries"] if e["stack"] and e["stack"][0]["module"] == "diffsites"]
    for e in mine:
        eq(e["stack"][0]["function"], None, "no symbol without the file")
        check(re.search(r"(^|;)diffsites\+0x[0-9a-f]+;diffsites\+0x[0-9a-f]+$", e["key"]),
              "key by module+offset: %r" % e["key"])
    eq(sorted((vals(e, "before"), vals(e, "after")) for e in mine), sorted(RUNS.values()),
       "the sites, paired by module+offset")
    check(any("diffsites: No such file" in l or "/app/diffsites" in l
              for l in t.tool(["diff", "--json"] + traces).stderr.splitlines()),
          "no warning naming the missing program")
