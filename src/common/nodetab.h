/* Tables of per-stack records (stackstats, diff): open addressing with
 * linear probing, keyed by a stack node.  A record starts with a uint32_t
 * holding node + 1 (0 = empty slot); the owner keeps the slots, their
 * number (a power of two) and how many are used, and walks them itself. */
#ifndef HEAPTRAIL_ANALYZE_NODETAB_H
#define HEAPTRAIL_ANALYZE_NODETAB_H
#include <stddef.h>
#include <stdint.h>

/* Moves the records of *slots (elem bytes each) to a table twice as large
 * (1024 slots at first), updating *slots and *cap; exits on out of memory. */
void ht_nodetab__grow(void **slots, size_t *cap, size_t elem);

static inline size_t ht_nodetab__home(uint32_t key, size_t cap)
{
	return (key * 0x9E3779B1u) & (cap - 1);
}

/* node's record, added (zeroed, key set) if it is not there yet. */
static inline void *ht_nodetab__get(void **slots, size_t *cap, size_t *n, size_t elem,
				    uint32_t node)
{
	if ((*n + 1) * 2 > *cap)
		ht_nodetab__grow(slots, cap, elem);
	uint32_t key = node + 1;
	size_t k = ht_nodetab__home(key, *cap);
	char *base = *slots;
	uint32_t *r;
	while (*(r = (uint32_t *)(base + k * elem)) && *r != key)
		k = (k + 1) & (*cap - 1);
	if (!*r) {
		*r = key;
		++*n;
	}
	return r;
}
#endif
