/* Column coding of a run of event records (chunk flag HT_CHUNK_F_COLUMNS):
 * the same records, with each kind of field moved into a column of its own
 * and block addresses replaced by what a model of the allocator predicts,
 * so that zstd finds the repeats.  `heaptrail compact` writes it; the
 * reader turns it back into the recorder's bytes, exactly.  docs/FORMAT.md,
 * "Column coding", describes the columns and the model. */
#ifndef HEAPTRAIL_TRACE_COLUMNS_H
#define HEAPTRAIL_TRACE_COLUMNS_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

/* Codes n bytes of records (one or more whole buffers, each starting with
 * a SYNC record) of a trace of the given format version.  Returns the size
 * of the column payload put in *out (malloc'ed; the caller frees it), or 0
 * if the records cannot be column-coded (they do not parse, or n is too
 * large): keep them as they are then. */
size_t ht_columns__encode(const uint8_t *recs, size_t n, uint32_t version, uint8_t **out);

/* Bytes of records a column payload decodes to, from its header; 0 if it is
 * not a column payload or announces more than HT_MAX_CHUNK_RAW. */
size_t ht_columns__rec_bytes(const uint8_t *in, size_t n);

/* Decodes a column payload into out (cap bytes, at least what
 * ht_columns__rec_bytes says).  Returns the bytes written, or 0 with *why
 * set to what is wrong. */
size_t ht_columns__decode(const uint8_t *in, size_t n, uint32_t version, uint8_t *out, size_t cap,
			  const char **why);

#endif
