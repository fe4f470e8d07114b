/* Blocks through a pipeline of threads (cases_order.py).
 * Usage: pipeline N BLOCKS [OUT.json], N in 2..64.
 * Stage 1 allocates BLOCKS blocks of 16..4096 bytes (malloc, or calloc one
 * time in three) and queues them to stage 2; each middle stage takes them
 * in order, reallocs one in four to a new size in 16..4096 (growing or
 * shrinking, so that some move) and queues them on; stage N frees them.
 * Between stages: bounded queues of 256 slots under a mutex and condvars.
 * So every block is freed by another thread than the one that allocated
 * it, and with N >= 3 passes through a chain of three threads or more.
 * The main thread only starts and joins the stages.
 *
 * Calls (exact, the same in every run): malloc + calloc = BLOCKS, free =
 * BLOCKS, realloc and the bytes allocated as the JSON line says (it is
 * acct.h's count of the program's own calls); glibc adds one DTV calloc
 * per thread (in main) and two free(NULL)s per thread exit. */
#define _GNU_SOURCE
#include "acct.h"

#define MAX_STAGES 64

static unsigned long nstages, nblocks;
static struct queue q[MAX_STAGES];

static void *stage(void *arg)
{
	unsigned long me = (unsigned long)(uintptr_t)arg;
	uint64_t rng = 0x5eed0000ull + me * 1000003ull;
	acct_name_thread("stage", me + 1);
	acct_gate(nstages);
	if (me == 0) {
		for (unsigned long k = 1; k <= nblocks; k++)
			q_push(&q[0], acct_alloc(&rng, k, 0));
		q_push(&q[0], NULL);
		return NULL;
	}
	unsigned long want = 1;
	struct blk *b;
	while ((b = q_pop(&q[me - 1])) != NULL) {
		TP_CHECK(b->seq == want);
		want++;
		if (me == nstages - 1) {
			acct_free(b);
			continue;
		}
		if (acct_rand(&rng) % 4 == 0)
			b = acct_resize(b, &rng);
		q_push(&q[me], b);
	}
	TP_CHECK(want == nblocks + 1);
	if (me != nstages - 1)
		q_push(&q[me], NULL);
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 3 || argc == 4);
	nstages = tp_atoul(argv[1]);
	nblocks = tp_atoul(argv[2]);
	TP_CHECK(nstages >= 2 && nstages <= MAX_STAGES);
	for (unsigned long i = 0; i + 1 < nstages; i++)
		q_init(&q[i]);
	pthread_t th[MAX_STAGES];
	for (unsigned long i = 0; i < nstages; i++)
		TP_CHECK(pthread_create(&th[i], NULL, stage, (void *)(uintptr_t)i) == 0);
	for (unsigned long i = 0; i < nstages; i++)
		TP_CHECK(pthread_join(th[i], NULL) == 0);
	acct_report("pipeline", "pipeline", nstages, nblocks, argc == 4 ? argv[3] : NULL);
	return 0;
}
