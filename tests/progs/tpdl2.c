/* The second library dlloop loads (tests/real): tpdl2_work(n) keeps n
 * malloc(1234) blocks and frees them, and leaks one malloc(99) block per
 * call, which outlives the library (dlclose). */
#include <stdlib.h>

#include "tp.h"

__attribute__((visibility("default"))) __attribute__((noinline)) int tpdl2_work(int n)
{
	void *keep[64];
	int got = 0;
	for (int i = 0; i < n && i < 64; i++)
		got += (keep[i] = tp_keep(malloc(1234))) != NULL;
	for (int i = 0; i < n && i < 64; i++)
		free(keep[i]);
	void *leak = tp_keep(malloc(99));
	return got + (leak != NULL);
}
