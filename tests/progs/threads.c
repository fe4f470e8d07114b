/* N worker threads, each named "worker-I" with pthread_setname_np, each
 * doing M malloc/free pairs of 16..271 bytes.  Usage: threads N M.
 * Checked by tests/e2e/cases_threads.py. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "tp.h"

static unsigned long pairs;

static void *worker(void *arg)
{
	unsigned long idx = (unsigned long)(uintptr_t)arg;
	char name[16] = "worker-";
	tp_utoa(name + 7, idx);
	TP_CHECK(pthread_setname_np(pthread_self(), name) == 0);
	for (unsigned long i = 0; i < pairs; i++) {
		char *p = tp_keep(malloc(16 + (i + idx) % 256));
		TP_CHECK(p);
		p[0] = (char)i;
		free(p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 3);
	unsigned long n = tp_atoul(argv[1]);
	pairs = tp_atoul(argv[2]);
	TP_CHECK(n >= 1 && n <= 64);
	pthread_t th[64];
	for (unsigned long i = 0; i < n; i++)
		TP_CHECK(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i) == 0);
	for (unsigned long i = 0; i < n; i++)
		TP_CHECK(pthread_join(th[i], NULL) == 0);
	return 0;
}
