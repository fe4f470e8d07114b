"""Chunks the writer could not compress (no CPU free for it, or
--zstd-level=0) are stored zstd frames: the records as they are, behind
zstd's content checksum (src/common/zstored.h).  As bare records they had
nothing to check them by, and one flipped bit changed the figures with no
word (a malloc more, 10.7 MiB live at exit for 5.2)."""

import random

import htformat
from htlib import case, check, eq

CHUNK_SIZE = htformat.CHUNK.size


def stored_trace(t, name):
    """A trace of 3 threads written with --zstd-level=0 --no-compact, its
    bytes and the (offset, header) of its stored event chunks."""
    out = t.path(name)
    t.run([t.heaptrail, "record", "-q", "--zstd-level=0", "--no-compact", "-o", out, "--",
           t.prog("threads"), "3", "20000"], check_rc=0)
    with open(out, "rb") as f:
        data = f.read()
    tr = htformat.Trace(out)
    eq(tr.error, None, "the Python decoder on the trace (its checksums)")
    chunks = [(off, h) for off, h in htformat.chunk_headers(data, tr.sections[htformat.SEC_CHUNKS][0])
              if h[1] == htformat.CHUNK_EVENTS and h[6] > 1000]
    check(chunks and all(h[2] & htformat.F_STORED and h[2] & htformat.F_ZSTD for _, h in chunks),
          "event chunks that are not stored frames: %r" % [h[2] for _, h in chunks])
    return out, data, chunks


def flipped(t, data, name, pos, bit):
    path = t.path(name)
    b = bytearray(data)
    b[pos] ^= 1 << bit
    with open(path, "wb") as f:
        f.write(b)
    return path


@case(labels=("analyzers",))
def test_stored_chunk_flip_detected(t):
    """Twelve single-bit flips, each in the records of a stored chunk: the
    reader says every one ("does not decompress (Restored data doesn't
    match checksum): the trace is corrupt here"), exit 1, where bare
    records let 4 of 16 flips change the figures silently."""
    out, data, chunks = stored_trace(t, "st.ht")
    rng = random.Random(11)
    for i in range(12):
        off, h = rng.choice(chunks)
        pos = off + CHUNK_SIZE + 12 + rng.randrange(h[6])  # (after the frame's and block's headers)
        path = flipped(t, data, "f%d.ht" % i, pos, rng.randrange(8))
        r = t.tool(["stats", "-q", path])
        eq(r.rc, 1, "flip %d at %d: exit status\n%s" % (i, pos, r.describe()))
        check("offset %d: chunk of thread %d does not decompress (Restored data doesn't match "
              "checksum)" % (off, h[3]) in r.stderr, "flip %d: %s" % (i, r.stderr))


@case(labels=("analyzers",))
def test_finish_stored_damaged(t):
    """`compact --fast` (record's end step) compresses every stored chunk
    but one whose checksum fails, which it copies as it is and names
    ("1 damaged chunk, the first of thread T"); readers stop that thread
    there, as before.  (It said nothing and counted every event.)"""
    out, data, chunks = stored_trace(t, "st.ht")
    off, h = chunks[len(chunks) // 2]
    path = flipped(t, data, "bad.ht", off + CHUNK_SIZE + 12 + h[6] // 2, 3)
    before = t.tool(["stats", "--json", path])
    eq(before.rc, 1, "stats before:\n" + before.describe())
    r = t.tool(["compact", "--fast", path])
    eq(r.rc, 0, "compact --fast:\n" + r.describe())
    check("(1 damaged chunk, the first of thread %d, copied as it is" % h[3] in r.stderr,
          "compact --fast: " + r.stderr)
    after = t.tool(["stats", "--json", path])
    eq((after.rc, after.stdout), (1, before.stdout), "stats after compact --fast")
    with open(path, "rb") as f:
        now = f.read()
    tr = htformat.Trace(out)
    left = [h2 for _, h2 in htformat.chunk_headers(now, tr.sections[htformat.SEC_CHUNKS][0])
            if h2[1] == htformat.CHUNK_EVENTS and h2[2] & htformat.F_STORED and h2[6] > 1000]
    eq([(x[3], x[7]) for x in left], [(h[3], h[7])], "stored chunks left: the damaged one")
    # an undamaged copy: none left, the same events
    whole = t.path("whole.ht")
    with open(whole, "wb") as f:
        f.write(data)
    eq(t.tool(["compact", "--fast", "-q", whole]).rc, 0, "compact --fast of the whole trace")
    eq(htformat.Trace(whole).error, None, "the Python decoder after compact --fast")
    eq(t.stats(whole)["calls"], t.stats(out)["calls"], "calls after compact --fast")
