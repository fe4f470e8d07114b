"""export and flamegraph fixes: massif's regular snapshots on a trace
shorter than --snapshots units, its end snapshot after the last event, frame names never cut into one frame
(C++ template functions whose names differ past 511 bytes), write errors
said with their reason (pprof to a full device, flamegraph -o), massif's
bad option values refused, and the reason a flame graph is empty."""

import json
import os
import re
import xml.etree.ElementTree as ET

from htlib import case, check, compile_c, eq, which
import pbdecode

# 40 blocks of 1000 bytes, each after a 100 us sleep, then freed: a trace
# of a few milliseconds, far shorter than massif's 50 default snapshots.
SHORT_C = r"""
#include <stdlib.h>
#include <time.h>

static void *volatile keep[40];

int main(void)
{
	for (int i = 0; i < 40; i++) {
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
		keep[i] = malloc(1000);
	}
	for (int i = 0; i < 40; i++)
		free(keep[i]);
	return 0;
}
"""


def massif_snapshots(path):
    """(time, mem_heap_B, heap_tree) of each snapshot of a massif file."""
    with open(path) as f:
        text = f.read()
    return [(int(m.group(1)), int(m.group(2)), m.group(3)) for m in re.finditer(
        r"time=(\d+)\nmem_heap_B=(\d+)\nmem_heap_extra_B=\d+\nmem_stacks_B=0\n"
        r"heap_tree=(\w+)", text)]


def expected_ms_snapshots(events, n=50, freq=10):
    """The snapshots docs/export.md promises for --time-unit ms: time 0,
    then the first event at or past each of the n - 1 regular steps
    k * end / (n - 1) of the nanosecond clock (steps an earlier snapshot
    passed are done), the peak, and the end; every freq-th detailed."""
    end = events[-1]["time_ns"]
    steps = n - 1

    def next_step(c):
        if not end or c >= end:
            return None
        k = c * steps // end + 1
        return -(-k * end // steps)

    live, heap, peak, peak_at = {}, 0, 0, None
    for i, e in enumerate(events):  # the first pass: where the heap peaked
        if e["kind"] == "malloc":
            live[e["ptr"]] = e["size"]
            heap += e["size"]
            if heap > peak:
                peak, peak_at = heap, i
        elif e["kind"] == "free":
            heap -= live.pop(e["ptr"])
    out = []

    def snap(t, h, kind=None):
        if kind is None:
            kind = "detailed" if len(out) % freq == freq - 1 else "empty"
        out.append((t // 1000000, h, kind))

    snap(0, 0)
    nxt, heap, last = next_step(0), 0, 0
    for i, e in enumerate(events):
        if e["kind"] == "malloc":
            live[e["ptr"]] = e["size"]
            heap += e["size"]
        elif e["kind"] == "free":
            heap -= live.pop(e["ptr"])
        c = e["time_ns"]
        if i == peak_at:
            snap(c, heap, "peak")
        elif nxt is not None and c >= nxt:
            snap(c, heap)
        else:
            continue
        last = c
        if nxt is not None and c >= nxt:
            nxt = next_step(c)
    if last != end or len(out) == 1:
        snap(end, heap)
    return out


@case(labels=("analyzers",))
def test_export_massif_short_trace(t):
    """--time-unit ms on a trace of a few ms (40 mallocs 100 us apart,
    each dated: --timestamp-every=1): the regular snapshots at fractions of
    the length on the ns clock, each at the first event past its step, as
    computed here from `dump --json`; before, a trace under 49 ms had none
    (3 snapshots: 0, the peak, the end).  ms_print reads the file."""
    exe = compile_c(t, "short", SHORT_C)
    trace = t.path("short.ht")
    t.run([t.heaptrail, "record", "-q", "--timestamp-every=1", "-o", trace, "--", exe],
          check_rc=0)
    d = t.tool(["dump", "--json", trace])
    eq(d.rc, 0, "dump --json:\n" + d.describe())
    events = [json.loads(l) for l in d.stdout.splitlines() if l.strip()]
    eq(sum(e["kind"] == "malloc" for e in events), 40, "mallocs in the trace")
    out = t.path("short.massif")
    r = t.tool(["export", "-q", "-f", "massif", "--time-unit", "ms", "-o", out, trace])
    eq(r.rc, 0, "export -f massif --time-unit ms:\n" + r.describe())
    got = massif_snapshots(out)
    want = expected_ms_snapshots(events)
    t.note("trace of %d ns: %d snapshots" % (events[-1]["time_ns"], len(want)))
    check(len(want) > 3, "the test's trace gives no regular snapshot: %r" % want)
    eq(got, want, "snapshots (time in ms, live bytes, tree)")
    ms_print = t.run([which("ms_print"), out]) if which("ms_print") else None
    if ms_print:
        eq(ms_print.rc, 0, "ms_print:\n" + ms_print.describe())


# 60 blocks of 100 KB, a 30 ms sleep, then 30 of them freed and 20 of 50
# KB allocated in the same millisecond: 4,000,000 bytes live at the end.
END_SAME_MS_C = r"""
#include <stdlib.h>
#include <unistd.h>

static void *volatile keep[80];

int main(void)
{
	for (int i = 0; i < 60; i++)
		keep[i] = malloc(100000);
	usleep(30000);
	for (int i = 0; i < 30; i++)
		free(keep[i]);
	for (int i = 60; i < 80; i++)
		keep[i] = malloc(50000);
	return 0;
}
"""


@case(labels=("analyzers",))
def test_export_massif_end_same_ms(t):
    """--time-unit ms (and B, i): the last snapshot is the heap after the
    trace's last event, 4,000,000 bytes (stats' live at exit), although
    the events after the sleep share one millisecond.  Before, with ms,
    the end snapshot was left out when the snapshot of an earlier event
    of that millisecond had the same time: the file ended at 5,900,000
    bytes, the heap after the first free.  ms_print reads the files."""
    exe = compile_c(t, "endms", END_SAME_MS_C)
    trace = t.path("endms.ht")
    t.run([t.heaptrail, "record", "-q", "-o", trace, "--", exe], check_rc=0)
    s = t.stats(trace)
    eq(s["live_bytes_at_exit"], 4000000, "stats' live at exit")
    for unit in ("ms", "B", "i"):
        out = t.path("endms.%s.massif" % unit)
        r = t.tool(["export", "-q", "-f", "massif", "--time-unit", unit, "-o", out, trace])
        eq(r.rc, 0, "export -f massif --time-unit %s:\n%s" % (unit, r.describe()))
        snaps = massif_snapshots(out)
        eq(snaps[-1][1], 4000000, "--time-unit %s: the last snapshot's mem_heap_B" % unit)
        times = [x[0] for x in snaps]
        eq(times, sorted(times), "--time-unit %s: snapshot times in order" % unit)
        ms_print = t.run([which("ms_print"), out]) if which("ms_print") else None
        if ms_print:
            eq(ms_print.rc, 0, "ms_print:\n" + ms_print.describe())


@case(labels=("analyzers",))
def test_export_massif_options_refused(t):
    """--depth 0 (every tree said "[no stacks]" on a --stacks trace),
    --threshold nan (passed the 0 to 100 check) and --snapshots 0 or 1
    (taken as 2, silently): a usage error naming the value, exit 2, no
    output file.  --snapshots 2 gives time 0 and the end (and the peak)."""
    exe = compile_c(t, "short", SHORT_C)
    trace = t.path("short.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", trace, "--", exe], check_rc=0)
    out = t.path("o.massif")
    for args, msg in (
            (["--depth", "0"], "--depth=0: a tree shows at least one frame per site; "
             "expected 1 or more"),
            (["--threshold", "nan"], "--threshold=nan: expected a percentage from 0 to 100"),
            (["--threshold", "-nan"], "--threshold=-nan: expected a percentage from 0 to 100"),
            (["--snapshots", "0"], "--snapshots=0: the first is at time 0 and the last at "
             "the end; expected 2 or more"),
            (["--snapshots", "1"], "--snapshots=1: the first is at time 0 and the last at "
             "the end; expected 2 or more")):
        r = t.tool(["export", "-f", "massif", "-o", out] + args + [trace])
        eq((r.rc, r.stderr), (2, "heaptrail: error: %s\n" % msg), "export %s" % " ".join(args))
        check(not os.path.exists(out), "export %s left %s" % (" ".join(args), out))
    r = t.tool(["export", "-q", "-f", "massif", "--snapshots", "2", "--time-unit", "i",
                "-o", out, trace])
    eq(r.rc, 0, "--snapshots 2:\n" + r.describe())
    eq([(s[0], s[2]) for s in massif_snapshots(out)], [(0, "empty"), (40, "peak"),
                                                        (80, "empty")],
       "--snapshots 2 --time-unit i: (time, tree)")
    # --depth 1: one frame per site, the allocating function
    r = t.tool(["export", "-q", "-f", "massif", "--depth", "1", "--threshold", "0",
                "--time-unit", "i", "-o", out, trace])
    eq(r.rc, 0, "--depth 1:\n" + r.describe())
    with open(out) as f:
        text = f.read()
    peak = text[text.index("heap_tree=peak"):]
    check(re.search(r"\n n0: 40000 0x[0-9A-F]+: main \(.*short\.c:\d+\)\n", peak),
          "--depth 1: the peak tree's site is main, and no deeper:\n" + peak[:600])
    check("no stacks" not in text, "--depth 1 said no stacks")


# Two instantiations of one template whose names differ only past their
# 800th byte: alloc<L, X> and alloc<L, Y>, L 200 nested W<>.
TEMPLATES_CPP = r"""
#include <cstdio>
#include <cstdlib>
template <class T> struct W {};
typedef %s L;
template <class A, class B> __attribute__((noinline)) void *alloc(A, B, size_t n)
{
	return malloc(n);
}
struct X {};
struct Y {};
int main()
{
	void *volatile p = alloc(L(), X(), 1000);
	void *volatile q = alloc(L(), Y(), 5);
	return p && q ? 0 : 1;
}
""" % ("W<" * 200 + "int" + ">" * 200)

L_DEMANGLED = "W<" * 200 + "int" + ">" + " >" * 199


def alloc_name(b):
    return "void* alloc<%s, %s>(%s, %s, unsigned long)" % (L_DEMANGLED, b, L_DEMANGLED, b)


@case(labels=("analyzers",))
def test_frame_names_whole(t):
    """Frame names are whole in the flame graphs (folded, SVG, diff's
    folded stacks), pprof and massif: the two template functions of 1,667
    bytes are two frames with 1000 and 5 bytes leaked, not one of 1005
    (flame graph labels were cut at 511 bytes, pprof's and massif's at
    1023), and every tool names them alike: leaks' and top's text tables
    too (cut at 1023 bytes, the two read the same)."""
    exe = compile_c(t, "tl", TEMPLATES_CPP, cxx=True)
    trace = t.path("tl.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", trace, "--", exe], check_rc=0)
    x, y = alloc_name("X"), alloc_name("Y")
    check(len(x) > 1600, "the test's name is %d bytes" % len(x))
    r = t.tool(["flamegraph", "-q", "--folded", "-m", "leaked", trace])
    eq(r.rc, 0, "flamegraph --folded:\n" + r.describe())
    leaves = {}
    for line in r.stdout.splitlines():
        stack, value = line.rsplit(" ", 1)
        leaf = stack.split(";")[-1]
        leaves[leaf] = leaves.get(leaf, 0) + int(value)
    eq({k: v for k, v in leaves.items() if k.startswith("void* alloc<")}, {x: 1000, y: 5},
       "flamegraph --folded -m leaked: the alloc frames and their bytes")
    # the SVG: two frames, their titles the whole names
    svg = t.path("tl.svg")
    r = t.tool(["flamegraph", "-q", "-m", "leaked", "-o", svg, trace])
    eq(r.rc, 0, "flamegraph -o:\n" + r.describe())
    root = ET.parse(svg).getroot()
    ns = {"s": "http://www.w3.org/2000/svg"}
    frames = {}
    for g in root.findall(".//s:g[@class='f']", ns):
        title = g.find("s:title", ns).text
        name = title[:title.rindex(" (")]
        if name.startswith("void* alloc<"):
            frames[name] = int(re.search(r"\((\d+) bytes", title).group(1))
    eq(frames, {x: 1000, y: 5}, "the SVG's alloc frames")
    # diff's folded stacks join the same labels
    r = t.tool(["diff", "-q", "--folded", trace, trace])
    eq(r.rc, 0, "diff --folded:\n" + r.describe())
    diffed = sorted(l.rsplit(" ", 2)[0].split(";")[-1] for l in r.stdout.splitlines()
                    if ";void* alloc<" in l)
    eq(diffed, [x, y], "diff --folded: the alloc frames")
    # pprof: two functions, their inuse bytes
    pb = t.path("tl.pb.gz")
    r = t.tool(["export", "-q", "-f", "pprof", "-o", pb, trace])
    eq(r.rc, 0, "export -f pprof:\n" + r.describe())
    with open(pb, "rb") as f:
        prof = pbdecode.Profile(f.read())
    inuse = {k: v for k, v in prof.by_leaf("inuse_space").items()
             if k and k.startswith("void* alloc<")}
    eq(inuse, {x: 1000, y: 5}, "pprof: inuse_space by leaf function")
    # massif: the peak tree's sites
    ms = t.path("tl.massif")
    r = t.tool(["export", "-q", "-f", "massif", "--threshold", "0", "-o", ms, trace])
    eq(r.rc, 0, "export -f massif:\n" + r.describe())
    with open(ms) as f:
        text = f.read()
    peak = text[text.index("heap_tree=peak"):]
    sites = {}
    for m in re.finditer(r"\n n\d+: (\d+) 0x[0-9A-F]+: (void\* alloc<.*) \(.*tl\.cpp:\d+\)\n",
                         peak):
        sites[m.group(2)] = int(m.group(1))
    eq(sites, {x: 1000, y: 5}, "massif: the peak tree's alloc sites")
    # the text tables (leaks, top, top --by function) print them whole too
    # (cut at 1023 bytes: alike)
    for argv in (["leaks"], ["top"], ["top", "--by", "function"]):
        r = t.tool(argv + [trace])
        eq(r.rc, 0, "%s:\n%s" % (" ".join(argv), r.describe()))
        check(x in r.stdout and y in r.stdout,
              "%s: the two names are not whole:\n%s" % (" ".join(argv), r.stdout[:3000]))


# 600 functions, each allocating from its own line: a profile whose
# gzipped size is well above stdio's buffer.
def many_sites_c(n=600):
    fns = "".join("__attribute__((noinline)) void *site_%d(void) { return malloc(%d); }\n"
                  % (i, i + 1) for i in range(n))
    calls = "".join("\tkeep[%d] = site_%d();\n" % (i, i) for i in range(n))
    return ("#include <stdlib.h>\nstatic void *volatile keep[%d];\n%s"
            "int main(void)\n{\n%s\treturn 0;\n}\n" % (n, fns, calls))


@case(labels=("analyzers",))
def test_export_write_errors_said(t):
    """A profile that does not fit in stdio's buffer, to /dev/full: "cannot
    write /dev/full: No space left on device" as the other formats say
    it (it said "cannot compress the profile (zlib)"); flamegraph -o
    /dev/full and diff -o /dev/full give the reason too (they said
    "cannot write /dev/full")."""
    exe = compile_c(t, "many", many_sites_c())
    trace = t.path("many.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", trace, "--", exe], check_rc=0)
    pb = t.path("many.pb.gz")
    r = t.tool(["export", "-q", "-f", "pprof", "-o", pb, trace])
    eq(r.rc, 0, "export -f pprof:\n" + r.describe())
    check(os.path.getsize(pb) > 16384, "the profile is %d bytes" % os.path.getsize(pb))
    for args in (["export", "-q", "-f", "pprof"], ["export", "-q", "-f", "massif"],
                 ["flamegraph", "-q"], ["flamegraph", "-q", "--folded"],
                 ["diff", "--json", trace], ["diff", "--folded", trace]):
        r = t.tool(args + ["-o", "/dev/full", trace])
        eq((r.rc, r.stderr),
           (1, "heaptrail: error: cannot write /dev/full: No space left on device\n"),
           " ".join(args) + " -o /dev/full")


@case(labels=("analyzers",))
def test_flamegraph_empty_reason(t):
    """An empty flame graph says why: a --stacks trace of a program that
    allocates nothing "(the trace has no allocation)", not "(no stacks:
    record with --stacks)" (the format keeps no flag of --stacks, and no
    allocation leaves no stack); a program that frees all it allocates,
    -m leaked: nothing more than "nothing to show"."""
    exe = compile_c(t, "none", "int main(void)\n{\n\treturn 0;\n}\n")
    trace = t.path("none.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", trace, "--", exe], check_rc=0)
    for args in (["--folded"], ["-o", "-"]):
        r = t.tool(["flamegraph"] + args + [trace])
        eq((r.rc, r.stderr), (0, "heaptrail: warning: %s: nothing to show for "
                                 "--metric=allocated (the trace has no allocation)\n" % trace),
           "flamegraph %s of no allocation" % args[0])
    exe = compile_c(t, "short", SHORT_C)
    trace = t.path("short.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", trace, "--", exe], check_rc=0)
    r = t.tool(["flamegraph", "--folded", "-m", "leaked", trace])
    eq((r.rc, r.stdout, r.stderr),
       (0, "", "heaptrail: warning: %s: nothing to show for --metric=leaked\n" % trace),
       "flamegraph -m leaked of a program that frees everything")
