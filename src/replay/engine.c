/* The replay engine: one thread per traced thread, each running its op
 * stream against the allocator of this process, timing every call with
 * the TSC.
 *
 * Hand-offs: a thread publishes its op count only after the ops some other
 * thread waits for (the loader knows them all: they are the WAIT ops'
 * arguments), with a full barrier there and nowhere else, so an op nobody
 * waits for costs one compare.  A waiter spins on the count for a while,
 * then sleeps on a futex the publisher wakes when it sees a sleeper.
 * Everything the engine keeps (slot table, statistics, RSS samples) is
 * mmap'ed, so that the allocator under test sees only the workload's calls
 * (and pthread_create's).
 *
 * Threads: every workload thread but 0 (the main thread) is created before
 * the run and parks on a futex; its SPAWN op releases it (a store and a
 * wake), so that neither clone nor the new stack's page faults are in the
 * run, and the kernel places a woken thread on an idle CPU at once, where a
 * newly created one may wait milliseconds behind a busy one. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "common/util.h"
#include "replay.h"
#include "trace/format.h"

const double ht_replay_pcts[HT_NPCT] = {50, 99, 99.9};

/* ---- the clock ---- */

/* Start of a call: plain RDTSC (~8.5 ns here); its end: RDTSCP (~14 ns),
 * which waits for the call's instructions to finish.  Both are asm volatile
 * with a memory clobber, so that the compiler moves none of the engine's
 * loads or stores into the timed window; the end's RDTSCP writes its
 * processor id to rcx, which is clobbered, not stored (the intrinsic's
 * &aux costs a store per call). */
static inline uint64_t tsc_begin(void)
{
#if defined(__x86_64__)
	uint64_t t, hi;
	__asm__ volatile("rdtsc\n\tshl $32, %%rdx\n\tor %%rdx, %%rax"
			 : "=a"(t), "=d"(hi) : : "memory");
	return t;
#elif defined(__i386__)
	return __rdtsc();
#else
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

static inline uint64_t tsc(void)
{
#if defined(__x86_64__)
	uint64_t t, hi;
	__asm__ volatile("rdtscp\n\tshl $32, %%rdx\n\tor %%rdx, %%rax"
			 : "=a"(t), "=d"(hi) : : "rcx", "memory");
	return t;
#elif defined(__i386__)
	unsigned aux;
	return __rdtscp(&aux);
#else
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

/* ---- latency histograms: 16 sub-buckets per power of two ---- */

#define NBUCKETS 976

static inline unsigned bucket(uint64_t v)
{
	if (v < 32)
		return (unsigned)v;
	unsigned e = 63 - (unsigned)__builtin_clzll(v);
	return 32 + (e - 5) * 16 + (unsigned)((v >> (e - 4)) & 15);
}

static uint64_t bucket_value(unsigned b)
{
	if (b < 32)
		return b;
	unsigned e = (b - 32) / 16 + 5, sub = (b - 32) % 16;
	uint64_t lo = (16ull + sub) << (e - 4);
	return lo + (1ull << (e - 4)) / 2; /* the middle of the bucket */
}

/* Per function statistics of a thread. */
struct fnstat {
	uint64_t cycles;            /* cycles inside them */
	uint64_t hist[NBUCKETS];    /* calls by cycles */
};

static inline void account(struct fnstat *s, uint64_t c)
{
	s->cycles += c; /* calls: the histogram's sum, at the end */
	s->hist[bucket(c)]++;
}

__attribute__((cold, noinline)) static void account_long(struct fnstat *s, uint64_t c)
{
	account(s, c);
}

/* malloc's and free's calls shorter than NSMALL cycles (nearly all of
 * them) are counted in an exact histogram per thread, one counter per cycle
 * count: the update is one compare and one increment, with neither the
 * bucket's arithmetic nor a running sum of cycles.  Both come back exactly
 * when the run ends (fold_small): each value goes to its bucket, and adds
 * value x count to the sum.  Longer calls take account_long.  The other
 * functions, rare, keep account: 2 KiB per function and thread would
 * make a workload of many threads start much larger (the tables are
 * locked in memory). */
#ifndef NSMALL /* -DNSMALL=65536 to count the fast path's instructions under callgrind */
#define NSMALL 256
#endif

static inline __attribute__((always_inline)) void account_small(uint64_t *small, struct fnstat *s,
								uint64_t c)
{
	if (__builtin_expect(c < NSMALL, 1))
		small[c]++;
	else
		account_long(s, c);
}

/* After the run: the exact counts into the buckets and the cycle sum. */
static void fold_small(uint64_t *small, struct fnstat *s)
{
	for (uint64_t v = 0; v < NSMALL; v++) {
		s->cycles += v * small[v];
		s->hist[bucket(v)] += small[v];
		small[v] = 0;
	}
}

/* ---- threads ---- */

/* A replay thread.  The first cache line is what other threads read. */
struct rthread {
	_Alignas(64) _Atomic uint64_t progress; /* ops done, published at waited counts */
	_Atomic uint32_t sleepers;   /* threads asleep on wake */
	_Atomic uint32_t wake;       /* futex word, bumped at each publish with sleepers */
	_Atomic uint32_t go;         /* futex word: the run (engine.gen) its SPAWN released
					it for, GO_QUIT to exit; it parks while it equals the last
					run it did */
	_Atomic uint32_t startst;    /* ST_*: its start in the run its SPAWN released it for */
	_Atomic uint32_t fin;        /* futex word: the last run it finished */
	_Alignas(64) const uint8_t *start, *end; /* its stream */
	const uint8_t *p;            /* cursor (--threads-as-one resumes here) */
	uint64_t done;               /* ops done */
	uint64_t nops;               /* ops in its stream */
	const uint64_t *pub;         /* ascending counts other threads wait for */
	uint64_t npub, ipub;         /* their number, the next one */
	uint32_t idx;                /* index in the workload */
	pthread_t pt;                /* its pthread (not thread 0), parked between runs */
	uint64_t wait_cycles;        /* blocked in waits */
	uint64_t spawn_wait_cycles;  /* in SPAWNs, until the thread released runs */
	uint64_t waits, waits_blocked; /* waits run, of which blocked */
	uint64_t t_begin, t_end;     /* TSC at its first op's start and its last op's end */
	uint64_t ns_end;             /* CLOCK_MONOTONIC just after t_end */
	pid_t tid;                   /* its kernel thread id (not thread 0) */
	int has_mask;                /* mask holds its affinity */
	cpu_set_t mask;              /* its affinity, put back after a lent CPU (release) */
	uint64_t busy;               /* cycles running ops, summed over repeats */
	uint64_t since_trim;         /* ops since the last --trim-interval trim */
	uint64_t trims;              /* those trims */
	uint64_t slot_errors;        /* empty slots freed, live ones overwritten */
	int64_t pending;             /* live bytes its ops changed, not yet in engine.live */
	struct fnstat *fn;           /* HT_FN_NR entries */
	/* --threads-as-one */
	uint32_t wait_on;            /* blocked on this thread */
	uint64_t wait_for;           /* until it has done this many ops */
	/* its malloc calls ([0]) and free calls ([1]) under NSMALL cycles, by
	 * cycles: account_small, folded into fn at the end */
	_Alignas(64) uint64_t small[2][NSMALL];
};

/* The replay's own live requested bytes (the slots' sizes) and their
 * peak, to set beside the trace's (the ideal).  Each thread sums its ops'
 * changes in rthread.pending and adds them to live when they raise it (an
 * allocation that leaves pending above 0), when its frees pass slack,
 * before it publishes a count another thread waits for, and when it
 * stops: live is then never below the true sum, and above it by at most
 * slack per thread, so the peak is an upper bound of the replay's own, and
 * exact where one thread runs at a time (slack 0, plain stores).  With
 * threads, one shared atomic add per allocation that raises live: a
 * malloc/free loop of one size never touches it. */
struct livec {
	_Alignas(64) _Atomic int64_t live; /* live requested bytes, as flushed */
	_Atomic int64_t peak;              /* the most live has been */
	int shared;                        /* threads run at once: atomic adds */
	int64_t slack;                     /* frees left pending up to this many bytes */
};

#define LIVE_SLACK 16384 /* with threads: 16 KiB per thread at most above the true sum */

__attribute__((noinline)) static void live_peak_up(struct livec *lc, int64_t v)
{
	int64_t pk = atomic_load_explicit(&lc->peak, memory_order_relaxed);
	while (v > pk && !atomic_compare_exchange_weak_explicit(&lc->peak, &pk, v,
								 memory_order_relaxed,
								 memory_order_relaxed))
		;
}

/* Adds a thread's pending bytes to live; returns the new pending, 0. */
static inline int64_t live_flush(struct livec *lc, int64_t pend)
{
	int64_t v;
	if (lc->shared) {
		v = atomic_fetch_add_explicit(&lc->live, pend, memory_order_relaxed) + pend;
	} else {
		v = atomic_load_explicit(&lc->live, memory_order_relaxed) + pend;
		atomic_store_explicit(&lc->live, v, memory_order_relaxed);
	}
	if (v > atomic_load_explicit(&lc->peak, memory_order_relaxed))
		live_peak_up(lc, v);
	return 0;
}

/* The run. */
struct engine {
	const struct ht_workload *w;   /* what runs */
	const struct ht_replay_config *cfg; /* how */
	struct rthread *t;             /* nthreads */
	void **slots;                  /* the slot table */
	uint64_t *size;                /* per slot: the requested bytes of its block (livec) */
	uint64_t *extent;              /* per slot (mmap workloads): length of its map */
	enum ht_touch touch;           /* --touch */
	long page;                     /* page size */
	uint64_t *pubs;                /* storage of the rthreads' pub arrays */
	uint32_t *ready;               /* --threads-as-one: threads ready to run */
	uint32_t nready;               /* how many */
	size_t pubs_len;               /* its bytes */
	uint32_t gen;                  /* the run (--repeat) under way, from 1 */
	uint32_t nstarted;             /* threads 1.. created: parked or running */
	_Atomic uint32_t nparked;      /* of those, the ones that reached their first park */
	_Atomic uint64_t lends;        /* threads lent their releaser's CPU (release) */
	struct livec lc;               /* the replay's own live bytes */
};

#define GO_QUIT UINT32_MAX /* rthread.go: leave */

static void *map_zero(size_t n)
{
	void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
	return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

/* A number and where the stream goes on after it (returned in registers,
 * so that the cursor never has to live in memory). */
struct leb {
	uint64_t v;         /* the number */
	const uint8_t *p;   /* past it */
};

__attribute__((cold, noinline)) static struct leb getv_long(const uint8_t *p)
{
	uint64_t v = *p & 0x7f;
	for (int shift = 7; *p++ & 0x80; shift += 7)
		v |= (uint64_t)(*p & 0x7f) << shift;
	return (struct leb){v, p};
}

/* A LEB128 number: slot numbers and small sizes take 1 byte, sizes up to
 * 16 KiB 2, inline; longer ones the out-of-line loop. */
static inline __attribute__((always_inline)) uint64_t getv(const uint8_t **pp)
{
	const uint8_t *p = *pp;
	uint64_t v = p[0];
	if (__builtin_expect(v < 0x80, 1)) {
		*pp = p + 1;
		return v;
	}
	uint64_t hi = p[1];
	if (__builtin_expect(hi < 0x80, 1)) {
		*pp = p + 2;
		return (v & 0x7f) | hi << 7;
	}
	struct leb l = getv_long(p);
	*pp = l.p;
	return l.v;
}

/* touch and page: the engine's, read once per run_ops (a histogram
 * increment may alias g->page for the compiler) */
static inline void touch_mem(enum ht_touch touch, uint64_t page, void *ptr, uint64_t n)
{
	if (touch == HT_TOUCH_NONE || !ptr || !n)
		return;
	if (touch == HT_TOUCH_ALL) {
		memset(ptr, 0xa5, n);
	} else {
		volatile char *c = ptr;
		for (uint64_t i = 0; i < n; i += page)
			c[i] = 1;
	}
}

/* The next op count at which run_ops must stop by the slow path: the next
 * count another thread waits for, the next --trim-interval trim, or the
 * end of the stream (the loader checked that it holds t->nops ops). */
static inline uint64_t next_stop(const struct rthread *t, uint64_t trim_every)
{
	uint64_t next = t->ipub < t->npub ? t->pub[t->ipub] : t->nops;
	if (trim_every && t->done + (trim_every - t->since_trim) < next)
		next = t->done + (trim_every - t->since_trim);
	return next;
}

/* After op number t->done: publish it if someone waits for it. */
static inline void publish(struct rthread *t)
{
	if (t->ipub < t->npub && t->pub[t->ipub] == t->done) {
		t->ipub++;
		/* seq_cst: the store must be visible before sleepers is read */
		atomic_store(&t->progress, t->done);
		if (atomic_load(&t->sleepers)) {
			atomic_fetch_add(&t->wake, 1);
			futex(&t->wake, FUTEX_WAKE_PRIVATE, INT_MAX);
		}
	}
}

static void wait_for(struct rthread *me, struct rthread *o, uint64_t count)
{
	me->waits++;
	if (atomic_load_explicit(&o->progress, memory_order_acquire) >= count)
		return;
	me->waits_blocked++;
	uint64_t t0 = tsc_begin();
	for (int i = 0; i < 4000; i++) {
#if defined(__x86_64__) || defined(__i386__)
		_mm_pause();
#endif
		if (atomic_load_explicit(&o->progress, memory_order_acquire) >= count)
			goto done;
	}
	for (;;) {
		atomic_fetch_add(&o->sleepers, 1);
		uint32_t wv = atomic_load(&o->wake);
		if (atomic_load(&o->progress) >= count) {
			atomic_fetch_sub(&o->sleepers, 1);
			break;
		}
		futex(&o->wake, FUTEX_WAIT_PRIVATE, wv);
		atomic_fetch_sub(&o->sleepers, 1);
		if (atomic_load_explicit(&o->progress, memory_order_acquire) >= count)
			break;
	}
done:
	me->wait_cycles += tsc() - t0;
}

/* The SPAWN of thread c: wakes it (parked since start_workers or its last
 * run) and waits until it runs, RELEASE_SPIN_NS at most; returns the
 * cycles it waited.  A thread released when no CPU is idle is queued on a
 * busy one, and may stay there for milliseconds while another CPU goes
 * idle: the kernel's balancing leaves alone a task that ran less than
 * 0.5 ms ago (the one it preempted to run the new one), until a few ticks
 * later.  That is what happens when the main thread releases two workers
 * on 2 CPUs and then has nothing left to do.  So a thread that does not
 * run within RELEASE_SPIN_NS is lent the releaser's CPU: its affinity is
 * narrowed to that CPU, where it runs as soon as the releaser sleeps or
 * its time slice ends, and it puts its own affinity back as it starts. */
#define RELEASE_SPIN_NS 50000

enum { ST_WAKING, ST_RUNNING, ST_LENDING, ST_LENT }; /* rthread.startst */

static uint64_t release(struct engine *g, struct rthread *c)
{
	atomic_store(&c->startst, ST_WAKING);
	atomic_store_explicit(&c->go, g->gen, memory_order_release);
	futex(&c->go, FUTEX_WAKE_PRIVATE, 1);
	uint64_t t0 = tsc_begin();
	uint64_t until = ht_clock_ns() + RELEASE_SPIN_NS;
	do {
		for (int i = 0; i < 16; i++) {
			if (atomic_load_explicit(&c->startst, memory_order_acquire) == ST_RUNNING)
				return tsc() - t0;
#if defined(__x86_64__) || defined(__i386__)
			_mm_pause();
#endif
		}
	} while (ht_clock_ns() < until);
	uint32_t st = ST_WAKING;
	if (c->has_mask && atomic_compare_exchange_strong(&c->startst, &st, ST_LENDING)) {
		int cpu = sched_getcpu();
		cpu_set_t one;
		CPU_ZERO(&one);
		if (cpu >= 0 && cpu < CPU_SETSIZE) {
			CPU_SET(cpu, &one);
			sched_setaffinity(c->tid, sizeof(one), &one); /* if it fails, it fails */
		}
		atomic_store(&c->startst, ST_LENT);
		g->lends++;
	}
	return tsc() - t0;
}

/* Where run_common stopped: the cursor and the ops left until the stop. */
struct cursor {
	const uint8_t *p;   /* the next op */
	uint64_t left;      /* ops until run_ops's next stop */
};

/* Slot s (a block of this thread's op) now holds n requested bytes. */
static inline void grow(struct engine *g, struct rthread *me, uint64_t s, uint64_t n)
{
	me->pending += (int64_t)n - (int64_t)g->size[s];
	g->size[s] = n;
	if (me->pending > 0)
		me->pending = live_flush(&g->lc, me->pending);
}

/* The common ops, malloc into a slot and free from one, in a loop of their
 * own, out of line: nothing else is live in it (the cursor, the count
 * down to the stop, the slot table, the exact histograms, the slot and the
 * start time), so that it keeps them all in registers.  Returns at another
 * op, at a malloc or free of slot 0 (the pointer NULL) or of a slot in the
 * wrong state (a slot error, to be counted), or when c.left reaches 0;
 * run_ops does the rest.  touch is a constant in each of its instances. */
static inline __attribute__((always_inline)) struct cursor
run_common_t(struct cursor c, void **slots, uint64_t *small, struct fnstat *fn,
	     const enum ht_touch touch, uint64_t page, uint64_t *size, int64_t *pendp,
	     struct livec *lc)
{
	const uint8_t *p = c.p;
	uint64_t left = c.left;
	int64_t pend = *pendp;
	const int64_t slack = -lc->slack;
	for (;;) {
		const uint8_t *q = p + 1;
		uint64_t t0, t1, s, n;
		void *r, **sp;
		if (*p == HT_WL_FREE) {
			s = getv(&q);
			if (__builtin_expect(!s, 0))
				break;
			sp = &slots[s - 1];
			r = *sp;
			if (__builtin_expect(!r, 0))
				break;
			t0 = tsc_begin();
			free(r);
			t1 = tsc();
			account_small(small + NSMALL, &fn[HT_FN_FREE], t1 - t0);
			*sp = NULL;
			pend -= (int64_t)size[s - 1];
			/* (cleared: a calloc, realloc or memalign into the slot
			 * later counts what it holds less what it held) */
			size[s - 1] = 0;
			if (__builtin_expect(pend < slack, 0))
				pend = live_flush(lc, pend);
		} else if (*p == HT_WL_MALLOC) {
			s = getv(&q), n = getv(&q);
			if (__builtin_expect(!s, 0))
				break;
			sp = &slots[s - 1];
			if (__builtin_expect(*sp != NULL, 0))
				break;
			t0 = tsc_begin();
			r = malloc(n);
			t1 = tsc();
			account_small(small, &fn[HT_FN_MALLOC], t1 - t0);
			*sp = r;
			n &= -(uint64_t)(r != NULL);
			size[s - 1] = n;
			pend += (int64_t)n;
			if (pend > 0)
				pend = live_flush(lc, pend);
			touch_mem(touch, page, r, n);
		} else {
			break;
		}
		p = q;
		if (__builtin_expect(--left == 0, 0))
			break;
	}
	*pendp = pend;
	return (struct cursor){p, left};
}

#define RUN_COMMON(name, touch)                                                                  \
	__attribute__((noinline)) static struct cursor name(struct cursor c, void **slots,      \
							     uint64_t *small, struct fnstat *fn, \
							     uint64_t page, uint64_t *size,      \
							     int64_t *pendp, struct livec *lc)   \
	{                                                                                        \
		return run_common_t(c, slots, small, fn, touch, page, size, pendp, lc);         \
	}
RUN_COMMON(run_common_none, HT_TOUCH_NONE)
RUN_COMMON(run_common_page, HT_TOUCH_PAGE)
RUN_COMMON(run_common_all, HT_TOUCH_ALL)
#undef RUN_COMMON

static inline __attribute__((always_inline)) struct cursor
run_common(const enum ht_touch touch, struct cursor c, void **slots, struct rthread *me,
	   uint64_t page, struct engine *g)
{
	switch (touch) {
	case HT_TOUCH_NONE:
		return run_common_none(c, slots, me->small[0], me->fn, page, g->size, &me->pending,
				       &g->lc);
	case HT_TOUCH_PAGE:
		return run_common_page(c, slots, me->small[0], me->fn, page, g->size, &me->pending,
				       &g->lc);
	default:
		return run_common_all(c, slots, me->small[0], me->fn, page, g->size, &me->pending,
				      &g->lc);
	}
}

/* The ops of me's stream from me->p on, each call timed.  Returns 1 at the
 * end of the stream, 0 when blocked on a wait (--threads-as-one:
 * me->wait_on/wait_for say on what).
 *
 * What runs between one call's RDTSCP and the next one's RDTSC is the
 * replay's bookkeeping, so the loop is cut to the bone for the common ops:
 *   - free and malloc are tested before the switch, with the pointer's
 *     slot address computed before the call (the only value besides the
 *     cursor, the stop counter and the start time kept across it);
 *   - one counter, left, counts down to the next stop (a count another
 *     thread waits for, a trim, the end of the stream): one decrement and
 *     branch per op; done, since_trim and the cursor's end are dealt with
 *     only there;
 *   - touch is a constant in each of run_ops's three instances, so that
 *     --touch none tests nothing per op;
 *   - a malloc's or free's cycles are one increment in an exact
 *     histogram (account_small);
 *   - slot errors are summed in serr, added to me->slot_errors at the end. */
static inline __attribute__((always_inline)) int run_ops_t(struct engine *g, struct rthread *me,
							    int serial, const enum ht_touch touch)
{
	void **const slots = g->slots;
	uint64_t *const size = g->size;
	struct fnstat *const fn = me->fn;
	const uint64_t trim_every = g->cfg->trim_interval;
	const uint64_t page = (uint64_t)g->page;
	const uint8_t *p = me->p;
	uint64_t serr = 0; /* slot errors, added to me->slot_errors on the way out */
	uint64_t stop = next_stop(me, trim_every);
	uint64_t left = stop - me->done; /* ops until the stop */
	int ret = 1;
	if (!left)
		goto out; /* an empty stream */
	for (;;) {
		struct cursor cur = run_common(touch, (struct cursor){p, left}, slots, me, page, g);
		p = cur.p;
		left = cur.left;
		if (!left)
			goto stop;
		int op = *p++;
		uint64_t t0, t1, s, o, n, m;
		void *r;
		switch (op) {
		case HT_WL_FREE:
			s = getv(&p);
			r = s ? slots[s - 1] : NULL;
			serr += s && !r;
			t0 = tsc_begin();
			free(r);
			t1 = tsc();
			account_small(me->small[1], &fn[HT_FN_FREE], t1 - t0);
			if (s) {
				slots[s - 1] = NULL;
				me->pending -= (int64_t)size[s - 1];
				size[s - 1] = 0;
			}
			break;
		case HT_WL_MALLOC:
			s = getv(&p), n = getv(&p);
			t0 = tsc_begin();
			r = malloc(n);
			t1 = tsc();
			account_small(me->small[0], &fn[HT_FN_MALLOC], t1 - t0);
			goto store;
		case HT_WL_CALLOC:
			s = getv(&p), m = getv(&p), n = getv(&p);
			t0 = tsc_begin();
			r = calloc(m, n);
			t1 = tsc();
			account(&fn[HT_FN_CALLOC], t1 - t0);
			if (__builtin_mul_overflow(m, n, &n))
				n = 0;
			goto store;
		case HT_WL_MEMALIGN:
			s = getv(&p), m = getv(&p), n = getv(&p);
			t0 = tsc_begin();
			r = memalign(m, n);
			t1 = tsc();
			account(&fn[HT_FN_MEMALIGN], t1 - t0);
			goto store;
		case HT_WL_POSIX_MEMALIGN:
			s = getv(&p), m = getv(&p), n = getv(&p);
			t0 = tsc_begin();
			if (posix_memalign(&r, m, n))
				r = NULL;
			t1 = tsc();
			account(&fn[HT_FN_POSIX_MEMALIGN], t1 - t0);
			goto store;
		case HT_WL_ALIGNED_ALLOC:
			s = getv(&p), m = getv(&p), n = getv(&p);
			t0 = tsc_begin();
			r = aligned_alloc(m, n);
			t1 = tsc();
			account(&fn[HT_FN_ALIGNED_ALLOC], t1 - t0);
			goto store;
		case HT_WL_VALLOC:
			s = getv(&p), n = getv(&p);
			t0 = tsc_begin();
			r = valloc(n);
			t1 = tsc();
			account(&fn[HT_FN_VALLOC], t1 - t0);
			goto store;
		case HT_WL_PVALLOC:
			s = getv(&p), n = getv(&p);
			t0 = tsc_begin();
			r = pvalloc(n);
			t1 = tsc();
			account(&fn[HT_FN_PVALLOC], t1 - t0);
		store:
			if (s) {
				serr += slots[s - 1] != NULL;
				slots[s - 1] = r;
				grow(g, me, s - 1, r ? n : 0);
				touch_mem(touch, page, r, n);
			} else {
				free(r); /* failed in the trace, not here */
			}
			break;
		case HT_WL_REALLOC:
		case HT_WL_REALLOCARRAY: {
			s = getv(&p), o = getv(&p);
			m = op == HT_WL_REALLOCARRAY ? getv(&p) : 1;
			n = getv(&p);
			void *old = o ? slots[o - 1] : NULL;
			serr += (o && !old) + (s && s != o && slots[s - 1]);
			t0 = tsc_begin();
			r = op == HT_WL_REALLOC ? realloc(old, n) : reallocarray(old, m, n);
			t1 = tsc();
			account(&fn[op == HT_WL_REALLOC ? HT_FN_REALLOC : HT_FN_REALLOCARRAY], t1 - t0);
			int overflow = __builtin_mul_overflow(m, n, &n);
			uint64_t bytes = n, was = o ? size[o - 1] : 0;
			if (!r && (n || overflow)) {
				/* failed here: the old block stays; a call that
				 * succeeded in the trace (it has a result slot)
				 * was not made (it went uncounted, probe R) */
				serr += s != 0;
				r = old, bytes = was;
			}
			if (o && o != s) {
				slots[o - 1] = NULL;
				me->pending -= (int64_t)was;
				size[o - 1] = 0;
			}
			if (s) {
				slots[s - 1] = r;
				grow(g, me, s - 1, r ? bytes : 0);
				if (r != old)
					touch_mem(touch, page, r, n);
			} else if (r && r != old) {
				free(r); /* realloc(p, 0): freed in the trace */
			}
			break;
		}
		case HT_WL_MALLOPT:
			m = getv(&p), n = getv(&p);
			t0 = tsc_begin();
			mallopt((int)ht_unzigzag(m), (int)ht_unzigzag(n));
			t1 = tsc();
			account(&fn[HT_FN_MALLOPT], t1 - t0);
			break;
		case HT_WL_MALLOC_TRIM:
			n = getv(&p);
			t0 = tsc_begin();
			malloc_trim(n);
			t1 = tsc();
			account(&fn[HT_FN_MALLOC_TRIM], t1 - t0);
			break;
		case HT_WL_MMAP: {
			s = getv(&p), n = getv(&p);
			int prot = (int)getv(&p), flags = (int)getv(&p);
			t0 = tsc_begin();
			r = mmap(NULL, n, prot, flags, -1, 0);
			t1 = tsc();
			account(&fn[HT_FN_MMAP], t1 - t0);
			if (r == MAP_FAILED)
				r = NULL;
			slots[s - 1] = r;
			g->extent[s - 1] = r ? n : 0;
			if (prot & PROT_WRITE)
				touch_mem(touch, page, r, n);
			break;
		}
		case HT_WL_MUNMAP: {
			s = getv(&p), o = getv(&p), n = getv(&p);
			uint64_t last = getv(&p);
			char *base = slots[s - 1];
			uint64_t ext = g->extent[s - 1] & ~(1ull << 63);
			if (o >= ext)
				base = NULL; /* past a map that a failed mremap left short */
			else if (n > ext - o)
				n = ext - o;
			t0 = tsc_begin();
			if (base)
				munmap(base + o, n);
			t1 = tsc();
			account(&fn[HT_FN_MUNMAP], t1 - t0);
			if (last) {
				slots[s - 1] = NULL;
				g->extent[s - 1] = 0;
			} else if (base) {
				g->extent[s - 1] |= 1ull << 63; /* no longer whole */
			}
			break;
		}
		case HT_WL_MREMAP: {
			s = getv(&p), o = getv(&p);
			m = getv(&p), n = getv(&p);
			int flags = (int)getv(&p);
			void *old = slots[o - 1];
			t0 = tsc_begin();
			r = old ? mremap(old, m, n, flags) : MAP_FAILED;
			t1 = tsc();
			account(&fn[HT_FN_MREMAP], t1 - t0);
			if (r == MAP_FAILED) {
				r = old; /* stays where it was */
				n = m;
			}
			slots[o - 1] = NULL;
			g->extent[o - 1] = 0;
			slots[s - 1] = r;
			g->extent[s - 1] = r ? n : 0;
			break;
		}
		case HT_WL_WAIT: {
			const uint8_t *at = p - 1; /* where to resume */
			uint64_t j = getv(&p), count = getv(&p);
			struct rthread *o2 = &g->t[j];
			if (serial) {
				if (o2->done < count) {
					/* counted when it passes, on the way back */
					uint64_t done = stop - left;
					me->waits_blocked++;
					me->wait_on = (uint32_t)j;
					me->wait_for = count;
					me->since_trim += done - me->done;
					me->done = done;
					p = at;
					ret = 0;
					goto out;
				}
				me->waits++;
			} else {
				wait_for(me, o2, count);
			}
			break;
		}
		case HT_WL_SPAWN: {
			struct rthread *c = &g->t[getv(&p)];
			if (serial) {
				g->ready[g->nready++] = c->idx;
			} else {
				me->spawn_wait_cycles += release(g, c);
			}
			break;
		}
		default:
			__builtin_unreachable(); /* the loader checked every op */
		}
		if (--left != 0)
			continue;
	stop:
		/* a stop: op number stop is done */
		me->since_trim += stop - me->done;
		me->done = stop;
		if (me->pending) /* in live before a waiter allocates */
			me->pending = live_flush(&g->lc, me->pending);
		publish(me);
		if (trim_every && me->since_trim >= trim_every) {
			me->since_trim = 0;
			me->trims++;
			malloc_trim(0);
		}
		if (stop == me->nops)
			break;
		stop = next_stop(me, trim_every);
		left = stop - me->done;
	}
out:
	me->slot_errors += serr;
	me->p = p;
	if (me->pending)
		me->pending = live_flush(&g->lc, me->pending);
	return ret;
}

/* run_ops_t with touch a constant. */
static int run_ops(struct engine *g, struct rthread *me, int serial)
{
	switch (g->touch) {
	case HT_TOUCH_NONE:
		return run_ops_t(g, me, serial, HT_TOUCH_NONE);
	case HT_TOUCH_PAGE:
		return run_ops_t(g, me, serial, HT_TOUCH_PAGE);
	default:
		return run_ops_t(g, me, serial, HT_TOUCH_ALL);
	}
}

/* A thread's stream, once, on the thread running it. */
static void thread_run(struct engine *g, struct rthread *me)
{
	uint64_t waited = me->wait_cycles + me->spawn_wait_cycles;
	me->t_begin = tsc();
	run_ops(g, me, 0);
	me->t_end = tsc();
	me->ns_end = ht_clock_ns();
	me->busy += me->t_end - me->t_begin - (me->wait_cycles + me->spawn_wait_cycles - waited);
}

static struct engine *current; /* the run worker_main works for */

/* Threads 1..: parked until a SPAWN releases them for a run, once per
 * --repeat run; GO_QUIT ends them. */
static void *worker_main(void *arg)
{
	struct rthread *me = arg;
	uint32_t ran = 0, go;
	me->tid = (pid_t)syscall(SYS_gettid);
	me->has_mask = !sched_getaffinity(0, sizeof(me->mask), &me->mask);
	atomic_fetch_add(&current->nparked, 1);
	for (;;) {
		while ((go = atomic_load_explicit(&me->go, memory_order_acquire)) == ran)
			futex(&me->go, FUTEX_WAIT_PRIVATE, ran);
		if (go == GO_QUIT)
			return NULL;
		uint32_t st = ST_WAKING;
		if (!atomic_compare_exchange_strong(&me->startst, &st, ST_RUNNING)) {
			/* lent its releaser's CPU: once that is done, its own
			 * affinity again (it stays on that CPU until the kernel
			 * moves it) */
			while (atomic_load(&me->startst) != ST_LENT)
				sched_yield();
			sched_setaffinity(0, sizeof(me->mask), &me->mask);
		}
		thread_run(current, me);
		ran = go;
		atomic_store_explicit(&me->fin, go, memory_order_release);
		futex(&me->fin, FUTEX_WAKE_PRIVATE, 1);
	}
}

/* glibc's malloc_trim and mallopt set glibc's malloc up on their first
 * call, and that set-up is not thread-safe: two threads making the first
 * call at once both take the main arena, counted once, and the second of
 * them to exit aborts ("a->attached_threads > 0") or one of them crashes
 * in a half-made arena.  Under glibc's allocator the main thread's first
 * malloc sets it up; under jemalloc or mimalloc (neither has malloc_trim)
 * or a sanitizer's allocator nothing does until a worker trims.  A trace's
 * threads trimming together crashed 1 replay in 50 to 300 under mimalloc.  So the
 * main thread sets it up before any worker runs: mallinfo2 does, and only
 * reads. */
static void glibc_malloc_setup(void)
{
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 33)
	struct mallinfo2 mi = mallinfo2();
	(void)mi;
#endif
}

/* Creates threads 1.. parked; 0 on success, else the error number (the
 * ones created are in g->nstarted: stop_workers ends them). */
static int start_workers(struct engine *g)
{
	for (uint32_t i = 1; i < g->w->nthreads; i++) {
		int err = pthread_create(&g->t[i].pt, NULL, worker_main, &g->t[i]);
		if (err)
			return err;
		g->nstarted = i;
	}
	/* parked, with their tid and affinity known (release uses them) */
	struct timespec ts = {0, 100000};
	while (atomic_load(&g->nparked) < g->nstarted)
		nanosleep(&ts, NULL);
	return 0;
}

/* Until every thread 1.. has finished run g->gen. */
static void await_workers(struct engine *g)
{
	for (uint32_t i = 1; i <= g->nstarted; i++) {
		struct rthread *t = &g->t[i];
		uint32_t f;
		while ((f = atomic_load_explicit(&t->fin, memory_order_acquire)) != g->gen)
			futex(&t->fin, FUTEX_WAIT_PRIVATE, f);
	}
}

static void stop_workers(struct engine *g)
{
	for (uint32_t i = 1; i <= g->nstarted; i++) {
		atomic_store(&g->t[i].go, GO_QUIT);
		futex(&g->t[i].go, FUTEX_WAKE_PRIVATE, 1);
	}
	for (uint32_t i = 1; i <= g->nstarted; i++)
		pthread_join(g->t[i].pt, NULL);
	g->nstarted = 0;
}

/* --threads-as-one: every thread's ops in this thread, each thread as far
 * as its waits allow, then the next one ready. */
static void run_serial(struct engine *g)
{
	uint32_t n = g->w->nthreads, nblocked = 0;
	uint32_t *blocked = map_zero(n * sizeof(uint32_t));
	g->ready = map_zero(n * sizeof(uint32_t));
	if (!g->ready || !blocked)
		ht_oom();
	g->nready = 0;
	g->ready[g->nready++] = 0;
	uint64_t t0 = tsc_begin();
	while (g->nready) {
		struct rthread *me = &g->t[g->ready[--g->nready]];
		run_ops(g, me, 1); /* its spawns join the ready ones */
		if (me->p < me->end)
			blocked[nblocked++] = me->idx;
		for (uint32_t k = 0; k < nblocked;) {
			struct rthread *b = &g->t[blocked[k]];
			if (g->t[b->wait_on].done >= b->wait_for) {
				g->ready[g->nready++] = blocked[k];
				blocked[k] = blocked[--nblocked];
			} else {
				k++;
			}
		}
	}
	uint64_t t1 = tsc();
	g->t[0].busy += t1 - t0;
	munmap(g->ready, n * sizeof(uint32_t));
	munmap(blocked, n * sizeof(uint32_t));
	g->ready = NULL;
}

/* ---- RSS over time ---- */

/* The side thread that samples RSS. */
struct sampler {
	int fd;                     /* /proc/self/statm, opened once */
	_Atomic uint32_t go;        /* futex word: SP_* */
	_Atomic uint32_t warm;      /* futex word: its warm-up done (sampler_main) */
	uint64_t interval_ns;       /* doubles when the buffer fills */
	uint64_t t0;                /* start, ns */
	struct ht_rss_sample *s;    /* samples */
	uint32_t n, cap;            /* count, capacity */
	uint64_t peak_kb;           /* largest sample */
	long page_kb;               /* KiB per page */
};

static uint64_t read_rss_kb(struct sampler *sp)
{
	char buf[128];
	ssize_t k = pread(sp->fd, buf, sizeof(buf) - 1, 0);
	if (k <= 0)
		return 0;
	buf[k] = 0;
	unsigned long long size, res;
	if (sscanf(buf, "%llu %llu", &size, &res) != 2)
		return 0;
	return res * (uint64_t)sp->page_kb;
}

/* The process's peak resident set in KiB: VmHWM of /proc/self/status,
 * else (no /proc) ru_maxrss.  The kernel keeps its RSS counters per CPU;
 * getrusage reads them approximately and /proc exactly (Linux 6.18 here),
 * so ru_maxrss lagged the sampled RSS by up to 500 KiB (tests/progs/churn
 * 300: in every run).  Read with read(2) into the stack: no stdio, nothing
 * from the allocator under test. */
static uint64_t peak_rss_kb(void)
{
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		size_t got = 0;
		ssize_t k;
		while (got < sizeof(buf) - 1 &&
		       (k = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
			got += (size_t)k;
		close(fd);
		buf[got] = 0;
		const char *p = strstr(buf, "\nVmHWM:");
		if (p)
			return strtoull(p + 7, NULL, 10);
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_maxrss;
}

static void sample(struct sampler *sp)
{
	uint64_t kb = read_rss_kb(sp);
	if (kb > sp->peak_kb)
		sp->peak_kb = kb;
	if (sp->n == sp->cap) {
		/* full: keep every other sample, sample half as often */
		for (uint32_t i = 0; i < sp->n / 2; i++)
			sp->s[i] = sp->s[2 * i];
		sp->n /= 2;
		sp->interval_ns *= 2;
	}
	sp->s[sp->n].ms = (uint32_t)((ht_clock_ns() - sp->t0) / 1000000);
	sp->s[sp->n].kb = (uint32_t)kb;
	sp->n++;
}

/* sampler.go: parked before the run, sampling, asked to stop, stopped
 * (parked again), asked to leave. */
enum { SP_PARKED, SP_RUN, SP_STOP, SP_STOPPED, SP_QUIT };

static void sampler_set(struct sampler *sp, uint32_t st)
{
	atomic_store_explicit(&sp->go, st, memory_order_release);
	futex(&sp->go, FUTEX_WAKE_PRIVATE, INT_MAX);
}

/* Until sp->go is past st. */
static uint32_t sampler_wait(struct sampler *sp, uint32_t st)
{
	uint32_t v;
	while ((v = atomic_load_explicit(&sp->go, memory_order_acquire)) == st)
		futex(&sp->go, FUTEX_WAIT_PRIVATE, st);
	return v;
}

/* Created before the start readings (its stack, its first read of statm
 * are the process's, not the run's), parked until the run starts; at its
 * end it parks again, and leaves only after the end readings: a thread's
 * exit runs code of glibc's (its tcache and TLS freed) that nothing had
 * run before, whose pages (fault-around maps them 16 at a time) were 128
 * KiB of a 0-op workload's Max RSS growth. */
static void *sampler_main(void *arg)
{
	struct sampler *sp = arg;
	/* the stack a sample takes, the code of its loop and the first page
	 * of the samples, touched now, before the start readings (which wait
	 * for it: done after them, its page faults were 68 KiB of a 0-op
	 * workload's Max RSS growth in some runs) */
	(void)read_rss_kb(sp);
	struct timespec past = {0, 0};
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &past, NULL);
	sp->s[0].ms = (uint32_t)(ht_clock_ns() - sp->t0);
	sp->s[0].kb = 0;
	atomic_store_explicit(&sp->warm, 1, memory_order_release);
	futex(&sp->warm, FUTEX_WAKE_PRIVATE, INT_MAX);
	if (sampler_wait(sp, SP_PARKED) == SP_QUIT)
		return NULL;
	uint64_t next = sp->t0;
	while (atomic_load(&sp->go) == SP_RUN) {
		sample(sp);
		next += sp->interval_ns;
		struct timespec ts = {(time_t)(next / 1000000000ull), (long)(next % 1000000000ull)};
		/* until the next sample or the end of the run, whichever comes
		 * first (sampler_set wakes the word): a sleep to the next sample
		 * kept replay waiting that long after the run, an hour with
		 * --rss-interval=1h (probe R).  An absolute CLOCK_MONOTONIC
		 * time, as FUTEX_WAIT_BITSET takes it. */
		while (atomic_load_explicit(&sp->go, memory_order_acquire) == SP_RUN &&
		       !(syscall(SYS_futex, &sp->go, FUTEX_WAIT_BITSET_PRIVATE, SP_RUN, &ts, NULL,
				 FUTEX_BITSET_MATCH_ANY) < 0 &&
			 errno == ETIMEDOUT))
			;
	}
	sampler_set(sp, SP_STOPPED);
	while (sampler_wait(sp, SP_STOPPED) != SP_QUIT)
		;
	return NULL;
}

/* ---- the run ---- */


static void percentiles(const uint64_t *hist, uint64_t total, uint64_t *out)
{
	for (int k = 0; k < HT_NPCT; k++) {
		uint64_t want = (uint64_t)((double)total * ht_replay_pcts[k] / 100.0 + 0.999999);
		if (want == 0)
			want = 1;
		uint64_t acc = 0;
		out[k] = 0;
		for (unsigned b = 0; b < NBUCKETS && total; b++) {
			acc += hist[b];
			if (acc >= want) {
				out[k] = bucket_value(b);
				break;
			}
		}
	}
}

/* Sorts a[0..n) in place: heapsort, O(n log n) whatever the order and
 * without memory of its own (the allocator under test sees nothing of it). */
static void sort_u64(uint64_t *a, uint64_t n)
{
	if (n < 2)
		return;
	/* first the heap (start from n/2 - 1 down), then the extractions */
	for (uint64_t start = n / 2, end = n;;) {
		uint64_t root;
		if (start > 0) {
			root = --start;
		} else {
			if (--end == 0)
				return;
			uint64_t t = a[end];
			a[end] = a[0];
			a[0] = t;
			root = 0;
		}
		/* sift a[root] down within a[0..end) */
		uint64_t v = a[root];
		for (uint64_t c; (c = 2 * root + 1) < end; root = c) {
			if (c + 1 < end && a[c + 1] > a[c])
				c++;
			if (a[c] <= v)
				break;
			a[root] = a[c];
		}
		a[root] = v;
	}
}

/* The counts other threads wait for, per thread, ascending. */
static int index_waits(struct engine *g)
{
	const struct ht_workload *w = g->w;
	uint32_t n = w->nthreads;
	uint64_t total = 0;
	uint64_t *cnt = map_zero(n * sizeof(uint64_t));
	if (!cnt)
		return -1;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < n; i++) {
			const uint8_t *p = w->threads[i].ops, *end = p + w->threads[i].nbytes;
			uint64_t a[HT_WL_MAX_ARGS];
			int op;
			while ((op = ht_wl_decode(&p, end, a))) {
				if (op != HT_WL_WAIT)
					continue;
				if (pass == 0) {
					cnt[a[0]]++;
					total++;
				} else {
					struct rthread *o = &g->t[a[0]];
					((uint64_t *)o->pub)[o->npub++] = a[1];
				}
			}
		}
		if (pass == 0) {
			g->pubs_len = (total ? total : 1) * sizeof(uint64_t);
			g->pubs = map_zero(g->pubs_len);
			if (!g->pubs)
				return -1;
			uint64_t off = 0;
			for (uint32_t i = 0; i < n; i++) {
				g->t[i].pub = g->pubs + off;
				off += cnt[i];
			}
		}
	}
	munmap(cnt, n * sizeof(uint64_t));
	for (uint32_t i = 0; i < n; i++) {
		/* sort and drop duplicates.  Each waiter's counts ascend, so a
		 * thread only one other thread waits for has them in order
		 * already; two or more waiters' lists come one after the other,
		 * interleaved in value, where an insertion sort moved each count
		 * past half the other list (a producer with two consumers of
		 * 400,000 blocks: 6 s before a 0.2 s run) */
		uint64_t *a = (uint64_t *)g->t[i].pub;
		uint64_t m = g->t[i].npub, k = 0, up = 1;
		while (up < m && a[up - 1] <= a[up])
			up++;
		if (up < m)
			sort_u64(a, m);
		for (uint64_t x = 0; x < m; x++)
			if (!k || a[k - 1] != a[x])
				a[k++] = a[x];
		g->t[i].npub = k;
	}
	return 0;
}

static void reset_threads(struct engine *g)
{
	for (uint32_t i = 0; i < g->w->nthreads; i++) {
		struct rthread *t = &g->t[i];
		atomic_store(&t->progress, 0);
		t->p = t->start;
		t->done = 0;
		t->ipub = 0;
		t->since_trim = 0;
	}
}

/* Between repetitions: what the workload left allocated goes (untimed). */
static void release_leftovers(struct engine *g)
{
	for (uint64_t s = 0; s < g->w->nslots; s++) {
		if (!g->slots[s])
			continue;
		if (g->extent && g->extent[s]) {
			if (!(g->extent[s] >> 63))
				munmap(g->slots[s], g->extent[s]);
			g->extent[s] = 0;
		} else {
			free(g->slots[s]);
		}
		g->slots[s] = NULL;
		g->size[s] = 0;
	}
	atomic_store(&g->lc.live, 0); /* (its peak stays: over every run) */
}

/* The engine's code, read a byte a page before the start readings: its
 * pages are mapped at their first use, 64 KiB around it at a time
 * (fault-around), and a 0-op workload's run grew Max RSS by up to 356 KiB
 * of nothing but the code that runs it. */
static void warm_code(void)
{
	const uintptr_t fns[] = {(uintptr_t)live_peak_up,  (uintptr_t)read_rss_kb,
				 (uintptr_t)sample,	   (uintptr_t)release_leftovers,
				 (uintptr_t)peak_rss_kb,   (uintptr_t)fold_small,
				 (uintptr_t)sampler_main,  (uintptr_t)wait_for,
				 (uintptr_t)release,	   (uintptr_t)run_ops,
				 (uintptr_t)thread_run,	   (uintptr_t)worker_main,
				 (uintptr_t)run_serial,	   (uintptr_t)percentiles,
				 (uintptr_t)ht_replay__run, (uintptr_t)account_long,
				 (uintptr_t)getv_long};
	uintptr_t lo = UINTPTR_MAX, hi = 0, page = (uintptr_t)sysconf(_SC_PAGESIZE);
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		lo = fns[i] < lo ? fns[i] : lo;
		hi = fns[i] > hi ? fns[i] : hi;
	}
	if (hi - lo <= (4u << 20)) /* (else not one stretch of text: left alone) */
		for (uintptr_t a = lo & ~(page - 1); a <= hi + 16 * page; a += page)
			(void)*(volatile const char *)a;
	/* and what of the C library and of common/ the run calls first */
	_Atomic uint32_t word = 0;
	futex(&word, FUTEX_WAKE_PRIVATE, 1);
	(void)ht_clock_ns();
	(void)tsc();
}

int ht_replay__run(const struct ht_workload *w, const struct ht_replay_config *cfg,
		   struct ht_replay_result *res, struct ht_rss_sample **rss)
{
	int ret = -1;
	struct engine g = {.w = w, .cfg = cfg, .page = sysconf(_SC_PAGESIZE)};
	struct sampler sp = {.fd = -1};
	pthread_t spt;
	int sampling = 0;
	size_t tlen = w->nthreads * sizeof(struct rthread);
	size_t flen = (size_t)w->nthreads * HT_FN_NR * sizeof(struct fnstat);
	size_t slen = (w->nslots ? w->nslots : 1) * sizeof(void *);
	memset(res, 0, sizeof(*res));
	*rss = NULL;
	g.touch = !cfg->touch || !strcmp(cfg->touch, "page") ? HT_TOUCH_PAGE
		  : !strcmp(cfg->touch, "none")		      ? HT_TOUCH_NONE
							      : HT_TOUCH_ALL;
	g.t = map_zero(tlen);
	struct fnstat *fn = map_zero(flen);
	g.slots = map_zero(slen);
	g.size = map_zero(slen);
	g.lc.shared = !cfg->threads_as_one && w->nthreads > 1;
	g.lc.slack = g.lc.shared ? LIVE_SLACK : 0;
	if (w->flags & HT_WL_F_MMAP)
		g.extent = map_zero((w->nslots ? w->nslots : 1) * sizeof(uint64_t));
	if (!g.t || !fn || !g.slots || !g.size || ((w->flags & HT_WL_F_MMAP) && !g.extent)) {
		ht_error("replay: cannot map memory for %llu slots and %u threads",
			 (unsigned long long)w->nslots, w->nthreads);
		goto out;
	}
	for (uint32_t i = 0; i < w->nthreads; i++) {
		struct rthread *t = &g.t[i];
		t->idx = i;
		t->start = t->p = w->threads[i].ops;
		t->end = t->start + w->threads[i].nbytes;
		t->nops = w->threads[i].nops;
		t->fn = fn + (size_t)i * HT_FN_NR;
	}
	if (index_waits(&g)) {
		ht_error("replay: out of memory indexing the waits");
		goto out;
	}
	if (!cfg->no_mlock) {
		/* the engine's own memory stays out of the measurement */
		if (mlock(w->map, w->map_len) || mlock(g.slots, slen) || mlock(g.size, slen) ||
		    mlock(g.t, tlen) ||
		    mlock(fn, flen) || mlock(g.pubs, g.pubs_len))
			ht_warning("replay: cannot lock the workload and the slot table in memory (%s); "
				   "their page faults may land in the measurement: raise 'ulimit -l' or "
				   "pass --no-mlock to silence this",
				   strerror(errno));
	}
	/* RSS sampler: created now, parked until the run starts, so that
	 * its thread (stack, TLS) is in the start readings as the workers'
	 * are; a 0-op workload's Max RSS grew by 228 to 432 KiB when it was
	 * created after them */
	sp.page_kb = g.page / 1024;
	sp.cap = 1u << 16;
	sp.s = map_zero(sp.cap * sizeof(*sp.s));
	sp.interval_ns = cfg->rss_interval_ns ? cfg->rss_interval_ns : 10000000;
	sp.fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (sp.fd >= 0 && sp.s && pthread_create(&spt, NULL, sampler_main, &sp) == 0) {
		sampling = 1;
		while (!atomic_load_explicit(&sp.warm, memory_order_acquire))
			futex(&sp.warm, FUTEX_WAIT_PRIVATE, 0);
	}
	current = &g;
	glibc_malloc_setup();
	if (!cfg->threads_as_one) {
		/* before the start readings: their stacks are in Max RSS's start */
		int err = start_workers(&g);
		if (err) {
			ht_error("replay: cannot create thread %u of %u: %s", g.nstarted + 1,
				 w->nthreads - 1, strerror(err));
			goto out;
		}
	}

	warm_code();
	struct rusage ru0, ru1;
	getrusage(RUSAGE_SELF, &ru0);
	res->maxrss_start_kb = peak_rss_kb();
	res->rss_start_kb = sp.fd >= 0 ? read_rss_kb(&sp) : 0;
	/* (as at the end: VmHWM comes from the kernel's approximate counters
	 * and can be below the exact RSS by a few dozen pages; a start below
	 * the truth made a 0-op workload's growth 72 to 160 KiB in some runs,
	 * most of them on a busy machine, against 4) */
	if (res->maxrss_start_kb < res->rss_start_kb)
		res->maxrss_start_kb = res->rss_start_kb;
	sp.t0 = ht_clock_ns();
	sampler_set(&sp, SP_RUN);
	uint64_t ns0 = ht_clock_ns();
	uint64_t c0 = tsc();
	int repeat = cfg->repeat > 0 ? cfg->repeat : 1;
	for (int rep = 0; rep < repeat; rep++) {
		if (rep) {
			release_leftovers(&g);
			reset_threads(&g);
		}
		g.gen = (uint32_t)rep + 1;
		if (cfg->threads_as_one) {
			run_serial(&g);
		} else {
			thread_run(&g, &g.t[0]);
			await_workers(&g);
		}
	}
	/* the end: the last op's end, read by the thread that made it (not
	 * when this thread learns of it) */
	uint64_t c1 = tsc();
	uint64_t ns1 = ht_clock_ns();
	if (!cfg->threads_as_one) {
		const struct rthread *last = &g.t[0];
		for (uint32_t i = 1; i < w->nthreads; i++)
			if (g.t[i].t_end > last->t_end)
				last = &g.t[i];
		c1 = last->t_end;
		ns1 = last->ns_end;
	}
	getrusage(RUSAGE_SELF, &ru1);
	if (sampling) {
		sampler_set(&sp, SP_STOP);
		sampler_wait(&sp, SP_STOP);
		sample(&sp); /* the end state */
	}

	res->cycles = c1 - c0;
	res->wall_usec = (ns1 - ns0) / 1000;
	res->tsc_per_ns = ns1 > ns0 ? (double)(c1 - c0) / (double)(ns1 - ns0) : 0;
	res->user_usec = (uint64_t)((ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) * 1000000 +
				    (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec));
	res->sys_usec = (uint64_t)((ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1000000 +
				   (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec));
	res->rss_peak_kb = sp.peak_kb;
	/* the kernel raises VmHWM from its approximate counters (when memory
	 * is unmapped), so a sample, exact, can be above it by a few dozen
	 * pages: the peak is at least what was seen */
	res->maxrss_end_kb = peak_rss_kb();
	if (res->maxrss_end_kb < res->rss_peak_kb)
		res->maxrss_end_kb = res->rss_peak_kb;
	res->ideal_bytes = w->ideal_peak_bytes;
	res->live_peak_bytes = (uint64_t)atomic_load(&g.lc.peak);
	res->live_slack_bytes = g.lc.shared ? (uint64_t)LIVE_SLACK * w->nthreads : 0;
	res->nthreads = w->nthreads;
	res->repeat = (uint32_t)repeat;
	static uint64_t hist[NBUCKETS];
	for (uint32_t i = 0; i < w->nthreads; i++) {
		fold_small(g.t[i].small[0], &g.t[i].fn[HT_FN_MALLOC]);
		fold_small(g.t[i].small[1], &g.t[i].fn[HT_FN_FREE]);
	}
	for (int f = 0; f < HT_FN_NR; f++) {
		memset(hist, 0, sizeof(hist));
		for (uint32_t i = 0; i < w->nthreads; i++) {
			const struct fnstat *s = &g.t[i].fn[f];
			res->call_cycles[f] += s->cycles;
			for (unsigned b = 0; b < NBUCKETS; b++) {
				hist[b] += s->hist[b];
				res->calls[f] += s->hist[b];
			}
		}
		percentiles(hist, res->calls[f], res->pct_cycles[f]);
	}
	for (uint32_t i = 0; i < w->nthreads; i++) {
		res->waits += g.t[i].waits;
		res->waits_blocked += g.t[i].waits_blocked;
		res->wait_cycles += g.t[i].wait_cycles;
		res->spawn_wait_cycles += g.t[i].spawn_wait_cycles;
		res->busy_cycles += g.t[i].busy;
		res->trims += g.t[i].trims;
		res->slot_errors += g.t[i].slot_errors;
	}
	res->ops = w->nops * (uint64_t)repeat;
	res->spawn_lends = atomic_load(&g.lends);
	if (sampling && sp.n) {
		*rss = malloc(sp.n * sizeof(**rss));
		if (*rss) {
			memcpy(*rss, sp.s, sp.n * sizeof(**rss));
			res->nrss = sp.n;
		}
		res->rss_interval_us = (uint32_t)(sp.interval_ns / 1000);
	}
	/* what the program never freed goes now, untimed (and out of sight
	 * of LeakSanitizer, which does not look into the mmap'ed slot table) */
	release_leftovers(&g);
	ret = 0;
out:
	stop_workers(&g);
	if (sampling) { /* parked, after the run or before it (a worker not created) */
		sampler_set(&sp, SP_QUIT);
		pthread_join(spt, NULL);
	}
	if (sp.fd >= 0)
		close(sp.fd);
	if (sp.s)
		munmap(sp.s, sp.cap * sizeof(*sp.s));
	if (g.slots)
		munmap(g.slots, slen);
	if (g.size)
		munmap(g.size, slen);
	if (g.extent)
		munmap(g.extent, (w->nslots ? w->nslots : 1) * sizeof(uint64_t));
	if (g.t)
		munmap(g.t, tlen);
	if (fn)
		munmap(fn, flen);
	if (g.pubs)
		munmap(g.pubs, g.pubs_len);
	return ret;
}
