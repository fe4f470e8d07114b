/* A sandbox that refuses getpid (a seccomp filter: EPERM), then allocates
 * (cases_process.py, getpid_refused): nogetpid N makes N malloc/free
 * pairs after the filter is on and prints "nogetpid: ok".  The recorder
 * tells itself from a fork child by its pid: a getpid that fails must not
 * make it leave the trace unclosed. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tp.h"

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	long n = atol(argv[1]);
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getpid, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
	TP_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
	TP_CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0);
	TP_CHECK(syscall(SYS_getpid) == -1 && errno == EPERM);
	for (long i = 0; i < n; i++)
		free(tp_keep(malloc((size_t)(i % 4096 + 1))));
	printf("nogetpid: ok\n");
	return 0;
}
