"""An independent decoder of the heaptrail trace format (src/trace/format.h).

It exists so that the tests can cross-check the C reader: it is written
from the description in format.h (the reader was consulted only where the
prose left a detail open), and is deliberately simple: no index, no
merging by time beyond a sort.  Keep it in step with format.h.
Compressed chunks are decompressed with the zstd command-line tool when it
is installed; stored frames (what a writer with no CPU to compress, or
HEAPTRAIL_ZSTD_LEVEL=0, writes: F_STORED) are taken apart here, their
content checksum checked with the XXH64 below, so they need nothing.
"""

import shutil
import struct
import subprocess

MAGIC = b"HEAPTRL\0"
VERSION = 6  # what the recorder writes (src/trace/format.h HT_VERSION)
HEADER = struct.Struct("<8sIIQiiQQQQQQQQIIQ5Q16Q")  # (the 5Q: sample_every+signal, writer_cpu_ns, reserved[3])
CHUNK = struct.Struct("<IHHIIIIQ")
CHUNK_MAGIC = 0x4B435448
CHUNK_EVENTS, CHUNK_CLOCK, CHUNK_INDEX = 1, 2, 3
F_SYNC, F_ZSTD, F_COLUMNS, F_STORED = 1, 2, 4, 8
FILE_F_CLOSED = 1
FILE_F_ORDERED = 0x80
FILE_F_FORK_CHILD = 0x100
SEC_CMDLINE, SEC_EXE, SEC_CHUNKS, SEC_INDEX = 0, 1, 2, 3

# name, field codes, index of the result field (-1 none): as in kinds.c
KINDS = [
    ("sync", "u", -1),
    ("malloc", "upU", 1),
    ("free", "p", -1),
    ("calloc", "uupU", 2),
    ("realloc", "pupUd", 2),
    ("reallocarray", "puupUd", 3),
    ("memalign", "uupU", 2),
    ("posix_memalign", "uupsU", 2),
    ("aligned_alloc", "uupU", 2),
    ("valloc", "upU", 1),
    ("pvalloc", "upU", 1),
    ("mallopt", "sss", 2),
    ("malloc_trim", "us", 1),
    ("mmap", "pussssp", 6),
    ("munmap", "pus", 2),
    ("mremap", "puusppd", 5),
    ("brk", "ps", 1),
    ("sbrk", "sp", 1),
    ("shmget", "suss", 3),
    ("shmat", "spsp", 3),
    ("shmdt", "ps", 1),
    ("shmctl", "sss", 2),
    ("heap_break", "p", -1),
    ("thread_start", "u", -1),
    ("thread_exit", "", -1),
    ("thread_name", "S", -1),
    ("mark", "S", -1),
    ("control", "u", -1),
    ("fork", "s", -1),
    ("exec", "S", -1),
    ("tick", "u", -1),
    ("ext", "", -1),          # 31: an escape (format 4): the kind is 32 + the next byte
    ("frame", "uuu", -1),     # 32: stack node id, parent, return address
    ("module", "uuuS", -1),   # 33: base, lo, hi, path
    ("build_id", "uS", -1),   # 34: base, id bytes
    ("module_gone", "u", -1), # 35: base
    ("duration", "u", -1),    # 36 (format 5): ticks the thread's next call took
]
EXT = 31
F_STACK = 0x80
TICK = 30
KIND_NAMES = [k[0] for k in KINDS]
MASK64 = (1 << 64) - 1


class FormatError(Exception):
    pass


def xxh64(data, seed=0):
    """XXH64 (xxhash.com's doc/xxhash_spec.md), for stored frames' checksums."""
    P1, P2, P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
    P4, P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5

    def rotl(x, r):
        return ((x << r) | (x >> (64 - r))) & MASK64

    def rnd(acc, v):
        return (rotl((acc + v * P2) & MASK64, 31) * P1) & MASK64

    n, p = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & MASK64, (seed + P2) & MASK64, seed, (seed - P1) & MASK64]
        while p + 32 <= n:
            for i in range(4):
                v[i] = rnd(v[i], struct.unpack_from("<Q", data, p + 8 * i)[0])
            p += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & MASK64
        for x in v:
            h = ((h ^ rnd(0, x)) * P1 + P4) & MASK64
    else:
        h = (seed + P5) & MASK64
    h = (h + n) & MASK64
    while p + 8 <= n:
        h = (rotl(h ^ rnd(0, struct.unpack_from("<Q", data, p)[0]), 27) * P1 + P4) & MASK64
        p += 8
    if p + 4 <= n:
        h = (rotl(h ^ (struct.unpack_from("<I", data, p)[0] * P1 & MASK64), 23) * P2 + P3) & MASK64
        p += 4
    while p < n:
        h = (rotl(h ^ (data[p] * P5 & MASK64), 11) * P1) & MASK64
        p += 1
    h ^= h >> 33
    h = (h * P2) & MASK64
    h ^= h >> 29
    h = (h * P3) & MASK64
    return h ^ (h >> 32)


def unstore(frame):
    """The content of a stored zstd frame (raw blocks, content checksum)."""
    if len(frame) < 13 or struct.unpack_from("<I", frame, 0)[0] != 0xFD2FB528 or frame[4] != 0xA4:
        raise FormatError("not a stored frame")
    size = struct.unpack_from("<I", frame, 5)[0]
    out, p = bytearray(), 9
    while True:
        if p + 3 > len(frame):
            raise FormatError("stored frame cut")
        bh = frame[p] | frame[p + 1] << 8 | frame[p + 2] << 16
        if (bh >> 1) & 3:
            raise FormatError("stored frame with a block that is not raw")
        bsize = bh >> 3
        out += frame[p + 3:p + 3 + bsize]
        p += 3 + bsize
        if bh & 1:
            break
    if len(out) != size or p + 4 != len(frame):
        raise FormatError("stored frame sizes")
    if struct.unpack_from("<I", frame, p)[0] != xxh64(bytes(out)) & 0xFFFFFFFF:
        raise FormatError("stored frame checksum")
    return bytes(out)


class Event:
    __slots__ = ("kind", "flags", "tid", "seq", "ts", "vals", "str")

    def __init__(self, kind, flags, tid, seq, ts, vals, s):
        self.kind = kind
        self.flags = flags
        self.tid = tid
        self.seq = seq
        self.ts = ts
        self.vals = vals
        self.str = s

    @property
    def name(self):
        return KIND_NAMES[self.kind]

    def __repr__(self):
        return "Event(%s tid=%d seq=%d ts=%d %r %r)" % (
            self.name, self.tid, self.seq, self.ts, self.vals, self.str)


def _unzigzag(v):
    return (v >> 1) ^ -(v & 1)


class Trace:
    """A whole trace read into memory: header fields, events, errors."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            data = f.read()
        if len(data) < HEADER.size:
            raise FormatError("%s: shorter than a header" % path)
        h = HEADER.unpack_from(data, 0)
        if h[0] != MAGIC:
            raise FormatError("%s: bad magic" % path)
        (self.version, self.header_size, self.flags, self.pid, self.ppid,
         self.start_realtime_ns, self.start_mono_ns, self.start_ts,
         self.ts_hz, self.end_ts, self.end_mono_ns, self.events_hdr,
         self.dropped, self.nthreads, self.sample_bytes, self.start_brk) = h[1:17]
        sec = h[22:38]
        self.sections = [(sec[2 * i], sec[2 * i + 1]) for i in range(8)]
        self.closed = bool(self.flags & FILE_F_CLOSED)
        off, size = self.sections[SEC_CMDLINE]
        self.argv = [a.decode("utf-8", "replace")
                     for a in data[off:off + size].split(b"\0") if a]
        self.error = None
        self.events = []
        self.clock = []
        self._read_chunks(data)

    def _read_chunks(self, data):
        pos = self.sections[SEC_CHUNKS][0]
        chunks = []
        while pos < len(data):
            if pos + CHUNK.size > len(data):
                self.error = "offset %d: truncated chunk header" % pos
                break
            magic, ctype, cflags, tid, nev, csize, rsize, seq = CHUNK.unpack_from(data, pos)
            if magic != CHUNK_MAGIC:
                self.error = "offset %d: bad chunk magic" % pos
                break
            if pos + CHUNK.size + csize > len(data):
                self.error = "offset %d: truncated chunk" % pos
                break
            payload = data[pos + CHUNK.size:pos + CHUNK.size + csize]
            chunks.append((pos, ctype, cflags, tid, nev, rsize, seq, payload))
            pos += CHUNK.size + csize
        raw = _decompress([c[7] for c in chunks if c[2] & F_ZSTD and not c[2] & F_STORED])
        it = iter(raw)
        state = {}
        for pos, ctype, cflags, tid, nev, rsize, seq, payload in chunks:
            if cflags & F_STORED:
                try:
                    payload = unstore(payload)
                except FormatError as e:
                    self.error = "offset %d: %s" % (pos, e)
                    return
            elif cflags & F_ZSTD:
                payload = next(it)
            if len(payload) != rsize:
                self.error = "offset %d: payload size %d, header says %d" % (
                    pos, len(payload), rsize)
                return
            if ctype == CHUNK_EVENTS and cflags & F_COLUMNS:
                try:
                    payload = columns_to_records(payload, self.version)
                except FormatError as e:
                    self.error = "offset %d: %s" % (pos, e)
                    return
            if ctype == CHUNK_CLOCK:
                self.clock.append(struct.unpack_from("<QQQ", payload, 0))
            elif ctype == CHUNK_EVENTS:
                try:
                    got = self._decode(payload, cflags, tid, seq, state)
                except FormatError as e:
                    self.error = "offset %d: %s" % (pos, e)
                    return
                if got != nev:
                    self.error = "offset %d: %d events, header says %d" % (pos, got, nev)
                    return
        self.events.sort(key=lambda e: (e.ts, e.tid, e.seq))

    def _decode(self, buf, cflags, tid, first_seq, state):
        if cflags & F_SYNC:
            st = state[tid] = [0, 0, first_seq]  # last_ts, last_ptr, seq
        else:
            st = state.get(tid)
            if st is None:
                raise FormatError("continuation chunk of thread %d without a start" % tid)
            if st[2] != first_seq:
                raise FormatError("thread %d: sequence %d, expected %d" % (tid, first_seq, st[2]))
        pos = 0
        n = 0
        while pos < len(buf):
            kb = buf[pos]
            pos += 1
            kind = kb & 0x1F
            if self.version >= 6 and kb & 0x60 == 0x60:
                # a short record (format 6): malloc or free in one byte,
                # then its values; undated, slack 0, no stack
                if kb & F_STACK:
                    raise FormatError("unknown kind byte 0x%02x" % kb)
                flags = (kb & 0x08) << 3
                cs, cp = (0, kb & 7) if kb & 0x10 else (((kb >> 2) & 1) + 1, kb & 3)
                if pos + cs + cp > len(buf):
                    raise FormatError("bad or truncated field")
                size = int.from_bytes(buf[pos:pos + cs], "little")
                p = (st[1] + _unzigzag(int.from_bytes(buf[pos + cs:pos + cs + cp], "little"))) & MASK64
                pos += cs + cp
                st[1] = p
                kind, vals = (2, [p]) if kb & 0x10 else (1, [size, p, 0])
                self.events.append(Event(kind, flags, tid, st[2], st[0], vals, None))
                st[2] += 1
                n += 1
                continue
            if kind == EXT:
                if pos >= len(buf):
                    raise FormatError("truncated record")
                kind = 32 + buf[pos]
                pos += 1
            if kind >= len(KINDS):
                raise FormatError("unknown kind %d" % kind)
            name, fields, result = KINDS[kind]
            nf = len(fields)
            nvals = nf + 1 + (1 if kb & F_STACK else 0)  # fields, timestamp, stack
            tb = (nvals + 1) // 2
            if pos + tb > len(buf):
                raise FormatError("truncated record tag")
            tag = int.from_bytes(buf[pos:pos + tb], "little")
            pos += tb
            f = []
            for i in range(nvals):
                ln = (tag >> (4 * i)) & 15
                if ln > 8 or pos + ln > len(buf):
                    raise FormatError("bad or truncated field")
                f.append(int.from_bytes(buf[pos:pos + ln], "little"))
                pos += ln
            # format 2: a timestamp field of 0 means "not taken" (the event
            # keeps the thread's previous timestamp), else delta + 1
            if kind >= 32:
                # pseudo-records (stacks, modules): not events; skip their strings
                for c in fields:
                    if c == "S":
                        pos += f[fields.index(c)]
                continue
            dt = f[nf] - 1 if self.version >= 2 and f[nf] else f[nf]
            if kind == TICK:
                st[0] = (st[0] + f[0] + dt) & MASK64
                continue
            if kind == 0:
                if f[0] != st[2]:
                    raise FormatError("sync sequence %d, expected %d" % (f[0], st[2]))
                st[0], st[1] = f[1], 0
                continue
            st[0] = (st[0] + dt) & MASK64
            vals = []
            s = None
            for i, c in enumerate(fields):
                v = f[i]
                if c == "s":
                    vals.append(_unzigzag(v))
                elif c == "p":
                    p = (st[1] + _unzigzag(v)) & MASK64
                    st[1] = p
                    vals.append(p)
                elif c == "S":
                    if pos + v > len(buf):
                        raise FormatError("string runs past the end of the chunk")
                    s = buf[pos:pos + v].decode("utf-8", "replace")
                    pos += v
                else:
                    vals.append(v)
            self.events.append(Event(kind, kb & 0xE0, tid, st[2], st[0], vals, s))
            st[2] += 1
            n += 1
        return n

    def count(self, name):
        return sum(1 for e in self.events if e.name == name)


def chunk_headers(data, start):
    """(offset, header tuple) of every chunk of the file's bytes from start,
    up to the end or the first bad chunk magic."""
    out = []
    pos = start
    while pos + CHUNK.size <= len(data):
        h = CHUNK.unpack_from(data, pos)
        if h[0] != CHUNK_MAGIC:
            break
        out.append((pos, h))
        pos += CHUNK.size + h[5]
    return out


# ---- column-coded chunks (format 3, docs/FORMAT.md "Column coding") ----
COL_HEADER = struct.Struct("<III7I")
COL_MAGIC = 0x4C4F4348
COL_MRU = 4
ALLOC_KINDS = {1, 3, 4, 5, 6, 7, 8, 9, 10}


def _request(kind, f):
    """Requested bytes of an allocation record from its raw fields."""
    if kind in (1, 9, 10):
        return f[0]
    if kind == 3:
        return (f[0] * f[1]) & MASK64
    if kind == 5:
        return (f[1] * f[2]) & MASK64
    return f[1]


def _usable(version, kb, req, slack):
    if version < 2 or kb & 0x20:
        return (req + slack) & MASK64
    c = (req + 8 + 15) & ~15 & MASK64
    return (max(c, 32) - 8 + _unzigzag(slack)) & MASK64


def _zigzag(v):
    v = (v + (1 << 63)) % (1 << 64) - (1 << 63)  # as int64
    return ((v << 1) ^ (v >> 63)) & MASK64


def _leb(col):
    data, pos = col
    v = shift = 0
    while True:
        if pos[0] >= len(data) or shift > 63:
            raise FormatError("column ends early")
        b = data[pos[0]]
        pos[0] += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v & MASK64


def _field_bytes(v):
    return v.to_bytes((v.bit_length() + 7) // 8, "little")


def columns_to_records(payload, version):
    """Turns a column-coded payload back into the recorder's records."""
    if len(payload) < COL_HEADER.size:
        raise FormatError("column header truncated")
    h = COL_HEADER.unpack_from(payload, 0)
    if h[0] != COL_MAGIC:
        raise FormatError("bad column magic")
    rec_bytes, nrec, lens = h[1], h[2], h[3:]
    cols, pos = [], COL_HEADER.size
    for n in lens:
        cols.append((payload[pos:pos + n], [0]))
        pos += n
    if pos != len(payload):
        raise FormatError("column lengths do not add up")
    kinds, uints, ptrs, times, slacks, others, strs = cols
    live, lifo, mru, last_ptr = {}, {}, [0] * COL_MRU, 0
    out = bytearray()
    for _ in range(nrec):
        if kinds[1][0] >= len(kinds[0]):
            raise FormatError("kind column ends early")
        kb = kinds[0][kinds[1][0]]
        kinds[1][0] += 1
        kind = kb & 0x1F
        if kind == EXT:
            if kinds[1][0] >= len(kinds[0]):
                raise FormatError("kind column ends early")
            kind = 32 + kinds[0][kinds[1][0]]
            kinds[1][0] += 1
        if kind >= len(KINDS):
            raise FormatError("unknown kind %d" % kind)
        fields, result = KINDS[kind][1], KINDS[kind][2]
        f = [0] * (len(fields) + 1)
        s = b""
        for i, c in enumerate(fields):
            if c == "p":
                continue
            f[i] = _leb({"u": uints, "U": slacks}.get(c, others))
            if c == "S":
                s = strs[0][strs[1][0]:strs[1][0] + f[i]]
                strs[1][0] += f[i]
        f[len(fields)] = _leb(times)
        if kb & F_STACK:
            f.append(_leb(others))
        is_alloc = kind in ALLOC_KINDS
        usable = 0
        if is_alloc:
            usable = _usable(version, kb, _request(kind, f), f[fields.index("U")])
        vals = list(f)
        for i, c in enumerate(fields):
            if c != "p":
                continue
            code = _leb(ptrs)
            res = is_alloc and i == result
            if res and code == 0:
                stack = lifo.get(usable)
                if not stack:
                    raise FormatError("pointer code names an empty LIFO")
                v = stack.pop()
            elif not res and code < COL_MRU:
                v = mru[code]
                if not v:
                    raise FormatError("pointer code names an empty MRU slot")
            else:
                v = (last_ptr + _unzigzag(code - (1 if res else COL_MRU))) & MASK64
            f[i] = _zigzag(v - last_ptr)
            last_ptr = vals[i] = v
            if res and v:
                live[v] = usable
                if mru[0] != v:
                    mru = [v] + mru[:-1]
        if kind == 0:
            last_ptr = 0
        freed = None
        if kind == 2:
            freed = vals[0]
        elif kind in (4, 5):
            old, new = vals[0], vals[result]
            size = vals[1] if kind == 4 else vals[1] * vals[2]
            if old and new != old and (new or size == 0):
                freed = old
        if freed in live:
            lifo.setdefault(live.pop(freed), []).append(freed)
        # back to the recorder's layout: a short record where format 6
        # has one (no stack, not mmapped, undated, slack 0)
        short = version >= 6 and not kb & (F_STACK | 0x20) and kind in (1, 2) and f[-1] == 0
        if short and kind == 1 and f[2] == 0 and 1 <= len(_field_bytes(f[0])) <= 2 \
                and len(_field_bytes(f[1])) <= 3:
            a, b = _field_bytes(f[0]), _field_bytes(f[1])
            out.append(0x60 | (kb & 0x40) >> 3 | (len(a) - 1) << 2 | len(b))
            out += a + b
            continue
        if short and kind == 2 and len(_field_bytes(f[0])) <= 7:
            b = _field_bytes(f[0])
            out.append(0x70 | (kb & 0x40) >> 3 | len(b))
            out += b
            continue
        tag = 0
        body = bytearray()
        for i, v in enumerate(f):
            b = _field_bytes(v)
            tag |= len(b) << (4 * i)
            body += b
        out.append(kb)
        if kind >= 32:
            out.append(kind - 32)
        out += tag.to_bytes((len(f) + 1) // 2, "little")
        out += body + s
    if len(out) != rec_bytes or any(c[1][0] != len(c[0]) for c in cols):
        raise FormatError("columns do not decode to %d bytes" % rec_bytes)
    return bytes(out)


def _decompress(frames):
    if not frames:
        return []
    zstd = shutil.which("zstd")
    if not zstd:
        raise FormatError("compressed chunks and no zstd tool to read them")
    out = subprocess.run([zstd, "-d", "-c", "-q"], input=b"".join(frames),
                         stdout=subprocess.PIPE, check=True).stdout
    # zstd frames record their content size; split the output by frame.
    res = []
    pos = 0
    for fr in frames:
        size = _frame_content_size(fr)
        res.append(out[pos:pos + size])
        pos += size
    return res


def _frame_content_size(fr):
    # RFC 8878 frame header: magic, descriptor, [window], [dict id], [fcs]
    if len(fr) < 5 or fr[:4] != b"\x28\xb5\x2f\xfd":
        raise FormatError("not a zstd frame")
    fhd = fr[4]
    fcs_flag = fhd >> 6
    single = (fhd >> 5) & 1
    did_flag = fhd & 3
    pos = 5 + (0 if single else 1) + [0, 1, 2, 4][did_flag]
    n = [1 if single else 0, 2, 4, 8][fcs_flag]
    if n == 0:
        raise FormatError("zstd frame without a content size")
    v = int.from_bytes(fr[pos:pos + n], "little")
    return v + 256 if n == 2 else v


if __name__ == "__main__":
    import sys
    t = Trace(sys.argv[1])
    print("pid %d closed %s events %d/%d error %s argv %s" % (
        t.pid, t.closed, len(t.events), t.events_hdr, t.error, t.argv))
    for e in t.events:
        print(e.ts, e.tid, e.seq, e.name, " ".join(
            hex(v) if f == "p" else str(v) for v, f in zip(e.vals, KINDS[e.kind][1].replace("S", ""))),
            e.str or "")
