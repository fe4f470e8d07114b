/* A daemon's pattern: started as root, drops to nobody (65534) with
 * setresgid/setresuid, then forks a worker that makes 1000 malloc/free
 * pairs of 30 bytes and exits 3.  Prints "child: PID".  The worker was
 * forked with the identity it runs under, so it is traced (its trace is
 * written as nobody, where that user may write).  "dropfork exec": after
 * the drop, exec sh -c 'exit 4' instead (the new image cannot continue
 * root's trace).  Must run as root. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp.h"

int main(int argc, char **argv)
{
	TP_CHECK(geteuid() == 0);
	for (int i = 0; i < 10; i++)
		free(tp_keep(malloc(10)));
	TP_CHECK(setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0);
	if (argc > 1 && !strcmp(argv[1], "exec")) {
		execl("/bin/sh", "sh", "-c", "exit 4", (char *)NULL);
		return 1;
	}
	pid_t pid = fork();
	TP_CHECK(pid >= 0);
	if (pid == 0) {
		for (int i = 0; i < 1000; i++)
			free(tp_keep(malloc(30)));
		_exit(3);
	}
	int st;
	TP_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 3);
	tp_say_num("child", (unsigned long long)pid);
	return 0;
}
