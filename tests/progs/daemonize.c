/* daemon(3): the parent leaves at once, the child goes on.
 * Usage: daemonize NOCHDIR NOCLOSE HOLD_MS DONEFILE [WAIT_MS]
 * (DONEFILE absolute; WAIT_MS: the child sleeps that long before its first
 * call, so that it has no trace yet when the parent has ended).
 * Parent: 4 x malloc(64) kept, then daemon(NOCHDIR, NOCLOSE): malloc 4.
 * Child: frees 2 of the inherited blocks (its trace never saw them
 * allocated), then 1000 x malloc(48)/free, waits HOLD_MS, checks what
 * daemon() did (the directory is "/" unless NOCHDIR, stdin, stdout and
 * stderr are /dev/null unless NOCLOSE, a new session), and writes
 * "ok PID\n" to DONEFILE, or "bad WHAT\n": malloc 1000, free 1002. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tp.h"

static int is_devnull(int fd, const struct stat *null)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == null->st_rdev;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 5 || argc == 6);
	unsigned long wait_ms = argc == 6 ? tp_atoul(argv[5]) : 0;
	int nochdir = (int)tp_atoul(argv[1]), noclose = (int)tp_atoul(argv[2]);
	unsigned long hold_ms = tp_atoul(argv[3]);
	void *kept[4];
	for (int i = 0; i < 4; i++)
		TP_CHECK((kept[i] = tp_keep(malloc(64))) != NULL);
	char cwd[4096];
	TP_CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	if (daemon(nochdir, noclose) < 0)
		return 98;
	struct timespec w = {(time_t)(wait_ms / 1000), (long)(wait_ms % 1000) * 1000000};
	if (wait_ms)
		nanosleep(&w, NULL);
	for (int i = 0; i < 2; i++)
		free(kept[i]);
	for (int i = 0; i < 1000; i++) {
		void *p = tp_keep(malloc(48));
		TP_CHECK(p);
		free(p);
	}
	struct timespec ts = {(time_t)(hold_ms / 1000), (long)(hold_ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
	const char *bad = NULL;
	char now[4096];
	struct stat null;
	if (!getcwd(now, sizeof(now)))
		bad = "getcwd";
	else if (strcmp(now, nochdir ? cwd : "/") != 0)
		bad = "directory";
	else if (getsid(0) != getpid())
		bad = "session";
	else if (stat("/dev/null", &null) < 0)
		bad = "stat /dev/null";
	else if (!noclose && !(is_devnull(0, &null) && is_devnull(1, &null) && is_devnull(2, &null)))
		bad = "stdio not on /dev/null";
	else if (noclose && is_devnull(1, &null))
		bad = "stdout moved with noclose";
	char msg[64] = "ok "; /* (room for "bad " and the longest WHAT) */
	if (bad) {
		strcpy(msg, "bad ");
		strcat(msg, bad);
	} else {
		tp_utoa(msg + 3, (unsigned long long)getpid());
	}
	strcat(msg, "\n");
	int fd = open(argv[4], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	TP_CHECK(fd >= 0);
	tp_write(fd, msg);
	close(fd);
	return 0;
}
