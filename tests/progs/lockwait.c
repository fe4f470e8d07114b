/* Two threads on one arena (run with GLIBC_TUNABLES=glibc.malloc.arena_max=1):
 * thread B makes WARM malloc(2000)/free pairs (too big for the tcache: every
 * call takes the arena's lock), then keeps calling them while thread A
 * calls malloc_trim(0) on a heap of CHUNKS free 12 KiB chunks kept apart by
 * small live blocks, which holds the arena's lock while it hands every free
 * page back: B's calls then wait for the lock.  A starts each trim once it
 * has seen B calling.  ROUNDS trims.  Whether B calls during a trim, and
 * waits, is up to the scheduler; so a last round makes B wait for sure:
 * A calls malloc_stats(), which writes each arena's lines to stderr while
 * it holds the arena's lock, with stderr a full pipe: the write blocks,
 * the lock held.  Thread C drains the pipe only once it has seen B asleep
 * on a futex in libc's data (the arena's lock: nothing else B does sleeps
 * there) and HOLD_MS more have passed.  One call of B then lasts at least
 * HOLD_MS, however the threads were scheduled.  malloc_stats is no
 * malloc-API call: the trace does not have it.  Says "tid A: T", "tid B: T"
 * and "forced wait: 1" once B was seen waiting.
 * Usage: lockwait.  Checked by tests/e2e/cases_heap.py. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tp.h"

#define CHUNKS 3000
#define ROUNDS 3
#define WARM 20000
#define HOLD_MS 100 /* the forced wait's least length */

static atomic_int phase; /* 0 idle, 1 trimming, 2 done */
static atomic_ulong b_calls;
static atomic_int stats_started; /* A is about to call malloc_stats */
static atomic_int c_running;     /* C has started and made each call it makes
				  * once: the tracer's pthread_create hands the
				  * start routine over in a block the new thread
				  * frees (src/preload/hooks.c, trampoline), and a
				  * first call may have work of its own */
static pid_t b_tid;
static int drain_fd = -1;        /* the pipe's read end (thread C) */

static void pair(void)
{
	char *p = tp_keep(malloc(2000));
	TP_CHECK(p);
	free(p);
	atomic_fetch_add(&b_calls, 1);
}

static void *thread_b(void *arg)
{
	(void)arg;
	b_tid = (pid_t)syscall(SYS_gettid);
	tp_say_num("tid B", (unsigned long long)b_tid);
	for (int i = 0; i < WARM; i++) /* the peers of the calls that wait */
		pair();
	int ph;
	while ((ph = atomic_load(&phase)) != 2)
		if (ph == 1)
			pair();
	return NULL;
}

/* Reads a whole small /proc file into buf (no stdio, no malloc: the
 * arena's lock may be held); its length, or 0. */
static size_t read_proc(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	size_t n = 0;
	ssize_t k;
	if (fd < 0)
		return 0;
	while (n + 1 < size && (k = read(fd, buf + n, size - 1 - n)) > 0)
		n += (size_t)k;
	close(fd);
	buf[n] = 0;
	return n;
}

static unsigned long hex(const char **s)
{
	unsigned long v = 0;
	const char *p = *s;
	if (p[0] == '0' && p[1] == 'x')
		p += 2;
	for (;; p++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
		if (d < 0)
			break;
		v = v * 16 + (unsigned long)d;
	}
	*s = p;
	return v;
}

/* [lo, hi): libc's mappings and the anonymous one right after them (its
 * .bss), where the arena's lock lives. */
static void libc_range(unsigned long *lo, unsigned long *hi)
{
	static char maps[1 << 16];
	read_proc("/proc/self/maps", maps, sizeof(maps));
	*lo = ~0ul, *hi = 0;
	for (const char *l = maps; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
		const char *p = l;
		unsigned long a = hex(&p);
		p++;
		unsigned long b = hex(&p);
		const char *eol = strchr(l, '\n') ? strchr(l, '\n') : l + strlen(l);
		const char *name = memchr(l, '/', (size_t)(eol - l));
		int libc = name && (memmem(name, (size_t)(eol - name), "/libc.so", 8) ||
				    memmem(name, (size_t)(eol - name), "/libc-", 6));
		if (libc) {
			if (a < *lo)
				*lo = a;
			if (b > *hi)
				*hi = b;
		} else if (!name && a == *hi) {
			*hi = b;
		}
	}
}

/* Thread C: once A is in malloc_stats and B sleeps on a futex in libc,
 * HOLD_MS more, then the pipe drained to its end (A's lock released). */
static void *thread_c(void *arg)
{
	(void)arg;
	unsigned long lo, hi;
	libc_range(&lo, &hi);
	char path[64] = "/proc/self/task/", num[24], buf[256];
	strcat(strcat(path, tp_utoa(num, (unsigned long long)b_tid)), "/syscall");
	struct timespec ms = {0, 1000000}, hold = {HOLD_MS / 1000, HOLD_MS % 1000 * 1000000L};
	read_proc(path, buf, sizeof(buf));
	nanosleep(&ms, NULL);
	char none;
	(void)!read(drain_fd, &none, 0);
	atomic_store(&c_running, 1);
	while (!atomic_load(&stats_started))
		nanosleep(&ms, NULL);
	for (;;) {
		const char *p = buf;
		if (read_proc(path, buf, sizeof(buf)) && !strncmp(buf, "202 ", 4)) {
			p += 4;
			unsigned long addr = hex(&p);
			if (addr >= lo && addr < hi)
				break;
		}
		nanosleep(&ms, NULL);
	}
	nanosleep(&hold, NULL);
	char sink[4096];
	while (read(drain_fd, sink, sizeof(sink)) > 0)
		;
	return NULL;
}

/* B made to wait HOLD_MS at least on the arena's lock, held by A. */
static void forced_wait(void)
{
	int fds[2], saved = dup(2);
	TP_CHECK(saved >= 0 && pipe(fds) == 0);
	drain_fd = fds[0];
	static char fill[4096];
	fcntl(fds[1], F_SETFL, O_NONBLOCK); /* fill the pipe to the last byte */
	while (write(fds[1], fill, sizeof(fill)) > 0)
		;
	while (write(fds[1], fill, 1) > 0)
		;
	fcntl(fds[1], F_SETFL, 0);
	pthread_t c;
	TP_CHECK(pthread_create(&c, NULL, thread_c, NULL) == 0);
	while (!atomic_load(&c_running)) /* else C could wait on the lock A takes: a */
		;                          /* hang seen 1 run in 30 on one busy CPU */
	unsigned long seen = atomic_load(&b_calls);
	atomic_store(&phase, 1);
	while (atomic_load(&b_calls) < seen + 2) /* B is calling */
		;
	TP_CHECK(dup2(fds[1], 2) == 2);
	atomic_store(&stats_started, 1);
	malloc_stats(); /* blocks in its first write, the lock held */
	TP_CHECK(dup2(saved, 2) == 2);
	close(saved);
	close(fds[1]); /* C reads to the end */
	TP_CHECK(pthread_join(c, NULL) == 0);
	close(fds[0]);
	atomic_store(&phase, 0);
	tp_say_num("forced wait", 1);
}

int main(void)
{
	tp_say_num("tid A", (unsigned long long)syscall(SYS_gettid));
	static char *big[CHUNKS], *small[CHUNKS];
	pthread_t b;
	TP_CHECK(pthread_create(&b, NULL, thread_b, NULL) == 0);
	while (atomic_load(&b_calls) < WARM)
		;
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < CHUNKS; i++) {
			big[i] = tp_keep(malloc(12 * 1024));
			small[i] = tp_keep(malloc(32));
			TP_CHECK(big[i] && small[i]);
			memset(big[i], 1, 12 * 1024);
		}
		for (int i = 0; i < CHUNKS; i++)
			free(big[i]);
		unsigned long seen = atomic_load(&b_calls);
		atomic_store(&phase, 1);
		while (atomic_load(&b_calls) < seen + 2) /* B is calling */
			;
		malloc_trim(0);
		atomic_store(&phase, 0);
		for (int i = 0; i < CHUNKS; i++)
			free(small[i]);
	}
	forced_wait();
	atomic_store(&phase, 2);
	TP_CHECK(pthread_join(b, NULL) == 0);
	return 0;
}
