/*
 * stack_loop — the stacks benchmark's workload (bench/run_stacks.sh).
 *
 *   stack_loop DEPTH [PAIRS [SEED]]
 *
 * The malloc/free loop of malloc_loop.c (sizes uniform in 16..4096, a
 * volatile sink so that GCC keeps every pair), run at the bottom of a call
 * chain, so that each malloc has a stack DEPTH frames deep from main (the
 * loop's frame, DEPTH - 4 levels of a recursion through three functions,
 * main, and libc's start-up frames).  Every call goes through one of
 * two helpers chosen by the size, so the loop has two call paths.  Built
 * with frame pointers (-fno-omit-frame-pointer) like most code a
 * developer profiles; the tracer must also unwind libc's frames, built
 * without.  One thread; the loop runs in main's call chain.
 *
 * Output: pairs=<N> depth=<D> wall_ns=<ns> ns_per_pair=<x>
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static void *volatile sink;
static uint16_t *sizes;
static uint64_t pairs;

static uint64_t clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void *alloc_small(size_t n)
{
	void *p = malloc(n);
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) static void *alloc_large(size_t n)
{
	void *p = malloc(n);
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) static uint64_t run_loop(void)
{
	uint64_t t0 = clock_ns();
	for (uint64_t i = 0; i < pairs; i++) {
		size_t n = sizes[i];
		void *p = n < 2048 ? alloc_small(n) : alloc_large(n);
		sink = p;
		free(p);
	}
	return clock_ns() - t0;
}

static uint64_t level_a(int d);

__attribute__((noinline)) static uint64_t level_c(int d)
{
	uint64_t r = d > 0 ? level_a(d - 1) : run_loop();
	__asm__ volatile("" ::: "memory");
	return r;
}

__attribute__((noinline)) static uint64_t level_b(int d)
{
	uint64_t r = d > 0 ? level_c(d - 1) : run_loop();
	__asm__ volatile("" ::: "memory");
	return r;
}

__attribute__((noinline)) static uint64_t level_a(int d)
{
	uint64_t r = d > 0 ? level_b(d - 1) : run_loop();
	__asm__ volatile("" ::: "memory");
	return r;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: stack_loop DEPTH [PAIRS [SEED]]\n");
		return 2;
	}
	int depth = atoi(argv[1]);
	pairs = argc > 2 ? strtoull(argv[2], NULL, 0) : 1000000;
	uint64_t x = argc > 3 ? strtoull(argv[3], NULL, 0) : 1;
	if (depth < 6 || depth > 1000 || pairs < 1) {
		fprintf(stderr, "stack_loop: DEPTH 6..1000, PAIRS >= 1\n");
		return 2;
	}
	sizes = mmap(NULL, pairs * sizeof(*sizes), PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sizes == MAP_FAILED)
		return 1;
	x = x * 0x9e3779b97f4a7c15u + 1;
	for (uint64_t i = 0; i < pairs; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		sizes[i] = (uint16_t)(16 + x % 4081);
	}
	/* frames under malloc: alloc_*, run_loop, the recursion, main,
	 * __libc_start_call_main, __libc_start_main, _start */
	uint64_t ns = level_a(depth - 7);
	printf("pairs=%" PRIu64 " depth=%d wall_ns=%" PRIu64 " ns_per_pair=%.3f\n", pairs, depth,
	       ns, (double)ns / (double)pairs);
	return 0;
}
