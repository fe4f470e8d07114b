/* Two threads on one arena (run with GLIBC_TUNABLES=glibc.malloc.arena_max=1):
 * thread B makes WARM malloc(2000)/free pairs (too big for the tcache: every
 * call takes the arena's lock), then keeps calling them while thread A
 * calls malloc_trim(0) on a heap of CHUNKS free 12 KiB chunks kept apart by
 * small live blocks, which holds the arena's lock while it hands every free
 * page back: B's calls then wait for the lock.  A starts each trim once it
 * has seen B calling.  ROUNDS trims.  Says "tid A: T" and "tid B: T".
 * Usage: lockwait.  Checked by tests/e2e/cases_heap.py. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tp.h"

#define CHUNKS 3000
#define ROUNDS 3
#define WARM 20000

static atomic_int phase; /* 0 idle, 1 trimming, 2 done */
static atomic_ulong b_calls;

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
	tp_say_num("tid B", (unsigned long long)syscall(SYS_gettid));
	for (int i = 0; i < WARM; i++) /* the peers of the calls that wait */
		pair();
	int ph;
	while ((ph = atomic_load(&phase)) != 2)
		if (ph == 1)
			pair();
	return NULL;
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
	atomic_store(&phase, 2);
	TP_CHECK(pthread_join(b, NULL) == 0);
	return 0;
}
