/* A program that waits for its test between two phases.  Usage:
 * paced N [hold].  One malloc/free pair (the recorder starts), "ready" on
 * stdout, then it waits for a line on stdin, then makes N malloc/free
 * pairs of sizes 16..4096 and exits 0; with "hold", it says "done" after
 * the pairs and waits for another line first.  The test does something to
 * the recorder while the program waits (cases_reliability.py: kills the
 * writer process, then maybe the program). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tp.h"

static void wait_line(void)
{
	char c;
	while (read(0, &c, 1) == 1 && c != '\n')
		;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2 || (argc == 3 && !strcmp(argv[2], "hold")));
	unsigned long n = tp_atoul(argv[1]);
	free(tp_keep(malloc(32)));
	tp_write(1, "ready\n");
	wait_line();
	tp_rand_pairs(n);
	if (argc == 3) {
		tp_write(1, "done\n");
		wait_line();
	}
	return 0;
}
