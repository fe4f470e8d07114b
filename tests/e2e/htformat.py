"""An independent decoder of the heaptrail trace format (src/trace/format.h).

It exists so that the tests can cross-check the C reader: it is written
from the description in format.h (the reader was consulted only where the
prose left a detail open), and is deliberately simple: no index, no
merging by time beyond a sort.  Keep it in step with format.h.
Compressed chunks are decompressed with the zstd command-line tool when it
is installed; traces recorded with HEAPTRAIL_ZSTD_LEVEL=0 need nothing.
"""

import shutil
import struct
import subprocess

MAGIC = b"HEAPTRL\0"
HEADER = struct.Struct("<8sIIQiiQQQQQQQQIIQ5Q16Q")
CHUNK = struct.Struct("<IHHIIIIQ")
CHUNK_MAGIC = 0x4B435448
CHUNK_EVENTS, CHUNK_CLOCK, CHUNK_INDEX = 1, 2, 3
F_SYNC, F_ZSTD = 1, 2
FILE_F_CLOSED = 1
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
]
TICK = 30
KIND_NAMES = [k[0] for k in KINDS]
MASK64 = (1 << 64) - 1


class FormatError(Exception):
    pass


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
        raw = _decompress([c[7] for c in chunks if c[2] & F_ZSTD])
        it = iter(raw)
        state = {}
        for pos, ctype, cflags, tid, nev, rsize, seq, payload in chunks:
            if cflags & F_ZSTD:
                payload = next(it)
            if len(payload) != rsize:
                self.error = "offset %d: payload size %d, header says %d" % (
                    pos, len(payload), rsize)
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
            if kind >= len(KINDS):
                raise FormatError("unknown kind %d" % kind)
            name, fields, result = KINDS[kind]
            nf = len(fields)
            tb = (nf + 2) // 2
            if pos + tb > len(buf):
                raise FormatError("truncated record tag")
            tag = int.from_bytes(buf[pos:pos + tb], "little")
            pos += tb
            f = []
            for i in range(nf + 1):
                ln = (tag >> (4 * i)) & 15
                if ln > 8 or pos + ln > len(buf):
                    raise FormatError("bad or truncated field")
                f.append(int.from_bytes(buf[pos:pos + ln], "little"))
                pos += ln
            # format 2: a timestamp field of 0 means "not taken" (the event
            # keeps the thread's previous timestamp), else delta + 1
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
