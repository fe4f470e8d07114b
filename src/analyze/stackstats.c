/* Per-stack totals of a trace (stackstats.h). */
#define _GNU_SOURCE
#include "stackstats.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/blocks.h"
#include "common/nodetab.h"
#include "analyze/pass.h"
#include "common/util.h"

#define AT_MAX (1u << 24) /* nodes indexed directly below this (64 MiB of index at most);
			   * the rest are only hashed */

/* Node's record added to the table; at says where it went. */
static struct ht_stackstat *stat_add(struct ht_stackstats *s, uint32_t node)
{
	size_t cap = s->cap;
	struct ht_stackstat *st =
		ht_nodetab__get((void **)&s->slots, &s->cap, &s->n, sizeof(*s->slots), node);
	if (node < AT_MAX && node >= s->nat) {
		size_t nat = s->nat ? s->nat : 1024;
		while (nat <= node)
			nat *= 2;
		s->at = ht_xrealloc(s->at, nat * sizeof(*s->at));
		memset(s->at + s->nat, 0, (nat - s->nat) * sizeof(*s->at));
		s->nat = nat;
	}
	if (s->cap != cap) { /* the table grew: every record moved */
		memset(s->at, 0, s->nat * sizeof(*s->at));
		for (size_t i = 0; i < s->cap; i++)
			if (s->slots[i].node && s->slots[i].node - 1 < s->nat)
				s->at[s->slots[i].node - 1] = (uint32_t)i + 1;
	} else if (node < s->nat) {
		s->at[node] = (uint32_t)(st - s->slots) + 1;
	}
	return st;
}

/* The record of node if it has one in the direct index, else NULL. */
static inline struct ht_stackstat *stat_indexed(const struct ht_stackstats *s, uint32_t node)
{
	if (node < s->nat && s->at[node])
		return &s->slots[s->at[node] - 1];
	return NULL;
}

/* The record of node: by the direct index, else found or added in the
 * table (only stat_add grows it, and it keeps the index right). */
static inline struct ht_stackstat *stat_of(struct ht_stackstats *s, uint32_t node)
{
	struct ht_stackstat *st = stat_indexed(s, node);
	return st ? st : stat_add(s, node);
}

struct ht_stackstats_last {
	uint64_t ptr; /* the thread's latest allocation, 0 once the thread freed any block */
};

/* The entry of the event's thread: by the pass's dense index of it. */
static struct ht_stackstats_last *last_add(struct ht_stackstats *s)
{
	size_t ix = s->thread;
	if (ix >= s->caplast) {
		size_t cap = s->caplast ? s->caplast * 2 : 16;
		while (cap <= ix)
			cap *= 2;
		s->last = ht_xrealloc(s->last, cap * sizeof(*s->last));
		s->caplast = cap;
	}
	memset(&s->last[s->nlast], 0, (ix + 1 - s->nlast) * sizeof(*s->last));
	s->nlast = ix + 1;
	return &s->last[ix];
}

static inline struct ht_stackstats_last *last_of(struct ht_stackstats *s)
{
	return s->thread < s->nlast ? &s->last[s->thread] : last_add(s);
}

/* Whether big entry a leaves the heap before b: the smaller, of one size
 * the later (the earlier of equal allocations is kept, as when the list
 * was kept sorted). */
static inline int big_before(const struct ht_big_alloc *a, const struct ht_big_alloc *b)
{
	return a->size != b->size ? a->size < b->size : a->seq > b->seq;
}

/* Whether an allocation of size bytes enters the biggest. */
static inline int is_big(const struct ht_stackstats *s, uint64_t size)
{
	return s->nbig < s->big_cap || size > s->big[0].size;
}

/* b goes in the heap of the biggest allocations (is_big said it is big):
 * added while there is room, else in place of the smallest, big[0]. */
static void add_big(struct ht_stackstats *s, const struct ht_event *e, const struct ht_block *b)
{
	if (!s->big)
		s->big = ht_xmalloc(s->big_cap * sizeof(*s->big));
	struct ht_big_alloc x = {b->size, e->time_ns, e->tid, b->aux, s->big_seen - 1};
	size_t k;
	if (s->nbig < s->big_cap) {
		for (k = s->nbig++; k > 0 && big_before(&x, &s->big[(k - 1) / 2]); k = (k - 1) / 2)
			s->big[k] = s->big[(k - 1) / 2];
	} else {
		k = 0;
		for (size_t c; (c = 2 * k + 1) < s->nbig; k = c) {
			if (c + 1 < s->nbig && big_before(&s->big[c + 1], &s->big[c]))
				c++;
			if (!big_before(&s->big[c], &x))
				break;
			s->big[k] = s->big[c];
		}
	}
	s->big[k] = x;
}

static inline void note_big(struct ht_stackstats *s, const struct ht_event *e,
			    const struct ht_block *b)
{
	s->big_seen++;
	if (is_big(s, b->size))
		add_big(s, e, b);
}

static int big_first(const void *a, const void *b)
{
	const struct ht_big_alloc *x = a, *y = b;
	return big_before(y, x) ? -1 : big_before(x, y);
}

/* Before a stack's live bytes change: if this is their first change since
 * the latest peak, what they are now is what they were at that peak. */
static void snapshot(const struct ht_stackstats *s, struct ht_stackstat *st)
{
	if (st->snap_peak != s->npeaks) {
		st->snap_bytes = st->live_bytes;
		st->snap_blocks = st->live_blocks;
		st->snap_peak = s->npeaks;
	}
}

static inline __attribute__((always_inline)) void
on_acquire(void *ctx, const struct ht_event *e, const struct ht_block *b)
{
	struct ht_stackstats *s = ctx;
	uint64_t w = b->weight;
	if (!s->tid || b->tid == s->tid) {
		struct ht_stackstat *st = stat_of(s, b->aux);
		snapshot(s, st);
		st->live_bytes += b->size * w;
		st->live_blocks += w;
		st->alloc_bytes += b->size * w;
		st->alloc_calls += w;
		note_big(s, e, b);
	}
	last_of(s)->ptr = b->ptr;
	s->live += b->size * w;
	if (s->live > s->peak_bytes) { /* a new peak: every stack's snapshot is stale */
		s->peak_bytes = s->live;
		s->peak_time_ns = e->time_ns;
		s->npeaks++;
	}
}

static inline __attribute__((always_inline)) void
on_release(void *ctx, const struct ht_event *e, const struct ht_block *b)
{
	struct ht_stackstats *s = ctx;
	uint64_t w = b->weight;
	s->live -= b->size * w;
	struct ht_stackstats_last *l = last_of(s);
	int temp = l->ptr == b->ptr && b->tid == e->tid;
	l->ptr = 0; /* (any free in between: the next is not temporary) */
	if (s->tid && b->tid != s->tid)
		return;
	struct ht_stackstat *st = stat_of(s, b->aux);
	snapshot(s, st);
	st->live_bytes -= b->size * w;
	st->live_blocks -= w;
	st->temp_calls += temp ? w : 0;
	st->temp_bytes += temp ? b->size * w : 0;
}

void ht_stackstats__init(struct ht_stackstats *s, uint32_t tid)
{
	memset(s, 0, sizeof(*s));
	s->tid = tid;
	s->big_cap = HT_BIG_ALLOCS;
}

void ht_stackstats__keep_big(struct ht_stackstats *s, uint64_t n)
{
	s->big_cap = n && n < HT_BIG_ALLOCS_MAX ? (size_t)n : HT_BIG_ALLOCS_MAX;
}

/* heaptrail_reset(): the blocks so far are forgotten (pass.h). */
static void reset(struct ht_stackstats *s)
{
	for (size_t i = 0; i < s->cap; i++) {
		struct ht_stackstat *st = &s->slots[i];
		if (!st->node)
			continue;
		snapshot(s, st);
		st->live_bytes = st->live_blocks = 0;
	}
	s->live = 0;
}

/* Every event the fast paths below do not take. */
static __attribute__((noinline)) void event_slow(struct ht_stackstats *s,
						 const struct ht_event *e,
						 const struct ht_blockop *op)
{
	if (!op->released && !op->replaced && !op->acquired) { /* (a reset changes no block) */
		if (e->kind == HT_EV_CONTROL && e->v[0] == HT_CTL_RESET)
			reset(s);
		return;
	}
	s->thread = op->thread;
	const struct ht_block_cbs cbs = {on_release, on_acquire, s};
	ht_blockop__callbacks(op, e, &cbs);
}

/* The common events, one block handed out or released by a thread seen
 * before, of a stack with a record, not among the biggest, all threads
 * kept: what on_acquire and on_release do, with nothing to add to a table
 * and no call (so none of the slow path's registers to save).  Returns 0
 * when the event is not one of these, before it changed anything. */
static inline int event_fast(struct ht_stackstats *s, const struct ht_event *e,
			     const struct ht_blockop *op)
{
	const struct ht_block *b = op->acquired;
	if (op->replaced || s->tid || op->thread >= s->nlast)
		return 0;
	struct ht_stackstats_last *l = &s->last[op->thread];
	if (b && !op->released) {
		struct ht_stackstat *st = stat_indexed(s, b->aux);
		if (!st || is_big(s, b->size))
			return 0;
		uint64_t w = b->weight, bytes = b->size * w;
		s->thread = op->thread;
		s->big_seen++;
		snapshot(s, st);
		st->live_bytes += bytes;
		st->live_blocks += w;
		st->alloc_bytes += bytes;
		st->alloc_calls += w;
		l->ptr = b->ptr;
		s->live += bytes;
		if (s->live > s->peak_bytes) { /* a new peak: every stack's snapshot is stale */
			s->peak_bytes = s->live;
			s->peak_time_ns = e->time_ns;
			s->npeaks++;
		}
		return 1;
	}
	b = op->released;
	if (!b || op->acquired || (b->pad & HT_BLOCK_FORGOTTEN))
		return 0;
	struct ht_stackstat *st = stat_indexed(s, b->aux);
	if (!st)
		return 0;
	uint64_t w = b->weight, bytes = b->size * w;
	s->thread = op->thread;
	s->live -= bytes;
	int temp = l->ptr == b->ptr && b->tid == e->tid;
	l->ptr = 0;
	snapshot(s, st);
	st->live_bytes -= bytes;
	st->live_blocks -= w;
	st->temp_calls += temp ? w : 0;
	st->temp_bytes += temp ? bytes : 0;
	return 1;
}

void ht_stackstats__event(struct ht_stackstats *s, const struct ht_event *e,
			  const struct ht_blockop *op)
{
	if (!event_fast(s, e, op))
		event_slow(s, e, op);
}

void ht_stackstats__finish(struct ht_stackstats *s)
{
	if (s->nbig)
		qsort(s->big, s->nbig, sizeof(*s->big), big_first);
	for (size_t i = 0; i < s->cap; i++) {
		struct ht_stackstat *st = &s->slots[i];
		if (!st->node)
			continue;
		int changed = st->snap_peak == s->npeaks && s->npeaks;
		/* (peak_* share snap_*'s fields, end_* live_*'s) */
		if (!changed) {
			st->peak_bytes = st->live_bytes;
			st->peak_blocks = st->live_blocks;
		}
	}
}

struct alike {
	uint64_t key;  /* ht_blocks__stack_key of the stack */
	uint32_t node; /* its node + 1 */
	uint32_t slot; /* its record */
};

static int by_key_node(const void *a, const void *b)
{
	const struct alike *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->node < y->node ? -1 : x->node > y->node;
}

void ht_stackstats__merge_alike(struct ht_stackstats *s, struct ht_reader *r,
				struct ht_symbolizer *sym)
{
	struct alike *k = ht_xrealloc(NULL, (s->n ? s->n : 1) * sizeof(*k));
	uint64_t *memo = ht_xcalloc(ht_reader__nnodes(r) + 1, sizeof(*memo));
	size_t n = 0;
	for (size_t i = 0; i < s->cap; i++) {
		if (!s->slots[i].node)
			continue;
		/* (the stack of no stack: key 0, never merged) */
		k[n++] = (struct alike){ht_blocks__stack_key(r, sym, s->slots[i].node - 1, memo),
					s->slots[i].node, (uint32_t)i};
	}
	free(memo);
	qsort(k, n, sizeof(*k), by_key_node);
	for (size_t i = 1; i < n; i++) {
		size_t first = i - 1;
		while (i < n && k[i].key && k[i].key == k[first].key) {
			struct ht_stackstat *to = &s->slots[k[first].slot], *from = &s->slots[k[i].slot];
			to->alloc_bytes += from->alloc_bytes;
			to->alloc_calls += from->alloc_calls;
			to->temp_calls += from->temp_calls;
			to->temp_bytes += from->temp_bytes;
			to->end_bytes += from->end_bytes;
			to->end_blocks += from->end_blocks;
			to->peak_bytes += from->peak_bytes;
			to->peak_blocks += from->peak_blocks;
			memset(from, 0, sizeof(*from));
			s->n--;
			i++;
		}
	}
	free(k);
	if (s->at)
		memset(s->at, 0, s->nat * sizeof(*s->at)); /* (stale now) */
}

int ht_stackstats__thread_missing(const struct ht_stackstats *s, const char *path)
{
	if (!s->tid || s->tid_seen)
		return 0;
	ht_error("--thread=%u: no event of thread %u in %s (its threads: 'heaptrail stats %s' "
		 "lists them)",
		 s->tid, s->tid, path, path);
	return 1;
}

int ht_stackstats__collect(const char *path, uint32_t tid, struct ht_stackstats *s,
			   struct ht_reader **rp)
{
	return ht_stackstats__collect_big(path, tid, HT_BIG_ALLOCS, s, rp);
}

int ht_stackstats__collect_big(const char *path, uint32_t tid, uint64_t nbig,
			       struct ht_stackstats *s, struct ht_reader **rp)
{
	ht_stackstats__init(s, tid);
	ht_stackstats__keep_big(s, nbig);
	*rp = ht_analyze__open(path);
	if (!*rp)
		return HT_EXIT_DATA;
	struct ht_pass *pass = ht_pass__new();
	ht_pass__check_order(pass, *rp);
	const struct ht_event *e;
	while ((e = ht_analyze__next_event(*rp))) {
		if (__builtin_expect(s->tid != 0, 0) && e->tid == s->tid)
			s->tid_seen = 1;
		ht_stackstats__event(s, e, ht_pass__event(pass, e));
	}
	s->pauses = *ht_pass__pauses(pass);
	ht_pass__delete(pass);
	ht_stackstats__finish(s);
	return ht_analyze__finish_pass(*rp, path, 0, &s->pauses);
}

void ht_stackstats__free(struct ht_stackstats *s)
{
	free(s->slots);
	free(s->last);
	free(s->at);
	free(s->big);
	s->slots = NULL;
	s->last = NULL;
	s->at = NULL;
	s->big = NULL;
	s->cap = s->n = s->nlast = s->caplast = s->nat = s->nbig = 0;
}
