/* Records taken apart and put back together (record.h). */
#include "record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint8_t ht_kind_nf_tab[HT_EV_NR];
static uint8_t kind_has_str[HT_EV_NR]; /* the kind has an 'S' field */

__attribute__((constructor)) static void kind_nf_init(void)
{
	for (unsigned k = 0; k < HT_EV_NR; k++) {
		ht_kind_nf_tab[k] = (uint8_t)strlen(ht_kind_descs[k].fields);
		kind_has_str[k] = strchr(ht_kind_descs[k].fields, 'S') != NULL;
	}
}

/* The strings of rec's 'S' fields, after its values at *pp: *pp moves
 * past them; -1 with *why set if they do not fit. */
static int parse_strings(struct ht_rec *rec, const uint8_t **pp, const uint8_t *end,
			 const char **why)
{
	const struct ht_kind_desc *d = &ht_kind_descs[rec->kind];
	const uint8_t *p = *pp;
	for (unsigned i = 0; i < rec->nf; i++) {
		if (d->fields[i] != 'S')
			continue;
		if (rec->f[i] > HT_MAX_STR || (uint64_t)(end - p) < rec->f[i]) {
			*why = "bad string length";
			return -1;
		}
		rec->str = p;
		p += rec->f[i];
	}
	*pp = p;
	return 0;
}

/* Bytes before a record's end that its kind byte, escape, tag and values
 * take at most (2 + 5 + 9 * 8 = 79), the 8-byte load of its last value
 * included: with this many left, parse_fixed reads without a bound. */
#define PARSE_SAFE 80

const uint64_t ht_rec_len_mask[9] = {
	0, 0xff, 0xffff, 0xffffff, 0xffffffffull, 0xffffffffffull, 0xffffffffffffull,
	0xffffffffffffffull, ~0ull,
};

/* A short record (version 6, format.h) at p, taken as its long form: the
 * kind byte with its flags, every value, slack and timestamp field 0. */
static size_t parse_short(struct ht_rec *rec, const uint8_t *p, const uint8_t *end,
			  const char **why)
{
	unsigned kb = p[0];
	if (kb & HT_F_STACK) {
		*why = "unknown event kind";
		return 0;
	}
	unsigned nonmain = (kb & HT_SHORT_NONMAIN) << 3, cs = 0, cp;
	if (kb & HT_SHORT_FREE) {
		cp = kb & 7;
		rec->kind = HT_EV_FREE;
		rec->nf = 1;
	} else {
		cs = ((kb >> 2) & 1) + 1;
		cp = kb & 3;
		rec->kind = HT_EV_MALLOC;
		rec->nf = 3;
	}
	if ((size_t)(end - p) < 1 + cs + cp) {
		*why = "truncated record";
		return 0;
	}
	rec->kb = (uint8_t)(rec->kind | nonmain);
	rec->has_stack = 0;
	rec->str = NULL;
	uint64_t size = 0, pd = 0;
	memcpy(&size, p + 1, cs); /* little endian host */
	memcpy(&pd, p + 1 + cs, cp);
	if (cs) {
		rec->f[0] = size;
		rec->f[1] = pd;
		rec->f[2] = 0;
		rec->f[3] = 0;
	} else {
		rec->f[0] = pd;
		rec->f[1] = 0;
	}
	return 1 + cs + cp;
}

/* ht_rec__parse with PARSE_SAFE bytes left at least: no read needs a
 * bound, and the values are read without a branch each (a masked 8-byte
 * load).  The same results and messages: no record can be cut short here,
 * and a length above 8 is refused before any value is read. */
static size_t parse_fixed(struct ht_rec *rec, const uint8_t *p, const uint8_t *end,
			  const char **why)
{
	const uint8_t *start = p;
	uint8_t kb = *p++;
	unsigned kind = kb & HT_KIND_MASK;
	if (kind == HT_EV_EXT)
		kind = 32u + *p++;
	if (kind >= HT_EV_NR) {
		*why = "unknown event kind";
		return 0;
	}
	unsigned nf = ht_kind_nf(kind);
	unsigned nv = nf + 1 + ((kb & HT_F_STACK) != 0); /* fields, timestamp, stack */
	unsigned tb = (nv + 1) / 2;
	uint64_t tag = ht_rec__value(p, 8) & ((1ull << (4 * nv)) - 1); /* nv <= 9 nibbles */
	p += tb;
	if (ht_rec__bad_lengths(tag)) {
		*why = "bad field length";
		return 0;
	}
	rec->kb = kb;
	rec->kind = (uint8_t)kind;
	rec->nf = (uint8_t)nf;
	rec->has_stack = (kb & HT_F_STACK) != 0;
	rec->str = NULL;
	for (unsigned i = 0; i < nv; i++) {
		unsigned len = tag & 15;
		rec->f[i] = ht_rec__value(p, len);
		p += len;
		tag >>= 4;
	}
	if (kind_has_str[kind] && parse_strings(rec, &p, end, why) < 0)
		return 0;
	return (size_t)(p - start);
}

size_t ht_rec__parse(struct ht_rec *rec, const uint8_t *p, const uint8_t *end, uint32_t version,
		     const char **why)
{
	if (p < end && (p[0] & HT_SHORT) == HT_SHORT && version >= HT_VERSION_SHORT)
		return parse_short(rec, p, end, why);
	if (p < end && end - p >= PARSE_SAFE)
		return parse_fixed(rec, p, end, why);
	const uint8_t *start = p;
	if (p >= end) {
		*why = "truncated record";
		return 0;
	}
	uint8_t kb = *p++;
	unsigned kind = kb & HT_KIND_MASK;
	if (kind == HT_EV_EXT) {
		if (p >= end) {
			*why = "truncated record";
			return 0;
		}
		kind = 32u + *p++;
	}
	if (kind >= HT_EV_NR) {
		*why = "unknown event kind";
		return 0;
	}
	unsigned nf = ht_kind_nf(kind);
	unsigned nv = nf + 1 + ((kb & HT_F_STACK) != 0); /* fields, timestamp, stack */
	unsigned tb = (nv + 1) / 2;
	if ((size_t)(end - p) < tb) {
		*why = "truncated record";
		return 0;
	}
	uint64_t tag = 0; /* up to 9 nibbles (7 fields, timestamp, stack) */
	for (unsigned i = 0; i < tb; i++)
		tag |= (uint64_t)*p++ << (8 * i);
	rec->kb = kb;
	rec->kind = (uint8_t)kind;
	rec->nf = (uint8_t)nf;
	rec->has_stack = (kb & HT_F_STACK) != 0;
	rec->str = NULL;
	for (unsigned i = 0; i < nv; i++) {
		unsigned len = (tag >> (4 * i)) & 15;
		if (len > 8) {
			*why = "bad field length";
			return 0;
		}
		if ((size_t)(end - p) < len) {
			*why = "truncated field";
			return 0;
		}
		uint64_t v = 0;
		memcpy(&v, p, len); /* little endian host */
		rec->f[i] = v;
		p += len;
	}
	if (kind_has_str[kind] && parse_strings(rec, &p, end, why) < 0)
		return 0;
	return (size_t)(p - start);
}

static unsigned len_bytes(uint64_t v)
{
	unsigned n = 0;
	while (v) {
		n++;
		v >>= 8;
	}
	return n;
}

size_t ht_rec__encode(const struct ht_rec *rec, uint8_t *out, uint32_t version)
{
	const struct ht_kind_desc *d = &ht_kind_descs[rec->kind];
	unsigned nf = rec->nf;
	if (version >= HT_VERSION_SHORT && !rec->has_stack) {
		unsigned fl = rec->kb & ~HT_KIND_MASK, c0 = len_bytes(rec->f[0]);
		uint8_t *end = NULL;
		if (rec->kind == HT_EV_MALLOC) {
			unsigned c1 = len_bytes(rec->f[1]);
			if (ht_short_malloc_ok(fl, c0, c1, rec->f[2], rec->f[3]))
				end = ht_put_short_malloc(out, fl, rec->f[0], c0, rec->f[1], c1);
		} else if (rec->kind == HT_EV_FREE && ht_short_free_ok(fl, c0, rec->f[1])) {
			end = ht_put_short_free(out, fl, rec->f[0], c0);
		}
		if (end)
			return (size_t)(end - out);
	}
	unsigned nv = nf + 1 + (rec->has_stack != 0);
	unsigned tb = (nv + 1) / 2;
	uint8_t *p = out;
	*p++ = rec->kb;
	if (rec->kind >= 32)
		*p++ = (uint8_t)(rec->kind - 32);
	uint8_t *tag = p;
	memset(tag, 0, tb);
	p += tb;
	for (unsigned i = 0; i < nv; i++) {
		unsigned len = len_bytes(rec->f[i]);
		tag[i / 2] |= (uint8_t)(len << (4 * (i % 2)));
		uint64_t v = rec->f[i];
		memcpy(p, &v, 8); /* out has the slack of HT_MAX_RECORD */
		p += len;
	}
	for (unsigned i = 0; i < nf; i++) {
		if (d->fields[i] != 'S')
			continue;
		size_t n = rec->f[i] > HT_MAX_STR ? HT_MAX_STR : rec->f[i];
		if (n && rec->str)
			memcpy(p, rec->str, n);
		p += n;
	}
	return (size_t)(p - out);
}
