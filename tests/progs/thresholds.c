/* glibc's dynamic mmap threshold, step by step: each free of an mmapped
 * block bigger than the threshold (and at most 32 MiB) raises it to the
 * block's chunk size and the trim threshold to twice that; a block over
 * 32 MiB changes nothing; then mallopt(M_MMAP_THRESHOLD) pins it and the
 * later frees change nothing.  Says "block: SIZE mmapped CHUNK" for each
 * block (from its chunk header) so that the test can see the premise.
 * Checked by tests/e2e/cases_heap.py. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "tp.h"

static void one(size_t size)
{
	char *p = tp_keep(malloc(size));
	TP_CHECK(p);
	size_t head;
	memcpy(&head, (char *)tp_keep(p - sizeof(size_t)), sizeof(head)); /* chunk header */
	char buf[24];
	tp_write(1, "block: ");
	tp_write(1, tp_utoa(buf, size));
	tp_write(1, (head & 2) ? " mmapped " : " heap ");
	tp_write(1, tp_utoa(buf, head & ~(size_t)7));
	tp_write(1, "\n");
	free(p);
}

int main(void)
{
	one(200000);   /* 200704-byte chunk: mmap 200704, trim 401408 */
	one(400000);   /* 401408 */
	one(1000000);  /* 1003520 */
	one(3000000);  /* 3002368 */
	one(40000000); /* over DEFAULT_MMAP_THRESHOLD_MAX: no change */
	TP_CHECK(mallopt(M_MMAP_THRESHOLD, 256 * 1024) == 1); /* mmap 262144, pinned */
	one(5000000);  /* mmapped, freed: no change any more */
	one(300000);
	return 0;
}
