/* One block address passed around three threads (cases_replay.py).
 * Usage: ring STEPS.  Step k is done by thread k % 3: an even step
 * mallocs 64 bytes into the shared pointer, an odd one frees it.  So
 * every block is freed by another thread than the one that allocated it,
 * and, run with glibc.malloc.tcache_count=0 and glibc.malloc.arena_max=1,
 * the next malloc (in a third thread) gets the same address back: a chain
 * of reuses across threads as long as the run.  Recorded with timestamps
 * on few events, the trace's timestamps alone put these calls out of
 * order many levels deep; the reader's causal merge must straighten them. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "tp.h"

static _Atomic unsigned long turn;
static void *cur;
static unsigned long steps;

static void *run(void *arg)
{
	unsigned long me = (unsigned long)(uintptr_t)arg;
	for (unsigned long k = me; k < steps; k += 3) {
		while (atomic_load_explicit(&turn, memory_order_acquire) != k)
			sched_yield();
		if (k % 2 == 0) {
			cur = malloc(64);
			TP_CHECK(cur);
			*(volatile unsigned long *)cur = k;
		} else {
			TP_CHECK(*(volatile unsigned long *)cur == k - 1);
			free(cur);
		}
		atomic_store_explicit(&turn, k + 1, memory_order_release);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	steps = tp_atoul(argv[1]);
	TP_CHECK(steps % 6 == 0); /* every malloc has its free */
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		TP_CHECK(pthread_create(&t[i], NULL, run, (void *)(uintptr_t)i) == 0);
	for (int i = 0; i < 3; i++)
		TP_CHECK(pthread_join(t[i], NULL) == 0);
	return 0;
}
