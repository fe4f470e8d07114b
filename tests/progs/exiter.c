/* Ways to end a process.  Usage: exiter MODE.
 *   _exit:       10 x malloc(32), 4 freed, then _exit(5)
 *   _Exit:       the same, then _Exit(6)
 *   exit:        the same, then exit(0)
 *   exit_group:  the same, and a thread that allocates 2 x malloc(48),
 *                then the exit_group system call itself (status 3), as
 *                Go's runtime ends a program: no exit(), no _exit()
 *   atexit:      the same, an atexit handler that does malloc(11)/free,
 *                then return 0 from main
 *   thread-exit: main mallocs 2 x 16 and waits in pthread_join; a thread
 *                does 3 x malloc(64), frees 1 and calls exit(7).
 *   main-pthread-exit: main mallocs 2 x 16, starts a thread and ends with
 *                pthread_exit; the thread does 3 x malloc(64)/free after
 *                main has ended and returns: the process exits 0 when the
 *                last thread ends. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tp.h"

static void ten_four(void)
{
	void *p[10];
	for (int i = 0; i < 10; i++)
		TP_CHECK((p[i] = tp_keep(malloc(32))) != NULL);
	for (int i = 0; i < 4; i++)
		free(p[i]);
}

static void at_exit_handler(void)
{
	free(tp_keep(malloc(11)));
}

static void *exiting_thread(void *arg)
{
	(void)arg;
	void *p[3];
	for (int i = 0; i < 3; i++)
		TP_CHECK((p[i] = tp_keep(malloc(64))) != NULL);
	free(p[0]);
	exit(7);
}

static void *two_48(void *arg)
{
	(void)arg;
	tp_keep(malloc(48));
	tp_keep(malloc(48));
	return NULL;
}

static pthread_t main_thread;

static void *last_thread(void *arg)
{
	(void)arg;
	pthread_join(main_thread, NULL); /* returns once main has ended */
	for (int i = 0; i < 3; i++)
		free(tp_keep(malloc(64)));
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	const char *m = argv[1];
	if (!strcmp(m, "thread-exit")) {
		tp_keep(malloc(16));
		tp_keep(malloc(16));
		pthread_t t;
		TP_CHECK(pthread_create(&t, NULL, exiting_thread, NULL) == 0);
		pthread_join(t, NULL);
		return TP_FAIL_STATUS; /* not reached */
	}
	if (!strcmp(m, "main-pthread-exit")) {
		tp_keep(malloc(16));
		tp_keep(malloc(16));
		main_thread = pthread_self();
		pthread_t t;
		TP_CHECK(pthread_create(&t, NULL, last_thread, NULL) == 0);
		pthread_exit(NULL);
	}
	if (!strcmp(m, "atexit"))
		TP_CHECK(atexit(at_exit_handler) == 0);
	ten_four();
	if (!strcmp(m, "_exit"))
		_exit(5);
	if (!strcmp(m, "_Exit"))
		_Exit(6);
	if (!strcmp(m, "exit"))
		exit(0);
	if (!strcmp(m, "exit_group")) {
		pthread_t t;
		TP_CHECK(pthread_create(&t, NULL, two_48, NULL) == 0);
		pthread_join(t, NULL);
		syscall(SYS_exit_group, 3);
	}
	TP_CHECK(!strcmp(m, "atexit"));
	return 0;
}
