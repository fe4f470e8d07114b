/* The live heap as a tree of allocation sites (export.h), massif's view. */
#define _GNU_SOURCE
#include "export.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/blocks.h"
#include "analyze/pass.h"
#include "common/util.h"

#define MAX_FRAMES 1024

const char *ht_export__frame_label(char **buf, size_t *cap, const struct ht_frame *f)
{
	const char *fn = f->function ? f->function : "???";
	for (;;) {
		int n;
		if (f->file)
			n = snprintf(*buf, *cap, "%s (%s:%d)", fn, f->file, f->line);
		else if (f->module)
			n = snprintf(*buf, *cap, "%s (in %s)", fn, f->module);
		else
			n = snprintf(*buf, *cap, "%s", fn);
		size_t need = n > 0 ? (size_t)n + 1 : 1;
		if (*buf && need <= *cap)
			return *buf;
		*cap = need > 2 * *cap ? need : 2 * *cap; /* (the whole label, never cut) */
		*buf = ht_xrealloc(*buf, *cap);
	}
}

static struct ht_site *child(struct ht_sitetree *t, struct ht_site *s, uint64_t ip,
			     const char *label)
{
	for (size_t i = 0; i < s->nkids; i++)
		if (s->kids[i].ip == ip && !strcmp(s->kids[i].label, label))
			return &s->kids[i];
	if (s->nkids == s->capkids) {
		s->capkids = s->capkids ? 2 * s->capkids : 4;
		s->kids = ht_xrealloc(s->kids, s->capkids * sizeof(*s->kids));
	}
	struct ht_site *k = &s->kids[s->nkids++];
	memset(k, 0, sizeof(*k));
	k->ip = ip;
	k->label = ht_xstrdup(label);
	t->nsites++;
	return k;
}

static int by_bytes(const void *a, const void *b)
{
	const struct ht_site *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return strcmp(x->label, y->label);
}

static void sort_tree(struct ht_site *s)
{
	if (s->nkids > 1)
		qsort(s->kids, s->nkids, sizeof(*s->kids), by_bytes);
	for (size_t i = 0; i < s->nkids; i++)
		sort_tree(&s->kids[i]);
}

static void free_site(struct ht_site *s)
{
	for (size_t i = 0; i < s->nkids; i++)
		free_site(&s->kids[i]);
	free(s->kids);
	free(s->label);
}

struct group {
	uint32_t node;   /* stack node */
	uint64_t bytes;  /* live requested bytes */
	uint64_t blocks; /* live blocks */
};

static int by_node(const void *a, const void *b)
{
	const struct group *x = a, *y = b;
	return x->node < y->node ? -1 : x->node > y->node;
}

void ht_sitetree__build(struct ht_sitetree *t, const struct ht_livemap *live,
			struct ht_reader *r, struct ht_symbolizer *sym, size_t max_depth)
{
	static struct ht_frame frames[MAX_FRAMES];
	char *label = NULL;
	size_t cap = 0;
	memset(t, 0, sizeof(*t));
	t->max_depth = max_depth < MAX_FRAMES ? max_depth : MAX_FRAMES;
	struct group *g = ht_xrealloc(NULL, live->count * sizeof(*g));
	size_t ng = 0;
	for (size_t i = 0; i < live->cap; i++) {
		const struct ht_block *b = &live->slots[i];
		if (b->ptr && !ht_block__forgotten(b) && ng < live->count)
			g[ng++] = (struct group){b->aux, b->size * b->weight, b->weight};
	}
	if (ng > 1)
		qsort(g, ng, sizeof(*g), by_node);
	for (size_t i = 0; i < ng;) {
		struct group one = g[i++];
		while (i < ng && g[i].node == one.node) {
			one.bytes += g[i].bytes;
			one.blocks += g[i++].blocks;
		}
		t->root.bytes += one.bytes;
		t->root.blocks += one.blocks;
		size_t n = one.node ? ht_blocks__frames(r, sym, one.node, frames, t->max_depth) : 0;
		struct ht_site *s = &t->root;
		if (!n) {
			s = child(t, s, 0, ht_blocks__no_stack_frame(r));
			s->bytes += one.bytes;
			s->blocks += one.blocks;
		}
		for (size_t k = 0; k < n; k++) {
			s = child(t, s, frames[k].ip,
				  ht_export__frame_label(&label, &cap, &frames[k]));
			s->bytes += one.bytes;
			s->blocks += one.blocks;
		}
	}
	free(label);
	free(g);
	sort_tree(&t->root);
}

void ht_sitetree__free(struct ht_sitetree *t)
{
	free_site(&t->root);
	memset(t, 0, sizeof(*t));
}
