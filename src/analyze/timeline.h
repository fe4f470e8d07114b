/* The heap over time: a collector fed one event at a time, in the trace's
 * order, that keeps a fixed number of time bins (memory stays constant
 * however long the trace), then renders them as SVG, CSV or JSON.
 *
 * Series, each bin keeping its min, max and last value so that a spike
 * shorter than a bin is not lost:
 *   live requested bytes, live usable bytes (the live-block rules of
 *   the pass, pass.h, the same figures as `stats`), RSS (the recorder's
 *   samples), program break size (break - start_brk), mmapped-chunk bytes
 *   (live blocks glibc mmapped), the program's own mmapped bytes
 *   (mmap/munmap/mremap: the pages mapped, mmranges.h); plus the
 *   allocation calls and bytes of each bin (the allocation rate).
 * Also kept: heaptrail_mark() markers and the ranges where recording was
 * paused or stopped.
 *
 * Use:
 *   struct ht_timeline_opts o;
 *   ht_timeline__opts_init(&o, ht_reader__info(r));   (then o.bins = ...)
 *   struct ht_timeline *tl = ht_timeline__new(&o);
 *   while (ht_reader__next(r, &ev)) ht_timeline__event(tl, &ev, ht_pass__event(p, &ev));
 *   ht_timeline__finish(tl, r);
 *   ht_timeline__svg(tl, f, 1200, 600);  ...  ht_timeline__delete(tl); */
#ifndef HEAPTRAIL_ANALYZE_TIMELINE_H
#define HEAPTRAIL_ANALYZE_TIMELINE_H

#include <stdint.h>
#include <stdio.h>

#include "analyze/marks.h"
#include "analyze/pass.h"
#include "trace/reader.h"

struct ht_json;
struct ht_timeline; /* opaque */

struct ht_timeline_opts {
	unsigned bins;        /* time bins (--bins, 1000), 1..HT_TIMELINE_MAX_BINS */
	uint64_t from_ns;     /* --from: start of the range, ns since the trace's start (0) */
	uint64_t to_ns;       /* --to: end of the range, 0 = the end of the trace */
	uint64_t duration_ns; /* how long the trace lasts, if known; 0 = unknown */
	int duration_exact;   /* duration_ns is final (closed trace): events past it go to
			       * the last bin; else bins merge pairwise when time runs past,
			       * and the bins past the last event read are not read */
	int being_written;    /* a recorder still writes the trace (not closed yet) */
	uint64_t start_brk;   /* where the heap starts (ht_trace_info), 0 = first break seen */
	const char *title;    /* the SVG's title, NULL = "heap over time" */
	uint64_t trace_flags; /* the trace's HT_FILE_F_* (sampled: its JSON says so) */
	uint64_t sample_bytes; /* and its sampling (ht_trace_info) */
	uint32_t sample_every;
};

#define HT_TIMELINE_MAX_BINS 1000000
#define HT_TIMELINE_MAX_MARKS HT_MARKS_MAX /* markers kept; later ones are counted only */

/* Defaults (1000 bins, the whole trace) and what the trace's info says
 * (duration, start_brk, title). */
void ht_timeline__opts_init(struct ht_timeline_opts *o, const struct ht_trace_info *in);
/* NULL if out of memory. */
struct ht_timeline *ht_timeline__new(const struct ht_timeline_opts *o);
/* Every event of the trace, in the reader's order (events before --from
 * too: they make the live set). */
void ht_timeline__event(struct ht_timeline *tl, const struct ht_event *ev,
			const struct ht_blockop *op);
/* After the last event: takes the RSS samples, fills the bins to the end,
 * and, for a trace the reader found cut or damaged (ht_reader__damage),
 * notes where its events stop: the bins past them are not shown as data
 * (empty in the CSV, null in the JSON, shaded "not read" in the SVG); and
 * from where one thread's are missing (a damaged chunk of it; a cut
 * trace, whose threads' streams each stop at a time of their own: the
 * earliest of a thread that did not exit), shaded too. */
void ht_timeline__finish(struct ht_timeline *tl, struct ht_reader *r);
/* A self-contained <svg> element (no XML prolog: it also goes inline in
 * HTML): axes with units, legend, tooltips (<title>), markers, paused
 * ranges.  Returns 0, or -1 if f reported a write error. */
int ht_timeline__svg(const struct ht_timeline *tl, FILE *f, unsigned width, unsigned height);
/* A header row, then one row per bin; the marks cell holds the bin's
 * labels as a JSON array. */
int ht_timeline__csv(const struct ht_timeline *tl, FILE *f);
/* The timeline as one JSON object (under key, or at the top if NULL). */
void ht_timeline__json(const struct ht_timeline *tl, struct ht_json *j, const char *key);
/* The peak of live requested bytes in the range and when: with --from, the
 * level carried in counts, at from_ns; over the whole trace, stats'
 * peak_live_bytes. */
uint64_t ht_timeline__peak(const struct ht_timeline *tl, uint64_t *time_ns);
/* Where the figures stop being exact on a damaged trace (ht_timeline__finish:
 * a thread that did not exit stops there, *tid; 0 if every thread's events
 * go on to where reading stopped), UINT64_MAX on a whole one. */
uint64_t ht_timeline__exact_to(const struct ht_timeline *tl, uint32_t *tid);
void ht_timeline__delete(struct ht_timeline *tl);

/* Time slices (analyze/slices.c): the trace read in parts, each into a
 * timeline of its own over the same bins, added in time order.  A slice
 * knows the live figures only up to the blocks from before it that it
 * releases: at each such release it keeps its bin's figures so far and
 * its highest ones, which ht_timeline__slice_add tells once the slices
 * before are known; it keeps the program's own mapping calls, to replay
 * them on the mappings before it, and the breaks as they are.  Only over
 * the whole of a closed trace (no --from or --to). */
int ht_timeline__sliceable(const struct ht_timeline_opts *o);
struct ht_timeline_slice;
/* A slice (the first: the trace's start, its figures the true ones).
 * NULL if out of memory. */
struct ht_timeline_slice *ht_timeline__slice_new(const struct ht_timeline_opts *o, int first);
/* One event of the slice; deferred: it releases an address the slice did
 * not hand out (slicerel.h). */
void ht_timeline__slice_event(struct ht_timeline_slice *sl, const struct ht_event *ev,
			      const struct ht_blockop *op, int deferred);
/* Mapping calls kept so far (to bound a slice's memory). */
size_t ht_timeline__slice_kept(const struct ht_timeline_slice *sl);
/* Adds the next slice sl to tl, the timeline of the slices before it; rs:
 * what each of its deferred releases released. */
struct ht_slice_releases;
void ht_timeline__slice_add(struct ht_timeline *tl, struct ht_timeline_slice *sl,
			    const struct ht_slice_releases *rs);
/* The first slice's timeline, which the caller then owns (the slices are
 * added into it, then ht_timeline__finish with the trace's reader). */
struct ht_timeline *ht_timeline__slice_take(struct ht_timeline_slice *sl);
void ht_timeline__slice_delete(struct ht_timeline_slice *sl);

#endif
