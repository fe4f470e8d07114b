/* A thread pool sharing one queue of blocks (cases_order.py).
 * Usage: pool WORKERS TASKS [OUT.json], WORKERS in 1..32.
 * The TASKS tasks are split evenly among the workers (the first ones take
 * one more when it does not divide).  A task allocates 1..8 blocks of
 * 16..4096 bytes (malloc, or calloc one time in three), then pops from the
 * shared queue (256 slots, a mutex and condvars) as many blocks as the
 * worker pushed in its task before, allocated by other workers if it can
 * (it puts a block of its own back and yields, up to 3 times), reallocs one in four to a new size and
 * frees them, and then pushes its new blocks; its last task is followed
 * by the pops of its last push.  A worker pops only what it pushed
 * earlier, so the pops never wait for ever, and no more than 8 x WORKERS
 * blocks are ever queued, so a push never waits.
 *
 * Calls (exact, the same in every run): malloc + calloc = free = the blocks
 * the JSON line says; realloc and the bytes allocated likewise; glibc adds
 * one DTV calloc per worker (in main) and two free(NULL)s per worker exit. */
#define _GNU_SOURCE
#include "acct.h"

#include <sched.h>

#define MAX_WORKERS 32

static unsigned long nworkers, ntasks;
static struct queue shared;
static atomic_ulong blocks_made;

/* Pops n blocks (preferring other workers' blocks: one of its own goes
 * back to the queue, up to 3 times, while others get the CPU), reallocs
 * one in four and frees them. */
static void take(unsigned long me, uint64_t *rng, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct blk *b = q_pop(&shared);
		for (int tries = 0; b->owner == me && tries < 3; tries++) {
			q_push(&shared, b);
			sched_yield();
			b = q_pop(&shared);
		}
		TP_CHECK(b && b->owner < nworkers);
		if (acct_rand(rng) % 4 == 0)
			b = acct_resize(b, rng);
		acct_free(b);
	}
}

static void *worker(void *arg)
{
	unsigned long me = (unsigned long)(uintptr_t)arg;
	uint64_t rng = 0x9001ull + me * 7919ull;
	unsigned long tasks = ntasks / nworkers + (me < ntasks % nworkers);
	unsigned pushed = 0;
	acct_name_thread("worker", me);
	acct_gate(nworkers);
	for (unsigned long t = 0; t < tasks; t++) {
		unsigned n = (unsigned)acct_range(&rng, 1, 8);
		struct blk *mine[8];
		for (unsigned i = 0; i < n; i++)
			mine[i] = acct_alloc(&rng, atomic_fetch_add(&blocks_made, 1) + 1, (uint32_t)me);
		take(me, &rng, pushed);
		for (unsigned i = 0; i < n; i++)
			q_push(&shared, mine[i]);
		pushed = n;
	}
	take(me, &rng, pushed);
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 3 || argc == 4);
	nworkers = tp_atoul(argv[1]);
	ntasks = tp_atoul(argv[2]);
	TP_CHECK(nworkers >= 1 && nworkers <= MAX_WORKERS);
	TP_CHECK(8 * MAX_WORKERS <= ACCT_QCAP);
	q_init(&shared);
	pthread_t th[MAX_WORKERS];
	for (unsigned long i = 0; i < nworkers; i++)
		TP_CHECK(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i) == 0);
	for (unsigned long i = 0; i < nworkers; i++)
		TP_CHECK(pthread_join(th[i], NULL) == 0);
	acct_report("pool", "pool", nworkers, atomic_load(&blocks_made), argc == 4 ? argv[3] : NULL);
	return 0;
}
