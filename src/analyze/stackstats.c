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

/* The record of node; the one found last is kept (every record of a trace
 * without stacks is node 0's): each lookup that misses it sets it, and
 * only a lookup grows the table, so it always points into the table. */
static inline struct ht_stackstat *stat_of(struct ht_stackstats *s, uint32_t node)
{
	if (s->hot && s->hot->node == node + 1)
		return s->hot;
	return s->hot = ht_nodetab__get((void **)&s->slots, &s->cap, &s->n, sizeof(*s->slots), node);
}

struct ht_stackstats_last {
	uint64_t ptr; /* the thread's latest allocation, 0 once freed */
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

/* b goes in the list of the biggest allocations (note_big said it is big). */
static void add_big(struct ht_stackstats *s, const struct ht_event *e, const struct ht_block *b)
{
	size_t k = s->nbig < HT_BIG_ALLOCS ? s->nbig++ : s->nbig - 1;
	while (k > 0 && s->big[k - 1].size < b->size) {
		s->big[k] = s->big[k - 1];
		k--;
	}
	s->big[k] = (struct ht_big_alloc){b->size, e->time_ns, e->tid, b->aux};
}

static inline void note_big(struct ht_stackstats *s, const struct ht_event *e,
			    const struct ht_block *b)
{
	if (s->nbig < HT_BIG_ALLOCS || b->size > s->big[s->nbig - 1].size)
		add_big(s, e, b);
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
	if (temp)
		l->ptr = 0;
	if (s->tid && b->tid != s->tid)
		return;
	struct ht_stackstat *st = stat_of(s, b->aux);
	snapshot(s, st);
	st->live_bytes -= b->size * w;
	st->live_blocks -= w;
	st->temp_calls += temp ? w : 0;
}

void ht_stackstats__init(struct ht_stackstats *s, uint32_t tid)
{
	memset(s, 0, sizeof(*s));
	s->tid = tid;
}

void ht_stackstats__event(struct ht_stackstats *s, const struct ht_event *e,
			  const struct ht_blockop *op)
{
	if (e->kind == HT_EV_CONTROL && e->v[0] == HT_CTL_RESET) {
		/* heaptrail_reset(): the blocks so far are forgotten (pass.h) */
		for (size_t i = 0; i < s->cap; i++) {
			struct ht_stackstat *st = &s->slots[i];
			if (!st->node)
				continue;
			snapshot(s, st);
			st->live_bytes = st->live_blocks = 0;
		}
		s->live = 0;
	}
	if (!op->released && !op->replaced && !op->acquired)
		return;
	s->thread = op->thread;
	const struct ht_block_cbs cbs = {on_release, on_acquire, s};
	ht_blockop__callbacks(op, e, &cbs);
}

void ht_stackstats__finish(struct ht_stackstats *s)
{
	for (size_t i = 0; i < s->cap; i++) {
		struct ht_stackstat *st = &s->slots[i];
		if (!st->node)
			continue;
		int changed = st->snap_peak == s->npeaks && s->npeaks;
		st->peak_bytes = changed ? st->snap_bytes : st->live_bytes;
		st->peak_blocks = changed ? st->snap_blocks : st->live_blocks;
		st->end_bytes = st->live_bytes;
		st->end_blocks = st->live_blocks;
	}
}

int ht_stackstats__collect(const char *path, uint32_t tid, struct ht_stackstats *s,
			   struct ht_reader **rp)
{
	ht_stackstats__init(s, tid);
	*rp = ht_analyze__open(path);
	if (!*rp)
		return HT_EXIT_DATA;
	struct ht_pass *pass = ht_pass__new();
	const struct ht_event *e;
	while ((e = ht_analyze__next_event(*rp)))
		ht_stackstats__event(s, e, ht_pass__event(pass, e));
	ht_pass__delete(pass);
	ht_stackstats__finish(s);
	return ht_analyze__finish(*rp, path, 0);
}

void ht_stackstats__free(struct ht_stackstats *s)
{
	free(s->slots);
	free(s->last);
	s->slots = NULL;
	s->last = NULL;
	s->hot = NULL;
	s->cap = s->n = s->nlast = s->caplast = 0;
}
