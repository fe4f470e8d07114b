/* JSON reader (jsonread.h): recursive descent, at most HT_JSON_MAX_DEPTH deep. */
#define _GNU_SOURCE
#include "jsonread.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "markup.h"

struct parser {
	const char *s, *end; /* input */
	const char *p;       /* position */
	char *err;           /* message buffer */
	size_t errlen;       /* its size */
	int failed;          /* an error was reported */
};

static void fail(struct parser *ps, const char *what)
{
	if (ps->failed)
		return;
	ps->failed = 1;
	size_t line = 1, col = 1;
	for (const char *c = ps->s; c < ps->p && c < ps->end; c++) {
		if (*c == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	snprintf(ps->err, ps->errlen, "line %zu, column %zu: %s", line, col, what);
}

static void *xalloc(struct parser *ps, void *old, size_t n, size_t size)
{
	size_t bytes = n * size;
	void *p = realloc(old, bytes ? bytes : 1);
	if (!p)
		fail(ps, "out of memory");
	return p;
}

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static int lit(struct parser *ps, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(ps->end - ps->p) >= n && !memcmp(ps->p, word, n)) {
		ps->p += n;
		return 1;
	}
	return 0;
}

static int hex4(struct parser *ps, unsigned *out)
{
	if (ps->end - ps->p < 4)
		return 0;
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char c = ps->p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return 0;
	}
	ps->p += 4;
	*out = v;
	return 1;
}

/* Takes a low surrogate's escape (u+DC00..DFFF) at p into *lo, or leaves p
 * where it is. */
static int low_surrogate(struct parser *ps, unsigned *lo)
{
	const char *at = ps->p;
	if (lit(ps, "\\u") && hex4(ps, lo) && *lo >= 0xdc00 && *lo < 0xe000)
		return 1;
	ps->p = at;
	return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* At the opening quote; returns the decoded string or NULL. */
static char *string(struct parser *ps)
{
	ps->p++;
	const char *q = ps->p;
	while (q < ps->end && *q != '"')
		q += *q == '\\' ? 2 : 1;
	/* an upper bound of the decoded size: a byte that is not UTF-8 takes
	 * two (its Latin-1 character), an escape no more than itself */
	char *out = xalloc(ps, NULL, 2 * (size_t)(q - ps->p) + 4, 1), *o = out;
	if (!out)
		return NULL;
	while (ps->p < ps->end && *ps->p != '"') {
		unsigned char c = (unsigned char)*ps->p;
		if (c < 0x20) {
			fail(ps, "control character in a string");
			goto bad;
		}
		if (c != '\\') {
			/* valid UTF-8 as it is, any other byte as its Latin-1
			 * character: the writer's policy (json.h), so that every
			 * string read is valid UTF-8 */
			int n = ht_utf8_len((const unsigned char *)ps->p, (size_t)(ps->end - ps->p));
			if (n > 0) {
				memcpy(o, ps->p, (size_t)n);
				o += n;
				ps->p += n;
			} else {
				o += put_utf8(o, c);
				ps->p++;
			}
			continue;
		}
		if (++ps->p >= ps->end)
			break;
		char e = *ps->p++;
		unsigned cp, lo;
		switch (e) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if (!hex4(ps, &cp)) {
				fail(ps, "bad \\u escape");
				goto bad;
			}
			/* a high surrogate takes the low one that follows it;
			 * anything else after it is left to be read on its own */
			if (cp >= 0xd800 && cp < 0xdc00 && low_surrogate(ps, &lo))
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			else if (cp >= 0xd800 && cp < 0xe000)
				cp = 0xfffd; /* a lone surrogate */
			if (cp == 0) {
				fail(ps, "\\u0000 in a string");
				goto bad;
			}
			o += put_utf8(o, cp);
			break;
		default:
			ps->p--;
			fail(ps, "bad escape in a string");
			goto bad;
		}
	}
	if (ps->p >= ps->end) {
		fail(ps, "unterminated string");
		goto bad;
	}
	ps->p++;
	*o = 0;
	return out;
bad:
	free(out);
	return NULL;
}

static int value(struct parser *ps, struct ht_jvalue *v, int depth);

static int container(struct parser *ps, struct ht_jvalue *v, int depth, int obj)
{
	char close = obj ? '}' : ']';
	size_t cap = 0;
	/* depth: the containers around this one; the writer (json.h) takes
	 * as many as the reader */
	if (depth >= HT_JSON_MAX_DEPTH) {
		fail(ps, "nested too deeply");
		return 0;
	}
	v->type = obj ? HT_JOBJ : HT_JARR;
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		return 1;
	}
	for (;;) {
		skip_ws(ps);
		if (v->n == cap) {
			cap = cap ? 2 * cap : 8;
			struct ht_jvalue *items = xalloc(ps, v->items, cap, sizeof(*items));
			if (!items)
				return 0;
			v->items = items;
			if (obj) {
				char **keys = xalloc(ps, v->keys, cap, sizeof(*keys));
				if (!keys)
					return 0;
				v->keys = keys;
			}
		}
		struct ht_jvalue *it = &v->items[v->n];
		memset(it, 0, sizeof(*it));
		if (obj) {
			if (ps->p >= ps->end || *ps->p != '"') {
				fail(ps, "expected a member name in quotes");
				return 0;
			}
			char *k = string(ps);
			if (!k)
				return 0;
			v->keys[v->n] = k;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':') {
				v->n++; /* so that the key is freed */
				fail(ps, "expected ':' after a member name");
				return 0;
			}
			ps->p++;
		}
		v->n++;
		if (!value(ps, it, depth + 1))
			return 0;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			return 1;
		}
		fail(ps, obj ? "expected ',' or '}'" : "expected ',' or ']'");
		return 0;
	}
}

static const char *digits(const char *q, const char *end)
{
	while (q < end && *q >= '0' && *q <= '9')
		q++;
	return q;
}

/* A number as RFC 8259 spells it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
 * (no leading zero, no bare '.' or 'e', no '+' in front), of any length;
 * one beyond the range of a double is refused. */
static int number(struct parser *ps, struct ht_jvalue *v)
{
	const char *q = ps->p, *d;
	if (q < ps->end && *q == '-')
		q++;
	if (q < ps->end && *q == '0') {
		q++;
	} else if ((d = digits(q, ps->end)) > q) {
		q = d;
	} else {
		ps->p = q;
		fail(ps, "expected a value");
		return 0;
	}
	if (q < ps->end && *q == '.') {
		if ((d = digits(q + 1, ps->end)) == q + 1) {
			ps->p = d;
			fail(ps, "expected a digit after '.' in a number");
			return 0;
		}
		q = d;
	}
	if (q < ps->end && (*q == 'e' || *q == 'E')) {
		q++;
		if (q < ps->end && (*q == '+' || *q == '-'))
			q++;
		if ((d = digits(q, ps->end)) == q) {
			ps->p = d;
			fail(ps, "expected a digit in a number's exponent");
			return 0;
		}
		q = d;
	}
	/* strtod wants a NUL after the number, which the text may not have */
	char buf[64], *tmp = NULL, *copy = buf;
	size_t n = (size_t)(q - ps->p);
	if (n >= sizeof(buf) && !(copy = tmp = xalloc(ps, NULL, n + 1, 1)))
		return 0;
	memcpy(copy, ps->p, n);
	copy[n] = 0;
	v->type = HT_JNUM;
	v->num = strtod(copy, NULL);
	free(tmp);
	if (isinf(v->num)) {
		v->num = 0;
		fail(ps, "number out of range");
		return 0;
	}
	ps->p = q;
	return 1;
}

static int value(struct parser *ps, struct ht_jvalue *v, int depth)
{
	skip_ws(ps);
	if (ps->p >= ps->end) {
		fail(ps, "unexpected end of input");
		return 0;
	}
	switch (*ps->p) {
	case '{':
		return container(ps, v, depth, 1);
	case '[':
		return container(ps, v, depth, 0);
	case '"':
		v->type = HT_JSTR;
		v->str = string(ps);
		return v->str != NULL;
	default:
		break;
	}
	if (lit(ps, "true") || lit(ps, "false")) {
		v->type = HT_JBOOL;
		v->num = ps->p[-1] == 'e' && ps->p[-2] == 'u';
		return 1;
	}
	if (lit(ps, "null")) {
		v->type = HT_JNULL;
		return 1;
	}
	return number(ps, v);
}

static void free_inner(struct ht_jvalue *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free_inner(&v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->str);
}

struct ht_jvalue *ht_jvalue__parse(const char *text, size_t len, char *err, size_t errlen)
{
	struct parser ps = {text, text + len, text, err, errlen, 0};
	struct ht_jvalue *v = calloc(1, sizeof(*v));
	if (!v) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (value(&ps, v, 0)) {
		skip_ws(&ps);
		if (ps.p == ps.end)
			return v;
		fail(&ps, "text after the JSON value");
	}
	ht_jvalue__free(v);
	return NULL;
}

const struct ht_jvalue *ht_jvalue__get(const struct ht_jvalue *obj, const char *key)
{
	if (!obj || obj->type != HT_JOBJ)
		return NULL;
	for (size_t i = 0; i < obj->n; i++)
		if (!strcmp(obj->keys[i], key))
			return &obj->items[i];
	return NULL;
}

const char *ht_jvalue__str(const struct ht_jvalue *obj, const char *key)
{
	const struct ht_jvalue *v = ht_jvalue__get(obj, key);
	return v && v->type == HT_JSTR ? v->str : NULL;
}

double ht_jvalue__num(const struct ht_jvalue *obj, const char *key, double dflt)
{
	const struct ht_jvalue *v = ht_jvalue__get(obj, key);
	return v && v->type == HT_JNUM ? v->num : dflt;
}

void ht_jvalue__free(struct ht_jvalue *v)
{
	if (!v)
		return;
	free_inner(v);
	free(v);
}
