/* Many short-lived threads, one after the other.  Usage: churn N.
 * Each thread names itself "churn-I" and does 10 malloc(33)/free pairs. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "tp.h"

static void *one(void *arg)
{
	char name[16] = "churn-";
	tp_utoa(name + 6, (unsigned long long)(uintptr_t)arg);
	TP_CHECK(pthread_setname_np(pthread_self(), name) == 0);
	for (int i = 0; i < 10; i++)
		free(tp_keep(malloc(33)));
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	unsigned long n = tp_atoul(argv[1]);
	for (unsigned long i = 0; i < n; i++) {
		pthread_t t;
		TP_CHECK(pthread_create(&t, NULL, one, (void *)(uintptr_t)i) == 0);
		TP_CHECK(pthread_join(t, NULL) == 0);
	}
	return 0;
}
