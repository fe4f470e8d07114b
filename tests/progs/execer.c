/* exec: Usage: execer parent | parent-fail | spawn | child.
 * parent: 4 x malloc(200)/free, then execv("/proc/self/exe", "child").
 * spawn: 4 x malloc(200)/free, fork; the child execs "child" at once;
 *   the parent waits for it and exits 0.
 * parent-fail: 4 x malloc(200)/free, an execv of a missing file (fails),
 *   then 2 x malloc(210)/free, exit 0.
 * child: 6 x malloc(300)/free, exit 0.  Each image says "NAME: PID" on
 * stdout. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp.h"

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	if (!strcmp(argv[1], "child")) {
		tp_pairs(6, 300);
		tp_say_num("child", (unsigned long long)getpid());
		return 0;
	}
	tp_pairs(4, 200);
	if (!strcmp(argv[1], "parent")) {
		tp_say_num("parent", (unsigned long long)getpid());
		char *args[] = {argv[0], "child", NULL};
		execv("/proc/self/exe", args);
		tp_write(2, "execer: execv failed\n");
		return TP_FAIL_STATUS;
	}
	if (!strcmp(argv[1], "spawn")) {
		pid_t pid = fork();
		TP_CHECK(pid >= 0);
		if (pid == 0) {
			char *args[] = {argv[0], "child", NULL};
			execv("/proc/self/exe", args);
			_exit(TP_FAIL_STATUS);
		}
		int st;
		TP_CHECK(waitpid(pid, &st, 0) == pid);
		TP_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		tp_say_num("parent", (unsigned long long)getpid());
		return 0;
	}
	TP_CHECK(!strcmp(argv[1], "parent-fail"));
	char *args[] = {"nope", NULL};
	errno = 0;
	TP_CHECK(execv("/nonexistent/heaptrail-test", args) == -1 && errno == ENOENT);
	tp_pairs(2, 210);
	tp_say_num("parent", (unsigned long long)getpid());
	return 0;
}
