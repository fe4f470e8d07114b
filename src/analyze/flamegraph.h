/* heaptrail flamegraph's folding of per-stack totals into flame graph
 * stacks, for the commands that draw flame graphs of their own (report). */
#ifndef HEAPTRAIL_ANALYZE_FLAMEGRAPH_H
#define HEAPTRAIL_ANALYZE_FLAMEGRAPH_H

#include <stddef.h>

#include "analyze/flamesvg.h"
#include "analyze/stackstats.h"
#include "symbols/symbolize.h"
#include "trace/reader.h"

/* What a flame graph's widths measure (flamegraph --metric). */
enum ht_flame_metric {
	HT_FLAME_ALLOCATED,   /* bytes allocated */
	HT_FLAME_ALLOCATIONS, /* allocation calls */
	HT_FLAME_LEAKED,      /* bytes live at the end */
	HT_FLAME_PEAK,        /* bytes live at the peak of the heap */
	HT_FLAME_TEMPORARY,   /* temporary allocations */
};

/* One stack per distinct symbolized call path (outermost first, or
 * innermost first if reverse), sorted, with the metric's value and the
 * allocations behind it; stacks whose value is 0 are left out.  The
 * caller frees each .stack and the array. */
struct ht_flame_stack *ht_flamegraph__fold(struct ht_reader *r, struct ht_symbolizer *sym,
					   const struct ht_stackstats *ss, int metric, int reverse,
					   size_t *nout);

/* Writes the flame graph (outermost frames at the bottom) of the stacks'
 * metric as SVG, as ht_flame__svg would draw the stacks
 * ht_flamegraph__fold gives, byte for byte, without joining and parsing
 * them: each stack node's frames are resolved and put in the tree once.
 * Returns the number of frames drawn. */
int ht_flamegraph__svg(FILE *f, struct ht_reader *r, struct ht_symbolizer *sym,
		       const struct ht_stackstats *ss, int metric, const struct ht_flame_style *style);

#endif
