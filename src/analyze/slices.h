/* One trace read in time slices, one per thread, for the models that add
 * up across a cut in time (stats, timeline): docs/FORMAT.md, "Time
 * slices".  Each slice is read by a serial reader of its own that starts
 * at the chunks just before the slice and feeds a pass and models of its
 * own; the
 * slices are then added in time order, the blocks live at the end of each
 * telling the releases the next did not know.  The result is the serial
 * reader's, byte for byte; where the slices cannot give it (an address
 * handed out while live across a cut, a control event, a warning or an
 * error while reading, times that go back), nothing is returned and the
 * caller reads the trace serially. */
#ifndef HEAPTRAIL_ANALYZE_SLICES_H
#define HEAPTRAIL_ANALYZE_SLICES_H

#include "analyze/stats.h"
#include "trace/reader.h"

/* Slices only for traces of at least this many events (a shorter one is
 * read faster than the slices are set up); HEAPTRAIL_SLICE_MIN_EVENTS
 * overrides it (the tests slice small traces). */
#define HT_SLICE_MIN_EVENTS 2000000

/* The models a trace is read into in slices. */
struct ht_timeline_opts;
struct ht_timeline;
struct ht_slices_want {
	int stats;                               /* a stats model */
	const struct ht_timeline_opts *timeline; /* a timeline with these options, or NULL */
};
struct ht_slices_got {
	struct ht_stats *stats;
	struct ht_timeline *timeline; /* not finished: ht_timeline__finish with r */
};
/* Reads the trace at path, which r (ht_reader__open_info, no event read)
 * has open, in as many slices as -j asks for threads (not given: one per
 * CPU), into the models w asks for, which *g then holds (the caller owns
 * them); r then stands for the slices (ht_reader__slices_done).  -1 if it
 * was not read so (one thread asked, a trace or models that do not suit,
 * or a slice that could not be placed): r is as it was, and the caller
 * reads serially. */
int ht_slices__read(const char *path, struct ht_reader *r, const struct ht_slices_want *w,
		    struct ht_slices_got *g);
/* Reads the trace at path, which r (ht_reader__open_info, no event read)
 * has open, in as many slices as -j asks for threads (not given: one per
 * CPU), into a stats model;
 * r then stands for the slices (ht_reader__slices_done).  NULL if it was
 * not read so (one thread asked, a trace that does not suit, or a slice
 * that could not be placed): r is as it was, and the caller reads
 * serially. */
struct ht_stats *ht_slices__stats(const char *path, struct ht_reader *r);
/* HT_SLICE_MIN_EVENTS, or HEAPTRAIL_SLICE_MIN_EVENTS. */
uint64_t ht_slices__min_events(void);
/* The slices -j asks for (not given: one per CPU); below 2, none. */
unsigned ht_slices__wanted(void);

#endif
