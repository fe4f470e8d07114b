/* Exact allocations at known lines (SITE: markers) for `heaptrail export`
 * (tests/e2e/cases_export.py).  Usage: expo.
 *   main thread, named "expo-main"; mark "begin"
 *   alloc_a      10 x malloc(1000); 6 freed, 4 kept      SITE:a
 *   alloc_b      calloc(10, 300), kept                    SITE:b
 *   aligned      posix_memalign(64, 128), aligned_alloc(256, 512),
 *                memalign(32, 96): all freed
 *   growing      realloc(NULL, 100) -> 20000 -> 40000, freed
 *   a mapping    mmap of 8192 bytes, munmap
 *   big          malloc(2 MiB) held while the thread runs: the peak
 *   a thread     named "expo-worker": malloc(5000), kept   SITE:worker
 *   mark "end"
 * Left at exit by the program itself: 4000 + 3000 + 5000 bytes in 6 blocks. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <heaptrail.h>

#include "tp.h"

void *volatile expo_sink;
static void *kept[16];

__attribute__((noinline)) static void alloc_a(void)
{
	void *p[10];
	for (int i = 0; i < 10; i++)
		p[i] = malloc(1000); /* SITE:a */
	for (int i = 0; i < 10; i++) {
		TP_CHECK(p[i]);
		if (i < 6)
			free(p[i]);
		else
			kept[i - 6] = p[i];
	}
}

__attribute__((noinline)) static void alloc_b(void)
{
	kept[4] = calloc(10, 300); /* SITE:b */
	TP_CHECK(kept[4]);
}

__attribute__((noinline)) static void aligned(void)
{
	void *p = NULL;
	TP_CHECK(posix_memalign(&p, 64, 128) == 0);
	free(p);
	free(tp_keep(aligned_alloc(256, 512)));
	free(tp_keep(memalign(32, 96)));
}

__attribute__((noinline)) static void growing(void)
{
	char *p = realloc(NULL, 100);
	TP_CHECK(p);
	p = realloc(p, 20000);
	TP_CHECK(p);
	p = realloc(p, 40000);
	TP_CHECK(p);
	free(p);
}

static void *worker(void *arg)
{
	(void)arg;
	TP_CHECK(pthread_setname_np(pthread_self(), "expo-worker") == 0);
	kept[5] = malloc(5000); /* SITE:worker */
	TP_CHECK(kept[5]);
	return NULL;
}

int main(void)
{
	TP_CHECK(pthread_setname_np(pthread_self(), "expo-main") == 0);
	HEAPTRAIL_MARK("begin");
	alloc_a();
	alloc_b();
	aligned();
	growing();
	void *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TP_CHECK(m != MAP_FAILED);
	TP_CHECK(munmap(m, 8192) == 0);
	void *big = malloc(2 << 20); /* SITE:big */
	TP_CHECK(big);
	pthread_t t;
	TP_CHECK(pthread_create(&t, NULL, worker, NULL) == 0);
	TP_CHECK(pthread_join(t, NULL) == 0);
	free(big);
	HEAPTRAIL_MARK("end");
	expo_sink = kept;
	return 0;
}
