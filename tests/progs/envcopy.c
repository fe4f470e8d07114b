/* envcopy: a program that copies its environment, as git, make and shells
 * do.  Usage: envcopy [exec].
 * Writes "env: ENTRY" for each entry of environ, in order; copies each
 * entry into a block of its own (one malloc each, N in all) and frees them;
 * with "exec", forks a child that execs /usr/bin/env with the environment
 * it inherited (its lines: "ENTRY"), and waits for it; then says
 * "copied: N".  No heap call but the copies. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp.h"

extern char **environ;

int main(int argc, char **argv)
{
	size_t n = 0;
	for (; environ[n]; n++) {
		tp_write(1, "env: ");
		tp_write(1, environ[n]);
		tp_write(1, "\n");
	}
	char *copies[4096];
	TP_CHECK(n <= 4096);
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(environ[i]) + 1;
		copies[i] = tp_keep(malloc(len));
		TP_CHECK(copies[i]);
		memcpy(copies[i], environ[i], len);
	}
	for (size_t i = 0; i < n; i++)
		free(copies[i]);
	if (argc > 1 && !strcmp(argv[1], "exec")) {
		pid_t pid = fork();
		TP_CHECK(pid >= 0);
		if (pid == 0) {
			char *args[] = {"env", NULL};
			execv("/usr/bin/env", args);
			_exit(TP_FAIL_STATUS);
		}
		int st;
		TP_CHECK(waitpid(pid, &st, 0) == pid);
		TP_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	tp_say_num("copied", n);
	return 0;
}
