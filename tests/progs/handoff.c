/* Pointer hand-off between two threads, N times each way.  Usage: handoff N.
 * Each thread loops: p = malloc(size); put p in its out-slot (waiting until
 * the other thread has emptied it); take the other thread's block from its
 * in-slot and free it.  So every block is freed by the other thread, right
 * after it was allocated, and freed memory is handed straight back by the
 * allocator to either thread: the merged trace must never show an address
 * allocated while it is still live.  Sizes alternate between 24 (tcache)
 * and 2000 (arena bins).  malloc 2N, free 2N, cross-thread frees 2N. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "tp.h"

static _Atomic(void *) slot[2];
static unsigned long rounds;

static inline void relax(unsigned *spins)
{
	if (++*spins < 200) {
#if defined(__x86_64__) || defined(__i386__)
		__asm__ volatile("pause");
#endif
	} else {
		*spins = 0;
		sched_yield();
	}
}

static void *run(void *arg)
{
	int me = (int)(uintptr_t)arg;
	_Atomic(void *) *out = &slot[me], *in = &slot[!me];
	for (unsigned long k = 0; k < rounds; k++) {
		unsigned long *p = malloc((k & 1) ? 2000 : 24);
		TP_CHECK(p);
		*p = k;
		unsigned spins = 0;
		while (atomic_load_explicit(out, memory_order_acquire) != NULL)
			relax(&spins);
		atomic_store_explicit(out, p, memory_order_release);
		void *q;
		spins = 0;
		while ((q = atomic_exchange_explicit(in, NULL, memory_order_acq_rel)) == NULL)
			relax(&spins);
		TP_CHECK(*(unsigned long *)q == k);
		free(q);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	rounds = tp_atoul(argv[1]);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		TP_CHECK(pthread_create(&t[i], NULL, run, (void *)(uintptr_t)i) == 0);
	for (int i = 0; i < 2; i++)
		TP_CHECK(pthread_join(t[i], NULL) == 0);
	return 0;
}
