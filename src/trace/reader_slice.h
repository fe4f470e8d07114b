/* Reading one trace in time slices (analyze/slices.c; docs/FORMAT.md,
 * "Time slices"): a serial reader per slice that starts each thread's
 * stream at a chunk just before the slice's start, the times to cut the
 * trace at, and the reader that stands for the slices once they are all
 * read.  The merged order is by (timestamp, thread, sequence number), so
 * a slice's events are exactly those of the serial reader whose timestamp
 * lies in [lo, hi): the caller skips the ones before lo and stops at hi,
 * and checks that no timestamp had to be raised (ht_reader__ts_raised:
 * else the serial order is not a sort by time there, and it must read
 * serially). */
#ifndef HEAPTRAIL_TRACE_READER_SLICE_H
#define HEAPTRAIL_TRACE_READER_SLICE_H

#include <stdint.h>

#include "reader.h"

/* The threads -j N asks for (0: one per CPU this process may run on; not
 * given: HEAPTRAIL_THREADS, else 1). */
unsigned ht_reader__threads_wanted(void);
/* Whether -j or HEAPTRAIL_THREADS asked for a count. */
int ht_reader__threads_given(void);
/* The CPUs this process may run on (`taskset -c 0`: one). */
unsigned ht_reader__cpus(void);

/* Whether r's trace can be read in slices: closed cleanly, indexed, read
 * without a warning so far, its order exact by the recorder's order table
 * (HT_FILE_F_ORDERED) or of one thread, not sampled, not followed, with at
 * least min_events events; and r is a serial reader no event was read from
 * (ht_reader__open_info). */
int ht_reader__sliceable(const struct ht_reader *r, uint64_t min_events);

/* Whether the trace holds stacks (record --stacks): 1, -1 if a chunk
 * cannot be read, else 0.  Its frame records number each thread's frames
 * from its first, so a slice that starts part-way could not read them:
 * such a trace is read serially (a look at each stream's first chunk). */
int ht_reader__stacks_seen(struct ht_reader *r);

/* Cut times of k slices (k - 1 timestamps into cut[], increasing, each
 * the SYNC time of a chunk near i/k of the events of the trace's longest
 * stream, plus one); how many were found (fewer when the stream has too
 * few chunks that start with a SYNC record: fewer slices then). */
unsigned ht_reader__cut_times(struct ht_reader *r, unsigned k, uint64_t *cut);

/* Starts each stream of r (a serial reader, before its first event) at
 * its last chunk with a SYNC record dated before lo, or at its first
 * chunk: every event dated lo or later comes.  -1 if a chunk's SYNC
 * record cannot be read (an error is set). */
int ht_reader__start_at(struct ht_reader *r, uint64_t lo);

/* Events r delivered with their timestamp raised to the one before: a
 * thread whose times go back (the serial order is not a sort by time
 * there, and slices cannot reproduce it). */
uint64_t ht_reader__ts_raised(const struct ht_reader *r);

/* r, a reader of the whole trace no event was read from, stands for the
 * slices read: at its end, with their order checks summed (sum: the
 * ht_reader__order of each slice's reader added up) less released_live
 * releases of addresses not live in their slice that a block of the
 * slices before explains, and its progress complete. */
void ht_reader__slices_done(struct ht_reader *r, const struct ht_order_info *sum,
			    uint64_t released_live);

#endif
