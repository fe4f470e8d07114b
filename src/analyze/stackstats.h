/* Per-stack totals of a trace, for the stack analyzers (flamegraph, top):
 * bytes and calls allocated, temporary allocations, what was live at the
 * peak of the heap and at the end, and the biggest single allocations. */
#ifndef HEAPTRAIL_ANALYZE_STACKSTATS_H
#define HEAPTRAIL_ANALYZE_STACKSTATS_H

#include <stddef.h>
#include <stdint.h>

#include "trace/reader.h"

struct ht_stackstat {
	uint32_t node;         /* stack node + 1 (0 = empty slot) */
	uint64_t alloc_bytes;  /* requested by its allocations */
	uint64_t alloc_calls;  /* allocations that returned a block */
	uint64_t temp_calls;   /* freed before their thread's next allocation */
	uint64_t peak_bytes;   /* live when the heap peaked */
	uint64_t peak_blocks;  /* blocks of those */
	uint64_t end_bytes;    /* live at the end */
	uint64_t end_blocks;   /* blocks of those */
};

struct ht_big_alloc {
	uint64_t size;    /* requested bytes */
	uint64_t time_ns; /* when */
	uint32_t tid;     /* by which thread */
	uint32_t node;    /* its stack, 0 if none */
};

#define HT_BIG_ALLOCS 64 /* biggest single allocations kept */

struct ht_stackstats {
	struct ht_stackstat *slots; /* open addressing by node */
	size_t cap, n;              /* slots / used */
	uint64_t peak_bytes;        /* the peak of the live heap */
	uint64_t peak_time_ns;      /* when */
	struct ht_big_alloc big[HT_BIG_ALLOCS]; /* the biggest, biggest first */
	size_t nbig;                /* entries used */
};

/* Reads path (twice when want_peak: the second time up to the peak) and
 * fills *s; only blocks thread tid allocated, unless tid is 0.  Returns
 * the exit status (0, or HT_EXIT_DATA for a damaged or unreadable trace:
 * *rp is NULL if it could not be opened) and leaves the reader in *rp for
 * the stacks. */
int ht_stackstats__collect(const char *path, uint32_t tid, int want_peak,
			   struct ht_stackstats *s, struct ht_reader **rp);
void ht_stackstats__free(struct ht_stackstats *s);

#endif
