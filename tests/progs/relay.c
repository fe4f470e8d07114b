/* Blocks reallocated along a chain of threads, or coming back to the
 * thread that allocated them (cases_order.py).
 * Usage: relay chain|return THREADS BLOCKS [OUT.json], THREADS in 3..64.
 *
 * chain: thread 1 allocates BLOCKS blocks of 16..4096 bytes (malloc, or
 * calloc one time in three) and queues them to thread 2; every later
 * thread reallocs every block it gets to a new size in 16..4096 (a
 * growth or a shrink: many move) and queues it on; the last one reallocs
 * it too, then frees it.  So each block is reallocated in THREADS - 1
 * different threads in turn (3 or more from 4 threads on) before it is
 * freed: realloc = (THREADS - 1) x BLOCKS.
 *
 * return: thread 1 allocates the blocks and queues them to thread 2; each
 * other thread writes to every block it gets, reallocs one in two and
 * queues it on; the last one queues it back to thread 1, which frees it.
 * Thread 1 keeps at most 255 blocks on their way (it frees one come back
 * before it allocates the next), so the ring of queues never fills up.
 *
 * Queues: 256 slots under a mutex and condvars.  The main thread only
 * starts and joins.  Calls (exact, the same in every run): malloc +
 * calloc = free = BLOCKS; realloc and the bytes allocated as the JSON
 * line says; glibc adds one DTV calloc per thread (in main) and two
 * free(NULL)s per thread exit. */
#define _GNU_SOURCE
#include "acct.h"

#define MAX_THREADS 64

static unsigned long nthreads, nblocks;
static int back_to_owner; /* mode return */
static struct queue q[MAX_THREADS]; /* q[i]: into thread i + 1 (mod n) */

static void owner(uint64_t *rng)
{
	unsigned long on_way = 0, back = 1;
	struct blk *b;
	for (unsigned long k = 1; k <= nblocks; k++) {
		if (back_to_owner && on_way == ACCT_QCAP - 1) {
			b = q_pop(&q[nthreads - 1]);
			TP_CHECK(b && b->seq == back && b->owner == 0);
			back++;
			acct_free(b);
			on_way--;
		}
		q_push(&q[0], acct_alloc(rng, k, 0));
		on_way++;
	}
	q_push(&q[0], NULL);
	if (!back_to_owner)
		return;
	while ((b = q_pop(&q[nthreads - 1])) != NULL) {
		TP_CHECK(b->seq == back && b->owner == 0);
		back++;
		acct_free(b);
	}
	TP_CHECK(back == nblocks + 1);
}

static void *relay(void *arg)
{
	unsigned long me = (unsigned long)(uintptr_t)arg;
	uint64_t rng = 0xc4a1ull + me * 104729ull;
	acct_name_thread("relay", me + 1);
	acct_gate(nthreads);
	if (me == 0) {
		owner(&rng);
		return NULL;
	}
	int last = me == nthreads - 1;
	unsigned long want = 1;
	struct blk *b;
	while ((b = q_pop(&q[me - 1])) != NULL) {
		TP_CHECK(b->seq == want && b->owner == 0);
		want++;
		if (back_to_owner) {
			if (b->size > sizeof *b) /* the last byte, past the header */
				((volatile char *)b)[b->size - 1] = (char)me;
			if (acct_rand(&rng) % 2 == 0)
				b = acct_resize(b, &rng);
			q_push(&q[me], b);
		} else {
			b = acct_resize(b, &rng);
			if (last)
				acct_free(b);
			else
				q_push(&q[me], b);
		}
	}
	TP_CHECK(want == nblocks + 1);
	if (back_to_owner || !last)
		q_push(&q[me], NULL);
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 4 || argc == 5);
	if (strcmp(argv[1], "chain") == 0)
		back_to_owner = 0;
	else if (strcmp(argv[1], "return") == 0)
		back_to_owner = 1;
	else
		TP_CHECK(!"mode is chain or return");
	nthreads = tp_atoul(argv[2]);
	nblocks = tp_atoul(argv[3]);
	TP_CHECK(nthreads >= 3 && nthreads <= MAX_THREADS);
	for (unsigned long i = 0; i < nthreads; i++)
		q_init(&q[i]);
	pthread_t th[MAX_THREADS];
	for (unsigned long i = 0; i < nthreads; i++)
		TP_CHECK(pthread_create(&th[i], NULL, relay, (void *)(uintptr_t)i) == 0);
	for (unsigned long i = 0; i < nthreads; i++)
		TP_CHECK(pthread_join(th[i], NULL) == 0);
	acct_report("relay", argv[1], nthreads, nblocks, argc == 5 ? argv[4] : NULL);
	return 0;
}
