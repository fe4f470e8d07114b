"""The reader's decoding threads (src/trace/reader_par.c, docs/FORMAT.md,
"Reading with several threads"): `-j 1` reads a trace serially, any other
count decodes its threads' streams ahead in worker threads.  Whatever the
count, every analyzer must print the same bytes, say the same warnings and
errors and exit the same way: on the golden traces, on recorded
multi-threaded traces (raw and column-coded, with stacks), and on damaged
and truncated ones."""

import os
import random
import shutil
import struct
import sys
import tempfile

import htformat
from cases_columns import raw_and_compacted, rewrite_raw_column_chunk, stacks_pair
from htlib import case, check, eq

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "golden"))
import golden  # noqa: E402

CHUNK_SIZE = htformat.CHUNK.size
# -j 1: the serial reader; 2: one decoding thread; 3: two (on a trace of
# several threads, both at work); 0: one per CPU; the default (serial)
COUNTS = (["-j", "1"], ["-j", "2"], ["-j", "3"], ["-j", "0"], [])


def with_threads(args, j):
    """args (a command and its arguments) with -j inserted after the command."""
    return [args[0]] + j + list(args[1:])


def same_everywhere(t, args, what, outfile=None, env=None, cwd=None):
    """Runs heaptrail ARGS at every thread count; the exit status, stdout,
    stderr (and outfile, if the command writes one) must be equal.  Returns
    the serial run."""
    runs = []
    for j in COUNTS:
        if outfile and os.path.exists(outfile):
            os.unlink(outfile)
        r = t.run([t.heaptrail] + with_threads(args, j), env=env, timeout=120, cwd=cwd)
        check(r.rc < 128, "%s: heaptrail %s crashed:\n%s" % (what, " ".join(args), r.describe()))
        body = None
        if outfile and os.path.exists(outfile):
            with open(outfile, "rb") as f:
                body = f.read()
        runs.append((j, r, body))
    j0, r0, b0 = runs[0]
    for j, r, b in runs[1:]:
        label = "%s: heaptrail %s, %s vs -j 1" % (what, " ".join(args), " ".join(j) or "default")
        eq(r.rc, r0.rc, label + ": exit status")
        check(r.out == r0.out, label + ": stdout differs (%d vs %d bytes)"
              % (len(r.out), len(r0.out)))
        check(r.err == r0.err, label + ": stderr differs:\n%s\n--- vs\n%s"
              % (r.stderr[-1500:], r0.stderr[-1500:]))
        check(b == b0, label + ": %s differs" % outfile)
    return r0


@case(timeout=300, labels=("analyzers",))
def test_parallel_golden(t):
    """Every golden command (tests/golden/commands.txt) prints (or writes)
    the same bytes, serially and with 1, 2 or one per CPU decoding
    threads."""
    with tempfile.TemporaryDirectory() as empty:
        for name, trace, args in golden.commands():
            out = t.path(name) if "@OUT@" in args else None
            argv = [empty if a == "@EMPTY@" else out if a == "@OUT@" else a for a in args]
            r = same_everywhere(t, argv, name, outfile=out, env={"TZ": "UTC"}, cwd=golden.HERE)
            eq(r.rc, 0, "%s: exit status" % name)
            got = r.out
            if out:
                with open(out, "rb") as f:
                    got = golden.normalize(f.read())
            check(got == golden.expected(name), "%s: -j 1 differs from the golden output" % name)


def analyses(t, trace, what, stacks=True):
    """The analyzers that read every event, at every thread count."""
    for args in (["stats", "--json", trace], ["stats", trace], ["dump", trace],
                 ["timeline", "--json", "--bins", "40", "-o", "-", trace],
                 ["heap", "--json", trace]):
        same_everywhere(t, args, what)
    if stacks:
        sysroot = t.path("empty-sysroot")
        os.makedirs(sysroot, exist_ok=True)
        for args in (["leaks", "--sysroot", sysroot, trace],
                     ["leaks", "--json", "--sysroot", sysroot, trace],
                     ["flamegraph", "--folded", "--sysroot", sysroot, trace],
                     ["top", "--json", "--sysroot", sysroot, trace],
                     ["events", "--sysroot", sysroot, trace]):
            same_everywhere(t, args, what)
        html = t.path(os.path.basename(trace) + ".html")
        same_everywhere(t, ["report", "-q", "--sysroot", sysroot, "-o", html, trace], what,
                        outfile=html)


@case(timeout=600, labels=("analyzers",), locks=("cpu",))
def test_parallel_recorded(t):
    """Multi-threaded traces recorded here, with stacks (frame and module
    records between the events, node ids given out in the merged order),
    raw and column-coded: stats, dump, timeline, heap, leaks, flamegraph,
    top, events and the HTML report are the same at every thread count."""
    for name, raw, packed in (stacks_pair(t, "threads_stacks", [t.prog("threads"), "4", "20000"]),
                              stacks_pair(t, "handoff_stacks", [t.prog("handoff"), "20000"])):
        analyses(t, raw, name + " (raw)")
        analyses(t, packed, name + " (column-coded)")
    raw, packed = raw_and_compacted(t, "randloop", [t.prog("randloop"), "400000"])
    analyses(t, packed, "randloop", stacks=False)


@case(timeout=300, labels=("analyzers",))
def test_parallel_many_threads(t):
    """A trace of more threads than the decoding threads take (64) is read
    serially: the same output as -j 1 (and no trouble with a count above
    the number of streams)."""
    out = t.path("many.ht")
    t.traced(out, [t.prog("churn"), "80"])
    s = t.stats(out)
    check(s["threads"] > 64, "threads: %d threads in the trace, want more than 64" % s["threads"])
    same_everywhere(t, ["stats", "--json", out], "80 threads")
    same_everywhere(t, ["dump", out], "80 threads")


INDEX_ENTRY = struct.Struct("<QIIQHHI")


def rebuilt(data, drop=(), edit=None):
    """The trace in data without the chunks at the offsets in drop, with a
    new index so that it stays closed and indexed (the reader then has no
    warning of its own at open, and says the first a thread's decoding
    finds); edit(offset, chunk bytes) may change a chunk on the way."""
    hdr = list(htformat.HEADER.unpack_from(data, 0))
    start = hdr[22 + 2 * htformat.SEC_CHUNKS]
    out = bytearray(data[:start])
    entries = b""
    for pos, h in htformat.chunk_headers(data, start):
        if h[1] == htformat.CHUNK_INDEX or pos in drop:
            continue
        chunk = data[pos:pos + CHUNK_SIZE + h[5]]
        if edit:
            chunk = edit(pos, bytearray(chunk))
        entries += INDEX_ENTRY.pack(len(out), h[3], h[4], h[7], h[1], h[2], 0)
        out += chunk
    index_at = len(out)
    out += htformat.CHUNK.pack(htformat.CHUNK_MAGIC, htformat.CHUNK_INDEX, 0, 0, 0, len(entries),
                               len(entries), 0) + entries
    hdr[22 + 2 * htformat.SEC_CHUNKS + 1] = index_at - start
    hdr[22 + 2 * htformat.SEC_INDEX] = index_at
    hdr[22 + 2 * htformat.SEC_INDEX + 1] = CHUNK_SIZE + len(entries)
    out[:htformat.HEADER.size] = htformat.HEADER.pack(*hdr)
    return bytes(out)


def write(t, name, data):
    path = t.path(name)
    with open(path, "wb") as f:
        f.write(data)
    return path


@case(timeout=600, labels=("analyzers",))
def test_parallel_damaged(t):
    """Truncated and corrupted traces: the same partial results, the same
    warnings and the same error line, whatever the thread count (the
    decoding threads say what they found when the reader reaches it)."""
    _, stacked = stacks_pair(t, "stacked", [t.prog("threads"), "3", "20000"])[1:]
    raw, packed = raw_and_compacted(t, "threads", [t.prog("threads"), "3", "20000"])
    rng = random.Random(21)
    for label, path in (("raw", raw), ("column-coded", packed), ("stacks", stacked)):
        with open(path, "rb") as f:
            data = f.read()
        tr = htformat.Trace(path)
        chunks = htformat.chunk_headers(data, tr.sections[htformat.SEC_CHUNKS][0])
        events = [(pos, h) for pos, h in chunks if h[1] == htformat.CHUNK_EVENTS]
        check(len(events) >= 3, "%s: only %d event chunks" % (label, len(events)))
        variants = []
        # cut: inside a chunk header, inside a payload, at a boundary
        for pos, h in (events[len(events) // 2], events[-1]):
            variants += [("cut-hdr-%d" % pos, data[:pos + CHUNK_SIZE // 2]),
                         ("cut-payload-%d" % pos, data[:pos + CHUNK_SIZE + h[5] // 2]),
                         ("cut-at-%d" % pos, data[:pos])]
        # a chunk taken out: events missing (a warning), the thread goes on;
        # indexed again, so that the warning is the decoding's: of each
        # thread, of two threads (the first in merged order is said), and
        # with another thread's chunk damaged (an error besides)
        pos, h = events[len(events) // 2]
        variants.append(("dropped", data[:pos] + data[pos + CHUNK_SIZE + h[5]:]))
        by_tid = {}
        for pos, h in events:
            by_tid.setdefault(h[3], []).append(pos)
        tids = sorted(by_tid, key=lambda k: -len(by_tid[k]))
        for tid in tids:
            ps = by_tid[tid]
            variants.append(("lost-%d" % tid, rebuilt(data, drop={ps[len(ps) // 2]})))
            variants.append(("lost-first-%d" % tid, rebuilt(data, drop={ps[0]})))
        if len(tids) >= 2:
            a, b = by_tid[tids[0]], by_tid[tids[1]]
            variants.append(("lost-two", rebuilt(data, drop={a[len(a) // 2], b[-1]})))

            def damage(pos, chunk, at=b[len(b) // 2]):
                if pos == at:
                    chunk[CHUNK_SIZE + len(chunk) // 3] ^= 0x10
                return chunk
            variants.append(("lost-and-damaged", rebuilt(data, drop={a[-1]}, edit=damage)))
            variants.append(("damaged", rebuilt(data, edit=damage)))
        # flipped bits in payloads: an error or a clean read, the same
        for i in range(6):
            pos, h = events[rng.randrange(len(events))]
            b = bytearray(data)
            b[pos + CHUNK_SIZE + rng.randrange(h[5])] ^= 1 << rng.randrange(8)
            variants.append(("flip%d" % i, bytes(b)))
        for name, body in variants:
            p = write(t, "%s-%s.ht" % (label.replace(" ", ""), name), body)
            what = "%s, %s" % (label, name)
            for args in (["stats", "--json", p], ["dump", p]):
                same_everywhere(t, args, what)
            if label == "stacks":
                same_everywhere(t, ["leaks", "--sysroot", t.dir, p], what)
    # column data damaged where the chunk is stored raw (no checksum): the
    # decoder itself finds it, mid-chunk or at its end
    for i in range(6):
        def flip(p, k=i):
            r = random.Random(100 + k)
            p[r.randrange(40, len(p))] ^= 1 << r.randrange(8)
            return p
        p = rewrite_raw_column_chunk(t, packed, "colflip%d" % i, flip)
        for args in (["stats", "--json", p], ["dump", p]):
            same_everywhere(t, args, "column flip %d" % i)


@case(timeout=120, labels=("analyzers",))
def test_parallel_option(t):
    """-j takes a count, 0 (one per CPU) to 1024, anything else is a usage
    error in one line; HEAPTRAIL_THREADS chooses it when -j is not given
    (junk: one warning, then one thread);
    every command that reads a trace documents -j in its --help."""
    out = t.path("small.ht")
    t.traced(out, [t.prog("threads"), "2", "2000"])
    serial = t.tool(["stats", "--json", "-j", "1", out])
    eq(serial.rc, 0, "stats -j 1")
    for env in ({"HEAPTRAIL_THREADS": "1"}, {"HEAPTRAIL_THREADS": "4"},
                {"HEAPTRAIL_THREADS": "junk"}):
        r = t.run([t.heaptrail, "stats", "--json", out], env=env)
        eq(r.rc, 0, "stats with %s" % env)
        check(r.out == serial.out, "stats with %s differs from -j 1" % env)
    junk = t.run([t.heaptrail, "stats", "--json", out], env={"HEAPTRAIL_THREADS": "junk"})
    eq([l for l in junk.stderr.splitlines() if "HEAPTRAIL_THREADS" in l],
       ["heaptrail: warning: HEAPTRAIL_THREADS='junk' is not a number of threads, "
        "0 (one per CPU) to 1024: reading with one"], "HEAPTRAIL_THREADS=junk: one warning")
    for bad in ("x", "-1", "1025"):
        r = t.tool(["stats", "-j", bad, out])
        eq(r.rc, 2, "stats -j %s: a usage error" % bad)
        eq(r.stderr.strip().splitlines(),
           ["heaptrail: error: -j: '%s' is not a number of threads, 0 (one per CPU) to 1024"
            % bad], "stats -j %s: its one line" % bad)
    r = t.tool(["stats", "--json", "-j", "0", out])
    eq((r.rc, r.out == serial.out), (0, True), "stats -j 0 (one per CPU): as -j 1")
    for cmd in ("stats", "report", "leaks", "flamegraph", "top", "heap", "dump", "events",
                "timeline", "export", "diff", "convert"):
        r = t.tool([cmd, "--help"])
        check("--threads" in r.stdout and "-j" in r.stdout,
              "heaptrail %s --help says nothing of -j:\n%s" % (cmd, r.stdout[-800:]))
