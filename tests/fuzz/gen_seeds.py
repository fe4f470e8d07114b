#!/usr/bin/env python3
"""Makes the seed corpus of the reader fuzzer (tests/fuzz/corpus/).

    gen_seeds.py OUT_DIR [REAL_TRACE...]

Three kinds of seeds, each small (a few KiB at most):

* the real traces given on the command line, copied as they are (record
  them with `heaptrail record -o NAME.ht -- PROGRAM`, see run.sh);
* damaged copies of some of them: truncated at interesting places (inside
  the header, inside a chunk header, inside a payload) and with single
  bits flipped (chunk magic, chunk sizes, a zstd frame, the index, a kind
  byte, the header version);
* synthetic traces written here from docs/FORMAT.md, for what a short real
  run does not produce: every event kind with strings and negative values,
  TICK records, continuation chunks, a chunk lost from the middle of a
  thread, merged chunks with several SYNC records, more than 64 threads
  (the reader's parking path; unclosed, to stay small), moving reallocs (split in time), a
  monotonic-clock trace, an index listing a chunk twice, format 6's short
  malloc and free records (well formed, with the invalid stack bit, and
  cut by the chunk's end).

The output is deterministic for given inputs.
"""
import os
import shutil
import struct
import sys

HEADER = struct.Struct("<8sIIQiiQQQQQQQQIIQ5Q16Q")  # 280 bytes
CHUNK = struct.Struct("<IHHIIIIQ")                  # 32 bytes
INDEX = struct.Struct("<QIIQHHI")                   # 32 bytes
CLOCK = struct.Struct("<QQQ")                       # 24 bytes
CHUNK_MAGIC = 0x4B435448
F_CLOSED, F_TSC = 0x1, 0x4
C_EVENTS, C_CLOCK, C_INDEX = 1, 2, 3
CF_SYNC, CF_ZSTD, CF_COLUMNS = 1, 2, 4

# kind -> field codes, as in src/trace/kinds.c
KINDS = {
    "sync": (0, "u"), "malloc": (1, "upU"), "free": (2, "p"), "calloc": (3, "uupU"),
    "realloc": (4, "pupUd"), "reallocarray": (5, "puupUd"), "memalign": (6, "uupU"),
    "posix_memalign": (7, "uupsU"), "aligned_alloc": (8, "uupU"), "valloc": (9, "upU"),
    "pvalloc": (10, "upU"), "mallopt": (11, "sss"), "malloc_trim": (12, "us"),
    "mmap": (13, "pussssp"), "munmap": (14, "pus"), "mremap": (15, "puusppd"),
    "brk": (16, "ps"), "sbrk": (17, "sp"), "shmget": (18, "suss"), "shmat": (19, "spsp"),
    "shmdt": (20, "ps"), "shmctl": (21, "sss"), "heap_break": (22, "p"),
    "thread_start": (23, "u"), "thread_exit": (24, ""), "thread_name": (25, "S"),
    "mark": (26, "S"), "control": (27, "u"), "fork": (28, "s"), "exec": (29, "S"),
    "tick": (30, "u"),
}


def nbytes(v):
    return (v.bit_length() + 7) // 8


def zigzag(v):
    v &= (1 << 64) - 1
    s = v - (1 << 64) if v >> 63 else v
    return ((s << 1) ^ (s >> 63)) & ((1 << 64) - 1)


class Stream:
    """Encodes one thread's records (docs/FORMAT.md, "Records")."""

    def __init__(self):
        self.buf = bytearray()
        self.last_ts = 0
        self.last_ptr = 0
        self.nev = 0

    def raw(self, kind, flags, fields, s=b""):
        tag = 0
        for i, f in enumerate(fields):
            tag |= nbytes(f) << (4 * i)
        out = bytearray([kind | flags])
        out += tag.to_bytes((len(fields) + 1) // 2, "little")
        for f in fields:
            out += f.to_bytes(8, "little")[: nbytes(f)]
        out += s
        self.buf += out

    def sync(self, seq, ts):
        self.raw(0, 0, [seq, ts])
        self.last_ts, self.last_ptr = ts, 0

    def tick(self, ticks, delta=0):
        self.raw(30, 0, [ticks, delta])
        self.last_ts += ticks + delta

    def ev(self, name, ts, *vals, flags=0, s=None):
        kind, codes = KINDS[name]
        fields, vi = [], 0
        sb = b""
        for c in codes:
            if c == "S":
                sb = (s or b"")[:255]
                fields.append(len(sb))
                continue
            v = vals[vi]
            vi += 1
            if c == "s":
                fields.append(zigzag(v))
            elif c == "p":
                fields.append(zigzag(v - self.last_ptr))
                self.last_ptr = v & ((1 << 64) - 1)
            else:
                fields.append(v & ((1 << 64) - 1))
        fields.append((ts - self.last_ts) & ((1 << 64) - 1))
        self.last_ts = ts
        self.raw(kind, flags, fields, sb)
        self.nev += 1

    def short(self, name, ptr, size=0, nonmain=False):
        """A short malloc or free record (format 6): undated, slack 0."""
        pd = zigzag(ptr - self.last_ptr)
        self.last_ptr = ptr & ((1 << 64) - 1)
        n = 0x08 if nonmain else 0
        if name == "malloc" and (nbytes(pd) > 3 or not 1 <= nbytes(size) <= 2):
            self.raw(1, n << 3, [size, pd, 0, 0])  # (no short form: undated long)
            self.nev += 1
            return
        if name == "free":
            self.buf += bytes([0x70 | n | nbytes(pd)])
        else:
            self.buf += bytes([0x60 | n | (nbytes(size) - 1) << 2 | nbytes(pd)])
            self.buf += size.to_bytes(nbytes(size), "little")
        self.buf += pd.to_bytes(8, "little")[: nbytes(pd)]
        self.nev += 1


def chunk(ctype, payload, tid=0, nev=0, seq=0, flags=0, raw_size=None):
    rs = len(payload) if raw_size is None else raw_size
    return CHUNK.pack(CHUNK_MAGIC, ctype, flags, tid, nev, len(payload), rs, seq) + payload


def trace(chunks, flags=F_CLOSED | F_TSC, cmdline=b"prog\0arg\0", exe=b"/usr/bin/prog\0",
          start_ts=1_000_000, start_mono=5_000_000_000, end=(3_000_000, 5_001_000_000),
          version=1, header_size=280, index=True, ts_hz=0, index_dup=None):
    """chunks: list of (bytes, ctype, tid, nev, seq, flags)."""
    body = bytearray()
    off0 = 280 + len(cmdline) + len(exe)
    entries = []
    for c in chunks:
        data, ctype, tid, nev, seq, cflags = c
        entries.append(INDEX.pack(off0 + len(body), tid, nev, seq, ctype, cflags, 0))
        body += data
    if index_dup is not None:
        entries.append(entries[index_dup])
    sec = [0] * 16
    sec[0], sec[1] = 280, len(cmdline)
    sec[2], sec[3] = 280 + len(cmdline), len(exe)
    sec[4], sec[5] = off0, 0
    events = sum(c[3] for c in chunks)
    tids = len({c[2] for c in chunks if c[1] == C_EVENTS})
    if flags & F_CLOSED:
        sec[5] = len(body)
        if index:
            ipay = b"".join(entries)
            sec[6], sec[7] = off0 + len(body), 32 + len(ipay)
            body += chunk(C_INDEX, ipay)
    else:
        events, tids, end = 0, 0, (0, 0)
    hdr = HEADER.pack(b"HEAPTRL\0", version, header_size, flags, 4242, 4241,
                      1_700_000_000_000_000_000, start_mono, start_ts, ts_hz, end[0], end[1],
                      events, 0, tids, 0, 0x555555554000, 0, 0, 0, 0, 0, *sec)
    return hdr + cmdline + exe + bytes(body)


def ev_chunk(st, tid, seq, flags=CF_SYNC):
    return (chunk(C_EVENTS, bytes(st.buf), tid, st.nev, seq, flags), C_EVENTS, tid, st.nev, seq,
            flags)


def clock_chunk(ts, mono, rss):
    return (chunk(C_CLOCK, CLOCK.pack(ts, mono, rss)), C_CLOCK, 0, 0, 0, 0)


def synth_all_kinds():
    st = Stream()
    t = 1_000_100
    st.sync(0, t)
    st.ev("thread_start", t, 0)
    st.ev("thread_name", t + 5, s=b"main-thread")
    st.ev("malloc", t + 10, 100, 0x5555_0000_1000, 4, flags=0)
    st.ev("calloc", t + 20, 10, 20, 0x5555_0000_2000, 8, flags=0x40)
    st.ev("realloc", t + 90, 0x5555_0000_1000, 5000, 0x5555_0000_9000, 8, 40)  # moves: split
    st.ev("realloc", t + 95, 0x5555_0000_9000, 6000, 0x5555_0000_9000, 0, 3)   # in place
    st.ev("realloc", t + 99, 0x5555_0000_9000, 0, 0, 0, 2)                      # frees
    st.ev("reallocarray", t + 120, 0, 10, 10, 0x5555_0000_3000, 4, 7)
    st.ev("reallocarray", t + 130, 0x5555_0000_3000, 1 << 62, 8, 0, 0, 0)      # overflow
    st.ev("memalign", t + 140, 64, 100, 0x5555_0000_4000, 36)
    st.ev("posix_memalign", t + 150, 64, 100, 0x5555_0000_5000, 0, 4)
    st.ev("posix_memalign", t + 151, 3, 100, 0, 22, 0)
    st.ev("aligned_alloc", t + 160, 64, 128, 0x5555_0000_6000, 40)
    st.ev("valloc", t + 170, 100, 0x5555_0000_7000, 4)
    st.ev("pvalloc", t + 180, 100, 0x5555_0000_8000, 4004, flags=0x20)
    st.ev("mallopt", t + 190, -1, 262144, 1)
    st.ev("malloc_trim", t + 200, 0, 1)
    st.ev("mmap", t + 210, 0, 1 << 20, 3, 34, -1, 0, 0x7f00_0000_0000)
    st.ev("mmap", t + 211, 0, 0, 1, 34, -1, 0, -1)
    st.ev("mremap", t + 260, 0x7f00_0000_0000, 1 << 20, 2 << 20, 1, 0, 0x7f10_0000_0000, 30)
    st.ev("munmap", t + 270, 0x7f10_0000_0000, 2 << 20, 0)
    st.ev("brk", t + 280, 0x5555_0010_0000, 0)
    st.ev("sbrk", t + 290, -4096, 0x5555_0010_0000)
    st.ev("heap_break", t + 291, 0x5555_000f_f000)
    st.tick(0x1_0000_0000)
    t = t + 291  # the TICK moved the thread's clock on from here
    st.ev("shmget", t + 0x1_0000_0000 + 10, 0, 65536, 896, 34)
    st.ev("shmat", t + 0x1_0000_0000 + 20, 34, 0, 0, 0x7f20_0000_0000)
    st.ev("shmdt", t + 0x1_0000_0000 + 30, 0x7f20_0000_0000, 0)
    st.ev("shmctl", t + 0x1_0000_0000 + 40, 34, 0, 0)
    st.ev("mark", t + 0x1_0000_0000 + 50, s=b"phase \xff\x00 two")
    st.ev("control", t + 0x1_0000_0000 + 60, 6)
    st.ev("fork", t + 0x1_0000_0000 + 70, 4243)
    st.ev("exec", t + 0x1_0000_0000 + 80, s=b"/bin/sh" + b"x" * 300)  # cut to 255
    st.ev("free", t + 0x1_0000_0000 + 90, 0x5555_0000_2000, flags=0x40)
    st.ev("free", t + 0x1_0000_0000 + 91, 0)
    st.ev("thread_exit", t + 0x1_0000_0000 + 99)
    end = (t + 0x1_0000_0000 + 1000, 5_000_000_000 + 0x1_0000_0000 // 3)  # 3 ticks/ns
    return trace([clock_chunk(t, 5_000_000_100, 1000), ev_chunk(st, 77, 0),
                  clock_chunk(end[0] - 10, end[1] - 3, 2000)], end=end)


def synth_threads(n, closed=True):
    chunks = [clock_chunk(1_000_000, 5_000_000_000, 512)]
    for i in range(n):
        st = Stream()
        t = 1_000_000 + 1000 * i
        st.sync(0, t)
        st.ev("thread_start", t, 100)
        st.ev("malloc", t + 3, 16 + i, 0x6000_0000 + 64 * i, 0)
        if i % 16 == 0:
            st.ev("thread_name", t + 4, s=b"w%d" % i)
        st.ev("free", t + 900 * n, 0x6000_0000 + 64 * ((i + 1) % n))
        chunks.append(ev_chunk(st, 1000 + i, 0))
    return trace(chunks, flags=F_CLOSED | F_TSC if closed else F_TSC,
                 end=(1_000_000 + 1000 * n * n, 5_000_000_000 + 1000 * n * n))


def synth_continuation(lose_middle=False, merged=False):
    """One thread, one buffer drained three times (SYNC chunk + two
    continuations), then a second buffer (SYNC chunk).  merged: all of it
    in one chunk (as compaction writes it)."""
    st = Stream()
    t = 2_000_000
    st.sync(0, t)
    parts = []
    for k in range(3):
        mark = len(st.buf), st.nev
        for j in range(4):
            st.ev("malloc", t + 10 * (4 * k + j) + 5, 32, 0x7000_0000 + 48 * (4 * k + j), 8)
        parts.append((mark, (len(st.buf), st.nev)))
    st2 = Stream()
    st2.sync(12, t + 500)
    st2.ev("free", t + 510, 0x7000_0000)
    st2.ev("free", t + 0x30000, 0x7000_0030)
    chunks = [clock_chunk(t, 5_000_000_000, 0)]
    if merged:
        pay = bytes(st.buf) + bytes(st2.buf)
        chunks.append((chunk(C_EVENTS, pay, 9, 14, 0, CF_SYNC), C_EVENTS, 9, 14, 0, CF_SYNC))
    else:
        for k, ((b0, e0), (b1, e1)) in enumerate(parts):
            start = 0 if k == 0 else b0
            if lose_middle and k == 1:
                continue
            pay = bytes(st.buf[start:b1])
            fl = CF_SYNC if k == 0 else 0
            chunks.append((chunk(C_EVENTS, pay, 9, e1 - e0, e0, fl), C_EVENTS, 9, e1 - e0, e0,
                           fl))
        chunks.append((chunk(C_EVENTS, bytes(st2.buf), 9, 2, 12, CF_SYNC), C_EVENTS, 9, 2, 12,
                       CF_SYNC))
    return trace(chunks, end=(t + 0x40000, 5_000_300_000))


def synth_handoff_mono():
    """Two threads handing a block over; monotonic clock (ns timestamps)."""
    a, b = Stream(), Stream()
    a.sync(0, 10_000)
    b.sync(0, 10_050)
    a.ev("malloc", 10_100, 64, 0x4000_0040, 8)
    b.ev("free", 10_200, 0x4000_0040)          # before the call
    a.ev("malloc", 10_300, 64, 0x4000_0040, 8)  # after the call: reuses it
    a.ev("realloc", 10_400, 0x4000_0040, 128, 0x4000_1000, 0, 50)
    b.ev("malloc", 10_380, 48, 0x4000_0040, 0)  # between realloc's start and end
    return trace([ev_chunk(a, 11, 0), ev_chunk(b, 12, 0), clock_chunk(10_500, 10_500, 0)],
                 flags=F_CLOSED, start_ts=10_000, start_mono=10_000, end=(20_000, 20_000))


def synth_short_records(bad=None):
    """Format 6: two threads of short mallocs and frees (1- and 2-byte
    sizes, pointer deltas of 0..3 bytes, both arenas' flag) between long
    records, the second thread's chunk a continuation.  bad: "stack" (a
    short byte with HT_F_STACK, invalid), "cut" (the last record cut)."""
    chunks = [clock_chunk(1_000_000, 5_000_000_000, 100)]
    for tid in (11, 12):
        st = Stream()
        st.sync(0, 1_000_100)
        st.ev("thread_start", 1_000_100, 0)
        base = 0x555555560000 + tid * 0x100000
        for i in range(24):
            p = base + (i % 5) * 0x40 + (0x12345 if i % 7 == 6 else 0)
            size = 16 + i * 37 % 300 if i % 3 else 2000 + i
            if i % 8 == 7:
                st.ev("malloc", 1_000_200 + i, size, p, 0, flags=0x40)
            else:
                st.short("malloc", p, size, nonmain=bool(i & 1))
            st.short("free", p, nonmain=bool(i & 1))
        st.short("free", 0)
        payload = bytes(st.buf)
        if tid == 12:
            cut = len(payload) // 2
            while cut < len(payload) and payload[cut] & 0x60 != 0x60:
                cut += 1
            # (a cut on a record boundary: the events before it counted)
            chunks.append(ev_chunk_raw(payload[:cut], tid, 0, count_events(payload[:cut])))
            chunks.append(ev_chunk_raw(payload[cut:], tid, count_events(payload[:cut]),
                                       st.nev - count_events(payload[:cut]), flags=0))
            continue
        starts = record_starts(payload)
        if bad == "stack":
            i = [o for o in starts if payload[o] & 0x60 == 0x60][len(starts) // 3]
            payload = payload[:i] + bytes([payload[i] | 0x80]) + payload[i + 1:]
        elif bad == "cut":
            # the last record, a short free, made one with 7 bytes of delta
            payload = payload[:starts[-1]] + bytes([0x77]) + payload[starts[-1] + 1:]
        chunks.append(ev_chunk_raw(payload, tid, 0, st.nev))
    return trace(chunks, version=6)


def record_starts(payload):
    """Offsets of the records synth_short_records writes: short ones, and
    long SYNC, thread_start and malloc records."""
    out, p = [], 0
    while p < len(payload):
        out.append(p)
        kb = payload[p]
        if kb & 0x60 == 0x60:
            cs, cp = (0, kb & 7) if kb & 0x10 else (((kb >> 2) & 1) + 1, kb & 3)
            p += 1 + cs + cp
            continue
        nf = len(KINDS[[k for k, v in KINDS.items() if v[0] == kb & 0x1f][0]][1]) + 1
        tb = (nf + 1) // 2
        lens = [(payload[p + 1 + i // 2] >> (4 * (i % 2))) & 15 for i in range(nf)]
        p += 1 + tb + sum(lens)
    return out


def count_events(payload):
    """Events in such a payload (SYNC records are none)."""
    return sum(1 for o in record_starts(payload) if payload[o] != 0)


def ev_chunk_raw(payload, tid, seq, nev, flags=CF_SYNC):
    return (chunk(C_EVENTS, payload, tid, nev, seq, flags), C_EVENTS, tid, nev, seq, flags)


def synth_index_dup():
    st = Stream()
    st.sync(0, 1_000_010)
    st.ev("malloc", 1_000_020, 8, 0x1000, 8)
    st.ev("free", 1_000_030, 0x1000)
    return trace([ev_chunk(st, 5, 0)], index_dup=0)


def flip(data, off, bit):
    b = bytearray(data)
    if 0 <= off < len(b):
        b[off] ^= 1 << bit
    return bytes(b)


def raw_columns(data):
    """The trace with its first column-coded chunk stored without zstd, so
    that mutations reach the column decoder; no index (the reader scans).
    Needs the zstd tool."""
    import subprocess
    h = list(HEADER.unpack_from(data, 0))
    out = bytearray(data[: h[22 + 4]])
    done = False
    for off, t, f, cs in chunk_offsets(data):
        hdr = list(CHUNK.unpack_from(data, off))
        payload = data[off + 32: off + 32 + cs]
        if t == C_INDEX:
            continue
        if not done and t == C_EVENTS and f & CF_COLUMNS:
            if f & CF_ZSTD:
                payload = subprocess.run(["zstd", "-d", "-c", "-q"], input=payload,
                                         stdout=subprocess.PIPE, check=True).stdout
            hdr[2] = f & ~CF_ZSTD
            hdr[5] = hdr[6] = len(payload)
            done = True
        out += CHUNK.pack(*hdr) + payload
    h[3] &= ~F_CLOSED
    h[22 + 5] = 0
    h[22 + 6] = h[22 + 7] = 0
    out[: HEADER.size] = HEADER.pack(*h)
    return bytes(out)


def chunk_offsets(data):
    h = HEADER.unpack_from(data, 0)
    off = h[22 + 4]
    out = []
    while off + 32 <= len(data):
        m, t, f, tid, nev, cs, rs, seq = CHUNK.unpack_from(data, off)
        if m != CHUNK_MAGIC:
            break
        out.append((off, t, f, cs))
        off += 32 + cs
    return out


def damaged(name, data):
    """Truncated and bit-flipped variants of one real trace."""
    out = {}
    chunks = chunk_offsets(data)
    out["trunc-header"] = data[:200]
    ev = [c for c in chunks if c[1] == C_EVENTS]
    if ev:
        off, _, fl, cs = ev[0]
        out["trunc-chunkhdr"] = data[: off + 20]
        out["trunc-payload"] = data[: off + 32 + cs // 2]
        out["flip-chunkmagic"] = flip(data, off, 3)
        out["flip-compsize"] = flip(data, off + 16, 6)
        out["flip-rawsize"] = flip(data, off + 20, 1)
        out["flip-tid"] = flip(data, off + 8, 0)
        out["flip-seq"] = flip(data, off + 24, 0)
        out["flip-payload-end"] = flip(data, off + 32 + cs - 2, 4)
        out["flip-kindbyte"] = flip(data, off + 32 + (7 if fl & CF_ZSTD else 0) + 11, 4)
    idx = [c for c in chunks if c[1] == C_INDEX]
    if idx:
        out["flip-index"] = flip(data, idx[-1][0] + 32 + 3, 2)
    out["flip-version"] = flip(data, 9, 0)
    return {"%s-%s" % (name, k): v for k, v in out.items()}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    seeds = {
        "synth-all-kinds.ht": synth_all_kinds(),
        "synth-12-threads.ht": synth_threads(12),
        "synth-65-threads-unclosed.ht": synth_threads(65, closed=False),
        "synth-continuation.ht": synth_continuation(),
        "synth-lost-chunk.ht": synth_continuation(lose_middle=True),
        "synth-merged.ht": synth_continuation(merged=True),
        "synth-handoff-mono.ht": synth_handoff_mono(),
        "synth-index-dup.ht": synth_index_dup(),
        "synth-v6-short.ht": synth_short_records(),
        "synth-v6-short-stackbit.ht": synth_short_records("stack"),
        "synth-v6-short-cut.ht": synth_short_records("cut"),
    }
    for path in sys.argv[2:]:
        base = os.path.basename(path)
        with open(path, "rb") as f:
            data = f.read()
        seeds["real-" + base] = data
        if base.startswith(("api_all_nocompact", "api_all.", "threads.", "execfail",
                            "v3-api_all.", "v4-leaky.")):
            for k, v in damaged(base.replace(".ht", ""), data).items():
                seeds[k + ".ht"] = v
        if base.startswith(("v3-", "v4-", "v5-")):
            seeds["rawcols-" + base] = raw_columns(data)
    for name, data in sorted(seeds.items()):
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)
        if len(data) > 4096:
            print("warning: %s is %d bytes" % (name, len(data)), file=sys.stderr)
    print("%d seeds in %s" % (len(seeds), outdir))


if __name__ == "__main__":
    main()
