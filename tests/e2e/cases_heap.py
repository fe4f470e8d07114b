"""`heaptrail heap`: glibc's arenas, heaps, break, thresholds and lock waits
from a trace, on programs written for it whose figures are known
(tests/progs/arenas.c, thresholds.c, sbrkgrow.c, lockwait.c), and
`record --durations` (a DURATION record before every malloc-API call)."""

import json
import re
import xml.etree.ElementTree as ET

from htlib import case, check, eq, fail

PAGE = 4096


def record(t, name, argv, opts=(), env=None):
    out = t.path(name + ".ht")
    r = t.run([t.heaptrail, "record", "-q", "-o", out] + list(opts) + ["--"] + argv, env=env)
    eq(r.rc, 0, "record %s:\n%s" % (name, r.describe()))
    return out, r


def heap_json(t, path, *args):
    r = t.tool(["heap", "--json"] + list(args) + [path])
    eq(r.rc, 0, "heap --json:\n" + r.describe())
    try:
        return json.loads(r.stdout)
    except ValueError as e:
        fail("heap --json is not JSON (%s):\n%s" % (e, r.stdout[:2000]))


HOLD_NS = 100 * 10**6  # lockwait.c HOLD_MS


def said(r, key):
    """Values of the program's 'key: N' lines on stdout."""
    return [int(m) for m in re.findall(r"^%s: (\d+)$" % re.escape(key), r.stdout, re.M)]


def mmapped_chunk(size):
    """glibc's sysmalloc_mmap: ALIGN_UP(request2size(size) + SIZE_SZ, page)."""
    nb = max(32, (size + 8 + 15) & ~15)
    return (nb + 8 + PAGE - 1) & ~(PAGE - 1)


@case(timeout=120, labels=("analyzers",))
def test_heap_arenas(t):
    """N threads alive at once, each allocating: glibc gives each a new
    arena, so exactly N + 1 arenas, the main one used by the main thread
    only and each other by exactly one worker, every worker in one; each
    new arena has one heap, aligned to 64 MiB, holding the arena itself."""
    n = 4
    out, r = record(t, "arenas", [t.prog("arenas"), str(n)])
    tids = said(r, "tid")
    eq(len(tids), n + 1, "threads the program named")
    main_tid, workers = tids[0], set(tids[1:])
    j = heap_json(t, out)
    arenas = j["arenas"]
    eq(len(arenas), n + 1, "arenas")
    eq(arenas[0]["main"], True, "arena 0 is the main arena")
    eq(arenas[0]["threads"], [main_tid], "threads of the main arena")
    seen = set()
    for a in arenas[1:]:
        eq(len(a["threads"]), 1, "threads of arena %d" % a["arena"])
        seen.update(a["threads"])
        eq(len(a["heaps"]), 1, "heaps of arena %d" % a["arena"])
        eq(a["heaps"][0] % (64 << 20), 0, "heap of arena %d aligned to HEAP_MAX_SIZE" % a["arena"])
        eq(a["live_bytes"], 0, "bytes in use at the end in arena %d" % a["arena"])
        eq(a["allocations"], 200, "allocations in arena %d" % a["arena"])
        u = a["uses"][0]
        check(u["first_ns"] <= u["last_ns"], "first use before last use")
    eq(seen, workers, "the workers, one per arena")
    heaps = j["heaps"]
    eq(len(heaps), n, "heaps")
    for h in heaps:
        eq(h["arena_first_heap"], True, "heap 0x%x holds its arena" % h["base"])
        eq(h["header_bytes"], 2256, "heap_info + malloc_state")
        # 200 blocks of 64 + 8i bytes (usable 72 + 8i rounded to 16)
        check(h["size_bytes"] > 2256 + sum(64 + 8 * i for i in range(200)),
              "heap size %d covers the blocks" % h["size_bytes"])
        check(h["sizes"] and h["sizes"][-1][1] == h["size_bytes"], "size series ends at the size")
    r = t.tool(["heap", out])
    eq(r.rc, 0, "heap text")
    check("arenas: %d (the main arena and %d more)" % (n + 1, n) in r.stdout,
          "text says the arena count:\n" + r.stdout)


@case(timeout=120, labels=("analyzers",))
def test_heap_rss_peak_live(t):
    """The live bytes beside the RSS peak are those live when the RSS
    peaked: tests/progs/rsshold.c holds 48 MiB (touched) for 150 ms, frees
    it, and keeps 1000 bytes till exit.  Before, heap printed the live
    bytes of the trace's end beside the peak (1000 B beside some 50 MiB of
    RSS, a ratio of thousands)."""
    out, _ = record(t, "rss", [t.prog("rsshold")])
    s = heap_json(t, out)["summary"]
    big = 48 << 20
    check(s["rss_peak_bytes"] >= big, "the RSS peak: %d bytes" % s["rss_peak_bytes"])
    eq(s["end_requested_bytes"], 1000, "live at the end")
    eq(s["rss_peak_live_requested_bytes"], big, "live at the RSS peak (%.3f ms)"
       % (s["rss_peak_ns"] / 1e6))
    text = t.tool(["heap", out]).stdout
    check(re.search(r"RSS peak [\d.]+ MiB at [\d.]+ ms, when 48\.0 MiB was in use \(1\.\d\dx\)",
                    text), "the RSS line:\n" + text)


@case(timeout=120, labels=("analyzers",))
def test_heap_arena_max(t):
    """GLIBC_TUNABLES=glibc.malloc.arena_max=2: four threads share the one
    new arena glibc may create and the main arena: exactly 2 arenas, and
    every thread in one of them."""
    out, r = record(t, "arenas2", [t.prog("arenas"), "4"],
                    env={"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})
    tids = said(r, "tid")
    j = heap_json(t, out)
    eq(len(j["arenas"]), 2, "arenas with arena_max=2")
    used = set()
    for a in j["arenas"]:
        used.update(a["threads"])
    eq(used, set(tids), "threads in the arenas")


@case(timeout=120, labels=("analyzers",))
def test_heap_thresholds(t):
    """Frees of mmapped blocks raise the mmap threshold to their chunk size
    and the trim threshold to twice that, step by step; a block over 32 MiB
    changes nothing; mallopt(M_MMAP_THRESHOLD) pins it: the exact list."""
    out, r = record(t, "thresholds", [t.prog("thresholds")])
    blocks = re.findall(r"^block: (\d+) (\w+) (\d+)$", r.stdout, re.M)
    eq(len(blocks), 7, "blocks the program made")
    for size, where, chunk in blocks:
        eq(where, "mmapped", "block of %s bytes (the premise of the test)" % size)
        eq(int(chunk), mmapped_chunk(int(size)), "chunk size of a %s-byte block" % size)
    want = []
    for size in (200000, 400000, 1000000, 3000000):
        c = mmapped_chunk(size)
        want.append(("free", c, 2 * c))
    want.append(("mallopt", 262144, 2 * mmapped_chunk(3000000)))
    j = heap_json(t, out)
    got = [(c["cause"], c["mmap"], c["trim"]) for c in j["thresholds"]]
    eq(got, want, "threshold changes")
    eq(j["thresholds"][-1]["param"], "M_MMAP_THRESHOLD", "mallopt parameter")
    eq(j["thresholds"][-1]["dynamic_off"], True, "the mallopt pins the threshold")
    eq(j["threshold_end"], {"mmap": 262144, "trim": 6004736, "dynamic": False}, "final thresholds")
    eq(j["summary"]["mmapped_chunks"], 7, "mmapped chunks")
    eq(j["summary"]["mmapped_below_threshold"], 0, "blocks mmapped below the modelled threshold")
    text = t.tool(["heap", out]).stdout
    for _, m, tr in want:
        line = "New thresholds:: mmap: %d bytes, trim: %d bytes" % (m, tr)
        check(line in text, "text has %r:\n%s" % (line, text))
    # --from after the third change: only the later ones are listed
    third = j["thresholds"][2]["time_ns"]
    j2 = heap_json(t, out, "--from", "%dns" % (third + 1))
    eq([(c["cause"], c["mmap"]) for c in j2["thresholds"]],
       [(c, m) for c, m, _ in want[3:]], "threshold changes from after the third")
    # and the calls and mmapped chunks counted are those of the window (they
    # were the whole trace's, beside window-only figures)
    evs = [e for e in t.dump(out) if e.time_ns > third]
    want_calls = {k: sum(1 for e in evs if e.kind == k) for k in ("malloc", "free")}
    eq({k: j2["summary"][k] for k in want_calls}, want_calls, "--from: calls in the window")
    mm = sum(1 for e in evs if e.kind in ("malloc", "calloc", "realloc") and "[mmapped]" in e.line)
    eq(j2["summary"]["mmapped_chunks"], mm, "--from: mmapped chunks made in the window")


@case(timeout=120, labels=("analyzers",))
def test_heap_sbrk(t):
    """The main heap grows by the break and shrinks when glibc trims its
    top: the sbrk total, the bytes trimmed and the final size are what the
    program saw of its own break (sbrk(0) after every call)."""
    out, r = record(t, "sbrkgrow", [t.prog("sbrkgrow")])
    start, raised, lowered, end = (said(r, k)[0] for k in ("start_brk", "raised", "lowered", "end"))
    j = heap_json(t, out)
    mh = j["main_heap"]
    eq(mh["start"], start, "start of the main heap (start_brk)")
    eq(j["sbrk_bytes"], raised, "sbrk total")
    eq(mh["sbrk_bytes"], raised, "main_heap.sbrk_bytes")
    eq(mh["trimmed_bytes"], lowered, "bytes trimmed")
    eq(mh["size_bytes"], end, "size at the end")
    eq(mh["peak_bytes"], raised, "peak (the break only rose, then only fell)")
    check(raised >= 64 * 60 * 1024, "sbrk total %d holds the 64 blocks" % raised)
    check(mh["program_brk_calls"] >= 1 + 2 * 64, "the program's own sbrk(0) calls")
    eq(len(j["arenas"]), 1, "one arena")
    eq(j["heaps"], [], "no heaps outside the main one")


@case(timeout=120, labels=("analyzers",))
def test_heap_window_consistent(t):
    """--from after sbrkgrow's 64 mallocs, at its first free: the window
    holds the 64 frees only.  Its counts are the window's alike (the
    arena's allocations 0 as its uses and the summary's malloc; no sbrk
    step up, every byte trimmed), and the peaks reached before it are at
    its start, said so (they were at 0 ns, the time of no event, beside
    the arena's 64 allocations of the whole trace and its sbrk total)."""
    out, r = record(t, "sbrkgrow", [t.prog("sbrkgrow")])
    raised, lowered = said(r, "raised")[0], said(r, "lowered")[0]
    evs = t.dump(out)
    eq(sum(1 for e in evs if e.kind == "malloc"), 64, "mallocs (the premise)")
    first_free = min(e.time_ns for e in evs if e.kind == "free")
    check(max(e.time_ns for e in evs if e.kind == "malloc") < first_free,
          "every malloc before the first free (the premise)")
    whole = heap_json(t, out)
    j = heap_json(t, out, "--from", "%dns" % first_free)
    a = j["arenas"][0]
    eq((a["allocations"], a["uses"]), (0, []), "the arena's allocations in the window")
    eq((j["summary"]["malloc"], j["summary"]["free"]), (0, 64), "the window's calls")
    mh = j["main_heap"]
    eq((mh["sbrk_bytes"], mh["grow_steps"], j["sbrk_bytes"]), (0, 0, 0),
       "no sbrk step up in the window")
    eq(mh["trimmed_bytes"], lowered, "every trim is in the window")
    eq(mh["program_brk_calls"], sum(1 for e in evs if e.kind == "sbrk" and e.time_ns >= first_free),
       "the program's own sbrk calls in the window")
    eq((mh["peak_bytes"], mh["peak_ns"]), (raised, first_free),
       "the break's peak, reached before the window: at its start")
    eq((j["summary"]["peak_requested_bytes"], j["summary"]["peak_ns"]), (64 * 60 * 1024, first_free),
       "the blocks' peak, reached before the window: at its start")
    eq((whole["arenas"][0]["allocations"], whole["main_heap"]["sbrk_bytes"]), (64, raised),
       "the whole trace: 64 allocations, the sbrk total")
    check(whole["main_heap"]["peak_ns"] < first_free, "the whole trace's break peak is its own")
    text = t.tool(["heap", "--from", "%dns" % first_free, out]).stdout
    for want in (r"^window: \S+ \S+ \.\. the end: ",
                 r"^  main +0 +\S+ \S+ +\S+ \S+ +0  -$",
                 r"^  sbrk total: 0 bytes raised in 0 steps, %d bytes trimmed in \d+ steps?$" % lowered,
                 r"^  size at the end .*, peak .* at \S+ \S+ \(the window's start: reached before it\)$",
                 r"^  in use at the peak \(\S+ \S+, the window's start: reached before it\): "):
        check(re.search(want, text, re.M), "text: no line like %r:\n%s" % (want, text))


def timed_dump(t, path, args=("--kind", "malloc,free,calloc,malloc_trim,mallopt")):
    """dump's events, each of which must have a duration."""
    evs = t.dump(path, list(args))
    for e in evs:
        check("duration" in e.fields, "no duration on %r" % e)
    return evs


@case(timeout=180, labels=("analyzers",))
def test_heap_lock_waits(t):
    """Two threads forced onto one arena (arena_max=1); while A holds the
    arena's lock, B's malloc/free calls wait.  With record --durations
    every malloc-API call carries its duration; heap judges each function
    and size class by its own median and p99 (checked here against every
    duration of B's class), counts exactly the calls beyond the threshold,
    and reports B's slowest calls, in thread B and the main arena.
    Whether B calls during one of A's malloc_trims is the scheduler's
    choice, so those calls are only held to heap's own rule; the call that
    must be there is the forced wait: A holds the lock in malloc_stats
    until B was seen asleep on it and HOLD_MS more (tests/progs/lockwait.c),
    so one call of B lasts HOLD_MS at least, whatever the interleaving."""
    out, r = record(t, "lockwait", [t.prog("lockwait")], opts=["--durations", "--clock", "monotonic"],
                    env={"GLIBC_TUNABLES": "glibc.malloc.arena_max=1"})
    a_tid, b_tid = said(r, "tid A")[0], said(r, "tid B")[0]
    eq(said(r, "forced wait"), [1], "the forced wait was made")
    trims = timed_dump(t, out, ["--kind", "malloc_trim"])
    eq(len(trims), 3, "malloc_trim calls")
    j = heap_json(t, out)
    lw = j["lock_waits"]
    eq(lw["durations"], True, "durations in the trace")
    sm = j["summary"]
    eq(lw["timed_calls"], sm["malloc"] + sm["free"] + sm["calloc"] + sm["malloc_trim"],
       "every call timed")
    eq(len(j["arenas"]), 1, "arenas with arena_max=1")
    eq(sorted(j["arenas"][0]["threads"]), sorted([a_tid, b_tid]), "threads of the one arena")
    b_calls = [e for e in timed_dump(t, out, ["--tid", str(b_tid), "--kind", "malloc,free"])
               if e.kind == "malloc" or e.args[0]]  # not glibc's free(NULL)s at thread exit
    check(len(b_calls) >= 40000, "B's calls: %d" % len(b_calls))
    classes = {(c["function"], c["size_bits"]): c for c in lw["classes"]}
    bits = (2000).bit_length()
    for kind in ("malloc", "free"):
        c = classes.get((kind, bits))
        check(c, "no judged class for %s of 2000 bytes: %r" % (kind, lw["classes"]))
        d = sorted(e.fields["duration"] for e in b_calls if e.kind == kind)
        eq(c["calls"], len(d), "%s calls of 2000 bytes" % kind)
        med, p99 = d[len(d) // 2], d[(len(d) * 99 + 99) // 100 - 1]
        check(c["median_ns"] / 1.25 <= med <= c["median_ns"] * 1.25,
              "median of %s: %d ns, heap says %r" % (kind, med, c))
        check(c["threshold_ns"] >= max(p99, 10 * c["median_ns"]),
              "threshold of %s under p99 %d or 10x the median: %r" % (kind, p99, c))
        eq(c["slow_calls"], len([x for x in d if x >= c["threshold_ns"]]),
           "slow %s calls (duration >= %r)" % (kind, c["threshold_ns"]))
    worst = {(w["tid"], w["time_ns"]): w for w in lw["worst"]}
    # the forced wait: B's slowest call waited HOLD_MS at least (the lock
    # was held that long after B was seen asleep on it: no interleaving
    # makes it shorter); it is beyond its class's threshold (p99 and 10x
    # the median: only if 1% of B's 40000+ calls had lasted HOLD_MS too
    # could it not be) and, the slowest of its class, among those heap keeps
    forced = max(b_calls, key=lambda e: e.fields["duration"])
    check(forced.fields["duration"] >= HOLD_NS,
          "B's slowest call lasted %d ns, less than the forced wait's %d" %
          (forced.fields["duration"], HOLD_NS))
    fc = classes[(forced.kind, bits)]
    check(forced.fields["duration"] >= fc["threshold_ns"],
          "the forced wait (%d ns) is under its threshold: %r" % (forced.fields["duration"], fc))
    x = worst.get((b_tid, forced.time_ns))
    check(x, "B's forced wait (%s at %d ns) is not among the slow calls: %r"
          % (forced.kind, forced.time_ns, lw["worst"]))
    eq((x["function"], x["size"], x["arena"], x["duration_ns"]),
       (forced.kind, 2000, 0, forced.fields["duration"]), "the forced wait as heap reports it")
    # B's calls under way during each trim (dump dates malloc by its end,
    # free by its start): those beyond the threshold, if any (the
    # scheduler's choice), are reported like any slow call
    span = lambda e: ((e.time_ns - e.fields["duration"], e.time_ns) if e.kind == "malloc"
                      else (e.time_ns, e.time_ns + e.fields["duration"]))
    waited = []
    for tr in trims:
        start = tr.time_ns - tr.fields["duration"]  # monotonic clock: ticks are ns
        waited += [e for e in b_calls if span(e)[0] < tr.time_ns and span(e)[1] > start and
                   e.fields["duration"] >= classes[(e.kind, bits)]["threshold_ns"]]
    for w in waited:
        x = worst.get((b_tid, w.time_ns))
        if classes[(w.kind, bits)]["slow_calls"] <= 16:  # kept: the 16 slowest of a class
            check(x, "B's %s at %d ns is not among the slow calls" % (w.kind, w.time_ns))
            eq((x["function"], x["size"], x["arena"], x["duration_ns"]),
               (w.kind, 2000, 0, w.fields["duration"]), "the slow call as heap reports it")
    for w in lw["worst"]:
        check(w["duration_ns"] >= w["threshold_ns"] >= 10 * w["median_ns"] > 0,
              "slow call beyond its threshold: %r" % w)
    bt = [x for x in lw["threads"] if x["tid"] == b_tid]
    check(bt and bt[0]["slow_calls"] >= len(set(e.time_ns for e in waited + [forced])),
          "thread B's slow calls: %r" % bt)
    text = t.tool(["heap", out]).stdout
    check("slow calls of" in text and "thread %d" % b_tid in text, "text lock waits:\n" + text)


@case(timeout=120, labels=("analyzers",))
def test_heap_durations_compact(t):
    """record --durations: the trace says so (header flag), every
    malloc-API call has a duration no longer than the run, the DURATION
    records survive compaction (the same dump before and after), and a
    trace without durations says how to get them."""
    out, _ = record(t, "timed", [t.prog("threads"), "2", "2000"], opts=["--durations", "--no-compact"])
    evs = timed_dump(t, out)
    eq(len([e for e in evs if e.kind == "malloc"]), 4000, "timed mallocs")
    s = t.stats(out)
    for e in evs:
        check(0 < e.fields["duration"] < s["duration_ns"] * 10,
              "duration of %r is not sane" % e)
    before = t.tool(["dump", "--json", out]).stdout
    eq(t.tool(["compact", out]).rc, 0, "compact")
    after = t.tool(["dump", "--json", out]).stdout
    check(before == after, "dump --json differs after compaction")
    check('"duration"' in after, "durations after compaction")
    j = heap_json(t, out)
    eq(j["lock_waits"]["durations"], True, "durations flag")
    plain, _ = record(t, "plain", [t.prog("threads"), "2", "200"])
    j = heap_json(t, plain)
    eq(j["lock_waits"]["durations"], False, "no durations without --durations")
    text = t.tool(["heap", plain]).stdout
    check("record --durations" in text, "the text says how to get durations:\n" + text)


@case(timeout=60, labels=("analyzers",))
def test_heap_html(t):
    """--html: a fragment with the arena table and an inline SVG (well
    formed, no external resources), one line per heap."""
    out, _ = record(t, "arenas", [t.prog("arenas"), "2"])
    r = t.tool(["heap", "--html", out])
    eq(r.rc, 0, "heap --html")
    html = r.stdout
    check("<table>" in html and "<svg" in html, "table and SVG")
    check("http://" not in html.replace("http://www.w3.org/2000/svg", ""), "no external resources")
    svg = html[html.index("<svg"):html.index("</svg>") + 6]
    root = ET.fromstring(svg)
    lines = root.findall(".//{http://www.w3.org/2000/svg}polyline")
    eq(len(lines), 3, "polylines: the break and two heaps")


@case(timeout=60, labels=("analyzers",))
def test_heap_bad_input(t):
    """Missing, empty and truncated traces, a workload, bad options: a
    clear error and the right exit status; a truncated trace still gives
    the figures of what was read."""
    def bad(args, rc, *words):
        r = t.tool(["heap"] + args)
        eq(r.rc, rc, "exit status of heap %s:\n%s" % (" ".join(args), r.describe()))
        for w in words:
            check(w in r.stderr, "%r not in the error:\n%s" % (w, r.stderr))
    bad([], 2, "no trace given")
    bad(["a.ht", "b.ht"], 2, "one trace at a time")
    bad([t.path("missing.ht")], 1, "missing.ht", "cannot open")
    empty = t.path("empty.ht")
    open(empty, "wb").close()
    bad([empty], 1, "empty file")
    out, _ = record(t, "thresholds", [t.prog("thresholds")])
    bad(["--json", "--html", out], 2, "choose one")
    bad(["--from", "2s", "--to", "1s", out], 2, "--to must come after --from")
    bad(["--from", "soon", out], 2, "soon")
    data = open(out, "rb").read()
    cut = t.path("cut.ht")
    with open(cut, "wb") as f:
        f.write(data[:len(data) * 2 // 3])
    r = t.tool(["heap", "--json", cut])
    eq(r.rc, 1, "exit status on a truncated trace:\n" + r.describe())
    check("cut.ht" in r.stderr, "the error names the file:\n" + r.stderr)
    json.loads(r.stdout)  # the report of what was read is still whole JSON


@case(timeout=120, labels=("analyzers",))
def test_heap_json_memalign_family(t):
    """heap --json's summary counts the memalign family as its text does
    (probe S: the text said "memalign family 78435", the JSON had no such
    count): tests/progs/api_all.c makes memalign 1, posix_memalign 2,
    aligned_alloc 1, valloc 1, pvalloc 1."""
    out, _ = record(t, "api", [t.prog("api_all")])
    s = heap_json(t, out)["summary"]
    eq(s["memalign_family"], 6, "memalign family")
    text = t.tool(["heap", out]).stdout
    check("memalign family 6," in text, "the text:\n" + text)
