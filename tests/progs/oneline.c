/* Three allocations on one source line (malloc 100, calloc 1 x 200,
 * malloc 300), made 10 times and kept till exit: three call sites whose
 * stacks read the same (function, file, line), which top and report must
 * show as one row of 6000 bytes in 30 blocks.  Built with -O0 (the calls
 * stay three).
 *   malloc 20, calloc 10. */
#include <stdlib.h>

#include "tp.h"

static void *kept[30];

static __attribute__((noinline)) void make(int i)
{
	kept[3 * i] = tp_keep(malloc(100)); kept[3 * i + 1] = tp_keep(calloc(1, 200)); kept[3 * i + 2] = tp_keep(malloc(300)); /* ONELINE */
}

int main(void)
{
	for (int i = 0; i < 10; i++)
		make(i);
	for (int i = 0; i < 30; i++)
		TP_CHECK(kept[i]);
	return 0;
}
