/* The set of live heap blocks, keyed by address: open addressing with
 * linear probing and backward-shift deletion, sized by the live set. */
#ifndef HEAPTRAIL_ANALYZE_LIVEMAP_H
#define HEAPTRAIL_ANALYZE_LIVEMAP_H

#include <stddef.h>
#include <stdint.h>

struct ht_block {
	uint64_t ptr;     /* address, 0 = empty slot */
	uint64_t size;    /* requested bytes */
	uint64_t usable;  /* allocator's usable bytes */
	uint64_t time_ns; /* when allocated */
	uint32_t tid;     /* allocating thread */
	uint32_t aux;     /* caller's data (stack id, kind, flags) */
	uint32_t weight;  /* allocations it stands for (sampled traces), else 1 */
	uint32_t pad;     /* zero */
};

struct ht_livemap {
	struct ht_block *slots; /* capacity entries */
	size_t cap;             /* power of two */
	size_t count;           /* live blocks */
};

void ht_livemap__init(struct ht_livemap *m);
void ht_livemap__free(struct ht_livemap *m);
/* Inserts or replaces; returns the slot (valid until the next change). */
struct ht_block *ht_livemap__put(struct ht_livemap *m, const struct ht_block *b);
struct ht_block *ht_livemap__get(struct ht_livemap *m, uint64_t ptr);
/* Removes ptr, copying it to *out if non-NULL; 0 if it was not there. */
int ht_livemap__del(struct ht_livemap *m, uint64_t ptr, struct ht_block *out);

#endif
