/* Sampling for always-on use (record --sample-bytes N): an allocation is
 * recorded with probability 1 - exp(-size / N), the way heapprofd and
 * tcmalloc sample, by counting down an exponentially distributed number of
 * bytes per thread.  Its free (or the realloc that moves it) is recorded
 * too: the addresses of the sampled blocks that are live are kept in a set,
 * and a free is recorded when its address is in it.  The set is exact (it
 * holds the addresses themselves), so no free of a sampled block is lost
 * and none of an unsampled block is recorded: a sampled trace has no
 * unknown frees.  Analyzers weigh each sampled allocation by
 * 1 / (1 - exp(-size / N)), which keeps totals unbiased (docs/FORMAT.md,
 * "Sampling"). */
#include <math.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "preload.h"

/* The set: 2^16 buckets of 8 addresses, one cache line each (4 MiB of
 * address space, touched as it fills).  An address goes in a free entry of
 * its bucket with a compare-and-swap and leaves with a store of 0; two
 * threads never work on the same address at once (a block is freed after
 * it was allocated), and entries of other addresses are left alone. */
#define SET_BUCKETS_LG 16
#define SET_WAYS 8

static _Atomic uint64_t *set;

int ht_sample__init(void)
{
	if (set)
		return 0;
	void *p = ht_own_map(((size_t)SET_WAYS << SET_BUCKETS_LG) * sizeof(uint64_t),
			     MAP_PRIVATE | MAP_NORESERVE);
	if (!p)
		return -1;
	set = p;
	return 0;
}

static _Atomic uint64_t *bucket(uint64_t p)
{
	return &set[(((p >> 4) * 0x9E3779B97F4A7C15ull) >> (64 - SET_BUCKETS_LG)) * SET_WAYS];
}

/* Puts p in the set; 0 if its bucket is full (8 sampled blocks live at
 * addresses of one hash: then the allocation is not sampled). */
static int mark(uint64_t p)
{
	_Atomic uint64_t *b = bucket(p);
	for (int i = 0; i < SET_WAYS; i++) {
		uint64_t z = 0;
		if (atomic_load_explicit(&b[i], memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong(&b[i], &z, p))
			return 1;
	}
	return 0;
}

/* The entry of p, or NULL. */
static _Atomic uint64_t *find(uint64_t p)
{
	_Atomic uint64_t *b = bucket(p);
	for (int i = 0; i < SET_WAYS; i++)
		if (atomic_load_explicit(&b[i], memory_order_relaxed) == p)
			return &b[i];
	return NULL;
}

/* 1 if p was in the set (and takes it out). */
static int unmark(uint64_t p)
{
	_Atomic uint64_t *e = find(p);
	if (!e)
		return 0;
	atomic_store_explicit(e, 0, memory_order_relaxed);
	return 1;
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
	return !p || mark(p);
}

int ht_sample__free(uint64_t p)
{
	return p && set && unmark(p);
}

void ht_sample__realloc_start(struct ht_tls *t, uint64_t old)
{
	t->sample_old = old && set && unmark(old);
}

int ht_sample__realloc(struct ht_tls *t, uint64_t old, uint64_t size, uint64_t p)
{
	if (!old)
		return ht_sample__alloc(t, size, p);
	/* the allocation goes on: sampled if it was, whatever its new size */
	if (!t->sample_old)
		return 0;
	t->sample_old = 0;
	if (p)
		mark(p);
	else if (size)
		mark(old); /* failed: old is still there, still sampled */
	return 1;
}
