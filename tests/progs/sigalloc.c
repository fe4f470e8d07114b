/* A signal handler that allocates, while the program records calls: the
 * handler's calls land in the middle of the recorder's records.
 * Usage: sigalloc CALLS INTERVAL_US MAPS.
 * One malloc(16)/free first (the thread is set up), then a timer every
 * INTERVAL_US whose SIGALRM handler makes, each time: malloc(24),
 * calloc(1, 40), realloc of the first to 80, free of both; with MAPS 1
 * also mmap of a page and its munmap.  Meanwhile CALLS free(NULL), and a
 * posix_memalign with an alignment of 3 every fourth (EINVAL): calls the
 * recorder records but glibc's allocator never works on, so that the
 * handler's calls are safe (a handler that interrupts glibc's malloc and
 * calls it corrupts its heap, traced or not).  Then the timer stops,
 * SIGALRM is blocked, and the program says "handler: H" (its runs).
 * Calls: malloc 1 + H, calloc H, realloc H, free 1 + CALLS + 2H (CALLS of
 * NULL), posix_memalign CALLS / 4 (rounded up); with MAPS 1, mmap H and
 * munmap H. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>

#include "tp.h"

static volatile sig_atomic_t runs, maps;

static void on_alarm(int sig)
{
	(void)sig;
	void *p = tp_keep(malloc(24));
	void *q = tp_keep(calloc(1, 40));
	p = tp_keep(realloc(p, 80));
	free(q);
	free(p);
	if (maps) {
		void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m != MAP_FAILED)
			munmap(m, 4096);
	}
	runs++;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 4);
	unsigned long calls = tp_atoul(argv[1]), us = tp_atoul(argv[2]);
	maps = (sig_atomic_t)tp_atoul(argv[3]);
	tp_pairs(1, 16);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	TP_CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	struct itimerval it = {{0, (long)us}, {0, (long)us}};
	TP_CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
	for (unsigned long i = 0; i < calls; i++) {
		free(tp_keep(NULL));
		if (i % 4 == 0) {
			void *p;
			TP_CHECK(posix_memalign(tp_keep(&p), 3, 16) == EINVAL);
		}
	}
	struct itimerval off;
	memset(&off, 0, sizeof(off));
	TP_CHECK(setitimer(ITIMER_REAL, &off, NULL) == 0);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	TP_CHECK(sigprocmask(SIG_BLOCK, &set, NULL) == 0);
	tp_say_num("handler", (unsigned long long)runs);
	return 0;
}
