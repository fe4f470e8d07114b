/* libFuzzer target for the workload loader (src/replay/workload.c).
 *
 * Each input is taken as a whole .wl file and loaded from memory with
 * ht_workload__load_mem, which checks every op and simulates the run once;
 * the replay engine (src/replay/engine.c) then trusts what it loaded and
 * decodes the streams without a single bounds check.  So beyond "no crash,
 * no hang, no leak", a workload that loads is checked here against what
 * the engine needs, independently of the loader's own simulation:
 *
 *   - every thread's stream decodes with ht_wl_decode, op by op, to exactly
 *     its end and its op count, and the engine's unchecked LEB128 decoder
 *     reads the same arguments and stops at the same byte;
 *   - every slot argument is in range, MMAP and MREMAP name a result slot,
 *     WAIT names another thread and a count in 1..its ops (a WAIT for 0
 *     would stop the engine publishing that thread's progress), SPAWN a
 *     thread other than 0;
 *   - a second simulation, one op at a time round-robin over the runnable
 *     threads (the loader runs each thread as far as it goes), finishes
 *     every thread, spawns each once, and never frees an empty slot, fills
 *     a live one, frees a map or unmaps a heap block, unmaps outside a map
 *     or twice, remaps a map with holes; and (up to 256 threads) every op
 *     on a slot another thread used last comes after a WAIT on that thread
 *     for that op, or after being spawned by it: the engine runs the
 *     threads in parallel, and only the waits order them.
 *
 * A broken promise aborts, which libFuzzer reports like a crash.  A failed
 * load must leave a one-line message naming the input in err.
 *
 * Build (clang): see tests/fuzz/run.sh or tests/fuzz/CMakeLists.txt.
 * Without clang, tests/fuzz/run_corpus.c runs the same function over the
 * corpus and the saved regressions (ctest fuzz.workload_corpus). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "replay/workload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NAME "fuzz.wl"
#define MAX_KNOWN_THREADS 256 /* the race check's n x n table */

static void broken(const char *what, unsigned long long thread, unsigned long long op)
{
	fprintf(stderr, "fuzz_workload: broken loader promise: %s (thread %llu, op %llu)\n", what,
		thread, op);
	abort();
}

/* The engine's decoder (engine.c getv): no bounds, no length limit. */
static uint64_t getv(const uint8_t **pp)
{
	const uint8_t *p = *pp;
	uint64_t v = *p & 0x7f;
	for (int shift = 7; *p++ & 0x80; shift += 7)
		v |= (uint64_t)(*p & 0x7f) << shift;
	*pp = p;
	return v;
}

/* Slot states of the second simulation. */
enum { EMPTY, HEAP, MAP };

struct hole {
	uint64_t lo, hi; /* an unmapped range of the slot's map */
	uint64_t next;   /* next hole of the same slot, + 1 */
};

struct oracle {
	const struct ht_workload *w;
	uint32_t n;
	uint8_t *kind;      /* per slot */
	uint64_t *extent;   /* per slot: length of its map */
	uint64_t *holes;    /* per slot: first hole + 1 */
	uint32_t *owner;    /* per slot: thread of the last op on it */
	uint64_t *at;       /* per slot: that thread's op count after it */
	uint64_t *known;    /* n x n: ops of thread j that thread i has waited for */
	struct hole *h;     /* the holes */
	size_t nh, caph;
};

static void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz);
	if (!p) {
		fprintf(stderr, "fuzz_workload: out of memory\n");
		exit(2);
	}
	return p;
}

/* Thread t touches slot s (s + 1 > 0): ordered after its last user? */
static void touch(struct oracle *o, uint32_t t, uint64_t done, uint64_t s)
{
	uint32_t j = o->owner[s];
	if (o->known && j != t && o->at[s] > o->known[(size_t)t * o->n + j])
		broken("slot used by two threads without a wait between them", t, done);
	o->owner[s] = t;
	o->at[s] = done + 1;
}

static void slot_op(struct oracle *o, uint32_t t, uint64_t done, int op, const uint64_t *a)
{
	uint64_t res = 0, old = 0;
	int mapop = op == HT_WL_MMAP || op == HT_WL_MUNMAP || op == HT_WL_MREMAP;
	switch (op) {
	case HT_WL_MALLOPT: case HT_WL_MALLOC_TRIM:
		return;
	case HT_WL_REALLOC: case HT_WL_REALLOCARRAY: case HT_WL_MREMAP:
		res = a[0], old = a[1];
		break;
	case HT_WL_FREE: case HT_WL_MUNMAP:
		old = a[0];
		break;
	default:
		res = a[0];
	}
	if (res > o->w->nslots || old > o->w->nslots)
		broken("slot out of range", t, done);
	if (mapop && !(o->w->flags & HT_WL_F_MMAP))
		broken("mmap op without the mmap flag", t, done);
	if ((op == HT_WL_MMAP || op == HT_WL_MREMAP) && !res)
		broken("map op without a result slot (the engine stores it at slot -1)", t, done);
	if ((op == HT_WL_MUNMAP || op == HT_WL_MREMAP) && !old)
		broken("unmap or remap of no slot", t, done);
	if (op == HT_WL_MMAP && (!(a[3] & 0x20) || !(a[3] & 0x02) || (a[3] & 0x10)))
		broken("mmap that is not anonymous, private, not fixed", t, done);
	if (op == HT_WL_MREMAP && (a[4] & ~1ull))
		broken("mremap flags other than MREMAP_MAYMOVE", t, done);
	if (old) {
		touch(o, t, done, old - 1);
		int want = mapop ? MAP : HEAP;
		if (o->kind[old - 1] != want)
			broken(o->kind[old - 1] == EMPTY ? "op on an empty slot"
			       : mapop ? "munmap or mremap of a heap block"
				       : "free or realloc of a map",
			       t, done);
	}
	if (res && res != old) {
		touch(o, t, done, res - 1);
		if (o->kind[res - 1] != EMPTY)
			broken("result into a live slot", t, done);
	}
	if (op == HT_WL_MUNMAP) {
		uint64_t s = old - 1, lo = a[1], len = a[2];
		if (lo > o->extent[s] || len > o->extent[s] - lo)
			broken("munmap outside the map", t, done);
		for (uint64_t k = o->holes[s]; k; k = o->h[k - 1].next)
			if (len && lo < o->h[k - 1].hi && o->h[k - 1].lo < lo + len)
				broken("munmap of a range already unmapped", t, done);
		if (a[3]) {
			o->kind[s] = EMPTY;
			o->holes[s] = 0;
		} else if (len) {
			if (o->nh == o->caph) {
				o->caph = o->caph ? 2 * o->caph : 64;
				o->h = realloc(o->h, o->caph * sizeof(*o->h));
				if (!o->h)
					exit(2);
			}
			o->h[o->nh++] = (struct hole){lo, lo + len, o->holes[s]};
			o->holes[s] = o->nh;
		}
		return;
	}
	if (op == HT_WL_MREMAP) {
		if (o->holes[old - 1])
			broken("mremap of a map with holes", t, done);
		if (a[2] > o->extent[old - 1])
			broken("mremap's old length past the map", t, done);
	}
	if (old && res != old)
		o->kind[old - 1] = EMPTY;
	if (res) {
		o->kind[res - 1] = mapop ? MAP : HEAP;
		o->extent[res - 1] = op == HT_WL_MMAP ? a[1] : op == HT_WL_MREMAP ? a[3] : 0;
		o->holes[res - 1] = 0;
	}
}

struct othread {
	const uint8_t *p, *end;
	uint64_t done;
	int started;
	uint64_t wait_for;    /* when blocked: the count it waits for */
	uint32_t next_waiter; /* when blocked: the next thread waiting on the same one, + 1 */
	uint32_t waiters;     /* threads blocked on this one, + 1 */
};

/* The second simulation: one op per turn, round-robin. */
static void simulate(const struct ht_workload *w)
{
	struct oracle o = {.w = w, .n = w->nthreads};
	uint32_t n = w->nthreads;
	o.kind = xcalloc(w->nslots, 1);
	o.extent = xcalloc(w->nslots, sizeof(uint64_t));
	o.holes = xcalloc(w->nslots, sizeof(uint64_t));
	o.owner = xcalloc(w->nslots, sizeof(uint32_t));
	o.at = xcalloc(w->nslots, sizeof(uint64_t));
	if (n <= MAX_KNOWN_THREADS)
		o.known = xcalloc((size_t)n * n, sizeof(uint64_t));
	struct othread *t = xcalloc(n, sizeof(*t));
	uint32_t *q = xcalloc(n, sizeof(uint32_t)); /* ring of runnable threads */
	size_t qh = 0, ql = 0, finished = 0;
	for (uint32_t i = 0; i < n; i++) {
		t[i].p = w->threads[i].ops;
		t[i].end = t[i].p + w->threads[i].nbytes;
	}
	t[0].started = 1;
#define PUSH(i) (q[(qh + ql++) % n] = (i))
	PUSH(0);
	while (ql) {
		uint32_t i = q[qh];
		qh = (qh + 1) % n, ql--;
		struct othread *c = &t[i];
		if (c->p >= c->end) {
			finished++;
			continue;
		}
		const uint8_t *at = c->p;
		uint64_t a[HT_WL_MAX_ARGS];
		int op = ht_wl_decode(&c->p, c->end, a);
		if (!op)
			broken("malformed op in a loaded workload", i, c->done);
		if (op == HT_WL_WAIT) {
			if (t[a[0]].done < a[1]) {
				c->p = at;
				c->wait_for = a[1];
				c->next_waiter = t[a[0]].waiters;
				t[a[0]].waiters = i + 1;
				continue;
			}
			if (o.known && o.known[(size_t)i * n + a[0]] < a[1])
				o.known[(size_t)i * n + a[0]] = a[1];
		} else if (op == HT_WL_SPAWN) {
			if (t[a[0]].started)
				broken("thread spawned twice", i, c->done);
			t[a[0]].started = 1;
			if (o.known)
				o.known[(size_t)a[0] * n + i] = c->done;
			PUSH((uint32_t)a[0]);
		} else {
			slot_op(&o, i, c->done, op, a);
		}
		c->done++;
		PUSH(i);
		/* wake the threads this one has satisfied */
		for (uint32_t *link = &c->waiters; *link;) {
			struct othread *b = &t[*link - 1];
			if (b->wait_for <= c->done) {
				PUSH(*link - 1);
				*link = b->next_waiter;
			} else {
				link = &b->next_waiter;
			}
		}
	}
#undef PUSH
	if (finished != n)
		broken("the run cannot finish: a thread is never started or waits forever", finished, 0);
	free(o.kind);
	free(o.extent);
	free(o.holes);
	free(o.owner);
	free(o.at);
	free(o.known);
	free(o.h);
	free(t);
	free(q);
}

static volatile uint64_t sink;

/* Every op of every stream, with both decoders, and the static rules. */
static void walk(const struct ht_workload *w)
{
	uint64_t total = 0, spawns = 0;
	for (uint32_t i = 0; i < w->nthreads; i++) {
		const struct ht_wl_thread *th = &w->threads[i];
		const uint8_t *p = th->ops, *end = p + th->nbytes, *q = p;
		uint64_t nops = 0, a[HT_WL_MAX_ARGS];
		while (p < end) {
			int op = ht_wl_decode(&p, end, a);
			if (!op)
				broken("a loaded stream does not decode", i, nops);
			if (p > end)
				broken("decoding ran past the stream", i, nops);
			if (*q++ != op)
				broken("op byte differs", i, nops);
			for (int k = 0; k < ht_wl_op_nargs(op); k++)
				if (getv(&q) != a[k] || q > p)
					broken("the engine's decoder reads another argument", i, nops);
			if (q != p)
				broken("the engine's decoder stops elsewhere", i, nops);
			if (op == HT_WL_WAIT &&
			    (a[0] >= w->nthreads || a[0] == i || !a[1] || a[1] > w->threads[a[0]].nops))
				broken("wait for no thread, itself, op 0 or past its end", i, nops);
			if (op == HT_WL_SPAWN && (!a[0] || a[0] >= w->nthreads))
				broken("spawn of thread 0 or of no thread", i, nops);
			spawns += op == HT_WL_SPAWN;
			sink ^= a[0] + (uint64_t)op;
			nops++;
		}
		if (nops != th->nops)
			broken("op count differs from the thread table", i, nops);
		total += nops;
	}
	if (total != w->nops)
		broken("op count differs from the header", 0, total);
	if (spawns != w->nthreads - 1)
		broken("not one spawn per thread", 0, spawns);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	memset(err, 0x5a, sizeof(err));
	struct ht_workload *w = ht_workload__load_mem(data, size, NAME, err, sizeof(err));
	if (!w) {
		if (!memchr(err, 0, sizeof(err)) || strncmp(err, NAME ": ", sizeof(NAME) + 1) ||
		    !err[sizeof(NAME) + 1] || strchr(err, '\n'))
			broken("load failed without a one-line message naming the input", 0, 0);
		return 0;
	}
	if (!w->nthreads || !w->threads || !w->source || !w->map)
		broken("loaded workload without threads, source or map", 0, 0);
	sink ^= strlen(w->source);
	for (int i = 0; i < HT_FN_NR; i++)
		sink ^= w->calls[i];
	walk(w);
	simulate(w);
	/* the streams are read-only, and go with the workload */
	void *map = w->map;
	size_t len = w->map_len;
	ht_workload__free(w);
	unsigned char vec[16];
	if (len <= 16 * (size_t)sysconf(_SC_PAGESIZE) && mincore(map, len, vec) == 0)
		broken("the streams' mapping outlives ht_workload__free", 0, 0);
	return 0;
}
