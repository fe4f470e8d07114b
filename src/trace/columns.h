/* Column coding of a run of event records (chunk flag HT_CHUNK_F_COLUMNS):
 * the same records, with each kind of field moved into a column of its own
 * and block addresses replaced by what a model of the allocator predicts,
 * so that zstd finds the repeats.  `heaptrail compact` writes it; the
 * reader decodes it record by record (ht_coldec), into exactly the
 * records the recorder wrote.  docs/FORMAT.md,
 * "Column coding", describes the columns and the model. */
#ifndef HEAPTRAIL_TRACE_COLUMNS_H
#define HEAPTRAIL_TRACE_COLUMNS_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "record.h"

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

/* Decoding record by record, straight from the columns (what the reader
 * does): no record bytes are written.  One decoder serves many payloads
 * in turn; its tables are kept between them. */
struct ht_coldec; /* opaque */
struct ht_coldec *ht_coldec__new(void);
void ht_coldec__free(struct ht_coldec *d);
/* Starts on the column payload in[0..n) (which must stay in place while it
 * is decoded).  0, or -1 with *why set. */
int ht_coldec__start(struct ht_coldec *d, const uint8_t *in, size_t n, uint32_t version,
		     const char **why);
/* The next record, as ht_rec__parse would give it from the decoded bytes
 * (rec->str points into the payload): 1; 0 at the end, once every column
 * has been used up exactly and the records add up to the bytes the header
 * announces; -1 with *why set to what is wrong. */
int ht_coldec__next(struct ht_coldec *d, struct ht_rec *rec, const char **why);

/* What a thread's events are made of besides its records: the reader's
 * state of the thread, which ht_coldec__events carries on. */
struct ht_event;
struct ht_coldec_thread {
	uint64_t last_ts;      /* timestamp of the thread's previous event */
	uint64_t last_ptr;     /* its previous pointer, as the reader has it */
	uint64_t seq;          /* sequence number of the next event */
	uint64_t dur;          /* duration for the next event (DURATION record), 0 none */
	uint32_t tid;          /* the thread */
	const uint32_t *nodes; /* its stack node ids - 1 -> the reader's */
	size_t nnodes;         /* ids defined */
	int sampled;           /* 0: every allocation weighs 1; 1: weight; 2: by size */
	uint32_t weight;       /* an allocation's weight when sampled is 1 */
	uint64_t sample_bytes; /* the mean bytes between samples when sampled is 2 */
};

/* The fast way through a payload: decodes the malloc, free, calloc and
 * realloc records that come next (up to max) straight into events, as the reader would
 * make them from ht_coldec__next's records, and stops before any other
 * record (take that one with ht_coldec__next).  Sets *n to the events
 * written; returns 0, or -1 with *why set as ht_coldec__next would (the
 * *n events before the bad record are good).  Each event's time_ns holds
 * its record's stack node id as stored (the thread's own), 0 if none. */
int ht_coldec__events(struct ht_coldec *d, struct ht_coldec_thread *t, struct ht_event *ev,
		      unsigned max, unsigned *n, const char **why);

#endif
