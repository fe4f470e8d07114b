/*
 * timer_floor — what timing each call with rdtsc..rdtscp costs outside the
 * timed windows when there is nothing else to do: the floor under the
 * replay engine's bookkeeping (bench/run_replay.sh, bench/README.md,
 * "Replay").
 *
 *   timer_floor [PAIRS [SEED]]
 *
 * Runs PAIRS (default 2,000,000) malloc(size)/free pairs with malloc_loop's
 * sizes (uniform 16..4096 from the same generator and seed, precomputed
 * into an mmap'ed array), twice:
 *   - untimed: the bare calls, as malloc_loop runs them;
 *   - timed: each call between an RDTSC and an RDTSCP exactly as
 *     src/replay/engine.c reads them (the same asm), the difference summed
 *     — the engine without the engine: no op decoding, no slot table, no
 *     histogram, just the loop and one add.
 * Like a replay, the process has a second thread, asleep in read(2) for
 * the whole run (the replay's RSS sampler sleeps beside the calls): glibc
 * then takes its multi-threaded paths (locked arena), as in the replay.
 *
 * Output, one line on stdout, cycles are TSC cycles per call (op):
 *   ops=<2*PAIRS> tsc_per_ns=<rate> untimed_cyc=<c> timed_cyc=<c>
 *   window_cyc=<c> outside_cyc=<c> outside_ns=<ns>
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

#define MIN_SIZE 16u
#define MAX_SIZE 4096u

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

/* malloc_loop.c's generator, for the same sizes (its thread index 0) */
static uint64_t mix_seed(uint64_t x)
{
	x += 0x9e3779b97f4a7c15u;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	x ^= x >> 31;
	return x ? x : 0x2545f4914f6cdd1du;
}

static uint64_t xorshift64(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
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

int main(int argc, char **argv)
{
	uint64_t pairs = 2000000, seed = 1;
	char *end;
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf("usage: timer_floor [PAIRS [SEED]]\n");
		return 0;
	}
	if (argc > 3 || (argc > 1 && ((pairs = strtoull(argv[1], &end, 0)) == 0 || *end)) ||
	    (argc > 2 && (seed = strtoull(argv[2], &end, 0), *end))) {
		fprintf(stderr, "usage: timer_floor [PAIRS [SEED]] (PAIRS >= 1)\n");
		return 2;
	}
	uint16_t *sizes = mmap(NULL, pairs * sizeof(*sizes), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sizes == MAP_FAILED) {
		perror("timer_floor: mmap");
		return 1;
	}
	uint64_t state = mix_seed(seed * 0x100000001b3u + 0);
	for (uint64_t i = 0; i < pairs; i++)
		sizes[i] = (uint16_t)(MIN_SIZE + xorshift64(&state) % (MAX_SIZE - MIN_SIZE + 1));

	pthread_t st;
	if (pipe(idle_fd) || pthread_create(&st, NULL, sleeper, NULL)) {
		fprintf(stderr, "timer_floor: cannot start the sleeping thread\n");
		return 1;
	}

	void *volatile sink;
	/* untimed, then timed; a warm-up round of each first */
	uint64_t untimed = 0, timed = 0, window = 0, ns0 = 0, ns1 = 0, c0 = 0, c1 = 0;
	for (int round = 0; round < 2; round++) {
		uint64_t a = tsc_end();
		for (uint64_t i = 0; i < pairs; i++) {
			void *p = malloc(sizes[i]);
			sink = p;
			free(p);
		}
		uint64_t b = tsc_end();
		ns0 = clock_ns();
		c0 = tsc_end();
		uint64_t sum = 0;
		for (uint64_t i = 0; i < pairs; i++) {
			uint64_t t0 = tsc_begin();
			void *p = malloc(sizes[i]);
			uint64_t t1 = tsc_end();
			sum += t1 - t0;
			sink = p;
			t0 = tsc_begin();
			free(p);
			t1 = tsc_end();
			sum += t1 - t0;
		}
		c1 = tsc_end();
		ns1 = clock_ns();
		untimed = b - a;
		timed = c1 - c0;
		window = sum;
	}
	(void)sink;
	close(idle_fd[1]);
	pthread_join(st, NULL);

	double ops = 2.0 * (double)pairs;
	double rate = (double)(c1 - c0) / (double)(ns1 - ns0);
	printf("ops=%" PRIu64 " tsc_per_ns=%.5f untimed_cyc=%.2f timed_cyc=%.2f window_cyc=%.2f "
	       "outside_cyc=%.2f outside_ns=%.3f\n",
	       2 * pairs, rate, (double)untimed / ops, (double)timed / ops, (double)window / ops,
	       (double)(timed - window) / ops, (double)(timed - window) / ops / rate);
	return 0;
}
#endif
