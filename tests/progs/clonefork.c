/* A child made by clone() without CLONE_VM (a new process, as fork's, but
 * glibc runs no atfork handler for it: sandboxes and zygotes do this).
 * Usage: clonefork N.  The parent makes 10 malloc/free pairs of 10 bytes,
 * allocates the child's 64 KiB stack (kept), clones with SIGCHLD, waits
 * for the child (which exits 7), then makes 20 pairs of 20 bytes: malloc
 * 31, free 30, 65536 bytes live at exit.  The child makes N pairs of 100
 * bytes and keeps 10 blocks of 555 bytes: malloc N + 10, free N, 5550
 * bytes live.  Exits 0 when the child exited 7.  Checked by
 * tests/e2e/cases_process.py (clone_child_traced). */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

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

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	n = tp_atoul(argv[1]);
	for (int i = 0; i < 10; i++)
		free(tp_keep(malloc(10)));
	char *stack = tp_keep(malloc(1 << 16));
	TP_CHECK(stack);
	pid_t pid = clone(child, stack + (1 << 16), SIGCHLD, NULL);
	TP_CHECK(pid > 0);
	int st;
	TP_CHECK(waitpid(pid, &st, 0) == pid);
	for (int i = 0; i < 20; i++)
		free(tp_keep(malloc(20)));
	TP_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
	tp_say_num("child", (unsigned long long)pid);
	return 0;
}
