/* The summary of a trace (heaptrail stats), as a collector fed one event
 * at a time, so that `report` can feed it from the pass it shares with
 * other collectors; rendered as text or JSON. */
#ifndef HEAPTRAIL_ANALYZE_STATS_H
#define HEAPTRAIL_ANALYZE_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "analyze/marks.h"
#include "analyze/mmranges.h"
#include "analyze/pass.h"
#include "trace/reader.h"

#define HT_STATS_SIZE_BUCKETS 65 /* power-of-two size classes: <=1, 2, 3..4, ... */
#define HT_STATS_LIFE_BUCKETS 10 /* <1us, <10us, ..., <100s, >=100s */

struct ht_stats_thread {
	uint32_t tid;             /* thread */
	char name[HT_MAX_STR + 1]; /* last name set */
	uint64_t events;          /* events of the thread */
	uint64_t allocations;     /* successful allocations */
	uint64_t frees;           /* free() of non-NULL, realloc releasing a block */
	uint64_t bytes_allocated; /* requested bytes */
};

struct ht_stats {
	uint64_t events;             /* events read (calls and the rest) */
	uint64_t calls[HT_EV_NR];    /* calls per kind (weighted in sampled traces) */
	uint64_t failed[HT_EV_NR];   /* failed calls per kind */
	uint64_t bytes_by[HT_EV_NR]; /* requested bytes per allocating kind */
	uint64_t ts_taken;           /* events that read the clock (the rest are dated by their thread) */
	uint64_t free_null;          /* free(NULL) */
	uint64_t bytes_allocated;    /* requested bytes, all allocations */
	uint64_t usable_allocated;   /* usable bytes of those */
	uint64_t live_bytes, live_usable, live_blocks; /* live now (at the end: at exit) */
	uint64_t peak_bytes;         /* the most requested bytes live at once */
	uint64_t peak_usable;        /* the most usable bytes live at once */
	uint64_t peak_blocks;        /* blocks live at peak_bytes */
	uint64_t peak_usable_at;     /* usable bytes live at peak_bytes (peak_usable may be
				      * reached at another moment) */
	uint64_t peak_time;          /* when peak_bytes was reached (ns) */
	uint64_t max_blocks;         /* the most blocks live at once */
	uint64_t cross_thread_frees; /* blocks freed by another thread than their allocator */
	uint64_t unknown_frees;      /* frees of blocks the trace never handed out */
	uint64_t inversions;         /* addresses handed out while live */
	uint64_t re_calls, re_moved, re_inplace, re_as_malloc, re_as_free, re_failed; /* realloc */
	uint64_t mm_calls, mm_mapped, mm_unmapped, mm_peak; /* the program's own mmaps */
	uint64_t mm_prot_none; /* of mm_mapped, mapped PROT_NONE: address space reserved
				* (a JVM's heap, Go's arenas, sanitizers' shadow), which
				* an mprotect (not traced) may make memory later */
	int64_t mm_live;             /* bytes the program has mapped now: what mm_ranges cover */
	struct ht_mmranges mm_ranges; /* the pages its own mmap calls mapped (mmranges.h) */
	uint64_t mmc_allocs, mmc_bytes; /* allocations glibc served by mmap */
	uint64_t brk_initial, brk_final, brk_max, brk_events; /* program break */
	uint64_t size_hist[HT_STATS_SIZE_BUCKETS]; /* allocations by requested size */
	uint64_t life_hist[HT_STATS_LIFE_BUCKETS]; /* freed blocks by lifetime */
	uint64_t thread_starts, thread_exits, forks; /* those events */
	uint64_t last_time;          /* time_ns of the latest event */
	struct ht_stats_thread *threads; /* per thread, in order of appearance */
	size_t nthreads, capthreads; /* used / allocated */
	struct ht_marks marks;       /* heaptrail_mark() labels in order, the first HT_MARKS_MAX */
	struct ht_pauses pauses;     /* recording off (pause, stop, a start paused) */
};

struct ht_json;

struct ht_stats *ht_stats__new(const struct ht_trace_info *in);
/* One event and what it did to the pass's live blocks. */
void ht_stats__event(struct ht_stats *s, const struct ht_event *e, const struct ht_blockop *op);
/* The stats --json object (complete: the trace read without error). */
void ht_stats__json(const struct ht_stats *s, struct ht_json *j, const struct ht_trace_info *in,
		    const char *path, int complete);
/* The stats text summary. */
void ht_stats__text(const struct ht_stats *s, FILE *f, const struct ht_reader *r,
		    const char *path);
/* How long the trace lasts: its header's duration, or its last event's time
 * if later. */
uint64_t ht_stats__duration(const struct ht_stats *s, const struct ht_trace_info *in);
void ht_stats__delete(struct ht_stats *s);

/* Time slices (analyze/slices.c): the trace read in parts, each from the
 * pass of its own reader, added in time order.  A slice's model counts as
 * stats does, but the blocks it releases that it did not hand out are
 * unknown to it: it keeps those releases, and the highest live figures
 * between two of them, for ht_stats__slice_add to tell once the slices
 * before it are known.  So are the mappings made before it: it keeps the
 * program's own mmap, munmap and mremap calls, in order, to replay them
 * on the mappings of the slices before. */
struct ht_stats_slice;
/* first: the slice that starts the trace (its figures are true as they
 * are: ht_stats__slice_take gives them). */
struct ht_stats_slice *ht_stats__slice_new(const struct ht_trace_info *in, int first);
/* One event of the slice and what it did to the slice's pass; deferred:
 * it releases an address the slice did not hand out (slicerel.h), which
 * ends a segment of its live figures. */
void ht_stats__slice_event(struct ht_stats_slice *sl, const struct ht_event *e,
			   const struct ht_blockop *op, int deferred);
/* Mapping calls kept so far (to bound the memory of a slice). */
size_t ht_stats__slice_kept(const struct ht_stats_slice *sl);
/* Adds the next slice sl to s, the model of the slices before it: rs
 * tells what each release it could not place released (ht_slice_releases,
 * in order, one per deferred event). */
struct ht_slice_releases;
void ht_stats__slice_add(struct ht_stats *s, struct ht_stats_slice *sl,
			 const struct ht_slice_releases *rs);
/* The slice's model, which the caller then owns (the first slice's: the
 * start of the combined one). */
struct ht_stats *ht_stats__slice_take(struct ht_stats_slice *sl);
void ht_stats__slice_delete(struct ht_stats_slice *sl);

#endif
