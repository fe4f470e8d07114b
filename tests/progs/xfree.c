/* Cross-thread frees.  Usage: xfree N.
 * Phase 1: a thread allocates N blocks of 32 bytes and exits; main frees
 * them.  Phase 2: main allocates N blocks of 48 bytes; a second thread
 * frees them.  So 2N blocks are freed by a thread other than the one that
 * allocated them, and nothing is live at the end. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "tp.h"

#define MAXN 100000
static void *blocks[MAXN];
static unsigned long n;

static void *producer(void *arg)
{
	(void)arg;
	for (unsigned long i = 0; i < n; i++) {
		blocks[i] = tp_keep(malloc(32));
		TP_CHECK(blocks[i]);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	(void)arg;
	for (unsigned long i = 0; i < n; i++)
		free(blocks[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	n = tp_atoul(argv[1]);
	TP_CHECK(n >= 1 && n <= MAXN);
	pthread_t t;
	TP_CHECK(pthread_create(&t, NULL, producer, NULL) == 0);
	TP_CHECK(pthread_join(t, NULL) == 0);
	for (unsigned long i = 0; i < n; i++)
		free(blocks[i]);
	for (unsigned long i = 0; i < n; i++) {
		blocks[i] = tp_keep(malloc(48));
		TP_CHECK(blocks[i]);
	}
	TP_CHECK(pthread_create(&t, NULL, consumer, NULL) == 0);
	TP_CHECK(pthread_join(t, NULL) == 0);
	return 0;
}
