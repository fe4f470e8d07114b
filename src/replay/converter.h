/* The converter: a trace's events become a workload (converter.c,
 * docs/WORKLOAD.md).  `heaptrail convert` runs it on a file; the fuzz
 * target tests/fuzz/fuzz_convert.c on any bytes. */
#ifndef HEAPTRAIL_REPLAY_CONVERTER_H
#define HEAPTRAIL_REPLAY_CONVERTER_H

#include <stddef.h>
#include <stdint.h>

#include "trace/reader.h"
#include "workload.h"

/* How to convert. */
struct ht_convert_opts {
	int mmap;            /* the program's own anonymous mmaps too (convert --mmap) */
	int progress;        /* a progress line on a terminal (ht_analyze__next) */
	uint64_t max_events; /* stop after this many events (a prefix); 0: all */
};

/* What was written. */
struct ht_convert_summary {
	uint32_t threads;           /* threads of the workload */
	uint64_t ops;               /* ops: calls + waits + spawns */
	uint64_t ncalls;            /* calls of every function */
	uint64_t calls[HT_FN_NR];   /* calls per function */
	uint64_t waits, spawns;     /* synchronization ops */
	uint64_t sync_waits;        /* of the waits, those that keep the live set within
				     * the trace's (converter.c, "the live bound") */
	uint64_t slots;             /* pointer slots */
	uint64_t peak;              /* ideal peak: live requested bytes, at most */
	uint64_t skipped_frees;     /* frees of blocks allocated before recording */
	uint64_t skipped_reallocs;  /* reallocs of such blocks */
	uint64_t skipped_maps;      /* mmap family calls not replayed (files, shared, fixed) */
	uint64_t failed_maps;       /* failed mmap family calls */
	uint64_t inversions;        /* addresses handed out while live */
	uint64_t events;            /* trace events read */
	int stopped;                /* the read stopped at max_events */
};

/* Reads r (opened on the trace named in) to its end and writes the
 * workload to out (through a temporary file renamed into place).  Returns
 * 0, or -1 with a one-line message naming the file in err; then nothing is
 * left at out.  The process exits (HT_EXIT_DATA) only when memory runs out. */
int ht_convert__run(struct ht_reader *r, const char *in, const char *out,
		    const struct ht_convert_opts *o, struct ht_convert_summary *sum, char *err,
		    size_t errlen);

/* The same, event by event, for a caller that has the events from
 * elsewhere (the fuzz target makes them up): open the workload at out with
 * main_tid as thread 0, feed it events in merged order, then close it (0,
 * or -1 with err set and nothing left at out; in and info go into the
 * workload's SOURCE section) or abort it (nothing left).  Any sequence of
 * events gives a workload that ht_workload__load accepts. */
struct ht_converter; /* opaque */
struct ht_converter *ht_converter__open(const char *out, int mmap, uint32_t main_tid, char *err,
					size_t errlen);
void ht_converter__event(struct ht_converter *c, const struct ht_event *e);
int ht_converter__close(struct ht_converter *c, const char *in, const struct ht_trace_info *info,
			struct ht_convert_summary *sum, char *err, size_t errlen);
void ht_converter__abort(struct ht_converter *c);

#endif
