/* The live model of `heaptrail live`: fed by the pass event by event, it
 * keeps what the screen shows at any moment of the trace, at a cost of a
 * few array updates per event:
 *
 *  - per cell (a stack node of record --stacks, and a size class x thread),
 *    live requested bytes and blocks, allocations and bytes allocated, and
 *    all four as they were at the moment of the peak (taken lazily: a
 *    cell's value at the peak is copied only when the cell changes after
 *    the peak, so a new peak costs one increment, not a copy of the table);
 *  - per thread: live bytes (of the blocks it allocated), calls, bytes
 *    allocated, frees of blocks another thread allocated, and rates;
 *  - totals, the peak and its time, the recording switch's state;
 *  - the heap over time as at most HT_LT_STRIP points whose width doubles
 *    when the run outgrows them.
 *
 * Memory follows the live set and the number of distinct stacks (the
 * reader's node table, which this model mirrors with one cell per node),
 * not the number of events.
 *
 * The table rows are built on demand (ht_livetop__rows, about once a
 * second): with stacks, the functions on the stacks (own: the function
 * allocated itself; total: it is anywhere on the stack), each that
 * allocates opening onto the call paths that lead to its own allocations,
 * the others (main, a thread's start) counting blocks, allocations and
 * bytes through them; without, the size classes, each opening onto the
 * threads. */
#ifndef HEAPTRAIL_ANALYZE_LIVETOP_H
#define HEAPTRAIL_ANALYZE_LIVETOP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "analyze/pass.h"
#include "symbols/symbolize.h"
#include "trace/reader.h"

#define HT_LT_STRIP 256 /* points of the heap-over-time strip */

/* The rates' window: calls counted in slots of 2^27 ns (134 ms) of trace
 * time, the last HT_LT_RATE_SLOTS of them (about a second) kept. */
#define HT_LT_RATE_SHIFT 27
#define HT_LT_RATE_SLOTS 8

/* One slot of calls. */
struct ht_lt_rate {
	uint64_t slot;          /* its index + 1 (time >> HT_LT_RATE_SHIFT), 0: empty */
	uint64_t allocs, frees; /* calls in it (weighted) */
};

/* What the table counts. */
enum ht_lt_mode { HT_LT_LIVE, HT_LT_PEAK, HT_LT_ALLOCATED, HT_LT_NMODES };
/* Its columns, also the sort keys. */
enum ht_lt_col { HT_LT_OWN, HT_LT_TOTAL, HT_LT_BLOCKS, HT_LT_ALLOCS, HT_LT_BYTES, HT_LT_NCOLS };

struct ht_lt_totals {
	uint64_t time_ns;       /* of the last event fed */
	int64_t live_bytes;     /* requested */
	int64_t live_usable;    /* usable */
	int64_t live_blocks;
	int64_t peak_bytes;     /* highest live_bytes so far */
	uint64_t peak_ns;       /* when */
	uint64_t allocs, frees; /* calls so far */
	uint64_t alloc_bytes;   /* bytes allocated so far */
	uint64_t events;        /* events fed */
	double alloc_rate, free_rate; /* calls per second over the second before time_ns */
	int recording;          /* 1 on, 0 paused or stopped (control events) */
	int stacks;             /* events with stacks were seen */
};

struct ht_lt_thread {
	uint32_t tid;
	int64_t live_bytes;     /* of the live blocks it allocated */
	int64_t live_blocks;
	uint64_t allocs, frees, alloc_bytes;
	uint64_t cross_frees;   /* frees here of blocks another thread allocated */
	double alloc_rate, free_rate; /* per second over the second before the tick */
	struct ht_lt_rate rate[HT_LT_RATE_SLOTS]; /* its recent calls */
};

/* One row of the table, as shown. */
struct ht_lt_row {
	int depth;          /* 0: a function (or size class); deeper: a caller (thread) */
	int has_children;
	int open;
	uint64_t path;      /* identifies the row across refreshes (open set, cursor) */
	char label[160];    /* function, or "caller (file:line)", or class, or thread */
	int64_t v[HT_LT_NCOLS]; /* own (depth 0 only, else -1), total, blocks, allocs, bytes */
};

struct ht_lt_query {
	enum ht_lt_mode mode;
	enum ht_lt_col sort;
	int by_class;           /* size class x thread even with stacks */
	const char *search;     /* keep the functions whose stacks hold it, NULL all */
	/* whether the row of this path is open */
	int (*is_open)(void *ctx, uint64_t path);
	void *ctx;
	size_t max_rows;        /* rows returned at most */
};

struct ht_livetop; /* opaque */

/* r: the trace (stack nodes, modules); sym: NULL to show addresses. */
struct ht_livetop *ht_livetop__new(struct ht_reader *r, struct ht_symbolizer *sym);
void ht_livetop__delete(struct ht_livetop *lt);
/* Replaces the symbolizer (after new modules appeared); NULL: none. */
void ht_livetop__set_symbolizer(struct ht_livetop *lt, struct ht_symbolizer *sym);

/* Applies an event the pass applied (op: what it did). */
void ht_livetop__event(struct ht_livetop *lt, const struct ht_event *e, const struct ht_blockop *op);
/* The trace is known up to t_ns with no event since the last one fed (a
 * program that allocates nothing for a while, or the end of the run): the
 * strip carries what is live up to t_ns. */
void ht_livetop__advance(struct ht_livetop *lt, uint64_t t_ns);
/* Computes the rates at trace time now_ns (the moment shown): the calls
 * of the second before it, per second (of the time since the start when
 * that is shorter).  The same for a trace being followed and a finished
 * one, at its end or at a cursor: before, a finished trace showed its
 * rates averaged since the start. */
void ht_livetop__tick(struct ht_livetop *lt, uint64_t now_ns);

const struct ht_lt_totals *ht_livetop__totals(const struct ht_livetop *lt);
size_t ht_livetop__threads(const struct ht_livetop *lt, const struct ht_lt_thread **t);
/* The strip: n points of width ns each from time 0, the maximum of live
 * bytes in each. */
size_t ht_livetop__strip(const struct ht_livetop *lt, const int64_t **max_live, uint64_t *width_ns);

/* The table's rows, in order, open rows followed by their children; the
 * count (at most q->max_rows) in *n.  Valid until the next call. */
const struct ht_lt_row *ht_livetop__rows(struct ht_livetop *lt, const struct ht_lt_query *q,
					 size_t *n);

/* The frames of the largest cells of the mode (at most max cells), as text
 * for a snapshot: "N bytes in M blocks (A allocations) at:\n  frames\n". */
void ht_livetop__write_text(struct ht_livetop *lt, enum ht_lt_mode mode, size_t max, FILE *out);

/* "12.3 MiB" */
const char *ht_lt_bytes(char *buf, size_t len, double bytes);

#endif
