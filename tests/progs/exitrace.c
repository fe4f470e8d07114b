/* exit() from 8 threads and main at once: each thread makes 20,000
 * malloc/free pairs of 16 + its index bytes, all meet at a barrier, then
 * every one of them calls exit(5).  The trace must hold every pair and be
 * closed, with either writer.
 *   malloc 160000, free 160000 (and the threads' own calloc); exit 5. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "tp.h"

#define NT 8

static pthread_barrier_t all;

static void *worker(void *a)
{
	long id = (long)a;
	for (int i = 0; i < 20000; i++)
		free(tp_keep(malloc((size_t)(16 + id))));
	pthread_barrier_wait(&all);
	exit(5);
}

int main(void)
{
	TP_CHECK(pthread_barrier_init(&all, NULL, NT + 1) == 0);
	pthread_t t[NT];
	for (long i = 0; i < NT; i++)
		TP_CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
	pthread_barrier_wait(&all);
	exit(5);
}
