/* The benchmark's loop, small: N malloc/free pairs of sizes uniform in
 * 16..4096 from a fixed-seed generator, in main.  Usage: randloop N.
 * Checked by tests/e2e/cases_columns.py (trace size after compaction). */
#include <stdint.h>
#include <stdlib.h>

#include "tp.h"

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	unsigned long n = tp_atoul(argv[1]);
	uint64_t x = 88172645463325252ull; /* xorshift64 */
	for (unsigned long i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		char *p = tp_keep(malloc(16 + (size_t)(x % 4081)));
		TP_CHECK(p);
		p[0] = (char)i;
		free(p);
	}
	return 0;
}
