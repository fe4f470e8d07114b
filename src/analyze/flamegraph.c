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
#define MAX_NODES 256 /* stack nodes ht_blocks__frames reads */

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

/* The next stack record from *i on with a value of metric m (its value
 * and count in *value, *count), NULL after the last. */
static const struct ht_stackstat *next_valued(const struct ht_stackstats *ss, size_t *i,
					      enum metric m, uint64_t *value, uint64_t *count)
{
	for (; *i < ss->cap; (*i)++) {
		const struct ht_stackstat *st = &ss->slots[*i];
		if (!st->node)
			continue;
		metric_of(m, st, value, count);
		if (*value)
			return &ss->slots[(*i)++];
	}
	return NULL;
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
	size_t n = 0, at = 0;
	const struct ht_stackstat *st;
	uint64_t value, count;
	while ((st = next_valued(ss, &at, m, &value, &count))) {
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

/* ---- the tree straight from the stack nodes ---------------------------------- */

/* A frame's label, grown to its whole name (ht_flame__label), kept for
 * the next. */
struct label {
	char *buf;  /* the last label */
	size_t cap; /* bytes allocated */
};

/* The tree node of a stack's frames, inserted from the outermost. */
static int insert_frames(struct ht_flame_tree *t, const struct ht_frame *fr, size_t n,
			 struct label *lb)
{
	int cur = 0;
	if (!n)
		return ht_flame_tree__child(t, 0, "[no stack]", 10);
	for (size_t k = 0; k < n; k++) {
		size_t len = ht_flame__label(&lb->buf, &lb->cap, &fr[n - 1 - k]);
		if (!len && k == n - 1)
			break; /* (an empty last label ends a folded line: none) */
		cur = ht_flame_tree__child(t, cur, lb->buf, len);
	}
	return cur;
}

/* What the tree of one graph knows of each stack node. */
struct node_memo {
	int id;       /* its tree node + 1, 0: not known yet */
	int nframes;  /* frames from the root to it (the recorder's left out) */
	int depth;    /* nodes from the root to it */
};

/* The tree node of stack node `node` (a reader node, not 0), its frames
 * inserted after those of its callers, each node once per graph.  -1 when
 * the path is longer than ht_blocks__frames reads, or holds an empty
 * label: the caller then inserts that stack's frames as folding would. */
static int node_tree(struct ht_flame_tree *t, struct node_memo *memo, struct ht_reader *r,
		     struct ht_symbolizer *sym, uint32_t node, struct label *lb)
{
	uint32_t chain[MAX_NODES + 1];
	size_t nc = 0;
	for (uint32_t x = node; x && !memo[x].id; x = ht_reader__node_parent(r, x)) {
		if (nc == MAX_NODES + 1)
			return -1;
		chain[nc++] = x;
	}
	uint32_t top = nc ? ht_reader__node_parent(r, chain[nc - 1]) : node;
	int cur = top ? memo[top].id - 1 : 0;
	int nframes = top ? memo[top].nframes : 0, depth = top ? memo[top].depth : 0;
	while (nc--) {
		uint32_t x = chain[nc];
		const struct ht_frame *f;
		size_t nf = ht_symbolizer__resolve_in(sym, ht_reader__node_ip(r, x),
						      ht_reader__node_module(r, x), &f);
		for (size_t j = nf; j-- > 0;) {
			if (ht_symbols__is_recorder(f[j].module))
				continue;
			size_t len = ht_flame__label(&lb->buf, &lb->cap, &f[j]);
			if (!len)
				return -1;
			cur = ht_flame_tree__child(t, cur, lb->buf, len);
			nframes++;
		}
		depth++;
		memo[x] = (struct node_memo){cur + 1, nframes, depth};
	}
	const struct node_memo *m = &memo[node];
	if (m->depth > MAX_NODES || m->nframes > MAX_FRAMES)
		return -1;
	return m->nframes ? m->id - 1 : ht_flame_tree__child(t, 0, "[no stack]", 10);
}

int ht_flamegraph__svg(FILE *f, struct ht_reader *r, struct ht_symbolizer *sym,
		       const struct ht_stackstats *ss, int metric, const struct ht_flame_style *style)
{
	enum metric m = (enum metric)metric;
	static struct ht_frame frames[MAX_FRAMES];
	struct ht_flame_tree *t = ht_flame_tree__new();
	size_t nn = ht_reader__nnodes(r);
	struct node_memo *memo = ht_xcalloc(nn ? nn : 1, sizeof(*memo));
	size_t at = 0;
	const struct ht_stackstat *st;
	uint64_t value, count;
	struct label lb = {NULL, 0};
	while ((st = next_valued(ss, &at, m, &value, &count))) {
		uint32_t node = st->node - 1;
		int id = node && node < nn ? node_tree(t, memo, r, sym, node, &lb) : -1;
		if (id < 0) {
			size_t nf = node ? ht_blocks__frames(r, sym, node, frames, MAX_FRAMES) : 0;
			id = insert_frames(t, frames, nf, &lb);
		}
		ht_flame_tree__add(t, id, value, count, 0);
	}
	free(lb.buf);
	free(memo);
	int drawn = ht_flame_tree__svg(f, t, style);
	ht_flame_tree__free(t);
	return drawn;
}
