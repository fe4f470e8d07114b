/* A threaded program that waits to be ended by a signal.  Usage:
 * termwait THREADS N.  Starts THREADS threads that sleep (no heap call of
 * their own), makes N malloc/free pairs (tp_rand_pairs), says "ready" on
 * stdout and waits for a line on stdin (then exits 0).  A signal sent to
 * the process is taken by whichever thread does not block it: the test
 * sends a second one while the recorder's handler closes the trace in the
 * thread that took the first (cases_record_files.py). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "tp.h"

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 3);
	unsigned long nth = tp_atoul(argv[1]), n = tp_atoul(argv[2]);
	for (unsigned long i = 0; i < nth; i++) {
		pthread_t th;
		TP_CHECK(pthread_create(&th, NULL, sleeper, NULL) == 0);
	}
	tp_rand_pairs(n);
	tp_write(1, "ready\n");
	char c;
	while (read(0, &c, 1) == 1 && c != '\n')
		;
	return 0;
}
