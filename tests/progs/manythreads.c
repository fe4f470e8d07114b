/* More threads recording at once than the recorder has buffers (4096).
 * Usage: manythreads N.  N threads (64 KiB stacks), each allocates a
 * 32-byte block, waits at a barrier until all N have started, then frees
 * it and ends.  Prints "threads: N" once all have been joined, or
 * "threads: M" and exits 3 if only M could be created (the machine's
 * limit on processes). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "tp.h"

static pthread_barrier_t all_started;

static void *run(void *arg)
{
	(void)arg;
	void *p = tp_keep(malloc(32));
	TP_CHECK(p);
	pthread_barrier_wait(&all_started);
	free(p);
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	unsigned long n = tp_atoul(argv[1]);
	pthread_t *t = malloc(n * sizeof(*t));
	TP_CHECK(t);
	TP_CHECK(pthread_barrier_init(&all_started, NULL, (unsigned)n + 1) == 0);
	pthread_attr_t a;
	TP_CHECK(pthread_attr_init(&a) == 0);
	TP_CHECK(pthread_attr_setstacksize(&a, 65536) == 0);
	unsigned long made = 0;
	while (made < n && pthread_create(&t[made], &a, run, NULL) == 0)
		made++;
	if (made < n) {
		tp_say_num("threads", made);
		_exit(3); /* (the threads made wait at the barrier for good) */
	}
	pthread_barrier_wait(&all_started);
	for (unsigned long i = 0; i < n; i++)
		TP_CHECK(pthread_join(t[i], NULL) == 0);
	tp_say_num("threads", n);
	return 0;
}
