/* A realloc that moves a block, racing another thread's malloc of the
 * size it frees (cases_attach_fixes.py, attach_realloc_race_counted):
 * reallocrace N
 *
 * Run with one arena and no tcache (GLIBC_TUNABLES
 * glibc.malloc.arena_max=1:glibc.malloc.tcache_count=0), so that the
 * 48-byte chunk the mover's realloc frees is the very next one the
 * taker's malloc(40) gets.  The mover: N times malloc(40), a guard
 * malloc(40) after it (so that the realloc cannot grow in place),
 * realloc(p, 2000), then frees the result and the guard.  The taker
 * mallocs 40 bytes and keeps every block to the end, until the mover is
 * done.  Under uprobes, the taker's malloc often returns the address the
 * realloc freed before the realloc's own return is seen: a tracer that
 * takes events in the order they reach it then sees the malloc first.
 * At exit the blocks live are the taker's (plus glibc's own); the program
 * writes "kept N" to stderr, N the blocks the taker keeps. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "tp.h"

#define MAX_KEPT 1000000

static _Atomic int mover_done;
static long rounds;
static void **kept;
static long nkept;

static void *mover(void *arg)
{
	(void)arg;
	for (long i = 0; i < rounds; i++) {
		void *p = tp_keep(malloc(40));
		void *guard = tp_keep(malloc(40));
		void *q = tp_keep(realloc(p, 2000));
		TP_CHECK(p && guard && q);
		free(q);
		free(guard);
	}
	atomic_store(&mover_done, 1);
	return NULL;
}

static void *taker(void *arg)
{
	(void)arg;
	while (!atomic_load(&mover_done) && nkept < MAX_KEPT) {
		void *x = tp_keep(malloc(40));
		TP_CHECK(x);
		kept[nkept++] = x;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	rounds = (long)tp_atoul(argv[1]);
	kept = tp_keep(malloc(MAX_KEPT * sizeof(*kept)));
	TP_CHECK(kept);
	pthread_t a, b;
	TP_CHECK(pthread_create(&b, NULL, taker, NULL) == 0);
	TP_CHECK(pthread_create(&a, NULL, mover, NULL) == 0);
	TP_CHECK(pthread_join(a, NULL) == 0);
	TP_CHECK(pthread_join(b, NULL) == 0);
	char buf[24];
	tp_write(2, "kept ");
	tp_write(2, tp_utoa(buf, (unsigned long long)nkept));
	tp_write(2, "\n");
	return 0;
}
