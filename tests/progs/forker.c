/* fork: parent and child both allocate known counts.  Usage: forker [SIG].
 * Parent: 10 x malloc(64) before fork, then waits for the child, then
 * 5 x malloc(128)/free, then frees the first 10: malloc 15, free 15.
 * Child: frees 3 of the inherited blocks (its trace never saw them
 * allocated), then 7 x malloc(96)/free, exit(0): malloc 7, free 10; with
 * SIG (a number), it kills itself with that signal instead of exiting
 * (the parent expects it).
 * Prints "child: PID" on stdout at the end. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp.h"

int main(int argc, char **argv)
{
	int sig = argc > 1 ? (int)tp_atoul(argv[1]) : 0;
	void *before[10];
	for (int i = 0; i < 10; i++)
		TP_CHECK((before[i] = tp_keep(malloc(64))) != NULL);
	pid_t pid = fork();
	TP_CHECK(pid >= 0);
	if (pid == 0) {
		for (int i = 0; i < 3; i++)
			free(before[i]);
		for (int i = 0; i < 7; i++) {
			void *p = tp_keep(malloc(96));
			TP_CHECK(p);
			free(p);
		}
		if (sig)
			kill(getpid(), sig);
		exit(0);
	}
	int st;
	TP_CHECK(waitpid(pid, &st, 0) == pid);
	TP_CHECK(sig ? WIFSIGNALED(st) && WTERMSIG(st) == sig
		     : WIFEXITED(st) && WEXITSTATUS(st) == 0);
	for (int i = 0; i < 5; i++) {
		void *p = tp_keep(malloc(128));
		TP_CHECK(p);
		free(p);
	}
	for (int i = 0; i < 10; i++)
		free(before[i]);
	tp_say_num("child", (unsigned long long)pid);
	return 0;
}
