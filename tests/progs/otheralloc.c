/* Every function of the malloc API, on whichever allocator serves the
 * program (glibc's, or jemalloc, tcmalloc, mimalloc in LD_PRELOAD), with
 * the program's own count of its calls, requested bytes and usable bytes
 * (malloc_usable_size: the allocator's own answer).  Then one block from
 * the allocator's own function (mallocx, tc_malloc, mi_malloc: looked up
 * at run time), given back with free(), which must go to that allocator.
 *
 * Usage: otheralloc ROUNDS.  Per round: malloc, calloc, realloc (grow),
 * reallocarray, memalign(64), aligned_alloc(256), posix_memalign(128),
 * posix_memalign(3) (EINVAL), valloc, pvalloc; everything freed at the end
 * of the round.  Says the counts, "usable", and "own_api" (1 if the
 * allocator has its own malloc function).  Marks "begin" and "end" hold
 * all of it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <heaptrail.h>

#include "tp.h"

#define NB 10

static unsigned long long usable_sum, requested;

static void *took(void *p, size_t size)
{
	TP_CHECK(p != NULL);
	memset(p, 0x5a, size);
	usable_sum += malloc_usable_size(p);
	requested += size;
	return tp_keep(p);
}

int main(int argc, char **argv)
{
	unsigned long rounds = argc > 1 ? tp_atoul(argv[1]) : 100;
	unsigned long long calls = 0, frees = 0;
	/* (looked up first: a failed dlsym allocates its message) */
	void *(*mallocx)(size_t, int) = (void *(*)(size_t, int))dlsym(RTLD_DEFAULT, "mallocx");
	void *(*own)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "tc_malloc");
	if (!own)
		own = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "mi_malloc");
	HEAPTRAIL_MARK("begin");
	for (unsigned long r = 0; r < rounds; r++) {
		void *b[NB];
		size_t n = 16 + (r * 37) % 3000;
		b[0] = took(malloc(n), n);
		b[1] = took(calloc(3, n), 3 * n);
		void *q = took(malloc(24), 24);
		b[2] = took(realloc(q, n + 5000), n + 5000);
		b[3] = took(reallocarray(NULL, 4, n), 4 * n);
		b[4] = took(memalign(64, n), n);
		TP_CHECK(((size_t)b[4] & 63) == 0);
		/* (not checked: mimalloc 2.0's aligned_alloc(256, 512) gives
		 * blocks aligned to 128, traced or not) */
		b[5] = took(aligned_alloc(256, 512), 512);
		void *pm = NULL;
		TP_CHECK(posix_memalign(&pm, 128, n) == 0);
		b[6] = took(pm, n);
		void *bad = NULL;
		TP_CHECK(posix_memalign(&bad, 3, n) == EINVAL);
		b[7] = took(valloc(n), n);
		b[8] = took(pvalloc(n), n);
		b[9] = took(malloc(1), 1);
		for (int i = 0; i < NB; i++)
			free(b[i]);
		/* malloc x3 (one realloc'ed), calloc, realloc, reallocarray,
		 * memalign, aligned_alloc, posix_memalign x2, valloc, pvalloc */
		calls += 12;
		frees += NB;
	}
	/* the allocator's own function: its block given back with free() */
	tp_say_num("own_api", mallocx || own);
	if (mallocx || own) {
		void *p = mallocx ? mallocx(100, 0) : own(100);
		TP_CHECK(p != NULL);
		memset(p, 1, 100);
		TP_CHECK(malloc_usable_size(p) >= 100);
		free(p);
	}
	HEAPTRAIL_MARK("end");
	tp_say_num("calls", calls);
	tp_say_num("frees", frees);
	tp_say_num("requested", requested);
	tp_say_num("usable", usable_sum);
	return 0;
}
