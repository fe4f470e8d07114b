/* A counter over time in bounded memory (export.h): time buckets whose
 * width doubles as the trace goes on, each keeping its first, lowest,
 * highest and last value. */
#include "export.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

enum { FIRST, MIN, MAX, LAST };

void ht_series__init(struct ht_series *s, size_t max_points)
{
	memset(s, 0, sizeof(*s));
	s->nbuckets = max_points < 4 ? 1 : max_points / 4;
	s->width = 1024; /* ns; doubles as needed */
	s->b = ht_xcalloc(s->nbuckets, sizeof(*s->b));
}

void ht_series__free(struct ht_series *s)
{
	free(s->b);
	s->b = NULL;
}

/* Folds bucket y (later) into x. */
static void merge(struct ht_series_bucket *x, const struct ht_series_bucket *y)
{
	if (!y->used)
		return;
	if (!x->used) {
		*x = *y;
		return;
	}
	if (y->v[MIN] < x->v[MIN]) {
		x->v[MIN] = y->v[MIN];
		x->t[MIN] = y->t[MIN];
	}
	if (y->v[MAX] > x->v[MAX]) {
		x->v[MAX] = y->v[MAX];
		x->t[MAX] = y->t[MAX];
	}
	x->v[LAST] = y->v[LAST];
	x->t[LAST] = y->t[LAST];
}

static void widen(struct ht_series *s)
{
	for (size_t i = 0; i < s->nbuckets; i++) {
		struct ht_series_bucket m = {0};
		if (2 * i < s->nbuckets)
			merge(&m, &s->b[2 * i]);
		if (2 * i + 1 < s->nbuckets)
			merge(&m, &s->b[2 * i + 1]);
		s->b[i] = m;
	}
	s->width *= 2;
}

void ht_series__add(struct ht_series *s, uint64_t t, uint64_t v)
{
	while (t / s->width >= s->nbuckets)
		widen(s);
	struct ht_series_bucket *b = &s->b[t / s->width];
	if (!b->used) {
		b->used = 1;
		for (int k = 0; k < 4; k++) {
			b->t[k] = t;
			b->v[k] = v;
		}
	} else {
		struct ht_series_bucket one = {{t, t, t, t}, {v, v, v, v}, 1};
		merge(b, &one);
	}
	if (v > s->max)
		s->max = v;
	s->npoints++;
}

size_t ht_series__points(const struct ht_series *s, struct ht_point *out)
{
	size_t n = 0;
	for (size_t i = 0; i < s->nbuckets; i++) {
		const struct ht_series_bucket *b = &s->b[i];
		if (!b->used)
			continue;
		/* first, then min and max in time order, then last */
		int order[4] = {FIRST, MIN, MAX, LAST};
		if (b->t[MAX] < b->t[MIN]) {
			order[1] = MAX;
			order[2] = MIN;
		}
		for (int k = 0; k < 4; k++) {
			struct ht_point pt = {b->t[order[k]], b->v[order[k]]};
			if (!n || out[n - 1].t != pt.t || out[n - 1].v != pt.v)
				out[n++] = pt;
		}
	}
	return n;
}
