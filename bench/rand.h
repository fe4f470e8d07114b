/* bench/rand.h — the benchmark programs' random numbers: a seed mixed by
 * splitmix64, then a xorshift64 sequence; and malloc_loop's block sizes,
 * which timer_floor.c reproduces. */
#ifndef HEAPTRAIL_BENCH_RAND_H
#define HEAPTRAIL_BENCH_RAND_H

#include <stdint.h>

/* splitmix64: a well-mixed, non-zero xorshift state from any seed */
static inline uint64_t mix_seed(uint64_t x)
{
	x += 0x9e3779b97f4a7c15u;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	x ^= x >> 31;
	return x ? x : 0x2545f4914f6cdd1du;
}

static inline uint64_t xorshift64(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

#define LOOP_MIN_SIZE 16u   /* malloc_loop's smallest block */
#define LOOP_MAX_SIZE 4096u /* and largest */

/* malloc_loop's n sizes for its thread index (0 for the loop in main),
 * uniform in LOOP_MIN_SIZE..LOOP_MAX_SIZE. */
static inline void loop_sizes(uint16_t *sizes, uint64_t n, uint64_t seed, uint64_t index)
{
	uint64_t state = mix_seed(seed * 0x100000001b3u + index);
	for (uint64_t i = 0; i < n; i++)
		sizes[i] = (uint16_t)(LOOP_MIN_SIZE +
				      xorshift64(&state) % (LOOP_MAX_SIZE - LOOP_MIN_SIZE + 1));
}

#endif
