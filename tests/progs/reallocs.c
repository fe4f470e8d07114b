/* realloc up and down.  malloc(1); realloc to 2, 4, ..., 1 MiB (20 calls;
 * from 128 KiB on glibc serves the block with mmap and grows it with
 * mremap); realloc down to 512 KiB, ..., 1 (20 calls); reallocarray to
 * 10 x 10; free.  Says on stdout how many of the 41 resizes moved the
 * block ("moved: N") and how many did not ("in_place: N"). */
#define _GNU_SOURCE
#include <stdlib.h>

#include "tp.h"

int main(void)
{
	unsigned long moved = 0, in_place = 0;
	char *p = tp_keep(malloc(1));
	TP_CHECK(p);
	p[0] = 'x';
	for (size_t size = 2; size <= ((size_t)1 << 20); size *= 2) {
		char *q = tp_keep(realloc(p, size));
		TP_CHECK(q && q[0] == 'x');
		q[size - 1] = 1;
		if (q != p)
			moved++;
		else
			in_place++;
		p = q;
	}
	for (size_t size = (size_t)1 << 19; size >= 1; size /= 2) {
		char *q = tp_keep(realloc(p, size));
		TP_CHECK(q && q[0] == 'x');
		if (q != p)
			moved++;
		else
			in_place++;
		p = q;
	}
	char *q = tp_keep(reallocarray(p, 10, 10));
	TP_CHECK(q && q[0] == 'x');
	if (q != p)
		moved++;
	else
		in_place++;
	free(q);
	tp_say_num("moved", moved);
	tp_say_num("in_place", in_place);
	return 0;
}
