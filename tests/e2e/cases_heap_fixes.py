"""`heaptrail heap` on what a realloc does to glibc's heap, and the
thresholds a window starts from: a heap that glibc adds to an arena for a
realloc made in another thread is that arena's (it was given to the
thread's arena), realloc(p, 0) of an mmapped block moves the dynamic
mmap threshold as free does (it changed nothing), and `--from` starts
from the thresholds set before the window (it said glibc's defaults).
Each against what the program saw of glibc itself: the chunk headers and
the heap_info at the start of each heap."""

import re

from cases_heap import heap_json, record
from htlib import case, check, compile_c, eq


def heap_text(t, path, *args):
    r = t.tool(["heap"] + list(args) + [path])
    eq(r.rc, 0, "heap:\n" + r.describe())
    return r.stdout


# Thread A allocates 40 blocks of 1 MiB in its arena and stays alive; thread
# B, in an arena of its own, reallocs each to 3 MiB.  glibc's realloc works
# in the block's arena (arena_for_chunk), so A's arena grows, by a second
# heap once its first is full.  Every block says the heap it lies in and
# the first heap of that heap's arena: ar_ptr, the first word of the
# heap_info at the heap's start, points into the arena's first heap.
# stdout is unbuffered so that no buffer is allocated in either arena.
REALLOC_ARENA_C = r"""
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define HEAP_MAX (64UL << 20) /* glibc's HEAP_MAX_SIZE on 64-bit */
#define N 40

static void *blk[N];
static pthread_barrier_t made, done;

static void say(const char *who, void *p)
{
	size_t head = ((size_t *)p)[-1];
	if (head & 2) {
		printf("%s: mmapped\n", who);
		return;
	}
	if (!(head & 4)) {
		printf("%s: main\n", who);
		return;
	}
	uintptr_t base = (uintptr_t)p & ~(HEAP_MAX - 1);
	uintptr_t ar_ptr = *(uintptr_t *)base;
	printf("%s: heap %lu arena %lu\n", who, (unsigned long)base,
	       (unsigned long)(ar_ptr & ~(HEAP_MAX - 1)));
}

static void *a_main(void *arg)
{
	for (int i = 0; i < N; i++)
		blk[i] = malloc(1 << 20);
	for (int i = 0; i < N; i++)
		say("a", blk[i]);
	pthread_barrier_wait(&made);
	pthread_barrier_wait(&done); /* alive: no other thread gets its arena */
	return arg;
}

static void *b_main(void *arg)
{
	void *mine = malloc(100);
	say("b", mine);
	for (int i = 0; i < N; i++) {
		blk[i] = realloc(blk[i], 3 << 20);
		say("realloc", blk[i]);
	}
	for (int i = 0; i < N; i++)
		free(blk[i]);
	free(mine);
	return arg;
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	mallopt(M_MMAP_THRESHOLD, 8 << 20); /* 1 and 3 MiB blocks in the heaps */
	pthread_barrier_init(&made, NULL, 2);
	pthread_barrier_init(&done, NULL, 2);
	pthread_t a, b;
	pthread_create(&a, NULL, a_main, NULL);
	pthread_barrier_wait(&made);
	pthread_create(&b, NULL, b_main, NULL);
	pthread_join(b, NULL);
	pthread_barrier_wait(&done);
	pthread_join(a, NULL);
	return 0;
}
"""


@case(timeout=120, labels=("analyzers",))
def test_heap_realloc_new_heap_arena(t):
    """A heap glibc adds for a realloc in thread B of a block of thread A's
    arena is A's arena's, as glibc's heap_info says (ar_ptr), and A's
    arena has both heaps.  (A moving realloc arrives in two parts; the
    second no longer found the old block, so its arena was lost and the
    new heap went to B's arena: "arena 2 ... 2 heaps".)"""
    exe = compile_c(t, "reallocarena", REALLOC_ARENA_C, ("-pthread",))
    out, r = record(t, "reallocarena", [exe])
    lines = re.findall(r"^(\w+): (?:heap (\d+) arena (\d+)|(\w+))$", r.stdout, re.M)
    eq(len(lines), 40 + 1 + 40, "blocks the program described:\n" + r.stdout)
    truth = {}  # heap base -> base of the first heap of its arena (glibc's)
    for who, base, arena, other in lines:
        eq(other, "", "%s's block lies in a heap of another arena (the premise)" % who)
        truth[int(base)] = int(arena)
    a_first = {int(a) for w, _, a, _ in lines if w == "a"}
    b_first = {int(a) for w, _, a, _ in lines if w == "b"}
    eq(len(a_first), 1, "A's blocks: one arena")
    eq(len(b_first), 1, "B's block: one arena")
    a_first, b_first = a_first.pop(), b_first.pop()
    check(a_first != b_first, "A and B allocate in arenas of their own (the premise)")
    a_heaps = sorted(h for h, ar in truth.items() if ar == a_first)
    eq(len(a_heaps), 2, "heaps glibc gave A's arena: its first and one the reallocs added "
       "(the premise)")

    j = heap_json(t, out)
    arena_of = {h["base"]: h["arena"] for h in j["heaps"]}
    first_of = {h["arena"]: h["base"] for h in j["heaps"] if h["arena_first_heap"]}
    got = {base: first_of.get(arena_of.get(base)) for base in truth}
    eq(got, truth, "each heap's arena (by its first heap)")
    ours = [a for a in j["arenas"] if a["heaps"] and a["heaps"][0] in (a_first, b_first)]
    eq(sorted((sorted(a["heaps"]) for a in ours), key=len),
       [[b_first], a_heaps], "the heaps of B's arena and of A's")


# realloc(p, 0) and reallocarray(p, 0, 1) free p in glibc 2.36 (__libc_free),
# which moves the dynamic mmap threshold to the chunk's size when p was
# mmapped: the next block of a size between the old and new threshold is
# not mmapped.  A realloc that moves an mmapped block (mremap) does not
# move it: a block above the threshold is mmapped after it.  "chunk: N" is
# the mmapped chunk's size from its header, 0 if not mmapped.
REALLOC_ZERO_C = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

static size_t chunk(void *p)
{
	size_t head = ((size_t *)p)[-1];
	return (head & 2) ? head & ~(size_t)7 : 0;
}

int main(void)
{
	void *p = malloc(300000);
	printf("freed: %zu\n", chunk(p));
	if (realloc(p, 0))
		return 1;
	void *q = malloc(250000);
	printf("then: %zu\n", chunk(q));
	free(q);
	void *a = malloc(400000);
	printf("freed: %zu\n", chunk(a));
	if (reallocarray(a, 0, 1))
		return 1;
	void *c = malloc(350000);
	printf("then: %zu\n", chunk(c));
	free(c);
	void *d = malloc(1000000);
	d = realloc(d, 2000000);
	printf("moved: %zu\n", chunk(d));
	void *e = malloc(600000);
	printf("then: %zu\n", chunk(e));
	return 0;
}
"""


@case(timeout=60, labels=("analyzers",))
def test_heap_realloc_zero_threshold(t):
    """realloc(p, 0) and reallocarray(p, 0, 1) of mmapped blocks set the
    thresholds to the chunk's size (and twice it), as glibc did for the
    program (the blocks after them were not mmapped); a realloc moving an
    mmapped block changes nothing.  (heap said "no change": it took
    realloc's release of the block for one that never moves them.)"""
    exe = compile_c(t, "realloczero", REALLOC_ZERO_C)
    out, r = record(t, "realloczero", [exe])
    freed = [int(v) for v in re.findall(r"^freed: (\d+)$", r.stdout, re.M)]
    then = [int(v) for v in re.findall(r"^then: (\d+)$", r.stdout, re.M)]
    moved = [int(v) for v in re.findall(r"^moved: (\d+)$", r.stdout, re.M)]
    eq(len(freed), 2, "blocks freed by realloc:\n" + r.stdout)
    check(all(freed) and all(moved), "the blocks were mmapped (the premise):\n" + r.stdout)
    eq(then[:2], [0, 0], "glibc's threshold moved: the blocks after realloc(p, 0) and "
       "reallocarray(a, 0, 1) were not mmapped (the premise)")
    check(then[2] > 0, "glibc's threshold stayed: the block after the moving realloc was "
          "mmapped (the premise)")
    j = heap_json(t, out)
    got = [(c["cause"], c.get("chunk_bytes"), c["mmap"], c["trim"]) for c in j["thresholds"]]
    eq(got, [("free", c, c, 2 * c) for c in freed], "threshold changes")
    eq(j["threshold_end"], {"mmap": freed[1], "trim": 2 * freed[1], "dynamic": True},
       "final thresholds")
    eq(j["summary"]["mmapped_below_threshold"], 0, "blocks mmapped below the modelled threshold")
    text = heap_text(t, out)
    for c in freed:
        line = ("free of an mmapped chunk of %d bytes: New thresholds:: mmap: %d bytes, "
                "trim: %d bytes" % (c, c, 2 * c))
        check(line in text, "text has %r:\n%s" % (line, text))


@case(timeout=60, labels=("analyzers",))
def test_heap_window_threshold_start(t):
    """--from: the thresholds the window starts from are those the frees
    and the mallopt before it set (tests/progs/thresholds.c: exact chunk
    sizes from its headers), in JSON (threshold_start) and in the text,
    which says whether the dynamic threshold is still on (JSON: dynamic,
    which was missing); without --from, glibc's defaults.  (Both said
    glibc's defaults whatever came before.)"""
    out, r = record(t, "thresholds", [t.prog("thresholds")])
    chunks = [int(c) for c in re.findall(r"^block: \d+ mmapped (\d+)$", r.stdout, re.M)]
    eq(len(chunks), 7, "mmapped blocks the program made (the premise)")
    whole = heap_json(t, out)
    eq(whole["threshold_start"], {"mmap": 131072, "trim": 131072, "dynamic": True},
       "start of the whole trace")
    text = heap_text(t, out)
    check("mmap and trim thresholds (start: glibc's defaults, mmap 131072 bytes, trim 131072 "
          "bytes):\n" in text, "text of the whole trace:\n" + text)
    changes = whole["thresholds"]
    eq(len(changes), 5, "threshold changes (the premise: 4 frees and the mallopt)")
    # after the third free: 1000000 bytes' chunk, dynamic
    frm = "%dns" % (changes[2]["time_ns"] + 1)
    j = heap_json(t, out, "--from", frm)
    eq(j["threshold_start"], {"mmap": chunks[2], "trim": 2 * chunks[2], "dynamic": True},
       "start of a window after the third change")
    eq(len(j["thresholds"]), 2, "changes in that window")
    text = heap_text(t, out, "--from", frm)
    line = ("mmap and trim thresholds (at the window's start: mmap %d bytes, trim %d bytes, "
            "dynamic):\n" % (chunks[2], 2 * chunks[2]))
    check(line in text, "text has %r:\n%s" % (line, text))
    # after the mallopt: pinned at 262144, trim twice the 3000000 bytes' chunk
    frm = "%dns" % (changes[4]["time_ns"] + 1)
    j = heap_json(t, out, "--from", frm)
    eq(j["threshold_start"], {"mmap": 262144, "trim": 2 * chunks[3], "dynamic": False},
       "start of a window after the mallopt")
    eq(j["thresholds"], [], "no change after the mallopt")
    text = heap_text(t, out, "--from", frm)
    line = ("mmap and trim thresholds (at the window's start: mmap 262144 bytes, trim %d bytes, "
            "fixed by mallopt):\n  no change\n" % (2 * chunks[3]))
    check(line in text, "text has %r:\n%s" % (line, text))
