/* A program that limits its own data (setrlimit(RLIMIT_DATA) to 16 MiB,
 * as sandboxes do), then allocates 14.5 MiB in blocks of 1 KiB, which fits
 * untraced, and must traced too (src/preload/rlimit.c: the recorder's own
 * private memory is added to the limit).  It reads the limit back with
 * getrlimit and prlimit, which must give what it set.  Prints
 * "datalimit: ok" and exits 0, or says what failed and exits 1. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "tp.h"

#define LIMIT (16L << 20)
#define BLOCKS 14848 /* of 1 KiB: 14.5 MiB */

static void *blocks[BLOCKS];

int main(void)
{
	struct rlimit rl = {LIMIT, LIMIT}, back;
	TP_CHECK(setrlimit(RLIMIT_DATA, &rl) == 0);
	TP_CHECK(getrlimit(RLIMIT_DATA, &back) == 0 && prlimit(0, RLIMIT_DATA, NULL, &rl) == 0);
	if (back.rlim_cur != LIMIT || back.rlim_max != LIMIT || rl.rlim_cur != LIMIT) {
		printf("datalimit: read back %lu/%lu and %lu\n", (unsigned long)back.rlim_cur,
		       (unsigned long)back.rlim_max, (unsigned long)rl.rlim_cur);
		return 1;
	}
	int n = 0;
	while (n < BLOCKS && (blocks[n] = malloc(1024)) != NULL)
		n++;
	if (n < BLOCKS) {
		printf("datalimit: %d of %d blocks\n", n, BLOCKS);
		return 1;
	}
	for (int i = 0; i < n; i++)
		free(blocks[i]);
	printf("datalimit: ok\n");
	return 0;
}
