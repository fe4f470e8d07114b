/* The benchmark's loop, small: N malloc/free pairs of sizes uniform in
 * 16..4096 from a fixed-seed generator, in main.  Usage: randloop N.
 * Checked by tests/e2e/cases_columns.py (trace size after compaction). */
#include <stdlib.h>

#include "tp.h"

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	tp_rand_pairs(tp_atoul(argv[1]));
	return 0;
}
