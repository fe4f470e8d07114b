/* Live block map. */
#include "common/livemap.h"
#include "common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ht_livemap__init(struct ht_livemap *m)
{
	m->cap = 1024;
	m->count = 0;
	m->slots = ht_xzalloc(m->cap, sizeof(*m->slots));
}

void ht_livemap__free(struct ht_livemap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->count = 0;
}

void ht_livemap__rehash(struct ht_livemap *m, size_t cap)
{
	struct ht_block *old = m->slots;
	size_t ocap = m->cap;
	m->slots = ht_xzalloc(cap, sizeof(*m->slots));
	m->cap = cap;
	for (size_t i = 0; i < ocap; i++) {
		if (!old[i].ptr)
			continue;
		size_t j = ht_livemap__hash(old[i].ptr, cap - 1);
		while (m->slots[j].ptr)
			j = (j + 1) & (cap - 1);
		m->slots[j] = old[i];
	}
	free(old);
}

