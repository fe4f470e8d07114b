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
/* Moves the blocks to a table of cap slots (a power of two). */
void ht_livemap__rehash(struct ht_livemap *m, size_t cap);

/* The lookups are inline: analyzers make one or two per event. */
static inline size_t ht_livemap__hash(uint64_t p, size_t mask)
{
	p ^= p >> 33;
	p *= 0xff51afd7ed558ccdull;
	p ^= p >> 33;
	return (size_t)p & mask;
}

/* Inserts or replaces; returns the slot (valid until the next change). */
static inline struct ht_block *ht_livemap__put(struct ht_livemap *m, const struct ht_block *b)
{
	if ((m->count + 1) * 4 > m->cap * 3)
		ht_livemap__rehash(m, m->cap * 2);
	size_t mask = m->cap - 1, j = ht_livemap__hash(b->ptr, mask);
	while (m->slots[j].ptr && m->slots[j].ptr != b->ptr)
		j = (j + 1) & mask;
	if (!m->slots[j].ptr)
		m->count++;
	m->slots[j] = *b;
	return &m->slots[j];
}

/* The slot of ptr, added (ptr set, the rest zero) if it was not there:
 * *added says which.  One probe where a get and a put make two. */
static inline struct ht_block *ht_livemap__find_or_add(struct ht_livemap *m, uint64_t ptr,
							int *added)
{
	if ((m->count + 1) * 4 > m->cap * 3)
		ht_livemap__rehash(m, m->cap * 2);
	size_t mask = m->cap - 1, j = ht_livemap__hash(ptr, mask);
	while (m->slots[j].ptr && m->slots[j].ptr != ptr)
		j = (j + 1) & mask;
	*added = !m->slots[j].ptr;
	if (*added) {
		m->count++;
		m->slots[j] = (struct ht_block){.ptr = ptr};
	}
	return &m->slots[j];
}
static inline struct ht_block *ht_livemap__get(struct ht_livemap *m, uint64_t ptr)
{
	size_t mask = m->cap - 1, j = ht_livemap__hash(ptr, mask);
	while (m->slots[j].ptr) {
		if (m->slots[j].ptr == ptr)
			return &m->slots[j];
		j = (j + 1) & mask;
	}
	return NULL;
}

/* Removes ptr, copying it to *out if non-NULL; 0 if it was not there. */
static inline int ht_livemap__del(struct ht_livemap *m, uint64_t ptr, struct ht_block *out)
{
	if (!ptr)
		return 0;
	size_t mask = m->cap - 1, j = ht_livemap__hash(ptr, mask);
	while (m->slots[j].ptr && m->slots[j].ptr != ptr)
		j = (j + 1) & mask;
	if (!m->slots[j].ptr)
		return 0;
	if (out)
		*out = m->slots[j];
	/* backward-shift deletion keeps probe chains intact */
	size_t i = j;
	for (;;) {
		m->slots[i].ptr = 0;
		size_t k = i;
		for (;;) {
			k = (k + 1) & mask;
			if (!m->slots[k].ptr)
				goto done;
			size_t home = ht_livemap__hash(m->slots[k].ptr, mask);
			/* can slot k move to i? only if home is not in (i, k] cyclically */
			if ((i <= k) ? (home <= i || home > k) : (home <= i && home > k))
				break;
		}
		m->slots[i] = m->slots[k];
		i = k;
	}
done:
	m->count--;
	return 1;
}

#endif
