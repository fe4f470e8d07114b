/* glibc's heap internals seen from a trace (heaptrail heap): the arenas and
 * the threads that used them, each non-main heap and its size over time,
 * the main heap's break, the dynamic mmap/trim thresholds as glibc moves
 * them, calls that took far longer than their peers (lock waits), and the
 * end-of-run summary with fragmentation.  The rules, each with its place
 * in glibc 2.36's malloc, are in docs/heap.md.
 *
 * A collector fed one event at a time, so that a command that reads the
 * trace once for several reports (heaptrail report) can feed it from its
 * own pass:
 *
 *	h = ht_heapinfo__new(r);
 *	p = ht_pass__new();
 *	while (ht_reader__next(r, &ev))
 *		ht_heapinfo__event(h, &ev, ht_pass__event(p, &ev));
 *	ht_heapinfo__finish(h, r);
 *	ht_heapinfo__text(h, stdout);
 *	ht_heapinfo__delete(h);
 *
 * Memory is bounded by the live blocks, the threads and the heaps, never
 * by the number of events (time series are thinned to at most
 * HT_HEAPINFO_MAX_SAMPLES points). */
#ifndef HEAPTRAIL_ANALYZE_HEAPINFO_H
#define HEAPTRAIL_ANALYZE_HEAPINFO_H

#include <stdint.h>
#include <stdio.h>

#include "analyze/pass.h"
#include "trace/reader.h"

struct ht_json;
struct ht_heapinfo; /* opaque */

/* Points kept per time series (heap sizes, the break); older points are
 * thinned to every other one when a series is full. */
#define HT_HEAPINFO_MAX_SAMPLES 2048

/* A collector for the trace r is open on (its header gives the start of
 * the heap, the clock rate and the RSS samples).  NULL if out of memory. */
struct ht_heapinfo *ht_heapinfo__new(const struct ht_reader *r);
/* Reports only what happens in [from_ns, to_ns] (ns since the start;
 * to_ns 0 = the end); earlier events still build the state (live blocks,
 * thresholds, arenas, the break), later ones are ignored: counts of events
 * are the window's, and a peak it does not pass is at from_ns.  Call
 * before the events. */
void ht_heapinfo__window(struct ht_heapinfo *h, uint64_t from_ns, uint64_t to_ns);
/* One event, in the reader's order, and what it did to the pass's live
 * blocks (the collector keeps each block's arena in it). */
void ht_heapinfo__event(struct ht_heapinfo *h, const struct ht_event *ev,
			const struct ht_blockop *op);
/* After the last event: the peaks, percentiles and lock waits. */
void ht_heapinfo__finish(struct ht_heapinfo *h, const struct ht_reader *r);
/* Renderers, after finish: a text report; the report's members written
 * into the JSON object the caller has open (arenas, heaps, main_heap,
 * sbrk_bytes, thresholds, lock_waits, summary); an HTML fragment (a table
 * and an inline SVG of the heap sizes over time, no external resources). */
void ht_heapinfo__text(const struct ht_heapinfo *h, FILE *f);
void ht_heapinfo__json(const struct ht_heapinfo *h, struct ht_json *j);
void ht_heapinfo__html(const struct ht_heapinfo *h, FILE *f);
void ht_heapinfo__delete(struct ht_heapinfo *h);

#endif
