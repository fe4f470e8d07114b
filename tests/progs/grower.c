/* A program whose heap grows at a known place by a known amount each
 * second, for heaptrail live (tests/e2e/cases_live.py).
 * Usage: grower SECONDS [DROP_AT].
 * Every 100 ms for SECONDS seconds:
 *  - grow_site() allocates one block of 100000 bytes and keeps it
 *    (1000000 bytes a second, live until the end or DROP_AT);
 *  - churn_site() makes 100 malloc/free pairs of 64 bytes (nothing stays);
 *  - from the first second on, a second thread's helper_site() keeps one
 *    block of 1000 bytes every 100 ms: SECONDS * 10 - 10 of them (the
 *    counts are exact; a reader following the trace meets a new thread).
 * At DROP_AT seconds (if given, > 0) every block grow_site kept is freed,
 * and growing goes on from zero: the heap over time drops there.
 * At the end everything is freed and the program exits 0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tp.h"

#define MAXB 100000

static void *grown[MAXB], *helped[MAXB];
static unsigned long ngrown, nhelped, ticks;

static __attribute__((noinline)) void grow_site(void)
{
	grown[ngrown++] = tp_keep(malloc(100000));
	__asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void churn_site(void)
{
	for (int i = 0; i < 100; i++)
		free(tp_keep(malloc(64)));
	__asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void helper_site(void)
{
	helped[nhelped++] = tp_keep(malloc(1000));
	__asm__ volatile("" ::: "memory");
}

static void tick(void)
{
	struct timespec ts = {0, 100000000};
	while (nanosleep(&ts, &ts) != 0)
		;
}

static void *helper(void *arg)
{
	(void)arg;
	while (nhelped < ticks && nhelped < MAXB) {
		helper_site();
		tick();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2 || argc == 3);
	unsigned long secs = tp_atoul(argv[1]);
	unsigned long drop = argc == 3 ? tp_atoul(argv[2]) : 0;
	ticks = secs > 1 ? secs * 10 - 10 : 0;
	pthread_t t;
	int started = 0;
	for (unsigned long i = 0; i < secs * 10 && ngrown < MAXB; i++) {
		if (i == 10) {
			TP_CHECK(pthread_create(&t, NULL, helper, NULL) == 0);
			started = 1;
		}
		if (drop && i == drop * 10) {
			while (ngrown)
				free(grown[--ngrown]);
		}
		grow_site();
		churn_site();
		tick();
	}
	if (started)
		pthread_join(t, NULL);
	while (ngrown)
		free(grown[--ngrown]);
	while (nhelped)
		free(helped[--nhelped]);
	return 0;
}
