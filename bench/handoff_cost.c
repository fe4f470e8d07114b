/*
 * handoff_cost — what one hand-off between two threads costs, by scheme.
 *
 *   handoff_cost [MODE [ROUNDS [BLOCK]]]
 *
 * Two threads run ROUNDS rounds each (default 100000), in the pattern of
 * tests/progs/handoff.c: in round k a thread sends the other one a value,
 * then receives the value the other thread sent in its round k.  So both
 * threads run at once, each at most one round ahead of the other, and there
 * are 2 x ROUNDS hand-offs.  With BLOCK > 0 the value is a block of BLOCK
 * bytes that the sender mallocs and writes and the receiver checks and
 * frees (exactly handoff.c's heap pattern); with BLOCK 0 (the default) it is
 * a plain number, so that only the synchronization is measured.  Every
 * received value goes through a volatile sink and is checked, so nothing
 * can be optimized away.
 *
 * MODE (default "all": each of them, in this order):
 *   mutex    a pthread mutex + condition variable pair per hand-off (the
 *            scheme of glibc's trace_run): the sender locks the hand-off's
 *            mutex, stores the value, sets its flag, signals, unlocks; the
 *            receiver locks it and waits on the condvar until the flag is
 *            set.  The 2 x ROUNDS pairs are initialized before timing.
 *   mutex1   the same with one mutex + condvar pair per direction, reused
 *            (a round counter under the mutex): how much of "mutex" is the
 *            fresh pair's memory rather than the locking.
 *   counter  heaptrail replay's scheme (src/replay/engine.c, publish() and
 *            wait_for()): the sender stores the value in a mailbox, then its
 *            round count into an atomic counter (seq_cst), and wakes the
 *            futex only if a receiver is asleep; the receiver reads the
 *            counter with acquire, spins up to 4000 pauses, then sleeps on
 *            the futex.
 *
 * Timing: the threads start together (both spin on a start line); each reads
 * CLOCK_MONOTONIC around its loop; wall_ns is the earliest start to the
 * latest end.  ns_per_handoff = wall_ns / ROUNDS: the time each thread
 * spends per hand-off it receives (its share of the run, like the replay's
 * "wall x threads / waits"); the rate of the pair is twice that.
 *
 * Output, one line per mode on stdout:
 *   mode=<m> rounds=<n> handoffs=<2n> block=<b> wall_ns=<ns>
 *   ns_per_handoff=<x> blocked=<receives that found the value not there yet>
 *   sleeps=<receives that slept: cond_wait or futex wait>
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

enum mode { M_MUTEX, M_MUTEX1, M_COUNTER, M_NR };
static const char *const mode_names[M_NR] = {"mutex", "mutex1", "counter"};

/* mutex: one per hand-off, [thread][round] */
struct hs {
	pthread_mutex_t m;
	pthread_cond_t c;
	int ready;
	uintptr_t v;
};

/* mutex1: one per direction */
struct chan1 {
	_Alignas(64) pthread_mutex_t m;
	pthread_cond_t c;
	uint64_t sent; /* rounds sent */
	uintptr_t v[2]; /* by round parity: the sender can be one round ahead */
};

/* counter: the engine's rthread head, one cache line per thread */
struct chanc {
	_Alignas(64) _Atomic uint64_t progress; /* rounds sent */
	_Atomic uint32_t sleepers;
	_Atomic uint32_t wake;
};

static enum mode mode;
static uint64_t rounds;
static size_t block;
static struct hs *hs;          /* 2 * rounds */
static struct chan1 ch1[2];
static struct chanc chc[2];
static uintptr_t *mbox;        /* counter: 2 * rounds values */
static _Atomic int arrived;    /* start line: both threads spin here */

struct worker {
	int me;
	uint64_t t_begin, t_end;
	uint64_t blocked, sleeps;
	uintptr_t volatile sink; /* every received value lands here */
} __attribute__((aligned(64)));

static struct worker workers[2];

static uint64_t clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
	return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	_mm_pause();
#endif
}

/* ---- counter: engine.c's publish() and wait_for() ---- */

static inline void counter_send(struct chanc *c, uint64_t count)
{
	/* seq_cst: the store must be visible before sleepers is read */
	atomic_store(&c->progress, count);
	if (atomic_load(&c->sleepers)) {
		atomic_fetch_add(&c->wake, 1);
		futex(&c->wake, FUTEX_WAKE_PRIVATE, INT_MAX);
	}
}

static inline void counter_wait(struct worker *w, struct chanc *o, uint64_t count)
{
	if (atomic_load_explicit(&o->progress, memory_order_acquire) >= count)
		return;
	w->blocked++;
	for (int i = 0; i < 4000; i++) {
		cpu_relax();
		if (atomic_load_explicit(&o->progress, memory_order_acquire) >= count)
			return;
	}
	w->sleeps++;
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
}

/* ---- the rounds ---- */

static inline uintptr_t make_value(uint64_t k, int me)
{
	if (!block)
		return (uintptr_t)((k << 1) | (uint64_t)me) + 1;
	uint64_t *p = malloc(block);
	if (!p)
		return 0;
	*p = k;
	return (uintptr_t)p;
}

static inline int check_value(struct worker *w, uintptr_t v, uint64_t k, int from)
{
	w->sink = v;
	if (!block)
		return v == (uintptr_t)((k << 1) | (uint64_t)from) + 1;
	int ok = v && *(uint64_t *)v == k;
	free((void *)v);
	return ok;
}

/* The other thread would wait for ever: end the process. */
static void fail(int me, const char *what)
{
	fprintf(stderr, "handoff_cost: %s: thread %d: %s\n", mode_names[mode], me, what);
	exit(1);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int me = w->me, other = !me;
	/* A spinning start line, not a sleeping barrier: a thread woken from
	 * a futex on an idle vCPU can start tens of us late, and the first
	 * hand-offs would measure that wake-up rather than the scheme. */
	atomic_fetch_add(&arrived, 1);
	while (atomic_load(&arrived) < 2)
		cpu_relax();
	w->t_begin = clock_ns();
	for (uint64_t k = 0; k < rounds; k++) {
		uintptr_t v = make_value(k, me), r;
		if (!v)
			fail(me, "malloc failed");
		switch (mode) {
		case M_MUTEX: {
			struct hs *s = &hs[(uint64_t)me * rounds + k];
			pthread_mutex_lock(&s->m);
			s->v = v;
			s->ready = 1;
			pthread_cond_signal(&s->c);
			pthread_mutex_unlock(&s->m);
			s = &hs[(uint64_t)other * rounds + k];
			pthread_mutex_lock(&s->m);
			if (!s->ready) {
				w->blocked++;
				do {
					w->sleeps++;
					pthread_cond_wait(&s->c, &s->m);
				} while (!s->ready);
			}
			r = s->v;
			pthread_mutex_unlock(&s->m);
			break;
		}
		case M_MUTEX1: {
			struct chan1 *c = &ch1[me];
			pthread_mutex_lock(&c->m);
			c->v[k & 1] = v;
			c->sent = k + 1;
			pthread_cond_signal(&c->c);
			pthread_mutex_unlock(&c->m);
			c = &ch1[other];
			pthread_mutex_lock(&c->m);
			if (c->sent < k + 1) {
				w->blocked++;
				do {
					w->sleeps++;
					pthread_cond_wait(&c->c, &c->m);
				} while (c->sent < k + 1);
			}
			r = c->v[k & 1];
			pthread_mutex_unlock(&c->m);
			break;
		}
		default: /* M_COUNTER */
			mbox[(uint64_t)me * rounds + k] = v;
			counter_send(&chc[me], k + 1);
			counter_wait(w, &chc[other], k + 1);
			r = mbox[(uint64_t)other * rounds + k];
			break;
		}
		if (!check_value(w, r, k, other))
			fail(me, "received a wrong value");
	}
	w->t_end = clock_ns();
	return NULL;
}

/* One timed run of a mode; prints its line.  0 or -1. */
static int run_mode(enum mode m)
{
	size_t hs_bytes = 2 * rounds * sizeof(struct hs);
	size_t mbox_bytes = 2 * rounds * sizeof(uintptr_t);
	pthread_t tids[2];

	mode = m;
	/* The sync memory comes from mmap and is initialized (so faulted in)
	 * before timing; the heap sees only BLOCK's mallocs. */
	hs = NULL;
	mbox = NULL;
	if (m == M_MUTEX) {
		hs = mmap(NULL, hs_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (hs == MAP_FAILED) {
			perror("handoff_cost: mmap");
			return -1;
		}
		for (uint64_t i = 0; i < 2 * rounds; i++) {
			pthread_mutex_init(&hs[i].m, NULL);
			pthread_cond_init(&hs[i].c, NULL);
			hs[i].ready = 0;
		}
	} else if (m == M_MUTEX1) {
		for (int i = 0; i < 2; i++) {
			pthread_mutex_init(&ch1[i].m, NULL);
			pthread_cond_init(&ch1[i].c, NULL);
			ch1[i].sent = 0;
		}
	} else {
		mbox = mmap(NULL, mbox_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mbox == MAP_FAILED) {
			perror("handoff_cost: mmap");
			return -1;
		}
		memset(mbox, 0, mbox_bytes);
		memset(chc, 0, sizeof(chc));
	}
	atomic_store(&arrived, 0);
	for (int i = 0; i < 2; i++) {
		memset(&workers[i], 0, sizeof(workers[i]));
		workers[i].me = i;
		int e = pthread_create(&tids[i], NULL, worker_main, &workers[i]);
		if (e) {
			fprintf(stderr, "handoff_cost: pthread_create: %s\n", strerror(e));
			exit(1);
		}
	}
	for (int i = 0; i < 2; i++)
		pthread_join(tids[i], NULL);

	uint64_t t0 = workers[0].t_begin < workers[1].t_begin ? workers[0].t_begin : workers[1].t_begin;
	uint64_t t1 = workers[0].t_end > workers[1].t_end ? workers[0].t_end : workers[1].t_end;
	printf("mode=%s rounds=%" PRIu64 " handoffs=%" PRIu64 " block=%zu wall_ns=%" PRIu64
	       " ns_per_handoff=%.1f blocked=%" PRIu64 " sleeps=%" PRIu64 "\n",
	       mode_names[m], rounds, 2 * rounds, block, t1 - t0, (double)(t1 - t0) / (double)rounds,
	       workers[0].blocked + workers[1].blocked, workers[0].sleeps + workers[1].sleeps);
	fflush(stdout);

	if (hs) {
		for (uint64_t i = 0; i < 2 * rounds; i++) {
			pthread_mutex_destroy(&hs[i].m);
			pthread_cond_destroy(&hs[i].c);
		}
		munmap(hs, hs_bytes);
	}
	if (m == M_MUTEX1) {
		for (int i = 0; i < 2; i++) {
			pthread_mutex_destroy(&ch1[i].m);
			pthread_cond_destroy(&ch1[i].c);
		}
	}
	if (mbox)
		munmap(mbox, mbox_bytes);
	return 0;
}

static int parse_u64(const char *s, const char *what, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
		fprintf(stderr, "handoff_cost: bad %s '%s' (want %" PRIu64 "..%" PRIu64 ")\n", what, s,
			lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: handoff_cost [MODE [ROUNDS [BLOCK]]]\n"
		   "  MODE    mutex, mutex1, counter or all (default all)\n"
		   "  ROUNDS  rounds per thread (default 100000); hand-offs = 2 x ROUNDS\n"
		   "  BLOCK   0: hand off a number (default); N: a malloc'ed block of N bytes,\n"
		   "          freed by the receiver (tests/progs/handoff.c's pattern)\n"
		   "prints per mode: mode=<m> rounds=<n> handoffs=<2n> block=<b> wall_ns=<ns>\n"
		   "  ns_per_handoff=<wall/rounds> blocked=<n> sleeps=<n>\n");
}

int main(int argc, char **argv)
{
	uint64_t n = 100000, b = 0;
	int which = -1, rc = 0;

	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc > 4) {
		usage(stderr);
		return 2;
	}
	if (argc > 1 && strcmp(argv[1], "all")) {
		for (int m = 0; m < M_NR; m++)
			if (!strcmp(argv[1], mode_names[m]))
				which = m;
		if (which < 0) {
			fprintf(stderr, "handoff_cost: unknown mode '%s'\n", argv[1]);
			usage(stderr);
			return 2;
		}
	}
	if ((argc > 2 && parse_u64(argv[2], "ROUNDS", 1, UINT64_C(1) << 32, &n)) ||
	    (argc > 3 && parse_u64(argv[3], "BLOCK", 0, UINT64_C(1) << 24, &b)))
		return 2;
	rounds = n;
	block = (size_t)b;
	for (int m = 0; m < M_NR; m++)
		if ((which < 0 || which == m) && run_mode((enum mode)m))
			rc = 1;
	return rc;
}
