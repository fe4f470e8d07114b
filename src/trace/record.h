/* One event record taken apart into its raw field values and put back
 * together, byte for byte (format.h describes the layout).  The reader
 * decodes with it and the column codec (columns.c) moves records between
 * the recorder's layout and its own. */
#ifndef HEAPTRAIL_TRACE_RECORD_H
#define HEAPTRAIL_TRACE_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/util.h"

#include "format.h"

struct ht_rec {
	uint8_t kb;                    /* kind byte: kind (31 = escape) and HT_F_* flags */
	uint8_t kind;                  /* the kind, < HT_EV_NR (32 + escape byte for extended ones) */
	uint8_t nf;                    /* descriptor fields of the kind */
	uint8_t has_stack;             /* kb has HT_F_STACK: f[nf + 1] is a stack node id */
	uint64_t f[HT_MAX_FIELDS + 2]; /* raw field values as stored, the timestamp field, the stack */
	const uint8_t *str;            /* bytes of the 'S' field (its value is the length), or NULL */
};

/* Descriptor fields of each kind: strlen(ht_kind_descs[kind].fields),
 * filled in at start-up. */
extern uint8_t ht_kind_nf_tab[HT_EV_NR];
static inline unsigned ht_kind_nf(unsigned kind)
{
	return ht_kind_nf_tab[kind];
}

/* A record's value of len bytes (0..8) at p, read without a branch: the
 * low bytes of an 8-byte load (little endian host), so p needs 8 readable
 * bytes.  What the reader's fast paths (ht_rec__parse, the row loop of
 * reader_decode.c) read values with. */
extern const uint64_t ht_rec_len_mask[9];
static inline uint64_t ht_rec__value(const uint8_t *p, unsigned len)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v & ht_rec_len_mask[len];
}

/* Non-zero if a tag of value lengths (a nibble each) has one above 8:
 * bit 3 set with another bit of the nibble. */
static inline uint64_t ht_rec__bad_lengths(uint64_t tag)
{
	return (tag >> 3) & (tag | tag >> 1 | tag >> 2) & 0x1111111111111111ull;
}

/* Takes apart the record at p (at most end - p bytes) of a trace of this
 * format version (a short record, version 6, comes out as its long form).
 * Returns the bytes it takes, or 0 with *why set to what is wrong
 * ("truncated record", ...). */
size_t ht_rec__parse(struct ht_rec *rec, const uint8_t *p, const uint8_t *end, uint32_t version,
		     const char **why);

/* Writes rec in the recorder's layout for this format version (field
 * lengths as short as the values allow, a short record wherever the
 * recorder writes one: which is what the recorder writes); returns the
 * bytes written.  out needs HT_MAX_RECORD bytes. */
size_t ht_rec__encode(const struct ht_rec *rec, uint8_t *out, uint32_t version);


#endif
