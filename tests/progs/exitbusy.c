/* exit() while three threads allocate: each worker loops on malloc/free
 * pairs and counts every call that returned in a file mapped shared
 * (argv[1]: so the count survives the process, up to its very end);
 * main lets them run 50 ms, then calls exit(3) without stopping them.
 * The file holds two counters: mallocs, frees. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tp.h"

#define NT 3

static _Atomic unsigned long *count; /* [0] mallocs, [1] frees */

static void *worker(void *a)
{
	(void)a;
	for (;;) {
		void *p = tp_keep(malloc(48));
		atomic_fetch_add_explicit(&count[0], 1, memory_order_relaxed);
		free(p);
		atomic_fetch_add_explicit(&count[1], 1, memory_order_relaxed);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return TP_FAIL_STATUS;
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, 4096) != 0)
		return TP_FAIL_STATUS;
	count = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (count == MAP_FAILED)
		return TP_FAIL_STATUS;
	pthread_t t;
	for (int i = 0; i < NT; i++)
		if (pthread_create(&t, NULL, worker, NULL) != 0)
			return TP_FAIL_STATUS;
	struct timespec ts = {0, 50 * 1000 * 1000};
	nanosleep(&ts, NULL);
	exit(3);
}
