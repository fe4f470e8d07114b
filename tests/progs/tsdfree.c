/* Threads that free in their own pthread key destructor, which runs after
 * the recorder's (cases_threads.py, thread_exit_then_frees).  Usage:
 * tsdfree N: N threads each set a key to a block of 777 bytes and end; the
 * key's destructor frees it.  Nothing of theirs is live at exit. */
#include <pthread.h>
#include <stdlib.h>

#include "tp.h"

static pthread_key_t key;

static void release(void *p)
{
	free(p);
}

static void *worker(void *arg)
{
	(void)arg;
	TP_CHECK(pthread_setspecific(key, tp_keep(malloc(777))) == 0);
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	int n = atoi(argv[1]);
	TP_CHECK(n > 0 && n <= 64);
	TP_CHECK(pthread_key_create(&key, release) == 0);
	pthread_t t[64];
	for (int i = 0; i < n; i++)
		TP_CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0);
	for (int i = 0; i < n; i++)
		TP_CHECK(pthread_join(t[i], NULL) == 0);
	return 0;
}
