/* A thread that keeps putting the program's own file on the descriptors
 * the tracer's writer uses (1000 and up: dup2, then close), while the main
 * thread allocates and asks the tracer to flush.  Usage: fdrace DATAFILE N.
 * The data file must hold exactly "hello\n" afterwards: a tracer that
 * checks its descriptor and then writes would now and then write into it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include <heaptrail.h>

#include "tp.h"

static int data_fd;
static _Atomic int stop;

static void *racer(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop))
		for (int fd = 1000; fd < 1004; fd++) {
			dup2(data_fd, fd);
			close(fd);
		}
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 3);
	unsigned long n = tp_atoul(argv[2]);
	data_fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	TP_CHECK(data_fd >= 0);
	TP_CHECK(write(data_fd, "hello\n", 6) == 6);
	pthread_t th;
	TP_CHECK(pthread_create(&th, NULL, racer, NULL) == 0);
	for (unsigned long i = 0; i < n; i++) {
		free(tp_keep(malloc(16 + i % 1000)));
		if (i % 1000 == 0)
			HEAPTRAIL_SYNC();
	}
	atomic_store(&stop, 1);
	TP_CHECK(pthread_join(th, NULL) == 0);
	close(data_fd);
	return 0;
}
