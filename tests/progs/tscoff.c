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
 *   pstrict  the same through prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT);
 *   race     4 threads turn the counter off at once, then each makes N
 *            pairs (the second went on with the counter while the first
 *            measured, and died of SIGSEGV: probe U);
 *   fork     N pairs, the counter off, then a fork child makes N pairs and
 *            exits 5 (its trace's header read the vDSO's clock: SIGSEGV);
 *   noclock  a seccomp filter fails clock_gettime, then the counter off,
 *            then N pairs (the measure of the counter's rate never ended:
 *            the program hung).
 * Prints "tscoff: ok" and exits 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tp.h"

static long pairs;
static const char *mode;

static void work(void)
{
	tp_turn_pairs(pairs);
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

static pthread_barrier_t together;

static void *race_thread(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&together);
	if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) != 0)
		_exit(TP_FAIL_STATUS);
	work();
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
	} else if (!strcmp(mode, "race")) {
		pthread_t th[4];
		TP_CHECK(pthread_barrier_init(&together, NULL, 4) == 0);
		for (int i = 0; i < 4; i++)
			TP_CHECK(pthread_create(&th[i], NULL, race_thread, NULL) == 0);
		for (int i = 0; i < 4; i++)
			TP_CHECK(pthread_join(th[i], NULL) == 0);
	} else if (!strcmp(mode, "fork")) {
		work();
		TP_CHECK(prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) == 0);
		pid_t p = fork();
		TP_CHECK(p >= 0);
		if (p == 0) {
			work();
			_exit(5);
		}
		int st;
		TP_CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 5);
	} else if (!strcmp(mode, "noclock")) {
		struct sock_filter f[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_gettime, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
		TP_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
		TP_CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0);
		TP_CHECK(prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) == 0);
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
