/* A program that changes directory, as a daemon does (chdir("/"), then
 * fork) and as a wrapper does before it execs.  Usage: wanderer fork DIR |
 * exec DIR | child.
 * fork: 3 x malloc(100)/free, chdir(DIR), fork; the child makes
 *   5 x malloc(500)/free and exits 0; the parent waits for it, exits 0.
 * exec: 3 x malloc(100)/free, chdir(DIR), execv("/proc/self/exe", "child").
 * child: 5 x malloc(500)/free, exit 0.
 * Each process says "NAME: PID" on stdout.  Checked by
 * tests/e2e/cases_record_files.py (relative_output_after_chdir). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp.h"

int main(int argc, char **argv)
{
	TP_CHECK(argc >= 2);
	if (!strcmp(argv[1], "child")) {
		tp_pairs(5, 500);
		tp_say_num("child", (unsigned long long)getpid());
		return 0;
	}
	TP_CHECK(argc == 3);
	tp_pairs(3, 100);
	TP_CHECK(chdir(argv[2]) == 0);
	if (!strcmp(argv[1], "exec")) {
		tp_say_num("parent", (unsigned long long)getpid());
		char *args[] = {argv[0], "child", NULL};
		execv("/proc/self/exe", args);
		tp_write(2, "wanderer: execv failed\n");
		return TP_FAIL_STATUS;
	}
	TP_CHECK(!strcmp(argv[1], "fork"));
	pid_t pid = fork();
	TP_CHECK(pid >= 0);
	if (pid == 0) {
		tp_pairs(5, 500);
		tp_say_num("child", (unsigned long long)getpid());
		exit(0);
	}
	int st;
	TP_CHECK(waitpid(pid, &st, 0) == pid);
	TP_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	tp_say_num("parent", (unsigned long long)getpid());
	return 0;
}
