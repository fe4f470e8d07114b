/* Rewriting a trace with large compressed chunks (see compact.c). */
#ifndef HEAPTRAIL_TRACE_COMPACT_H
#define HEAPTRAIL_TRACE_COMPACT_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

struct ht_compact_result {
	uint64_t in_bytes;  /* size before */
	uint64_t out_bytes; /* size after */
	uint64_t events;    /* events carried over */
	int truncated;      /* the input ended in a damaged or partial chunk */
	int rewritten;      /* ht_trace__finish: the file was rewritten */
	uint64_t compressed; /* ht_trace__finish: raw chunks it compressed */
	/* ht_trace__finish: why the file was left alone (not closed
	 * cleanly, damaged), or NULL */
	const char *untouched;
	/* ht_trace__compact: event chunks that do not decode, copied as they
	 * are (readers stop their thread there, before and after), and the
	 * thread of the first */
	uint64_t bad_chunks;
	uint32_t bad_tid;
};

/* Rewrites path in place (through a temporary file and rename) with each
 * thread's consecutive chunks merged and zstd-compressed at level.  Events,
 * their order and the header stay the same; a chunk that does not decode
 * is copied as it is, so that readers read the same events from the
 * result.  Returns 0, or -1 with err. */
int ht_trace__compact(const char *path, int level, struct ht_compact_result *res, char *err,
		      size_t errlen);

/* ht_trace__finish's level for Huffman coding alone: each chunk one zstd
 * frame whose blocks hold only Huffman-coded literals (no match search:
 * ~3.5x zstd level 1's speed here, bench/RESULTS.md), record's default. */
#define HT_FINISH_HUFFMAN 1000

/* The cheap end step of `heaptrail record`: rewrites path (through a
 * temporary file and rename) with the event chunks the recorder wrote raw
 * compressed at zstd level (or HT_FINISH_HUFFMAN), using every CPU, and every other chunk copied
 * as it is (no merging, no column coding: see ht_trace__compact for
 * those).  Leaves the file alone if no chunk is raw, or if it was not
 * closed cleanly or is damaged (res->untouched says which; the file is
 * never read past its end).  Returns 0, or -1 with err. */
int ht_trace__finish(const char *path, int level, struct ht_compact_result *res, char *err,
		     size_t errlen);

#endif
