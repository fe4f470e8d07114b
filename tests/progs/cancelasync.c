/* Threads cancelled asynchronously (PTHREAD_CANCEL_ASYNCHRONOUS) while
 * they loop on malloc/free: ROUNDS times (argv[1], 150), 3 threads warm
 * their tcache (so that a cancellation lands in the recorder's code or
 * glibc's lock-free tcache path, never in glibc holding an arena lock,
 * where glibc itself deadlocks: malloc is not async-cancel-safe), then
 * loop on malloc(32)/free until main cancels them after 0.2 to 2.2 ms.
 * Prints "rounds: N" at the end. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "tp.h"

#define NT 3

static atomic_int ready;

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100; i++)
		free(tp_keep(malloc(32)));
	atomic_fetch_add(&ready, 1);
	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
	for (;;)
		free(tp_keep(malloc(32)));
	return NULL;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? (int)tp_atoul(argv[1]) : 150;
	unsigned seed = 1;
	for (int r = 0; r < rounds; r++) {
		pthread_t t[NT];
		atomic_store(&ready, 0);
		for (int i = 0; i < NT; i++)
			if (pthread_create(&t[i], NULL, worker, NULL) != 0)
				return TP_FAIL_STATUS;
		while (atomic_load(&ready) < NT)
			usleep(50);
		seed = seed * 1103515245u + 12345u;
		usleep(200 + (seed >> 16) % 2000);
		for (int i = 0; i < NT; i++)
			pthread_cancel(t[i]);
		for (int i = 0; i < NT; i++)
			pthread_join(t[i], NULL);
	}
	tp_say_num("rounds", (unsigned long long)rounds);
	return 0;
}
