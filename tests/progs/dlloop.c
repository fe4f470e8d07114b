/* dlopen and dlclose two libraries, again and again.  Usage: dlloop
 * LIBTPDL LIBTPDL2 ROUNDS [alternate|threads|fork].  Each round: dlopen
 * libtpdl (its constructor: 2 x malloc(555)) and libtpdl2, tpdl_work(3)
 * (3 x malloc(777)/free and a calloc(3, 111) that tpdl_release frees),
 * tpdl2_work(4) (4 x malloc(1234)/free, 1 x malloc(99) leaked), dlclose
 * both (libtpdl's destructor frees the 555s).
 *
 * alternate: libtpdl is closed before libtpdl2 is opened, so that libtpdl2
 * is mapped where libtpdl was.
 * threads: as alternate, with a second thread that makes the library
 * calls: tpdl_work(3), then, while the main thread closes libtpdl and
 * opens libtpdl2, 200 malloc(48)/free pairs in worker_churn, then
 * tpdl2_work(4); the main thread calls tpdl2_work(4) too (10 allocations
 * under tpdl2_work a round, 2 of them leaked).
 * fork: ROUNDS rounds as alternate, then a child (fork, no exec) does
 * ROUNDS more of its own and exits; the parent waits for it.
 *
 * Prints "rounds N" at the end (and "child rounds N" from the child). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "tp.h"

enum { JOB_NONE, JOB_WORK, JOB_CHURN, JOB_WORK2, JOB_QUIT };

static _Atomic int job;  /* for the worker thread, JOB_NONE when done */
static void *(*work)(int);
static void (*release)(void *);
static int (*work2)(int);

static void post(int j)
{
	atomic_store(&job, j);
	while (atomic_load(&job) != JOB_NONE)
		sched_yield();
}

__attribute__((noinline)) static void worker_churn(int n)
{
	for (int i = 0; i < n; i++)
		free(tp_keep(malloc(48)));
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		int j;
		while ((j = atomic_load(&job)) == JOB_NONE)
			sched_yield();
		if (j == JOB_QUIT)
			return NULL;
		if (j == JOB_WORK)
			release(work(3));
		else if (j == JOB_CHURN)
			worker_churn(200);
		else if (j == JOB_WORK2)
			TP_CHECK(work2(4) == 5);
		atomic_store(&job, JOB_NONE);
	}
}

static void *must_sym(void *h, const char *name)
{
	void *f = dlsym(h, name);
	TP_CHECK(f);
	return f;
}

static void rounds_of(const char *lib1, const char *lib2, unsigned long rounds, int alternate,
		      int threads)
{
	for (unsigned long r = 0; r < rounds; r++) {
		void *a = dlopen(lib1, RTLD_NOW | RTLD_LOCAL);
		TP_CHECK(a);
		work = (void *(*)(int))must_sym(a, "tpdl_work");
		release = (void (*)(void *))must_sym(a, "tpdl_release");
		if (threads) {
			post(JOB_WORK);
			atomic_store(&job, JOB_CHURN); /* runs while libtpdl goes */
		} else {
			release(work(3));
		}
		if (alternate)
			TP_CHECK(dlclose(a) == 0);
		void *b = dlopen(lib2, RTLD_NOW | RTLD_LOCAL);
		TP_CHECK(b);
		work2 = (int (*)(int))must_sym(b, "tpdl2_work");
		if (threads) {
			while (atomic_load(&job) != JOB_NONE)
				sched_yield();
			post(JOB_WORK2);
		}
		TP_CHECK(work2(4) == 5);
		TP_CHECK(dlclose(b) == 0);
		if (!alternate)
			TP_CHECK(dlclose(a) == 0);
	}
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 4 || argc == 5);
	unsigned long rounds = tp_atoul(argv[3]);
	const char *mode = argc == 5 ? argv[4] : "";
	int threads = !strcmp(mode, "threads"), forks = !strcmp(mode, "fork");
	TP_CHECK(threads || forks || !*mode || !strcmp(mode, "alternate"));
	pthread_t th;
	if (threads)
		TP_CHECK(pthread_create(&th, NULL, worker, NULL) == 0);
	rounds_of(argv[1], argv[2], rounds, *mode != 0, threads);
	if (threads) {
		atomic_store(&job, JOB_QUIT);
		TP_CHECK(pthread_join(th, NULL) == 0);
	}
	char buf[24];
	if (forks) {
		pid_t pid = fork();
		TP_CHECK(pid >= 0);
		if (pid == 0) {
			rounds_of(argv[1], argv[2], rounds, 1, 0);
			tp_write(1, "child rounds ");
			tp_write(1, tp_utoa(buf, rounds));
			tp_write(1, "\n");
			exit(0);
		}
		int st;
		TP_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	tp_write(1, "rounds ");
	tp_write(1, tp_utoa(buf, rounds));
	tp_write(1, "\n");
	return 0;
}
