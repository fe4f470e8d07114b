/* A sandbox that refuses getpid (a seccomp filter: EPERM), then allocates
 * (cases_process.py, getpid_refused): nogetpid N makes N malloc/free
 * pairs after the filter is on and prints "nogetpid: ok".  The recorder
 * tells itself from a fork child by its pid: a getpid that fails must not
 * make it leave the trace unclosed.
 *
 * nogetpid N gettid refuses gettid instead, then starts 3 threads and
 * each of them and main make N pairs (gettid_refused): the recorder named
 * every thread (uint32_t)-1, their streams ran into one and most of their
 * events were lost, with no word.
 *
 * nogetpid N fork refuses getpid, then forks a child that makes N pairs
 * and prints "child: PID" (its pid as the parent's fork returned it):
 * its trace was named OUTPUT.-1, its header said pid -1, and record's
 * summary left it out (probe U). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp.h"

static long pairs;

static void *work(void *arg)
{
	(void)arg;
	tp_turn_pairs(pairs);
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2 || (argc == 3 && (!strcmp(argv[2], "gettid") || !strcmp(argv[2], "fork"))));
	pairs = atol(argv[1]);
	int gettid_mode = argc == 3 && !strcmp(argv[2], "gettid");
	long nr = gettid_mode ? SYS_gettid : SYS_getpid;
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
	TP_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
	TP_CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0);
	TP_CHECK(syscall(nr) == -1 && errno == EPERM);
	if (argc == 3 && !strcmp(argv[2], "fork")) {
		pid_t p = fork();
		TP_CHECK(p >= 0);
		if (p == 0) {
			work(NULL);
			_exit(0);
		}
		int st;
		TP_CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0);
		printf("child: %d\n", (int)p);
	}
	pthread_t th[3];
	int nth = gettid_mode ? 3 : 0;
	for (int i = 0; i < nth; i++)
		TP_CHECK(pthread_create(&th[i], NULL, work, NULL) == 0);
	work(NULL);
	for (int i = 0; i < nth; i++)
		TP_CHECK(pthread_join(th[i], NULL) == 0);
	printf("nogetpid: ok\n");
	return 0;
}
