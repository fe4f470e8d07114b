/* Takes the timestamp counter from under the recorder (cases_process.py,
 * tsc_turned_off; probe T).  Usage: tscoff N MODE, MODE one of
 *   prctl    N malloc/free pairs, prctl(PR_SET_TSC, PR_TSC_SIGSEGV), 50 ms
 *            asleep, N pairs: RDTSC faults from then on (the recorder's
 *            next timestamp killed the program with SIGSEGV);
 *   syscall  the same through syscall(SYS_prctl, ...);
 *   strict   a thread makes N pairs, enters seccomp's strict mode through
 *            syscall(SYS_seccomp, ...), makes N pairs and leaves with
 *            SYS_exit; main makes N pairs and joins it (the thread died at
 *            its first call after, and the program went on without its
 *            work);
 *   pstrict  the same through prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT).
 * Prints "tscoff: ok" and exits 0. */
#define _GNU_SOURCE
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tp.h"

static long pairs;
static const char *mode;

static void work(void)
{
	for (long i = 0; i < pairs; i++)
		free(tp_keep(malloc((size_t)(i % 4096 + 1))));
}

static void *strict_thread(void *arg)
{
	(void)arg;
	work();
	long r = !strcmp(mode, "strict") ? syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, NULL)
					 : prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0);
	if (r != 0)
		_exit(TP_FAIL_STATUS);
	work();
	syscall(SYS_exit, 0); /* (the only way out: exit_group is refused) */
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 3);
	pairs = atol(argv[1]);
	mode = argv[2];
	if (!strcmp(mode, "prctl") || !strcmp(mode, "syscall")) {
		work();
		long r = !strcmp(mode, "prctl")
			     ? prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0)
			     : syscall(SYS_prctl, PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
		TP_CHECK(r == 0);
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
		work();
	} else {
		TP_CHECK(!strcmp(mode, "strict") || !strcmp(mode, "pstrict"));
		pthread_t th;
		TP_CHECK(pthread_create(&th, NULL, strict_thread, NULL) == 0);
		work();
		TP_CHECK(pthread_join(th, NULL) == 0);
	}
	printf("tscoff: ok\n");
	return 0;
}
