"""Column coding (format 3): `heaptrail compact` rewrites event chunks as
columns with predicted pointers.  The events must come back exactly (the C
reader and the independent Python decoder both), the trace must shrink, and
a damaged column chunk must give a clear error, never a crash."""

import os
import shutil
import struct

import htformat
from htlib import case, check, eq

CHUNK_SIZE = htformat.CHUNK.size


def raw_and_compacted(t, name, argv, env=None):
    raw = t.path(name + ".raw.ht")
    # HEAPTRAIL_ZSTD_LEVEL=0: the preloaded recorder writes raw chunks
    t.traced(raw, argv, env=dict(env or {}, HEAPTRAIL_ZSTD_LEVEL="0"))
    packed = t.path(name + ".ht")
    shutil.copy(raw, packed)
    r = t.tool(["compact", packed])
    eq(r.rc, 0, "compact:\n" + r.describe())
    return raw, packed


@case(timeout=120, labels=("analyzers",))
def test_columns_roundtrip(t):
    """Every kind (api_all), threads, reallocs, blocks freed by another
    thread than their allocator's and allocated again (prodcons, ring: the
    decoder's model keeps its newest block out of its table, and this is
    the block those frees take): after compaction the chunks are
    column-coded, the file says version 3, and every event is the same as
    in the raw trace: in `dump --json` (C reader) and in the Python decoder
    written from docs/FORMAT.md."""
    ring_env = {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1"}
    for name, argv, env in (("api_all", [t.prog("api_all")], None),
                            ("threads", [t.prog("threads"), "3", "3000"], None),
                            ("reallocs", [t.prog("reallocs")], None),
                            ("handoff", [t.prog("handoff"), "2000"], None),
                            ("prodcons", [t.prog("prodcons"), "2000"], None),
                            ("ring", [t.prog("ring"), "3000"], ring_env)):
        raw, packed = raw_and_compacted(t, name, argv, env=env)
        a, b = htformat.Trace(raw), htformat.Trace(packed)
        eq(b.error, None, "%s: Python decoder on the compacted trace" % name)
        check(b.version >= 3, "%s: version %d of the compacted trace (column coding is 3)"
              % (name, b.version))
        with open(packed, "rb") as f:
            data = f.read()
        cols = [h for _, h in htformat.chunk_headers(data, b.sections[htformat.SEC_CHUNKS][0])
                if h[1] == htformat.CHUNK_EVENTS and h[2] & htformat.F_COLUMNS]
        check(cols, "%s: no column-coded chunk in the compacted trace" % name)
        eq(len(b.events), len(a.events), "%s: events" % name)
        for x, y in zip(a.events, b.events):
            if repr(x) != repr(y):
                check(False, "%s: event differs after compaction:\n raw %r\n now %r" % (name, x, y))
        d1 = t.tool(["dump", "--json", raw])
        d2 = t.tool(["dump", "--json", packed])
        eq(d1.rc, 0, "dump of the raw trace")
        eq(d2.rc, 0, "dump of the compacted trace")
        check(d1.stdout == d2.stdout, "%s: dump --json differs after compaction" % name)
        check(os.path.getsize(packed) < os.path.getsize(raw), "%s: compaction grew the file" % name)
        # compacting again changes nothing
        again = t.path(name + ".again.ht")
        shutil.copy(packed, again)
        eq(t.tool(["compact", again]).rc, 0, "second compact")
        with open(again, "rb") as f:
            check(f.read() == data, "%s: a second compaction changed the file" % name)


@case(timeout=120)
def test_columns_size(t):
    """The benchmark's loop (random sizes 16..4096): under 1.1 bytes per
    event once compacted (1.66 without column coding; heaptrack's trace of
    the same loop takes 1.17, bench/RESULTS.md).  No RSS samples: their
    number follows the run's wall time, which a loaded machine stretches."""
    n = 200000
    _, packed = raw_and_compacted(t, "randloop", [t.prog("randloop"), str(n)],
                                  env={"HEAPTRAIL_RSS_INTERVAL": "0"})
    s = t.stats(packed)
    eq(s["calls"]["malloc"], n, "mallocs")
    eq(s["calls"]["free"], n, "frees")
    per = os.path.getsize(packed) / s["events"]
    t.note("%.3f bytes/event" % per)
    check(per < 1.1, "compacted trace takes %.3f bytes/event (want < 1.1)" % per)


def event_chunks(path):
    """Headers of the EVENTS chunks of the trace at path."""
    tr = htformat.Trace(path)
    with open(path, "rb") as f:
        data = f.read()
    return [h for _, h in htformat.chunk_headers(data, tr.sections[htformat.SEC_CHUNKS][0])
            if h[1] == htformat.CHUNK_EVENTS]


@case(timeout=120)
def test_record_compresses_while_recording(t):
    """The default `record` leaves a compressed trace with no compaction
    after the run: every event chunk of some size is a zstd frame of
    records (the writer compressed it while the program ran, or record's
    end step did, if the writer wrote it raw), none is column-coded, and
    the benchmark's loop takes under 2 bytes an event (about 1.7; raw
    ~2.5).  `record --compact` column-codes it (the events stay the same),
    `record --no-compact --zstd-level=0` leaves it raw (stored frames: the
    records as they are, with a checksum), and `compact --fast` codes
    that raw trace (Huffman alone, as record's end step) into the same
    events in under 2 bytes an event, every big chunk a zstd frame that is
    not stored."""
    n = 60000
    argv = [t.prog("randloop"), str(n)]
    env = {"HEAPTRAIL_RSS_INTERVAL": "0"}
    paths = {}
    for name, opts in (("default", []), ("compact", ["--compact"]),
                       ("raw", ["--no-compact", "--zstd-level=0"])):
        paths[name] = out = t.path(name + ".ht")
        r = t.run([t.heaptrail, "record", "-q", "-o", out] + opts + ["--"] + argv, env=env)
        eq(r.rc, 0, "record %s:\n%s" % (" ".join(opts), r.describe()))
    chunks = event_chunks(paths["default"])
    big = [h for h in chunks if h[6] >= 256]  # (raw_size; smaller ones may stay raw)
    check(big, "no event chunk in the default trace")
    for h in chunks:
        check(not h[2] & htformat.F_COLUMNS, "a column-coded chunk in the default trace: "
              "record compacted it after the run")
    raw_big = [h for h in big if not h[2] & htformat.F_ZSTD or h[2] & htformat.F_STORED]
    check(not raw_big, "%d of %d event chunks of the default trace are not compressed"
          % (len(raw_big), len(big)))
    s = t.stats(paths["default"])
    eq(s["calls"]["malloc"], n, "mallocs")
    per = os.path.getsize(paths["default"]) / s["events"]
    t.note("default trace: %.3f bytes/event" % per)
    check(per < 2.0, "the default trace takes %.3f bytes/event (want < 2)" % per)
    check(any(h[2] & htformat.F_COLUMNS for h in event_chunks(paths["compact"])),
          "record --compact wrote no column-coded chunk")
    check(os.path.getsize(paths["compact"]) < os.path.getsize(paths["default"]),
          "record --compact is not smaller than the default")
    # (not compressed: stored frames, the records as they are behind a
    # checksum, which is all the end step and compact --fast undo)
    check(all(h[2] & htformat.F_STORED and h[5] == h[6] + 16
              for h in event_chunks(paths["raw"]) if h[6]),
          "--zstd-level=0 --no-compact: chunks that are not stored frames")
    fast = t.path("fast.ht")
    shutil.copy(paths["raw"], fast)
    r = t.tool(["compact", "--fast", fast])
    eq(r.rc, 0, "compact --fast:\n" + r.describe())
    check(all(h[2] & htformat.F_ZSTD and not h[2] & htformat.F_STORED
              for h in event_chunks(fast) if h[6] >= 256),
          "compact --fast left big raw chunks")
    # (Huffman coding alone, record's end step: ~1.8 bytes/event here,
    # the raw format 6 records ~2.5)
    check(os.path.getsize(fast) < os.path.getsize(paths["raw"]) * 0.85, "compact --fast: "
          "%d bytes from %d" % (os.path.getsize(fast), os.path.getsize(paths["raw"])))
    check(os.path.getsize(fast) / s["events"] < 2.0, "compact --fast: %.3f bytes/event (want < 2)"
          % (os.path.getsize(fast) / s["events"]))
    dumps = {}
    for name, path in (("raw", paths["raw"]), ("fast", fast)):
        d = t.tool(["dump", "--json", path])
        eq(d.rc, 0, "dump " + name)
        dumps[name] = d.stdout
        eq(htformat.Trace(path).error, None, "Python decoder on the %s trace" % name)
    check(dumps["raw"] == dumps["fast"], "compact --fast changed the events")
    # a second --fast finds nothing to do and leaves the file alone
    with open(fast, "rb") as f:
        before = f.read()
    eq(t.tool(["compact", "--fast", fast]).rc, 0, "second compact --fast")
    with open(fast, "rb") as f:
        check(f.read() == before, "a second compact --fast changed the file")
    eq(t.stats(paths["compact"])["calls"], s["calls"], "calls, default vs --compact")


def event_headers(path):
    """Headers of the EVENTS chunks of the trace at path, from the chunk
    headers alone (event_chunks decodes every event: slow on a big one)."""
    with open(path, "rb") as f:
        data = f.read()
    sec = htformat.HEADER.unpack_from(data, 0)[22:38]
    return [h for _, h in htformat.chunk_headers(data, sec[2 * htformat.SEC_CHUNKS])
            if h[1] == htformat.CHUNK_EVENTS]


@case(timeout=180)
def test_compact_fast_pipeline(t):
    """`compact --fast` (record's end step) on a raw trace of 3 threads
    more than twice as long as what its workers compress ahead of the
    writing (16 MiB): the chunks come out in the input's order, each the
    same thread, first sequence number and events, every big one
    compressed, and the analyses see the same trace."""
    argv = [t.prog("threads"), "3", "3600000"]
    raw = t.path("raw.ht")
    r = t.run([t.heaptrail, "record", "-q", "-o", raw, "--no-compact", "--zstd-level=0",
               "--"] + argv, env={"HEAPTRAIL_RSS_INTERVAL": "0"})
    eq(r.rc, 0, "record:\n" + r.describe())
    check(os.path.getsize(raw) > 32 << 20, "raw trace of %d bytes: want more than 32 MiB"
          % os.path.getsize(raw))
    fast = t.path("fast.ht")
    shutil.copy(raw, fast)
    r = t.tool(["compact", "--fast", fast])
    eq(r.rc, 0, "compact --fast:\n" + r.describe())
    before, after = event_headers(raw), event_headers(fast)
    # (tid, first_seq, nevents, raw bytes) in file order
    key_raw = [(h[3], h[7], h[4], h[6]) for h in before]
    key_fast = [(h[3], h[7], h[4], h[6]) for h in after]
    check(all(h[2] & htformat.F_STORED for h in before if h[6]), "the raw trace's chunks "
          "are not all stored frames")
    eq(len(key_fast), len(key_raw), "event chunks")
    check(key_fast == key_raw, "compact --fast changed the chunks' order or contents")
    check(len({h[3] for h in after}) >= 3, "chunks of fewer than 3 threads")
    check(all(h[2] & htformat.F_ZSTD and not h[2] & htformat.F_STORED
              for h in after if h[6] >= 256), "compact --fast left big raw chunks")
    s_raw, s_fast = t.stats(raw), t.stats(fast)
    eq(s_fast["events"], s_raw["events"], "events")
    eq(s_fast["calls"], s_raw["calls"], "calls")
    eq(s_fast["calls"]["malloc"], 10800000, "mallocs")


def rewrite_raw_column_chunk(t, packed, name, edit):
    """A copy of packed whose first column-coded chunk is stored without zstd
    (payload passed through edit), the index dropped (the reader scans)."""
    tr = htformat.Trace(packed)
    with open(packed, "rb") as f:
        data = f.read()
    start = tr.sections[htformat.SEC_CHUNKS][0]
    out = bytearray(data[:start])
    done = False
    for pos, h in htformat.chunk_headers(data, start):
        magic, ctype, cflags, tid, nev, csize, rsize, seq = h
        payload = data[pos + CHUNK_SIZE:pos + CHUNK_SIZE + csize]
        if ctype == htformat.CHUNK_INDEX:
            continue
        if not done and ctype == htformat.CHUNK_EVENTS and cflags & htformat.F_COLUMNS:
            if cflags & htformat.F_ZSTD:
                payload = htformat._decompress([payload])[0]
            payload = edit(bytearray(payload))
            cflags &= ~htformat.F_ZSTD
            out += htformat.CHUNK.pack(magic, ctype, cflags, tid, nev, len(payload),
                                       len(payload), seq)
            out += payload
            done = True
            continue
        out += data[pos:pos + CHUNK_SIZE + csize]
    check(done, "no column-coded chunk to rewrite")
    # header: not closed, no index, chunk section open-ended
    hdr = list(htformat.HEADER.unpack_from(out, 0))
    hdr[3] &= ~htformat.FILE_F_CLOSED
    hdr[22 + 2 * htformat.SEC_CHUNKS + 1] = 0
    hdr[22 + 2 * htformat.SEC_INDEX] = hdr[22 + 2 * htformat.SEC_INDEX + 1] = 0
    out[:htformat.HEADER.size] = htformat.HEADER.pack(*hdr)
    path = t.path(name + ".ht")
    with open(path, "wb") as f:
        f.write(out)
    return path


@case(timeout=120, labels=("analyzers",))
def test_columns_damaged(t):
    """A column chunk stored raw decodes like the compressed one; a wrong
    length or damaged column data gives exit 1 and one error line with the
    file and the chunk's offset; random damage never crashes."""
    raw, packed = raw_and_compacted(t, "threads", [t.prog("threads"), "2", "3000"])
    full = t.stats(raw)
    ok = rewrite_raw_column_chunk(t, packed, "plain", lambda p: p)
    s = t.stats(ok)  # unclosed now: a warning, exit 0
    eq(s["events"], full["events"], "events with the column chunk stored raw")
    eq(s["calls"], full["calls"], "calls with the column chunk stored raw")

    def bump_rec_bytes(p):
        struct.pack_into("<I", p, 4, struct.unpack_from("<I", p, 4)[0] + 1)
        return p

    def cut_kind_column(p):
        # one record less in the kind column, one byte more in the next
        hdr = list(struct.unpack_from("<III7I", p, 0))
        hdr[3] -= 1
        hdr[4] += 1
        struct.pack_into("<III7I", p, 0, *hdr)
        return p

    # A column chunk is decoded record by record as it is read: damage
    # found at its first record stops its thread before any of its events;
    # a record count that disagrees only at the chunk's end comes after the
    # chunk's events (like a raw chunk's wrong event count).
    for what, edit, at_end in (("rec_bytes", bump_rec_bytes, True),
                               ("kind column", cut_kind_column, False)):
        path = rewrite_raw_column_chunk(t, packed, what.replace(" ", "_"), edit)
        s = t.stats(path, rc=1)
        eq(s["complete"], False, "%s: complete" % what)
        lines = [l for l in s["_run"].stderr.splitlines() if path in l and "error" in l.lower()]
        eq(len(lines), 1, "%s: error lines naming the file:\n%s" % (what, s["_run"].stderr))
        check(("column-coded chunk" in lines[0] or "sync record" in lines[0])
              and "offset" in lines[0],
              "%s: the error does not say what and where: %r" % (what, lines[0]))
        if at_end:
            check(s["events"] <= full["events"], "%s: more events than the trace has" % what)
            check("column-coded chunk" in lines[0], "%s: error %r" % (what, lines[0]))
        else:
            check(s["events"] < full["events"], "%s: every event read" % what)

    # flipped bits anywhere in the column data: an error or a clean read
    import random
    rng = random.Random(5)
    for i in range(12):
        def flip(p, rng=rng):
            k = rng.randrange(40, len(p))
            p[k] ^= 1 << rng.randrange(8)
            return p
        path = rewrite_raw_column_chunk(t, packed, "flip%d" % i, flip)
        for cmd in (["stats", path, "--json"], ["dump", path]):
            r = t.tool(cmd)
            check(r.rc in (0, 1), "flip %d: `%s` exit %d:\n%s" % (i, " ".join(cmd), r.rc,
                                                                    r.stderr[-2000:]))


def column_chunks(path):
    """(tid, nevents) of every column-coded EVENTS chunk, in file order."""
    tr = htformat.Trace(path)
    with open(path, "rb") as f:
        data = f.read()
    return [(h[3], h[4]) for _, h in htformat.chunk_headers(data, tr.sections[htformat.SEC_CHUNKS][0])
            if h[1] == htformat.CHUNK_EVENTS and h[2] & htformat.F_COLUMNS]


@case(timeout=300, labels=("analyzers",))
def test_columns_many_chunks(t):
    """The reader decodes column chunks record by record, straight from the
    columns, with one allocator model per thread that is reset at every
    chunk: a thread with several column chunks (the benchmark's loop), and
    threads whose allocations carry stacks (not the malloc/free short cut),
    read back exactly as the raw trace in `dump` and `stats --json`."""
    raw, packed = raw_and_compacted(t, "randloop", [t.prog("randloop"), "300000"])
    chunks = column_chunks(packed)
    check(len(chunks) >= 2, "randloop: %d column chunks, want several for one thread" % len(chunks))
    for name, a, b in (("randloop", raw, packed),) + tuple(
            stacks_pair(t, n, argv) for n, argv in (
                ("threads_stacks", [t.prog("threads"), "3", "3000"]),
                ("handoff_stacks", [t.prog("handoff"), "3000"]))):
        d1, d2 = t.tool(["dump", a]), t.tool(["dump", b])
        eq(d1.rc, 0, "%s: dump of the raw trace" % name)
        eq(d2.rc, 0, "%s: dump of the compacted trace" % name)
        check(d1.stdout == d2.stdout, "%s: dump differs after compaction" % name)
        s1, s2 = t.stats(a), t.stats(b)
        for s in (s1, s2):
            del s["_run"], s["trace"]
        check(s1 == s2, "%s: stats --json differs after compaction" % name)
    check("stack=" in d2.stdout, "handoff_stacks: no stack ids in the dump")


def stacks_pair(t, name, argv):
    """(name, raw, compacted) traces of argv recorded with --stacks."""
    raw = t.path(name + ".raw.ht")
    r = t.run([t.heaptrail, "record", "-q", "--stacks", "--no-compact", "-o", raw, "--"] + argv)
    eq(r.rc, 0, "record --stacks:\n" + r.describe())
    packed = t.path(name + ".ht")
    shutil.copy(raw, packed)
    eq(t.tool(["compact", packed]).rc, 0, "compact " + name)
    check(column_chunks(packed), "%s: no column-coded chunk" % name)
    return name, raw, packed


@case(timeout=120, labels=("analyzers",))
def test_columns_damaged_late(t):
    """Damage near the end of a column chunk: the reader delivers the
    chunk's events up to the damaged record, exactly as in the undamaged
    trace, then stops the thread with one error naming the chunk (exit 1).
    Here the slack column loses its last byte (to the empty column after
    it), so the chunk's last malloc cannot be decoded."""
    _, packed = raw_and_compacted(t, "randloop", [t.prog("randloop"), "100000"])
    # the reference: the same rewrite (unclosed, no index) without damage
    full = t.tool(["dump", rewrite_raw_column_chunk(t, packed, "undamaged", lambda p: p)])
    eq(full.rc, 0, "dump of the undamaged trace")
    nev = column_chunks(packed)[0][1]

    def move_slack_byte(p):
        hdr = list(struct.unpack_from("<III7I", p, 0))
        # magic, rec_bytes, nrec, then the lengths: kind, uint, ptr, time, slack, other, str
        eq(hdr[8], 0, "the 'other' column of randloop's chunk is empty")
        hdr[7] -= 1
        hdr[8] += 1
        struct.pack_into("<III7I", p, 0, *hdr)
        return p

    path = rewrite_raw_column_chunk(t, packed, "late", move_slack_byte)
    r = t.tool(["dump", path])
    eq(r.rc, 1, "dump of the damaged trace:\n" + r.describe())
    got = r.stdout.splitlines()
    want = full.stdout.splitlines()
    check(nev - 2 <= len(got) < nev,
          "%d events delivered from a chunk of %d whose last malloc is damaged" % (len(got), nev))
    check(got == want[:len(got)], "the events before the damage differ from the undamaged trace")
    errs = [l for l in r.stderr.splitlines() if "error" in l]
    eq(len(errs), 1, "error lines:\n" + r.stderr)
    check(path in errs[0] and "column-coded chunk" in errs[0] and "offset" in errs[0],
          "the error does not name the file, the chunk and the offset: %r" % errs[0])


PY_LIVE = """
import threading
def work(n):
    keep = [bytes(600 + i % 400) for i in range(n)]
    del keep[::2]
    keep += [bytearray(700 + i % 300) for i in range(n // 2)]
    del keep
ts = [threading.Thread(target=work, args=(60000,)) for _ in range(2)]
for t in ts: t.start()
for t in ts: t.join()
"""


@case(timeout=300, labels=("analyzers",))
def test_columns_live_set(t):
    """Two threads that each keep tens of thousands of blocks live (python3
    objects of 600..1000 bytes come from malloc): the column decoder's model
    grows its tables within a chunk and starts small again at the next; the
    reader's causal live set holds both threads' blocks.  The compacted trace
    reads back exactly as the raw one."""
    py = shutil.which("python3") or "/usr/bin/python3"
    raw = t.path("live.raw.ht")
    r = t.run([t.heaptrail, "record", "-q", "--no-compact", "-o", raw, "--", py, "-c", PY_LIVE],
              timeout=120)
    eq(r.rc, 0, "record python3:\n" + r.describe())
    packed = t.path("live.ht")
    shutil.copy(raw, packed)
    eq(t.tool(["compact", packed]).rc, 0, "compact")
    check(len(column_chunks(packed)) >= 4, "want several column chunks")
    s = t.stats(packed)
    check(s["peak_live_blocks"] > 60000, "peak live blocks %d" % s["peak_live_blocks"])
    d1, d2 = t.tool(["dump", raw]), t.tool(["dump", packed])
    eq((d1.rc, d2.rc), (0, 0), "dump exit status")
    check(d1.stdout == d2.stdout, "dump differs after compaction")
    s1 = t.stats(raw)
    for x in (s, s1):
        del x["_run"], x["trace"]
    check(s == s1, "stats --json differs after compaction")


def zstd_block_sequences(frame):
    """The number of sequences in each block of a zstd frame (RFC 8878):
    0 for a block of literals only, None for a raw or RLE block."""
    fhd = frame[4]
    p = 5 + (0 if fhd & 0x20 else 1) + (0, 1, 2, 4)[fhd & 3]
    p += (1 if fhd & 0x20 else 0, 2, 4, 8)[fhd >> 6]
    out = []
    while True:
        bh = frame[p] | frame[p + 1] << 8 | frame[p + 2] << 16
        last, btype, bsize = bh & 1, (bh >> 1) & 3, bh >> 3
        p += 3
        if btype != 2:
            out.append(None)
            p += 1 if btype == 1 else bsize
        else:
            b = frame[p:p + bsize]
            ltype, sf = b[0] & 3, (b[0] >> 2) & 3
            if ltype < 2:  # raw or RLE literals
                hl, lsize = ((1, b[0] >> 3), (2, (b[0] | b[1] << 8) >> 4),
                             (1, b[0] >> 3), (3, (b[0] | b[1] << 8 | b[2] << 16) >> 4))[sf]
                q = hl + (1 if ltype == 1 else lsize)
            else:  # Huffman-coded: the header's compressed size
                v = int.from_bytes(b[:5], "little")
                hl, csize = ((3, (v >> 14) & 0x3FF), (3, (v >> 14) & 0x3FF),
                             (4, (v >> 18) & 0x3FFF), (5, (v >> 22) & 0x3FFFF))[sf]
                q = hl + csize
            nb = b[q]
            out.append(nb if nb < 128 else (nb - 128) << 8 | b[q + 1] if nb < 255
                       else b[q + 1] + (b[q + 2] << 8) + 0x7F00)
            p += bsize
        if last:
            return out


@case(timeout=180)
def test_end_step_huffman_only(t):
    """record's end step codes the chunks written raw with Huffman alone by
    default: each becomes a zstd frame whose every block holds literals
    only (no sequence: no match search), under 2 bytes an event on the
    benchmark loop's records; `--finish=zstd` (and `compact --fast
    --level 1`) compresses them with zstd's matches instead, a little
    smaller; the events are the same every way; a bad --finish is refused,
    and so is one with --no-compact, --compact or --zstd-level=0."""
    argv = [t.prog("threads"), "2", "200000"]
    env = {"HEAPTRAIL_RSS_INTERVAL": "0"}
    raw = t.path("raw.ht")
    r = t.run([t.heaptrail, "record", "-q", "-o", raw, "--no-compact", "--zstd-level=0", "--"]
              + argv, env=env)
    eq(r.rc, 0, "record raw:\n" + r.describe())
    ways = {}
    for name, opts in (("huffman", []), ("zstd", ["--level", "1"])):
        ways[name] = path = t.path(name + ".ht")
        shutil.copy(raw, path)
        r = t.tool(["compact", "--fast", "-q"] + opts + [path])
        eq(r.rc, 0, "compact --fast %s:\n%s" % (" ".join(opts), r.describe()))
    with open(raw, "rb") as f:
        data = f.read()

    def frames(path):
        with open(path, "rb") as f:
            d = f.read()
        tr = htformat.Trace(path)
        eq(tr.error, None, "Python decoder on " + os.path.basename(path))
        return [d[off + CHUNK_SIZE:off + CHUNK_SIZE + h[5]]
                for off, h in htformat.chunk_headers(d, tr.sections[htformat.SEC_CHUNKS][0])
                if h[1] == htformat.CHUNK_EVENTS and h[6] >= 4096]
    huff, zs = frames(ways["huffman"]), frames(ways["zstd"])
    check(len(huff) >= 8, "big event chunks: %d" % len(huff))
    seqs_h = [zstd_block_sequences(f) for f in huff]
    check(all(s and all(n == 0 for n in s) for s in seqs_h),
          "--fast (Huffman): blocks with sequences or not compressed: %s" % seqs_h[:4])
    seqs_z = [zstd_block_sequences(f) for f in zs]
    check(sum(1 for s in seqs_z if s and any(n for n in s)) >= len(zs) // 2,
          "--fast --level 1: few blocks with sequences: %s" % seqs_z[:4])
    s_raw = t.stats(raw)
    per = {n: os.path.getsize(p) / s_raw["events"] for n, p in ways.items()}
    t.note("bytes/event: raw %.3f, huffman %.3f, zstd %.3f"
           % (len(data) / s_raw["events"], per["huffman"], per["zstd"]))
    check(per["huffman"] < 2.0, "Huffman: %.3f bytes/event (want < 2)" % per["huffman"])
    check(per["zstd"] < per["huffman"], "zstd level 1 not smaller than Huffman alone")
    dumps = set()
    for path in (raw, ways["huffman"], ways["zstd"]):
        d = t.tool(["dump", "--json", path])
        eq(d.rc, 0, "dump " + path)
        dumps.add(d.stdout)
    eq(len(dumps), 1, "distinct event lists of raw, Huffman and zstd")
    # record itself, both ways: the events of the same program (its own count)
    for how in ("huffman", "zstd"):
        out = t.path("rec-%s.ht" % how)
        r = t.run([t.heaptrail, "record", "-q", "-o", out, "--finish=" + how, "--"] + argv,
                  env=dict(env, HEAPTRAIL_SELF_WRITE="2"))
        eq(r.rc, 0, "record --finish=%s:\n%s" % (how, r.describe()))
        s = t.stats(out)
        eq(s["calls"]["malloc"], 400000, "record --finish=%s: mallocs" % how)
        eq(s["calls"]["free"], s_raw["calls"]["free"], "record --finish=%s: frees" % how)
    r = t.run([t.heaptrail, "record", "--finish=fast", "--", "true"])
    eq(r.rc, 2, "record --finish=fast: exit status\n" + r.describe())
    eq(r.stderr.strip(), "heaptrail: error: --finish takes huffman or zstd, not 'fast'",
       "record --finish=fast: the message")
    # with no end step of that kind, --finish is refused, not ignored (probe Q)
    for other, why in (("--no-compact", "no end step: the chunks written raw stay so"),
                       ("--compact", "the end step compacts the whole trace"),
                       ("--zstd-level=0", "the end step compacts the whole trace")):
        r = t.run([t.heaptrail, "record", "--finish=zstd", other, "-o", t.path("x.ht"), "--",
                   "true"])
        eq((r.rc, r.stderr.strip()), (2, "heaptrail: error: --finish and %s contradict each "
                                         "other (%s)" % (other, why)), "--finish " + other)
