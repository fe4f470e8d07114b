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

/* A line's first word and its colon when they read as a suppression type
 * of the sanitizers' files ("race:", "interceptor_via_fun:", "leak:"):
 * a name of letters, digits, '_' or '-', then one colon (a C++ name's
 * "ns::" is not one).  Its length with the colon, or 0. */
static size_t type_prefix(const char *p, size_t n)
{
	size_t k = 0;
	if (!n || !(p[0] == '_' || (p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z')))
		return 0;
	while (k < n && (p[k] == '_' || p[k] == '-' || (p[k] >= 'a' && p[k] <= 'z') ||
			 (p[k] >= 'A' && p[k] <= 'Z') || (p[k] >= '0' && p[k] <= '9')))
		k++;
	if (k == n || p[k] != ':' || (k + 1 < n && p[k + 1] == ':'))
		return 0;
	return k + 1;
}

/* One line (n bytes, no newline): its pattern added, or -1 with err. */
static int parse_line(struct ht_suppressions *s, const char *p, size_t n, const char *name,
		      size_t line, char *err, size_t errlen)
{
	if (n && p[n - 1] == '\r') /* (CRLF) */
		n--;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c == 0 || (c < 0x20 && c != '\t') || c == 0x7f) {
			if (c)
				snprintf(err, errlen,
					 "%s, line %zu: a control byte 0x%02x: not a text file",
					 name, line, c);
			else
				snprintf(err, errlen, "%s, line %zu: a NUL byte: not a text file",
					 name, line);
			return -1;
		}
	}
	const char *hash = memchr(p, '#', n);
	if (hash)
		n = (size_t)(hash - p);
	while (n && (*p == ' ' || *p == '\t'))
		p++, n--;
	while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	size_t t = type_prefix(p, n);
	if (t && (t != 5 || memcmp(p, "leak:", 5))) {
		snprintf(err, errlen, "%s, line %zu: '%.*s' is not a leak suppression", name, line,
			 (int)(t < 64 ? t : 64), p);
		return -1;
	}
	p += t;
	n -= t;
	while (n && (*p == ' ' || *p == '\t')) /* ("leak: f" is f: no name starts with a blank) */
		p++, n--;
	if (!n)
		return 0;
	char *pat = ht_xmalloc(n + 1);
	memcpy(pat, p, n);
	pat[n] = 0;
	add_pattern(s, pat);
	free(pat);
	return 0;
}

int ht_suppressions__parse(struct ht_suppressions *s, const char *text, size_t len,
			   const char *name, char *err, size_t errlen)
{
	size_t had = s->n, line = 1;
	for (const char *p = text, *end = text + len; p < end; line++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		if (parse_line(s, p, (size_t)(eol - p), name, line, err, errlen) < 0) {
			while (s->n > had) /* (nothing of a refused file) */
				free(s->patterns[--s->n]);
			return -1;
		}
		p = nl ? nl + 1 : end;
	}
	return 0;
}

int ht_suppressions__load(struct ht_suppressions *s, const char *path, char *err, size_t errlen)
{
	size_t len;
	char *text = ht_read_file_err(path, HT_SUPPRESSIONS_MAX, &len, err, errlen);
	if (!text)
		return -1;
	int rc = ht_suppressions__parse(s, text, len, path, err, errlen);
	free(text);
	return rc;
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
