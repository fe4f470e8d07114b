/* Sampling for always-on use (record --sample-bytes N): an allocation is
 * recorded with probability 1 - exp(-size / N), the way heapprofd and
 * tcmalloc sample, by counting down an exponentially distributed number of
 * bytes per thread.  Its free (or the realloc that moves it) is recorded
 * too: sampled blocks are marked in a counting filter keyed by address, and
 * a free is recorded when its address is marked.  A collision can only add
 * the free of an unsampled block, which analyzers ignore (a free of a block
 * they never saw); it never loses the free of a sampled one.  Analyzers
 * weigh each sampled allocation by 1 / (1 - exp(-size / N)), which keeps
 * totals unbiased (docs/FORMAT.md, "Sampling"). */
#include <math.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "preload.h"

#define FILTER_BITS 20 /* counters in the filter: 1 MiB */

static _Atomic uint8_t *filter;

int ht_sample__init(void)
{
	if (filter)
		return 0;
	void *p = mmap(NULL, (size_t)1 << FILTER_BITS, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	filter = p;
	return 0;
}

static _Atomic uint8_t *slot(uint64_t p)
{
	return &filter[((p >> 4) * 0x9E3779B97F4A7C15ull) >> (64 - FILTER_BITS)];
}

static void mark(uint64_t p)
{
	_Atomic uint8_t *c = slot(p);
	uint8_t v = atomic_load_explicit(c, memory_order_relaxed);
	while (v < 255 && !atomic_compare_exchange_weak(c, &v, (uint8_t)(v + 1)))
		;
}

/* 1 if p was marked (and unmarks it once). */
static int unmark(uint64_t p)
{
	_Atomic uint8_t *c = slot(p);
	uint8_t v = atomic_load_explicit(c, memory_order_relaxed);
	while (v && v < 255 && !atomic_compare_exchange_weak(c, &v, (uint8_t)(v - 1)))
		;
	return v != 0; /* a saturated counter stays: frees of its addresses are all recorded */
}

/* Bytes until the thread's next sample: exponential with mean N. */
static int64_t next_interval(struct ht_tls *t)
{
	if (!t->rng)
		t->rng = (ht_now() ^ ((uint64_t)t->tid << 32) ^ 0x9E3779B97F4A7C15ull) | 1;
	t->rng ^= t->rng << 13;
	t->rng ^= t->rng >> 7;
	t->rng ^= t->rng << 17;
	double u = ((double)(t->rng >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
	double b = -log(u) * (double)ht_opt.sample_bytes;
	return b > 9e18 ? INT64_MAX : (int64_t)b + 1;
}

int ht_sample__alloc(struct ht_tls *t, uint64_t size, uint64_t p)
{
	if (!t->sample_left)
		t->sample_left = next_interval(t);
	t->sample_left -= (int64_t)(size ? size : 1);
	if (t->sample_left > 0)
		return 0;
	t->sample_left = next_interval(t);
	if (p)
		mark(p);
	return 1;
}

int ht_sample__free(uint64_t p)
{
	return p && filter && unmark(p);
}

int ht_sample__realloc(struct ht_tls *t, uint64_t old, uint64_t size, uint64_t p)
{
	if (!old)
		return ht_sample__alloc(t, size, p);
	/* the allocation goes on: sampled if it was, whatever its new size */
	if (p || !size) {
		if (!ht_sample__free(old))
			return 0;
		if (p)
			mark(p);
		return 1;
	}
	/* failed: old is still there; recorded if sampled */
	_Atomic uint8_t *c = slot(old);
	return atomic_load_explicit(c, memory_order_relaxed) != 0;
}
