/* The program's own mappings as a set of page ranges, which stats and
 * timeline both follow (and stats' time slices replay): the bytes mapped
 * now are what the set covers, not a sum of the lengths the calls asked
 * for.  A sum goes wrong as soon as calls overlap: an mmap with MAP_FIXED
 * over a mapping replaces it (a reservation of 100 MiB PROT_NONE with 10
 * MiB mapped into it, then unmapped whole, summed to 10 MiB mapped for
 * the rest of the run), and a munmap over a hole, or of what was never
 * mapped, removes only what is there (summed: below 0).  Static inline,
 * so that both collectors share one implementation without a file of its
 * own in the build. */
#ifndef HEAPTRAIL_ANALYZE_MMRANGES_H
#define HEAPTRAIL_ANALYZE_MMRANGES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "trace/reader.h"

/* The page the kernel maps by: the traces do not record it, and 4 KiB is
 * the size of every system the recorder runs on but arm64 kernels built
 * for 16 or 64 KiB pages (whose mappings are still counted to 4 KiB). */
#define HT_MM_PAGE 4096ull

struct ht_mmrange {
	uint64_t lo, hi; /* [lo, hi), page-aligned */
};

struct ht_mmranges {
	struct ht_mmrange *v; /* sorted, disjoint, none adjacent to the next */
	size_t n, cap;        /* used / allocated */
	uint64_t bytes;       /* what they cover */
};

/* One call that changed the mappings, as the set needs it (what a time
 * slice keeps of the event to replay it later, stats.c). */
struct ht_mmcall {
	uint64_t addr, len;   /* mmap: the result; munmap, mremap: the old range */
	uint64_t newlen, res; /* mremap: the new length and where it is now */
	uint8_t kind;         /* HT_EV_MMAP, HT_EV_MUNMAP, HT_EV_MREMAP */
};

static inline void ht_mmranges__free(struct ht_mmranges *m)
{
	free(m->v);
	memset(m, 0, sizeof(*m));
}

/* The first range that ends after a. */
static inline size_t ht_mmranges__first(const struct ht_mmranges *m, uint64_t a)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->v[mid].hi > a)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static inline void ht_mmranges__insert(struct ht_mmranges *m, size_t i, uint64_t lo, uint64_t hi)
{
	m->v = ht_grow(m->v, &m->cap, m->n + 1, sizeof(*m->v));
	memmove(m->v + i + 1, m->v + i, (m->n - i) * sizeof(*m->v));
	m->v[i] = (struct ht_mmrange){lo, hi};
	m->n++;
}

/* [lo, hi) is no longer mapped (what of it was). */
static inline void ht_mmranges__del(struct ht_mmranges *m, uint64_t lo, uint64_t hi)
{
	if (lo >= hi)
		return;
	size_t i = ht_mmranges__first(m, lo);
	if (i < m->n && m->v[i].lo < lo && m->v[i].hi > hi) {
		/* a hole in one range: it splits */
		uint64_t end = m->v[i].hi;
		m->v[i].hi = lo;
		ht_mmranges__insert(m, i + 1, hi, end);
		m->bytes -= hi - lo;
		return;
	}
	if (i < m->n && m->v[i].lo < lo) {
		m->bytes -= m->v[i].hi - lo;
		m->v[i].hi = lo;
		i++;
	}
	size_t j = i;
	for (; j < m->n && m->v[j].hi <= hi; j++)
		m->bytes -= m->v[j].hi - m->v[j].lo;
	if (j < m->n && m->v[j].lo < hi) {
		m->bytes -= hi - m->v[j].lo;
		m->v[j].lo = hi;
	}
	if (j > i) { /* (memmove of nothing from a NULL v: undefined) */
		memmove(m->v + i, m->v + j, (m->n - j) * sizeof(*m->v));
		m->n -= j - i;
	}
}

/* [lo, hi) is mapped now, whatever was there before. */
static inline void ht_mmranges__add(struct ht_mmranges *m, uint64_t lo, uint64_t hi)
{
	if (lo >= hi)
		return;
	ht_mmranges__del(m, lo, hi);
	size_t i = ht_mmranges__first(m, lo); /* (the ranges from i on start at hi or later) */
	int left = i > 0 && m->v[i - 1].hi == lo, right = i < m->n && m->v[i].lo == hi;
	if (left && right) {
		m->v[i - 1].hi = m->v[i].hi;
		memmove(m->v + i, m->v + i + 1, (m->n - i - 1) * sizeof(*m->v));
		m->n--;
	} else if (left) {
		m->v[i - 1].hi = hi;
	} else if (right) {
		m->v[i].lo = lo;
	} else {
		ht_mmranges__insert(m, i, lo, hi);
	}
	m->bytes += hi - lo;
}

static inline uint64_t ht_mm__page_down(uint64_t a)
{
	return a & ~(HT_MM_PAGE - 1);
}

/* The end of len bytes from a, to the page's end (saturating). */
static inline uint64_t ht_mm__page_end(uint64_t a, uint64_t len)
{
	uint64_t e = a + len;
	if (e < a || e > UINT64_MAX - HT_MM_PAGE)
		return ht_mm__page_down(UINT64_MAX);
	return (e + HT_MM_PAGE - 1) & ~(HT_MM_PAGE - 1);
}

/* The call an mmap, munmap or mremap event made, into *c: 1; 0 if it
 * changed nothing (it failed; the first part of a moving mremap, which
 * the second applies whole). */
static inline int ht_mmcall__of(const struct ht_event *e, struct ht_mmcall *c)
{
	memset(c, 0, sizeof(*c));
	c->kind = e->kind;
	switch (e->kind) {
	case HT_EV_MMAP:
		c->addr = e->v[6];
		c->len = e->v[1];
		return e->v[6] != (uint64_t)-1;
	case HT_EV_MUNMAP:
		c->addr = e->v[0];
		c->len = e->v[1];
		return e->v[2] == 0;
	case HT_EV_MREMAP:
		c->addr = e->v[0];
		c->len = e->v[1];
		c->newlen = e->v[2];
		c->res = e->v[5];
		return e->part != HT_PART_RELEASE && e->v[5] != (uint64_t)-1;
	default:
		return 0;
	}
}

/* Applies a call that succeeded, as the kernel does. */
static inline void ht_mmranges__apply(struct ht_mmranges *m, const struct ht_mmcall *c)
{
	uint64_t lo = ht_mm__page_down(c->addr);
	switch (c->kind) {
	case HT_EV_MMAP: /* (with MAP_FIXED over mappings, it replaces them) */
		ht_mmranges__add(m, lo, ht_mm__page_end(c->addr, c->len));
		return;
	case HT_EV_MUNMAP:
		ht_mmranges__del(m, lo, ht_mm__page_end(c->addr, c->len));
		return;
	case HT_EV_MREMAP:
		break;
	default:
		return;
	}
	/* mremap: the old range's pages that were the program's own move
	 * with it, to res (the first min(oldlen, newlen) bytes of it); what
	 * it grew by is new; an old length of 0 leaves the old mapping and
	 * maps a copy.  A move replaces what was at its destination. */
	uint64_t oldend = ht_mm__page_end(c->addr, c->len);
	uint64_t keep = ht_mm__page_end(c->addr, c->len < c->newlen ? c->len : c->newlen);
	uint64_t res = ht_mm__page_down(c->res), grow_lo = res + (oldend - lo);
	size_t i = ht_mmranges__first(m, lo), n = 0;
	while (i + n < m->n && m->v[i + n].lo < keep)
		n++;
	struct ht_mmrange one, *moved = n > 1 ? ht_xmalloc(n * sizeof(*moved)) : &one;
	for (size_t k = 0; k < n; k++) {
		const struct ht_mmrange *r = &m->v[i + k];
		moved[k].lo = (r->lo > lo ? r->lo : lo) - lo + res;
		moved[k].hi = (r->hi < keep ? r->hi : keep) - lo + res;
	}
	ht_mmranges__del(m, lo, oldend);
	if (res != lo)
		ht_mmranges__del(m, res, ht_mm__page_end(c->res, c->newlen));
	for (size_t k = 0; k < n; k++)
		ht_mmranges__add(m, moved[k].lo, moved[k].hi);
	if (c->newlen > c->len)
		ht_mmranges__add(m, grow_lo, ht_mm__page_end(c->res, c->newlen));
	if (moved != &one)
		free(moved);
}

#endif
