"""The reader's fast loop for row chunks (src/trace/reader_decode.c,
row_loop; docs/FORMAT.md, "Reading"): malloc and free records of the
recorder's own layout are decoded straight into events, the rest record by
record.  HEAPTRAIL_READ_FAST_PATH=0 sends every record the general way; the
two must give the same bytes, serially and with decoding threads, on
recorded traces and on damaged ones (the same events before the damage,
the same error after)."""

import random
import shutil
import struct

import htformat
from htlib import case, check, eq

CHUNK_SIZE = htformat.CHUNK.size
FIELDS = {i: k[1] for i, k in enumerate(htformat.KINDS)}

# (fast path, thread count): the first is the reference
WAYS = (("1", "1"), ("0", "1"), ("1", "2"), ("0", "2"))


def same_both_ways(t, args, what):
    """heaptrail ARGS with the fast loop on and off, -j 1 and -j 2: the exit
    status, stdout and stderr must be equal.  Returns the reference run."""
    runs = []
    for fp, j in WAYS:
        r = t.run([t.heaptrail, args[0], "-j", j] + list(args[1:]),
                  env={"HEAPTRAIL_READ_FAST_PATH": fp}, timeout=120)
        check(r.rc < 128, "%s: heaptrail %s crashed:\n%s" % (what, " ".join(args), r.describe()))
        runs.append(((fp, j), r))
    w0, r0 = runs[0]
    for w, r in runs[1:]:
        label = "%s: heaptrail %s, fast path %s -j %s vs fast path 1 -j 1" % (
            what, " ".join(args), w[0], w[1])
        eq(r.rc, r0.rc, label + ": exit status")
        check(r.out == r0.out, label + ": stdout differs (%d vs %d bytes)"
              % (len(r.out), len(r0.out)))
        check(r.err == r0.err, label + ": stderr differs:\n%s\n--- vs\n%s"
              % (r.stderr[-1500:], r0.stderr[-1500:]))
    return r0


def recorded(t, name, opts, argv, env=None):
    """argv recorded by `heaptrail record OPTS` (row chunks, zstd): its path."""
    out = t.path(name + ".ht")
    r = t.run([t.heaptrail, "record", "-q", "--no-compact", "-o", out] + opts + ["--"] + argv,
              env=env, timeout=120)
    eq(r.rc, 0, "record %s:\n%s" % (name, r.describe()))
    return out


@case(timeout=420, labels=("analyzers",))
def test_read_fast_path_same(t):
    """One thread and several, --stacks, --sample-bytes, --durations,
    realloc/calloc-heavy programs (callocs: calloc, realloc and
    reallocarray of every sort, failed ones included) and every kind
    (api_all): `dump`, `dump --json`, `stats --json`, `heap --json`
    (durations) and, with stacks, `flamegraph --folded` (every
    allocation's stack) print the same bytes with the fast loops and
    without them, serially and with a decoding thread, on the recorded
    row chunks and on a copy compacted into column-coded ones."""
    traces = [
        ("loop", [], [t.prog("randloop"), "30000"]),
        ("threads", [], [t.prog("threads"), "3", "4000"]),
        ("stacks", ["--stacks"], [t.prog("randloop"), "30000"]),
        ("stacks_threads", ["--stacks"], [t.prog("threads"), "2", "3000"]),
        ("sampled", ["--sample-bytes", "512"], [t.prog("randloop"), "30000"]),
        ("durations", ["--durations"], [t.prog("threads"), "2", "3000"]),
        ("reallocs", ["--stacks"], [t.prog("reallocs")]),
        ("api_all", [], [t.prog("api_all")]),
        ("callocs", [], [t.prog("callocs"), "20000"]),
        ("callocs_stacks", ["--stacks"], [t.prog("callocs"), "20000"]),
        ("callocs_sampled", ["--sample-bytes", "256"], [t.prog("callocs"), "20000"]),
        ("callocs_durations", ["--durations"], [t.prog("callocs"), "20000"]),
    ]
    for name, opts, argv in traces:
        path = recorded(t, name, opts, argv)
        tr = htformat.Trace(path)
        check(tr.events, "%s: no events" % name)
        cols = t.path(name + "-cols.ht")
        shutil.copyfile(path, cols)
        r = t.run([t.heaptrail, "compact", "-q", cols], timeout=120)
        eq(r.rc, 0, "compact %s:\n%s" % (name, r.describe()))
        for what, p in ((name, path), (name + " compacted", cols)):
            cmds = [["dump", "-q", p], ["dump", "-q", "--json", p],
                    ["stats", "-q", "--json", p], ["heap", "-q", "--json", p]]
            if "--stacks" in opts:
                cmds.append(["flamegraph", "-q", "--folded", "--metric", "allocated", p])
            for args in cmds:
                r = same_both_ways(t, args, what)
                eq(r.rc, 0, "%s: heaptrail %s" % (what, " ".join(args)))


def row_records(payload):
    """(offset, kind, tag offset, tag bytes) of each record of a row payload
    of format 6, as far as it parses (a short record has no tag: 0 bytes)."""
    out = []
    p = 0
    while p < len(payload):
        kb = payload[p]
        kind, q = kb & 0x1f, p + 1
        if kb & 0x60 == 0x60:  # a short malloc or free
            if kb & htformat.F_STACK:
                break
            cs, cp = (0, kb & 7) if kb & 0x10 else (((kb >> 2) & 1) + 1, kb & 3)
            out.append((p, 2 if kb & 0x10 else 1, q, 0))
            p = q + cs + cp
            continue
        if kind == htformat.EXT:
            if q >= len(payload):
                break
            kind, q = 32 + payload[q], q + 1
        if kind not in FIELDS:
            break
        fields = FIELDS[kind]
        nv = len(fields) + 1 + (1 if kb & htformat.F_STACK else 0)
        tb = (nv + 1) // 2
        if q + tb > len(payload):
            break
        lens = [(payload[q + i // 2] >> (4 * (i % 2))) & 15 for i in range(nv)]
        vals, r = [], q + tb
        for n in lens:
            vals.append(int.from_bytes(payload[r:r + n], "little"))
            r += n
        r += sum(v for f, v in zip(fields, vals) if f == "S")
        out.append((p, kind, q, tb))
        p = r
    return out


@case(timeout=300, labels=("analyzers",))
def test_read_fast_path_damaged(t):
    """Damaged row chunks (written raw: a stored frame, its checksum
    sealed again after the damage, as in bare records): a field length above 8 in a malloc
    or free record (threads) and in a calloc or realloc record (callocs),
    in the middle of a chunk and near its end, a kind byte made unknown, a
    truncated record, and random bit flips.  With the fast loop and
    without it, serially and with a decoding thread, the reader delivers
    the same events and says the same error."""
    for prog, argv, kinds in (("threads", ["2", "3000"], (1, 2)),
                              ("callocs", ["3000"], (3, 4))):
        damaged_chunk(t, prog, [t.prog(prog)] + argv, kinds)


def damaged_chunk(t, prog, argv, kinds):
    """The damaged variants of a raw row chunk of argv's trace, in records
    of the given kinds."""
    raw = t.path(prog + "-raw.ht")
    t.traced(raw, argv, env={"HEAPTRAIL_ZSTD_LEVEL": "0"})
    with open(raw, "rb") as f:
        data = f.read()
    tr = htformat.Trace(raw)
    # (HEAPTRAIL_ZSTD_LEVEL=0 writes stored frames: the records as they
    # are, in one raw block of a zstd frame, behind its 9-byte header and
    # the block's 3; the checksum after them is sealed again below, so that
    # the damage reaches the decoder, as in a chunk of bare records)
    chunks = [(off, h) for off, h in htformat.chunk_headers(data, tr.sections[htformat.SEC_CHUNKS][0])
              if h[1] == htformat.CHUNK_EVENTS and h[2] & htformat.F_STORED
              and not h[2] & htformat.F_COLUMNS and h[6] > 2000 and h[5] == h[6] + 16]
    check(chunks, "%s: no stored event chunk of 2000 bytes or more" % prog)

    def kind_records(c):
        start = c[0] + CHUNK_SIZE + 12
        return [r for r in row_records(data[start:start + c[1][6]]) if r[1] in kinds]
    # (the chunk with the most records of those kinds: where the writer's
    # rounds cut the buffers depends on timing, and the middle chunk held
    # 94 of them once in CI)
    off, h = max(chunks, key=lambda c: len(kind_records(c)))
    start = off + CHUNK_SIZE + 12
    payload = data[start:start + h[6]]
    recs = kind_records((off, h))
    check(len(recs) > 100, "%s: records of kinds %s in the chunk: %d" % (prog, kinds, len(recs)))
    # a record of each kind with a tag mid-chunk, and the last ones before
    # the end; and the same of the short records (format 6: most mallocs
    # and frees, without a tag; the mallocs dated every 64th call have one,
    # and no free here: the 64th call of a thread is always a malloc)
    picks, short_picks = [], []
    longs, shorts = [r for r in recs if r[3]], [r for r in recs if not r[3]]
    for kind in kinds:
        of = [r for r in longs if r[1] == kind]
        sh = [r for r in shorts if r[1] == kind]
        check(len(of) > 3 or len(sh) > 100, "%s: records of kind %d in the chunk: %d with a "
              "tag, %d short" % (prog, kind, len(of), len(sh)))
        if len(of) > 3:
            picks += [("mid%d" % kind, of[len(of) // 2]), ("late%d" % kind, of[-2])]
        if len(sh) > 3:
            short_picks += [("mid%d" % kind, sh[len(sh) // 2]), ("late%d" % kind, sh[-2])]
    if kinds == (1, 2):
        check(len(short_picks) == 4, "%s: short mallocs and frees in the chunk: %d"
              % (prog, len(shorts)))

    def variant(name, edits):
        b = bytearray(data)
        for pos, val in edits:
            b[pos] = val
        sum_at = start + h[6]
        b[sum_at:sum_at + 4] = struct.pack("<I", htformat.xxh64(bytes(b[start:sum_at])) & 0xFFFFFFFF)
        path = t.path("%s-%s.ht" % (prog, name))
        with open(path, "wb") as f:
            f.write(b)
        return path

    damaged = []
    for where, rec in picks:
        p, kind, q, tb = rec
        # the first value's length 9..15, then the last's
        damaged.append(("badlen-%s" % where, [(start + q, (payload[q] & 0xf0) | 0x9)]))
        damaged.append(("badlen-last-%s" % where,
                        [(start + q + tb - 1, payload[q + tb - 1] | 0xf0)]))
        damaged.append(("kind-%s" % where, [(start + p, 31), (start + p + 1, 200)]))
    # a short record's byte with HT_F_STACK too (0xe0..0xff: invalid)
    for where, rec in short_picks:
        damaged.append(("short-stack-%s" % where, [(start + rec[0], payload[rec[0]] | 0x80)]))
    # a record cut short by the chunk's end: the last one's lengths all 8
    # (a short one: its pointer delta the longest, 7 bytes)
    p, kind, q, tb = recs[-1]
    damaged.append(("truncated", [(start + q + i, 0x88) for i in range(tb)] if tb
                    else [(start + p, 0x7f)]))
    rng = random.Random(7)
    for i in range(12):
        pos = start + rng.randrange(len(payload))
        damaged.append(("flip%d" % i, [(pos, data[pos] ^ (1 << rng.randrange(8)))]))
    errors = 0
    for name, edits in damaged:
        path = variant(name, edits)
        for args in (["dump", "-q", path], ["stats", "-q", "--json", path]):
            r = same_both_ways(t, args, name)
            errors += r.rc == 1
    check(errors >= 8, "%s: damaged variants the reader found corrupt: %d" % (prog, errors // 2))
