/* fork from a multi-threaded program while other threads allocate: a child
 * must never inherit a tracer lock held by another thread.
 * Usage: forkstorm N.  Two threads do malloc/free pairs until told to
 * stop; main forks N children one after the other; each child does
 * 3 x malloc(77)/free and _exit(0); main waits for each (a child that
 * deadlocks hangs the program: the test's timeout catches it).  Prints
 * "pairs: P" (the threads' total) at the end. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp.h"

static atomic_int stop;
static unsigned long done[2];

static void *churn(void *arg)
{
	unsigned long *n = arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		free(tp_keep(malloc(24 + *n % 1000)));
		if (++*n % 64 == 0)
			usleep(100); /* keep the trace small */
	}
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	unsigned long n = tp_atoul(argv[1]);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		TP_CHECK(pthread_create(&t[i], NULL, churn, &done[i]) == 0);
	for (unsigned long k = 0; k < n; k++) {
		pid_t pid = fork();
		TP_CHECK(pid >= 0);
		if (pid == 0) {
			for (int i = 0; i < 3; i++)
				free(tp_keep(malloc(77)));
			_exit(0);
		}
		int st;
		TP_CHECK(waitpid(pid, &st, 0) == pid);
		TP_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		TP_CHECK(pthread_join(t[i], NULL) == 0);
	tp_say_num("pairs", done[0] + done[1]);
	return 0;
}
