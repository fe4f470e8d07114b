/* A child made without glibc's atfork handlers: by clone() without
 * CLONE_VM (a new process, as fork's: sandboxes and zygotes do this), by
 * _Fork(), or by _Fork() in a signal handler (crash reporters); or by the
 * system call itself through syscall(): SYS_fork, SYS_clone with SIGCHLD
 * and no stack, SYS_clone3 without CLONE_VM.
 * Usage: clonefork N [clone|_Fork|sigfork|sysfork|sysclone|sysclone3]
 * (clone).  The parent makes 10
 * malloc/free pairs of 10 bytes, allocates a 64 KiB block (the clone's
 * stack, kept), makes the child, waits for it (it exits 7), then makes 20
 * pairs of 20 bytes: malloc 31, free 30, 65536 bytes live at exit.  The
 * child makes N pairs of 100 bytes and keeps 10 blocks of 555 bytes:
 * malloc N + 10, free N, 5550 bytes live.  Exits 0 when the child exited
 * 7.  Checked by tests/e2e/cases_process.py (clone_child_traced). */
#define _GNU_SOURCE
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp.h"

static unsigned long n;

static int child(void *arg)
{
	(void)arg;
	for (unsigned long i = 0; i < n; i++)
		free(tp_keep(malloc(100)));
	for (int i = 0; i < 10; i++)
		tp_keep(malloc(555));
	return 7;
}

static pid_t forked;

static void on_usr2(int sig)
{
	(void)sig;
	forked = _Fork();
	if (forked == 0)
		_exit(child(NULL));
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2 || argc == 3);
	n = tp_atoul(argv[1]);
	const char *how = argc == 3 ? argv[2] : "clone";
	for (int i = 0; i < 10; i++)
		free(tp_keep(malloc(10)));
	char *stack = tp_keep(malloc(1 << 16));
	TP_CHECK(stack);
	pid_t pid;
	if (!strcmp(how, "clone")) {
		pid = clone(child, stack + (1 << 16), SIGCHLD, NULL);
	} else if (!strcmp(how, "_Fork")) {
		pid = _Fork();
		if (pid == 0)
			exit(child(NULL));
	} else if (!strncmp(how, "sys", 3)) {
		struct clone_args ca;
		memset(&ca, 0, sizeof(ca));
		ca.exit_signal = SIGCHLD;
		if (!strcmp(how, "sysfork"))
			pid = (pid_t)syscall(SYS_fork);
		else if (!strcmp(how, "sysclone"))
			pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
		else
			pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
		if (pid == 0)
			exit(child(NULL));
	} else {
		TP_CHECK(!strcmp(how, "sigfork"));
		TP_CHECK(signal(SIGUSR2, on_usr2) != SIG_ERR);
		TP_CHECK(raise(SIGUSR2) == 0);
		pid = forked;
	}
	TP_CHECK(pid > 0);
	int st;
	TP_CHECK(waitpid(pid, &st, 0) == pid);
	for (int i = 0; i < 20; i++)
		free(tp_keep(malloc(20)));
	TP_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
	tp_say_num("child", (unsigned long long)pid);
	return 0;
}
