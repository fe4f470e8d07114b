/* Two threads allocate as fast as they can, each a known sequence of
 * sizes: thread i's k-th malloc asks for stress_size(i, k) bytes, then
 * frees the block before it (the first free is free(NULL)).  The test
 * kills the program with SIGKILL at a random moment and checks that the
 * trace holds a prefix of exactly this, per thread (cases_reliability.py).
 *
 * usage: stress SECONDS [THREADS]   prints "ready" once the threads run */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


static void *volatile sink;
static double seconds;

/* Also in cases_reliability.py: keep the two in step. */
static size_t stress_size(unsigned i, uint64_t k)
{
	return 16 + (size_t)((k * 2654435761u + i * 977u) % 4000u);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;
	char name[16];
	snprintf(name, sizeof(name), "w%u", i);
	pthread_setname_np(pthread_self(), name);
	void *prev = NULL;
	double end = now() + seconds;
	for (uint64_t k = 0;; k++) {
		void *p = malloc(stress_size(i, k));
		sink = p;
		free(prev);
		prev = p;
		if ((k & 0xffff) == 0 && now() > end)
			break;
	}
	free(prev);
	return NULL;
}

int main(int argc, char **argv)
{
	seconds = argc > 1 ? atof(argv[1]) : 10;
	unsigned n = argc > 2 ? (unsigned)atoi(argv[2]) : 2;
	pthread_t th[16];
	if (n < 1 || n > 16)
		return 2;
	for (unsigned i = 0; i < n; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
	printf("ready\n");
	fflush(stdout);
	for (unsigned i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	return 0;
}
