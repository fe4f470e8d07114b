/* Leak suppressions, shared by leaks and report (suppressions.h). */
#define _GNU_SOURCE
#include "analyze/suppressions.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "symbols/symbolize.h"

#define MAX_DEPTH 256 /* nodes of a stack walked at a time */

/* What glibc and ld.so allocate and keep (or free only in __libc_freeres,
 * which valgrind runs and a traced program does not): the dynamic thread
 * vector of each thread (kept in the cache of thread stacks after the
 * thread ends) and its growth when a library with TLS is dlopen'ed. */
static const char *const default_suppressions[] = {
    "allocate_dtv",
    "_dl_allocate_tls",
    "_dl_resize_dtv",
    "_dl_update_slotinfo",
};

static void add_pattern(struct ht_suppressions *s, const char *p)
{
	s->patterns = ht_grow(s->patterns, &s->cap, s->n + 1, sizeof(*s->patterns));
	/* LSan matches anywhere in the name: so does a pattern here */
	if (asprintf(&s->patterns[s->n++], "*%s*", p) < 0)
		ht_oom();
}

void ht_suppressions__add_defaults(struct ht_suppressions *s)
{
	for (size_t i = 0; i < sizeof(default_suppressions) / sizeof(*default_suppressions); i++)
		add_pattern(s, default_suppressions[i]);
}

int ht_suppressions__load(struct ht_suppressions *s, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		ht_error("cannot read suppressions %s: %m", path);
		return -1;
	}
	char line[1024];
	while (fgets(line, sizeof(line), f)) {
		char *p = line;
		p[strcspn(p, "#\r\n")] = 0;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!strncmp(p, "leak:", 5))
			p += 5;
		size_t n = strlen(p);
		while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			p[--n] = 0;
		if (!n)
			continue;
		add_pattern(s, p);
	}
	fclose(f);
	return 0;
}

int ht_suppressions__frame(const struct ht_suppressions *s, const struct ht_frame *f)
{
	for (size_t i = 0; i < s->n; i++) {
		const char *p = s->patterns[i];
		if ((f->function && !fnmatch(p, f->function, 0)) ||
		    (f->file && !fnmatch(p, f->file, 0)) ||
		    (f->module && !fnmatch(p, f->module, 0)))
			return 1;
	}
	return 0;
}

/* Whether a pattern matches one of node's own frames (its inlined ones
 * included; the recorder's own wrappers are not looked at). */
static int node_matches(const struct ht_suppressions *s, struct ht_reader *r,
			struct ht_symbolizer *sym, uint32_t node)
{
	const struct ht_frame *f;
	size_t nf = ht_symbolizer__resolve_in(sym, ht_reader__node_ip(r, node),
					      ht_reader__node_module(r, node), &f);
	for (size_t j = 0; j < nf; j++)
		if (!ht_symbols__is_recorder(f[j].module) && ht_suppressions__frame(s, &f[j]))
			return 1;
	return 0;
}

int ht_suppressions__stack(struct ht_suppressions *s, struct ht_reader *r,
			   struct ht_symbolizer *sym, uint32_t node)
{
	if (!s->n || !node)
		return 0;
	/* Stacks share their outer frames: each node is matched once, and a
	 * stack is suppressed if its node or any node outside it is
	 * (s->memo: 0 not yet, 1 no, 2 yes); MAX_DEPTH nodes at a time. */
	size_t nn = ht_reader__nnodes(r) + 1;
	if (s->nmemo < nn) {
		s->memo = ht_xrealloc(s->memo, nn);
		memset(s->memo + s->nmemo, 0, nn - s->nmemo);
		s->nmemo = nn;
	}
	uint32_t chain[MAX_DEPTH];
	size_t n = 0;
	for (uint32_t x = node; x && x < nn && !s->memo[x] && n < MAX_DEPTH;
	     x = ht_reader__node_parent(r, x))
		chain[n++] = x;
	uint8_t outer = 1;
	if (n) {
		/* the node outside the chain: known, or (a stack deeper than
		 * the chain) found the same way */
		uint32_t p = ht_reader__node_parent(r, chain[n - 1]);
		if (p && p < nn)
			outer = s->memo[p] ? s->memo[p] : ht_suppressions__stack(s, r, sym, p) ? 2 : 1;
	}
	while (n--) {
		uint32_t x = chain[n];
		outer = outer == 2 || node_matches(s, r, sym, x) ? 2 : 1;
		s->memo[x] = outer;
	}
	return node < nn && s->memo[node] == 2;
}

void ht_suppressions__free(struct ht_suppressions *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->patterns[i]);
	free(s->patterns);
	free(s->memo);
	memset(s, 0, sizeof(*s));
}
