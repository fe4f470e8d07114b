/* The RSS peaks in the middle of the run: 48 MiB allocated (served by
 * mmap) and touched, held 150 ms, freed (the RSS drops), then 1000 bytes
 * kept till exit after 100 ms more.  The live bytes at the RSS peak are
 * the 48 MiB, not the 1000 bytes live at the end.
 *   malloc 2, free 1. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tp.h"

static void wait_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

int main(void)
{
	size_t big = (size_t)48 << 20;
	char *p = tp_keep(malloc(big));
	TP_CHECK(p);
	memset(p, 1, big);
	wait_ms(150);
	free(p);
	tp_keep(malloc(1000));
	wait_ms(100);
	return 0;
}
