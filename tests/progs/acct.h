/* The heap accounting that pipeline.c, pool.c and relay.c keep of their
 * own calls (cases_order.py compares it with what heaptrail says).
 *
 * Every malloc, calloc, realloc and free goes through acct_*(), which
 * counts the call and keeps, with C11 atomics: the live bytes (requested
 * sizes; added right after an allocation returns, subtracted right before
 * a free and before a realloc), the live blocks, their peak (an atomic
 * max after each addition), the bytes allocated (realloc's new size
 * included) and how many reallocs moved the block.  So the program's live
 * interval of a block lies inside the recorder's (dated after the real
 * malloc returns, before the real free): a recorder that orders the calls
 * exactly sees a peak at least the program's and at most one block per
 * thread above it (plus glibc's own allocations).
 *
 * Each block starts with a struct blk header (16 bytes, the smallest size
 * asked for) saying its size, so whoever frees it knows what to subtract.
 * Sizes and choices come from a per-thread PRNG with a fixed seed: the
 * number of calls of each function and the bytes allocated are the same
 * in every run, whatever the scheduling.
 *
 * Queues are bounded rings of ACCT_QCAP pointers under a mutex and two
 * condvars (none of which allocates); the threads of a program start
 * their work together (acct_gate).  The report is one JSON line,
 * formatted by hand (no stdio: a FILE buffer is a malloc), on stdout or in
 * the file named on the command line. */
#ifndef ACCT_H
#define ACCT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tp.h"

#define ACCT_MIN_BLOCK 16
#define ACCT_MAX_BLOCK 4096 /* no block, however reallocated, is larger */
#define ACCT_QCAP 256

struct blk {
	uint64_t seq;  /* the block's number, checked by every stage */
	uint32_t size; /* bytes asked for at its last allocation */
	uint32_t owner; /* the thread (stage, worker) that allocated it */
};

static struct {
	atomic_ulong malloc_calls, calloc_calls, realloc_calls, free_calls, realloc_moved;
	atomic_ulong bytes_allocated;
	atomic_long live_bytes, live_blocks, peak_live_bytes;
} ac;

/* ---- PRNG: splitmix64, one state per thread ---------------------------- */

static inline uint64_t acct_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* uniform in [lo, hi] */
static inline uint64_t acct_range(uint64_t *s, uint64_t lo, uint64_t hi)
{
	return lo + acct_rand(s) % (hi - lo + 1);
}

static inline size_t acct_size(uint64_t *s)
{
	return (size_t)acct_range(s, ACCT_MIN_BLOCK, ACCT_MAX_BLOCK);
}

/* ---- accounting -------------------------------------------------------- */

static inline void acct_added(size_t n)
{
	long now = atomic_fetch_add(&ac.live_bytes, (long)n) + (long)n;
	long peak = atomic_load(&ac.peak_live_bytes);
	while (now > peak && !atomic_compare_exchange_weak(&ac.peak_live_bytes, &peak, now))
		;
	atomic_fetch_add(&ac.bytes_allocated, n);
}

/* malloc(size) or calloc(size / 16, 16) as *rng says (size a multiple of 16
 * for calloc), the header written; the block's seq and owner as given. */
static inline struct blk *acct_alloc(uint64_t *rng, uint64_t seq, uint32_t owner)
{
	size_t size = acct_size(rng);
	struct blk *b;
	if (acct_rand(rng) % 3 == 0) {
		size_t k = size / 16;
		size = k * 16;
		b = tp_keep(calloc(k, 16));
		TP_CHECK(b);
		atomic_fetch_add(&ac.calloc_calls, 1);
		TP_CHECK(b->seq == 0 && b->size == 0);
	} else {
		b = tp_keep(malloc(size));
		TP_CHECK(b);
		atomic_fetch_add(&ac.malloc_calls, 1);
	}
	acct_added(size);
	atomic_fetch_add(&ac.live_blocks, 1);
	b->seq = seq;
	b->size = (uint32_t)size;
	b->owner = owner;
	return b;
}

/* realloc(b, size): subtracts the old size before, adds the new after. */
static inline struct blk *acct_realloc(struct blk *b, size_t size)
{
	TP_CHECK(size >= ACCT_MIN_BLOCK && size <= ACCT_MAX_BLOCK);
	uint64_t seq = b->seq;
	atomic_fetch_sub(&ac.live_bytes, (long)b->size);
	struct blk *nb = tp_keep(realloc(b, size));
	TP_CHECK(nb);
	atomic_fetch_add(&ac.realloc_calls, 1);
	if (nb != b)
		atomic_fetch_add(&ac.realloc_moved, 1);
	acct_added(size);
	TP_CHECK(nb->seq == seq);
	nb->size = (uint32_t)size;
	return nb;
}

/* realloc to a size in [16, 4096] drawn from *rng (whatever the block's
 * size, so that the bytes allocated do not depend on which block a thread
 * gets): a growth or a shrink, a no-op one time in 4081. */
static inline struct blk *acct_resize(struct blk *b, uint64_t *rng)
{
	return acct_realloc(b, acct_size(rng));
}

static inline void acct_free(struct blk *b)
{
	TP_CHECK(b->size >= ACCT_MIN_BLOCK && b->size <= ACCT_MAX_BLOCK);
	atomic_fetch_sub(&ac.live_bytes, (long)b->size);
	atomic_fetch_sub(&ac.live_blocks, 1);
	free(b);
	atomic_fetch_add(&ac.free_calls, 1);
}

/* ---- bounded queue ----------------------------------------------------- */

struct queue {
	pthread_mutex_t m;
	pthread_cond_t not_empty, not_full;
	unsigned head, len, waiting_empty, waiting_full;
	void *slot[ACCT_QCAP];
};

static inline void q_init(struct queue *q)
{
	memset(q, 0, sizeof *q);
	TP_CHECK(pthread_mutex_init(&q->m, NULL) == 0);
	TP_CHECK(pthread_cond_init(&q->not_empty, NULL) == 0);
	TP_CHECK(pthread_cond_init(&q->not_full, NULL) == 0);
}

static inline void q_push(struct queue *q, void *p)
{
	pthread_mutex_lock(&q->m);
	while (q->len == ACCT_QCAP) {
		q->waiting_full++;
		pthread_cond_wait(&q->not_full, &q->m);
		q->waiting_full--;
	}
	q->slot[(q->head + q->len++) % ACCT_QCAP] = p;
	if (q->waiting_empty)
		pthread_cond_signal(&q->not_empty);
	pthread_mutex_unlock(&q->m);
}

static inline void *q_pop(struct queue *q)
{
	pthread_mutex_lock(&q->m);
	while (q->len == 0) {
		q->waiting_empty++;
		pthread_cond_wait(&q->not_empty, &q->m);
		q->waiting_empty--;
	}
	void *p = q->slot[q->head];
	q->head = (q->head + 1) % ACCT_QCAP;
	q->len--;
	if (q->waiting_full)
		pthread_cond_signal(&q->not_full);
	pthread_mutex_unlock(&q->m);
	return p;
}

/* ---- threads and the report -------------------------------------------- */

static struct {
	pthread_mutex_t m;
	pthread_cond_t all_here;
	unsigned long here;
} acct_gate_ = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

/* Waits until n threads have called it: the threads start their work
 * together (else the first ones could be done before the last exist). */
static inline void acct_gate(unsigned long n)
{
	pthread_mutex_lock(&acct_gate_.m);
	if (++acct_gate_.here == n)
		pthread_cond_broadcast(&acct_gate_.all_here);
	while (acct_gate_.here < n)
		pthread_cond_wait(&acct_gate_.all_here, &acct_gate_.m);
	pthread_mutex_unlock(&acct_gate_.m);
}

/* "PREFIX-I" as the calling thread's name (no allocation) */
static inline void acct_name_thread(const char *prefix, unsigned long i)
{
	char name[16];
	size_t n = strlen(prefix);
	TP_CHECK(n <= 8);
	memcpy(name, prefix, n);
	name[n] = '-';
	tp_utoa(name + n + 1, i);
	TP_CHECK(pthread_setname_np(pthread_self(), name) == 0);
}

static inline void acct_cat(char *buf, size_t cap, const char *s)
{
	size_t n = strlen(buf), m = strlen(s);
	TP_CHECK(n + m < cap);
	memcpy(buf + n, s, m + 1);
}

static inline void acct_field(char *buf, size_t cap, const char *key, long v)
{
	char num[24];
	acct_cat(buf, cap, ", \"");
	acct_cat(buf, cap, key);
	acct_cat(buf, cap, "\": ");
	if (v < 0) {
		acct_cat(buf, cap, "-");
		v = -v;
	}
	acct_cat(buf, cap, tp_utoa(num, (unsigned long long)v));
}

/* One JSON line: the program, its mode, threads, blocks, then the counts.
 * To the file `path` if not NULL, else stdout. */
static inline void acct_report(const char *program, const char *mode, unsigned long threads,
			       unsigned long blocks, const char *path)
{
	char buf[1024] = "{\"program\": \"";
	acct_cat(buf, sizeof buf, program);
	acct_cat(buf, sizeof buf, "\", \"mode\": \"");
	acct_cat(buf, sizeof buf, mode);
	acct_cat(buf, sizeof buf, "\"");
	acct_field(buf, sizeof buf, "threads", (long)threads);
	acct_field(buf, sizeof buf, "blocks", (long)blocks);
	acct_field(buf, sizeof buf, "malloc", (long)atomic_load(&ac.malloc_calls));
	acct_field(buf, sizeof buf, "calloc", (long)atomic_load(&ac.calloc_calls));
	acct_field(buf, sizeof buf, "realloc", (long)atomic_load(&ac.realloc_calls));
	acct_field(buf, sizeof buf, "free", (long)atomic_load(&ac.free_calls));
	acct_field(buf, sizeof buf, "realloc_moved", (long)atomic_load(&ac.realloc_moved));
	acct_field(buf, sizeof buf, "bytes_allocated", (long)atomic_load(&ac.bytes_allocated));
	acct_field(buf, sizeof buf, "peak_live_bytes", atomic_load(&ac.peak_live_bytes));
	acct_field(buf, sizeof buf, "live_bytes_at_exit", atomic_load(&ac.live_bytes));
	acct_field(buf, sizeof buf, "live_blocks_at_exit", atomic_load(&ac.live_blocks));
	acct_field(buf, sizeof buf, "min_block", ACCT_MIN_BLOCK);
	acct_field(buf, sizeof buf, "max_block", ACCT_MAX_BLOCK);
	acct_field(buf, sizeof buf, "queue_slots", ACCT_QCAP);
	acct_cat(buf, sizeof buf, "}\n");
	int fd = 1;
	if (path) {
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		TP_CHECK(fd >= 0);
	}
	tp_write(fd, buf);
	if (path)
		TP_CHECK(close(fd) == 0);
}

#endif
