/* Reading heaptrail traces: open, validate, stream events merged across
 * threads by (timestamp, thread, sequence number).
 *
 * Memory is bounded by the number of threads (one decoded chunk each), the
 * chunk index and, for multi-threaded traces of format 2, the set of live
 * block addresses, never by the number of events.
 *
 * Threads: with more than one (ht_threads, HEAPTRAIL_THREADS; one by
 * default), the threads' streams are decoded ahead by worker threads into a
 * bounded number of blocks, and merged here; what the reader delivers is
 * the same, byte for byte (docs/FORMAT.md, "Reading with several
 * threads").  A reader is used by one thread at a time, as ever.
 *
 * Causal order: malloc/free events without a timestamp of their own are
 * dated by their thread's previous one, which may put an allocation before
 * the free (in another thread) of the block it reuses.  In traces without
 * HT_FILE_F_ORDERED the merge holds such an allocation back until the free
 * has been delivered, so that an address is never handed out while it is
 * still live (docs/FORMAT.md, "Ordering guarantee"); traces with it need
 * no holds.  ht_reader__order says whether the order delivered is exact.
 * On a truncated or
 * corrupt file the reader yields every event it could decode, then
 * ht_reader__next() returns 0 and ht_reader__error() says what is wrong and
 * at which offset. */
#ifndef HEAPTRAIL_TRACE_READER_H
#define HEAPTRAIL_TRACE_READER_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "format.h"

struct ht_reader; /* opaque */

/* One decoded event. */
struct ht_event {
	uint8_t kind;       /* enum ht_kind */
	uint8_t flags;      /* HT_F_* from the kind byte */
	uint32_t tid;       /* thread */
	uint64_t seq;       /* per-thread sequence number, from 0 */
	uint64_t ts;        /* raw timestamp (ticks) */
	uint64_t time_ns;   /* nanoseconds since the start of the recording */
	uint64_t v[HT_MAX_FIELDS]; /* field values in ht_kind_descs order ('S' excluded) */
	int nv;             /* values in v */
	uint64_t usable;    /* allocator's usable size of the result block, 0 if none */
	uint64_t duration;  /* ticks the call took ('d' field), 0 if not recorded */
	const char *str;    /* string field ('S'), NUL-terminated, else NULL */
	uint8_t part;       /* HT_PART_*: how a realloc is split in time */
	uint8_t ts_taken;   /* 1: ts was read at this call; 0: the thread's previous one (sampled) */
	uint32_t stack;     /* stack node of the call (record --stacks), 0 if none */
	uint32_t weight;    /* allocations this one stands for: 1, more in a sampled trace */
};

/* A module (executable, shared object) the recorder saw mapped. */
struct ht_module {
	uint64_t base;          /* load bias: runtime address = file address + base */
	uint64_t lo, hi;        /* its mapped segments span [lo, hi) */
	const char *path;       /* as the loader named it */
	uint8_t build_id[64];   /* GNU build-id, if the module has one */
	size_t build_id_len;    /* its length, 0 if none */
	int gone;               /* unmapped later (dlclose) */
};

/* A realloc (or reallocarray, mremap) that moves or frees its block both
 * gives memory back, some time after it starts, and hands memory out,
 * before it ends.  The reader delivers such a call twice: the RELEASE part
 * at its start time, the ACQUIRE part at its end time, so that merged
 * order stays right when other threads reuse either address meanwhile. */
enum {
	HT_PART_WHOLE = 0,   /* an ordinary event */
	HT_PART_RELEASE = 1, /* the old block/range is released (start time) */
	HT_PART_ACQUIRE = 2, /* the result is handed out (end time); counts the call */
};

/* Accessors that name the fields of the malloc API kinds (inline: every
 * analyzer calls them on every event). */

/* The block an allocation returns, 0 if none. */
static inline uint64_t ht_event__result_ptr(const struct ht_event *e)
{
	int i = ht_kind_descs[e->kind].result;
	if (i < 0 || !ht_kind_descs[e->kind].is_alloc || i >= e->nv)
		return 0;
	return e->v[i];
}

/* Requested bytes of an allocation. */
static inline uint64_t ht_event__size(const struct ht_event *e)
{
	switch (e->kind) {
	case HT_EV_MALLOC:
	case HT_EV_VALLOC:
	case HT_EV_PVALLOC:
		return e->nv > 0 ? e->v[0] : 0;
	case HT_EV_CALLOC:
		return e->nv > 1 ? e->v[0] * e->v[1] : 0;
	case HT_EV_REALLOC:
	case HT_EV_MEMALIGN:
	case HT_EV_POSIX_MEMALIGN:
	case HT_EV_ALIGNED_ALLOC:
		return e->nv > 1 ? e->v[1] : 0;
	case HT_EV_REALLOCARRAY:
		return e->nv > 2 ? e->v[1] * e->v[2] : 0;
	default:
		return 0;
	}
}

/* realloc's (reallocarray's) input block, 0 for other kinds. */
static inline uint64_t ht_event__old_ptr(const struct ht_event *e)
{
	if (e->kind == HT_EV_REALLOC || e->kind == HT_EV_REALLOCARRAY)
		return e->v[0];
	return 0;
}

/* realloc released its input.  glibc: realloc(p, n) releases p when it
 * returns a new block or when n is 0 (it frees p and returns NULL). */
static inline int ht_event__frees_old(const struct ht_event *e)
{
	uint64_t old = ht_event__old_ptr(e);
	if (!old)
		return 0;
	if (ht_event__result_ptr(e))
		return 1;
	uint64_t bytes;
	if (e->kind == HT_EV_REALLOCARRAY && __builtin_mul_overflow(e->v[1], e->v[2], &bytes))
		return 0; /* rejected before glibc saw it */
	return ht_event__size(e) == 0;
}
/* The call is counted on this event (not on a RELEASE part). */
static inline int ht_event__is_call(const struct ht_event *e) { return e->part != 1; }
/* Release old now: a whole event that frees old, or a RELEASE part. */
static inline int ht_event__release_now(const struct ht_event *e)
{
	return e->part != 2 && ht_event__frees_old(e);
}
/* Hand out the result now: a whole event or an ACQUIRE part. */
static inline int ht_event__acquire_now(const struct ht_event *e) { return e->part != 1; }
/* An exec event that is the outcome of a failed exec (HT_EXEC_FAILED_PREFIX):
 * the image before it runs on. */
static inline int ht_event__exec_failed(const struct ht_event *e)
{
	return e->kind == HT_EV_EXEC && e->str &&
	       !strncmp(e->str, HT_EXEC_FAILED_PREFIX, sizeof(HT_EXEC_FAILED_PREFIX) - 1);
}

/* Whether the order the reader delivers is the true one across threads.
 * It is not when (a) a multi-threaded trace without HT_FILE_F_ORDERED has
 * malloc/free events without a timestamp of their own in more than one
 * thread (an older recorder: the causal holds guess an order, and guess
 * wrong for blocks passed along three threads or more): every such event
 * is concerned; or (b) in the merged order of a multi-threaded trace an
 * address is handed out while still live, or (until the first control
 * event other than sync) released or realloc'ed in place while not live:
 * each such event is concerned.  (b) is not checked in sampled traces;
 * one thread's order is exact.  Counts so far; final once
 * ht_reader__next_event has returned NULL. */
struct ht_order_info {
	int exact;                 /* no event concerned */
	int ordered;               /* the trace has HT_FILE_F_ORDERED */
	int final;                 /* the reader reached the end */
	uint64_t events_concerned; /* undated + anomalies */
	uint64_t undated;          /* (a): undated malloc/free events, 0 unless (a) */
	uint64_t anomalies;        /* (b): addresses out of step with the merged order */
};
struct ht_trace_info {
	uint32_t version;      /* format version */
	int32_t pid, ppid;     /* traced process and its parent */
	uint64_t flags;        /* HT_FILE_F_* */
	uint64_t start_realtime_ns; /* wall clock at start */
	uint64_t duration_ns;  /* from the header (closed) or the last clock sample; once
				* every event is read, at least the last one's time */
	double ts_per_ns;      /* fitted timestamp rate */
	uint64_t events_hdr;   /* event count from the header, 0 if not closed */
	uint64_t events_chunks; /* events announced by the chunks found */
	uint64_t dropped;      /* events the recorder could not record */
	uint32_t nchunks;      /* event chunks found */
	uint32_t nthreads;     /* distinct threads in the chunks */
	int closed;            /* header says the recorder closed the file */
	int orphaned;          /* closed by the writer process after the program died */
	int namespace;         /* HT_FILE_F_NAMESPACE: calls made in a dlmopen namespace are
				* not in it */
	int exit_syscall;      /* orphaned, and the program exited with a status by the
				* exit_group system call, not exit() (HT_FILE_F_EXIT_SYSCALL) */
	int signal;            /* closed, and the program died of this signal, which it
				* left to its default action (HT_FILE_F_SIGNALED), else 0 */
	int detached;          /* closed by heaptrail attach while the program ran on
				* (HT_FILE_F_DETACHED) */
	int being_written;     /* a recorder still writes it (its lock is held and the
				* program runs): what was read is the trace as of now */
	int disk_full;         /* recording stopped on a failed write (HT_FILE_F_DISK_FULL) */
	int indexed;           /* the index was used (else the chunks were scanned) */
	int unindexed;         /* closed without an index (no room for it, or more
				* chunks than it holds): scanned, nothing wrong */
	const char *cmdline;   /* argv joined by spaces */
	const char *exe;       /* executable path */
	const char *allocator; /* the library of the allocator that served the malloc
				* API when it was not glibc's (jemalloc, ...), else NULL */
	uint64_t file_size;    /* bytes */
	uint64_t start_brk;    /* where the heap begins */
	uint64_t sample_bytes; /* record --sample-bytes (HT_FILE_F_SAMPLED in flags), else 0 */
	uint32_t sample_every; /* attach --sample N (HT_FILE_F_SAMPLE_EVERY): 1 in N allocations, else 0 */
	uint64_t writer_cpu_ns; /* CPU time of the recorder's writer process, 0 if not known */
	uint32_t stack_depth;   /* record --stacks N: the most frames a stack keeps; 0 if none
				 * or not known (traces before the field) */
	struct ht_order_info order; /* ht_reader__order, set once the reader reached the end */
};

/* How long a process waits in all (not per call: HEAPTRAIL_WAIT_WRITER_MS
 * sets it) for recorders' writer processes still finishing the traces of
 * programs that have ended. */
#define HT_WAIT_WRITER_MS 30000

/* If a recorder still holds the trace open on fd (its flock): returns 1 at
 * once while the traced process pid runs (the trace is being written; read
 * what is there), else waits up to timeout_ms for the writer to finish,
 * within what is left of the process's HT_WAIT_WRITER_MS.  Returns 0 when
 * no writer holds the file (any more). */
int ht_trace__wait_writer(int fd, int32_t pid, int timeout_ms);

/* Whether readers opened from now on decode the common records of row
 * and column-coded chunks in loops of their own (1), or record by record
 * like every other (0, a check on those loops: the events are the same).
 * -1, the default: HEAPTRAIL_READ_FAST_PATH, read once (0/false/no/off:
 * 0). */
extern int ht_read_fast_path;

/* Returns NULL and fills err (a one-line message naming the file) if the
 * file cannot be read as a trace at all.  Waits for the writer first (see
 * ht_trace__wait_writer). */
struct ht_reader *ht_reader__open(const char *path, char *err, size_t errlen);
/* The same for a caller that wants what the trace holds (its info, its
 * first error) and reads few events or none (record's summary, a rewritten
 * trace read back): the serial reader, with no decoding threads started
 * (ht_reader__open starts them at once, and they decode ahead). */
struct ht_reader *ht_reader__open_info(const char *path, char *err, size_t errlen);
/* A second serial reader of the file r reads (the same file, whatever is
 * at its path now: report's heap model read beside the rest), its
 * messages naming r's path. */
struct ht_reader *ht_reader__open_again(const struct ht_reader *r, char *err, size_t errlen);
void ht_reader__close(struct ht_reader *r);

/* Follow mode: reads a trace that a recorder may still be writing, and
 * goes on with what it appends.  While the writer lives, ht_reader__next
 * returning 0 means "nothing more for now" (ht_reader__following says
 * so); ht_reader__poll then looks for the chunks appended since (new
 * threads included; a chunk the writer has not finished is waited for,
 * not reported as damage) and returns nonzero if it found any or the
 * writer has finished meanwhile (then the reader reads to the end as
 * ht_reader__open's does: the events, warnings and errors are the same).
 *
 * The order stays the exact merged one: the recorder's writer starts every
 * flush round with a clock sample, then writes every thread's events, so
 * once a round's sample is followed by another, every event dated before
 * it is on disk.  While the writer lives the merge delivers events up to
 * that time only: what a reader shows lags the program by two or three
 * flush intervals (HEAPTRAIL_FLUSH_INTERVAL, 100 ms), never more, and no
 * event of a thread that flushes later comes out of order.  A trace with
 * no clock samples (written by something else than the recorder) is read
 * once its writer is gone.  Memory stays bounded as in ht_reader__open,
 * the clock and RSS samples too: at most 8192 of them are kept, thinned
 * evenly over the run (ht_reader__rss_samples gives those). */
struct ht_reader *ht_reader__open_follow(const char *path, char *err, size_t errlen);
int ht_reader__poll(struct ht_reader *r);
/* A followed trace whose writer still runs: the end is not the end. */
int ht_reader__following(const struct ht_reader *r);
/* A followed trace its writer closed as an orphan (the program died
 * without shutting the tracer down): `record` notes in the header how the
 * program ended (a signal, or the exit_group system call) once the writer
 * is done, after a follower may have read the header.  Reads those notes
 * again into the info; 1 if they changed it. */
int ht_reader__recheck_end(struct ht_reader *r);
/* While following: the time (ns since the start) up to which every event
 * is out once ht_reader__next has returned 0, though the last may be
 * older (a program that allocates nothing for a while); 0 before the
 * writer's first complete flush round. */
uint64_t ht_reader__follow_ns(const struct ht_reader *r);
const struct ht_trace_info *ht_reader__info(const struct ht_reader *r);

/* Next event in time order: 1 = *ev filled, 0 = end (or stopped at an
 * error: check ht_reader__error). ev->str stays valid until the next call. */
int ht_reader__next(struct ht_reader *r, struct ht_event *ev);
/* The same without the copy: the next event, valid until the next call;
 * NULL at the end. */
const struct ht_event *ht_reader__next_event(struct ht_reader *r);

/* NULL if everything read cleanly, else "offset N: what is wrong". */
const char *ht_reader__error(const struct ht_reader *r);
/* The trace's path, as it was opened (for messages). */
const char *ht_reader__path(const struct ht_reader *r);
/* Warnings that do not stop reading (not closed cleanly, ...), or NULL. */
const char *ht_reader__warning(const struct ht_reader *r);

/* Where the events of a trace with an error stop.  The first error ends
 * every thread's events at once when it is the file's (cut short, a bad
 * chunk header: no chunk after it is found), but only one thread's when
 * it is in that thread's chunk (it does not decompress or decode): the
 * other threads are read on, to their end, and what they did after it is
 * delivered without what that thread did (its frees, its allocations). */
struct ht_damage {
	uint32_t tid;         /* the thread whose stream the error ended; 0: the file's
			       * error (or one met following a trace) */
	int thread_read;      /* some of tid's events were delivered before it */
	uint64_t thread_ns;   /* the last of them, ns since the start */
	int read_on;          /* events of other threads later than that were delivered */
	uint64_t last_ns;     /* the last event delivered, of any thread */
	uint64_t exact_to_ns; /* every thread's events are in up to this time: thread_ns
			       * when read_on (0 if none of tid's was read), else last_ns */
};
/* As far as the trace was read: 1 and *d if it had an error, 0 if not. */
int ht_reader__damage(const struct ht_reader *r, struct ht_damage *d);

void ht_reader__order(const struct ht_reader *r, struct ht_order_info *o);

/* A caller that keeps every live block of its own, in the reader's order
 * (the analyzers' pass, analyze/pass.h), can make the checks of (b) above
 * in its own lookups, so that each address is hashed once per event, not
 * twice: the reader keeps no set of its own.  Before the first event;
 * returns 1 if the caller is to check from now on, 0 if the reader needs
 * no checks or keeps its set anyway (the causal merge of an older trace
 * orders by it).  The caller must then see every event it is delivered,
 * in order, and say for each: */
int ht_reader__hand_over_check(struct ht_reader *r);
/* ... an address released while not live (release = 1) or handed out
 * while live (0), counting only blocks acquired since the last control
 * event that was not a pause or a sync (the reader forgets the addresses
 * then: calls went untraced); */
void ht_reader__out_of_step(struct ht_reader *r, int release);
/* ... and every control event (HT_EV_CONTROL). */
void ht_reader__control(struct ht_reader *r, const struct ht_event *e);

/* The event k places after the next one the reader will deliver, if the
 * stream of the last one delivered has it decoded already (most runs of
 * the merged order are one thread's), else NULL: for a caller whose memory
 * that event will touch (the pass's live map) to prefetch it, so that the
 * cache misses of a large live set overlap instead of coming one per
 * event.  A guess: the merge may deliver another thread's events first. */
const struct ht_event *ht_reader__peek(const struct ht_reader *r, unsigned k);

/* Progress: bytes of chunk payload consumed so far, of the total. */
void ht_reader__progress(const struct ht_reader *r, uint64_t *done, uint64_t *total);

/* RSS samples from the clock chunks (time_ns since start, rss in KiB). */
size_t ht_reader__rss_samples(const struct ht_reader *r, const uint64_t **time_ns,
			      const uint64_t **rss_kb);

/* Stacks (record --stacks): an event's stack is a node; a node is a return
 * address and the node of its caller, up to 0.  Node ids are the reader's
 * own (the same call path in two threads is one node).  Complete once the
 * events that use them have been read. */
uint64_t ht_reader__node_ip(const struct ht_reader *r, uint32_t node);
uint32_t ht_reader__node_parent(const struct ht_reader *r, uint32_t node);
/* The module (index in ht_reader__modules) that held node's address when
 * the recorder wrote the node, -1 if none: after a dlclose, another
 * library may have been loaded at the same addresses. */
int ht_reader__node_module(const struct ht_reader *r, uint32_t node);
size_t ht_reader__nnodes(const struct ht_reader *r); /* ids are < this */
/* Every module recorded so far, once per identity (path, load bias,
 * extent, build-id): a library loaded again at the same place is the same
 * module.  Indexes stay valid while more are read. */
size_t ht_reader__modules(const struct ht_reader *r, const struct ht_module **mods);

/* The weight of a sampled allocation of size bytes at ptr, in a trace
 * sampled every sample_bytes (record --sample-bytes): 1 / (1 - exp(-size /
 * sample_bytes)), rounded up or down at random so that sums stay unbiased
 * in whole numbers: a fixed function of the block's address and of the
 * event (salt: ht_weight_salt of its thread and sequence number), so that
 * a trace reads the same every time.  Of the address alone, every reuse
 * of an address (malloc and free in a loop) rounded the same way: 20,000
 * blocks of 4096 bytes at --sample-bytes 4096 were estimated at 12,600 or
 * 25,250 (weight 1.58 rounded to 1 or 2 each time). */
uint32_t ht_sample_weight(uint64_t size, uint64_t ptr, uint64_t salt, uint64_t sample_bytes);
static inline uint64_t ht_weight_salt(uint32_t tid, uint64_t seq)
{
	return seq + ((uint64_t)tid << 40);
}
/* The weight of an allocation of req bytes at ptr (0: it failed, weight
 * 1) in a trace read with sampled: 0 not sampled, 1 one call in every
 * `every`, 2 by size (ht_sample_weight). */
static inline uint32_t ht_alloc_weight(int sampled, uint32_t every, uint64_t req, uint64_t ptr,
				       uint64_t salt, uint64_t sample_bytes)
{
	if (!sampled || !ptr)
		return 1;
	return sampled == 1 ? every : ht_sample_weight(req, ptr, salt, sample_bytes);
}

/* Converts a raw timestamp to ns since the start. */
uint64_t ht_reader__ts_to_ns(const struct ht_reader *r, uint64_t ts);

const char *ht_kind_name(int kind);
/* Parses a kind name (as printed by dump); -1 if unknown. */
int ht_kind_parse(const char *name);

#endif
