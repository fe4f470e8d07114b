/* How far a trace that is cut short or damaged was read, for the analyses
 * that state figures at a time (leaks, leaks --at, diff --at): past
 * read_to_ns nothing was read, so the figures of a later time are those of
 * read_to_ns, and frees after it are not in them; from exact_to_ns on, one
 * thread's events may be missing.  Timeline keeps the same records per
 * thread of the pass and calls ht_readto__bounds itself (timeline.c,
 * find_damage); leaks and diff keep them by tid, so that a reader can be
 * drained without the pass:
 *
 *	struct ht_readto rt = {0};
 *	while ((e = ht_analyze__next_event(r)))
 *		ht_readto__event(&rt, e);
 *	ht_readto__finish(&rt, r);
 *	... rt.damaged, rt.read_to_ns, rt.exact_to_ns, rt.short_tid ...
 *	ht_readto__free(&rt);
 *
 * Header-only (static inline): leaks (cli) and diff (analyze) share it. */
#ifndef HEAPTRAIL_ANALYZE_READTO_H
#define HEAPTRAIL_ANALYZE_READTO_H

#include <stdint.h>
#include <stdlib.h>

#include "common/nodetab.h"
#include "trace/reader.h"

/* One thread's events as read (a nodetab record, keyed by tid). */
struct ht_readto_thread {
	uint32_t tid1;    /* tid + 1, 0 = empty slot */
	uint8_t seen;     /* it has had an event */
	uint8_t exited;   /* its THREAD_EXIT was read: nothing of it is missing after */
	uint8_t headless; /* its first event read was not its first (seq 0): its start is lost */
	uint64_t last_ns; /* its last event read */
};

struct ht_readto {
	struct ht_readto_thread *thr; /* per thread */
	size_t cap, n;                /* slots / used */
	/* Set by ht_readto__finish: */
	int damaged;          /* the reader had an error: not all of the trace was read */
	uint64_t read_to_ns;  /* events read up to here; UINT64_MAX if all were (the
			       * time after the last event is the run's quiet end) */
	uint64_t exact_to_ns; /* every thread's events in up to here; UINT64_MAX if all */
	uint32_t short_tid;   /* the thread whose events stop at exact_to_ns, if that is
			       * before read_to_ns, else 0 */
};

/* e, an event of x's thread, in the reader's order. */
static inline void ht_readto__thread_event(struct ht_readto_thread *x, const struct ht_event *e)
{
	if (__builtin_expect(!x->seen, 0)) {
		x->seen = 1;
		x->tid1 = e->tid + 1;
		x->headless = e->seq != 0;
	}
	x->last_ns = e->time_ns;
	if (__builtin_expect(e->kind == HT_EV_THREAD_EXIT, 0))
		x->exited = 1;
}

/* Each event the reader delivers, in order. */
static inline void ht_readto__event(struct ht_readto *rt, const struct ht_event *e)
{
	ht_readto__thread_event(
		ht_nodetab__get((void **)&rt->thr, &rt->cap, &rt->n, sizeof(*rt->thr), e->tid), e);
}

/* Where the reading of a damaged trace (d, the reader's account) leaves
 * the figures, from the threads' records v[0..n) (slots never used are
 * skipped) and end, the time read to when nothing is missing: *read_to
 * (events read up to there), *exact_to (every thread's up to there) and
 * *short_tid (the thread whose events stop at *exact_to, if that is before
 * *read_to, else 0).  A cut file stops every thread's stream at one place
 * in the file, each at a time of its own: a thread's stream holds its
 * events in the order they happened, written in chunks as its buffer
 * filled, and one cut short ends at its last event read, which may be
 * long before another thread's last event.  A thread that exited lacks
 * nothing; one whose first events are lost lacks them from the trace's
 * start.  One thread's damaged chunk (the others read on to the file's
 * end) ends that thread's events only.  Returns the time from which
 * events may be missing (before it is limited to *read_to). */
static inline uint64_t ht_readto__bounds(const struct ht_damage *d,
					 const struct ht_readto_thread *v, size_t n, uint64_t end,
					 uint64_t *read_to, uint64_t *exact_to, uint32_t *short_tid)
{
	uint64_t exact = d->exact_to_ns;
	uint32_t tid = d->tid;
	if (!d->tid) {
		uint64_t stop = UINT64_MAX;
		uint32_t stop_tid = 0;
		for (size_t i = 0; i < n; i++) {
			const struct ht_readto_thread *x = &v[i];
			uint64_t t = !x->seen || x->exited ? UINT64_MAX : x->headless ? 0 : x->last_ns;
			if (t < stop) {
				stop = t;
				stop_tid = x->tid1 - 1;
			}
		}
		if (stop < exact) {
			exact = stop;
			tid = stop_tid;
		}
	}
	*read_to = end;
	if (!(d->tid && d->read_on) && d->last_ns < *read_to)
		*read_to = d->last_ns;
	*exact_to = exact < *read_to ? exact : *read_to;
	*short_tid = *exact_to < *read_to ? tid : 0;
	return exact;
}

/* After the reading stopped (at the end, or at an error). */
static inline void ht_readto__finish(struct ht_readto *rt, const struct ht_reader *r)
{
	struct ht_damage d;
	rt->damaged = 0;
	rt->read_to_ns = rt->exact_to_ns = UINT64_MAX;
	rt->short_tid = 0;
	if (!ht_reader__damage(r, &d))
		return;
	rt->damaged = 1;
	ht_readto__bounds(&d, rt->thr, rt->cap, UINT64_MAX, &rt->read_to_ns, &rt->exact_to_ns,
			  &rt->short_tid);
}

static inline void ht_readto__free(struct ht_readto *rt)
{
	free(rt->thr);
	rt->thr = NULL;
	rt->cap = rt->n = 0;
}

#endif
