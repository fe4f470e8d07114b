/* The peak of requested bytes and the peak of usable bytes at different
 * moments: one malloc(1000), freed, then 50 x malloc(1), kept till exit
 * (50 requested bytes, but 24 usable each under glibc).  Prints its own
 * figures, from malloc_usable_size:
 *   peak_requested (1000), usable_at_peak (the big block's usable size),
 *   usable_peak (the 50 small blocks' usable sizes).
 *   malloc 51, free 1. */
#include <malloc.h>
#include <stdlib.h>

#include "tp.h"

int main(void)
{
	char *big = tp_keep(malloc(1000));
	TP_CHECK(big);
	unsigned long long at_peak = malloc_usable_size(big), usable = 0;
	free(big);
	for (int i = 0; i < 50; i++) {
		char *p = tp_keep(malloc(1));
		TP_CHECK(p);
		usable += malloc_usable_size(p);
	}
	TP_CHECK(usable > at_peak); /* (the two peaks are apart) */
	tp_say_num("peak_requested", 1000);
	tp_say_num("usable_at_peak", at_peak);
	tp_say_num("usable_peak", usable);
	return 0;
}
