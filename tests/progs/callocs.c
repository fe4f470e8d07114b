/* calloc and realloc of every kind, many times over, from a fixed-seed
 * generator, for the reader's fast loops (cases_rowdecode.py): N rounds
 * over 64 slots, each round one of calloc (small, large enough for mmap,
 * zero bytes, one whose nmemb * size overflows and fails), realloc (grow,
 * shrink, moved or in place, realloc(NULL, n), realloc(p, 0), one that
 * fails), reallocarray (and its overflow), malloc or free.  Usage:
 * callocs N.  Says "done" at the end. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>

#include "tp.h"

#define SLOTS 64

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	unsigned long n = tp_atoul(argv[1]);
	char *slot[SLOTS] = {0};
	volatile size_t huge = SIZE_MAX / 2; /* not a constant: no warning */
	uint64_t x = 88172645463325252ull;
	for (unsigned long i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		unsigned k = (unsigned)(x >> 58) % SLOTS, op = (unsigned)(x % 16);
		size_t size = 1 + (size_t)((x >> 8) % 2000);
		char *p = slot[k];
		switch (op) {
		case 0:
		case 1:
		case 2:
			free(p);
			slot[k] = tp_keep(calloc(1 + (size_t)((x >> 20) % 8), size));
			break;
		case 3:
			if (i % 64 == 3) { /* from mmap */
				free(p);
				slot[k] = tp_keep(calloc(1, (size_t)200 << 10));
			} else if (i % 64 == 35) { /* overflows: fails */
				TP_CHECK(tp_keep(calloc(huge, 4)) == NULL);
			} else {
				free(p);
				slot[k] = tp_keep(calloc(i % 2, size * (i % 3))); /* some zero */
			}
			break;
		case 4:
		case 5:
		case 6:
		case 7:
			/* grow or shrink: in place or moved; from NULL as malloc */
			slot[k] = tp_keep(realloc(p, size));
			TP_CHECK(slot[k]);
			break;
		case 8:
			if (p) {
				/* glibc frees p and returns NULL */
				TP_CHECK(realloc(p, 0) == NULL);
				slot[k] = NULL;
			} else {
				slot[k] = tp_keep(realloc(NULL, size));
			}
			break;
		case 9:
			if (p && i % 16 == 9) /* too large: fails, p stays */
				TP_CHECK(tp_keep(realloc(p, huge * 2 - 4096)) == NULL);
			else
				slot[k] = tp_keep(realloc(p, size + (size_t)(x >> 40) % 300000));
			break;
		case 10:
		case 11:
			if (i % 32 == 10) { /* overflows: fails, p stays */
				TP_CHECK(tp_keep(reallocarray(p, huge, 4)) == NULL);
			} else {
				slot[k] = tp_keep(reallocarray(p, 1 + (size_t)((x >> 20) % 8), size));
				TP_CHECK(slot[k]);
			}
			break;
		case 12:
		case 13:
			free(p);
			slot[k] = tp_keep(malloc(size));
			break;
		default:
			free(p);
			slot[k] = NULL;
			break;
		}
	}
	for (unsigned k = 0; k < SLOTS; k++)
		free(slot[k]);
	tp_write(1, "done\n");
	return 0;
}
