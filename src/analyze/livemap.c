/* Live block map. */
#include "livemap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t hash(uint64_t p, size_t mask)
{
	p ^= p >> 33;
	p *= 0xff51afd7ed558ccdull;
	p ^= p >> 33;
	return (size_t)p & mask;
}

void ht_livemap__init(struct ht_livemap *m)
{
	m->cap = 1024;
	m->count = 0;
	m->slots = calloc(m->cap, sizeof(*m->slots));
	if (!m->slots) {
		fprintf(stderr, "heaptrail: out of memory\n");
		exit(1);
	}
}

void ht_livemap__free(struct ht_livemap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->count = 0;
}

static void rehash(struct ht_livemap *m, size_t cap)
{
	struct ht_block *old = m->slots;
	size_t ocap = m->cap;
	m->slots = calloc(cap, sizeof(*m->slots));
	if (!m->slots) {
		fprintf(stderr, "heaptrail: out of memory\n");
		exit(1);
	}
	m->cap = cap;
	for (size_t i = 0; i < ocap; i++) {
		if (!old[i].ptr)
			continue;
		size_t j = hash(old[i].ptr, cap - 1);
		while (m->slots[j].ptr)
			j = (j + 1) & (cap - 1);
		m->slots[j] = old[i];
	}
	free(old);
}

struct ht_block *ht_livemap__put(struct ht_livemap *m, const struct ht_block *b)
{
	if ((m->count + 1) * 4 > m->cap * 3)
		rehash(m, m->cap * 2);
	size_t mask = m->cap - 1, j = hash(b->ptr, mask);
	while (m->slots[j].ptr && m->slots[j].ptr != b->ptr)
		j = (j + 1) & mask;
	if (!m->slots[j].ptr)
		m->count++;
	m->slots[j] = *b;
	return &m->slots[j];
}

struct ht_block *ht_livemap__get(struct ht_livemap *m, uint64_t ptr)
{
	size_t mask = m->cap - 1, j = hash(ptr, mask);
	while (m->slots[j].ptr) {
		if (m->slots[j].ptr == ptr)
			return &m->slots[j];
		j = (j + 1) & mask;
	}
	return NULL;
}

int ht_livemap__del(struct ht_livemap *m, uint64_t ptr, struct ht_block *out)
{
	if (!ptr)
		return 0;
	size_t mask = m->cap - 1, j = hash(ptr, mask);
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
			size_t home = hash(m->slots[k].ptr, mask);
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
