/* The tracer's writer process must be invisible to the program: no child
 * for wait(), no SIGCHLD.  Forks one child that allocates and exits, then
 * reaps children until there are none.  Prints "reaped N sigchld M"; exits
 * 0 when N = 1 (just the forked child) and M = 1.
 * Checked by tests/e2e/cases_process.py (writer_invisible). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp.h"

static volatile sig_atomic_t sigchld;

static void on_chld(int sig)
{
	(void)sig;
	sigchld++;
}

int main(void)
{
	signal(SIGCHLD, on_chld);
	free(tp_keep(malloc(100)));
	pid_t pid = fork();
	TP_CHECK(pid >= 0);
	if (pid == 0) {
		free(tp_keep(malloc(200)));
		_exit(0);
	}
	unsigned long reaped = 0;
	for (;;) {
		int st;
		pid_t r = waitpid(-1, &st, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		reaped++;
	}
	TP_CHECK(errno == ECHILD);
	/* a writer that ended meanwhile would show here, or as a signal */
	usleep(100000);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		reaped++;
	tp_say_num("reaped", reaped);
	tp_say_num("sigchld", (unsigned long long)sigchld);
	return reaped == 1 && sigchld == 1 ? 0 : 1;
}
