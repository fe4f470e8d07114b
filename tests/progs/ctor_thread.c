/* A thread started and joined by a constructor, so it exits before main
 * runs.  It names itself "ctor-thread" and does 3 malloc(48)/free pairs;
 * main then does 2 malloc(80)/free pairs. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "tp.h"

static void *early(void *arg)
{
	(void)arg;
	TP_CHECK(pthread_setname_np(pthread_self(), "ctor-thread") == 0);
	for (int i = 0; i < 3; i++)
		free(tp_keep(malloc(48)));
	return NULL;
}

__attribute__((constructor)) static void start_early(void)
{
	pthread_t t;
	TP_CHECK(pthread_create(&t, NULL, early, NULL) == 0);
	TP_CHECK(pthread_join(t, NULL) == 0);
}

int main(void)
{
	for (int i = 0; i < 2; i++)
		free(tp_keep(malloc(80)));
	return 0;
}
