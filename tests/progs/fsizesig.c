/* A program with its own SIGXFSZ handler, run under a small RLIMIT_FSIZE
 * (cases_record_fixes.py, file_size_limit_no_signal; probe T): 3 threads
 * and main make N malloc/free pairs each, then it prints "fsizesig: N
 * SIGXFSZ" with the signals its handler saw.  The program writes no file:
 * a SIGXFSZ can only come from the recorder's writes to the trace. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "tp.h"

static volatile sig_atomic_t seen;
static long pairs;

static void on_xfsz(int sig)
{
	(void)sig;
	seen++;
}

static void *work(void *arg)
{
	(void)arg;
	tp_turn_pairs(pairs);
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	pairs = atol(argv[1]);
	TP_CHECK(signal(SIGXFSZ, on_xfsz) != SIG_ERR);
	pthread_t th[3];
	for (int i = 0; i < 3; i++)
		TP_CHECK(pthread_create(&th[i], NULL, work, NULL) == 0);
	work(NULL);
	for (int i = 0; i < 3; i++)
		TP_CHECK(pthread_join(th[i], NULL) == 0);
	char buf[24];
	tp_write(1, "fsizesig: ");
	tp_write(1, tp_utoa(buf, (unsigned long long)seen));
	tp_write(1, " SIGXFSZ\n");
	return 0;
}
