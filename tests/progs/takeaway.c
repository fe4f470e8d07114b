/* A program whose trace is taken away just after it ends, while `heaptrail
 * record` finishes it: a child it leaves behind waits for it to end, then
 * moves the trace or puts another file in its place.
 *
 *   takeaway N TRACE mv|replace NEWPATH [DELAY_MS]
 *
 * Makes N malloc/free pairs, forks a child and returns 0.  The child
 * waits until its parent has ended (its parent process changes) and
 * DELAY_MS more (0), then renames TRACE to NEWPATH (mv), or renames it there and writes "not a
 * trace\n" to a new file at TRACE (replace), and exits.  Prints "pairs N".
 * Run under record --no-follow-fork (the child writes no trace of its
 * own).  Checked by tests/e2e/cases_reliability.py
 * (record_trace_taken_at_end). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tp.h"

int main(int argc, char **argv)
{
	TP_CHECK((argc == 5 || argc == 6) &&
		 (!strcmp(argv[3], "mv") || !strcmp(argv[3], "replace")));
	unsigned long n = tp_atoul(argv[1]);
	for (unsigned long i = 0; i < n; i++)
		free(tp_keep(malloc(16 + i % 512)));
	printf("pairs %lu\n", n);
	fflush(stdout);
	pid_t parent = getpid();
	pid_t pid = fork();
	TP_CHECK(pid >= 0);
	if (pid > 0)
		return 0;
	while (getppid() == parent)
		usleep(100);
	if (argc == 6)
		usleep((useconds_t)tp_atoul(argv[5]) * 1000);
	if (rename(argv[2], argv[4]) != 0)
		_exit(3);
	if (!strcmp(argv[3], "replace")) {
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 || write(fd, "not a trace\n", 12) != 12)
			_exit(4);
		close(fd);
	}
	_exit(0);
}
