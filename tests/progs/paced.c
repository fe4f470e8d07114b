/* A program that waits for its test between two phases.  Usage: paced N.
 * One malloc/free pair (the recorder starts), "ready" on stdout, then it
 * waits for a line on stdin, then makes N malloc/free pairs of sizes
 * 16..4096 and exits 0.  The test does something to the recorder while
 * the program waits (cases_reliability.py: kills the writer process). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "tp.h"

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	unsigned long n = tp_atoul(argv[1]);
	free(tp_keep(malloc(32)));
	tp_write(1, "ready\n");
	char c;
	while (read(0, &c, 1) == 1 && c != '\n')
		;
	tp_rand_pairs(n);
	return 0;
}
