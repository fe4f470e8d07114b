/*
 * replay_loop — a program with a big, written, fragmented heap, for the
 * replay benchmark's Max RSS check (bench/run_replay.sh).
 *
 *   replay_loop [MB [SEED]]
 *
 * In main (the process never creates a thread), with sizes drawn from a
 * xorshift64 generator seeded from SEED (default 1):
 *   1. build: mallocs blocks until MB MiB (default 128) are live, and writes
 *      every byte of each (memset), so that the heap is resident;
 *   2. churn: frees a random half of the blocks, then mallocs (and writes)
 *      blocks a quarter larger on average until MB MiB are live again: the
 *      freed holes are not all reusable, so the heap fragments and its RSS
 *      depends on the allocator's placement, not only on the live bytes;
 *   3. frees everything, in a random order.
 * Sizes: 80% 16..1024 bytes, 19% 1..16 KiB, 1% 64..512 KiB (above glibc's
 * initial mmap threshold).  The program's own tables (pointers, sizes, an
 * order for the frees) come from mmap, not malloc, and are resident before
 * the baseline is taken, so the only heap calls are the workload's (and
 * stdout's buffer at the end).
 *
 * Output, one line on stdout:
 *   blocks=<mallocs> peak_live_bytes=<n> rss_base_kb=<RSS before the heap>
 *   maxrss_base_kb=<ru_maxrss before the heap> maxrss_kb=<ru_maxrss at the end>
 *   wall_ns=<ns>
 * maxrss_kb is the program's own peak RSS (what the replay is compared
 * with); maxrss_kb - maxrss_base_kb is what the heap added.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "rand.h"

static uint64_t state; /* the xorshift64 state */

/* A size from the mix; scale 4 = as is, 5 = a quarter larger. */
static uint32_t draw_size(unsigned scale)
{
	uint64_t r = xorshift64(&state), v = r >> 32, pick = r % 100;
	uint64_t s;
	if (pick < 80)
		s = 16 + v % (1024 - 16 + 1);
	else if (pick < 99)
		s = 1024 + v % (16 * 1024 - 1024 + 1);
	else
		s = 64 * 1024 + v % (448 * 1024 + 1);
	return (uint32_t)(s * scale / 4);
}

static uint64_t clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rss_kb(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long long size = 0, res = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return res * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
}

static uint64_t maxrss_kb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_maxrss;
}

static void *map(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("replay_loop: mmap");
		exit(1);
	}
	memset(p, 0, n); /* resident before the baseline */
	return p;
}

int main(int argc, char **argv)
{
	uint64_t mb = 128, seed = 1;
	char *end;

	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf("usage: replay_loop [MB [SEED]]   (defaults: 128, 1)\n"
		       "prints: blocks=<n> peak_live_bytes=<n> rss_base_kb=<kb> maxrss_base_kb=<kb> "
		       "maxrss_kb=<kb> wall_ns=<ns>\n");
		return 0;
	}
	if (argc > 3) {
		fprintf(stderr, "usage: replay_loop [MB [SEED]]\n");
		return 2;
	}
	errno = 0;
	if (argc > 1 && ((mb = strtoull(argv[1], &end, 0)) < 1 || mb > 65536 || *end || errno)) {
		fprintf(stderr, "replay_loop: bad MB '%s' (want 1..65536)\n", argv[1]);
		return 2;
	}
	if (argc > 2 && ((seed = strtoull(argv[2], &end, 0)), *end || errno)) {
		fprintf(stderr, "replay_loop: bad SEED '%s'\n", argv[2]);
		return 2;
	}
	state = mix_seed(seed);
	const uint64_t target = mb << 20;

	/* Tables, from mmap: a block's pointer and size, and an order for the
	 * frees.  The mean size is ~4.9 KiB; room for a mean of 1 KiB. */
	uint64_t cap = target / 1024 * 2 + 4096;
	uint32_t *sizes = map(cap * sizeof(uint32_t));
	void **ptrs = map(cap * sizeof(void *));
	uint32_t *order = map(cap * sizeof(uint32_t));

	uint64_t base_rss = rss_kb(), base_max = maxrss_kb();
	uint64_t t0 = clock_ns();

	/* 1. build */
	uint64_t n = 0, live = 0, peak = 0;
	while (live < target) {
		uint32_t s = sizes[n] = draw_size(4);
		char *p = malloc(s);
		if (!p) {
			fprintf(stderr, "replay_loop: malloc(%u) failed\n", s);
			return 1;
		}
		memset(p, (int)(n & 0xff) | 1, s);
		ptrs[n++] = p;
		live += s;
		if (n == cap) {
			fprintf(stderr, "replay_loop: more blocks than the table holds\n");
			return 1;
		}
	}
	peak = live;
	uint64_t built = n;

	/* 2. churn: free a random half of the blocks */
	for (uint64_t i = 0; i < built; i++)
		order[i] = (uint32_t)i;
	for (uint64_t i = built; i > 1; i--) { /* Fisher-Yates over the built ones */
		uint64_t j = xorshift64(&state) % i;
		uint32_t t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	for (uint64_t i = 0; i < built / 2; i++) {
		uint32_t k = order[i];
		live -= sizes[k];
		free(ptrs[k]);
		ptrs[k] = NULL;
	}
	while (live < target) {
		uint32_t s = sizes[n] = draw_size(5);
		char *p = malloc(s);
		if (!p) {
			fprintf(stderr, "replay_loop: malloc(%u) failed\n", s);
			return 1;
		}
		memset(p, (int)(n & 0xff) | 1, s);
		ptrs[n++] = p;
		live += s;
		if (n == cap) {
			fprintf(stderr, "replay_loop: more blocks than the table holds\n");
			return 1;
		}
	}
	if (live > peak)
		peak = live;

	/* 3. free everything, in a random order */
	for (uint64_t i = 0; i < n; i++)
		order[i] = (uint32_t)i;
	for (uint64_t i = n; i > 1; i--) {
		uint64_t j = xorshift64(&state) % i;
		uint32_t t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	volatile uint64_t sum = 0; /* read the blocks back: the writes stay */
	for (uint64_t i = 0; i < n; i++) {
		char *p = ptrs[order[i]];
		if (p) {
			sum += (unsigned char)p[0];
			free(p);
		}
	}
	uint64_t t1 = clock_ns();
	uint64_t max = maxrss_kb();

	printf("blocks=%" PRIu64 " peak_live_bytes=%" PRIu64 " rss_base_kb=%" PRIu64
	       " maxrss_base_kb=%" PRIu64 " maxrss_kb=%" PRIu64 " wall_ns=%" PRIu64 "\n",
	       n, peak, base_rss, base_max, max, t1 - t0);
	return sum == 0; /* never: every block starts with a non-zero byte */
}
