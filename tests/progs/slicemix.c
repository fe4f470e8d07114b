/* Everything stats adds up across a cut in time, for the time slices
 * (cases_slices.py, analyze/slices.c).
 * Usage: slicemix MODE BLOCKS [OUT.json]; MODE plain, hide or pause.
 * Three threads in a pipeline: the first allocates BLOCKS blocks of
 * 16..4096 bytes (malloc, or calloc one time in three) and queues them,
 * the second reallocs one in four, the third frees them.  The first also
 * keeps 64 blocks alive for a long time (each replaced every 256 blocks,
 * the oldest freed), so that blocks allocated in one slice of the trace
 * are freed in a later one; and every BLOCKS / 16 blocks it sets a mark,
 * renames itself, maps 64 KiB, grows the mapping to 128 KiB with mremap
 * and unmaps it, and asks for the program break.  Five blocks stay
 * allocated at exit.
 *   hide:  the third thread frees one block in 4096 through glibc's
 *          __libc_free, which the tracer does not see: the trace holds a
 *          block that is live still when malloc hands its address out
 *          again (addresses handed out while live); and the
 *          main thread allocates 24 bytes before the threads start and
 *          frees them unseen once they are joined, then asks for 24 bytes
 *          until it gets the same address back (at most eight times, with
 *          no other thread left to take it): handed out while live from
 *          the start of the run to its end, across any cut;
 *   pause: the first thread pauses the recording for its 100th block and
 *          resumes it after (control events).
 * Prints acct.h's JSON line of the program's own calls and live bytes
 * (the calls hidden or made while paused included). */
#define _GNU_SOURCE
#include "acct.h"

#include <sys/mman.h>

#include <heaptrail.h>

extern void __libc_free(void *);

#define KEEP 64

static const char *mode;
static unsigned long nblocks;
static struct queue q[2];

static void side_events(unsigned long k)
{
	char label[32] = "phase ";
	tp_utoa(label + strlen(label), k);
	if (heaptrail_mark)
		heaptrail_mark(label);
	acct_name_thread("mix", k);
	void *m = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TP_CHECK(m != MAP_FAILED);
	void *g = mremap(m, 65536, 131072, MREMAP_MAYMOVE);
	TP_CHECK(g != MAP_FAILED);
	TP_CHECK(munmap(g, 131072) == 0);
	TP_CHECK(sbrk(0) != (void *)-1);
}

static void *first(void *arg)
{
	(void)arg;
	uint64_t rng = 0x511ce;
	struct blk *keep[KEEP] = {0};
	unsigned kept = 0;
	acct_gate(3);
	for (unsigned long k = 1; k <= nblocks; k++) {
		int paused = !strcmp(mode, "pause") && k == 100 && heaptrail_pause;
		if (paused)
			heaptrail_pause();
		q_push(&q[0], acct_alloc(&rng, k, 0));
		if (paused)
			heaptrail_resume();
		if (k % 256 == 0) {
			unsigned i = kept++ % KEEP;
			if (keep[i])
				acct_free(keep[i]);
			keep[i] = acct_alloc(&rng, 0, 0);
		}
		if (k % (nblocks / 16 + 1) == 0)
			side_events(k);
	}
	q_push(&q[0], NULL);
	for (unsigned i = 0; i < KEEP; i++)
		if (keep[i] && i >= 5) /* the first five stay */
			acct_free(keep[i]);
	return NULL;
}

static void *second(void *arg)
{
	(void)arg;
	uint64_t rng = 0x511cf;
	struct blk *b;
	acct_gate(3);
	while ((b = q_pop(&q[0])) != NULL) {
		if (acct_rand(&rng) % 4 == 0)
			b = acct_resize(b, &rng);
		q_push(&q[1], b);
	}
	q_push(&q[1], NULL);
	return NULL;
}

static void *third(void *arg)
{
	(void)arg;
	struct blk *b;
	unsigned long n = 0;
	acct_gate(3);
	while ((b = q_pop(&q[1])) != NULL) {
		if (!strcmp(mode, "hide") && ++n % 4096 == 0) {
			atomic_fetch_sub(&ac.live_bytes, (long)b->size);
			atomic_fetch_sub(&ac.live_blocks, 1);
			__libc_free(b);
			atomic_fetch_add(&ac.free_calls, 1);
			continue;
		}
		acct_free(b);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 3 || argc == 4);
	mode = argv[1];
	TP_CHECK(!strcmp(mode, "plain") || !strcmp(mode, "hide") || !strcmp(mode, "pause"));
	nblocks = tp_atoul(argv[2]);
	TP_CHECK(nblocks >= 16);
	q_init(&q[0]);
	q_init(&q[1]);
	void *held = NULL;
	if (!strcmp(mode, "hide"))
		held = tp_keep(malloc(24));
	pthread_t th[3];
	TP_CHECK(pthread_create(&th[0], NULL, first, NULL) == 0);
	TP_CHECK(pthread_create(&th[1], NULL, second, NULL) == 0);
	TP_CHECK(pthread_create(&th[2], NULL, third, NULL) == 0);
	for (int i = 0; i < 3; i++)
		TP_CHECK(pthread_join(th[i], NULL) == 0);
	if (held) {
		/* 24 bytes again until glibc gives that address back (its tcache
		 * of the size may be full: then its fastbin, after at most
		 * seven): the same address is what the test is about */
		__libc_free(held);
		void *got[64];
		int n = 0;
		do
			got[n] = tp_keep(malloc(24));
		while (got[n++] != held && n < 64);
		TP_CHECK(got[n - 1] == held);
		while (n > 0)
			free(got[--n]);
	}
	acct_report("slicemix", mode, 3, nblocks, argc == 4 ? argv[3] : NULL);
	return 0;
}
