"""timeline and events on tests/progs/phases.c: known phases and markers,
an 8 MiB glibc-mmapped block held while RSS is sampled, a malloc that
moves the break from a known line (BRK:grow), and the program's own
mmap/mremap/munmap, sbrk/brk and SysV shm calls with exact arguments;
and, on programs compiled here, a heap of a known shape (ranges, a cut
trace) and marks with labels a CSV misreads."""

import csv
import io
import json
import os
import re
import subprocess
import time
import xml.etree.ElementTree as ET

import htformat
from htlib import case, check, compile_c, eq, fail

HERE = os.path.dirname(os.path.abspath(__file__))
PROGS_SRC = os.path.join(HERE, "..", "progs")
MARKS = ["start", "phase1", "touched", "big", "freed", "end"]
SERIES = ["live_bytes", "live_usable_bytes", "rss_bytes", "brk_bytes", "mmapped_chunk_bytes",
          "mmap_bytes"]
BIG = 8 << 20


def line_of(tag):
    with open(os.path.join(PROGS_SRC, "phases.c")) as f:
        for no, text in enumerate(f, 1):
            if tag in text:
                return no
    fail("no %s in phases.c" % tag)


def record_phases(t, name="phases", args=()):
    out = t.path(name + ".ht")
    r = t.run([t.heaptrail, "record", "-q", "-o", out] + list(args) +
              ["--", t.prog("phases")])
    eq(r.rc, 0, "record phases:\n" + r.describe())
    said = dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)
    return out, said


def samples_after(t, path, label):
    """(time of the marker label, RSS samples after it) in the trace at path,
    which may still be being written; (None, 0) while it says nothing yet."""
    r = t.tool(["timeline", "--json", "-o", "-", path])
    try:
        j = json.loads(r.stdout)
        at = [m["time_ns"] for m in j["marks"] if m["label"] == label][0]
        r = t.tool(["timeline", "--json", "-o", "-", "--from", "%dns" % at, path])
        return at, json.loads(r.stdout)["rss_samples"]
    except (ValueError, KeyError, IndexError):
        return None, 0


def record_phases_held(t, name, args, samples, secs=90):
    """record ARGS -- phases hold: the 8 MiB block is held until the trace
    has `samples` RSS samples taken after the 'touched' marker (the writer
    puts them in the file at its rounds); then the program goes on.  The
    test waits for the samples, not for the scheduler: a writer held back
    only makes the wait longer.  Returns (trace, the program's NAME=VALUE
    lines)."""
    out = t.path(name + ".ht")
    p = subprocess.Popen([t.heaptrail, "record", "-q", "-o", out] + list(args) +
                         ["--", t.prog("phases"), "hold"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=t.base_env(),
                         cwd=t.dir)
    try:
        line = p.stdout.readline()
        check(line == b"held\n", "phases hold said %r" % line)
        deadline = time.time() + secs
        n = 0
        while time.time() < deadline:
            n = samples_after(t, out, "touched")[1]
            if n >= samples:
                break
            time.sleep(0.05)
        check(n >= samples, "%d RSS samples after 'touched' in %d s" % (n, secs))
        o, e = p.communicate(b"go\n", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    eq(p.returncode, 0, "record phases hold:\n%s" % e.decode(errors="replace"))
    said = dict(l.split("=", 1) for l in o.decode().splitlines() if "=" in l)
    return out, said


def timeline_json(t, path, *args):
    r = t.tool(["timeline", "--json", "-o", "-"] + list(args) + [path])
    eq(r.rc, 0, "timeline --json:\n" + r.describe())
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        fail("timeline --json is not JSON (%s):\n%s" % (e, r.stdout[:2000]))


def events_json(t, path, *args):
    r = t.tool(["events", "--json"] + list(args) + [path])
    eq(r.rc, 0, "events --json:\n" + r.describe())
    return [json.loads(l) for l in r.stdout.splitlines()]


def series_max(j, key):
    return max(b[key]["max"] for b in j["bins"] if b[key] is not None)


@case(timeout=120, labels=("analyzers",))
def test_timeline_values(t):
    """The series hold the program's figures: the live peak equals stats'
    peak_live_bytes (JSON and CSV), the glibc-mmapped chunk is exactly
    8 MiB while held and 0 after, the program's own mappings peak at the
    mremapped 128 KiB, the break series ends at the program's final break,
    allocation bytes add up to stats, markers come in order, RSS is sampled
    between the flushes and sees the 8 MiB.  phases holds the block until
    the trace has 10 RSS samples taken after it was touched (a handshake,
    not a sleep): nothing here depends on how the threads were scheduled."""
    flush_ns, rss_ns = 10**9, 5 * 10**6
    out, said = record_phases_held(t, "phases", ["--rss-interval", "5ms", "--flush-interval",
                                                 "1s"], samples=10)
    s = t.stats(out)
    j = timeline_json(t, out)
    eq(j["bins_count"], 1000, "bins")
    eq(len(j["bins"]), 1000, "bins listed")
    eq(j["peak_live_bytes"], s["peak_live_bytes"], "peak vs stats")
    eq(series_max(j, "live_bytes"), s["peak_live_bytes"], "max of the live series vs stats")
    eq(series_max(j, "live_usable_bytes"), s["peak_live_usable_bytes"], "usable peak vs stats")
    eq(j["peak_time_ns"], s["peak_time_ns"], "peak time vs stats")
    eq(sum(b["alloc_bytes"] for b in j["bins"]), s["bytes_allocated"], "allocated bytes")
    eq(series_max(j, "mmapped_chunk_bytes"), BIG, "mmapped chunk bytes at most")
    eq(j["bins"][-1]["mmapped_chunk_bytes"]["last"], 0, "mmapped chunk bytes at the end")
    eq(series_max(j, "mmap_bytes"), 131072, "the program's own mappings at most")
    eq(j["bins"][-1]["mmap_bytes"]["last"], 0, "the program's own mappings at the end")
    eq(j["bins"][-1]["brk_bytes"]["last"], int(said["brk_end"], 16) - j["brk_base"],
       "the break at the end")
    marks = j["marks"]
    eq([m["label"] for m in marks], MARKS, "markers")
    times = [m["time_ns"] for m in marks]
    eq(times, sorted(times), "marker times in order")
    # while the 8 MiB block is held ('touched' to 'big'), every bin of the
    # live series holds it too, and every RSS sample sees it (a sample reads
    # its time before the RSS)
    w = timeline_json(t, out, "--from", "%dns" % times[2], "--to", "%dns" % times[3],
                      "--bins", "20")
    check(all(b["live_bytes"]["min"] >= BIG + 100 * 1000 for b in w["bins"]),
          "live bytes drop while the 8 MiB block is held")
    rss = [b["rss_bytes"] for b in j["bins"] if b["rss_bytes"]]
    base = min(v["min"] for v in rss)  # the smallest RSS of the run, before or after the block
    during = [b["rss_bytes"] for b in w["bins"] if b["rss_bytes"]]
    check(during, "no RSS sample while the block was held")
    check(min(v["min"] for v in during) >= base + BIG - (1 << 20),
          "RSS %d while 8 MiB are touched, %d at the least"
          % (min(v["min"] for v in during), base))
    # RSS sampled between the flushes (every 5 ms), and never more often:
    # in the held window of D ns, a writer round (one sample each) comes at
    # most every flush interval, so at most D/1s + 2 of them (+1 for a
    # requested round); the interval samples are on a 5 ms grid, each one's
    # due time after the sample before it, so at most D/5ms + 2.  Both hold
    # however the writer was scheduled; the handshake gave at least 10.
    d = times[3] - times[2]
    rounds = d // flush_ns + 3
    n = w["rss_samples"]
    check(n >= 10, "%d RSS samples while the block was held (the handshake waited for 10)" % n)
    check(n > rounds, "%d RSS samples in %d ns, no more than the %d flush rounds could take: "
          "not sampled between the flushes" % (n, d, rounds))
    check(n <= d // rss_ns + 2 + rounds, "%d RSS samples in %d ns: more often than every 5 ms"
          % (n, d))
    check(j["rss_median_interval_ns"] > 0, "no median RSS interval")
    # without the interval: samples at flushes only (start, a first round,
    # one per second of the run, close)
    out0, _ = record_phases(t, "noint", ["--rss-interval", "0", "--flush-interval", "1s"])
    j0 = timeline_json(t, out0)
    s0 = t.stats(out0)
    check(1 <= j0["rss_samples"] <= 4 + s0["duration_ns"] // flush_ns,
          "%d RSS samples with --rss-interval 0 in a run of %d ns"
          % (j0["rss_samples"], s0["duration_ns"]))
    # CSV: header, one row per bin, the same figures
    r = t.tool(["timeline", "--csv", "--bins", "50", "-o", t.path("p.csv"), out])
    eq(r.rc, 0, "timeline --csv")
    check("wrote %s" % t.path("p.csv") in r.stderr, "says what it wrote: " + r.stderr)
    with open(t.path("p.csv")) as f:
        rows = list(csv.DictReader(f))
    eq(len(rows), 50, "CSV rows")
    for k in SERIES:
        check(k + "_max" in rows[0] and k + "_min" in rows[0] and k in rows[0],
              "CSV columns of " + k)
    eq(max(int(x["live_bytes_max"]) for x in rows), s["peak_live_bytes"], "CSV peak")
    eq(max(int(x["mmapped_chunk_bytes_max"]) for x in rows), BIG, "CSV mmapped chunks")
    eq(sum(int(x["alloc_bytes"]) for x in rows), s["bytes_allocated"], "CSV allocated bytes")
    labels = [l for x in rows if x["marks"] for l in json.loads(x["marks"])]
    eq(labels, MARKS, "CSV markers")
    check(any(x["rss_bytes"] for x in rows), "CSV: no RSS")


@case(timeout=120, labels=("analyzers",))
def test_timeline_svg_and_ranges(t):
    """The SVG parses, has every series, axes, legend, a tooltip per bin,
    the markers with their labels; --from/--to narrow the range and keep
    the live-set rules (values carried in from before --from); an unclosed
    (cut) trace gets merged bins of the same count."""
    out, said = record_phases(t)
    r = t.tool(["timeline", "--bins", "300", out])
    eq(r.rc, 0, "timeline")
    svg = out[:-3] + "-timeline.svg"
    check(os.path.exists(svg), "default output %s" % svg)
    check(svg in r.stderr, "says what it wrote:\n" + r.stderr)
    try:
        root = ET.parse(svg).getroot()
    except ET.ParseError as e:
        fail("the SVG does not parse: %s" % e)
    ns = "{http://www.w3.org/2000/svg}"
    eq(root.tag, ns + "svg", "root element")
    ids = {e.get("id") for e in root.iter() if e.get("id")}
    for k in SERIES + ["alloc_rate", "legend", "marks", "tooltips", "y-bytes", "x-time"]:
        check(k in ids, "no element with id %s in the SVG" % k)
    tips = root.find(".//%sg[@id='tooltips']" % ns)
    eq(len(tips.findall(ns + "rect")), 300, "tooltips")
    check(all(x.find(ns + "title") is not None for x in tips), "a tooltip without <title>")
    marks = root.find(".//%sg[@id='marks']" % ns)
    eq([g.find(ns + "text").text for g in marks], MARKS, "marker labels in the SVG")
    axis = "".join(x.text or "" for x in root.find(".//%sg[@id='y-bytes']" % ns).iter())
    check("MiB" in axis, "the bytes axis has no unit: %r" % axis)
    check(not [x for x in root.iter() if x.get("href") or x.get(
        "{http://www.w3.org/1999/xlink}href")], "the SVG links outside")
    # a range: from the 'big' marker on, the 8 MiB block is freed in the
    # first bins and the 100 KB still live come from before --from
    j = timeline_json(t, out)
    t_big = [m["time_ns"] for m in j["marks"] if m["label"] == "big"][0]
    t_end = [m["time_ns"] for m in j["marks"] if m["label"] == "end"][0]
    z = timeline_json(t, out, "--from", "%dns" % t_big, "--to", "%dns" % (t_end + 1000),
                      "--bins", "10")
    eq((z["from_ns"], len(z["bins"])), (t_big, 10), "range start and bins")
    eq([m["label"] for m in z["marks"]], ["big", "freed", "end"], "markers in the range")
    check(z["bins"][0]["live_bytes"]["max"] >= BIG + 100 * 1000,
          "the block live before --from is not carried in: %s" % z["bins"][0]["live_bytes"])
    eq(z["bins"][-1]["mmapped_chunk_bytes"]["last"], 0, "freed in the range")
    # a cut trace (not closed): same number of bins, values up to the cut
    with open(out, "rb") as f:
        data = f.read()
    cut = t.path("cut.ht")
    with open(cut, "wb") as f:
        f.write(data[:len(data) * 2 // 3])
    r = t.tool(["timeline", "--json", "-o", "-", "--bins", "64", cut])
    check(r.rc in (0, 1), "timeline on a cut trace: " + r.describe())
    c = json.loads(r.stdout)
    eq(len(c["bins"]), 64, "bins of a cut trace")
    check(c["peak_live_bytes"] <= j["peak_live_bytes"], "cut trace peak")


@case(labels=("analyzers",))
def test_timeline_bad_input(t):
    """Missing file, not a trace, bad --bins/--from/--to: one line, the
    right exit code, no output file left behind."""
    missing = t.path("missing.ht")
    r = t.tool(["timeline", "-o", t.path("x.svg"), missing])
    eq(r.rc, 1, "missing file")
    eq(len(r.stderr.strip().splitlines()), 1, "one line: " + r.stderr)
    check("missing.ht" in r.stderr, "names the file: " + r.stderr)
    txt = t.path("notes.ht")
    with open(txt, "w") as f:
        f.write("not a trace at all\n")
    for cmd in ("timeline", "events"):
        r = t.tool([cmd, "-o", t.path("x.svg"), txt] if cmd == "timeline" else [cmd, txt])
        eq(r.rc, 1, "%s on a text file" % cmd)
        check("not a heaptrail trace" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
              "%s: %s" % (cmd, r.stderr))
    check(not os.path.exists(t.path("x.svg")), "output left behind")
    check(not [n for n in os.listdir(t.dir) if ".tmp-" in n], "temporary file left behind")
    out, _ = record_phases(t)
    for args, what in ((["--bins", "0"], "--bins"), (["--bins", "2000000"], "--bins"),
                       (["--bins", "many"], "--bins"), (["--from", "soon"], "--from"),
                       (["--from", "2s", "--to", "1s"], "--to"), (["--csv", "--json"], "--csv")):
        r = t.tool(["timeline"] + args + [out])
        eq(r.rc, 2, "exit status of timeline %s" % args)
        check(what in r.stderr and len(r.stderr.strip().splitlines()) <= 2,
              "timeline %s: %s" % (args, r.stderr))
    for args, what in ((["--kind", "malloc"], "dump"), (["--kind", "nosuch"], "nosuch"),
                       (["--min-size", "big"], "--min-size")):
        r = t.tool(["events"] + args + [out])
        eq(r.rc, 2, "exit status of events %s" % args)
        check(what in r.stderr, "events %s: %s" % (args, r.stderr))
    r = t.tool(["timeline"])
    eq(r.rc, 2, "no trace")


@case(timeout=120, labels=("analyzers",))
def test_events_columns(t):
    """Every mmap-family, brk/sbrk and shm call of phases with its exact
    arguments and result, in order; the text columns; filters by kind,
    size and time; the heap growth of malloc(100000) with the stack of
    grow_heap at its line (brkstack)."""
    out, said = record_phases(t, args=["--stacks"])
    ev = events_json(t, out)
    calls = [e for e in ev if e["call"] != "heap_break"]
    # sbrk(0) calls of the program: brk_before, brk_after and brk_end
    eq([e["call"] for e in calls],
       ["sbrk", "sbrk", "mmap", "mremap", "munmap", "mmap", "munmap", "mmap", "sbrk", "brk",
        "shmget", "shmat", "shmdt", "shmctl", "sbrk"], "the calls in order")
    pid = calls[0]["pid"]
    check(all(e["pid"] == pid and e["comm"] == "phases" and e["tid"] == pid for e in ev),
          "pid, comm, tid")
    def sub(e, *keys):
        return {k: e.get(k) for k in keys}
    mm, mr, mu, fm, fu, bad = calls[2:8]
    eq(sub(mm, "addr", "size", "prot", "flags", "offset", "fd", "result", "failed"),
       {"addr": "0x0", "size": 65536, "prot": "rw-", "flags": ["PRIVATE", "ANON"], "offset": 0,
        "fd": -1, "result": said["mmap"], "failed": False}, "anonymous mmap")
    eq(sub(mr, "addr", "size", "flags", "result"),
       {"addr": said["mmap"], "size": 131072, "flags": ["MAYMOVE"], "result": said["mremap"]},
       "mremap")
    eq(sub(mu, "addr", "size", "result"), {"addr": said["mremap"], "size": 131072,
                                           "result": "0"}, "munmap")
    eq(sub(fm, "size", "prot", "flags", "offset", "fd", "result"),
       {"size": 4096, "prot": "r--", "flags": ["SHARED"], "offset": 8192,
        "fd": int(said["fd"]), "result": said["filemap"]}, "file mmap")
    eq(sub(fu, "addr", "size"), {"addr": said["filemap"], "size": 4096}, "file munmap")
    eq(sub(bad, "fd", "failed", "result"), {"fd": 999, "failed": True, "result": "-1"},
       "failed mmap")
    sb, br = calls[8:10]
    eq(sub(sb, "size", "result"), {"size": 65536, "result": said["sbrk_old"]}, "sbrk")
    eq(sub(br, "addr", "size", "result"), {"addr": said["sbrk_old"], "size": -65536,
                                           "result": "0"}, "brk")
    sg, sa, sd, sc = calls[10:14]
    shmid = int(said["shmid"])
    eq(sub(sg, "key", "size", "flags", "id", "result"),
       {"key": 0, "size": 65536, "flags": ["IPC_CREAT", "0600"], "id": shmid,
        "result": str(shmid)}, "shmget")
    eq(sub(sa, "id", "addr", "prot", "size", "result"),
       {"id": shmid, "addr": "0x0", "prot": "rw-", "size": 65536, "result": said["shmat"]},
       "shmat")
    eq(sub(sd, "addr", "id", "size", "result"), {"addr": said["shmat"], "id": shmid,
                                                 "size": 65536, "result": "0"}, "shmdt")
    eq(sub(sc, "id", "cmd", "result"), {"id": shmid, "cmd": "IPC_RMID", "result": "0"},
       "shmctl")
    # heap growth: the malloc of grow_heap, then the program's sbrk and brk
    hb = [e for e in ev if e["call"] == "heap_break"]
    grow = [e for e in hb if e["addr"] == said["brk_after"]]
    check(grow, "no heap_break to brk_after %s: %s" % (said["brk_after"], hb))
    g = grow[0]
    eq((g["cause"], g["size"]), ("malloc", int(said["brk_after"], 16) -
                                 int(said["brk_before"], 16)), "growth by malloc")
    eq((g["stack"][0]["function"], g["stack"][0]["line"]), ("grow_heap", line_of("BRK:grow")),
       "brkstack: the stack of the malloc that grew the heap")
    eq(g["stack"][1]["function"], "main", "grow_heap's caller")
    eq([(e["cause"], e["size"]) for e in hb[-2:]], [("sbrk", 65536), ("brk", -65536)],
       "the program's own break moves")
    # filters
    eq([e["call"] for e in events_json(t, out, "--kind", "shm")],
       ["shmget", "shmat", "shmdt", "shmctl"], "--kind shm")
    eq([e["call"] for e in events_json(t, out, "--kind", "mmap,munmap", "--min-size", "64K")],
       ["mmap", "munmap"], "--min-size 64K")
    after = events_json(t, out, "--from", "%dns" % sc["time_ns"])
    eq([e["call"] for e in after], ["shmctl", "sbrk"], "--from")
    # the text lines: mmapsnoop-style columns
    r = t.tool(["events", "--kind", "mmap", out])
    eq(r.rc, 0, "events")
    lines = r.stdout.splitlines()
    eq(lines[0].split(), ["TIME(s)", "PID", "COMM", "TID", "CALL", "ADDR", "SIZE", "PROT",
                          "FLAGS", "OFF", "FD", "KEY", "ID", "RESULT"], "header")
    eq(lines[1].split()[1:], [str(pid), "phases", str(pid), "mmap", "0x0", "65536", "rw-",
                              "PRIVATE|ANON", "0", "-1", "-", "-", said["mmap"]], "an mmap line")
    r = t.tool(["events", "--kind", "heap_break", "--stacks", out])
    check(re.search(r"heap_break .*by malloc.*\n\s+grow_heap phases\.c:%d" % line_of("BRK:grow"),
                    r.stdout), "text brkstack:\n" + r.stdout)


# A heap with a known shape for the range and damage cases: 200 blocks of
# 10000 bytes allocated one a millisecond (live 0 -> 2,000,000 bytes), then
# freed one a millisecond in the same order (-> 0); no other heap call.
RAMP_SRC = r"""
#include <stdlib.h>
#include <time.h>
#define N 200
static void nap(void)
{
	struct timespec ts = {0, 1000000};
	nanosleep(&ts, NULL);
}
int main(void)
{
	void *b[N];
	for (int i = 0; i < N; i++) {
		if (!(b[i] = malloc(10000)))
			return 1;
		nap();
	}
	for (int i = 0; i < N; i++) {
		free(b[i]);
		nap();
	}
	return 0;
}
"""

# Marks whose labels hold what a CSV cell or a ';'-joined list would
# misread: a comma, a ';' and a quote, an empty label, bytes that are not
# UTF-8 (0xff 0xfe) before a valid 'é'.
MARKS_SRC = r"""
#include <stdlib.h>
#include "heaptrail.h"
int main(void)
{
	HEAPTRAIL_MARK("a,b;c\"d");
	void *volatile p = malloc(1000);
	HEAPTRAIL_MARK("");
	HEAPTRAIL_MARK("x;y");
	HEAPTRAIL_MARK("bad\xff\xfe \xc3\xa9");
	free(p);
	return 0;
}
"""
ODD_LABELS = ['a,b;c"d', "", "x;y", "bad\u00ff\u00fe \u00e9"]




def record_ramp(t, name="ramp"):
    out = t.path(name + ".ht")
    t.run([t.heaptrail, "record", "-q", "--flush-interval", "20ms", "-o", out, "--",
           compile_c(t, "ramp", RAMP_SRC)], check_rc=0)
    return out


def dump_json(t, path, rc=0):
    r = t.tool(["dump", "--json", path])
    eq(r.rc, rc, "dump --json:\n" + r.describe())
    return [json.loads(l) for l in r.stdout.splitlines() if l.strip()]


def fmt_ns(ns):
    """As heaptrail prints a time (src/common/util.c, ht_fmt_ns)."""
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= div:
            return "%.3f %s" % (ns / div, unit)
    return "%d ns" % ns


def kib(text, n):
    """Whether text is n bytes as heaptrail prints them in KiB ("976.6 KiB")."""
    m = re.match(r"^(\d+\.\d) KiB$", text)
    return bool(m) and abs(float(m.group(1)) - n / 1024) <= 0.051


@case(timeout=120, labels=("analyzers",))
def test_timeline_cut_trace_not_read(t):
    """A closed trace cut inside a chunk of its freeing phase (head -c):
    the bins past the last event read carry nothing (they drew the last
    live value as a plateau up to the header's end, and nothing said so):
    the JSON says complete false, read_to_ns = the last event read (dump's),
    bins_read, null series and allocation counts past it; the bins read
    hold the live bytes the events read make; the CSV leaves those cells
    empty; the SVG has the note under its title and the range shaded
    'not read'."""
    out = record_ramp(t)
    tl = timeline_json(t, out, "--bins", "100")
    with open(out, "rb") as f:
        data = f.read()
    tr = htformat.Trace(out)
    chunks = htformat.chunk_headers(data, tr.sections[htformat.SEC_CHUNKS][0])
    events = [c for c in chunks if c[1][1] == htformat.CHUNK_EVENTS]
    check(len(events) >= 8, "the trace has only %d event chunks" % len(events))
    off, h = events[len(events) * 3 // 4]  # (the freeing phase)
    cut = t.path("cut.ht")
    with open(cut, "wb") as f:
        f.write(data[:off + htformat.CHUNK.size + h[5] // 2])
    evs = dump_json(t, cut, rc=1)
    last = evs[-1]["time_ns"]
    sizes = {}
    for e in evs:
        if e["kind"] == "malloc":
            sizes[e["ptr"]] = e["size"]
        elif e["kind"] == "free":
            sizes.pop(e["ptr"], None)
    live = sum(sizes.values())
    check(0 < live < 2000000, "the cut is not in the freeing phase: %d bytes live" % live)
    r = t.tool(["timeline", "--json", "-o", "-", "--bins", "100", cut])
    eq(r.rc, 1, "timeline of a cut trace:\n" + r.describe())
    c = json.loads(r.stdout)
    eq(c["to_ns"], tl["to_ns"], "the range (the header's end)")
    read = [b for b in c["bins"] if b["start_ns"] <= last]
    check(len(read) < 100, "the cut leaves %d of 100 bins" % len(read))
    eq(read[-1]["live_bytes"]["last"], live, "live bytes where the events read stop")
    past = c["bins"][len(read):]
    eq(["%d: %s" % (b["start_ns"], b["live_bytes"]) for b in past
        if b["live_bytes"] is not None or b["alloc_calls"] is not None], [],
       "bins past the events read (at %d ns) with values (carried on: a plateau never drawn)"
       % last)
    eq((c.get("complete"), c.get("read_to_ns"), c.get("exact_to_ns"), c.get("missing_thread"),
        c.get("bins_read")), (False, last, last, None, len(read)),
       "complete, read_to_ns, exact_to_ns, missing_thread, bins_read")
    check("truncated" in (c.get("error") or ""), "error: %r" % c.get("error"))
    r = t.tool(["timeline", "--csv", "-o", "-", "--bins", "100", cut])
    eq(r.rc, 1, "timeline --csv of a cut trace")
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    eq(int(rows[len(read) - 1]["live_bytes"]), live, "CSV: the last bin read")
    eq([x["bin"] for x in rows[len(read):] if x["live_bytes"] or x["alloc_calls"]], [],
       "CSV: bins past the events read with values")
    svg = t.path("cut.svg")
    r = t.tool(["timeline", "--bins", "100", "-o", svg, cut])
    eq(r.rc, 1, "timeline (SVG) of a cut trace")
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    note = [x.text or "" for x in root.iter(ns + "text") if x.get("id") == "damage"]
    eq(note, ["incomplete: the trace is cut short or damaged, its events were read up to %s; "
              "what came after is not known (shaded)" % fmt_ns(last)], "the note under the title")
    shaded = [g for g in root.iter(ns + "g") if g.get("class") == "not-read"]
    eq(len(shaded), 1, "ranges shaded as not read")
    eq(shaded[0].find(ns + "title").text,
       "after %s: not read (the trace is cut short or damaged)" % fmt_ns(last), "its title")
    # the whole trace: nothing of the kind
    r = t.tool(["timeline", "--bins", "100", "-o", t.path("whole.svg"), out])
    eq(r.rc, 0, "timeline of the whole trace")
    with open(t.path("whole.svg")) as f:
        text = f.read()
    check("not-read" not in text and "incomplete" not in text, "the whole trace said damaged")
    eq((tl["complete"], tl["read_to_ns"], tl["bins_read"], tl["error"]),
       (True, tl["to_ns"], 100, None), "the whole trace's JSON")


@case(timeout=120, labels=("analyzers",))
def test_timeline_range_peak(t):
    """The peak of a range is the range's, with --from as with --to: from
    just after the 100th free, the bytes still live then (1,000,000 or a
    little less), carried in at --from (the whole trace's 2,000,000 bytes
    at the 200th malloc lie before the plot; they were given); up to the
    50th malloc, the bytes live then.  JSON, SVG and the line on stderr
    agree."""
    out = record_ramp(t)
    evs = dump_json(t, out)
    mallocs = [e["time_ns"] for e in evs if e["kind"] == "malloc"]
    frees = [e["time_ns"] for e in evs if e["kind"] == "free"]
    eq((len(mallocs), len(frees)), (200, 200), "the program's calls")
    j = timeline_json(t, out)
    eq((j["peak_live_bytes"], j["peak_time_ns"]), (2000000, mallocs[-1]), "the whole trace's peak")
    # (calls without a timestamp of their own share their thread's last
    # one: the live bytes at a time count every call dated up to it)
    start = frees[99] + 1
    carried = 10000 * (200 - sum(1 for x in frees if x < start))
    check(carried <= 1000000, "%d bytes live at %d ns" % (carried, start))
    w = timeline_json(t, out, "--from", "%dns" % start, "--bins", "50")
    eq((w["peak_live_bytes"], w["peak_time_ns"]), (carried, start), "the peak from --from")
    eq(series_max(w, "live_bytes"), carried, "the highest live bytes in the bins")
    eq(w["peak_live_usable_bytes"], series_max(w, "live_usable_bytes"), "usable peak from --from")
    end = mallocs[49]
    u = timeline_json(t, out, "--to", "%dns" % end, "--bins", "50")
    eq((u["peak_live_bytes"], u["peak_time_ns"]),
       (10000 * sum(1 for x in mallocs if x <= end), end), "the peak up to --to")
    svg = t.path("from.svg")
    r = t.tool(["timeline", "--from", "%dns" % start, "-o", svg, out])
    eq(r.rc, 0, "timeline --from:\n" + r.describe())
    with open(svg) as f:
        text = f.read()
    m = re.search(r"peak of live requested bytes from ([^:<]*): ([^<]*) at ([^<]*)</text>", text)
    check(m, "no peak line naming the range in the SVG")
    eq(m.group(3), fmt_ns(start), "the SVG's peak time")
    check(kib(m.group(2), carried), "the SVG's peak: %s" % m.group(2))
    m = re.search(r"the live heap peaked at (.*) at (.*) in the range$", r.stderr.rstrip())
    check(m and kib(m.group(1), carried) and m.group(2) == fmt_ns(start), "stderr: " + r.stderr)


@case(timeout=120, labels=("analyzers",))
def test_timeline_csv_marks_escaped(t):
    """The CSV's marks cell holds the labels as a JSON array (they were
    joined with ';' unescaped: 'a,b;c"d' read back as two labels, an empty
    one was lost) and the file is valid UTF-8 (bytes that are not UTF-8
    were copied as they were): every label reads back as the JSON's."""
    exe = compile_c(t, "marks", MARKS_SRC)
    out = t.path("marks.ht")
    t.run([t.heaptrail, "record", "-q", "-o", out, "--", exe], check_rc=0)
    j = timeline_json(t, out, "--bins", "1")
    eq([m["label"] for m in j["marks"]], ODD_LABELS, "the JSON's labels")
    r = t.tool(["timeline", "--csv", "--bins", "1", "-o", "-", out])
    eq(r.rc, 0, "timeline --csv:\n" + r.describe())
    try:
        text = r.out.decode("utf-8")
    except UnicodeDecodeError as e:
        fail("the CSV is not UTF-8: %s" % e)
    rows = list(csv.DictReader(io.StringIO(text)))
    eq(len(rows), 1, "rows")
    try:
        labels = json.loads(rows[0]["marks"])
    except ValueError as e:
        fail("the marks cell is not a JSON array (%s): %r" % (e, rows[0]["marks"]))
    eq(labels, ODD_LABELS, "the CSV's labels")
    r = t.tool(["timeline", "--csv", "--bins", "2", "-o", "-",
                "--from", "%dns" % (j["marks"][-1]["time_ns"] + 1), out])
    rows = list(csv.DictReader(io.StringIO(r.out.decode("utf-8"))))
    eq([x["marks"] for x in rows], ["", ""], "bins without marks: empty cells")


@case(timeout=120)
def test_timeline_trace_being_written(t):
    """timeline of a trace its program still writes (probe S): the range,
    which doubles as the events come when the trace has no duration, goes
    past the last event read; those bins are not read (null in the JSON,
    empty in the CSV, shaded in the SVG with the reason), and the JSON says
    complete false, closed false, being_written true.  Before: the bins
    past the last event carried its live bytes on, a plateau the program
    never drew, and the JSON called the figures complete.  Once the
    program has ended, the same trace reads as closed and complete."""
    from htlib import paced_held, reap
    trace = t.path("live.ht")
    p = None
    try:
        p = paced_held(t, trace)
        time.sleep(0.3)  # (the program waits: its clock samples go on)
        js = t.path("live.json")
        t.run([t.heaptrail, "timeline", "--json", "-q", "-o", js, trace], check_rc=0)
        svg = t.path("live.svg")
        t.run([t.heaptrail, "timeline", "-q", "-o", svg, trace], check_rc=0)
        csvp = t.path("live.csv")
        t.run([t.heaptrail, "timeline", "-q", "--csv", "-o", csvp, trace], check_rc=0)
        p.stdin.write(b"go\n")
        p.stdin.flush()
        p.communicate(timeout=60)
    finally:
        reap(p)
    with open(js) as f:
        j = json.load(f)
    tl = j.get("timeline", j)
    eq((tl["complete"], tl["closed"], tl["being_written"]), (False, False, True),
       "complete, closed, being_written")
    n, read = tl["bins_count"], tl["bins_read"]
    check(0 < read < n, "bins read %d of %d: the range goes past the last event" % (read, n))
    check(tl["read_to_ns"] < tl["to_ns"], "read_to_ns %d, to_ns %d" % (tl["read_to_ns"],
                                                                       tl["to_ns"]))
    bins = tl["bins"]
    eq(sum(b["alloc_calls"] for b in bins[:read]), 1001, "allocations in the bins read")
    check(all(b["live_bytes"] is None for b in bins[read:]),
          "bins past the last event read hold no live bytes")
    with open(csvp) as f:
        rows = list(csv.DictReader(f))
    # (its own run: the trace went on growing between the two)
    filled = [r["live_bytes"] != "" for r in rows]
    k = filled.index(False) if False in filled else len(filled)
    check(0 < k < len(rows) and not any(filled[k:]),
          "CSV: empty cells past the last event read (%d of %d rows filled)" % (k, len(rows)))
    with open(svg) as f:
        s = f.read()
    check("incomplete: the trace is still being written; its events were read up to" in s and
          "not read (the trace is still being written)" in s, "the SVG's note and shading")
    j2 = json.loads(t.run([t.heaptrail, "timeline", "--json", "-q", "-o", "-", trace], check_rc=0).stdout)
    tl2 = j2.get("timeline", j2)
    eq((tl2["complete"], tl2["closed"], tl2["being_written"], tl2["bins_read"]),
       (True, True, False, tl2["bins_count"]), "the finished trace")
