/* A program that reaps "every child" until none is left, the way init
 * systems, shells and debuggers do: the tracer's writer process must never
 * make such a wait block forever, nor be handed to the program.
 *
 *   reaper MODE N [MS]
 *
 * Forks N children (each mallocs and frees once, sleeps MS milliseconds
 * (0), then exits with status 7), mallocs and frees once itself, then waits for any child until the
 * wait fails, by MODE:
 *   waitpid  waitpid(-1, &st, __WALL)
 *   pgrp     waitpid(0, &st, __WALL)          (its own process group)
 *   wait     wait(&st)
 *   waitid   waitid(P_ALL, 0, &si, WEXITED | __WALL)
 *   wait4    wait4(-1, &st, __WALL, &ru)
 *   wclone   wait4(-1, &st, __WCLONE, NULL)    (clone children only: none)
 *   nohang   waitpid(-1, &st, WNOHANG | __WALL), polled
 * Prints "reaped: K" and "strangers: S" (pids it did not fork, or a
 * status other than exit 7); exits 0 when the wait ended with ECHILD, K is
 * the number of children MODE sees (N, or 0 for wclone) and S is 0.
 * Checked by tests/e2e/cases_process.py (wait_all_children). */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tp.h"

#define MAX_KIDS 64

static pid_t kids[MAX_KIDS];
static unsigned long nkids;

static int ours(pid_t pid)
{
	for (unsigned long i = 0; i < nkids; i++) {
		if (kids[i] == pid) {
			kids[i] = 0; /* reaped once only */
			return 1;
		}
	}
	return 0;
}

/* One wait by mode: the pid reaped (its status in *st), 0 (nohang: none
 * ready yet) or -1 with errno. */
static pid_t wait_one(const char *mode, int *st)
{
	if (!strcmp(mode, "waitpid"))
		return waitpid(-1, st, __WALL);
	if (!strcmp(mode, "pgrp"))
		return waitpid(0, st, __WALL);
	if (!strcmp(mode, "wait"))
		return wait(st);
	if (!strcmp(mode, "wait4")) {
		struct rusage ru;
		return wait4(-1, st, __WALL, &ru);
	}
	if (!strcmp(mode, "wclone"))
		return wait4(-1, st, __WCLONE, NULL);
	if (!strcmp(mode, "nohang"))
		return waitpid(-1, st, WNOHANG | __WALL);
	if (!strcmp(mode, "waitid")) {
		siginfo_t si;
		memset(&si, 0, sizeof(si));
		if (waitid(P_ALL, 0, &si, WEXITED | __WALL) < 0)
			return -1;
		*st = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : 0x7f;
		return si.si_pid;
	}
	tp_write(2, "reaper: unknown mode\n");
	_exit(TP_FAIL_STATUS);
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 3 || argc == 4);
	const char *mode = argv[1];
	nkids = tp_atoul(argv[2]);
	unsigned long ms = argc == 4 ? tp_atoul(argv[3]) : 0;
	TP_CHECK(nkids <= MAX_KIDS);
	for (unsigned long i = 0; i < nkids; i++) {
		pid_t pid = fork();
		TP_CHECK(pid >= 0);
		if (pid == 0) {
			free(tp_keep(malloc(100 + i)));
			struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
			nanosleep(&ts, NULL);
			_exit(7);
		}
		kids[i] = pid;
	}
	free(tp_keep(malloc(64)));
	unsigned long reaped = 0, strangers = 0;
	for (;;) {
		int st = 0;
		pid_t r = wait_one(mode, &st);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		if (r == 0) { /* nohang: nothing ready */
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
			continue;
		}
		reaped++;
		if (!ours(r) || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
			strangers++;
	}
	int e = errno;
	tp_say_num("reaped", reaped);
	tp_say_num("strangers", strangers);
	unsigned long expected = strcmp(mode, "wclone") ? nkids : 0;
	if (e != ECHILD)
		tp_write(1, "the wait did not end with ECHILD\n");
	return e == ECHILD && reaped == expected && strangers == 0 ? 0 : 1;
}
