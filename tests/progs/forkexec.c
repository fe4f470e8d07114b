/* forkexec: a program that starts others by fork + exec, the way shells,
 * make and git do.  Usage: forkexec N | image K | late MS HOLD_MS.
 * N: 3 x malloc(50)/free; then, one after the other, N children that each
 *   exec "image K" (K = 1..N) at once, without a heap call of their own
 *   between fork and exec; then one more child that makes 2 x
 *   malloc(100)/free before it execs "image 9".  The parent waits for each
 *   child and says "parent: PID"; each child says "forked K: PID" before
 *   its exec (write(2): no heap call).
 * image K: K x malloc(300)/free, then says "image K: PID".
 * late MS HOLD_MS: `cmd &` as a shell runs it: malloc(50)/free, then one
 *   child that makes 2 x malloc(100)/free, says "forked late: PID", waits
 *   MS ms and execs "image 0 HOLD_MS" (which waits HOLD_MS ms, then says
 *   "image 0: PID"); the parent does not wait for it and ends at once. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tp.h"

static void run_child(const char *self, unsigned long k, int alloc_first)
{
	pid_t pid = fork();
	TP_CHECK(pid >= 0);
	if (pid == 0) {
		char kbuf[24], name[32] = "forked ";
		tp_utoa(kbuf, k);
		strcat(name, kbuf);
		if (alloc_first)
			tp_pairs(2, 100);
		tp_say_num(name, (unsigned long long)getpid());
		char *args[] = {(char *)self, "image", kbuf, NULL};
		execv("/proc/self/exe", args);
		_exit(TP_FAIL_STATUS);
	}
	int st;
	TP_CHECK(waitpid(pid, &st, 0) == pid);
	TP_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void sleep_ms(unsigned long ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) != 0)
		;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "late")) {
		tp_pairs(1, 50);
		pid_t pid = fork();
		TP_CHECK(pid >= 0);
		if (pid == 0) {
			tp_pairs(2, 100);
			tp_say_num("forked late", (unsigned long long)getpid());
			sleep_ms(tp_atoul(argv[2]));
			char *args[] = {argv[0], "image", "0", argv[3], NULL};
			execv("/proc/self/exe", args);
			_exit(TP_FAIL_STATUS);
		}
		return 0;
	}
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "image")) {
		unsigned long k = tp_atoul(argv[2]);
		if (argc == 4)
			sleep_ms(tp_atoul(argv[3]));
		tp_pairs((int)k, 300);
		char name[32] = "image ", kbuf[24];
		strcat(name, tp_utoa(kbuf, k));
		tp_say_num(name, (unsigned long long)getpid());
		return 0;
	}
	TP_CHECK(argc == 2);
	unsigned long n = tp_atoul(argv[1]);
	tp_pairs(3, 50);
	for (unsigned long k = 1; k <= n; k++)
		run_child(argv[0], k, 0);
	run_child(argv[0], 9, 1);
	tp_say_num("parent", (unsigned long long)getpid());
	return 0;
}
