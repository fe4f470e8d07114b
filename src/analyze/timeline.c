/* The heap over time in fixed time bins (timeline.h). */
#define _GNU_SOURCE
#include "timeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/blocks.h"
#include "analyze/export.h"
#include "analyze/marks.h"
#include "analyze/mmranges.h"
#include "analyze/pass.h"
#include "analyze/readto.h"
#include "analyze/slicerel.h"
#include "common/json.h"
#include "common/markup.h"
#include "common/util.h"

/* The level series, in the order of every output. */
enum { S_LIVE, S_USABLE, S_RSS, S_BRK, S_MMC, S_MMAP, NSER };

static const struct {
	const char *key;   /* CSV column stem, JSON key, SVG id */
	const char *label; /* legend */
	const char *color; /* SVG stroke */
} series[NSER] = {
	{"live_bytes", "live requested bytes", "#1f66b4"},
	{"live_usable_bytes", "live usable bytes", "#76a8dc"},
	{"rss_bytes", "RSS", "#d62728"},
	{"brk_bytes", "program break - start", "#2ca02c"},
	{"mmapped_chunk_bytes", "glibc mmapped chunks", "#9467bd"},
	{"mmap_bytes", "program's own mmap", "#8c564b"},
};

#define RATE_COLOR "#ff7f0e"

struct bin {
	uint64_t min[NSER], max[NSER], last[NSER]; /* the series in the bin */
	uint64_t calls;  /* allocation calls that ended in the bin */
	uint64_t bytes;  /* bytes they requested */
	uint32_t nrss;   /* RSS samples in the bin (the RSS values are valid if > 0) */
};

struct range {
	uint64_t from_ns, to_ns; /* recording paused or stopped between these */
};

struct ht_timeline {
	struct ht_timeline_opts o; /* as given, title resolved */
	struct ht_order_info order; /* the reader's, at finish (has_order) */
	int has_order;
	struct bin *bins;          /* o.bins of them */
	unsigned filled;           /* bins [0, filled) have their starting values */
	uint64_t end_ns;           /* bins cover [o.from_ns, end_ns) */
	uint64_t width_ns;         /* of a bin (end - from) / bins, at least 1 */
	int merging;               /* time past end_ns doubles the bins' width */
	int cur_bin;               /* bin of the event being applied, -1 outside */
	uint64_t bin_lo, bin_w;    /* times [lo, lo + w) fall in bin cached_bin (w = 0: none) */
	int cached_bin;            /* the bin of the previous event */
	struct bin *cached;        /* &bins[cached_bin] */
	unsigned dirty;            /* series the event changed (bit = series) */
	uint64_t cur[NSER];        /* the series now */
	struct ht_mmranges mm;     /* the program's own mappings (their bytes: S_MMAP) */
	uint64_t brk_base;         /* start_brk, or the first break seen */
	uint64_t peak, peak_ns;    /* the highest live requested bytes in the range, and when */
	uint64_t peak_usable;      /* the highest live usable bytes in the range */
	uint64_t last_ns;          /* time of the last event */
	uint64_t events;           /* events fed */
	struct ht_marks marks;     /* in time order, at most HT_TIMELINE_MAX_MARKS */
	struct range *paused;      /* recording paused/stopped */
	size_t npaused, cappaused; /* count / allocated */
	uint64_t paused_since;     /* open pause (UINT64_MAX = none) */
	uint64_t rss_samples;      /* RSS samples in the range */
	uint64_t rss_gap_median;   /* median time between them, ns */
	int finished;              /* ht_timeline__finish done */
	/* A trace cut short or damaged before the end of the range (the
	 * reader's error): past read_to_ns nothing was read, and the bins
	 * there would only carry the last values on; from exact_to_ns on,
	 * one thread's events are missing (ht_reader__damage; a cut trace:
	 * readto.h). */
	int damaged;               /* the range is not all read */
	int open_end;              /* not closed (OPEN_*): nothing read past the last event,
				    * where the range, widened as events came, goes on */
	struct ht_damage dmg;      /* the reader's account */
	char *error;               /* its error */
	uint64_t read_to_ns;       /* events read up to here (the range's end if all were) */
	uint64_t exact_to_ns;      /* every thread's events in up to here */
	uint32_t short_tid;        /* the thread whose events stop there, if before read_to_ns */
	struct ht_readto_thread *thr; /* how far each thread of the pass (op->thread) was
				       * read (a cut trace: find_damage) */
	size_t nthr, capthr;       /* used / allocated */
	unsigned bins_read;        /* bins [0, bins_read) hold events read, the rest none */
	struct ht_timeline_slice *slice; /* a time slice's part, not the first (NULL: serial) */
};

static void slice_filled(struct ht_timeline_slice *sl, unsigned bin);
static void slice_brk(struct ht_timeline_slice *sl, struct bin *bn, unsigned bin, uint64_t v);
static void slice_mmcall(struct ht_timeline_slice *sl, const struct ht_event *e, unsigned bin);

enum { OPEN_WRITTEN = 1, OPEN_UNCLOSED = 2 }; /* ht_timeline.open_end */

static inline __attribute__((always_inline)) void
on_release(void *ctx, const struct ht_event *e, const struct ht_block *b)
{
	struct ht_timeline *tl = ctx;
	(void)e;
	uint64_t w = b->weight;
	tl->cur[S_LIVE] -= b->size * w;
	tl->cur[S_USABLE] -= b->usable * w;
	tl->dirty |= 1u << S_LIVE | 1u << S_USABLE;
	if (b->pad & HT_BLOCK_MMAPPED) {
		tl->cur[S_MMC] -= b->size * w;
		tl->dirty |= 1u << S_MMC;
	}
}

static inline __attribute__((always_inline)) void
on_acquire(void *ctx, const struct ht_event *e, const struct ht_block *b)
{
	struct ht_timeline *tl = ctx;
	uint64_t w = b->weight;
	tl->cur[S_LIVE] += b->size * w;
	tl->cur[S_USABLE] += b->usable * w;
	tl->dirty |= 1u << S_LIVE | 1u << S_USABLE;
	if (b->pad & HT_BLOCK_MMAPPED) { /* (the pass flags it from HT_F_MMAPPED) */
		tl->cur[S_MMC] += b->size * w;
		tl->dirty |= 1u << S_MMC;
	}
	if (tl->cur_bin < 0)
		return; /* before --from: the peak is the range's, as with --to */
	if (tl->cur[S_LIVE] > tl->peak) {
		tl->peak = tl->cur[S_LIVE];
		tl->peak_ns = e->time_ns;
	}
	if (tl->cur[S_USABLE] > tl->peak_usable)
		tl->peak_usable = tl->cur[S_USABLE];
	tl->bins[tl->cur_bin].calls += w;
	tl->bins[tl->cur_bin].bytes += b->size * w;
}

void ht_timeline__opts_init(struct ht_timeline_opts *o, const struct ht_trace_info *in)
{
	memset(o, 0, sizeof(*o));
	o->bins = 1000;
	if (in) {
		o->duration_ns = in->duration_ns;
		o->duration_exact = in->closed;
		o->being_written = in->being_written;
		o->start_brk = in->start_brk;
		o->trace_flags = in->flags;
		o->sample_bytes = in->sample_bytes;
		o->sample_every = in->sample_every;
	}
}

static void set_range(struct ht_timeline *tl, uint64_t end)
{
	tl->end_ns = end;
	tl->width_ns = (end - tl->o.from_ns) / tl->o.bins;
	if (tl->width_ns == 0)
		tl->width_ns = 1;
	tl->end_ns = tl->o.from_ns + tl->width_ns * tl->o.bins;
}

struct ht_timeline *ht_timeline__new(const struct ht_timeline_opts *o)
{
	if (o->bins < 1 || o->bins > HT_TIMELINE_MAX_BINS)
		return NULL;
	struct ht_timeline *tl = calloc(1, sizeof(*tl));
	if (!tl)
		return NULL;
	tl->o = *o;
	tl->bins = calloc(o->bins, sizeof(*tl->bins));
	if (!tl->bins) {
		free(tl);
		return NULL;
	}
	tl->marks.max = HT_TIMELINE_MAX_MARKS;
	tl->brk_base = o->start_brk;
	tl->paused_since = UINT64_MAX;
	uint64_t end = o->to_ns > o->from_ns ? o->to_ns : o->duration_ns;
	if (o->to_ns > o->from_ns) {
		tl->merging = 0;
	} else if (end > o->from_ns && o->duration_exact) {
		tl->merging = 0;
	} else {
		/* Not known: start at the estimate (or 1 us a bin) and widen. */
		tl->merging = 1;
		if (end <= o->from_ns)
			end = o->from_ns + 1000ull * o->bins;
	}
	set_range(tl, end);
	return tl;
}

/* Bins [filled, upto] start from the values now (nothing changed in them
 * yet). */
static void fill_to(struct ht_timeline *tl, unsigned upto)
{
	if (!tl->filled) {
		/* The range begins: what is live then, carried in from before
		 * --from, is where its peak starts. */
		tl->peak = tl->cur[S_LIVE];
		tl->peak_ns = tl->o.from_ns;
		tl->peak_usable = tl->cur[S_USABLE];
	}
	for (; tl->filled <= upto && tl->filled < tl->o.bins; tl->filled++) {
		struct bin *b = &tl->bins[tl->filled];
		for (int s = 0; s < NSER; s++)
			if (s != S_RSS)
				b->min[s] = b->max[s] = b->last[s] = tl->cur[s];
		if (tl->slice)
			slice_filled(tl->slice, tl->filled);
	}
}

static void merge_bins(struct bin *a, const struct bin *b)
{
	for (int s = 0; s < NSER; s++) {
		if (s == S_RSS && !b->nrss)
			continue;
		if (s == S_RSS && !a->nrss) {
			a->min[s] = b->min[s], a->max[s] = b->max[s], a->last[s] = b->last[s];
			continue;
		}
		if (b->min[s] < a->min[s])
			a->min[s] = b->min[s];
		if (b->max[s] > a->max[s])
			a->max[s] = b->max[s];
		a->last[s] = b->last[s];
	}
	a->nrss += b->nrss;
	a->calls += b->calls;
	a->bytes += b->bytes;
}

/* Twice the width: bin i becomes bins 2i and 2i+1 merged. */
static void widen(struct ht_timeline *tl)
{
	unsigned n = tl->o.bins, filled = tl->filled;
	for (unsigned i = 0; i < n / 2 + n % 2; i++) {
		struct bin m = tl->bins[2 * i];
		if (2 * i + 1 < n && 2 * i + 1 < filled)
			merge_bins(&m, &tl->bins[2 * i + 1]);
		tl->bins[i] = m;
	}
	memset(&tl->bins[n / 2 + n % 2], 0, (n / 2) * sizeof(struct bin));
	tl->filled = (filled + 1) / 2;
	tl->width_ns *= 2;
	tl->end_ns = tl->o.from_ns + tl->width_ns * n;
	tl->bin_lo = tl->bin_w = 0; /* the cached bin moved */
}

/* The bin of time t: -1 before the range, -2 after it.  Events never go
 * back before the bin of the last one (monotonic); RSS samples may. */
static int bin_of(struct ht_timeline *tl, uint64_t t, int monotonic)
{
	if (t < tl->o.from_ns)
		return -1;
	if (tl->o.to_ns > tl->o.from_ns && t > tl->o.to_ns)
		return -2;
	while (t >= tl->end_ns && tl->merging && tl->width_ns < UINT64_MAX / 4 / tl->o.bins)
		widen(tl);
	uint64_t i = (t - tl->o.from_ns) / tl->width_ns;
	if (i >= tl->o.bins)
		i = tl->o.bins - 1; /* just past the end (--to, or the closing instant) */
	if (monotonic && tl->filled && i < tl->filled - 1)
		i = tl->filled - 1; /* never back in time */
	else if (monotonic && t < tl->end_ns) { /* the next events likely fall in it too */
		tl->cached_bin = (int)i;
		tl->bin_lo = tl->o.from_ns + i * tl->width_ns;
		tl->bin_w = tl->width_ns;
		tl->cached = &tl->bins[i];
	}
	return (int)i;
}

static void end_pause(struct ht_timeline *tl, uint64_t t)
{
	if (tl->paused_since == UINT64_MAX)
		return;
	if (tl->npaused == tl->cappaused) {
		tl->cappaused = tl->cappaused ? 2 * tl->cappaused : 8;
		tl->paused = ht_xrealloc(tl->paused, tl->cappaused * sizeof(*tl->paused));
	}
	tl->paused[tl->npaused++] = (struct range){tl->paused_since, t};
	tl->paused_since = UINT64_MAX;
}

/* The events that change no series and no bin (the common ones change
 * live bytes). */
static void control(struct ht_timeline *tl, const struct ht_event *e, int in_range)
{
	switch (e->v[0]) {
	case HT_CTL_RESET: /* the pass flagged the blocks forgotten */
		tl->cur[S_LIVE] = tl->cur[S_USABLE] = tl->cur[S_MMC] = 0;
		tl->dirty |= 1u << S_LIVE | 1u << S_USABLE | 1u << S_MMC;
		break;
	case HT_CTL_PAUSE:
	case HT_CTL_STOP:
		if (in_range && tl->paused_since == UINT64_MAX && tl->npaused < HT_TIMELINE_MAX_MARKS)
			tl->paused_since = e->time_ns;
		break;
	case HT_CTL_RESUME:
	case HT_CTL_START:
		end_pause(tl, e->time_ns);
		break;
	}
}

/* Series s of bin bn takes value v. */
static inline void bin_note(struct bin *bn, int s, uint64_t v)
{
	if (v < bn->min[s])
		bn->min[s] = v;
	if (v > bn->max[s])
		bn->max[s] = v;
	bn->last[s] = v;
}

/* An mmap, munmap or mremap: the program's own mapped pages (only those
 * calls change them). */
static void mmap_call(struct ht_timeline *tl, const struct ht_event *e)
{
	struct ht_mmcall c;
	if (ht_mmcall__of(e, &c))
		ht_mmranges__apply(&tl->mm, &c);
	tl->cur[S_MMAP] = tl->mm.bytes;
	tl->dirty |= 1u << S_MMAP;
}

/* Every event event_fast does not take. */
static __attribute__((noinline)) void event_slow(struct ht_timeline *tl,
						 const struct ht_event *e,
						 const struct ht_blockop *op)
{
	if (tl->finished)
		return;
	uint64_t t = e->time_ns;
	int b;
	if (t - tl->bin_lo < tl->bin_w) { /* (t - lo wraps round below lo) */
		b = tl->cached_bin; /* (filled already) */
	} else {
		b = bin_of(tl, t, 1);
		if (b == -2)
			return; /* past --to */
		if (b >= 0)
			fill_to(tl, (unsigned)b);
	}
	tl->cur_bin = b;
	tl->events += e->part != HT_PART_RELEASE; /* (a moving realloc is one event) */
	tl->last_ns = e->time_ns;
	tl->dirty = 0;
	switch (e->kind) {
	case HT_EV_MMAP:
	case HT_EV_MUNMAP:
	case HT_EV_MREMAP:
		mmap_call(tl, e);
		if (tl->slice && b >= 0)
			slice_mmcall(tl->slice, e, (unsigned)b);
		break;
	case HT_EV_HEAP_BREAK:
		if (tl->slice && b >= 0) {
			slice_brk(tl->slice, &tl->bins[b], (unsigned)b, e->v[0]);
			tl->cur[S_BRK] = e->v[0]; /* (the break itself: slice_brk) */
			tl->dirty |= 1u << S_BRK;
			break;
		}
		if (!tl->brk_base)
			tl->brk_base = e->v[0];
		tl->cur[S_BRK] = e->v[0] > tl->brk_base ? e->v[0] - tl->brk_base : 0;
		tl->dirty |= 1u << S_BRK;
		break;
	case HT_EV_MARK:
		if (b >= 0)
			ht_marks__add(&tl->marks, e);
		return;
	case HT_EV_CONTROL:
		control(tl, e, b >= 0);
		break;
	default:
		ht_blockop__callbacks(op, e, &(const struct ht_block_cbs){on_release, on_acquire, tl});
		break;
	}
	if (b < 0 || !tl->dirty)
		return;
	/* The bin of the event holds every series' value from before it
	 * (fill_to, or this bin's previous events): only the changed ones
	 * can move its min, max or last. */
	struct bin *bn = &tl->bins[b];
	unsigned d = tl->dirty;
	if (d == (1u << S_LIVE | 1u << S_USABLE)) { /* what most events change */
		bin_note(bn, S_LIVE, tl->cur[S_LIVE]);
		bin_note(bn, S_USABLE, tl->cur[S_USABLE]);
		return;
	}
	for (; d; d &= d - 1) {
		int s = __builtin_ctz(d);
		bin_note(bn, s, tl->cur[s]);
	}
}

/* The common events: a heap call that hands out or releases one block
 * (or none), in the bin of the previous event, what on_acquire and
 * on_release do and the bin's figures, with no call.  A larger value can
 * only raise the bin's maximum, a smaller one only lower its minimum.
 * Returns 0 when the event is not one of these, before it changed
 * anything (after finish the cached bin is none). */
static inline int event_fast(struct ht_timeline *tl, const struct ht_event *e,
			     const struct ht_blockop *op)
{
	uint64_t t = e->time_ns;
	const struct ht_block *acq = op->acquired, *rel = op->released;
	if (t - tl->bin_lo >= tl->bin_w || e->kind > HT_EV_PVALLOC || op->replaced || (acq && rel))
		return 0; /* (t - lo wraps round below lo) */
	struct bin *bn = tl->cached;
	tl->cur_bin = tl->cached_bin;
	tl->events += e->part != HT_PART_RELEASE; /* (a moving realloc is one event) */
	tl->last_ns = t;
	if (acq) {
		uint64_t w = acq->weight, bytes = acq->size * w;
		uint64_t live = tl->cur[S_LIVE] += bytes;
		uint64_t usable = tl->cur[S_USABLE] += acq->usable * w;
		if (acq->pad & HT_BLOCK_MMAPPED) {
			tl->cur[S_MMC] += bytes;
			bin_note(bn, S_MMC, tl->cur[S_MMC]);
		}
		if (live > tl->peak) {
			tl->peak = live;
			tl->peak_ns = t;
		}
		if (usable > tl->peak_usable)
			tl->peak_usable = usable;
		bn->calls += w;
		bn->bytes += bytes;
		if (live > bn->max[S_LIVE])
			bn->max[S_LIVE] = live;
		bn->last[S_LIVE] = live;
		if (usable > bn->max[S_USABLE])
			bn->max[S_USABLE] = usable;
		bn->last[S_USABLE] = usable;
	} else if (rel && !(rel->pad & HT_BLOCK_FORGOTTEN)) {
		uint64_t w = rel->weight, bytes = rel->size * w;
		uint64_t live = tl->cur[S_LIVE] -= bytes;
		uint64_t usable = tl->cur[S_USABLE] -= rel->usable * w;
		if (rel->pad & HT_BLOCK_MMAPPED) {
			tl->cur[S_MMC] -= bytes;
			bin_note(bn, S_MMC, tl->cur[S_MMC]);
		}
		if (live < bn->min[S_LIVE])
			bn->min[S_LIVE] = live;
		bn->last[S_LIVE] = live;
		if (usable < bn->min[S_USABLE])
			bn->min[S_USABLE] = usable;
		bn->last[S_USABLE] = usable;
	}
	return 1;
}

/* Room for thread index i of the pass. */
static __attribute__((noinline)) void thread_room(struct ht_timeline *tl, uint32_t i)
{
	tl->thr = ht_grow(tl->thr, &tl->capthr, (size_t)i + 1, sizeof(*tl->thr));
	memset(tl->thr + tl->nthr, 0, ((size_t)i + 1 - tl->nthr) * sizeof(*tl->thr));
	tl->nthr = (size_t)i + 1;
}

void ht_timeline__event(struct ht_timeline *tl, const struct ht_event *e,
			const struct ht_blockop *op)
{
	uint32_t i = op->thread;
	if (__builtin_expect(i >= tl->nthr, 0))
		thread_room(tl, i);
	ht_readto__thread_event(&tl->thr[i], e);
	if (!event_fast(tl, e, op))
		event_slow(tl, e, op);
}

/* The bins up to read_to_ns hold events read; the rest none. */
static void set_bins_read(struct ht_timeline *tl)
{
	if (tl->read_to_ns < tl->o.from_ns) {
		tl->bins_read = 0;
	} else {
		uint64_t n = (tl->read_to_ns - tl->o.from_ns) / tl->width_ns + 1;
		if (n < tl->bins_read)
			tl->bins_read = (unsigned)n;
	}
}

/* Where a cut or damaged trace's events stop within the range, or a trace
 * not closed (still being written, or its recorder killed): the bins past
 * the last event read hold no data, only the values before carried on (a
 * plateau the program never drew), and are shown as not read.  (A trace
 * not closed has no duration: its range doubled as the events came, and
 * ends up to twice as late as its last event.) */
static void find_damage(struct ht_timeline *tl, struct ht_reader *r)
{
	tl->read_to_ns = tl->exact_to_ns = tl->end_ns;
	tl->bins_read = tl->o.bins;
	uint64_t end = tl->o.to_ns > tl->o.from_ns ? tl->o.to_ns : tl->end_ns;
	if (!tl->o.duration_exact && tl->last_ns + 1 < tl->end_ns) {
		tl->open_end = tl->o.being_written ? OPEN_WRITTEN : OPEN_UNCLOSED;
		tl->read_to_ns = tl->exact_to_ns = tl->last_ns + 1;
		set_bins_read(tl);
	}
	if (!r || !ht_reader__damage(r, &tl->dmg))
		return;
	/* (readto.h: where every thread's stream stops, which the reader's
	 * last event does not tell) */
	uint64_t read_to, exact_to;
	uint32_t short_tid;
	if (ht_readto__bounds(&tl->dmg, tl->thr, tl->nthr, tl->read_to_ns, &read_to, &exact_to,
			      &short_tid) >= end)
		return; /* (with --to: the damage lies past the range) */
	tl->damaged = 1;
	tl->error = ht_xstrdup(ht_reader__error(r));
	tl->read_to_ns = read_to;
	tl->exact_to_ns = exact_to;
	tl->short_tid = short_tid;
	set_bins_read(tl);
}

/* Why the bins past read_to_ns were not read, for the SVG's notes. */
static const char *unread_why(const struct ht_timeline *tl)
{
	if (tl->damaged)
		return "the trace is cut short or damaged";
	return tl->open_end == OPEN_WRITTEN ? "the trace is still being written"
					    : "the trace was not closed: its recorder was killed?";
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void ht_timeline__finish(struct ht_timeline *tl, struct ht_reader *r)
{
	if (tl->finished)
		return;
	if (r) {
		ht_reader__order(r, &tl->order);
		tl->has_order = 1;
	}
	const uint64_t *t = NULL, *kb = NULL;
	size_t n = r ? ht_reader__rss_samples(r, &t, &kb) : 0;
	uint64_t *gaps = NULL, prev = 0;
	size_t ngaps = 0;
	if (n > 1)
		gaps = ht_xrealloc(NULL, n * sizeof(*gaps));
	for (size_t i = 0; i < n; i++) {
		int b = bin_of(tl, t[i], 0);
		if (b < 0)
			continue;
		if (tl->rss_samples++)
			gaps[ngaps++] = t[i] - prev;
		prev = t[i];
		struct bin *bn = &tl->bins[b];
		uint64_t v = kb[i] * 1024;
		if (!bn->nrss++) {
			bn->min[S_RSS] = bn->max[S_RSS] = v;
		} else {
			if (v < bn->min[S_RSS])
				bn->min[S_RSS] = v;
			if (v > bn->max[S_RSS])
				bn->max[S_RSS] = v;
		}
		bn->last[S_RSS] = v;
	}
	if (ngaps) {
		qsort(gaps, ngaps, sizeof(*gaps), cmp_u64);
		tl->rss_gap_median = gaps[ngaps / 2];
	}
	free(gaps);
	fill_to(tl, tl->o.bins - 1);
	end_pause(tl, tl->end_ns);
	find_damage(tl, r);
	tl->finished = 1;
	tl->bin_lo = tl->bin_w = 0; /* no more events (event_fast) */
}

uint64_t ht_timeline__peak(const struct ht_timeline *tl, uint64_t *time_ns)
{
	if (time_ns)
		*time_ns = tl->peak_ns;
	return tl->peak;
}

uint64_t ht_timeline__exact_to(const struct ht_timeline *tl, uint32_t *tid)
{
	*tid = tl->short_tid;
	return tl->short_tid ? tl->exact_to_ns : UINT64_MAX;
}

void ht_timeline__delete(struct ht_timeline *tl)
{
	if (!tl)
		return;
	ht_marks__free(&tl->marks);
	ht_mmranges__free(&tl->mm);
	free(tl->thr);
	free(tl->error);
	free(tl->paused);
	free(tl->bins);
	free(tl);
}

/* ---- time slices (analyze/slices.c) ------------------------------------------- */

/* The series a slice knows only up to the blocks from before it that its
 * releases free: what its own events add, off from the true level by what
 * was live at its start less what those releases freed so far. */
enum { R_LIVE, R_USABLE, R_MMC, NREL };
static const int rel_series[NREL] = {S_LIVE, S_USABLE, S_MMC};

/* Segment k of a slice: its events from its k-th release of an address it
 * did not hand out (deferred, slicerel.h) to the next.  Closed by release
 * k, in the bin where that came; the part of the segment in that bin, and
 * the slice's highest figures so far (a highest before, where fewer
 * blocks from before were off, wins where it was reached: stats.c,
 * seg_close).  The next segment starts in that bin at the figures after
 * the release's event: what the serial timeline noted there (the level
 * after the event only: a realloc in place releases and acquires in one;
 * where it released nothing known, the level before, noted already). */
struct tseg {
	unsigned bin;
	uint64_t min[NREL], max[NREL];
	uint64_t peak, peak_ns, peak_usable;
};

struct tmm {
	struct ht_mmcall c;
	unsigned bin;
};

struct ht_timeline_slice {
	struct ht_timeline *tl; /* its model: bins from bin0 on, series as said above */
	int first;              /* the first slice: its figures are the true ones */
	int started;            /* an event came */
	unsigned bin0;          /* the first bin it fills (that of its first event: those
				 * before hold the level at its start, which the slices
				 * before give) */
	uint32_t *seg;          /* per bin: the segment whose part its figures hold */
	struct tseg *segs;      /* one per deferred release, in order */
	size_t nseg, capseg;
	struct tmm *mm;         /* the program's own mapping calls, in order */
	size_t nmm, capmm;
	int brk_seen;           /* a break came: from brk_bin on, S_BRK holds it raw */
	unsigned brk_bin;
	uint64_t brk_first;     /* the first one */
};

int ht_timeline__sliceable(const struct ht_timeline_opts *o)
{
	return o->duration_exact && o->duration_ns > 0 && o->from_ns == 0 && o->to_ns == 0;
}

struct ht_timeline_slice *ht_timeline__slice_new(const struct ht_timeline_opts *o, int first)
{
	struct ht_timeline_slice *sl = ht_xcalloc(1, sizeof(*sl));
	sl->first = first;
	sl->tl = ht_timeline__new(o);
	if (!sl->tl) {
		free(sl);
		return NULL;
	}
	if (!first) {
		sl->seg = ht_xcalloc(o->bins, sizeof(*sl->seg));
		sl->tl->slice = sl;
	}
	return sl;
}

void ht_timeline__slice_delete(struct ht_timeline_slice *sl)
{
	if (!sl)
		return;
	ht_timeline__delete(sl->tl);
	free(sl->seg);
	free(sl->segs);
	free(sl->mm);
	free(sl);
}

size_t ht_timeline__slice_kept(const struct ht_timeline_slice *sl)
{
	return sl->nmm;
}

struct ht_timeline *ht_timeline__slice_take(struct ht_timeline_slice *sl)
{
	struct ht_timeline *tl = sl->tl;
	sl->tl = NULL;
	tl->slice = NULL;
	return tl;
}

static void slice_filled(struct ht_timeline_slice *sl, unsigned bin)
{
	sl->seg[bin] = (uint32_t)sl->nseg;
}

/* A break: S_BRK holds breaks as they are (the start of the heap may be
 * the first break of a slice before); before the first one it holds
 * nothing yet, so the bin of the first starts from it. */
static void slice_brk(struct ht_timeline_slice *sl, struct bin *bn, unsigned bin, uint64_t v)
{
	if (sl->brk_seen)
		return;
	sl->brk_seen = 1;
	sl->brk_bin = bin;
	sl->brk_first = v;
	bn->min[S_BRK] = bn->max[S_BRK] = bn->last[S_BRK] = v;
}

static void slice_mmcall(struct ht_timeline_slice *sl, const struct ht_event *e, unsigned bin)
{
	struct ht_mmcall c;
	if (!ht_mmcall__of(e, &c))
		return;
	sl->mm = ht_grow(sl->mm, &sl->capmm, sl->nmm + 1, sizeof(*sl->mm));
	sl->mm[sl->nmm++] = (struct tmm){c, bin};
}

void ht_timeline__slice_event(struct ht_timeline_slice *sl, const struct ht_event *e,
			      const struct ht_blockop *op, int deferred)
{
	struct ht_timeline *tl = sl->tl;
	if (!sl->started && !sl->first) {
		/* its bins start at that of its first event (times go on) */
		uint64_t b = e->time_ns / tl->width_ns;
		sl->bin0 = tl->filled = b < tl->o.bins ? (unsigned)b : tl->o.bins - 1;
		sl->started = 1;
	}
	if (deferred && !tl->finished) {
		/* the release closes a segment in the bin where it comes (from
		 * which the true level drops by what it frees, once known) */
		int b = bin_of(tl, e->time_ns, 1);
		if (b >= 0) {
			fill_to(tl, (unsigned)b);
			struct bin *bn = &tl->bins[b];
			sl->segs = ht_grow(sl->segs, &sl->capseg, sl->nseg + 1, sizeof(*sl->segs));
			struct tseg *g = &sl->segs[sl->nseg++];
			g->bin = (unsigned)b;
			for (int i = 0; i < NREL; i++) {
				g->min[i] = bn->min[rel_series[i]];
				g->max[i] = bn->max[rel_series[i]];
			}
			g->peak = tl->peak;
			g->peak_ns = tl->peak_ns;
			g->peak_usable = tl->peak_usable;
			sl->seg[b] = (uint32_t)sl->nseg;
			ht_timeline__event(tl, e, op);
			for (int i = 0; i < NREL; i++) {
				int s = rel_series[i];
				bn->min[s] = bn->max[s] = bn->last[s] = tl->cur[s];
			}
			return;
		}
	}
	ht_timeline__event(tl, e, op);
}

static inline void note_min_max(struct bin *bn, int s, uint64_t lo, uint64_t hi)
{
	if (lo < bn->min[s])
		bn->min[s] = lo;
	if (hi > bn->max[s])
		bn->max[s] = hi;
}

/* A break as brk_bytes: above the start of the heap. */
static inline uint64_t above(uint64_t brk, uint64_t base)
{
	return brk > base ? brk - base : 0;
}

/* The bins of sl as they truly were, into tl's (tl: the slices before). */
void ht_timeline__slice_add(struct ht_timeline *tl, struct ht_timeline_slice *sl,
			    const struct ht_slice_releases *rs)
{
	struct ht_timeline *k = sl->tl;
	size_t nseg = sl->nseg;

	/* what the releases free of the blocks from before, so far: d[j] for
	 * segment j (level = the start's + the slice's own - d[j]) */
	uint64_t(*d)[NREL] = ht_xcalloc(nseg + 1, sizeof(*d));
	for (size_t j = 0; j < nseg; j++) {
		const struct ht_block *b = j < rs->n ? &rs->b[j] : NULL; /* (one each) */
		memcpy(d[j + 1], d[j], sizeof(d[j]));
		if (!b || !b->ptr)
			continue;
		uint64_t w = b->weight;
		d[j + 1][R_LIVE] += b->size * w;
		d[j + 1][R_USABLE] += b->usable * w;
		if (b->pad & HT_BLOCK_MMAPPED)
			d[j + 1][R_MMC] += b->size * w;
	}
	uint64_t c[NREL];
	for (int i = 0; i < NREL; i++)
		c[i] = tl->cur[rel_series[i]];
	/* the peak: the first highest (segments in time order) */
	for (size_t j = 0; j <= nseg; j++) {
		uint64_t peak = j < nseg ? sl->segs[j].peak : k->peak;
		uint64_t peak_ns = j < nseg ? sl->segs[j].peak_ns : k->peak_ns;
		uint64_t usable = j < nseg ? sl->segs[j].peak_usable : k->peak_usable;
		uint64_t v = c[R_LIVE] - d[j][R_LIVE] + peak;
		if (v > tl->peak) {
			tl->peak = v;
			tl->peak_ns = peak_ns;
		}
		v = c[R_USABLE] - d[j][R_USABLE] + usable;
		if (v > tl->peak_usable)
			tl->peak_usable = v;
	}
	/* the bins before the slice's: the level at its start */
	if (!sl->started) {
		free(d);
		return; /* (no event: nothing changed) */
	}
	if (sl->bin0 > 0)
		fill_to(tl, sl->bin0 - 1);
	uint64_t brk_at = tl->cur[S_BRK], brk_base = tl->brk_base;
	if (sl->brk_seen && !brk_base)
		brk_base = tl->brk_base = sl->brk_first;
	uint64_t mmap = tl->cur[S_MMAP];
	size_t p = 0, q = 0; /* segments, mapping calls */
	for (unsigned b = sl->bin0; b < k->filled; b++) {
		struct bin nb = k->bins[b];
		uint32_t g = sl->seg[b];
		for (int i = 0; i < NREL; i++) {
			int s = rel_series[i];
			uint64_t base = c[i] - d[g][i];
			nb.min[s] += base;
			nb.max[s] += base;
			nb.last[s] += base;
		}
		for (; p < nseg && sl->segs[p].bin == b; p++)
			for (int i = 0; i < NREL; i++) {
				uint64_t base = c[i] - d[p][i];
				note_min_max(&nb, rel_series[i], base + sl->segs[p].min[i],
					     base + sl->segs[p].max[i]);
			}
		if (!sl->brk_seen || b < sl->brk_bin) {
			nb.min[S_BRK] = nb.max[S_BRK] = nb.last[S_BRK] = brk_at;
		} else {
			nb.min[S_BRK] = above(nb.min[S_BRK], brk_base);
			nb.max[S_BRK] = above(nb.max[S_BRK], brk_base);
			nb.last[S_BRK] = above(nb.last[S_BRK], brk_base);
			if (b == sl->brk_bin)
				note_min_max(&nb, S_BRK, brk_at, brk_at);
		}
		nb.min[S_MMAP] = nb.max[S_MMAP] = nb.last[S_MMAP] = mmap;
		for (; q < sl->nmm && sl->mm[q].bin == b; q++) {
			ht_mmranges__apply(&tl->mm, &sl->mm[q].c);
			mmap = tl->mm.bytes;
			bin_note(&nb, S_MMAP, mmap);
		}
		struct bin *t = &tl->bins[b];
		if (b < tl->filled) { /* its start was the slice before's */
			for (int s = 0; s < NSER; s++)
				if (s != S_RSS) {
					note_min_max(t, s, nb.min[s], nb.max[s]);
					t->last[s] = nb.last[s];
				}
			t->calls += nb.calls;
			t->bytes += nb.bytes;
		} else {
			*t = nb;
		}
	}
	if (k->filled > tl->filled)
		tl->filled = k->filled;
	for (int i = 0; i < NREL; i++)
		tl->cur[rel_series[i]] = c[i] - d[nseg][i] + k->cur[rel_series[i]];
	if (sl->brk_seen)
		tl->cur[S_BRK] = above(k->cur[S_BRK], brk_base);
	tl->cur[S_MMAP] = mmap;
	tl->events += k->events;
	if (k->events && k->last_ns > tl->last_ns)
		tl->last_ns = k->last_ns;
	ht_marks__append(&tl->marks, &k->marks);
	free(d);
}

/* ---- CSV and JSON ---------------------------------------------------------- */

static uint64_t bin_start(const struct ht_timeline *tl, unsigned i)
{
	return tl->o.from_ns + (uint64_t)i * tl->width_ns;
}

static double per_s(const struct ht_timeline *tl, uint64_t v)
{
	return (double)v * 1e9 / (double)tl->width_ns;
}

/* Marks are in time order: the first one at or after t. */
static size_t first_mark(const struct ht_timeline *tl, uint64_t t)
{
	size_t lo = 0, hi = tl->marks.n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (tl->marks.v[mid].time_ns < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The labels of marks [m, e) as the CSV's marks cell: a JSON array of
 * strings (the JSON writer's escapes, its rule for bytes that are not
 * UTF-8), so that any label, one with a ';', a ',' or a quote, an empty
 * one, reads back as it was; nothing when there are none. */
static void csv_marks(const struct ht_timeline *tl, FILE *f, size_t m, size_t e)
{
	if (m >= e)
		return;
	char *arr = NULL;
	size_t len = 0;
	FILE *af = open_memstream(&arr, &len);
	if (!af)
		ht_oom();
	fputc('[', af);
	for (size_t i = m; i < e; i++) {
		if (i > m)
			fputc(',', af);
		ht_json__put_string(af, tl->marks.v[i].label);
	}
	fputc(']', af);
	if (fclose(af))
		ht_oom();
	char *cell = ht_xmalloc(2 * len + 3);
	fwrite(cell, 1, (size_t)(ht_export__csv_field(cell, arr) - cell), f);
	free(cell);
	free(arr);
}

int ht_timeline__csv(const struct ht_timeline *tl, FILE *f)
{
	fprintf(f, "bin,start_ns,end_ns");
	for (int s = 0; s < NSER; s++)
		fprintf(f, ",%s_min,%s_max,%s", series[s].key, series[s].key, series[s].key);
	fprintf(f, ",alloc_calls,alloc_bytes,alloc_calls_per_s,alloc_bytes_per_s,marks\n");
	for (unsigned i = 0; i < tl->o.bins; i++) {
		const struct bin *b = &tl->bins[i];
		/* past the events read: empty cells, as RSS's without a sample */
		int was_read = i < tl->bins_read;
		uint64_t t0 = bin_start(tl, i), t1 = t0 + tl->width_ns;
		fprintf(f, "%u,%llu,%llu", i, (unsigned long long)t0, (unsigned long long)t1);
		for (int s = 0; s < NSER; s++) {
			if (s == S_RSS ? !b->nrss : !was_read)
				fprintf(f, ",,,");
			else
				fprintf(f, ",%llu,%llu,%llu", (unsigned long long)b->min[s],
					(unsigned long long)b->max[s], (unsigned long long)b->last[s]);
		}
		if (was_read)
			fprintf(f, ",%llu,%llu,%.0f,%.0f,", (unsigned long long)b->calls,
				(unsigned long long)b->bytes, per_s(tl, b->calls),
				per_s(tl, b->bytes));
		else
			fprintf(f, ",,,,,");
		size_t m = first_mark(tl, t0), e = m;
		if (i + 1 == tl->o.bins)
			t1 = UINT64_MAX; /* the last bin takes what lies at its end */
		while (e < tl->marks.n && tl->marks.v[e].time_ns < t1)
			e++;
		csv_marks(tl, f, m, e);
		fputc('\n', f);
	}
	return ferror(f) ? -1 : 0;
}

static void json_bin_series(struct ht_json *j, const struct bin *b, int s, int was_read)
{
	if (s == S_RSS ? !b->nrss : !was_read) {
		ht_json__null(j, series[s].key);
		return;
	}
	ht_json__obj_begin(j, series[s].key);
	ht_json__u64(j, "min", b->min[s]);
	ht_json__u64(j, "max", b->max[s]);
	ht_json__u64(j, "last", b->last[s]);
	ht_json__obj_end(j);
}

void ht_timeline__json(const struct ht_timeline *tl, struct ht_json *j, const char *key)
{
	ht_json__obj_begin(j, key);
	ht_json__u64(j, "from_ns", tl->o.from_ns);
	ht_json__u64(j, "to_ns", tl->end_ns);
	ht_json__u64(j, "bin_ns", tl->width_ns);
	ht_json__u64(j, "bins_count", tl->o.bins);
	ht_json__u64(j, "events", tl->events);
	/* a cut or damaged trace: where its events stop in the range */
	ht_json__bool(j, "complete", !tl->damaged && !tl->open_end);
	ht_json__bool(j, "closed", tl->o.duration_exact);
	ht_json__bool(j, "being_written", tl->o.being_written);
	ht_json__u64(j, "read_to_ns", tl->read_to_ns);
	ht_json__u64(j, "exact_to_ns", tl->exact_to_ns);
	if (tl->damaged && tl->short_tid)
		ht_json__u64(j, "missing_thread", tl->short_tid);
	else
		ht_json__null(j, "missing_thread");
	ht_json__u64(j, "bins_read", tl->bins_read);
	if (tl->damaged)
		ht_json__str(j, "error", tl->error);
	else
		ht_json__null(j, "error");
	if (tl->has_order)
		ht_analyze__order_json(j, &tl->order);
	struct ht_trace_info in = {.flags = tl->o.trace_flags,
				   .sample_bytes = tl->o.sample_bytes,
				   .sample_every = tl->o.sample_every};
	ht_analyze__sample_json(j, &in);
	ht_json__u64(j, "peak_live_bytes", tl->peak);
	ht_json__u64(j, "peak_time_ns", tl->peak_ns);
	ht_json__u64(j, "peak_live_usable_bytes", tl->peak_usable);
	ht_json__u64(j, "brk_base", tl->brk_base);
	ht_json__u64(j, "rss_samples", tl->rss_samples);
	ht_json__u64(j, "rss_median_interval_ns", tl->rss_gap_median);
	ht_json__arr_begin(j, "series");
	for (int s = 0; s < NSER; s++) {
		ht_json__obj_begin(j, NULL);
		ht_json__str(j, "key", series[s].key);
		ht_json__str(j, "label", series[s].label);
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_marks__json(&tl->marks, j);
	ht_json__u64(j, "marks_not_kept", tl->marks.dropped);
	ht_json__arr_begin(j, "paused");
	for (size_t i = 0; i < tl->npaused; i++) {
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "from_ns", tl->paused[i].from_ns);
		ht_json__u64(j, "to_ns", tl->paused[i].to_ns);
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__arr_begin(j, "bins");
	for (unsigned i = 0; i < tl->o.bins; i++) {
		const struct bin *b = &tl->bins[i];
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "start_ns", bin_start(tl, i));
		int was_read = i < tl->bins_read;
		for (int s = 0; s < NSER; s++)
			json_bin_series(j, b, s, was_read);
		if (was_read) {
			ht_json__u64(j, "alloc_calls", b->calls);
			ht_json__u64(j, "alloc_bytes", b->bytes);
		} else {
			ht_json__null(j, "alloc_calls");
			ht_json__null(j, "alloc_bytes");
		}
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__obj_end(j);
}

/* ---- SVG ----------------------------------------------------------------- */

/* A round step for an axis from 0 to max in about n steps: 1, 2 or 5
 * times a power of ten of the unit. */
static double nice_step(double max, int n, double unit)
{
	double raw = max / unit / n;
	if (raw <= 0)
		return unit;
	double p = pow(10, floor(log10(raw)));
	double m = raw / p;
	return unit * p * (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10);
}

static void fmt_axis_bytes(char *buf, size_t len, double v, double unit, const char *uname)
{
	double x = v / unit;
	snprintf(buf, len, x == floor(x) ? "%.0f %s" : "%.1f %s", x, uname);
}

struct plot {
	FILE *f;          /* output */
	double x0, pw;    /* plot area: left edge and width */
	double y0, ph;    /* top panel: top and height */
	double r0, rh;    /* rate panel: top and height */
	double ymax;      /* top of the bytes axis */
	double rmax;      /* top of the rate axis */
};

static double xpos(const struct plot *p, const struct ht_timeline *tl, uint64_t t)
{
	if (t < tl->o.from_ns)
		t = tl->o.from_ns;
	double span = (double)(tl->end_ns - tl->o.from_ns);
	double x = p->x0 + p->pw * (double)(t - tl->o.from_ns) / (span > 0 ? span : 1);
	return x > p->x0 + p->pw ? p->x0 + p->pw : x;
}

static double ypos(const struct plot *p, double v)
{
	return p->y0 + p->ph - (p->ymax > 0 ? p->ph * v / p->ymax : 0);
}

static void draw_series(const struct plot *p, const struct ht_timeline *tl, int s)
{
	FILE *f = p->f;
	double bw = p->pw / tl->o.bins;
	ht_fputf(f, "<g id=\"%s\" class=\"series\"><title>%s</title>\n", series[s].key,
		series[s].label);
	/* the min..max envelope (spikes narrower than a bin), then the last
	 * value of each bin as a step line */
	ht_fputf(f, "<path fill=\"%s\" fill-opacity=\"0.2\" stroke=\"none\" d=\"", series[s].color);
	int open = 0;
	/* the events' series stop where the events read do; RSS samples are
	 * the clock chunks', read on their own */
	unsigned n = s == S_RSS ? tl->o.bins : tl->bins_read;
	for (unsigned i = 0; i < n; i++) {
		const struct bin *b = &tl->bins[i];
		if (s == S_RSS && !b->nrss)
			continue;
		if (b->max[s] == b->min[s])
			continue;
		double x = p->x0 + i * bw;
		ht_fputf(f, "M%.1f %.1fH%.1fV%.1fH%.1fZ", x, ypos(p, (double)b->max[s]), x + bw,
			ypos(p, (double)b->min[s]), x);
		open = 1;
	}
	ht_fputf(f, "%s\"/>\n", open ? "" : "M0 0");
	ht_fputf(f, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s d=\"", series[s].color,
		s == S_USABLE ? " stroke-dasharray=\"4 2\"" : "");
	int first = 1;
	for (unsigned i = 0; i < n; i++) {
		const struct bin *b = &tl->bins[i];
		if (s == S_RSS) {
			if (!b->nrss)
				continue;
			double x = p->x0 + (i + 0.5) * bw;
			ht_fputf(f, "%c%.1f %.1f", first ? 'M' : 'L', x, ypos(p, (double)b->last[s]));
		} else {
			double x = p->x0 + i * bw;
			double y = ypos(p, (double)b->last[s]);
			if (first)
				ht_fputf(f, "M%.1f %.1f", x, y);
			else
				ht_fputf(f, "V%.1f", y);
			ht_fputf(f, "H%.1f", x + bw);
		}
		first = 0;
	}
	ht_fputf(f, "%s\"/>\n</g>\n", first ? "M0 0" : "");
}

/* A bytes axis (binary units, per second with a suffix) from 0 to max
 * over the panel [top, top + height): a grid line and a label per step. */
static void bytes_axis(const struct plot *p, const char *id, double max, int steps, double top,
		       double height, const char *suffix)
{
	static const char *const un[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double unit = 1;
	int u = 0;
	while (max / unit >= 1024 && u < 4)
		unit *= 1024, u++;
	double step = nice_step(max, steps, unit);
	char uname[16];
	snprintf(uname, sizeof(uname), "%s%s", un[u], suffix);
	fprintf(p->f, "<g class=\"axis\" id=\"%s\">\n", id);
	for (double v = 0; max > 0 && v <= max * 1.0001; v += step) {
		char lab[48];
		fmt_axis_bytes(lab, sizeof(lab), v, unit, uname);
		double y = top + height - height * v / max;
		fprintf(p->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			      "stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s"
			      "</text>\n", p->x0, y, p->x0 + p->pw, y, p->x0 - 4, y + 4, lab);
	}
	fprintf(p->f, "</g>\n");
}

static void draw_axes(const struct plot *p, const struct ht_timeline *tl)
{
	FILE *f = p->f;
	bytes_axis(p, "y-bytes", p->ymax, 5, p->y0, p->ph, "");
	bytes_axis(p, "y-rate", p->rmax, 2, p->r0, p->rh, "/s");
	/* time */
	double span = (double)(tl->end_ns - tl->o.from_ns);
	double tunit = span >= 2e9 ? 1e9 : span >= 2e6 ? 1e6 : span >= 2e3 ? 1e3 : 1;
	const char *tname = tunit == 1e9 ? "s" : tunit == 1e6 ? "ms" : tunit == 1e3 ? "us" : "ns";
	double tstep = nice_step(span, 8, tunit);
	double first = ceil((double)tl->o.from_ns / tstep) * tstep;
	double ybot = p->r0 + p->rh;
	fprintf(f, "<g class=\"axis\" id=\"x-time\">\n");
	for (double t = first; t <= (double)tl->end_ns; t += tstep) {
		double x = xpos(p, tl, (uint64_t)t);
		double v = t / tunit;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>"
			   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
			x, ybot, x, ybot + 4, x, ybot + 16);
		fprintf(f, v == floor(v) ? "%.0f %s" : "%.3g %s", v, tname);
		fprintf(f, "</text>\n");
	}
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time since the start (%s)"
		   "</text>\n</g>\n", p->x0 + p->pw / 2, ybot + 32, tname);
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
		   "stroke=\"#888\"/>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
		   "fill=\"none\" stroke=\"#888\"/>\n",
		p->x0, p->y0, p->pw, p->ph, p->x0, p->r0, p->pw, p->rh);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">allocation rate (bytes/s)</text>\n",
		p->x0 + 4, p->r0 + 12, RATE_COLOR);
}

static void bin_tooltip(FILE *f, const struct ht_timeline *tl, unsigned i0, unsigned i1)
{
	char a[32], b[32], c[32];
	ht_fputf(f, "%s .. %s", ht_fmt_ns(a, bin_start(tl, i0)), ht_fmt_ns(b, bin_start(tl, i1)));
	/* the bins read: the events' figures come from them alone */
	unsigned r1 = i1 < tl->bins_read ? i1 : tl->bins_read;
	if (r1 < i1)
		ht_fputf(f, "\nnot read%s%s: %s before it", r1 > i0 ? " from " : "",
			 r1 > i0 ? ht_fmt_ns(a, bin_start(tl, r1)) : "", unread_why(tl));
	const struct bin *last = &tl->bins[(r1 > i0 ? r1 : i1) - 1];
	for (int s = 0; s < NSER; s++) {
		uint64_t mn = UINT64_MAX, mx = 0;
		int have = 0;
		for (unsigned i = i0; i < (s == S_RSS ? i1 : r1); i++) {
			const struct bin *x = &tl->bins[i];
			if (s == S_RSS && !x->nrss)
				continue;
			have = 1;
			mn = x->min[s] < mn ? x->min[s] : mn;
			mx = x->max[s] > mx ? x->max[s] : mx;
		}
		if (!have)
			continue;
		ht_fputf(f, "\n%s: %s", series[s].label, ht_fmt_bytes(a, mn));
		if (mx != mn)
			ht_fputf(f, " .. %s", ht_fmt_bytes(b, mx));
		if (s != S_RSS && last->last[s] != mx)
			ht_fputf(f, " (then %s)", ht_fmt_bytes(c, last->last[s]));
	}
	if (r1 <= i0)
		return;
	uint64_t calls = 0, bytes = 0;
	for (unsigned i = i0; i < r1; i++)
		calls += tl->bins[i].calls, bytes += tl->bins[i].bytes;
	double secs = (double)tl->width_ns * (r1 - i0) / 1e9;
	ht_fputf(f, "\nallocations: %llu (%.0f/s), %s (%s/s)", (unsigned long long)calls,
		calls / secs, ht_fmt_bytes(a, bytes), ht_fmt_bytes(b, (uint64_t)(bytes / secs)));
}

/* What a damaged trace lacks, in one line (the SVG's note). */
static void damage_note(FILE *f, const struct ht_timeline *tl)
{
	char a[32], b[32];
	const struct ht_damage *d = &tl->dmg;
	if (d->tid && d->read_on && !d->thread_read)
		fprintf(f, "incomplete: the trace is damaged, none of thread %u's events could be "
			   "read; the figures lack its calls", d->tid);
	else if (d->tid && d->read_on)
		fprintf(f, "incomplete: the trace is damaged, thread %u's events stop at %s; the "
			   "figures after it (shaded) lack its calls",
			d->tid, ht_fmt_ns(a, d->thread_ns));
	else if (tl->short_tid)
		fprintf(f, "incomplete: the trace is cut short or damaged, thread %u's events "
			   "stop at %s and the others' at %s; the figures after %s (shaded) lack "
			   "calls",
			tl->short_tid, ht_fmt_ns(a, tl->exact_to_ns), ht_fmt_ns(b, tl->read_to_ns), a);
	else
		fprintf(f, "incomplete: the trace is cut short or damaged, its events were read up "
			   "to %s; what came after is not known (shaded)",
			ht_fmt_ns(a, tl->read_to_ns));
}

/* The ranges of a damaged trace, shaded as the paused ones are: from
 * exact_to_ns, one thread's events missing; from read_to_ns, nothing read. */
static void draw_damage(const struct plot *p, const struct ht_timeline *tl)
{
	char a[32];
	double top = p->y0, h = p->r0 + p->rh - p->y0;
	double xe = xpos(p, tl, tl->exact_to_ns), xr = xpos(p, tl, tl->read_to_ns);
	double xend = p->x0 + p->pw;
	if (xr > xe + 0.05) {
		fprintf(p->f, "<rect class=\"incomplete\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
			      "height=\"%.1f\" fill=\"#f2a541\" fill-opacity=\"0.18\"><title>"
			      "from %s: thread %u's events are missing (the trace is cut short or "
			      "damaged), the figures lack its calls</title></rect>\n",
			xe, top, xr - xe, h,
			ht_fmt_ns(a, tl->exact_to_ns), tl->short_tid);
	}
	if (tl->bins_read < tl->o.bins || xend > xr + 0.05) {
		fprintf(p->f, "<g class=\"not-read\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
			      "height=\"%.1f\" fill=\"#b00000\" fill-opacity=\"0.10\"/>", xr, top,
			xend - xr > 1 ? xend - xr : 1, h);
		if (xend - xr >= 60) /* (the label where it fits; the note says it anyway) */
			fprintf(p->f, "<text x=\"%.1f\" y=\"%.1f\" style=\"fill:#b00000\">not read"
				      "</text>", xr + 4, top + 14);
		fprintf(p->f, "<title>after %s: not read (%s)</title></g>\n",
			ht_fmt_ns(a, tl->read_to_ns), unread_why(tl));
	}
}

int ht_timeline__svg(const struct ht_timeline *tl, FILE *f, unsigned width, unsigned height)
{
	if (width < 300)
		width = 300;
	if (height < 200)
		height = 200;
	/* a damaged or open trace's note takes a line under the title */
	double dy = tl->damaged || tl->open_end ? 14 : 0;
	struct plot p = {f, 80, width - 100.0, 64 + dy, 0, 0, 0, 0, 0};
	double avail = height - p.y0 - 52;
	p.ph = avail * 0.74;
	p.r0 = p.y0 + p.ph + 12;
	p.rh = avail - p.ph - 12;
	for (unsigned i = 0; i < tl->o.bins; i++) {
		const struct bin *b = &tl->bins[i];
		for (int s = 0; s < NSER; s++)
			if ((s == S_RSS ? b->nrss : i < tl->bins_read) && b->max[s] > p.ymax)
				p.ymax = (double)b->max[s];
		if (per_s(tl, b->bytes) > p.rmax)
			p.rmax = per_s(tl, b->bytes);
	}
	if (p.ymax <= 0)
		p.ymax = 1024;
	p.ymax *= 1.05;
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%u\" "
		   "height=\"%u\" viewBox=\"0 0 %u %u\" class=\"heaptrail-timeline\">\n",
		width, height, width, height);
	fprintf(f, "<style>.heaptrail-timeline text { font-family: Verdana, sans-serif; "
		   "font-size: 11px; fill: #222; }\n.heaptrail-timeline .hover:hover "
		   "{ fill: #000; fill-opacity: 0.06; }</style>\n");
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"#fff\"/>\n", width,
		height);
	fprintf(f, "<text x=\"%.1f\" y=\"20\" text-anchor=\"middle\" style=\"font-size:15px\">",
		width / 2.0);
	ht_markup__text(f, tl->o.title ? tl->o.title : "heap over time", HT_MARKUP_ALL);
	fprintf(f, "</text>\n");
	char pk[32], pt[32];
	if (tl->damaged || tl->open_end) {
		fprintf(f, "<text id=\"damage\" x=\"%.1f\" y=\"36\" text-anchor=\"middle\" "
			   "style=\"fill:#b00000\">", width / 2.0);
		if (tl->damaged)
			damage_note(f, tl);
		else
			fprintf(f, "incomplete: %s; its events were read up to %s (shaded after)",
				unread_why(tl), ht_fmt_ns(pk, tl->read_to_ns));
		fprintf(f, "</text>\n");
	}
	char sb[128] = "";
	if (tl->o.trace_flags & HT_FILE_F_SAMPLED) /* (the figures of a sample: estimates) */
		snprintf(sb, sizeof(sb), " (estimates: a sampled trace)");
	/* the peak is the range's (the level carried in at --from counts) */
	char range[80] = "";
	if (tl->o.from_ns || tl->o.to_ns)
		snprintf(range, sizeof(range), " from %s to %s", ht_fmt_ns(pk, tl->o.from_ns),
			 ht_fmt_ns(pt, tl->end_ns));
	fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">peak of live "
		   "requested bytes%s: %s at %s%s</text>\n", width / 2.0, 36 + dy, range,
		ht_fmt_bytes(pk, tl->peak), ht_fmt_ns(pt, tl->peak_ns), sb);
	/* legend */
	fprintf(f, "<g id=\"legend\">\n");
	double lx = p.x0;
	for (int s = 0; s <= NSER; s++) {
		const char *label = s < NSER ? series[s].label : "allocation rate";
		const char *color = s < NSER ? series[s].color : RATE_COLOR;
		fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"12\" height=\"8\" fill=\"%s\"/>"
			   "<text x=\"%.1f\" y=\"%.0f\">%s</text>\n", lx, 46 + dy, color, lx + 15,
			54 + dy, label);
		lx += 15 + 7.0 * strlen(label) + 14;
	}
	fprintf(f, "</g>\n");
	if (tl->damaged || tl->open_end)
		draw_damage(&p, tl);
	/* paused ranges under everything */
	for (size_t i = 0; i < tl->npaused; i++) {
		double xa = xpos(&p, tl, tl->paused[i].from_ns), xb = xpos(&p, tl, tl->paused[i].to_ns);
		fprintf(f, "<rect class=\"paused\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
			   "height=\"%.1f\" fill=\"#bbb\" fill-opacity=\"0.35\"><title>recording paused "
			   "%s .. %s</title></rect>\n", xa, p.y0, xb - xa > 1 ? xb - xa : 1,
			p.r0 + p.rh - p.y0, ht_fmt_ns(pk, tl->paused[i].from_ns),
			ht_fmt_ns(pt, tl->paused[i].to_ns));
	}
	draw_axes(&p, tl);
	/* the allocation rate: a bar per bin */
	double bw = p.pw / tl->o.bins;
	fprintf(f, "<g id=\"alloc_rate\" class=\"series\" fill=\"%s\"><title>allocation rate"
		   "</title>\n<path d=\"", RATE_COLOR);
	for (unsigned i = 0; i < tl->o.bins && p.rmax > 0; i++) {
		double h = p.rh * per_s(tl, tl->bins[i].bytes) / p.rmax;
		if (h > 0)
			ht_fputf(f, "M%.1f %.1fh%.2fv%.1fh%.2fZ", p.x0 + i * bw, p.r0 + p.rh - h, bw, h,
				-bw);
	}
	fprintf(f, "M0 0\"/>\n</g>\n");
	for (int s = NSER - 1; s >= 0; s--)
		draw_series(&p, tl, s);
	/* markers */
	fprintf(f, "<g id=\"marks\">\n");
	for (size_t i = 0; i < tl->marks.n; i++) {
		double x = xpos(&p, tl, tl->marks.v[i].time_ns);
		fprintf(f, "<g class=\"mark\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			   "stroke=\"#444\" stroke-dasharray=\"3 3\"/><text x=\"%.1f\" y=\"%.1f\" "
			   "transform=\"rotate(-90 %.1f %.1f)\" text-anchor=\"end\">",
			x, p.y0, x, p.r0 + p.rh, x - 2, p.y0 + 4, x - 2, p.y0 + 4);
		ht_markup__text(f, tl->marks.v[i].label, HT_MARKUP_ALL);
		fprintf(f, "</text><title>mark \"");
		ht_markup__text(f, tl->marks.v[i].label, HT_MARKUP_ALL);
		fprintf(f, "\" at %s, thread %u</title></g>\n", ht_fmt_ns(pk, tl->marks.v[i].time_ns),
			tl->marks.v[i].tid);
	}
	fprintf(f, "</g>\n");
	/* tooltips: a column per bin (or per group of bins past 2000) */
	unsigned group = (tl->o.bins + 1999) / 2000;
	fprintf(f, "<g id=\"tooltips\" fill=\"#000\" fill-opacity=\"0\">\n");
	for (unsigned i = 0; i < tl->o.bins; i += group) {
		unsigned e = i + group < tl->o.bins ? i + group : tl->o.bins;
		ht_fputf(f, "<rect class=\"hover\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
			   "height=\"%.1f\"><title>", p.x0 + i * bw, p.y0, bw * (e - i),
			p.r0 + p.rh - p.y0);
		bin_tooltip(f, tl, i, e);
		fprintf(f, "</title></rect>\n");
	}
	fprintf(f, "</g>\n</svg>\n");
	return ferror(f) ? -1 : 0;
}
