/*
 * timer_floor — what timing each call with rdtsc..rdtscp costs outside the
 * timed windows when there is nothing else to do: the floor under the
 * replay engine's bookkeeping (bench/run_replay.sh, bench/README.md,
 * "Replay").
 *
 *   timer_floor [PAIRS [SEED [THREADS]]]
 *
 * Runs PAIRS (default 2,000,000) malloc(size)/free pairs with malloc_loop's
 * sizes (uniform 16..4096 from the same generator and seed, precomputed
 * into an mmap'ed array), in main (THREADS 0 or 1, the default) or in
 * THREADS threads at once (each with its own sizes, as malloc_loop's
 * threads), twice:
 *   - untimed: the bare calls, as malloc_loop runs them;
 *   - timed: each call between an RDTSC and an RDTSCP exactly as
 *     src/replay/engine.c reads them (the same asm), the difference summed
 *     — the engine without the engine: no op decoding, no slot table, no
 *     histogram, just the loop and one add.
 * Like a replay, the process has a second thread, asleep in read(2) for
 * the whole run (the replay's RSS sampler sleeps beside the calls): glibc
 * then takes its multi-threaded paths (locked arena), as in the replay.
 *
 * Output, one line on stdout, cycles are TSC cycles per call (op) of one
 * thread (the mean over the threads):
 *   ops=<2*PAIRS*threads> threads=<T> tsc_per_ns=<rate> untimed_cyc=<c>
 *   timed_cyc=<c> window_cyc=<c> outside_cyc=<c> outside_ns=<ns>
 * timed_cyc is the timed loop's whole time per op, window_cyc the part
 * inside the windows (what a replay reports as call time), outside_cyc =
 * timed_cyc - window_cyc: the replay's bookkeeping_ns_per_op would be
 * outside_ns for an engine that did no work at all.
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
#include <unistd.h>

#include "rand.h"

#if !defined(__x86_64__)
int main(void)
{
	fprintf(stderr, "timer_floor: x86-64 only (RDTSC/RDTSCP)\n");
	return 1;
}
#else

/* The engine's clock reads (src/replay/engine.c, tsc_begin() and tsc()). */
static inline uint64_t tsc_begin(void)
{
	uint64_t t, hi;
	__asm__ volatile("rdtsc\n\tshl $32, %%rdx\n\tor %%rdx, %%rax" : "=a"(t), "=d"(hi) : : "memory");
	return t;
}

static inline uint64_t tsc_end(void)
{
	uint64_t t, hi;
	__asm__ volatile("rdtscp\n\tshl $32, %%rdx\n\tor %%rdx, %%rax"
			 : "=a"(t), "=d"(hi)
			 :
			 : "rcx", "memory");
	return t;
}

static uint64_t clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int idle_fd[2]; /* the sleeper reads idle_fd[0] until main closes idle_fd[1] */

static void *sleeper(void *arg)
{
	char c;
	(void)arg;
	while (read(idle_fd[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

/* One loop's sizes and what it measured. */
struct loop {
	uint16_t *sizes;             /* PAIRS sizes */
	uint64_t pairs;              /* pairs to run */
	pthread_barrier_t *start;    /* the threads' start line (NULL in main) */
	uint64_t untimed;            /* cycles of the untimed round */
	uint64_t timed, window;      /* cycles of the timed round, and inside its windows */
	uint64_t ns;                 /* the timed round on CLOCK_MONOTONIC */
	void *volatile sink;         /* every block goes through it */
} __attribute__((aligned(64)));

static void *run_loop(void *arg)
{
	struct loop *l = arg;
	const uint16_t *sizes = l->sizes;
	/* a warm-up round of each first */
	for (int round = 0; round < 2; round++) {
		if (l->start)
			pthread_barrier_wait(l->start);
		uint64_t a = tsc_end();
		for (uint64_t i = 0; i < l->pairs; i++) {
			void *p = malloc(sizes[i]);
			l->sink = p;
			free(p);
		}
		uint64_t b = tsc_end();
		if (l->start)
			pthread_barrier_wait(l->start);
		uint64_t ns0 = clock_ns();
		uint64_t c0 = tsc_end();
		uint64_t sum = 0;
		for (uint64_t i = 0; i < l->pairs; i++) {
			uint64_t t0 = tsc_begin();
			void *p = malloc(sizes[i]);
			uint64_t t1 = tsc_end();
			sum += t1 - t0;
			l->sink = p;
			t0 = tsc_begin();
			free(p);
			t1 = tsc_end();
			sum += t1 - t0;
		}
		uint64_t c1 = tsc_end();
		l->ns = clock_ns() - ns0;
		l->untimed = b - a;
		l->timed = c1 - c0;
		l->window = sum;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t pairs = 2000000, seed = 1, threads = 0;
	char *end;
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf("usage: timer_floor [PAIRS [SEED [THREADS]]]\n");
		return 0;
	}
	if (argc > 4 || (argc > 1 && ((pairs = strtoull(argv[1], &end, 0)) == 0 || *end)) ||
	    (argc > 2 && (seed = strtoull(argv[2], &end, 0), *end)) ||
	    (argc > 3 && ((threads = strtoull(argv[3], &end, 0)) > 64 || *end))) {
		fprintf(stderr, "usage: timer_floor [PAIRS [SEED [THREADS]]] (PAIRS >= 1, THREADS <= 64)\n");
		return 2;
	}
	uint64_t nl = threads ? threads : 1;
	struct loop *loops = mmap(NULL, nl * sizeof(*loops), PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (loops == MAP_FAILED) {
		perror("timer_floor: mmap");
		return 1;
	}
	pthread_barrier_t start;
	if (threads && pthread_barrier_init(&start, NULL, (unsigned)threads)) {
		fprintf(stderr, "timer_floor: pthread_barrier_init failed\n");
		return 1;
	}
	for (uint64_t t = 0; t < nl; t++) {
		struct loop *l = &loops[t];
		l->pairs = pairs;
		l->start = threads ? &start : NULL;
		l->sizes = mmap(NULL, pairs * sizeof(*l->sizes), PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (l->sizes == MAP_FAILED) {
			perror("timer_floor: mmap");
			return 1;
		}
		loop_sizes(l->sizes, pairs, seed, t); /* malloc_loop's for its thread t */
	}

	pthread_t st, tids[64];
	if (pipe(idle_fd) || pthread_create(&st, NULL, sleeper, NULL)) {
		fprintf(stderr, "timer_floor: cannot start the sleeping thread\n");
		return 1;
	}
	if (!threads) {
		run_loop(&loops[0]);
	} else {
		for (uint64_t t = 0; t < threads; t++)
			if (pthread_create(&tids[t], NULL, run_loop, &loops[t])) {
				fprintf(stderr, "timer_floor: cannot start thread %" PRIu64 "\n", t);
				return 1;
			}
		for (uint64_t t = 0; t < threads; t++)
			pthread_join(tids[t], NULL);
	}
	close(idle_fd[1]);
	pthread_join(st, NULL);

	double untimed = 0, timed = 0, window = 0, ns = 0;
	for (uint64_t t = 0; t < nl; t++) {
		untimed += (double)loops[t].untimed;
		timed += (double)loops[t].timed;
		window += (double)loops[t].window;
		ns += (double)loops[t].ns;
	}
	double ops = 2.0 * (double)pairs * (double)nl; /* calls of all loops */
	double rate = timed / ns;
	printf("ops=%.0f threads=%" PRIu64 " tsc_per_ns=%.5f untimed_cyc=%.2f timed_cyc=%.2f "
	       "window_cyc=%.2f outside_cyc=%.2f outside_ns=%.3f\n",
	       ops, threads, rate, untimed / ops, timed / ops, window / ops, (timed - window) / ops,
	       (timed - window) / ops / rate);
	return 0;
}
#endif
