/* Threads whose first stacks come at once (cases_stacks_fixes.py,
 * stacks_first_in_many_threads; probe V): stackrace N releases N threads
 * together from a barrier, and each makes 200,000 malloc/free pairs of 16
 * to 79 bytes in site(), called from worker(); main allocates nothing
 * after it made them.  Recorded with --stacks --sample-bytes 1M, main's
 * own few small blocks are most likely not sampled, so one thread's first
 * sampled call reads the modules for the process's first stack while the
 * others run (HEAPTRAIL_SCAN_DELAY_US makes that read last): a thread
 * whose first stack came then had no module for site's return address,
 * took a guess that ended the stack there, and kept it for every later
 * stack at that site (a stack of one frame, "site"). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "tp.h"

static pthread_barrier_t go;

static __attribute__((noinline)) void site(void)
{
	for (int i = 0; i < 200000; i++)
		free(tp_keep(malloc((size_t)(16 + i % 64))));
}

static __attribute__((noinline)) void *worker(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&go);
	site();
	tp_keep(NULL);
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	int n = atoi(argv[1]);
	TP_CHECK(n > 0 && n <= 64);
	pthread_t th[64];
	TP_CHECK(pthread_barrier_init(&go, NULL, (unsigned)n) == 0);
	for (int i = 0; i < n; i++)
		TP_CHECK(pthread_create(&th[i], NULL, worker, NULL) == 0);
	for (int i = 0; i < n; i++)
		TP_CHECK(pthread_join(th[i], NULL) == 0);
	return 0;
}
