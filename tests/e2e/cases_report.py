"""heaptrail report: the one-page HTML report.  Its figures equal the
analyzers' (stats, leaks), it holds only aggregates, and headless
Chromium opens it and finds every chart drawn (the page's own self-check
lists each <svg class="chart"> with its size and the marks it drew)."""

import json
import os
import re
import shutil

from htlib import bad_compare_files, case, check, eq, fail
from cases_stacks import record_leaky, leaks_json, own_site


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    fail("chromium is not installed (scripts/deps.sh test installs it)")


def selfcheck(t, html):
    """Opens html in headless Chromium; returns the page's chart list."""
    r = t.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
               "--user-data-dir=" + t.path("chromium-profile"),
               "--dump-dom", "file://" + os.path.abspath(html)], timeout=120,
              env={"HOME": t.dir})
    eq(r.rc, 0, "chromium --dump-dom:\n" + r.describe())
    m = re.search(r'<pre id="selfcheck">([^<]*)</pre>', r.stdout)
    check(m and m.group(1), "the page's self-check did not run in Chromium:\n" + r.stdout[-2000:])
    return {c["id"]: c for c in json.loads(m.group(1).replace("&quot;", '"'))}


def section(html, ident):
    """The HTML of <h3 id=ident> up to the next heading."""
    m = re.search(r'<h3 id="%s">.*?(?=<h[23]|</section>)' % ident, html, re.S)
    check(m, "no section %s in the report" % ident)
    return m.group(0)


def rows(table_html):
    """(value cell, stack summary text) per table row."""
    out = []
    for tr in re.findall(r"<tr><td>(.*?)</tr>", table_html, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", "<td>" + tr, re.S)
        summ = re.search(r"<summary>(.*?)</summary>", tr, re.S)
        out.append((cells[0], summ.group(1) if summ else ""))
    return out


def fmt_bytes(n):
    """heaptrail's ht_fmt_bytes for small values."""
    return "%d B" % n if n < 1024 else None


@case(timeout=180, labels=("analyzers",))
def test_report_leaky(t):
    """The report of tests/progs/leaky: summary figures equal stats --json,
    the leaks table lists each known leak site with its bytes (as leaks
    --json), and Chromium draws every chart."""
    trace = record_leaky(t, "leaky")
    st = t.stats(trace)
    out = t.path("leaky.html")
    r = t.tool(["report", "-o", out, trace])
    eq(r.rc, 0, "report:\n" + r.describe())
    check("wrote %s" % out in r.stderr, "no 'wrote' line:\n" + r.describe())
    html = open(out).read()
    check(len(html) < 2_000_000, "report unexpectedly large: %d bytes" % len(html))
    # summary: the live-at-exit card, from the same rules as stats
    check("in %d blocks never freed" % st["live_blocks_at_exit"] in html,
          "live blocks at exit (%d) not in the summary" % st["live_blocks_at_exit"])
    calls = re.search(r'<div class="l">calls</div><div class="v">([\d,]+)</div>', html)
    total = sum(v for k, v in st["calls"].items())
    check(calls and int(calls.group(1).replace(",", "")) == total,
          "calls card %r, stats says %d" % (calls and calls.group(1), total))
    # the leaks table: every own leak site of leaks --json, with its bytes
    lj = leaks_json(t, trace)
    leak_rows = rows(section(html, "leaks"))
    check(leak_rows, "empty leaks table")
    for g in lj["groups"]:
        site = own_site(g)
        if not site:
            continue
        want = fmt_bytes(g["bytes"])
        hit = [v for v, s in leak_rows if s.startswith(site["function"]) and v == want]
        check(hit, "leak at %s (%s) not in the report's leaks table: %r"
              % (site["function"], want, leak_rows))
    # Chromium: every chart drawn with marks
    charts = selfcheck(t, out)
    check(charts.get("timeline-chart", {}).get("marks", 0) >= 3,
          "the timeline draws its series (live, usable, break, ...): %r" % charts.get("timeline-chart"))
    for cid in ("timeline-chart", "sizes", "lifetimes", "flame-allocated", "flame-peak",
                "heap-chart"):
        check(cid in charts, "chart %s missing: %r" % (cid, charts))
        c = charts[cid]
        check(c["width"] > 0 and c["height"] > 0 and c["marks"] > 0,
              "chart %s drawn empty: %r" % (cid, c))
    # glibc's heap: the arenas of heap --json, with their threads
    hj = json.loads(t.tool(["heap", "--json", trace]).stdout)
    m = re.search(r'<section id="heap">.*?</section>\s*</section>', html, re.S)
    check(m, "no glibc heap section")
    for a in hj["arenas"]:
        for tid in a["threads"]:
            check("%d (" % tid in m.group(0), "thread %d of arena %s not in the heap section"
                  % (tid, a["arena"]))
    # one heading for the section, and a legend that names exactly the
    # lines its chart draws (no caption of a line that is not there)
    sec = m.group(0)
    heads = re.findall(r"<h2[^>]*>([^<]*)</h2>", html)
    eq(len([h for h in heads if "heap" in h.lower() and "glibc" in h.lower()]), 1,
       "headings about glibc's heap: %r" % heads)
    lines = len(re.findall(r"<polyline", sec))
    legend = re.search(r'<p class="legend">(.*?)</p>', sec, re.S)
    check(legend, "the heap chart has no legend")
    if legend:
        eq(legend.group(1).count("&#9644;"), lines, "legend entries vs lines drawn: %r"
           % legend.group(1))
    # one frame per node of the folded tree, as the flamegraph command draws
    fg = t.tool(["flamegraph", "-o", t.path("alloc.svg"), trace])
    m = re.search(r"(\d+) frames", fg.stderr)
    check(m, "flamegraph said no frame count:\n" + fg.describe())
    eq(charts["flame-allocated"]["marks"], int(m.group(1)), "frames drawn in the report's flame graph")


@case(timeout=300, labels=("replay",))
def test_report_compare(t):
    """--compare takes compare --json results: the allocator table lists each
    run's allocator, and the RSS chart compare wrote is inlined."""
    trace = t.path("peak.ht")
    t.record(trace, [t.prog("peak")])
    wl = t.path("peak.wl")
    r = t.tool(["convert", wl, trace])
    eq(r.rc, 0, "convert:\n" + r.describe())
    r = t.tool(["compare", "--json", "-n", "1", "-a", "glibc,mimalloc",
                "-o", t.path("peak-compare.svg"), wl], timeout=120)
    eq(r.rc, 0, "compare:\n" + r.describe())
    cmp = t.path("cmp.json")
    with open(cmp, "w") as f:
        f.write(r.stdout)
    out = t.path("peak.html")
    r = t.tool(["report", "-q", "--compare", cmp, "-o", out, trace])
    eq(r.rc, 0, "report --compare:\n" + r.describe())
    eq(r.stderr, "", "report -q printed")
    html = open(out).read()
    m = re.search(r'<section id="allocators">.*?</section>', html, re.S)
    check(m, "no allocators section")
    for label in ("glibc", "mimalloc"):
        check("<tr><td>%s</td>" % label in m.group(0), "no row for %s" % label)
    check("<svg" in m.group(0), "compare's RSS chart not inlined")


@case(labels=("analyzers",))
def test_report_compare_odd_numbers(t):
    """--compare with numbers compare never writes but JSON allows (a
    user's file): 1e300, the largest double, negative and fractional ones.
    The counts are taken saturated, not converted out of range (undefined
    behaviour): the page is written, a negative wall time or RSS shows as
    0; a number beyond a double (1e309) is a data error at its line and
    column, exit 2 as for any --compare file that cannot be read
    (e2e.side_file_usage_errors)."""
    trace = t.path("peak.ht")
    t.record(trace, [t.prog("peak")])
    cmp = t.path("odd.json")
    with open(cmp, "w") as f:
        f.write('{"workload": "w.wl", "results": [\n'
                ' {"label": "huge", "runs": 1e300, "wall_usec": 1e300, "total_call_cycles":'
                ' 1.7976931348623157e308, "max_rss_kb": 1e30, "rss_ideal_ratio": 1e300},\n'
                ' {"label": "negative", "runs": -2, "wall_usec": -5, "total_call_cycles": -1e30,'
                ' "max_rss_kb": -7, "rss_ideal_ratio": -1},\n'
                ' {"label": "tiny", "runs": 4.9e-324, "wall_usec": 1e-300,'
                ' "total_call_cycles": 0.5, "max_rss_kb": 0.25}]}\n')
    out = t.path("odd.html")
    r = t.tool(["report", "-q", "--compare", cmp, "-o", out, trace])
    eq(r.rc, 0, "report --compare:\n" + r.describe())
    html = open(out).read()
    for label in ("huge", "negative", "tiny"):
        check("<tr><td>%s</td>" % label in html, "no row for %s" % label)
    check("<tr><td>negative</td><td>-2</td><td>0 ns</td><td>0</td><td>0 B</td>" in html,
          "negative counts not shown as 0:\n" + html[html.find("negative") - 10:][:200])
    with open(cmp, "w") as f:
        f.write('{"workload": "w.wl",\n "results": [{"wall_usec": 1e309}]}')
    r = t.tool(["report", "-q", "--compare", cmp, "-o", out, trace])
    eq(r.rc, 2, "report --compare with 1e309:\n" + r.describe())
    check("line 2, column 28: number out of range" in r.stderr, "the error:\n" + r.stderr)


@case(labels=("analyzers",))
def test_report_bad_input(t):
    """Bad inputs: one-line errors, exit 2 for usage and 1 for data, and no
    page (nor a temporary file) left behind."""
    trace = t.path("peak.ht")
    t.record(trace, [t.prog("peak")])
    junk, other = bad_compare_files(t)
    out = t.path("out.html")
    cases = [
        (["report"], 2, "no trace given"),
        (["report", "--depth", "0", trace], 2, "--depth"),
        (["report", "-o", out, t.path("missing.ht")], 1, "missing.ht"),
        (["report", "-o", out, junk], 1, "junk.json"),
        (["report", "--compare", junk, "-o", out, trace], 2, "not JSON"),
        (["report", "--compare", other, "-o", out, trace], 2, "not the output of"),
        (["report", "--compare", t.path("nope.json"), "-o", out, trace], 2, "nope.json"),
        (["report", "-o", t.path("no", "such", "dir.html"), trace], 1, "cannot write"),
    ]
    for args, rc, what in cases:
        r = t.tool(args)
        eq(r.rc, rc, "exit of %s:\n%s" % (" ".join(args), r.describe()))
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        check(len(lines) == 1 and what in lines[0],
              "expected one line naming %r from %s:\n%s" % (what, " ".join(args), r.describe()))
        left = [n for n in os.listdir(t.dir) if n.startswith("out.html")]
        eq(left, [], "files left behind by %s" % " ".join(args))


def flame_frames(svg):
    """The frame elements of one flame graph SVG, in drawing order."""
    return re.findall(r'<g class="f" .*?</g>', svg)


@case(timeout=180, labels=("analyzers",))
def test_report_flame_same(t):
    """The report builds its flame graphs from the stack nodes, each
    node's frames resolved once (ht_flamegraph__svg); `flamegraph` draws
    the same graphs from folded stacks.  Every frame (label, value,
    position, colour) must be the same in both, on stacks of 40 to 300
    frames (tests/progs/deeprec: deeper than the recorder keeps) and on a
    multi-threaded trace."""
    for name, argv in (("deeprec", [t.prog("deeprec"), "300"]),
                       ("threads", [t.prog("threads"), "3", "5000"])):
        trace = t.path(name + ".ht")
        r = t.run([t.heaptrail, "record", "-q", "--stacks=256", "-o", trace, "--"] + argv)
        eq(r.rc, 0, "record --stacks:\n" + r.describe())
        html = t.path(name + ".html")
        eq(t.tool(["report", "-o", html, trace]).rc, 0, "report " + name)
        with open(html) as f:
            page = f.read()
        for metric, gid in (("allocated", "flame-allocated"), ("peak", "flame-peak")):
            m = re.search(r'<svg [^>]*id="%s".*?</svg>' % gid, page, re.S)
            check(m, "%s: no %s graph in the report" % (name, gid))
            svg = t.path("%s-%s.svg" % (name, metric))
            r = t.tool(["flamegraph", "--metric", metric, "--width", "1200", "-o", svg, trace])
            eq(r.rc, 0, "flamegraph --metric " + metric)
            with open(svg) as f:
                want = flame_frames(f.read())
            got = flame_frames(m.group(0))
            check(len(want) > (40 if name == "deeprec" else 3),
                  "%s %s: only %d frames drawn" % (name, metric, len(want)))
            eq(len(got), len(want), "%s %s: frames drawn" % (name, metric))
            for i, (a, b) in enumerate(zip(got, want)):
                check(a == b, "%s %s: frame %d differs:\n%s\n--- flamegraph:\n%s"
                      % (name, metric, i, a, b))


# 5 failed mallocs, 3 mallocs each freed by realloc(p, 0), 1 malloc freed:
# 4 blocks handed out, 350 bytes.
FAILS_C = r"""
#include <stdint.h>
#include <stdlib.h>

int main(void)
{
	void *volatile sink;
	size_t volatile huge = SIZE_MAX / 2;
	for (int i = 0; i < 5; i++)
		sink = malloc(huge);
	for (int i = 0; i < 3; i++) {
		void *p = malloc(100);
		sink = p;
		sink = realloc(p, 0);
	}
	void *q = malloc(50);
	sink = q;
	free(q);
	(void)sink;
	return 0;
}
"""


@case(labels=("analyzers",))
def test_report_allocations_card(t):
    """The summary card "allocated ... in N allocations" counts the blocks
    handed out (4, as stats' threads table), not the calls of allocating
    kinds (12 before: the 5 failed mallocs and the 3 realloc(p, 0) that
    only freed counted too)."""
    from htlib import compile_c
    exe = compile_c(t, "fails", FAILS_C)
    trace = t.path("fails.ht")
    t.run([t.heaptrail, "record", "-q", "-o", trace, "--", exe], check_rc=0)
    s = t.stats(trace)
    eq(sum(th["allocations"] for th in s["per_thread"]), 4, "stats: allocations")
    eq(s["bytes_allocated"], 350, "stats: bytes allocated")
    out = t.path("fails.html")
    r = t.tool(["report", "-q", "-o", out, trace])
    eq(r.rc, 0, "report:\n" + r.describe())
    with open(out) as f:
        html = f.read()
    m = re.search(r"allocated</div><div class=\"v\">([^<]*)</div><div class=\"d\">in (\d+) "
                  r"allocations", html)
    check(m, "no 'allocated' card in the page")
    eq((m.group(1), int(m.group(2))), ("350 B", 4), "the card: bytes, allocations")


NOALLOC_C = r"""
int main(void)
{
	return 0;
}
"""


@case(labels=("analyzers",))
def test_no_allocation_not_no_stacks(t):
    """A program that allocates nothing, recorded with --stacks: diff,
    events --stacks and report do not say it "has no stacks: record with
    --stacks" (they did: it was); report says it has no allocation.  A
    trace with allocations and no stacks still gets the advice."""
    from htlib import compile_c
    exe = compile_c(t, "noalloc", NOALLOC_C)
    trace = t.path("noalloc.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", trace, "--", exe], check_rc=0)
    s = t.stats(trace)
    eq(sum(th["allocations"] for th in s["per_thread"]), 0, "allocations of the program")
    for args in (["diff", trace, trace], ["events", "--stacks", trace]):
        r = t.tool(args)
        eq(r.rc, 0, "%s:\n%s" % (args[0], r.describe()))
        check("has no stacks" not in r.stderr, "%s: %s" % (args[0], r.stderr))
    out = t.path("noalloc.html")
    eq(t.tool(["report", "-q", "-o", out, trace]).rc, 0, "report")
    with open(out) as f:
        html = f.read()
    check("has no stacks" not in html and "The trace has no allocation" in html,
          "report's stacks section on a trace without allocations")
    # with allocations and without --stacks: the advice stays
    plain = t.path("plain.ht")
    t.run([t.heaptrail, "record", "-q", "-o", plain, "--", t.prog("leaky")], check_rc=None)
    r = t.tool(["diff", plain, plain])
    check("has no stacks" in r.stderr, "diff without stacks: " + r.stderr)
    eq(t.tool(["report", "-q", "-o", out, plain]).rc, 0, "report of the plain trace")
    with open(out) as f:
        check("This trace has no stacks" in f.read(), "report without stacks: no advice")
