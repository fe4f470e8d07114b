"""heaptrail export: pprof decoded back (by our own wire-format decoder,
tests/e2e/pbdecode.py, and by `go tool pprof` when go is installed),
Chrome/Perfetto JSON parsed, massif read by ms_print, CSV against dump;
every figure against stats --json / leaks --json, on tests/progs/expo.c
(exact allocations at SITE: lines) and tests/progs/leaky.c."""

import csv
import io
import json
import os
import re
import shutil

from htlib import case, check, eq, fail, skip
from cases_stacks import SITES, find_group, leaks_json, marker_lines, record_leaky
import pbdecode

# expo.c: site -> (function, inuse bytes, inuse blocks, alloc bytes, alloc calls)
EXPO = {
    "a": ("alloc_a", 4000, 4, 10000, 10),
    "b": ("alloc_b", 3000, 1, 3000, 1),
    "worker": ("worker", 5000, 1, 5000, 1),
}
TYPES = [("alloc_objects", "count"), ("alloc_space", "bytes"),
         ("inuse_objects", "count"), ("inuse_space", "bytes")]


def _lines(name):
    """SITE:<site> marker -> line number, in tests/progs/<name>."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "progs", name)
    out = {}
    with open(here) as f:
        for no, text in enumerate(f, 1):
            m = re.search(r"SITE:(\w+)", text)
            if m:
                out[m.group(1)] = no
    return out


def record_expo(t, name="expo", args=("--stacks",)):
    out = t.path(name + ".ht")
    r = t.run([t.heaptrail, "record", "-q", "-o", out] + list(args) + ["--", t.prog("expo")])
    eq(r.rc, 0, "record expo:\n" + r.describe())
    return out


def export(t, fmt, trace, *args, rc=0):
    out = t.path("%s.%s" % (os.path.basename(trace), fmt))
    r = t.tool(["export", "--format", fmt, "-o", out] + list(args) + [trace])
    eq(r.rc, rc, "export --format %s:\n%s" % (fmt, r.describe()))
    return out, r


def pprof(t, trace, *args):
    out, r = export(t, "pprof", trace, *args)
    with open(out, "rb") as f:
        data = f.read()
    try:
        return pbdecode.Profile(data), out, r
    except ValueError as e:
        fail("%s is not a valid gzipped profile.proto: %s" % (out, e))


def alloc_totals(s):
    """Allocations and bytes allocated, as stats counts them."""
    return sum(b["count"] for b in s["size_histogram"]), s["bytes_allocated"]


def go_pprof(t, args):
    go = shutil.which("go")
    if not go:
        return None
    env = {"HOME": t.dir, "PPROF_TMPDIR": t.dir, "GOCACHE": t.path("gocache"),
           "GOFLAGS": "-mod=mod"}
    r = t.run([go, "tool", "pprof", "-symbolize=none"] + list(args), env=env, timeout=120)
    eq(r.rc, 0, "go tool pprof %s:\n%s" % (" ".join(args), r.describe()))
    return r.stdout


def go_raw_totals(text):
    """The column sums of the samples `go tool pprof -raw` prints."""
    m = re.search(r"^Samples:\n(.*?)\n(.*?)^Locations", text, re.S | re.M)
    check(m, "no Samples in go tool pprof -raw:\n" + text[:2000])
    names = [x.split("/")[0].replace("[dflt]", "") for x in m.group(1).split()]
    sums = [0] * len(names)
    for line in m.group(2).splitlines():
        if ":" not in line:
            continue
        vals = line.split(":")[0].split()
        for i, v in enumerate(vals):
            sums[i] += int(v)
    return dict(zip(names, sums))


def check_profile_shape(p, trace):
    eq(p.types, TYPES, "sample types")
    eq(p.default_type, "inuse_space", "default_sample_type")
    eq(p.period_type, ("space", "bytes"), "period_type")
    check(p.raw["time_nanos"] > 1500000000 * 10**9, "time_nanos %d is not a wall-clock time"
          % p.raw["time_nanos"])
    check(p.raw["duration_nanos"] > 0, "duration_nanos is 0")
    check(any(trace in c for c in p.comments), "no comment naming the trace: %s" % p.comments)


@case(timeout=120, labels=("analyzers",))
def test_export_pprof_exact(t):
    """pprof of expo: sample types, and for each allocation site its
    function, file and line and exact inuse/alloc figures; totals equal
    stats --json; mappings carry the executable and its build id; go
    tool pprof reads the same numbers back (-raw) and names the sites
    (-top)."""
    trace = record_expo(t)
    s = t.stats(trace)
    p, out, r = pprof(t, trace)
    check_profile_shape(p, trace)
    lines = _lines("expo.c")
    nobj, nbytes = alloc_totals(s)
    eq((p.total("alloc_objects"), p.total("alloc_space")), (nobj, nbytes),
       "alloc_objects, alloc_space vs stats")
    eq((p.total("inuse_objects"), p.total("inuse_space")),
       (s["live_blocks_at_exit"], s["live_bytes_at_exit"]), "inuse vs stats at exit")
    ti = [x for x, _ in TYPES]
    for site, (fn, ibytes, iblocks, abytes, acalls) in EXPO.items():
        hits = [smp for smp in p.samples if p.frames(smp) and p.frames(smp)[0][0] == fn]
        eq(len(hits), 1, "samples whose innermost frame is %s" % fn)
        smp = hits[0]
        v = dict(zip(ti, smp[1]))
        eq((v["inuse_space"], v["inuse_objects"], v["alloc_space"], v["alloc_objects"]),
           (ibytes, iblocks, abytes, acalls), "%s: inuse/alloc figures" % site)
        f0 = p.frames(smp)[0]
        eq((os.path.basename(f0[1]), f0[2]), ("expo.c", lines[site]), "%s: file:line" % site)
        loc = p.locations[smp[0][0]]
        check(loc["address"], "%s: the location has no address" % site)
        m = p.mappings.get(loc["mapping_id"])
        check(m and m["filename"].endswith("/expo"), "%s: mapping %r" % (site, m))
        check(re.fullmatch(r"[0-9a-f]{40}", m["build_id"]), "build id %r" % m["build_id"])
        check(m["memory_start"] <= loc["address"] < m["memory_limit"], "address in its mapping")
    a = [smp for smp in p.samples if p.frames(smp) and p.frames(smp)[0][0] == "alloc_a"][0]
    eq([f[0] for f in p.frames(a)][:2], ["alloc_a", "main"], "alloc_a's callers")
    # the tracer's own frames are not there
    for smp in p.samples:
        for loc in smp[0]:
            m = p.mappings.get(p.locations[loc]["mapping_id"])
            check(not (m and "libheaptrail" in m["filename"]),
                  "a sample goes through the tracer's own frames: %s" % p.frames(smp))
    raw = go_pprof(t, ["-raw", out])
    if raw is None:
        t.note("go is not installed: go tool pprof part skipped")
        return
    eq(go_raw_totals(raw), {"alloc_objects": nobj, "alloc_space": nbytes,
                            "inuse_objects": s["live_blocks_at_exit"],
                            "inuse_space": s["live_bytes_at_exit"]}, "go tool pprof -raw sums")
    top = go_pprof(t, ["-top", "-nodefraction=0", "-unit=B", "-sample_index=inuse_space", out])
    for site, (fn, ibytes, _, _, _) in EXPO.items():
        check(re.search(r"^\s*%dB\s.*\s%s$" % (ibytes, fn), top, re.M),
              "go tool pprof -top: no %dB flat for %s:\n%s" % (ibytes, fn, top))
    top = go_pprof(t, ["-top", "-nodefraction=0", "-unit=B", "-sample_index=alloc_space", out])
    check(re.search(r"^\s*10000B\s.*\salloc_a$", top, re.M), "-top alloc_space:\n" + top)


@case(timeout=150, labels=("analyzers",))
def test_export_pprof_leaky(t):
    """pprof of leaky: each leak site's inuse_space and inuse_objects equal
    leaks --json's group, with the function and line of the site; the
    inlined calloc is a location of two lines, leak_inline then outer."""
    trace = record_leaky(t, "leaky")
    j = leaks_json(t, trace)
    p, out, _ = pprof(t, trace)
    lines = marker_lines("leaky.c")
    lines.update({"lib": marker_lines("leaklib.c")["lib"]})
    ti = [x for x, _ in TYPES]
    for site, (size, blocks, fn, inlined) in SITES.items():
        g = find_group(j, fn)
        hits = [smp for smp in p.samples if p.frames(smp) and p.frames(smp)[0][0] == fn]
        check(hits, "no sample whose innermost frame is %s" % fn)
        v = [sum(dict(zip(ti, smp[1]))[k] for smp in hits) for k in ("inuse_space", "inuse_objects")]
        eq(v, [g["bytes"], g["blocks"]], "%s: inuse vs leaks --json" % site)
        eq(v, [size, blocks], "%s: inuse vs the program" % site)
        f0 = p.frames(hits[0])[0]
        eq(f0[2], lines[site], "%s: line" % site)
    inl = [smp for smp in p.samples if p.frames(smp) and p.frames(smp)[0][0] == "leak_inline"][0]
    loc = p.locations[inl[0][0]]
    eq([ln[0] for ln in loc["lines"]], ["leak_inline", "outer"],
       "the inlined call: one location, innermost line first")
    eq(loc["lines"][1][2], lines["outer_call"], "outer's line")
    s = t.stats(trace)
    eq(p.total("inuse_space"), s["live_bytes_at_exit"], "inuse_space vs stats")
    eq((p.total("alloc_objects"), p.total("alloc_space")), alloc_totals(s), "alloc vs stats")
    top = go_pprof(t, ["-top", "-nodefraction=0", "-unit=B", "-sample_index=inuse_space", out])
    if top is not None:
        for fn in ("leak_direct", "xalloc", "leak_thread", "leaklib_inner"):
            check(re.search(r"\s%s$" % fn, top, re.M), "go tool pprof -top lacks %s:\n%s"
                  % (fn, top))


@case(timeout=120, labels=("analyzers",))
def test_export_pprof_options(t):
    """--at-peak: inuse at the peak adds up to stats' peak; a trace without
    stacks: one sample location, said on stderr, the same totals; a
    sampled trace: counts scaled by the weights like stats."""
    trace = record_expo(t)
    s = t.stats(trace)
    p, _, _ = pprof(t, trace, "--at-peak")
    eq(p.total("inuse_space"), s["peak_live_bytes"], "inuse_space at the peak")
    eq(p.total("inuse_objects"), s["live_blocks_at_peak"], "inuse_objects at the peak")
    eq(p.by_leaf("inuse_space").get("alloc_a"), 4000, "alloc_a at the peak")
    eq((p.total("alloc_objects"), p.total("alloc_space")), alloc_totals(s), "alloc totals")
    plain = record_expo(t, "plain", ())
    sp = t.stats(plain)
    p, _, r = pprof(t, plain)
    check("no stacks" in r.stderr and "--stacks" in r.stderr, "no word of the missing stacks:\n"
          + r.stderr)
    eq({f for smp in p.samples for f, _, _ in p.frames(smp)},
       {"[no stacks: record with --stacks]"}, "functions without stacks")
    eq(len(p.samples), 1, "samples without stacks")
    eq((p.total("alloc_objects"), p.total("alloc_space")), alloc_totals(sp), "alloc, no stacks")
    eq(p.total("inuse_space"), sp["live_bytes_at_exit"], "inuse, no stacks")
    sampled = record_expo(t, "sampled", ("--stacks", "--sample-bytes", "4096"))
    ss = t.stats(sampled)
    check(ss["sampled"], "the trace is not sampled")
    p, _, _ = pprof(t, sampled)
    eq(p.raw["period"], 4096, "period of a sampled profile")
    eq((p.total("alloc_objects"), p.total("alloc_space")), alloc_totals(ss), "sampled alloc")
    eq(p.total("inuse_space"), ss["live_bytes_at_exit"], "sampled inuse")


def perfetto(t, trace, *args):
    out, r = export(t, "perfetto", trace, *args)
    with open(out) as f:
        try:
            return json.load(f), r
        except ValueError as e:
            fail("%s is not JSON: %s" % (out, e))


def counter_values(d, name):
    return [e["args"]["bytes"] for e in d["traceEvents"] if e["ph"] == "C" and e["name"] == name]


@case(timeout=120, labels=("analyzers",))
def test_export_perfetto(t):
    """Chrome/Perfetto JSON of expo: valid JSON with traceEvents and
    displayTimeUnit; both threads named, each with its lifetime slice;
    counters whose maxima are stats' peaks; markers; the 2 MiB allocation
    as an instant on the main thread; --all-events: every call; a tiny
    --max-points keeps the maxima."""
    trace = record_expo(t)
    s = t.stats(trace)
    d, _ = perfetto(t, trace)
    check(d.get("displayTimeUnit") in ("ns", "ms"), "displayTimeUnit")
    ev = d["traceEvents"]
    for e in ev:
        check({"name", "ph", "ts", "pid", "tid"} <= set(e), "event without a field: %r" % e)
    names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M"
             and e["name"] == "thread_name"}
    eq(sorted(names.values()), ["expo-main", "expo-worker"], "thread names")
    slices = {e["tid"]: e for e in ev if e["ph"] == "X"}
    eq(set(slices), set(names), "one lifetime slice per thread")
    for tid, sl in slices.items():
        eq(sl["name"], names[tid], "slice name")
        check(sl["dur"] >= 0 and sl["ts"] >= 0, "slice times %r" % sl)
    eq(len(names), s["threads"], "threads vs stats")
    eq(max(counter_values(d, "live heap (requested bytes)")), s["peak_live_bytes"],
       "requested-bytes counter max vs stats' peak")
    eq(max(counter_values(d, "live heap (usable bytes)")), s["peak_live_usable_bytes"],
       "usable-bytes counter max vs stats")
    eq(counter_values(d, "live heap (requested bytes)")[-1], s["live_bytes_at_exit"],
       "the last value of the heap counter")
    check(counter_values(d, "RSS"), "no RSS counter")
    marks = [(e["name"], e["s"]) for e in ev if e["ph"] == "i" and e.get("cat") == "marker"]
    eq(marks, [("begin", "p"), ("end", "p")], "markers")
    big = [e for e in ev if e["ph"] == "i" and e.get("cat") == "big allocation"]
    main_tid = [tid for tid, n in names.items() if n == "expo-main"][0]
    eq([(e["args"]["size"], e["tid"]) for e in big], [(2 << 20, main_tid)], "big allocations")
    # every call, and a bounded counter
    d2, r = perfetto(t, trace, "--all-events", "--max-points", "8", "--big", "0")
    check("--all-events" in r.stderr, "no warning about --all-events:\n" + r.stderr)
    calls = [e for e in d2["traceEvents"] if e["ph"] == "i" and e.get("cat") == "call"]
    eq(len(calls), s["events"], "--all-events instants vs stats' events")
    eq(sum(1 for e in calls if e["name"] == "malloc"), s["calls"]["malloc"], "malloc instants")
    check(not [e for e in d2["traceEvents"] if e.get("cat") == "big allocation"], "--big 0")
    heap = counter_values(d2, "live heap (requested bytes)")
    check(len(heap) <= 8, "--max-points 8 gave %d points" % len(heap))
    eq(max(heap), s["peak_live_bytes"], "max kept with --max-points 8")


def ms_print(t, path):
    mp = shutil.which("ms_print")
    check(mp, "ms_print is not installed (valgrind; scripts/deps.sh test)")
    r = t.run([mp, path])
    eq(r.rc, 0, "ms_print:\n" + r.describe())
    check(not r.stderr.strip(), "ms_print complained:\n" + r.stderr)
    return r.stdout


def ms_rows(text):
    """snapshot number -> (time, total, useful, extra) from ms_print's tables."""
    rows = {}
    for m in re.finditer(r"^\s*(\d+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s*$",
                         text, re.M):
        rows[int(m.group(1))] = tuple(int(x.replace(",", "")) for x in m.group(2, 3, 4, 5))
    return rows


@case(timeout=120, labels=("analyzers",))
def test_export_massif(t):
    """massif of expo: ms_print reads it (exit 0, nothing on stderr); the
    peak snapshot's useful heap is stats' peak; the peak tree has
    alloc_a's 4000 bytes at its line; snapshots stay within --snapshots
    plus the peak and the end; every time unit reads; a newline in the
    command or the trace's name does not break massif's lines."""
    trace = record_expo(t)
    s = t.stats(trace)
    lines = _lines("expo.c")
    out, _ = export(t, "massif", trace, "--threshold", "0.1")
    text = ms_print(t, out)
    m = re.search(r"Detailed snapshots: \[(.*)\]", text)
    check(m, "no detailed snapshots in ms_print's output:\n" + text[:3000])
    peak = re.search(r"(\d+) \(peak\)", m.group(1))
    check(peak, "no peak snapshot: " + m.group(0))
    rows = ms_rows(text)
    pk = rows[int(peak.group(1))]
    eq(pk[2], s["peak_live_bytes"], "ms_print's useful heap at the peak vs stats")
    eq(max(r[2] for r in rows.values()), s["peak_live_bytes"], "no snapshot above the peak")
    with open(out) as f:
        raw = f.read()
    check(re.search(r"^ +n\d+: 4000 0x[0-9A-F]+: alloc_a \(.*expo\.c:%d\)$" % lines["a"], raw, re.M),
          "the peak tree lacks alloc_a's 4000 bytes at expo.c:%d:\n%s" % (lines["a"], raw[-3000:]))
    check(re.search(r"^heap_tree=peak$", raw, re.M), "no heap_tree=peak")
    check(len(rows) <= 50 + 2, "%d snapshots" % len(rows))
    times = [r[0] for _, r in sorted(rows.items())]
    eq(times, sorted(times), "snapshot times in order")
    for unit in ("ms", "i"):
        o2, _ = export(t, "massif", trace, "--time-unit", unit, "--snapshots", "5",
                       "--detailed-freq", "1")
        txt = ms_print(t, o2)
        check("time(%s)" % unit in txt, "time unit %s in ms_print's table" % unit)
        eq(max(r[2] for r in ms_rows(txt).values()), s["peak_live_bytes"], "peak, unit " + unit)
    # leaky, whose leaks are small: the threshold folds them
    lk = record_leaky(t, "leaky")
    o3, _ = export(t, "massif", lk, "--threshold", "20")
    with open(o3) as f:
        raw = f.read()
    check(re.search(r"^ +n0: \d+ in \d+ places?, (all )?below massif's threshold \(20\.00%\)$",
                    raw, re.M), "no below-threshold line:\n" + raw[-2000:])
    ms_print(t, o3)
    # a command whose argument holds a newline, a trace whose name does:
    # desc and cmd stay one line each (they used to break the file)
    odd = t.path("odd\nname.ht")
    r = t.run([t.heaptrail, "record", "-q", "-o", odd, "--", "/bin/sh", "-c", "true\ntrue"])
    eq(r.rc, 0, "record:\n" + r.describe())
    o4, _ = export(t, "massif", odd)
    with open(o4) as f:
        head = f.read().splitlines()[:3]
    check(head[0].startswith("desc: ") and "odd name.ht" in head[0], "desc: %r" % head[0])
    eq(head[1], "cmd: /bin/sh -c true true", "the cmd line")
    check(head[2].startswith("time_unit: "), "line 3: %r" % head[2])
    ms_print(t, o4)


HEAP_CALLS = ("malloc", "free", "calloc", "realloc", "reallocarray", "memalign",
              "posix_memalign", "aligned_alloc", "valloc", "pvalloc")


@case(timeout=120, labels=("analyzers",))
def test_export_massif_time_calls(t):
    """--time-unit i counts heap calls, as docs/export.md says: the last
    snapshot's time is the malloc family's and free's calls (stats'), not
    the trace's events (expo's marks, thread starts and names, mmaps and
    heap_breaks are events too), and the peak snapshot's time is the calls
    made up to the peak."""
    trace = record_expo(t, "expo", ())
    s = t.stats(trace)
    calls = sum(s["calls"][k] for k in HEAP_CALLS)
    check(s["events"] > calls, "expo: %d events, %d heap calls" % (s["events"], calls))
    out, _ = export(t, "massif", trace, "--time-unit", "i")
    with open(out) as f:
        raw = f.read()
    snaps = re.findall(r"^time=(\d+)\n(?:.*\n){3}heap_tree=(\w+)$", raw, re.M)
    eq(int(snaps[-1][0]), calls, "the last snapshot's time (heap calls; %d events)" % s["events"])
    # the peak's call: one of those dated at the peak's time (calls without
    # a timestamp of their own share their thread's last one)
    r = t.tool(["dump", "--json", trace])
    made, at_peak = 0, []
    for line in r.stdout.splitlines():
        e = json.loads(line)
        if e["kind"] in HEAP_CALLS:
            made += 1
            if e["time_ns"] == s["peak_time_ns"]:
                at_peak.append(made)
    peak = [int(x) for x, tree in snaps if tree == "peak"]
    check(len(peak) == 1 and peak[0] in at_peak,
          "the peak snapshot's time %s, not one of the calls at the peak %s" % (peak, at_peak))
    check("(i: heap calls, not instructions)" in raw.splitlines()[0], "desc: " + raw[:200])


@case(timeout=120, labels=("analyzers",))
def test_export_csv_strings_utf8(t):
    """A label with bytes that are not UTF-8 (0xff 0xfe, then a valid 'é')
    and one with a comma, a ';' and a quote: the CSV is valid UTF-8 (the
    bytes were copied as they were), each invalid byte as its Latin-1
    character as in dump --json, and the labels read back as dump's."""
    gcc = shutil.which("gcc")
    if not gcc:
        skip("gcc is not installed")
    src, exe = t.path("marks.c"), t.path("marks")
    with open(src, "w") as f:
        f.write(r"""
#include <stdlib.h>
#include "heaptrail.h"
int main(void)
{
	HEAPTRAIL_MARK("bad\xff\xfe \xc3\xa9");
	void *volatile p = malloc(100);
	HEAPTRAIL_MARK("a,b;c\"d");
	free(p);
	return 0;
}
""")
    inc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include")
    t.run([gcc, "-O0", "-I", inc, "-o", exe, src], check_rc=0)
    trace = t.path("marks.ht")
    t.run([t.heaptrail, "record", "-q", "-o", trace, "--", exe], check_rc=0)
    r = t.tool(["export", "--format", "csv", trace])
    eq(r.rc, 0, "export csv:\n" + r.describe())
    try:
        text = r.out.decode("utf-8")
    except UnicodeDecodeError as e:
        fail("the CSV is not UTF-8: %s" % e)
    marks = [row["string"] for row in csv.DictReader(io.StringIO(text)) if row["kind"] == "mark"]
    eq(marks, ["bad\u00ff\u00fe \u00e9", 'a,b;c"d'], "the labels")
    d = t.tool(["dump", "--json", trace])
    eq([json.loads(x)["label"] for x in d.stdout.splitlines() if '"mark"' in x], marks,
       "dump --json's labels")


@case(timeout=120, labels=("analyzers",))
def test_export_csv(t):
    """CSV of expo: one row per event (stats' events), the header, and
    every row's values in its kind's named columns equal to dump --json."""
    trace = record_expo(t)
    s = t.stats(trace)
    r = t.tool(["export", "--format", "csv", trace])
    eq(r.rc, 0, "export csv:\n" + r.describe())
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    eq(len(rows), s["events"], "rows vs stats' events")
    head = r.stdout.splitlines()[0].split(",")
    eq(head[:10], ["time_ns", "tid", "seq", "kind", "ptr", "size", "nmemb", "align", "old_ptr",
                   "result"], "the first columns")
    for c in ("usable", "ret", "addr", "len", "prot", "flags", "fd", "offset", "string",
              "duration_ns", "mmapped", "weight", "stack"):
        check(c in head, "no column %s" % c)
    d = t.tool(["dump", "--json", trace])
    dumped = [json.loads(x) for x in d.stdout.splitlines() if x.strip()]
    eq(len(dumped), len(rows), "rows vs dump --json lines")
    rename = {"old": "old_ptr", "name": "string", "label": "string", "path": "string"}
    seen = set()
    for row, de in zip(rows, dumped):
        for k in ("time_ns", "tid", "seq"):
            eq(int(row[k]), de[k], "%s of %r" % (k, de))
        eq(row["kind"], de["kind"], "kind")
        seen.add(de["kind"])
        for k, v in de.items():
            if k in ("time_ns", "tid", "seq", "kind", "mmapped", "non_main_arena"):
                continue
            col = rename.get(k, k)
            if k == "ptr" and de["kind"] != "free":
                col = "result"
            if k == "duration":
                check(row["duration_ns"].isdigit(), "duration_ns %r" % row["duration_ns"])
                continue
            check(col in row, "%s: no column for %s" % (de["kind"], k))
            cell = row[col]
            if isinstance(v, str):
                eq(cell, v, "%s.%s" % (de["kind"], k))
            else:
                got = int(cell, 16) if cell.startswith("0x") else int(cell)
                if got != v and got != v % (1 << 64) and v != got - (1 << 64):
                    fail("%s.%s: csv %s, dump %s" % (de["kind"], k, cell, v))
        if de["kind"] in ("malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc",
                          "memalign"):
            eq(row["mmapped"], "1" if de.get("mmapped") else "0", "mmapped flag")
            eq(row["weight"], "1", "weight")
    for k in ("malloc", "free", "calloc", "realloc", "posix_memalign", "aligned_alloc",
              "memalign", "mmap", "munmap", "thread_name", "mark"):
        check(k in seen, "no %s row" % k)
    marks = [row["string"] for row in rows if row["kind"] == "mark"]
    eq(marks, ["begin", "end"], "mark labels")


@case(timeout=60, labels=("analyzers",))
def test_export_errors(t):
    """Bad formats and arguments exit 2, bad traces and outputs exit 1, each
    with one line on stderr; no output file (nor temporary file) is left
    behind.  A truncated trace exits 1 too, with the reader's error, but
    its output, whole for the events before the damage, is kept."""
    trace = record_expo(t, "expo", ())
    notrace = t.path("notes.txt")
    with open(notrace, "w") as f:
        f.write("not a trace\n" * 100)
    out = t.path("out.file")
    cases = [
        (["--format", "svg", "-o", out, trace], 2, "unknown format svg"),
        (["-o", out, trace], 2, "no --format"),
        (["--format", "pprof", "-o", out], 2, "no trace given"),
        (["--format", "massif", "--time-unit", "s", "-o", out, trace], 2, "--time-unit"),
        (["--format", "massif", "--threshold", "x", "-o", out, trace], 2, "--threshold"),
        (["--format", "pprof", "-o", out, t.path("missing.ht")], 1, "missing.ht"),
        (["--format", "csv", "-o", out, notrace], 1, "notes.txt"),
        (["--format", "massif", "-o", out, notrace], 1, "notes.txt"),
        (["--format", "perfetto", "-o", os.path.join(notrace, "x.json"), trace], 1, "x.json"),
        (["--format", "csv", "-o", t.path("nodir", "x.csv"), trace], 1, "x.csv"),
    ]
    for args, rc, what in cases:
        r = t.tool(["export"] + args)
        eq(r.rc, rc, "exit status of export %s:\n%s" % (args, r.describe()))
        lines = r.stderr.strip().splitlines()
        eq(len(lines), 1, "stderr lines of export %s: %r" % (args, lines))
        check(what in lines[0], "export %s: stderr does not say %r: %s" % (args, what, lines[0]))
    left = sorted(x for x in os.listdir(t.dir) if x.startswith("out.file") or ".tmp-" in x)
    eq(left, [], "files left behind")
    # a truncated trace: every format is written for the events before the
    # damage, kept, and the exit status is 1 with the reader's error
    big = t.path("big.ht")
    r = t.run([t.heaptrail, "record", "-q", "-o", big, "--", t.prog("randloop"), "100000"])
    eq(r.rc, 0, "record randloop:\n" + r.describe())
    cut = t.path("cut.ht")
    with open(big, "rb") as f, open(cut, "wb") as g:
        g.write(f.read()[:os.path.getsize(big) * 3 // 5])
    sc = t.stats(cut, rc=1)
    for fmt in ("csv", "pprof", "perfetto", "massif"):
        o, r = export(t, fmt, cut, rc=1)
        check("truncated" in r.stderr, "%s of a truncated trace: no error:\n%s" % (fmt, r.stderr))
        check(os.path.exists(o), "%s of a truncated trace: no output" % fmt)
    with open(t.path("cut.ht.csv")) as f:
        eq(sum(1 for _ in f) - 1, sc["events"], "CSV rows of a truncated trace vs stats")
    with open(t.path("cut.ht.perfetto")) as f:
        json.load(f)
    with open(t.path("cut.ht.pprof"), "rb") as f:
        eq(pbdecode.Profile(f.read()).total("alloc_objects"), alloc_totals(sc)[0],
           "pprof allocations of a truncated trace")
    ms_print(t, t.path("cut.ht.massif"))
    # a good run leaves exactly the output file
    o, _ = export(t, "csv", trace)
    eq(sorted(x for x in os.listdir(t.dir) if x.startswith("expo.ht.")), ["expo.ht.csv"],
       "files after a good run")
    # private, as the trace: its rows carry the program's addresses (docs/output-files.md)
    eq(oct(os.stat(o).st_mode & 0o777), oct(0o600), "the output's mode")
