/* fork without exec, while another thread allocates.  Usage: forktree.
 * The parent starts a thread that makes 20000 malloc(32)/free pairs, and
 * meanwhile forks 3 children, one after the other.  Child i (0..2) frees
 * nothing of its parent's, makes (i+1)*10 malloc(200+i)/free pairs, starts
 * a thread that makes 50 malloc(48)/free pairs, joins it, forks a
 * grandchild that makes 5 malloc(300+i)/free pairs and exits, waits for it
 * and exits 0.  The parent waits for every child and joins its thread;
 * it prints "child N: PID" and "grandchild N: PID" lines (the grandchild
 * pids come back through a pipe) and exits 0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tp.h"

static void *spin(void *arg)
{
	tp_pairs((int)(long)arg, 32);
	return NULL;
}

static void *child_thread(void *arg)
{
	(void)arg;
	tp_pairs(50, 48);
	return NULL;
}

static void child(int i, int fd)
{
	tp_pairs((i + 1) * 10, 200 + (size_t)i);
	pthread_t t;
	TP_CHECK(pthread_create(&t, NULL, child_thread, NULL) == 0);
	TP_CHECK(pthread_join(t, NULL) == 0);
	pid_t g = fork();
	TP_CHECK(g >= 0);
	if (g == 0) {
		tp_pairs(5, 300 + (size_t)i);
		exit(0);
	}
	int st;
	TP_CHECK(waitpid(g, &st, 0) == g && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	TP_CHECK(write(fd, &g, sizeof(g)) == (ssize_t)sizeof(g));
	exit(0);
}

int main(void)
{
	int fds[2];
	TP_CHECK(pipe(fds) == 0);
	pthread_t t;
	TP_CHECK(pthread_create(&t, NULL, spin, (void *)20000L) == 0);
	pid_t kids[3];
	for (int i = 0; i < 3; i++) {
		kids[i] = fork();
		TP_CHECK(kids[i] >= 0);
		if (kids[i] == 0) {
			close(fds[0]);
			child(i, fds[1]);
		}
		int st;
		TP_CHECK(waitpid(kids[i], &st, 0) == kids[i] && WIFEXITED(st) &&
			 WEXITSTATUS(st) == 0);
	}
	TP_CHECK(pthread_join(t, NULL) == 0);
	close(fds[1]);
	char buf[24];
	for (int i = 0; i < 3; i++) {
		pid_t g;
		TP_CHECK(read(fds[0], &g, sizeof(g)) == (ssize_t)sizeof(g));
		buf[0] = (char)('0' + i);
		buf[1] = 0;
		tp_write(1, "child ");
		tp_write(1, buf);
		tp_write(1, ": ");
		tp_write(1, tp_utoa(buf, (unsigned long long)kids[i]));
		tp_write(1, "\ngrandchild ");
		buf[0] = (char)('0' + i);
		buf[1] = 0;
		tp_write(1, buf);
		tp_write(1, ": ");
		tp_write(1, tp_utoa(buf, (unsigned long long)g));
		tp_write(1, "\n");
	}
	return 0;
}
