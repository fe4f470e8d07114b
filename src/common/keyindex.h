/* An open-addressing index over an array the caller keeps: each slot holds
 * an element's index + 1, keyed by a 64-bit key of the element (a tid, a
 * heap's base).  Used by the pass (threads) and heapinfo (threads, heaps). */
#ifndef HEAPTRAIL_ANALYZE_KEYINDEX_H
#define HEAPTRAIL_ANALYZE_KEYINDEX_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/livemap.h"
#include "common/util.h"

struct ht_keyindex {
	uint32_t *slot; /* cap entries, 0 = empty */
	size_t cap;	/* power of two */
};

/* The key of element i of arr. */
typedef uint64_t (*ht_keyindex_key)(const void *arr, size_t i);

/* Makes room for n + 1 entries, rehashing key(arr, i) for the n there. */
static inline void ht_keyindex__reserve(struct ht_keyindex *x, size_t n, const void *arr,
					ht_keyindex_key key)
{
	if ((n + 1) * 2 < x->cap)
		return;
	size_t cap = x->cap ? x->cap * 2 : 64;
	uint32_t *t = ht_xrealloc(NULL, cap * sizeof(*t));
	memset(t, 0, cap * sizeof(*t));
	for (size_t i = 0; i < n; i++) {
		size_t k = ht_livemap__hash(key(arr, i), cap - 1);
		while (t[k])
			k = (k + 1) & (cap - 1);
		t[k] = (uint32_t)i + 1;
	}
	free(x->slot);
	x->slot = t;
	x->cap = cap;
}

/* The slot of k: its element's index + 1, or an empty slot to put it in
 * (after ht_keyindex__reserve). */
static inline size_t ht_keyindex__find(const struct ht_keyindex *x, uint64_t k, const void *arr,
				       ht_keyindex_key key)
{
	size_t i = ht_livemap__hash(k, x->cap - 1);
	while (x->slot[i] && key(arr, x->slot[i] - 1) != k)
		i = (i + 1) & (x->cap - 1);
	return i;
}

#endif
