/* Huge requests: malloc(10) kept, malloc(1 GiB) (succeeds lazily, served
 * by mmap) and freed, malloc(SIZE_MAX) fails, calloc(SIZE_MAX/2, 4) fails
 * (overflow), realloc(small, SIZE_MAX - 4096) fails and leaves the small
 * block alone, which is then freed.
 *   malloc 3 (1 failed), calloc 1 (1 failed), realloc 1 (1 failed), free 2;
 *   bytes_allocated 10 + 2^30, peak_live_bytes 10 + 2^30. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "tp.h"

int main(void)
{
	char *small = tp_keep(malloc(10));
	TP_CHECK(small);
	small[0] = 'x';
	char *big = tp_keep(malloc((size_t)1 << 30));
	TP_CHECK(big);
	big[0] = big[((size_t)1 << 30) - 1] = 1;
	free(big);
	volatile size_t huge = SIZE_MAX;
	errno = 0;
	TP_CHECK(malloc(huge) == NULL && errno == ENOMEM);
	errno = 0;
	TP_CHECK(calloc(huge / 2, 4) == NULL && errno == ENOMEM);
	errno = 0;
	TP_CHECK(realloc(small, huge - 4096) == NULL && errno == ENOMEM);
	TP_CHECK(small[0] == 'x');
	free(small);
	return 0;
}
