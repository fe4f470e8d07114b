/*
 * malloc_loop — the overhead benchmark's workload.
 *
 *   malloc_loop [THREADS [PAIRS_PER_THREAD [SEED]]]
 *
 * Each of THREADS threads (default 1) runs PAIRS_PER_THREAD (default
 * 3,000,000) back-to-back malloc(size)/free(p) pairs with sizes drawn
 * uniformly from 16..4096 bytes.  The pattern is deliberately the plainest
 * one: allocate, publish the pointer through a volatile sink (so the
 * compiler cannot drop the pair), free it at once.  There is no window of
 * live blocks, so the allocator's own cost is as low as it gets and any
 * tracer's per-call cost shows up in full.
 *
 * What is outside the timed region:
 *   - the random sizes are computed before timing, into an array obtained
 *     with mmap (not malloc, so it is not a traced call), from a xorshift64
 *     generator seeded per thread from SEED and the thread index;
 *   - thread creation and joining, and printing.
 * All threads (even when THREADS is 1, the work runs in a spawned thread,
 * so that one and two threads use the same kind of glibc arena) wait on a
 * barrier, then each reads CLOCK_MONOTONIC before and after its loop.
 * THREADS 0 runs one loop in main instead: the process never creates a
 * thread, like most command-line programs (and a tracer may know that no
 * pointer can come from another thread).
 * wall_ns is the span from the earliest start to the latest end.
 *
 * Output, one line on stdout:
 *   pairs=<THREADS*PAIRS> threads=<THREADS> wall_ns=<ns> ns_per_pair=<x>
 *   cpu_ns=<ns> cpu_ns_per_pair=<y>
 * where ns_per_pair = wall_ns / PAIRS_PER_THREAD, the latency of one pair
 * as seen by one thread: perfect scaling gives the same value for 1 and 2
 * threads.  cpu_ns is the CPU time of the whole process (all its threads,
 * so an in-process tracer's background writer too) over the same span, and
 * cpu_ns_per_pair = cpu_ns / (THREADS * PAIRS_PER_THREAD): about equal to
 * ns_per_pair untraced, larger when a tracer burns CPU beside the program.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "rand.h"

#define MAX_THREADS 256u

struct worker {
	unsigned index;
	uint64_t pairs;
	uint64_t seed;
	uint16_t *sizes;
	size_t sizes_bytes;
	pthread_barrier_t *start;
	uint64_t t_begin;
	uint64_t t_end;
	uint64_t cpu_begin;
	uint64_t cpu_end;
	/* Every pointer is stored here before it is freed, so GCC cannot drop
	 * the malloc/free pair.  Per thread, in the thread's own cache lines
	 * (struct aligned to 64 bytes): no false sharing between threads. */
	void *volatile sink;
	int error;
} __attribute__((aligned(64)));

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t i;

	/* Precompute the sizes (and fault in the array) before timing. */
	loop_sizes(w->sizes, w->pairs, w->seed, w->index);

	pthread_barrier_wait(w->start);

	const uint16_t *sizes = w->sizes;
	const uint64_t n = w->pairs;

	w->cpu_begin = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	w->t_begin = clock_ns(CLOCK_MONOTONIC);
	for (i = 0; i < n; i++) {
		void *p = malloc(sizes[i]);
		if (__builtin_expect(p == NULL, 0)) {
			w->error = ENOMEM;
			break;
		}
		w->sink = p;
		free(p);
	}
	w->t_end = clock_ns(CLOCK_MONOTONIC);
	w->cpu_end = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	return NULL;
}

static int parse_u64(const char *s, const char *what, uint64_t lo, uint64_t hi,
		     uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end != '\0' || s[0] == '-' || v < lo || v > hi) {
		fprintf(stderr, "malloc_loop: bad %s '%s' (want %" PRIu64 "..%" PRIu64 ")\n",
			what, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: malloc_loop [THREADS [PAIRS_PER_THREAD [SEED]]]\n"
		"  THREADS           worker threads (default 1, max %u); 0: the loop runs in main\n"
		"  PAIRS_PER_THREAD  malloc/free pairs per thread (default 3000000)\n"
		"  SEED              seed of the size sequence (default 1)\n"
		"prints: pairs=<total> threads=<T> wall_ns=<ns> ns_per_pair=<wall/pairs per thread>\n",
		MAX_THREADS);
}

int main(int argc, char **argv)
{
	uint64_t threads = 1, pairs = 3000000, seed = 1;
	struct worker *workers;
	pthread_t *tids;
	pthread_barrier_t start;
	uint64_t t_begin = UINT64_MAX, t_end = 0, cpu_begin = 0, cpu_end = 0, wall, cpu;
	unsigned t;
	int rc = 0;

	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc > 4) {
		usage(stderr);
		return 2;
	}
	if ((argc > 1 && parse_u64(argv[1], "THREADS", 0, MAX_THREADS, &threads)) ||
	    (argc > 2 && parse_u64(argv[2], "PAIRS_PER_THREAD", 1, UINT64_C(1) << 34, &pairs)) ||
	    (argc > 3 && parse_u64(argv[3], "SEED", 0, UINT64_MAX, &seed)))
		return 2;

	/* Bookkeeping comes from mmap too, so the only heap calls made by this
	 * program (besides libc/libpthread internals) are the timed ones. */
	uint64_t nw = threads ? threads : 1; /* loops to run */
	size_t wbytes = sizeof(*workers) * nw + sizeof(*tids) * nw;
	void *mem = mmap(NULL, wbytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("malloc_loop: mmap");
		return 1;
	}
	workers = mem;
	tids = (pthread_t *)(workers + nw);

	if (pthread_barrier_init(&start, NULL, (unsigned)nw)) {
		fprintf(stderr, "malloc_loop: pthread_barrier_init failed\n");
		return 1;
	}

	for (t = 0; t < nw; t++) {
		struct worker *w = &workers[t];
		memset(w, 0, sizeof(*w));
		w->index = t;
		w->pairs = pairs;
		w->seed = seed;
		w->start = &start;
		w->sizes_bytes = pairs * sizeof(w->sizes[0]);
		w->sizes = mmap(NULL, w->sizes_bytes, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (w->sizes == MAP_FAILED) {
			perror("malloc_loop: mmap");
			return 1;
		}
	}
	for (t = 0; t < threads; t++) {
		int e = pthread_create(&tids[t], NULL, worker_main, &workers[t]);
		if (e) {
			fprintf(stderr, "malloc_loop: pthread_create: %s\n", strerror(e));
			return 1;
		}
	}
	if (!threads)
		worker_main(&workers[0]);
	for (t = 0; t < nw; t++) {
		if (threads)
			pthread_join(tids[t], NULL);
		if (workers[t].error) {
			fprintf(stderr, "malloc_loop: thread %u: malloc failed\n", t);
			rc = 1;
		}
		if (workers[t].t_begin < t_begin) {
			t_begin = workers[t].t_begin;
			cpu_begin = workers[t].cpu_begin;
		}
		if (workers[t].t_end > t_end) {
			t_end = workers[t].t_end;
			cpu_end = workers[t].cpu_end;
		}
	}
	wall = t_end - t_begin;
	cpu = cpu_end > cpu_begin ? cpu_end - cpu_begin : 0;

	printf("pairs=%" PRIu64 " threads=%" PRIu64 " wall_ns=%" PRIu64 " ns_per_pair=%.3f"
	       " cpu_ns=%" PRIu64 " cpu_ns_per_pair=%.3f\n",
	       pairs * nw, threads, wall, (double)wall / (double)pairs,
	       cpu, (double)cpu / (double)(pairs * nw));

	pthread_barrier_destroy(&start);
	for (t = 0; t < nw; t++)
		munmap(workers[t].sizes, workers[t].sizes_bytes);
	munmap(mem, wbytes);
	return rc;
}
