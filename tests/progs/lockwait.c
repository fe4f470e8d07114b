/* Two threads on one arena (run with GLIBC_TUNABLES=glibc.malloc.arena_max=1):
 * thread B calls malloc(2000)/free in a loop (too big for the tcache: every
 * call takes the arena's lock) while thread A calls malloc_trim(0) on a heap
 * of ROUNDS x 3000 free 12 KiB chunks kept apart by small live blocks,
 * which holds the arena's lock while it hands every free page back.  B's
 * calls during the trim wait for the lock.  Says "tid: A" and "tid: B".
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

static atomic_int b_running, done;

static void *thread_b(void *arg)
{
	(void)arg;
	tp_say_num("tid B", (unsigned long long)syscall(SYS_gettid));
	atomic_store(&b_running, 1);
	while (!atomic_load(&done)) {
		char *p = tp_keep(malloc(2000));
		TP_CHECK(p);
		free(p);
	}
	return NULL;
}

int main(void)
{
	tp_say_num("tid A", (unsigned long long)syscall(SYS_gettid));
	static char *big[CHUNKS], *small[CHUNKS];
	pthread_t b;
	TP_CHECK(pthread_create(&b, NULL, thread_b, NULL) == 0);
	while (!atomic_load(&b_running))
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
		malloc_trim(0);
		for (int i = 0; i < CHUNKS; i++)
			free(small[i]);
	}
	atomic_store(&done, 1);
	TP_CHECK(pthread_join(b, NULL) == 0);
	return 0;
}
