/* A release a time slice could not place: of an address it did not hand
 * out, so of a block live from the slices before it, or of none (an
 * unknown free).  slices.c keeps them in order for every model a slice
 * feeds, and tells each once the slices before are added: the block it
 * released, or none (ptr 0).  Private to analyze/slices.c and the models'
 * ht_*__slice_add. */
#ifndef HEAPTRAIL_ANALYZE_SLICEREL_H
#define HEAPTRAIL_ANALYZE_SLICEREL_H

#include <stdint.h>

#include "common/livemap.h"

struct ht_slice_release {
	uint64_t ptr, time_ns; /* ptr 0 stays unknown */
	uint32_t tid;
	uint32_t thread;       /* the releasing thread's index in the slice's pass */
	uint8_t is_free;       /* a free() (a sampled block's weight counts as calls) */
	uint8_t reused;        /* the slice handed ptr out before: if it was live from
				* before, the serial pass had replaced it there */
};

/* The releases of a slice and the blocks they released (b[j].ptr 0:
 * none), n of each, in the slice's order. */
struct ht_slice_releases {
	const struct ht_slice_release *rel;
	const struct ht_block *b;
	size_t n;
};

#endif
