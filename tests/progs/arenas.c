/* N threads alive at once, each allocating, so that glibc gives each its
 * own arena (arena_get2 makes a new arena while fewer than 8 x cores
 * exist and none is free): N + 1 arenas.  Every thread, the main one
 * first, says "tid: T" before it allocates.  Usage: arenas N.
 * Checked by tests/e2e/cases_heap.py. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tp.h"

#define BLOCKS 200

static pthread_barrier_t all_alive, all_done;

/* "tid: T" in one write, so that the threads' lines do not interleave. */
static void say_tid(void)
{
	char line[48] = "tid: ";
	tp_utoa(line + 5, (unsigned long long)syscall(SYS_gettid));
	size_t n = strlen(line);
	line[n] = '\n';
	TP_CHECK(write(1, line, n + 1) == (ssize_t)(n + 1));
}

static void *worker(void *arg)
{
	(void)arg;
	say_tid();
	pthread_barrier_wait(&all_alive); /* every thread exists before any allocates */
	void *b[BLOCKS];
	for (int i = 0; i < BLOCKS; i++) {
		b[i] = tp_keep(malloc(64 + (size_t)i * 8));
		TP_CHECK(b[i]);
	}
	/* nobody exits (which would free its arena for reuse) before all
	 * have allocated */
	pthread_barrier_wait(&all_done);
	for (int i = 0; i < BLOCKS; i++)
		free(b[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	unsigned long n = tp_atoul(argv[1]);
	TP_CHECK(n >= 1 && n <= 15); /* 8 x 2 cores - 1: each gets a new arena */
	say_tid();
	void *m = tp_keep(malloc(100));
	TP_CHECK(pthread_barrier_init(&all_alive, NULL, (unsigned)n + 1) == 0);
	TP_CHECK(pthread_barrier_init(&all_done, NULL, (unsigned)n) == 0);
	pthread_t th[16];
	for (unsigned long i = 0; i < n; i++)
		TP_CHECK(pthread_create(&th[i], NULL, worker, NULL) == 0);
	pthread_barrier_wait(&all_alive);
	for (unsigned long i = 0; i < n; i++)
		TP_CHECK(pthread_join(th[i], NULL) == 0);
	free(m);
	return 0;
}
