/* Calls every interposed function once or a few times, in one thread, and
 * frees everything it allocated.  The exact counts are checked by
 * tests/e2e/cases_api.py (test_api_all); keep the two in step:
 *
 *   malloc 1         free 9 (one is free(NULL))    calloc 1
 *   realloc 3 (realloc(NULL,50), a grow to 5000, realloc(p,0))
 *   reallocarray 2 (1 fails: nmemb*size overflows)
 *   memalign 1   posix_memalign 2 (1 fails: EINVAL)   aligned_alloc 1
 *   valloc 1     pvalloc 1     mallopt 1     malloc_trim 1
 *   mmap 4 (one through mmap64; 1 fails: length 0)    mremap 1
 *   munmap 4 (1 fails: unaligned address)
 *   sbrk 3       brk 1
 *   shmget 1     shmat 1       shmdt 1       shmctl 1 (IPC_RMID)
 *
 * Requested bytes of the successful allocations: 100 + 200 + 50 + 5000 +
 * 100 + 100 + 100 + 128 + 100 + 100 = 5978; the live bytes peak at 5300
 * (right after the grow), the live blocks at 8 (at the end, before the
 * frees).  What depends on the allocator is measured with
 * malloc_usable_size (not interposed) and said on stdout at the end:
 *   pid, usable (usable bytes of the allocations), peak_usable (peak of the
 *   live usable bytes), moved (1 if the grow moved the block), brk (the
 *   program break at the end). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include "tp.h"

static size_t usable_total, usable_live, usable_peak;

/* Accounts a new block (or a freed one, with sign -1). */
static void account(void *p, int sign)
{
	size_t u = malloc_usable_size(p);
	if (sign > 0) {
		usable_total += u;
		usable_live += u;
		if (usable_live > usable_peak)
			usable_peak = usable_live;
	} else {
		usable_live -= u;
	}
}

int main(void)
{
	/* malloc, free(NULL), calloc */
	char *p1 = tp_keep(malloc(100));
	TP_CHECK(p1);
	account(p1, 1);
	memset(p1, 1, 100);
	TP_CHECK(malloc_usable_size(p1) >= 100);
	free(NULL);
	char *p2 = tp_keep(calloc(10, 20));
	TP_CHECK(p2);
	account(p2, 1);
	for (int i = 0; i < 200; i++)
		TP_CHECK(p2[i] == 0);

	/* realloc: as malloc, grow (moved or in place), as free */
	char *p3 = tp_keep(realloc(NULL, 50));
	TP_CHECK(p3);
	account(p3, 1);
	memset(p3, 3, 50);
	char *old3 = p3;
	account(p3, -1);
	p3 = tp_keep(realloc(p3, 5000));
	TP_CHECK(p3 && p3[49] == 3);
	int moved = p3 != old3;
	account(p3, 1);
	account(p3, -1);
	TP_CHECK(realloc(p3, 0) == NULL); /* glibc frees p3 and returns NULL */

	/* reallocarray: from NULL, then one that overflows and fails */
	char *p4 = tp_keep(reallocarray(NULL, 10, 10));
	TP_CHECK(p4);
	account(p4, 1);
	volatile size_t many = SIZE_MAX / 2; /* volatile: no compile-time warning */
	errno = 0;
	TP_CHECK(reallocarray(p4, many, 4) == NULL);
	TP_CHECK(errno == ENOMEM);
	p4[99] = 4; /* still ours */

	/* the aligned family */
	char *p5 = tp_keep(memalign(64, 100));
	TP_CHECK(p5 && ((uintptr_t)p5 & 63) == 0);
	account(p5, 1);
	void *p6 = NULL;
	TP_CHECK(posix_memalign(&p6, 64, 100) == 0);
	TP_CHECK(p6 && ((uintptr_t)p6 & 63) == 0);
	account(p6, 1);
	void *bad = (void *)&bad;
	TP_CHECK(posix_memalign(&bad, 3, 100) == EINVAL);
	TP_CHECK(bad == (void *)&bad); /* untouched on failure */
	char *p7 = tp_keep(aligned_alloc(64, 128));
	TP_CHECK(p7 && ((uintptr_t)p7 & 63) == 0);
	account(p7, 1);
	long page = sysconf(_SC_PAGESIZE);
	char *p8 = tp_keep(valloc(100));
	TP_CHECK(p8 && ((uintptr_t)p8 & (uintptr_t)(page - 1)) == 0);
	account(p8, 1);
	char *p9 = tp_keep(pvalloc(100));
	TP_CHECK(p9 && ((uintptr_t)p9 & (uintptr_t)(page - 1)) == 0);
	TP_CHECK(malloc_usable_size(p9) >= (size_t)page);
	account(p9, 1);

	/* tunables */
	TP_CHECK(mallopt(M_TRIM_THRESHOLD, 256 * 1024) == 1);
	(void)malloc_trim(0);

	/* the program's own mappings */
	char *a = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TP_CHECK(a != MAP_FAILED);
	a[0] = a[(1 << 20) - 1] = 1;
	char *b = mmap64(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TP_CHECK(b != MAP_FAILED);
	b[0] = 1;
	errno = 0;
	TP_CHECK(mmap(NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED);
	TP_CHECK(errno == EINVAL);
	char *c = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TP_CHECK(c != MAP_FAILED);
	c[8191] = 7;
	char *c2 = mremap(c, 8192, 16384, MREMAP_MAYMOVE);
	TP_CHECK(c2 != MAP_FAILED && c2[8191] == 7);
	c2[16383] = 1;
	TP_CHECK(munmap(c2, 16384) == 0);
	TP_CHECK(munmap(b, 65536) == 0);
	TP_CHECK(munmap(a, 1 << 20) == 0);
	errno = 0;
	TP_CHECK(munmap((void *)1, 4096) == -1 && errno == EINVAL);

	/* the program break: grow by a page, then back */
	void *b0 = sbrk(0);
	TP_CHECK(b0 != (void *)-1);
	TP_CHECK(sbrk(4096) == b0);
	((char *)b0)[4095] = 1;
	TP_CHECK(brk(b0) == 0);
	TP_CHECK(sbrk(0) == b0);

	/* SysV shared memory */
	int id = shmget(IPC_PRIVATE, 65536, IPC_CREAT | 0600);
	TP_CHECK(id >= 0);
	char *s = shmat(id, NULL, 0);
	TP_CHECK(s != (void *)-1);
	s[0] = 1;
	TP_CHECK(shmdt(s) == 0);
	TP_CHECK(shmctl(id, IPC_RMID, NULL) == 0);

	free(p1);
	free(p2);
	free(p4);
	free(p5);
	free(p6);
	free(p7);
	free(p8);
	free(p9);
	tp_say_num("pid", (unsigned long long)getpid());
	tp_say_num("usable", usable_total);
	tp_say_num("peak_usable", usable_peak);
	tp_say_num("moved", (unsigned long long)moved);
	tp_say_num("brk", (unsigned long long)(uintptr_t)b0);
	return 0;
}
