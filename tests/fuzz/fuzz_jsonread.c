/* libFuzzer target for the JSON reader (src/common/jsonread.c), which
 * `heaptrail report --compare FILE` uses on files a user gives it.
 *
 * Each input is copied into a buffer of exactly its size (no NUL after
 * it: ASan reports any read past len) and parsed with ht_jvalue__parse.
 * Beyond "no crash, no hang, no leak", it checks what holds for any input:
 *
 *   - the reader accepts exactly the JSON texts (RFC 8259) a second,
 *     independent parser here accepts, with the reader's documented limits
 *     (jsonread.h): at most HT_JSON_MAX_DEPTH nested containers, no
 *     \u0000, no number beyond the range of a double; and it builds the
 *     tree that parser reads: the same types, counts, member names in
 *     order, decoded strings byte for byte (a valid UTF-8 sequence as it
 *     is, any other byte as its Latin-1 character, a surrogate pair as its
 *     character, a lone surrogate as U+FFFD), numbers as strtod reads them;
 *   - a tree is consistent: n items, keys for every member of an object
 *     and none elsewhere, strings NUL-terminated and valid UTF-8 (the
 *     policy of markup.c's ht_utf8_len), numbers finite, booleans 0 or 1;
 *     ht_jvalue__get finds each member name (its first occurrence);
 *   - the tree written back with the writer (src/common/json.c, compact
 *     or pretty) parses again into the same tree, numbers as the writer's
 *     "%.6g" gives them;
 *   - a refused input leaves "line L, column C: what" in err, with L and C
 *     a position in the input (C at most one past the end of line L).
 *
 * A broken promise aborts, which libFuzzer reports like a crash.
 *
 * Build (clang): see tests/fuzz/run.sh or tests/fuzz/CMakeLists.txt.
 * Without clang, tests/fuzz/run_corpus.c runs the same function over the
 * corpus and the saved regressions (ctest fuzz.jsonread_corpus). */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/jsonread.h"
#include "common/markup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what, size_t at)
{
	fprintf(stderr, "fuzz_jsonread: broken promise: %s (at byte %zu)\n", what, at);
	abort();
}

/* ---- the second parser: RFC 8259, walked along the reader's tree ---- */

struct ref {
	const unsigned char *s, *p, *end;
	int ok; /* still a JSON text */
};

static int ref_fail(struct ref *r)
{
	r->ok = 0;
	return 0;
}

static void ref_ws(struct ref *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

/* Length of the valid UTF-8 sequence at p (at most avail bytes), or 0;
 * written apart from ht_utf8_len: by the table of RFC 3629, section 4. */
static int ref_utf8(const unsigned char *p, size_t avail)
{
	unsigned char c = p[0];
	unsigned char lo = 0x80, hi = 0xbf;
	int n;
	if (c <= 0x7f)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c == 0xe0)
		n = 3, lo = 0xa0;
	else if (c == 0xed)
		n = 3, hi = 0x9f;
	else if (c >= 0xe1 && c <= 0xef)
		n = 3;
	else if (c == 0xf0)
		n = 4, lo = 0x90;
	else if (c == 0xf4)
		n = 4, hi = 0x8f;
	else if (c >= 0xf1 && c <= 0xf3)
		n = 4;
	else
		return 0;
	if ((size_t)n > avail || p[1] < lo || p[1] > hi)
		return 0;
	for (int i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

static size_t ref_put(unsigned char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (unsigned char)(0xc0 | cp >> 6);
		o[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (unsigned char)(0xe0 | cp >> 12);
		o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | cp >> 18);
	o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

/* \uXXXX at p (the backslash): the code unit, or -1. */
static long ref_u(const unsigned char *p, const unsigned char *end)
{
	if (end - p < 6 || p[0] != '\\' || p[1] != 'u')
		return -1;
	long v = 0;
	for (int i = 2; i < 6; i++) {
		int d;
		if (p[i] >= '0' && p[i] <= '9')
			d = p[i] - '0';
		else if ((p[i] | 0x20) >= 'a' && (p[i] | 0x20) <= 'f')
			d = (p[i] | 0x20) - 'a' + 10;
		else
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/* At the opening quote: decodes into a malloc'd string (*out), or fails. */
static int ref_string(struct ref *r, unsigned char **out, size_t *outlen)
{
	size_t cap = 2 * (size_t)(r->end - r->p) + 8, n = 0;
	unsigned char *o = malloc(cap);
	if (!o)
		abort();
	r->p++;
	for (;;) {
		if (r->p >= r->end)
			goto bad;
		unsigned char c = *r->p;
		if (c == '"')
			break;
		if (c < 0x20)
			goto bad;
		if (c != '\\') {
			int k = ref_utf8(r->p, (size_t)(r->end - r->p));
			if (k) {
				memcpy(o + n, r->p, (size_t)k);
				n += (size_t)k;
				r->p += k;
			} else {
				n += ref_put(o + n, c); /* the Latin-1 character */
				r->p++;
			}
			continue;
		}
		if (r->end - r->p < 2)
			goto bad;
		const char *simple = strchr("\"\\/bfnrt", r->p[1]);
		if (simple && r->p[1]) {
			o[n++] = (unsigned char)"\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
			r->p += 2;
			continue;
		}
		long u = ref_u(r->p, r->end);
		if (u < 0)
			goto bad;
		r->p += 6;
		if (u == 0)
			goto bad;
		if (u >= 0xd800 && u <= 0xdbff) {
			long l = ref_u(r->p, r->end);
			if (l >= 0xdc00 && l <= 0xdfff) {
				r->p += 6;
				u = 0x10000 + ((u - 0xd800) << 10) + (l - 0xdc00);
			} else {
				u = 0xfffd;
			}
		} else if (u >= 0xdc00 && u <= 0xdfff) {
			u = 0xfffd;
		}
		n += ref_put(o + n, (unsigned)u);
	}
	r->p++;
	o[n] = 0;
	*out = o;
	*outlen = n;
	return 1;
bad:
	free(o);
	return ref_fail(r);
}

static int digits(struct ref *r)
{
	const unsigned char *q = r->p;
	while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
		r->p++;
	return r->p > q;
}

static int ref_number(struct ref *r, double *num)
{
	const unsigned char *q = r->p;
	if (r->p < r->end && *r->p == '-')
		r->p++;
	if (r->p < r->end && *r->p == '0')
		r->p++;
	else if (!digits(r))
		return ref_fail(r);
	if (r->p < r->end && *r->p == '.') {
		r->p++;
		if (!digits(r))
			return ref_fail(r);
	}
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		r->p++;
		if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
			r->p++;
		if (!digits(r))
			return ref_fail(r);
	}
	char *tok = strndup((const char *)q, (size_t)(r->p - q));
	if (!tok)
		abort();
	*num = strtod(tok, NULL);
	free(tok);
	if (isinf(*num))
		return ref_fail(r); /* beyond the range of a double: refused */
	return 1;
}

static int ref_lit(struct ref *r, const char *w)
{
	size_t n = strlen(w);
	if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n))
		return 0;
	r->p += n;
	return 1;
}

/* Parses one value at depth (containers around it); v is the reader's tree
 * for it, or NULL when the reader refused the input (then only the
 * grammar is checked). */
static int ref_value(struct ref *r, const struct ht_jvalue *v, int depth)
{
	ref_ws(r);
	if (r->p >= r->end)
		return ref_fail(r);
	size_t at = (size_t)(r->p - r->s);
	unsigned char c = *r->p;
	if (c == '{' || c == '[') {
		int obj = c == '{';
		if (depth >= HT_JSON_MAX_DEPTH)
			return ref_fail(r);
		if (v && v->type != (obj ? HT_JOBJ : HT_JARR))
			broken("a container of another type", at);
		r->p++;
		ref_ws(r);
		size_t n = 0;
		if (r->p < r->end && *r->p == (obj ? '}' : ']')) {
			r->p++;
		} else {
			for (;; n++) {
				const struct ht_jvalue *it = v && n < v->n ? &v->items[n] : NULL;
				if (v && !it)
					broken("fewer items than the text has", at);
				if (obj) {
					unsigned char *k;
					size_t klen;
					ref_ws(r);
					if (r->p >= r->end || *r->p != '"' || !ref_string(r, &k, &klen))
						return ref_fail(r);
					if (v && (strlen(v->keys[n]) != klen || memcmp(v->keys[n], k, klen)))
						broken("a member name decoded otherwise", at);
					free(k);
					ref_ws(r);
					if (r->p >= r->end || *r->p != ':')
						return ref_fail(r);
					r->p++;
				}
				if (!ref_value(r, it, depth + 1))
					return 0;
				ref_ws(r);
				if (r->p < r->end && *r->p == ',') {
					r->p++;
					continue;
				}
				if (r->p < r->end && *r->p == (obj ? '}' : ']')) {
					r->p++;
					n++;
					break;
				}
				return ref_fail(r);
			}
		}
		if (v && v->n != n)
			broken("an item count other than the text's", at);
		return 1;
	}
	if (c == '"') {
		unsigned char *s;
		size_t len;
		if (!ref_string(r, &s, &len))
			return 0;
		if (v && (v->type != HT_JSTR || strlen(v->str) != len || memcmp(v->str, s, len)))
			broken("a string decoded otherwise", at);
		free(s);
		return 1;
	}
	if (ref_lit(r, "true") || ref_lit(r, "false")) {
		if (v && (v->type != HT_JBOOL || v->num != (c == 't')))
			broken("a boolean read otherwise", at);
		return 1;
	}
	if (ref_lit(r, "null")) {
		if (v && v->type != HT_JNULL)
			broken("a null read otherwise", at);
		return 1;
	}
	double num;
	if (!ref_number(r, &num))
		return 0;
	if (v && (v->type != HT_JNUM || v->num != num || signbit(v->num) != signbit(num)))
		broken("a number read otherwise", at);
	return 1;
}

/* Whether data is a JSON text the reader must accept; v its tree or NULL. */
static int ref_parse(const uint8_t *data, size_t size, const struct ht_jvalue *v)
{
	struct ref r = {data, data, data + size, 1};
	if (!ref_value(&r, v, 0))
		return 0;
	ref_ws(&r);
	return r.p == r.end;
}

/* ---- the tree ---- */

static void check_tree(const struct ht_jvalue *v, int depth)
{
	if (depth > HT_JSON_MAX_DEPTH)
		broken("a tree deeper than HT_JSON_MAX_DEPTH", (size_t)depth);
	switch (v->type) {
	case HT_JNULL:
	case HT_JBOOL:
	case HT_JNUM:
		if (v->items || v->keys || v->str || v->n)
			broken("a scalar with items or a string", 0);
		if (!isfinite(v->num) || (v->type == HT_JBOOL && v->num != 0 && v->num != 1))
			broken("a number not finite, or a boolean not 0 or 1", 0);
		if (v->type == HT_JNULL && v->num != 0)
			broken("a null with a number", 0);
		break;
	case HT_JSTR: {
		if (!v->str || v->items || v->keys || v->n)
			broken("a string without its text", 0);
		size_t len = strlen(v->str);
		for (size_t i = 0; i < len;) {
			int k = ht_utf8_len((const unsigned char *)v->str + i, len - i);
			if (k <= 0)
				broken("a string that is not valid UTF-8", i);
			i += (size_t)k;
		}
		break;
	}
	case HT_JARR:
	case HT_JOBJ:
		if (v->str || (v->n && !v->items))
			broken("a container without its items", v->n);
		if ((v->type == HT_JOBJ) != (v->keys != NULL) && v->n)
			broken("member names on an array, or none on an object", v->n);
		for (size_t i = 0; i < v->n; i++) {
			if (v->type == HT_JOBJ) {
				if (!v->keys[i])
					broken("a member without a name", i);
				check_tree(&v->items[i], depth + 1);
				const struct ht_jvalue *g = ht_jvalue__get(v, v->keys[i]);
				if (!g || g > &v->items[i] || strcmp(v->keys[g - v->items], v->keys[i]))
					broken("ht_jvalue__get misses a member", i);
				if (ht_jvalue__str(v, v->keys[i]) != (g->type == HT_JSTR ? g->str : NULL))
					broken("ht_jvalue__str", i);
				double d = ht_jvalue__num(v, v->keys[i], -7.5);
				if (g->type == HT_JNUM ? d != g->num : d != -7.5)
					broken("ht_jvalue__num", i);
			} else {
				check_tree(&v->items[i], depth + 1);
			}
		}
		break;
	default:
		broken("an unknown type", (size_t)v->type);
	}
}

/* ---- written back with json.c ---- */

static void write_tree(struct ht_json *j, const char *key, const struct ht_jvalue *v)
{
	switch (v->type) {
	case HT_JNULL: ht_json__null(j, key); break;
	case HT_JBOOL: ht_json__bool(j, key, v->num != 0); break;
	case HT_JNUM: ht_json__double(j, key, v->num); break;
	case HT_JSTR: ht_json__str(j, key, v->str); break;
	case HT_JARR:
		ht_json__arr_begin(j, key);
		for (size_t i = 0; i < v->n; i++)
			write_tree(j, NULL, &v->items[i]);
		ht_json__arr_end(j);
		break;
	case HT_JOBJ:
		ht_json__obj_begin(j, key);
		for (size_t i = 0; i < v->n; i++)
			write_tree(j, v->keys[i], &v->items[i]);
		ht_json__obj_end(j);
		break;
	}
}

/* b is a as the writer gave it back. */
static void same_tree(const struct ht_jvalue *a, const struct ht_jvalue *b)
{
	if (a->type != b->type || a->n != b->n)
		broken("written back: another type or count", a->n);
	switch (a->type) {
	case HT_JNUM: {
		char buf[64];
		snprintf(buf, sizeof(buf), "%.6g", a->num);
		if (b->num != strtod(buf, NULL))
			broken("written back: another number", 0);
		break;
	}
	case HT_JBOOL:
		if (a->num != b->num)
			broken("written back: another boolean", 0);
		break;
	case HT_JSTR:
		if (strcmp(a->str, b->str))
			broken("written back: another string", 0);
		break;
	case HT_JARR:
	case HT_JOBJ:
		for (size_t i = 0; i < a->n; i++) {
			if (a->type == HT_JOBJ && strcmp(a->keys[i], b->keys[i]))
				broken("written back: another member name", i);
			same_tree(&a->items[i], &b->items[i]);
		}
		break;
	default:
		break;
	}
}

static void round_trip(const struct ht_jvalue *v, int pretty)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		abort();
	struct ht_json j;
	ht_json__init(&j, f, pretty);
	write_tree(&j, NULL, v);
	ht_json__finish(&j);
	fclose(f);
	if (j.depth != 0)
		broken("written back: the writer's depth is not 0 at the end", (size_t)j.depth);
	char err[256];
	err[0] = 0;
	struct ht_jvalue *w = ht_jvalue__parse(text, len, err, sizeof(err));
	if (!w) {
		fprintf(stderr, "fuzz_jsonread: %s\n--- written back:\n%s\n", err, text);
		broken("written back: the reader refuses the writer's output", 0);
	}
	if (!ref_parse((const uint8_t *)text, len, w))
		broken("written back: not JSON", 0);
	same_tree(v, w);
	ht_jvalue__free(w);
	free(text);
}

/* ---- a refused input ---- */

static void check_error(const uint8_t *data, size_t size, const char *err)
{
	size_t line, col;
	int at = -1;
	if (!strcmp(err, "out of memory"))
		return;
	if (sscanf(err, "line %zu, column %zu: %n", &line, &col, &at) != 2 || at < 0 || !err[at])
		broken("an error message not 'line L, column C: what'", 0);
	size_t l = 1, start = 0;
	for (size_t i = 0; i < size && l < line; i++)
		if (data[i] == '\n')
			l++, start = i + 1;
	if (line == 0 || l != line)
		broken("an error on a line the input does not have", line);
	size_t linelen = 0;
	while (start + linelen < size && data[start + linelen] != '\n')
		linelen++;
	if (col == 0 || col > linelen + 1)
		broken("an error in a column the line does not have", col);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* exactly size bytes, no NUL after them: any read past len is an
	 * ASan report */
	char *text = malloc(size ? size : 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	char err[256];
	memset(err, 'x', sizeof(err) - 1);
	err[sizeof(err) - 1] = 0;
	struct ht_jvalue *v = ht_jvalue__parse(text, size, err, sizeof(err));
	int json = ref_parse(data, size, v);
	if (v && !json)
		broken("accepted a text that is not JSON (or beyond the documented limits)", 0);
	if (!v && json)
		broken("refused a JSON text within the documented limits", 0);
	if (v) {
		check_tree(v, 0);
		round_trip(v, size & 1);
		ht_jvalue__free(v);
	} else {
		check_error(data, size, err);
	}
	free(text);
	return 0;
}
