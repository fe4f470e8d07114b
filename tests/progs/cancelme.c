/* Threads cancelled while they loop on malloc/realloc/calloc/free, which
 * are no cancellation points, with the recorder writing the trace itself:
 * first the program kills the recorder's writer process (its child, found
 * in /proc/PID/task/PID/children), then 4 threads loop, and main cancels
 * them (deferred cancellation: each may only be cancelled at the
 * pthread_testcancel() after its loop).  A thread cancelled inside its
 * loop (inside a malloc-API call: the recorder made a cancellation point
 * there) is counted; so is a hang, by the test's timeout.  Prints
 * "writer: PID" (0 if none was found) and "cancelled_inside: N"; exits N. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tp.h"

#define NT 4

static volatile int finished[NT], inside[NT];

static void on_cancel(void *a)
{
	long id = (long)a;
	if (!finished[id])
		inside[id] = 1;
}

static void *loop(void *a)
{
	long id = (long)a;
	pthread_cleanup_push(on_cancel, a);
	for (int i = 0; i < 300000; i++) {
		void *p = tp_keep(malloc((size_t)(i % 4000 + 1)));
		p = tp_keep(realloc(p, (size_t)(i % 5000 + 2)));
		free(p);
		free(tp_keep(calloc(1, (size_t)(i % 300 + 1))));
	}
	finished[id] = 1;
	pthread_testcancel();
	pthread_cleanup_pop(0);
	return NULL;
}

static void wait_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

int main(void)
{
	char path[64], buf[64] = {0};
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", getpid(), getpid());
	int fd = open(path, O_RDONLY);
	unsigned long writer = 0;
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
			writer = writer * 10 + (unsigned long)(buf[i] - '0');
	}
	if (writer) {
		kill((pid_t)writer, SIGKILL);
		wait_ms(20);
	}
	tp_say_num("writer", writer);
	pthread_t t[NT];
	for (long i = 0; i < NT; i++)
		TP_CHECK(pthread_create(&t[i], NULL, loop, (void *)i) == 0);
	wait_ms(30);
	for (int i = 0; i < NT; i++)
		pthread_cancel(t[i]);
	int bad = 0;
	for (int i = 0; i < NT; i++) {
		TP_CHECK(pthread_join(t[i], NULL) == 0);
		bad += inside[i];
	}
	tp_say_num("cancelled_inside", (unsigned long long)bad);
	return bad;
}
