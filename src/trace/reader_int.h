/* The reader's state, shared by its four files (private to src/trace):
 * reader.c opens the trace and finds its chunks (index or scan) and clock,
 * reader_decode.c decodes one thread's chunks into events, reader_merge.c
 * merges the threads' streams by (timestamp, thread, seq) and keeps the
 * causal order's set of live addresses, reader_par.c runs the decoding of
 * the streams in threads of its own, ahead of the merge. */
#ifndef HEAPTRAIL_TRACE_READER_INT_H
#define HEAPTRAIL_TRACE_READER_INT_H

#include <stdint.h>
#include <zstd.h>

#include "columns.h"
#include "modmap.h"
#include "reader.h"
#include "record.h"

struct chunk_ref {
	uint64_t offset;    /* of the chunk header */
	uint64_t first_seq; /* from the header */
	uint32_t tid;       /* from the header */
	uint32_t nevents;   /* from the header */
	uint32_t comp_size; /* payload bytes in the file */
	uint32_t raw_size;  /* payload bytes decoded */
	uint16_t flags;     /* HT_CHUNK_F_* */
};

/* Steps on the path of every event: inlined. */
#define HOT static inline __attribute__((always_inline))

/* The decoding threads take traces of at most this many threads (more use
 * the serial reader, which parks the streams not being read). */
#define HT_PAR_MAX_STREAMS 64

/* Events a stream decodes ahead, into an array: decoding many at a time
 * keeps the decoder's loop tight (columns.h, ht_coldec__events). */
#define BATCH 128

/* One thread's events, decoded one chunk at a time. */
struct stream {
	uint32_t tid;           /* thread */
	struct chunk_ref *chunks; /* this thread's chunks, by first_seq */
	size_t nchunks, next_chunk; /* count / next to decode */
	uint8_t *buf;           /* decoded payload of the current chunk */
	size_t cap;             /* its capacity */
	const uint8_t *pos, *end; /* decode cursor (records) */
	struct ht_coldec *cd;   /* decoder of column-coded chunks, NULL until one */
	int cols;               /* the current chunk is column-coded: records come from cd */
	uint64_t chunk_off;     /* file offset of the current chunk */
	uint32_t chunk_events;  /* events decoded from the current chunk */
	uint32_t chunk_expect;  /* events the current chunk's header announces */
	uint64_t last_ts;       /* delta state: previous timestamp */
	uint64_t last_ptr;      /* delta state: previous pointer */
	uint64_t seq;           /* sequence number of the next event */
	int synced;             /* delta state is valid */
	int gap_said;           /* a warning covers the events being skipped */
	int parked;             /* buffer released; re-decode from park_chunk */
	size_t park_chunk;      /* chunk to re-decode when unparked */
	int done;               /* no more events to decode (those in batch remain) */
	int exhausted;          /* done because its chunks ran out (not at an error): a
				 * followed trace may bring more */
	int out;                /* exhausted and out of the merge's heap (follow mode) */
	size_t capchunks;       /* follow mode: chunks is the stream's own array */
	struct ht_event *ev;    /* the next event: in batch, or split */
	struct ht_event *batch; /* events decoded ahead (BATCH), NULL until the first */
	unsigned bn, bi;        /* events in batch / index of the next one */
	struct ht_rec pend;     /* a column record read ahead of its turn (has_pend) */
	int has_pend;           /* pend is to be handled before the columns go on */
	char *pend_err;         /* an error met decoding ahead, said once the events */
	char *pend_warn;        /* before it are delivered; a warning likewise */
	struct ht_event split;  /* ACQUIRE part waiting behind a RELEASE part (or, parked,
				 * the next event) */
	uint64_t held_on;       /* address whose release this stream waits for, 0 none */
	int forced;             /* deliver the head event even if its address is live */
	int has_split;          /* split is pending */
	uint64_t undated;       /* malloc/free events delivered without a timestamp of
				 * their own, counted where the order relies on them */
	uint64_t dur;           /* a DURATION record for the next event, 0 none */
	uint32_t *nodes;        /* this thread's stack node ids -> the reader's */
	size_t nnodes, capnodes; /* ids defined (1..nnodes) / allocated */
	struct ht_modview mods; /* the modules this thread's records announced */
	struct pstream *pipe;   /* decoded by the reader's threads (reader_par.c), else NULL */
	char str[HT_MAX_STR + 1]; /* its string field */
};

/* A stack node, interned across threads: a return address, its caller
 * and the module that held the address when the node was recorded. */
struct node {
	uint64_t ip;     /* return address */
	uint32_t parent; /* caller's node, 0 = outermost */
	uint32_t mod;    /* its module (index + 1 in modmap), 0 = none */
};

struct ht_reader {
	int fd;                    /* the trace */
	char *path;                /* its name, for messages */
	struct ht_file_header hdr; /* as read */
	struct ht_trace_info info; /* what ht_reader__info returns */
	char *cmdline, *exe, *allocator; /* strings of the header sections */
	struct chunk_ref *chunks;  /* every event chunk, file order */
	size_t nchunks, capchunks; /* count / allocated */
	struct ht_clock_sample *clocks; /* clock chunks, file order */
	size_t nclocks, capclocks; /* count / allocated */
	uint64_t *rss_t, *rss_v;   /* RSS samples for ht_reader__rss_samples */
	struct stream *streams;    /* one per thread */
	size_t nstreams;           /* count */
	struct stream **heap;      /* min-heap of streams with a next event */
	size_t nheap;              /* entries in heap */
	struct stream *run;        /* heap[0], while the heap is unchanged but for its */
	uint64_t run_ts;           /* advances: it stays first while its next event's ts
				    * is at most run_ts; NULL: not known */
	uint64_t base_ts;          /* timestamp of time_ns 0 */
	double ts_per_ns;          /* fitted rate */
	ZSTD_DCtx *dctx;           /* decompression context */
	uint8_t *zbuf;             /* compressed payload buffer */
	size_t zcap;               /* its capacity */
	uint64_t done_bytes, total_bytes; /* progress */
	char out_str[HT_MAX_STR + 1]; /* string of the last returned event */
	struct ht_event out_ev;    /* the last returned event, when not in its batch */
	int causal;                /* hold allocations of live addresses (format 2, >1 thread,
				    * not HT_FILE_F_ORDERED) */
	int track;                 /* keep the live set: causal holds or checks below */
	int check;                 /* count an address handed out while live (>1 thread,
				    * not sampled) */
	int check_free;            /* count a release of an address not live (the same, until
				    * the first control event) */
	int handed;                /* the caller keeps the live blocks and makes the checks
				    * (ht_reader__hand_over_check): no set here */
	int ctl_state;             /* 0 before any control event, 1 recording, 2 paused */
	int at_end;                /* ht_reader__next_event returned NULL */
	uint64_t anomalies;        /* addresses out of step with the merged order */
	uint64_t anomalies_pend;   /* the same while recording may have been off (before
				    * the first control event, or paused): kept or dropped
				    * by the next control event or the end */
	uint64_t undated;          /* undated malloc/free events of the causal merge */
	uint32_t undated_threads;  /* threads that have some */
	int sampled;               /* allocations' weights: 0 all 1, 1 sample_every, 2 by size */
	int fast;                  /* records take ht_rd__fast's loops where they can
				    * (HEAPTRAIL_READ_FAST_PATH) */
	uint64_t *live;            /* open-addressing set of live block addresses */
	uint64_t live_last;        /* the newest live address, kept out of live (the set is
				    * live + it): mostly freed next, by the same thread; 0 none */
	size_t live_cap, live_n;   /* slots (power of two) / used */
	uint64_t probe_a;          /* address live_has looked up last, 0 none (or stale) */
	size_t probe_i;            /* its slot, or the empty one it would take */
	struct node *nodes;        /* stack nodes, index = id (0 unused) */
	size_t nnodes, capnodes;   /* used (id 0 included) / allocated */
	uint32_t *node_hash;       /* open addressing: (parent, ip) -> id, 0 empty */
	size_t node_hcap;          /* slots (power of two) */
	struct ht_modmap mods;     /* modules seen (modmap.h) */
	struct stream **held;      /* streams waiting for a release */
	size_t nheld;              /* entries in held */
	uint64_t hold_ticks;       /* longest wait before an allocation is let through */
	uint64_t last_out_ts;      /* timestamp of the last delivered event, 0 before */
	uint64_t last_out_ns;      /* it in ns since the start */
	int follow;                /* ht_reader__open_follow: more chunks may come */
	int writer_gone;           /* follow mode: the recorder closed the file */
	uint64_t scan_off;         /* where the chunk scan stopped (the next chunk's offset) */
	uint64_t clock_ts[3];      /* follow mode: the newest CLOCK chunks of one sample,
				    * newest first (every flush round starts with one) */
	uint64_t gate_ts;          /* the merge delivers events up to this time:
				    * clock_ts[2] while the writer lives (FORMAT.md,
				    * "Following a trace that is being written") */
	size_t capstreams;         /* follow mode: streams, heap and held allocated */
	uint64_t fit_span_ns;      /* follow mode: the clock span ts_per_ns was fitted on */
	struct ht_par *par;        /* the decoding threads, NULL: decoded here (reader_par.c) */
	char err[512];             /* first error, "" if none */
	char warn[512];            /* first warning, "" if none */
	int file_err;              /* err was set finding the chunks (a cut file, a bad chunk
				    * header): every thread's events stop there */
	uint32_t cut_tid;          /* else the thread whose stream err ended (the others are
				    * read on), 0 none (ht_reader__damage) */
	int cut_read;              /* some of its events were delivered, */
	uint64_t cut_ts;           /* the last of them at this timestamp */
	uint64_t ts_raised;        /* events delivered with their timestamp raised to the last
				    * one delivered (a held allocation, a thread whose times
				    * went back): the merged order is not by time alone then
				    * (reader_slice.h) */
};

/* ---- reader.c ------------------------------------------------------------ */

/* The first error and the first warning of the read (later ones are
 * dropped: the first says where the trouble starts). */
void ht_rd__err(struct ht_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ht_rd__warn(struct ht_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* n bytes at off, all of them; -1 (error set) if the file is shorter. */
int ht_rd__read_at(struct ht_reader *r, void *buf, size_t n, uint64_t off);

/* ---- reader_decode.c ----------------------------------------------------- */

/* Chunk c's payload, decompressed, into s's buffer (c->raw_size bytes);
 * -1 with the reader's error set if it cannot be read or decompressed. */
int ht_rd__load_payload(struct ht_reader *r, struct stream *s, const struct chunk_ref *c);

/* Decodes the stream's next events into s->batch; how many, 0 when the
 * stream ends. */
unsigned ht_rd__fill(struct ht_reader *r, struct stream *s);

/* How decode_next goes on past what must come in its turn (0: takes it). */
enum { DEC_AHEAD = 1, DEC_EMIT = 2 };

/* For a decoding thread (reader_par.c), on a stream and a reader of its
 * own: the stream's next event into e (1), or 0 at the end or an error (in
 * r->err).  ahead 0 is not allowed: with DEC_AHEAD, 2 where the serial
 * reader stops a batch; with DEC_EMIT, 3 with the next stack or module
 * record in e (kind >= 32, its fields in v, its string in str, valid until
 * the next call).  Stack node ids stay the thread's own, in time_ns
 * (stack is 0: s knows no nodes). */
int ht_rd__decode(struct ht_reader *r, struct stream *s, struct ht_event *e, int ahead);
/* Says that the stream's data is corrupt at its current event (WHAT) and
 * ends it; returns 0. */
int ht_rd__corrupt(struct ht_reader *r, struct stream *s, const char *what);
/* The malloc and free events (and a row chunk's calloc and realloc ones)
 * that come next in a column-coded or a row chunk (ht_rd__fast_ready), up
 * to max, into ev (stack ids as ht_rd__decode leaves them when s knows no
 * nodes); *failed on an error, in r->err (a row chunk's are left to
 * ht_rd__decode: it stops before). */
unsigned ht_rd__fast(struct ht_reader *r, struct stream *s, struct ht_event *ev, unsigned max,
		     int *failed);
/* Bytes of a row chunk the fast loop wants left before a record: the
 * longest realloc record (kind byte, 4 tag bytes, 7 values of 8 bytes) is
 * 61, and every read stays within them (the tag is read as 4 bytes, each
 * value as 8 from where it starts).  The last records of a chunk are
 * decode_next's. */
#define HT_RD_ROW_SAFE 64
/* HEAPTRAIL_READ_FAST_PATH, read once (ht_read_fast_path, reader.h): 0
 * sends every record through decode_next, row chunks' and column-coded
 * ones'. */
int ht_rd__fast_path(void);
/* ht_rd__fast may take the stream's next records: unless r->fast says
 * no, synced, nothing read ahead, and a column-coded chunk, or a row
 * chunk with more than its last records left. */
HOT int ht_rd__fast_ready(const struct ht_reader *r, const struct stream *s)
{
	if (!r->fast || !s->synced || s->has_pend || s->done)
		return 0;
	return s->cols || (s->pos && s->end - s->pos >= HT_RD_ROW_SAFE);
}
/* A stack or module record in its turn: interns the node or notes the
 * module (-1 and the stream ends on a frame out of order). */
int ht_rd__meta(struct ht_reader *r, struct stream *s, const struct ht_rec *rec);

/* ---- reader_par.c -------------------------------------------------------- */

/* Starts the decoding threads for r's streams, if the thread count
 * (ht_threads, HEAPTRAIL_THREADS, else 1; 0: the CPUs this process may
 * run on) is above one and the trace suits: not followed, 1..HT_PAR_MAX_STREAMS
 * threads.  Otherwise the streams are decoded by the caller, as always. */
void ht_rd__par_start(struct ht_reader *r);
/* Stops and joins them, frees what they hold. */
void ht_rd__par_stop(struct ht_reader *r);
/* ht_rd__fill of a stream the threads decode: the next run of events of
 * its blocks, after the stack and module records and the messages that
 * come before them, handled here in the stream's turn. */
unsigned ht_rd__par_fill(struct ht_reader *r, struct stream *s);

/* Moves or frees: the call is delivered as RELEASE then ACQUIRE parts. */
HOT int splits(const struct ht_event *e)
{
	if (!e->duration)
		return 0;
	if (e->kind == HT_EV_MREMAP)
		return e->v[5] != (uint64_t)-1 && e->v[5] != e->v[0];
	if (e->kind != HT_EV_REALLOC && e->kind != HT_EV_REALLOCARRAY)
		return 0;
	return ht_event__frees_old(e) && ht_event__result_ptr(e) != e->v[0];
}

/* s->ev is the batch's event bi: split it if it moves or frees. */
HOT void split_event(struct stream *s)
{
	if (splits(s->ev)) {
		s->split = *s->ev;
		s->split.part = HT_PART_ACQUIRE;
		s->has_split = 1;
		s->ev->part = HT_PART_RELEASE;
		s->ev->ts -= s->ev->duration;
	}
}

/* Moves the stream to its next event (s->ev); 0 at its end. */
HOT int stream_advance(struct ht_reader *r, struct stream *s)
{
	if (s->has_split) {
		s->has_split = 0;
		s->ev = &s->split;
		return 1;
	}
	if (s->bi + 1 < s->bn)
		s->bi++;
	else if (!ht_rd__fill(r, s))
		return 0;
	s->ev = &s->batch[s->bi];
	split_event(s);
	return 1;
}

/* ---- reader_merge.c ------------------------------------------------------ */

/* Restores the merge's min-heap below entry i. */
void ht_rd__heap_down(struct ht_reader *r, size_t i);
/* Releases a stream's buffers until its turn comes (many threads). */
void ht_rd__park(struct stream *s);
/* Stream s has no next event: if an error of its own ended it (not its
 * chunks running out, not the file's error), notes it as the thread cut
 * short, its last event delivered at ts (delivered: some were). */
void ht_rd__stream_ended(struct ht_reader *r, const struct stream *s, int delivered,
			 uint64_t ts);

#endif
