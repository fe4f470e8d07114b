/* N rounds (argv[1]) of malloc(1024..5119 bytes, a fixed pseudo-random
 * sequence), realloc of the block to a quarter of its size, free: the
 * realloc of a sampled block under --sample-bytes must count as that
 * block (sampled by its size at malloc), not by its new, smaller size.
 *   malloc N, realloc N (all shrinking), free N. */
#include <stdlib.h>

#include "tp.h"

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? tp_atoul(argv[1]) : 1000;
	unsigned s = 7;
	for (unsigned long i = 0; i < n; i++) {
		s = s * 1103515245u + 12345u;
		size_t size = 1024 + (s >> 8) % 4096;
		char *p = tp_keep(malloc(size));
		TP_CHECK(p);
		p[0] = 1;
		p = tp_keep(realloc(p, size / 4));
		TP_CHECK(p);
		free(p);
	}
	return 0;
}
