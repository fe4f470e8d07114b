/* One trace read in time slices (slices.h). */
#define _GNU_SOURCE
#include "analyze/slices.h"

#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyze/analyze.h"
#include "analyze/pass.h"
#include "analyze/slicerel.h"
#include "analyze/timeline.h"
#include "common/util.h"
#include "trace/reader_slice.h"

#define MAX_SLICES 64
/* Releases the slices may keep, all together, for the slices before them
 * to tell (32 bytes each, and what each model keeps for them: 56 bytes
 * for stats, 80 for a timeline), with the program's own mapping calls
 * they keep to replay on their mappings (40 bytes each, per model): past
 * this (some 90 MB), the trace is read serially.  A program that frees
 * what it allocated long before (the live set crosses every cut) or
 * frees blocks hidden from the tracer, or maps and unmaps all the time,
 * is read faster so (it was 8.7 s in slices against 1.0 s serially for
 * 3 M blocks allocated, then freed, 940 MB against 300 MB; probe W). */
#define MAX_DEFERRED (1u << 19)

/* The addresses a slice handed out: per 512-byte region of the address
 * space, a bit per 8 bytes (open addressing on key region + 1, the key and
 * its bits in one entry: one cache line an allocation). */
struct addrent {
	uint64_t key, bits;
};

struct addrset {
	struct addrent *e;
	size_t cap, n;
	size_t last; /* the entry of the last region added (allocators hand out
		      * neighbours, and a freed block's address again) */
};

static void addrset_init(struct addrset *a)
{
	a->cap = 1024;
	a->n = 0;
	a->e = ht_xzalloc(a->cap, sizeof(*a->e));
	a->last = 0;
}

static void addrset_free(struct addrset *a)
{
	free(a->e);
}

/* The slot of region k, or the empty one it would take. */
static inline size_t addrset_slot(const struct addrset *a, uint64_t k)
{
	size_t mask = a->cap - 1, j = ht_livemap__hash(k, mask);
	while (a->e[j].key && a->e[j].key != k)
		j = (j + 1) & mask;
	return j;
}

static void addrset_grow(struct addrset *a)
{
	struct addrset b = {ht_xzalloc(2 * a->cap, sizeof(*b.e)), 2 * a->cap, a->n, 0};
	for (size_t i = 0; i < a->cap; i++)
		if (a->e[i].key)
			b.e[addrset_slot(&b, a->e[i].key)] = a->e[i];
	addrset_free(a);
	*a = b;
}

static inline void addrset_add(struct addrset *a, uint64_t p)
{
	uint64_t k = (p >> 9) + 1;
	if (a->e[a->last].key == k) {
		a->e[a->last].bits |= 1ull << ((p >> 3) & 63);
		return;
	}
	size_t j = addrset_slot(a, k);
	if (!a->e[j].key) {
		if (2 * (a->n + 1) > a->cap) {
			addrset_grow(a);
			j = addrset_slot(a, k);
		}
		a->e[j].key = k;
		a->n++;
	}
	a->e[j].bits |= 1ull << ((p >> 3) & 63);
	a->last = j;
}

static inline int addrset_has(const struct addrset *a, uint64_t p)
{
	size_t j = addrset_slot(a, (p >> 9) + 1);
	return a->e[j].key && (a->e[j].bits >> ((p >> 3) & 63) & 1);
}

struct slice {
	const char *path;
	const struct ht_trace_info *in; /* the whole trace's (its reader's) */
	uint64_t lo, hi;		/* its events' timestamps: [lo, hi); hi 0: to the end */
	int first;			/* the slice that starts the trace */
	struct ht_reader *r;		/* its reader */
	struct ht_pass *pass;
	const struct ht_slices_want *want;
	struct ht_stats_slice *st;     /* the models it feeds (NULL: not wanted) */
	struct ht_timeline_slice *tl;
	struct ht_slice_release *rel;  /* the releases it could not place, in order */
	size_t nrel, caprel;
	struct addrset handed;	 /* what it handed out (not kept for the first) */
	_Atomic uint64_t events; /* read so far (progress) */
	_Atomic uint64_t done_bytes;
	size_t kept;     /* releases and mapping calls kept, as last counted */
	const char *why; /* why it cannot be used: read serially */
	pthread_t th;
};

static _Atomic int stop_all; /* a slice failed: the others stop */
static _Atomic size_t kept_all; /* MAX_DEFERRED's count: every slice's */
static _Atomic unsigned running;
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;

static void read_slice(struct slice *sl)
{
	char err[512];
	sl->r = ht_reader__open_info(sl->path, err, sizeof(err));
	if (!sl->r) {
		sl->why = "cannot open it again";
		return;
	}
	if (ht_reader__start_at(sl->r, sl->lo) < 0) {
		sl->why = "a SYNC record cannot be read";
		return;
	}
	sl->pass = ht_pass__new();
	ht_pass__check_order(sl->pass, sl->r); /* (its counts: ht_reader__slices_done) */
	if (sl->want->stats)
		sl->st = ht_stats__slice_new(sl->in, sl->first);
	if (sl->want->timeline &&
	    !(sl->tl = ht_timeline__slice_new(sl->want->timeline, sl->first))) {
		sl->why = "out of memory";
		return;
	}
	if (!sl->first)
		addrset_init(&sl->handed);
	uint64_t n = 0;
	const struct ht_event *e;
	while ((e = ht_reader__next_event(sl->r))) {
		if (e->ts < sl->lo)
			continue;
		if (sl->hi && e->ts >= sl->hi)
			break;
		if (e->kind == HT_EV_CONTROL) {
			sl->why = "a control event (pause, reset...)";
			return;
		}
		const struct ht_blockop *op = ht_pass__event(sl->pass, e);
		int deferred = 0;
		if (!sl->first) {
			if (op->releases && !op->released) {
				/* a block from before, or an unknown free: told
				 * when the slices are added */
				deferred = 1;
				uint64_t p = op->released_ptr;
				sl->rel =
				    ht_grow(sl->rel, &sl->caprel, sl->nrel + 1, sizeof(*sl->rel));
				sl->rel[sl->nrel++] = (struct ht_slice_release){
				    .ptr = p,
				    .time_ns = e->time_ns,
				    .tid = e->tid,
				    .thread = op->thread,
				    .is_free = e->kind == HT_EV_FREE,
				    .reused = p && addrset_has(&sl->handed, p)};
			}
			if (op->acquired)
				addrset_add(&sl->handed, op->acquired->ptr);
		}
		if (sl->st)
			ht_stats__slice_event(sl->st, e, op, deferred);
		if (sl->tl)
			ht_timeline__slice_event(sl->tl, e, op, deferred);
		if (__builtin_expect((++n & 0xffff) == 0, 0)) {
			uint64_t done, total;
			ht_reader__progress(sl->r, &done, &total);
			atomic_store_explicit(&sl->events, n, memory_order_relaxed);
			atomic_store_explicit(&sl->done_bytes, done, memory_order_relaxed);
			if (atomic_load(&stop_all))
				return;
			size_t kept = sl->nrel + (sl->st ? ht_stats__slice_kept(sl->st) : 0) +
				      (sl->tl ? ht_timeline__slice_kept(sl->tl) : 0);
			size_t all = atomic_fetch_add(&kept_all, kept - sl->kept) + kept - sl->kept;
			sl->kept = kept;
			if (all > MAX_DEFERRED) {
				sl->why = "too many releases of blocks from before a cut, or "
					  "mapping calls, to keep";
				return;
			}
		}
	}
	atomic_store_explicit(&sl->events, n, memory_order_relaxed);
	/* the serial order is a sort by time only where no thread's times go
	 * back: a timestamp the reader raised says they did (those of the
	 * events before lo count too) */
	if (!sl->why && ht_reader__ts_raised(sl->r))
		sl->why = "a thread's times go back";
	if (ht_reader__error(sl->r) || ht_reader__warning(sl->r))
		sl->why = "a warning or an error while reading it (said when read serially)";
}

static void *slice_main(void *arg)
{
	struct slice *sl = arg;
	read_slice(sl);
	if (sl->why)
		atomic_store(&stop_all, 1);
	pthread_mutex_lock(&done_lock);
	running--;
	pthread_cond_signal(&done_cond);
	pthread_mutex_unlock(&done_lock);
	return NULL;
}

static void slice_free(struct slice *sl)
{
	ht_pass__delete(sl->pass); /* (before its reader: pass.h) */
	ht_reader__close(sl->r);
	ht_stats__slice_delete(sl->st);
	ht_timeline__slice_delete(sl->tl);
	free(sl->rel);
	if (!sl->first && sl->handed.e)
		addrset_free(&sl->handed);
}

uint64_t ht_slices__min_events(void)
{
	const char *e = getenv("HEAPTRAIL_SLICE_MIN_EVENTS");
	char *end;
	if (e && *e) {
		unsigned long long v = strtoull(e, &end, 10);
		if (!*end)
			return v;
	}
	return HT_SLICE_MIN_EVENTS;
}

/* Every block of from into carry, which is first made big enough for both
 * and at least as big as from: put in from's slot order into a smaller
 * table, the blocks of one stretch of from land in one stretch of it,
 * and the probing grows long clusters (3 M live blocks: 7.4 s, probe W). */
static void carry_all(struct ht_livemap *carry, const struct ht_livemap *from)
{
	size_t cap = carry->cap;
	while ((carry->count + from->count) * 4 > cap * 3 || cap < from->cap)
		cap *= 2;
	if (cap != carry->cap)
		ht_livemap__rehash(carry, cap);
	for (size_t i = 0; i < from->cap; i++)
		if (from->slots[i].ptr)
			ht_livemap__put(carry, &from->slots[i]);
}

/* Adds the slices, in order, into the models of the first (into g); -1
 * if one cannot be placed. */
static int add_up(struct slice *sv, unsigned k, struct ht_reader *r, struct ht_slices_got *g)
{
	struct ht_livemap carry;
	ht_pass__take_live(sv[0].pass, &carry); /* (the first's models are done with them) */
	struct ht_order_info sum = {0};
	uint64_t released_live = 0;
	int ret = 0;
	g->stats = sv[0].st ? ht_stats__slice_take(sv[0].st) : NULL;
	g->timeline = sv[0].tl ? ht_timeline__slice_take(sv[0].tl) : NULL;
	for (unsigned i = 0; i < k && !ret; i++) {
		struct ht_order_info o;
		ht_reader__order(sv[i].r, &o);
		sum.anomalies += o.anomalies;
		if (!i)
			continue;
		/* what its releases released: blocks live at the end of the
		 * slices before, taken out of the carried ones */
		struct slice *sl = &sv[i];
		struct ht_block *b = ht_xcalloc(sl->nrel ? sl->nrel : 1, sizeof(*b));
		for (size_t j = 0; j < sl->nrel && !ret; j++) {
			const struct ht_slice_release *d = &sl->rel[j];
			if (!d->ptr || !ht_livemap__del(&carry, d->ptr, &b[j]))
				continue; /* unknown in the serial pass too */
			if (d->reused)
				ret = -1; /* handed out while live, then freed: not placed here */
			released_live++;
		}
		/* a block from before that the slice handed out again without
		 * freeing it first: the serial pass replaced it there (an
		 * address handed out while live), which the slices cannot place */
		for (size_t j = 0; j < carry.cap && !ret; j++)
			if (carry.slots[j].ptr && addrset_has(&sl->handed, carry.slots[j].ptr))
				ret = -1;
		if (!ret) {
			carry_all(&carry, ht_pass__live(sl->pass));
			struct ht_slice_releases rs = {sl->rel, b, sl->nrel};
			if (g->stats)
				ht_stats__slice_add(g->stats, sl->st, &rs);
			if (g->timeline)
				ht_timeline__slice_add(g->timeline, sl->tl, &rs);
		}
		free(b);
	}
	ht_livemap__free(&carry);
	if (ret) {
		ht_stats__delete(g->stats);
		ht_timeline__delete(g->timeline);
		*g = (struct ht_slices_got){0};
		return -1;
	}
	ht_reader__slices_done(r, &sum, released_live);
	return 0;
}

unsigned ht_slices__wanted(void)
{
	/* -j N: N slices; by default, one per CPU (the slices pay where
	 * decoding threads alone did not: docs/FORMAT.md, "Time slices") */
	return ht_reader__threads_given() ? ht_reader__threads_wanted() : ht_reader__cpus();
}

/* HEAPTRAIL_SLICE_NOTE=1 (the tests): how the trace was read, on stderr
 * (in slices: the records each of sv read; else why not); -1 returned for
 * the caller to read it serially when not ok. */
static int note(int ok, unsigned k, const char *why, struct slice *sv)
{
	if (!getenv("HEAPTRAIL_SLICE_NOTE"))
		return ok ? 0 : -1;
	if (!ok) {
		fprintf(stderr, "heaptrail: note: read serially: %s\n", why);
		return -1;
	}
	fprintf(stderr, "heaptrail: note: read in %u time slices (records read:", k);
	for (unsigned i = 0; i < k; i++)
		fprintf(stderr, " %llu",
			(unsigned long long)atomic_load_explicit(&sv[i].events,
								 memory_order_relaxed));
	fprintf(stderr, ")\n");
	return 0;
}

int ht_slices__read(const char *path, struct ht_reader *r, const struct ht_slices_want *w,
		    struct ht_slices_got *g)
{
	*g = (struct ht_slices_got){0};
	unsigned k = ht_slices__wanted();
	if (k > MAX_SLICES)
		k = MAX_SLICES;
	if (k < 2)
		return -1;
	if (!ht_reader__sliceable(r, ht_slices__min_events()))
		return note(0, k, "the trace does not suit", NULL);
	if (ht_reader__stacks_seen(r) != 0)
		return note(0, k, "a trace with stacks", NULL);
	if (w->timeline && !ht_timeline__sliceable(w->timeline))
		return note(0, k, "a part of the trace (--from, --to)", NULL);
	uint64_t cut[MAX_SLICES];
	unsigned ncut = ht_reader__cut_times(r, k, cut);
	if (!ncut)
		return note(0, k, "no chunk to cut at", NULL);
	k = ncut + 1;

	struct slice *sv = ht_xcalloc(k, sizeof(*sv));
	atomic_store(&stop_all, 0);
	atomic_store(&kept_all, 0);
	running = k;
	unsigned started = 0;
	for (unsigned i = 0; i < k; i++) {
		sv[i] = (struct slice){.path = path,
				       .in = ht_reader__info(r),
				       .lo = i ? cut[i - 1] : 0,
				       .hi = i + 1 < k ? cut[i] : 0,
				       .first = i == 0,
				       .want = w};
		if (pthread_create(&sv[i].th, NULL, slice_main, &sv[i]) != 0)
			break;
		started++;
	}
	/* progress on a terminal, from the slices' counts */
	uint64_t total, done;
	ht_reader__progress(r, &done, &total);
	pthread_mutex_lock(&done_lock);
	running -= k - started;
	while (running) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_cond_timedwait(&done_cond, &done_lock, &ts) == ETIMEDOUT) {
			uint64_t ev = 0;
			done = 0;
			for (unsigned i = 0; i < started; i++) {
				ev += atomic_load_explicit(&sv[i].events, memory_order_relaxed);
				done +=
				    atomic_load_explicit(&sv[i].done_bytes, memory_order_relaxed);
			}
			ht_progress("reading", done < total ? done : total, total, ev, "events");
		}
	}
	pthread_mutex_unlock(&done_lock);
	ht_progress_done();
	int ok = started == k;
	for (unsigned i = 0; i < started; i++) {
		pthread_join(sv[i].th, NULL);
		if (sv[i].why)
			ok = 0;
	}
	const char *why = started < k ? "a thread could not be started"
				      : "an address was handed out while live across a cut";
	for (unsigned i = 0; i < started; i++)
		if (sv[i].why)
			why = sv[i].why;
	int ret = note(ok && add_up(sv, k, r, g) == 0, k, why, sv);
	for (unsigned i = 0; i < started; i++)
		slice_free(&sv[i]);
	free(sv);
	return ret;
}

struct ht_stats *ht_slices__stats(const char *path, struct ht_reader *r)
{
	struct ht_slices_want w = {.stats = 1};
	struct ht_slices_got g;
	return ht_slices__read(path, r, &w, &g) == 0 ? g.stats : NULL;
}
