/* Growth of the per-stack record tables (nodetab.h). */
#include "common/nodetab.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

void ht_nodetab__grow(void **slots, size_t *cap, size_t elem)
{
	size_t ncap = *cap ? *cap * 2 : 1024;
	char *t = ht_xzalloc(ncap, elem), *old = *slots;
	for (size_t i = 0; i < *cap; i++) {
		const char *r = old + i * elem;
		uint32_t key;
		memcpy(&key, r, sizeof(key));
		if (!key)
			continue;
		size_t k = ht_nodetab__home(key, ncap);
		while (*(const uint32_t *)(t + k * elem))
			k = (k + 1) & (ncap - 1);
		memcpy(t + k * elem, r, elem);
	}
	free(old);
	*slots = t;
	*cap = ncap;
}
