/* Records taken apart and put back together (record.h). */
#include "record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint8_t ht_kind_nf_tab[HT_EV_NR];

__attribute__((constructor)) static void kind_nf_init(void)
{
	for (unsigned k = 0; k < HT_EV_NR; k++)
		ht_kind_nf_tab[k] = (uint8_t)strlen(ht_kind_descs[k].fields);
}

size_t ht_rec__parse(struct ht_rec *rec, const uint8_t *p, const uint8_t *end, const char **why)
{
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
	const struct ht_kind_desc *d = &ht_kind_descs[kind];
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
	for (unsigned i = 0; i < nf; i++) {
		if (d->fields[i] != 'S')
			continue;
		if (rec->f[i] > HT_MAX_STR || (uint64_t)(end - p) < rec->f[i]) {
			*why = "bad string length";
			return 0;
		}
		rec->str = p;
		p += rec->f[i];
	}
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

size_t ht_rec__encode(const struct ht_rec *rec, uint8_t *out)
{
	const struct ht_kind_desc *d = &ht_kind_descs[rec->kind];
	unsigned nf = rec->nf;
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
