/* Per-stack totals of a trace (stackstats.h). */
#define _GNU_SOURCE
#include "stackstats.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/blocks.h"
#include "common/util.h"

static struct ht_stackstat *stat_of(struct ht_stackstats *s, uint32_t node)
{
	if ((s->n + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		struct ht_stackstat *t = calloc(cap, sizeof(*t));
		if (!t) {
			ht_error("out of memory");
			exit(HT_EXIT_DATA);
		}
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->slots[i].node)
				continue;
			size_t k = (s->slots[i].node * 0x9E3779B1u) & (cap - 1);
			while (t[k].node)
				k = (k + 1) & (cap - 1);
			t[k] = s->slots[i];
		}
		free(s->slots);
		s->slots = t;
		s->cap = cap;
	}
	size_t k = ((node + 1) * 0x9E3779B1u) & (s->cap - 1);
	while (s->slots[k].node && s->slots[k].node != node + 1)
		k = (k + 1) & (s->cap - 1);
	if (!s->slots[k].node) {
		s->slots[k].node = node + 1;
		s->n++;
	}
	return &s->slots[k];
}

struct last_alloc {
	uint32_t tid; /* thread */
	uint64_t ptr; /* its latest allocation, 0 once freed */
};

struct pass {
	struct ht_stackstats *s;  /* filled */
	uint32_t tid;             /* 0 = every thread */
	int second;               /* the pass up to the peak */
	struct last_alloc *last;  /* per thread */
	size_t nlast, caplast;    /* count / allocated */
	uint64_t live;            /* bytes live now */
	uint64_t peak;            /* the most so far */
	uint64_t events;          /* read so far */
	uint64_t peak_event;      /* events read when it peaked */
};

static struct last_alloc *last_of(struct pass *p, uint32_t tid)
{
	for (size_t i = 0; i < p->nlast; i++)
		if (p->last[i].tid == tid)
			return &p->last[i];
	if (p->nlast == p->caplast) {
		p->caplast = p->caplast ? p->caplast * 2 : 16;
		p->last = realloc(p->last, p->caplast * sizeof(*p->last));
		if (!p->last)
			exit(HT_EXIT_DATA);
	}
	p->last[p->nlast].tid = tid;
	p->last[p->nlast].ptr = 0;
	return &p->last[p->nlast++];
}

static void note_big(struct ht_stackstats *s, const struct ht_event *e, const struct ht_block *b)
{
	if (s->nbig == HT_BIG_ALLOCS && b->size <= s->big[s->nbig - 1].size)
		return;
	size_t k = s->nbig < HT_BIG_ALLOCS ? s->nbig++ : s->nbig - 1;
	while (k > 0 && s->big[k - 1].size < b->size) {
		s->big[k] = s->big[k - 1];
		k--;
	}
	s->big[k] = (struct ht_big_alloc){b->size, e->time_ns, e->tid, b->aux};
}

static void on_acquire(void *ctx, const struct ht_event *e, const struct ht_block *b)
{
	struct pass *p = ctx;
	uint64_t w = b->weight;
	p->live += b->size * w;
	if (p->live > p->peak) {
		p->peak = p->live;
		p->peak_event = p->events;
		if (!p->second)
			p->s->peak_time_ns = e->time_ns;
	}
	last_of(p, e->tid)->ptr = b->ptr;
	if (p->second || (p->tid && b->tid != p->tid))
		return;
	struct ht_stackstat *st = stat_of(p->s, b->aux);
	st->alloc_bytes += b->size * w;
	st->alloc_calls += w;
	note_big(p->s, e, b);
}

static void on_release(void *ctx, const struct ht_event *e, const struct ht_block *b)
{
	struct pass *p = ctx;
	p->live -= b->size * b->weight;
	struct last_alloc *l = last_of(p, e->tid);
	if (l->ptr == b->ptr && b->tid == e->tid) {
		if (!p->second && (!p->tid || b->tid == p->tid))
			stat_of(p->s, b->aux)->temp_calls += b->weight;
		l->ptr = 0;
	}
}

static void add_live(struct pass *p, const struct ht_livemap *live, int at_peak)
{
	for (size_t i = 0; i < live->cap; i++) {
		const struct ht_block *b = &live->slots[i];
		if (!b->ptr || (p->tid && b->tid != p->tid))
			continue;
		struct ht_stackstat *st = stat_of(p->s, b->aux);
		if (at_peak) {
			st->peak_bytes += b->size * b->weight;
			st->peak_blocks += b->weight;
		} else {
			st->end_bytes += b->size * b->weight;
			st->end_blocks += b->weight;
		}
	}
}

static int one_pass(const char *path, struct pass *p, uint64_t stop, struct ht_reader **rp)
{
	struct ht_livemap live;
	ht_livemap__init(&live);
	struct ht_reader *r = ht_analyze__open(path);
	if (!r) {
		ht_livemap__free(&live);
		return HT_EXIT_DATA;
	}
	struct ht_block_cbs cbs = {on_release, on_acquire, p};
	struct ht_event e;
	while (p->events < stop && ht_analyze__next(r, &e)) {
		p->events++;
		ht_blocks__event(&live, &e, &cbs);
	}
	int ret = ht_analyze__finish(r, path, p->second);
	add_live(p, &live, p->second);
	ht_livemap__free(&live);
	*rp = r;
	return ret;
}

int ht_stackstats__collect(const char *path, uint32_t tid, int want_peak,
			   struct ht_stackstats *s, struct ht_reader **rp)
{
	memset(s, 0, sizeof(*s));
	struct pass p = {.s = s, .tid = tid};
	*rp = NULL;
	int ret = one_pass(path, &p, UINT64_MAX, rp);
	s->peak_bytes = p.peak;
	if (*rp && want_peak && p.peak_event) {
		ht_reader__close(*rp);
		*rp = NULL;
		uint64_t stop = p.peak_event;
		free(p.last);
		p = (struct pass){.s = s, .tid = tid, .second = 1};
		int r2 = one_pass(path, &p, stop, rp);
		if (!ret)
			ret = r2;
	}
	free(p.last);
	return ret;
}

void ht_stackstats__free(struct ht_stackstats *s)
{
	free(s->slots);
	s->slots = NULL;
	s->cap = s->n = 0;
}
