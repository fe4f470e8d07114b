/* Per-stack totals of a trace, for the stack analyzers (flamegraph, top,
 * report): bytes and calls allocated, temporary allocations, what was live
 * at the peak of the heap and at the end, and the biggest single
 * allocations.  One pass over the trace: what each stack held at the peak
 * is kept by a lazy snapshot (a stack's live bytes are saved the first
 * time they change after a new peak), so the collector can be fed from a
 * pass that other collectors share. */
#ifndef HEAPTRAIL_ANALYZE_STACKSTATS_H
#define HEAPTRAIL_ANALYZE_STACKSTATS_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/pass.h"
#include "trace/reader.h"

/* 72 bytes: the peak and end figures share the fields of the collection
 * state that finish turns into them.  (It was 64, a cache line, without
 * temp_bytes; top showed the stack's allocated bytes beside its count of
 * temporaries, 4.8 MiB for one temporary of 32 bytes.) */
struct ht_stackstat {
	uint32_t node;         /* stack node + 1 (0 = empty slot) */
	uint32_t snap_peak;    /* peak number snap_* were saved for */
	uint64_t alloc_bytes;  /* requested by its allocations */
	uint64_t alloc_calls;  /* allocations that returned a block */
	uint64_t temp_calls;   /* freed before their thread's next allocation or free */
	uint64_t temp_bytes;   /* requested by those */
	union {
		uint64_t live_bytes; /* live now (while collecting) */
		uint64_t end_bytes;  /* live at the end (after finish) */
	};
	union {
		uint64_t live_blocks; /* blocks of those */
		uint64_t end_blocks;
	};
	union {
		uint64_t snap_bytes; /* live_bytes when the peak snap_peak was reached */
		uint64_t peak_bytes; /* live when the heap peaked (after finish) */
	};
	union {
		uint64_t snap_blocks; /* live_blocks then */
		uint64_t peak_blocks; /* blocks of those */
	};
};

struct ht_big_alloc {
	uint64_t size;    /* requested bytes */
	uint64_t time_ns; /* when */
	uint32_t tid;     /* by which thread */
	uint32_t node;    /* its stack, 0 if none */
	uint64_t seq;	  /* allocations ranked before it (of one size, the first kept) */
};

/* Biggest single allocations kept: HT_BIG_ALLOCS unless
 * ht_stackstats__keep_big asks for more, never more than
 * HT_BIG_ALLOCS_MAX (320 KiB: every allocation of a trace would be
 * gigabytes; top -n 0 says how many were left out).  They are a min-heap
 * while collecting, log2(kept) steps for an allocation that enters. */
#define HT_BIG_ALLOCS	  64
#define HT_BIG_ALLOCS_MAX 10000

struct ht_stackstats_last; /* per thread: its latest allocation (temporaries) */

struct ht_stackstats {
	struct ht_stackstat *slots; /* open addressing by node */
	size_t cap, n;              /* slots / used */
	uint64_t peak_bytes;        /* the peak of the live heap */
	uint64_t peak_time_ns;      /* when */
	struct ht_big_alloc *big;   /* the biggest, biggest first (after finish) */
	size_t nbig;                /* entries used */
	size_t big_cap;             /* entries kept at most */
	uint64_t big_seen;          /* allocations ranked (kept or not) */
	struct ht_pauses pauses;    /* recording off (ht_stackstats__collect's pass) */
	/* collection state */
	uint32_t tid;               /* only blocks this thread allocated (0 = all) */
	int tid_seen;               /* ht_stackstats__collect saw an event of tid */
	uint32_t npeaks;            /* times a new peak was reached */
	uint64_t live;              /* bytes live now, all threads */
	struct ht_stackstats_last *last; /* per thread, by the pass's index (op->thread) */
	size_t nlast, caplast;      /* entries used / allocated */
	uint32_t thread;            /* the pass's index of the event's thread */
	uint32_t *at;               /* node -> its slot + 1, 0 none (nodes below nat) */
	size_t nat;                 /* entries of at */
};

/* Starts collecting; only blocks thread tid allocated, unless tid is 0
 * (the peak is always that of the whole heap). */
void ht_stackstats__init(struct ht_stackstats *s, uint32_t tid);
/* Before the first event: keep the n biggest single allocations instead
 * of HT_BIG_ALLOCS (0, or more than HT_BIG_ALLOCS_MAX: that many). */
void ht_stackstats__keep_big(struct ht_stackstats *s, uint64_t n);
/* Feeds one event, in the reader's order, and what it did to the pass's
 * live blocks. */
void ht_stackstats__event(struct ht_stackstats *s, const struct ht_event *e,
			  const struct ht_blockop *op);
/* After ht_stackstats__collect for one thread (--thread): 1, having said
 * so, when the trace has no event of that thread (a usage error). */
int ht_stackstats__thread_missing(const struct ht_stackstats *s, const char *path);
/* After finish, for tables a reader reads: the stacks that read alike
 * (ht_blocks__stack_key: calls on one line, an
 * unrolled loop) summed into one record, the one of the smallest node, the
 * others emptied (node 0).  Lookups by node are over then. */
struct ht_symbolizer;
void ht_stackstats__merge_alike(struct ht_stackstats *s, struct ht_reader *r,
				struct ht_symbolizer *sym);
/* After the last event: fills peak_* and end_* of every stack. */
void ht_stackstats__finish(struct ht_stackstats *s);
void ht_stackstats__free(struct ht_stackstats *s);

/* Reads path and fills *s (init, every event, finish).  Returns the exit
 * status (0, or HT_EXIT_DATA for a damaged or unreadable trace: *rp is
 * NULL if it could not be opened) and leaves the reader in *rp for the
 * stacks. */
int ht_stackstats__collect(const char *path, uint32_t tid, struct ht_stackstats *s,
			   struct ht_reader **rp);
/* The same, keeping the nbig biggest single allocations
 * (ht_stackstats__keep_big). */
int ht_stackstats__collect_big(const char *path, uint32_t tid, uint64_t nbig,
			       struct ht_stackstats *s, struct ht_reader **rp);

#endif
