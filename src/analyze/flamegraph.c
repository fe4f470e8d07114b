/* Folded stacks for flame graphs (heaptrail flamegraph, report): the
 * stacks of a trace's stack statistics joined into "a;b;c" lines with the
 * value of a metric. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "analyze/blocks.h"
#include "analyze/flamegraph.h"
#include "analyze/flamesvg.h"
#include "analyze/stackstats.h"
#include "common/util.h"

#define MAX_FRAMES 1024

enum metric {
	M_ALLOCATED = HT_FLAME_ALLOCATED,
	M_ALLOCATIONS = HT_FLAME_ALLOCATIONS,
	M_LEAKED = HT_FLAME_LEAKED,
	M_PEAK = HT_FLAME_PEAK,
	M_TEMPORARY = HT_FLAME_TEMPORARY,
};

/* The metric's value of a stack, and the allocations behind it. */
static void metric_of(enum metric m, const struct ht_stackstat *st, uint64_t *value,
		      uint64_t *count)
{
	switch (m) {
	case M_ALLOCATED:
		*value = st->alloc_bytes, *count = st->alloc_calls;
		break;
	case M_ALLOCATIONS:
		*value = *count = st->alloc_calls;
		break;
	case M_LEAKED:
		*value = st->end_bytes, *count = st->end_blocks;
		break;
	case M_PEAK:
		*value = st->peak_bytes, *count = st->peak_blocks;
		break;
	case M_TEMPORARY:
		*value = *count = st->temp_calls;
		break;
	}
}

/* ---- folded stacks ------------------------------------------------------------- */

static int by_stack(const void *a, const void *b)
{
	const struct ht_flame_stack *x = a, *y = b;
	return strcmp(x->stack, y->stack);
}

struct ht_flame_stack *ht_flamegraph__fold(struct ht_reader *r, struct ht_symbolizer *sym,
					   const struct ht_stackstats *ss, int metric, int reverse,
					   size_t *nout)
{
	enum metric m = (enum metric)metric;
	static struct ht_frame frames[MAX_FRAMES];
	struct ht_flame_stack *out = ht_xcalloc(ss->n ? ss->n : 1, sizeof(*out));
	size_t n = 0;
	for (size_t i = 0; i < ss->cap; i++) {
		const struct ht_stackstat *st = &ss->slots[i];
		uint64_t value = 0, count = 0;
		if (!st->node)
			continue;
		metric_of(m, st, &value, &count);
		if (!value)
			continue;
		size_t nf = st->node > 1 ? ht_blocks__frames(r, sym, st->node - 1, frames, MAX_FRAMES) : 0;
		char *s = ht_flame__join(frames, nf, reverse);
		out[n].stack = s;
		out[n].value = value;
		out[n].count = count;
		n++;
	}
	qsort(out, n, sizeof(*out), by_stack);
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (o && !strcmp(out[o - 1].stack, out[i].stack)) {
			out[o - 1].value += out[i].value;
			out[o - 1].count += out[i].count;
			free(out[i].stack);
			continue;
		}
		out[o++] = out[i];
	}
	*nout = o;
	return out;
}
