/* The trace reader: chunk discovery (index or scan), per-thread decoding,
 * and a k-way merge of the thread streams by (timestamp, thread, seq). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "reader.h"
#include "columns.h"
#include "modmap.h"
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
	char *cmdline, *exe;       /* strings of the header sections */
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
	int ctl_state;             /* 0 before any control event, 1 recording, 2 paused */
	int at_end;                /* ht_reader__next_event returned NULL */
	uint64_t anomalies;        /* addresses out of step with the merged order */
	uint64_t anomalies_pend;   /* the same while recording may have been off (before
				    * the first control event, or paused): kept or dropped
				    * by the next control event or the end */
	uint64_t undated;          /* undated malloc/free events of the causal merge */
	uint32_t undated_threads;  /* threads that have some */
	int sampled;               /* allocations' weights: 0 all 1, 1 sample_every, 2 by size */
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
	char err[512];             /* first error, "" if none */
	char warn[512];            /* first warning, "" if none */
};

static void set_err(struct ht_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(struct ht_reader *r, const char *fmt, ...)
{
	if (r->err[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
}

static void set_warn(struct ht_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_warn(struct ht_reader *r, const char *fmt, ...)
{
	if (r->warn[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->warn, sizeof(r->warn), fmt, ap);
	va_end(ap);
}

const char *ht_kind_name(int kind)
{
	if (kind < 0 || kind >= HT_EV_NR)
		return "?";
	return ht_kind_descs[kind].name;
}

int ht_kind_parse(const char *name)
{
	for (int k = 0; k < HT_EV_NR; k++)
		if (!strcmp(ht_kind_descs[k].name, name))
			return k;
	return -1;
}

static int read_at(struct ht_reader *r, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = pread(r->fd, (char *)buf + got, n - got, (off_t)(off + got));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	return (int)(got == n ? 0 : -1) ;
}

static size_t read_at_most(struct ht_reader *r, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = pread(r->fd, (char *)buf + got, n - got, (off_t)(off + got));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	return got;
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
	return ht_grow(p, cap, need, elem);
}

static size_t hash_node(uint32_t parent, uint64_t ip)
{
	uint64_t h = (ip ^ ((uint64_t)parent << 32 | parent)) * 0x9E3779B97F4A7C15ull;
	return (size_t)(h ^ (h >> 29));
}

static void add_chunk(struct ht_reader *r, const struct ht_chunk_header *h, uint64_t off)
{
	r->chunks = grow(r->chunks, &r->capchunks, r->nchunks + 1, sizeof(*r->chunks));
	struct chunk_ref *c = &r->chunks[r->nchunks++];
	c->offset = off;
	c->first_seq = h->first_seq;
	c->tid = h->tid;
	c->nevents = h->nevents;
	c->comp_size = h->comp_size;
	c->raw_size = h->raw_size;
	c->flags = h->flags;
	r->total_bytes += h->comp_size;
	r->info.events_chunks += h->nevents;
}

/* A CLOCK chunk holds one sample, or (RSS interval samples) up to
 * HT_MAX_CLOCK_SAMPLES of them in time order. */
static void add_clock(struct ht_reader *r, uint64_t off, const struct ht_chunk_header *h)
{
	size_t n = h->comp_size / sizeof(struct ht_clock_sample);
	if (!n || n > HT_MAX_CLOCK_SAMPLES || h->comp_size % sizeof(struct ht_clock_sample))
		return;
	r->clocks = grow(r->clocks, &r->capclocks, r->nclocks + n, sizeof(*r->clocks));
	if (read_at(r, &r->clocks[r->nclocks], h->comp_size, off + sizeof(*h)) < 0)
		return;
	r->nclocks += n;
}

static int check_chunk_header(struct ht_reader *r, const struct ht_chunk_header *h, uint64_t off)
{
	if (h->magic != HT_CHUNK_MAGIC) {
		set_err(r, "offset %llu: not a chunk header (bad magic 0x%08x): the trace is corrupt "
			   "from here", (unsigned long long)off, h->magic);
		return -1;
	}
	if (h->type < HT_CHUNK_EVENTS || h->type > HT_CHUNK_INDEX) {
		set_err(r, "offset %llu: unknown chunk type %u", (unsigned long long)off, h->type);
		return -1;
	}
	if (h->type == HT_CHUNK_EVENTS &&
	    (h->raw_size > HT_MAX_CHUNK_RAW || h->comp_size > HT_MAX_CHUNK_RAW ||
	     (!(h->flags & HT_CHUNK_F_ZSTD) && h->comp_size != h->raw_size))) {
		set_err(r, "offset %llu: chunk sizes out of range (%u stored, %u decoded)",
			(unsigned long long)off, h->comp_size, h->raw_size);
		return -1;
	}
	return 0;
}

/* Walks the chunk stream from the start; stops at the first bad header or
 * at a truncated chunk (what came before stays usable). */
static void scan_chunks(struct ht_reader *r)
{
	uint64_t off = r->hdr.sec[HT_SEC_CHUNKS].offset;
	uint64_t size = r->info.file_size;
	while (off < size) {
		struct ht_chunk_header h;
		size_t got = read_at_most(r, &h, sizeof(h), off);
		if (got < sizeof(h)) {
			set_err(r, "offset %llu: trace ends inside a chunk header (%zu of %zu bytes): "
				   "the file is truncated", (unsigned long long)off, got, sizeof(h));
			return;
		}
		if (check_chunk_header(r, &h, off) < 0)
			return;
		if (off + sizeof(h) + h.comp_size > size) {
			set_err(r, "offset %llu: trace ends inside a chunk (%llu of %u bytes): the "
				   "file is truncated", (unsigned long long)off,
				(unsigned long long)(size - off - sizeof(h)), h.comp_size);
			return;
		}
		if (h.type == HT_CHUNK_EVENTS)
			add_chunk(r, &h, off);
		else if (h.type == HT_CHUNK_CLOCK)
			add_clock(r, off, &h);
		off += sizeof(h) + h.comp_size;
	}
}

/* Reads the index of a cleanly closed trace; 0 on success. */
static int load_index(struct ht_reader *r)
{
	struct ht_section_ref s = r->hdr.sec[HT_SEC_INDEX];
	struct ht_chunk_header h;
	if (s.size < sizeof(h) || s.offset + s.size > r->info.file_size ||
	    read_at(r, &h, sizeof(h), s.offset) < 0 || h.magic != HT_CHUNK_MAGIC ||
	    h.type != HT_CHUNK_INDEX || h.comp_size != s.size - sizeof(h) ||
	    h.comp_size % sizeof(struct ht_index_entry))
		return -1;
	size_t n = h.comp_size / sizeof(struct ht_index_entry);
	struct ht_index_entry *e = malloc(n ? h.comp_size : 1);
	if (!e || read_at(r, e, h.comp_size, s.offset + sizeof(h)) < 0) {
		free(e);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct ht_chunk_header ch;
		if (e[i].offset + sizeof(ch) > r->info.file_size ||
		    read_at(r, &ch, sizeof(ch), e[i].offset) < 0 ||
		    check_chunk_header(r, &ch, e[i].offset) < 0 || ch.tid != e[i].tid ||
		    ch.first_seq != e[i].first_seq || ch.type != e[i].type ||
		    e[i].offset + sizeof(ch) + ch.comp_size > r->info.file_size) {
			r->err[0] = 0;
			r->nchunks = 0;
			r->nclocks = 0;
			r->total_bytes = 0;
			r->info.events_chunks = 0;
			free(e);
			return -1;
		}
		if (ch.type == HT_CHUNK_EVENTS)
			add_chunk(r, &ch, e[i].offset);
		else if (ch.type == HT_CHUNK_CLOCK)
			add_clock(r, e[i].offset, &ch);
	}
	free(e);
	return 0;
}

static void fit_clock(struct ht_reader *r)
{
	const struct ht_file_header *h = &r->hdr;
	if (!(h->flags & HT_FILE_F_TSC)) {
		r->ts_per_ns = 1.0;
		return;
	}
	uint64_t t0 = h->start_ts, n0 = h->start_mono_ns, t1 = 0, n1 = 0;
	for (size_t i = 0; i < r->nclocks; i++) {
		if (r->clocks[i].mono_ns > n1 && r->clocks[i].ts > t0) {
			t1 = r->clocks[i].ts;
			n1 = r->clocks[i].mono_ns;
		}
	}
	if ((h->flags & HT_FILE_F_CLOSED) && h->end_mono_ns > n1 && h->end_ts > t0) {
		t1 = h->end_ts;
		n1 = h->end_mono_ns;
	}
	if (n1 > n0 + 100000 && t1 > t0)
		r->ts_per_ns = (double)(t1 - t0) / (double)(n1 - n0);
	else
		r->ts_per_ns = h->ts_hz ? (double)h->ts_hz / 1e9 : 1.0;
}

/* A double as uint64_t, saturating (a damaged clock gives absurd rates). */
static uint64_t sat_u64(double v)
{
	if (!(v < 18446744073709549568.0)) /* the largest double below 2^64; NaN too */
		return UINT64_MAX;
	return v > 0 ? (uint64_t)v : 0;
}

uint64_t ht_reader__ts_to_ns(const struct ht_reader *r, uint64_t ts)
{
	if (ts <= r->base_ts)
		return 0;
	return sat_u64((double)(ts - r->base_ts) / r->ts_per_ns);
}

static char *dup_section(struct ht_reader *r, int sec, int join)
{
	struct ht_section_ref s = r->hdr.sec[sec];
	size_t n = s.size > 65536 ? 65536 : (size_t)s.size;
	char *p = calloc(1, n + 1);
	if (!p)
		return NULL;
	if (n && s.offset + n <= r->info.file_size)
		read_at(r, p, n, s.offset);
	if (join) {
		for (size_t i = 0; i + 1 < n; i++)
			if (!p[i])
				p[i] = ' ';
	}
	while (n && (p[n - 1] == 0 || p[n - 1] == ' '))
		p[--n] = 0;
	return p;
}

static int cmp_chunk(const void *a, const void *b)
{
	const struct chunk_ref *x = a, *y = b;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->first_seq != y->first_seq)
		return x->first_seq < y->first_seq ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* ---- decoding ------------------------------------------------------------ */

static int load_chunk(struct ht_reader *r, struct stream *s)
{
	struct chunk_ref *c = &s->chunks[s->next_chunk++];
	if (c->first_seq != s->seq && s->synced) {
		set_warn(r, "thread %u: events %llu..%llu are missing (a chunk was lost)", s->tid,
			 (unsigned long long)s->seq, (unsigned long long)c->first_seq - 1);
		s->synced = 0;
		s->gap_said = 1;
	}
	if (!(c->flags & HT_CHUNK_F_SYNC) && !s->synced) {
		/* A continuation without its start cannot be decoded.  After a
		 * lost chunk that was said already; otherwise (a thread's first
		 * chunk, or one after a chunk that held no SYNC) say it now. */
		if (!s->gap_said) {
			s->gap_said = 1;
			set_warn(r, "offset %llu: thread %u: events %llu..%llu are skipped: their "
				    "chunk continues one that is missing", (unsigned long long)c->offset,
				 s->tid, (unsigned long long)c->first_seq,
				 (unsigned long long)(c->first_seq + c->nevents - 1));
		}
		return 0;
	}
	/* The payload, decompressed, into the stream's buffer: records, or
	 * the columns they are decoded from one by one. */
	int cols = (c->flags & HT_CHUNK_F_COLUMNS) != 0;
	s->cols = 0;
	s->buf = grow(s->buf, &s->cap, c->raw_size + 1, 1);
	uint8_t *dst = s->buf;
	uint64_t poff = c->offset + sizeof(struct ht_chunk_header);
	if (c->flags & HT_CHUNK_F_ZSTD) {
		r->zbuf = grow(r->zbuf, &r->zcap, c->comp_size + 1, 1);
		if (read_at(r, r->zbuf, c->comp_size, poff) < 0) {
			set_err(r, "offset %llu: cannot read chunk payload", (unsigned long long)c->offset);
			return -1;
		}
		size_t n = ZSTD_decompressDCtx(r->dctx, dst, c->raw_size, r->zbuf, c->comp_size);
		if (ZSTD_isError(n) || n != c->raw_size) {
			set_err(r, "offset %llu: chunk of thread %u does not decompress (%s): the trace "
				   "is corrupt here", (unsigned long long)c->offset, c->tid,
				ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short payload");
			return -1;
		}
	} else if (read_at(r, dst, c->raw_size, poff) < 0) {
		set_err(r, "offset %llu: cannot read chunk payload", (unsigned long long)c->offset);
		return -1;
	}
	size_t len = c->raw_size;
	if (cols) {
		const char *why = "out of memory";
		if (!s->cd)
			s->cd = ht_coldec__new();
		if (!s->cd ||
		    ht_coldec__start(s->cd, s->buf, c->raw_size, r->hdr.version, &why) < 0) {
			set_err(r, "offset %llu: column-coded chunk of thread %u: %s: the trace is "
				   "corrupt here", (unsigned long long)c->offset, c->tid, why);
			return -1;
		}
		s->cols = 1;
		len = 0; /* pos = end: the chunk's end is checked once cd is done */
	}
	r->done_bytes += c->comp_size;
	s->pos = s->buf;
	s->end = s->buf + len;
	s->chunk_off = c->offset;
	s->chunk_events = 0;
	s->chunk_expect = c->nevents;
	s->seq = c->first_seq;
	return 1;
}

static int corrupt(struct ht_reader *r, struct stream *s, const char *what)
{
	set_err(r, "offset %llu: thread %u, event %llu: %s: the trace is corrupt here",
		(unsigned long long)s->chunk_off, s->tid, (unsigned long long)s->seq, what);
	s->done = 1;
	return 0;
}

/* Decodes the stream's next events into s->batch; how many, 0 when the
 * stream ends. */
static unsigned fill(struct ht_reader *r, struct stream *s);

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

HOT int stream_advance(struct ht_reader *r, struct stream *s)
{
	if (s->has_split) {
		s->has_split = 0;
		s->ev = &s->split;
		return 1;
	}
	if (s->bi + 1 < s->bn)
		s->bi++;
	else if (!fill(r, s))
		return 0;
	s->ev = &s->batch[s->bi];
	split_event(s);
	return 1;
}

static uint32_t node_intern(struct ht_reader *r, uint32_t parent, uint64_t ip, uint32_t mod)
{
	if (!r->nnodes) {
		r->nodes = grow(r->nodes, &r->capnodes, 1024, sizeof(*r->nodes));
		r->nodes[0].ip = 0;
		r->nodes[0].parent = 0;
		r->nodes[0].mod = 0;
		r->nnodes = 1;
	}
	if (r->nnodes * 2 >= r->node_hcap) {
		size_t cap = r->node_hcap ? r->node_hcap * 2 : 4096;
		uint32_t *h = ht_xcalloc(cap, sizeof(*h));
		for (size_t id = 1; id < r->nnodes; id++) {
			size_t i = hash_node(r->nodes[id].parent, r->nodes[id].ip) & (cap - 1);
			while (h[i])
				i = (i + 1) & (cap - 1);
			h[i] = (uint32_t)id;
		}
		free(r->node_hash);
		r->node_hash = h;
		r->node_hcap = cap;
	}
	size_t mask = r->node_hcap - 1;
	size_t i = hash_node(parent, ip) & mask;
	for (; r->node_hash[i]; i = (i + 1) & mask) {
		const struct node *n = &r->nodes[r->node_hash[i]];
		if (n->ip == ip && n->parent == parent && n->mod == mod)
			return r->node_hash[i];
	}
	r->nodes = grow(r->nodes, &r->capnodes, r->nnodes + 1, sizeof(*r->nodes));
	uint32_t id = (uint32_t)r->nnodes++;
	r->nodes[id].ip = ip;
	r->nodes[id].parent = parent;
	r->nodes[id].mod = mod;
	r->node_hash[i] = id;
	return id;
}

/* FRAME, MODULE, BUILD_ID, MODULE_GONE: what stacks need, not events. */
static int meta_record(struct ht_reader *r, struct stream *s, const struct ht_rec *rec)
{
	const uint64_t *f = rec->f;
	switch (rec->kind) {
	case HT_EV_FRAME: {
		/* Ids are handed out in order: a new one is the next; one seen
		 * before (a stream decoded again) is defined the same way. */
		if (f[0] == 0 || f[0] > s->nnodes + 1 || f[1] >= f[0])
			return corrupt(r, s, "stack frame record out of order"), -1;
		uint32_t parent = f[1] ? s->nodes[f[1] - 1] : 0;
		uint32_t id = node_intern(r, parent, f[2], ht_modmap__find(&r->mods, &s->mods, f[2]));
		if (f[0] == s->nnodes + 1) {
			s->nodes = grow(s->nodes, &s->capnodes, s->nnodes + 1, sizeof(*s->nodes));
			s->nnodes++;
		}
		s->nodes[f[0] - 1] = id;
		break;
	}
	case HT_EV_MODULE:
		ht_modmap__module(&r->mods, &s->mods, f[0], f[1], f[2], (const char *)rec->str,
				  (size_t)f[3]);
		break;
	case HT_EV_BUILD_ID:
		ht_modmap__build_id(&r->mods, &s->mods, f[0], rec->str, (size_t)f[1]);
		break;
	case HT_EV_MODULE_GONE:
		ht_modmap__gone(&r->mods, &s->mods, f[0]);
		break;
	default:
		break; /* HT_EV_EXT itself cannot be a kind */
	}
	return 0;
}

/* Decodes the stream's next event into e: 1; 0 when the stream ends (or
 * stops at an error).  With ahead set (events decoded ahead wait in the
 * batch), returns 2 instead of taking a step that must come in its turn:
 * a stack or module record (the reader's node ids are given out in the
 * order of delivery) or the next chunk (its warnings). */
static int decode_next(struct ht_reader *r, struct stream *s, struct ht_event *e, int ahead)
{
	for (;;) {
		if (s->done)
			return 0;
		struct ht_rec rec;
		const char *why = NULL;
		const uint8_t *p = s->pos; /* past the record */
		if (s->has_pend) {
			s->has_pend = 0;
			rec = s->pend;
			goto got_record;
		}
		if (s->cols) {
			int k = ht_coldec__next(s->cd, &rec, &why);
			if (k < 0) {
				set_err(r, "offset %llu: column-coded chunk of thread %u: %s: the trace is "
					   "corrupt here", (unsigned long long)s->chunk_off, s->tid, why);
				s->done = 1;
				return 0;
			}
			if (k == 0)
				s->cols = 0; /* the chunk's end (pos = end) */
			else
				goto got_record;
		}
		if (s->pos >= s->end) {
			if (s->pos && s->chunk_events != s->chunk_expect)
				return corrupt(r, s, "chunk holds fewer events than its header says");
			if (s->next_chunk >= s->nchunks) {
				s->done = 1;
				ht_coldec__free(s->cd);
				s->cd = NULL;
				free(s->buf);
				s->buf = NULL;
				s->cap = 0;
				s->pos = s->end = NULL;
				return 0;
			}
			if (ahead)
				return 2;
			int k = load_chunk(r, s);
			if (k < 0) {
				s->done = 1;
				return 0;
			}
			if (k == 0)
				s->pos = s->end = NULL;
			continue; /* an empty chunk ends here too */
		}
		size_t used = ht_rec__parse(&rec, s->pos, s->end, &why);
		if (!used)
			return corrupt(r, s, why);
		p = s->pos + used;
	got_record:;
		int kind = rec.kind;
		const struct ht_kind_desc *d = &ht_kind_descs[kind];
		unsigned nf = rec.nf;
		const uint64_t *f = rec.f;
		int v2 = r->hdr.version >= 2;
		if (kind == HT_EV_TICK) {
			if (!s->synced)
				return corrupt(r, s, "event before any sync record");
			s->last_ts += f[0] + (v2 && f[1] ? f[1] - 1 : f[1]);
			s->pos = p;
			continue;
		}
		if (kind == HT_EV_SYNC) {
			if (f[0] != s->seq)
				return corrupt(r, s, "sync record disagrees with the chunk's sequence number");
			s->last_ts = f[1];
			s->last_ptr = 0;
			s->dur = 0;
			s->synced = 1;
			s->gap_said = 0;
			s->pos = p;
			continue;
		}
		if (!s->synced)
			return corrupt(r, s, "event before any sync record");
		if (kind == HT_EV_DURATION) { /* times the thread's next event */
			s->dur = f[0];
			s->pos = p;
			continue;
		}
		if (kind >= 32) {
			if (ahead) {
				if (s->cols) {
					s->pend = rec;
					s->has_pend = 1;
				}
				return 2; /* (a record's is parsed again) */
			}
			if (meta_record(r, s, &rec) < 0)
				return 0;
			s->pos = p;
			continue;
		}
		e->kind = (uint8_t)kind;
		e->flags = rec.kb & ~HT_KIND_MASK;
		e->tid = s->tid;
		e->seq = s->seq;
		e->ts_taken = !v2 || f[nf] != 0;
		e->ts = s->last_ts + (v2 && f[nf] ? f[nf] - 1 : f[nf]);
		e->usable = 0;
		e->duration = s->dur; /* a 'd' field below takes precedence */
		s->dur = 0;
		e->str = NULL;
		e->nv = 0;
		e->part = HT_PART_WHOLE;
		e->stack = 0;
		if (rec.has_stack && f[nf + 1] && f[nf + 1] <= s->nnodes)
			e->stack = s->nodes[f[nf + 1] - 1];
		uint64_t result_ptr = 0, slack = 0;
		if (kind == HT_EV_FREE) {
			/* the common kinds without the walk over field codes */
			uint64_t v = s->last_ptr + (uint64_t)ht_unzigzag(f[0]);
			s->last_ptr = v;
			e->v[0] = v;
			e->nv = 1;
			nf = 0;
		} else if (kind == HT_EV_MALLOC) {
			uint64_t v = s->last_ptr + (uint64_t)ht_unzigzag(f[1]);
			s->last_ptr = v;
			e->v[0] = f[0];
			e->v[1] = result_ptr = v;
			e->v[2] = slack = f[2];
			e->nv = 3;
			nf = 0;
		}
		for (unsigned i = 0; i < nf; i++) {
			uint64_t v = f[i];
			switch (d->fields[i]) {
			case 's':
				v = (uint64_t)ht_unzigzag(v);
				break;
			case 'p':
				v = s->last_ptr + (uint64_t)ht_unzigzag(v);
				s->last_ptr = v;
				if ((int)i == d->result)
					result_ptr = v;
				break;
			case 'U':
				slack = v;
				break;
			case 'd':
				e->duration = v;
				break;
			case 'S':
				memcpy(s->str, rec.str, v); /* v <= HT_MAX_STR: checked by the parse */
				s->str[v] = 0;
				e->str = s->str;
				continue; /* no value slot */
			}
			e->v[e->nv++] = v;
		}
		e->weight = 1;
		if (d->is_alloc && result_ptr) {
			uint64_t req = ht_event__size(e);
			e->usable = ht_usable_of(r->hdr.version, e->flags, req, slack);
			if ((r->hdr.flags & (HT_FILE_F_SAMPLED | HT_FILE_F_SAMPLE_EVERY)) ==
			    (HT_FILE_F_SAMPLED | HT_FILE_F_SAMPLE_EVERY))
				e->weight = r->hdr.sample_every ? r->hdr.sample_every : 1;
			else if (r->hdr.flags & HT_FILE_F_SAMPLED)
				e->weight = ht_sample_weight(req, result_ptr, r->hdr.sample_bytes);
		}
		s->last_ts = e->ts;
		s->pos = p;
		s->seq++;
		s->chunk_events++;
		return 1;
	}
}

/* Malloc and free records of a column-coded chunk, straight into events
 * (ht_coldec__events: what decode_next makes of them).  Returns how many;
 * *failed on an error, said as decode_next says it. */
static unsigned fast_events(struct ht_reader *r, struct stream *s, struct ht_event *ev,
			    unsigned max, int *failed)
{
	struct ht_coldec_thread t = {
		.last_ts = s->last_ts,
		.last_ptr = s->last_ptr,
		.seq = s->seq,
		.dur = s->dur,
		.tid = s->tid,
		.nodes = s->nodes,
		.nnodes = s->nnodes,
		.sampled = r->sampled,
		.weight = r->hdr.sample_every ? r->hdr.sample_every : 1,
		.sample_bytes = r->hdr.sample_bytes,
	};
	unsigned n = 0;
	const char *why = NULL;
	*failed = ht_coldec__events(s->cd, &t, ev, max, &n, &why) < 0;
	s->last_ts = t.last_ts;
	s->last_ptr = t.last_ptr;
	s->seq = t.seq;
	s->dur = t.dur;
	s->chunk_events += n;
	if (*failed) {
		set_err(r, "offset %llu: column-coded chunk of thread %u: %s: the trace is corrupt here",
			(unsigned long long)s->chunk_off, s->tid, why);
		s->done = 1;
	}
	return n;
}

/* What decoding ahead found wrong waits until the events before it are
 * delivered: the first error and warning said stay those of the first
 * events in time. */
static void defer_messages(struct ht_reader *r, struct stream *s, int had_err, int had_warn)
{
	if (!had_err && r->err[0] && !s->pend_err) {
		s->pend_err = strdup(r->err);
		r->err[0] = 0;
	}
	if (!had_warn && r->warn[0] && !s->pend_warn) {
		s->pend_warn = strdup(r->warn);
		r->warn[0] = 0;
	}
}

static unsigned fill(struct ht_reader *r, struct stream *s)
{
	s->bi = s->bn = 0;
	if (s->pend_warn) {
		set_warn(r, "%s", s->pend_warn);
		free(s->pend_warn);
		s->pend_warn = NULL;
	}
	if (s->pend_err) {
		set_err(r, "%s", s->pend_err);
		free(s->pend_err);
		s->pend_err = NULL;
		s->done = 1;
		return 0;
	}
	if (!s->batch) {
		s->batch = ht_xmalloc(BATCH * sizeof(*s->batch));
	}
	unsigned n = 0;
	int more = 1;
	while (more && n < BATCH) {
		int had_err = r->err[0] != 0, had_warn = r->warn[0] != 0, failed = 0;
		if (s->cols && s->synced && !s->has_pend && !s->done)
			n += fast_events(r, s, s->batch + n, BATCH - n, &failed);
		if (failed) {
			more = 0;
		} else if (n < BATCH) {
			int k = decode_next(r, s, &s->batch[n], n > 0);
			/* an event's string lives in the stream until its next one */
			more = k == 1 && !s->batch[n].str;
			n += k == 1;
		}
		if (n)
			defer_messages(r, s, had_err, had_warn);
	}
	s->bn = n;
	return n;
}

/* ---- the merge ----------------------------------------------------------- */

HOT int before(const struct stream *a, const struct stream *b)
{
	if (a->ev->ts != b->ev->ts)
		return a->ev->ts < b->ev->ts;
	if (a->tid != b->tid)
		return a->tid < b->tid;
	return a->ev->seq < b->ev->seq;
}

static void heap_down(struct ht_reader *r, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < r->nheap && before(r->heap[l], r->heap[m]))
			m = l;
		if (l + 1 < r->nheap && before(r->heap[l + 1], r->heap[m]))
			m = l + 1;
		if (m == i)
			return;
		struct stream *t = r->heap[i];
		r->heap[i] = r->heap[m];
		r->heap[m] = t;
		i = m;
	}
}

/* With many threads, a stream whose first event lies in the future gives
 * its decoded chunk back until the merge reaches it: memory then follows
 * the threads alive at a time, not all threads of the trace. */
static void park(struct stream *s)
{
	/* Re-decoding must start where the delta state starts: at the
	 * thread's last chunk with a SYNC record at or before this one. */
	size_t k = s->next_chunk ? s->next_chunk - 1 : 0;
	while (k > 0 && !(s->chunks[k].flags & HT_CHUNK_F_SYNC))
		k--;
	s->park_chunk = k;
	s->parked = 1;
	s->split = *s->ev;
	s->ev = &s->split;
	free(s->batch);
	s->batch = NULL;
	s->bi = s->bn = 0;
	/* what decoding ahead met is met again */
	s->has_pend = 0;
	s->done = 0;
	free(s->pend_err);
	free(s->pend_warn);
	s->pend_err = s->pend_warn = NULL;
	s->cols = 0;
	ht_coldec__free(s->cd);
	s->cd = NULL;
	free(s->buf);
	s->buf = NULL;
	s->cap = 0;
	s->pos = s->end = NULL;
}

static int unpark_advance(struct ht_reader *r, struct stream *s)
{
	uint64_t want = s->ev->seq + 1;
	s->parked = 0;
	s->next_chunk = s->park_chunk;
	s->synced = 0;
	s->seq = s->chunks[s->park_chunk].first_seq;
	while (fill(r, s))
		for (; s->bi < s->bn; s->bi++)
			if (s->batch[s->bi].seq >= want)
				goto found;
	return 0;
found:
	s->ev = &s->batch[s->bi];
	split_event(s);
	return 1;
}

/* Restores the heap after its first stream advanced or left, and works
 * out how far the new first one may advance and stay first: while its
 * event comes before the next stream's (by timestamp, then thread). */
static void reorder_top(struct ht_reader *r)
{
	if (r->nheap > 1 && (before(r->heap[1], r->heap[0]) ||
			     (r->nheap > 2 && before(r->heap[2], r->heap[0]))))
		heap_down(r, 0);
	r->run = NULL;
	if (!r->nheap)
		return;
	struct stream *s = r->heap[0], *n = NULL;
	if (r->nheap > 1)
		n = r->heap[1];
	if (r->nheap > 2 && before(r->heap[2], n))
		n = r->heap[2];
	if (!n) {
		r->run_ts = UINT64_MAX;
	} else if (s->tid < n->tid) {
		r->run_ts = n->ev->ts;
	} else {
		if (!n->ev->ts)
			return;
		r->run_ts = n->ev->ts - 1;
	}
	r->run = s;
}

/* ---- causal order: the set of live block addresses ----------------------- */

HOT size_t live_slot(const struct ht_reader *r, uint64_t a)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 20) & (r->live_cap - 1);
}

/* Remembers where the probe stopped: the event's update of the set, just
 * after, starts there (until the set changes). */
HOT int live_has(struct ht_reader *r, uint64_t a)
{
	if (a == r->live_last)
		return 1; /* (a is not 0) */
	if (!r->live_n)
		return 0;
	for (size_t i = live_slot(r, a);; i = (i + 1) & (r->live_cap - 1)) {
		if (r->live[i] == a || !r->live[i]) {
			r->probe_a = a;
			r->probe_i = i;
			return r->live[i] != 0;
		}
	}
}

static void live_insert(struct ht_reader *r, uint64_t a);

/* a (not 0) becomes live_last, unless the set holds it already (returns
 * 1); the previous live_last goes into the table. */
HOT int live_add(struct ht_reader *r, uint64_t a)
{
	if (a == r->live_last)
		return 1;
	if (r->live_n && !(a == r->probe_a && !r->live[r->probe_i]) && live_has(r, a))
		return 1; /* (live_has probed the table: a is not live_last) */
	r->probe_a = 0;
	if (r->live_last)
		live_insert(r, r->live_last);
	r->live_last = a;
	return 0;
}

/* Puts a, which the set does not hold, into the table. */
static void live_insert(struct ht_reader *r, uint64_t a)
{
	if ((r->live_n + 1) * 2 > r->live_cap) {
		size_t ncap = r->live_cap ? r->live_cap * 2 : 64;
		uint64_t *old = r->live, *nl = calloc(ncap, sizeof(*nl));
		if (!nl)
			return; /* out of memory: order by time alone */
		size_t ocap = r->live_cap;
		r->live = nl;
		r->live_cap = ncap;
		for (size_t i = 0; i < ocap; i++) {
			if (!old[i])
				continue;
			size_t j = live_slot(r, old[i]);
			while (nl[j])
				j = (j + 1) & (ncap - 1);
			nl[j] = old[i];
		}
		free(old);
		r->probe_a = 0;
	}
	size_t i = a == r->probe_a ? r->probe_i : live_slot(r, a);
	r->probe_a = 0;
	for (; r->live[i]; i = (i + 1) & (r->live_cap - 1))
		if (r->live[i] == a)
			return;
	r->live[i] = a;
	r->live_n++;
}

/* Removes a; later entries of its probe run move back (no tombstones).
 * Returns 0 if a was not live. */
HOT int live_del(struct ht_reader *r, uint64_t a)
{
	if (a == r->live_last) {
		r->live_last = 0;
		return 1;
	}
	if (!r->live_n)
		return 0;
	size_t m = r->live_cap - 1, i = a == r->probe_a ? r->probe_i : live_slot(r, a);
	r->probe_a = 0;
	for (; r->live[i] != a; i = (i + 1) & m)
		if (!r->live[i])
			return 0;
	r->live[i] = 0;
	r->live_n--;
	for (size_t j = (i + 1) & m; r->live[j]; j = (j + 1) & m) {
		size_t k = live_slot(r, r->live[j]);
		/* move j to the hole at i unless its home lies in (i, j] */
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			r->live[i] = r->live[j];
			r->live[j] = 0;
			i = j;
		}
	}
	return 1;
}

/* The heap block an event hands out now, 0 if none.  A realloc that stays
 * in place hands out nothing new. */
HOT uint64_t acquired_block(const struct ht_event *e)
{
	if (e->kind == HT_EV_MALLOC)
		return e->v[1]; /* the common case: never split, no old block */
	if (e->kind == HT_EV_FREE)
		return 0;
	if (!ht_kind_descs[e->kind].is_alloc || !ht_event__acquire_now(e))
		return 0;
	uint64_t p = ht_event__result_ptr(e);
	return p == ht_event__old_ptr(e) ? 0 : p;
}

/* The heap block an event gives back now, 0 if none. */
HOT uint64_t released_block(const struct ht_event *e)
{
	if (e->kind == HT_EV_FREE)
		return e->nv ? e->v[0] : 0;
	if (e->kind == HT_EV_MALLOC)
		return 0;
	if (ht_event__release_now(e) && ht_event__result_ptr(e) != ht_event__old_ptr(e))
		return ht_event__old_ptr(e);
	return 0;
}

static void heap_up(struct ht_reader *r, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!before(r->heap[i], r->heap[p]))
			return;
		struct stream *t = r->heap[i];
		r->heap[i] = r->heap[p];
		r->heap[p] = t;
		i = p;
	}
}

static void unhold(struct ht_reader *r, size_t i, int forced)
{
	struct stream *s = r->held[i];
	r->held[i] = r->held[--r->nheld];
	s->held_on = 0;
	s->forced = forced;
	r->run = NULL;
	r->heap[r->nheap++] = s;
	heap_up(r, r->nheap - 1);
}

/* A held allocation whose release has not come within hold_ticks of its
 * own time never will (an untraced free, a paused recording): let the
 * oldest one through.  Also when nothing else is left to deliver. */
static void unhold_overdue(struct ht_reader *r)
{
	while (r->nheld) {
		size_t oldest = 0;
		for (size_t i = 1; i < r->nheld; i++)
			if (r->held[i]->ev->ts < r->held[oldest]->ev->ts)
				oldest = i;
		if (r->nheap && r->heap[0]->ev->ts <= r->held[oldest]->ev->ts + r->hold_ticks)
			return;
		unhold(r, oldest, 1);
	}
}

/* The blocks an event gives back (*rel) and hands out (*acq) now, 0 if
 * none: released_block and acquired_block, the common kinds first. */
HOT void event_blocks(const struct ht_event *e, uint64_t *rel, uint64_t *acq)
{
	if (e->kind == HT_EV_MALLOC) {
		*rel = 0;
		*acq = e->v[1];
	} else if (e->kind == HT_EV_FREE) {
		*rel = e->nv ? e->v[0] : 0;
		*acq = 0;
	} else {
		*rel = released_block(e);
		*acq = acquired_block(e);
	}
}

/* An address out of step with the merged order: counted, or kept
 * pending while recording may have been off (calls then went untraced). */
static void anomaly(struct ht_reader *r)
{
	if (r->ctl_state == 1)
		r->anomalies++;
	else
		r->anomalies_pend++;
}

/* A control event: recording starts, pauses or forgets (heaptrail_start,
 * _stop, _pause, _resume, _reset).  Blocks allocated while it was off, or
 * before, may be freed now: releases of addresses not live stop counting.
 * What was counted while it may have been off (the calls other threads
 * made between the switch and its control event, a recording started
 * paused) is dropped when it comes back on. */
static void track_control(struct ht_reader *r, uint64_t op)
{
	if (op == HT_CTL_SYNC)
		return;
	if (op != HT_CTL_PAUSE) {
		/* frees were not recorded while paused or stopped */
		r->live_n = 0;
		r->live_last = 0;
		r->probe_a = 0;
		if (r->live)
			memset(r->live, 0, r->live_cap * sizeof(*r->live));
	}
	r->check_free = 0;
	if (op == HT_CTL_START || op == HT_CTL_RESUME) {
		if (r->ctl_state != 1)
			r->anomalies_pend = 0;
		r->ctl_state = 1;
	} else if (op == HT_CTL_PAUSE || op == HT_CTL_STOP || op == HT_CTL_RESET) {
		if (r->ctl_state == 0) {
			r->anomalies += r->anomalies_pend;
			r->anomalies_pend = 0;
			r->ctl_state = 1;
		}
		if (op != HT_CTL_RESET)
			r->ctl_state = 2;
	}
}

/* Keeps the live set in step with a delivered event e, which releases
 * rel and acquires acq (event_blocks), and counts what is out of step:
 * an address handed out while live, released while not live. */
HOT void track_live(struct ht_reader *r, const struct ht_event *e, uint64_t rel, uint64_t acq)
{
	if (!rel && !acq) {
		if (e->kind == HT_EV_CONTROL && e->nv)
			track_control(r, e->v[0]);
		else if (r->check_free && ht_event__old_ptr(e) && ht_event__acquire_now(e) &&
			 ht_event__result_ptr(e) == ht_event__old_ptr(e) &&
			 !live_has(r, ht_event__old_ptr(e)))
			anomaly(r); /* realloc in place of a block not live */
		return;
	}
	if (rel && !live_del(r, rel) && r->check_free)
		anomaly(r);
	if (acq && live_add(r, acq) && r->check)
		anomaly(r);
	/* wake the streams that wait for this address to change; each checks
	 * again when it comes first */
	for (size_t i = r->nheld; i-- > 0;)
		if (r->held[i]->held_on && (r->held[i]->held_on == rel || r->held[i]->held_on == acq))
			unhold(r, i, 0);
}

/* The address an event without a timestamp of its own must wait for, 0 if
 * it can be delivered now: an allocation of a block that is still live
 * waits for its release, a free of a block not yet live for its
 * allocation (both happened in another thread, and the free's timestamp
 * there, or the allocation's here, is only a lower bound).  Events with
 * their own timestamp are ordered by it (docs/FORMAT.md, "Ordering"). */
HOT uint64_t must_wait(struct ht_reader *r, const struct ht_event *e, uint64_t rel, uint64_t acq)
{
	if (e->ts_taken)
		return 0;
	if (acq)
		return live_has(r, acq) ? acq : 0;
	return rel && !live_has(r, rel) ? rel : 0;
}

const struct ht_event *ht_reader__next_event(struct ht_reader *r)
{
	struct stream *s;
	uint64_t rel = 0, acq = 0;
	for (;;) {
		if (r->nheld)
			unhold_overdue(r);
		if (!r->nheap) {
			r->at_end = 1;
			ht_reader__order(r, &r->info.order);
			return NULL;
		}
		s = r->heap[0];
		if (!r->causal)
			break;
		event_blocks(s->ev, &rel, &acq);
		if (s->forced)
			break;
		uint64_t a = must_wait(r, s->ev, rel, acq);
		if (!a)
			break;
		s->held_on = a;
		r->run = NULL;
		r->held[r->nheld++] = s;
		r->heap[0] = r->heap[--r->nheap];
		heap_down(r, 0);
	}
	s->forced = 0;
	/* delivered in place, unless its slot is used again by the advance
	 * below (the batch's last, split, a parked stream's) */
	struct ht_event *ev = s->ev;
	if (ev == &s->split || s->bi + 1 >= s->bn || s->parked) {
		r->out_ev = *ev;
		ev = &r->out_ev;
	}
	if (ev->str) {
		memcpy(r->out_str, ev->str, strlen(ev->str) + 1);
		ev->str = r->out_str;
	}
	if (ev->ts < r->last_out_ts)
		ev->ts = r->last_out_ts; /* a held allocation: after what it waited for */
	if (ev->ts != r->last_out_ts) {
		/* undated events repeat their thread's last timestamp: convert once
		 * (last_out_ns starts as ts_to_ns of 0: 0) */
		r->last_out_ts = ev->ts;
		r->last_out_ns = ht_reader__ts_to_ns(r, ev->ts);
	}
	ev->time_ns = r->last_out_ns;
	if (!(s->parked ? unpark_advance(r, s) : stream_advance(r, s))) {
		r->heap[0] = r->heap[--r->nheap];
		r->run = NULL;
	}
	/* (mostly the same thread goes on: its next event still comes first) */
	if (s != r->run || s->ev->ts > r->run_ts)
		reorder_top(r);
	if (r->track) {
		if (r->causal) {
			if (!ev->ts_taken && !s->undated++)
				r->undated_threads++;
			r->undated += !ev->ts_taken;
		} else {
			event_blocks(ev, &rel, &acq);
		}
		track_live(r, ev, rel, acq);
	}
	return ev;
}

int ht_reader__next(struct ht_reader *r, struct ht_event *ev)
{
	const struct ht_event *e = ht_reader__next_event(r);
	if (!e)
		return 0;
	*ev = *e;
	return 1;
}

/* ---- open/close ---------------------------------------------------------- */

int ht_trace__wait_writer(int fd, int32_t pid, int timeout_ms)
{
	if (flock(fd, LOCK_SH | LOCK_NB) == 0)
		return flock(fd, LOCK_UN), 0;
	if (errno != EWOULDBLOCK)
		return 0; /* no locks here (some network file systems): read */
	/* A recorder holds the file.  While the program runs, read what is
	 * there; once it has ended, its writer is finishing the file. */
	if (pid > 0 && (kill(pid, 0) == 0 || errno == EPERM))
		return 1;
	for (int waited = 0; waited < timeout_ms; waited += 5) {
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL);
		if (flock(fd, LOCK_SH | LOCK_NB) == 0)
			return flock(fd, LOCK_UN), 0;
	}
	return 1;
}

struct ht_reader *ht_reader__open(const char *path, char *err, size_t errlen)
{
	struct stat st;
	/* O_NONBLOCK: a FIFO must not block the open (regular files ignore it) */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: %s, not a heaptrail trace (traces are regular files)", path,
			 S_ISDIR(st.st_mode)    ? "is a directory"
			 : S_ISFIFO(st.st_mode) ? "is a FIFO"
			 : S_ISSOCK(st.st_mode) ? "is a socket"
						: "is a device");
		close(fd);
		return NULL;
	}
	struct ht_reader *r = calloc(1, sizeof(*r));
	if (!r) {
		close(fd);
		snprintf(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	r->fd = fd;
	r->path = strdup(path);
	r->info.file_size = (uint64_t)st.st_size;
	if (st.st_size == 0) {
		snprintf(err, errlen, "%s: empty file, not a heaptrail trace (was the program "
				      "killed before it started?)", path);
		goto fail;
	}
	size_t got = read_at_most(r, &r->hdr, sizeof(r->hdr), 0);
	if (got < 8 || memcmp(r->hdr.magic, HT_MAGIC, 8) != 0) {
		/* HT_WL_MAGIC (src/replay/workload.h) */
		if (got >= 8 && !memcmp(r->hdr.magic, "HTWLOAD\n", 8))
			snprintf(err, errlen, "%s: is a heaptrail workload, not a trace: use "
					      "'heaptrail replay' on it", path);
		else
			snprintf(err, errlen, "%s: not a heaptrail trace (bad magic); record one with "
					      "'heaptrail record'", path);
		goto fail;
	}
	if (got == sizeof(r->hdr)) {
		if (ht_trace__wait_writer(fd, r->hdr.pid, HT_WAIT_WRITER_MS) == 0) {
			/* the writer finished meanwhile: read what it left */
			if (fstat(fd, &st) == 0)
				r->info.file_size = (uint64_t)st.st_size;
			got = read_at_most(r, &r->hdr, sizeof(r->hdr), 0);
		} else {
			r->info.being_written = 1; /* read what is there now */
		}
	}
	if (got < sizeof(r->hdr)) {
		snprintf(err, errlen, "%s: file ends inside the header (%zu of %zu bytes): truncated",
			 path, got, sizeof(r->hdr));
		goto fail;
	}
	if (r->hdr.version > HT_VERSION) {
		snprintf(err, errlen, "%s: trace format version %u is newer than this heaptrail "
				      "reads (%u): use a newer heaptrail", path, r->hdr.version, HT_VERSION);
		goto fail;
	}
	if (r->hdr.version == 0 || r->hdr.header_size < sizeof(r->hdr) ||
	    r->hdr.sec[HT_SEC_CHUNKS].offset < sizeof(r->hdr) ||
	    r->hdr.sec[HT_SEC_CHUNKS].offset > r->info.file_size) {
		snprintf(err, errlen, "%s: corrupt header (version %u, header size %u)", path,
			 r->hdr.version, r->hdr.header_size);
		goto fail;
	}
	r->cmdline = dup_section(r, HT_SEC_CMDLINE, 1);
	r->exe = dup_section(r, HT_SEC_EXE, 0);
	r->info.closed = (r->hdr.flags & HT_FILE_F_CLOSED) != 0;
	if (r->info.closed && load_index(r) == 0) {
		r->info.indexed = 1;
	} else {
		if (r->info.closed)
			set_warn(r, "the index is damaged; chunks were scanned instead");
		scan_chunks(r);
		/* A closed trace says where its chunks and index end: a scan
		 * that stops cleanly before that, at a chunk boundary, read a
		 * cut file. */
		uint64_t end = 0;
		for (int i = HT_SEC_CHUNKS; i <= HT_SEC_INDEX; i++)
			if (r->hdr.sec[i].offset + r->hdr.sec[i].size > end)
				end = r->hdr.sec[i].offset + r->hdr.sec[i].size;
		if (r->info.closed && end > r->info.file_size)
			set_err(r, "offset %llu: the file ends before its %s (the header says it "
				   "ends at %llu): the file is truncated",
				(unsigned long long)r->info.file_size,
				r->info.file_size >= r->hdr.sec[HT_SEC_CHUNKS].offset +
							     r->hdr.sec[HT_SEC_CHUNKS].size
					? "index" : "last chunk",
				(unsigned long long)end);
	}
	r->info.orphaned = (r->hdr.flags & HT_FILE_F_ORPHANED) != 0;
	if (r->info.orphaned)
		set_warn(r, "the program ended without shutting the tracer down (killed, or ended "
			    "by a signal it did not catch); its writer process saved every event "
			    "it had recorded");
	r->info.disk_full = (r->hdr.flags & HT_FILE_F_DISK_FULL) != 0;
	if (r->info.being_written && !r->info.closed)
		set_warn(r, "the trace is still being written (its program, pid %d, runs): read as "
			    "of now, up to the last flush; what is live at its end is live now, not "
			    "at exit", (int)r->hdr.pid);
	else if (r->info.disk_full && !r->info.closed)
		set_warn(r, "recording stopped when a write failed (disk full?): the trace holds "
			    "the events written before");
	else if (!r->info.closed)
		set_warn(r, "the trace was not closed cleanly (the program was killed, crashed or "
			    "exec'ed): it holds the events up to the last flush");
	r->dctx = ZSTD_createDCtx();

	/* Group the chunks by thread, in sequence order. */
	if (r->nchunks > 1)
		qsort(r->chunks, r->nchunks, sizeof(*r->chunks), cmp_chunk);
	for (size_t i = 0; i < r->nchunks; i++)
		if (i == 0 || r->chunks[i].tid != r->chunks[i - 1].tid)
			r->nstreams++;
	r->streams = calloc(r->nstreams ? r->nstreams : 1, sizeof(*r->streams));
	r->heap = calloc(r->nstreams ? r->nstreams : 1, sizeof(*r->heap));
	r->held = calloc(r->nstreams ? r->nstreams : 1, sizeof(*r->held));
	if (!r->streams || !r->heap || !r->held) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	/* Traces with HT_FILE_F_ORDERED dated every event whose previous one on
	 * its address was in another thread: (ts, tid, seq) is the order. */
	r->causal = r->hdr.version >= 2 && r->nstreams > 1 && !(r->hdr.flags & HT_FILE_F_ORDERED);
	/* The live set is kept where threads are merged: one thread's order is
	 * its sequence numbers, and keeping the set would cost a single-threaded
	 * trace with many live blocks a third more time in stats (measured:
	 * 100000 live blocks, 20M events).  Calls hidden from the tracer there
	 * show in the analyzers' own counts (stats: unknown_frees,
	 * address_reuse_while_live). */
	r->check = !(r->hdr.flags & HT_FILE_F_SAMPLED) && r->nstreams > 1;
	/* a fork child frees what its parent allocated */
	r->check_free = r->check && !(r->hdr.flags & HT_FILE_F_FORK_CHILD);
	r->track = r->causal || r->check;
	if ((r->hdr.flags & (HT_FILE_F_SAMPLED | HT_FILE_F_SAMPLE_EVERY)) ==
	    (HT_FILE_F_SAMPLED | HT_FILE_F_SAMPLE_EVERY))
		r->sampled = 1;
	else if (r->hdr.flags & HT_FILE_F_SAMPLED)
		r->sampled = 2;
	size_t si = 0;
	for (size_t i = 0; i < r->nchunks; i++) {
		if (i > 0 && r->chunks[i].tid == r->chunks[i - 1].tid) {
			r->streams[si - 1].nchunks++;
			continue;
		}
		struct stream *s = &r->streams[si++];
		s->tid = r->chunks[i].tid;
		s->chunks = &r->chunks[i];
		s->nchunks = 1;
		s->seq = r->chunks[i].first_seq;
	}
	fit_clock(r);
	/* An event without its own timestamp happened before its thread's
	 * next epoch tick; four ticks leave room for a late writer thread. */
	r->hold_ticks = sat_u64(4.0 * HT_EPOCH_MS * 1e6 * r->ts_per_ns);
	r->base_ts = r->hdr.start_ts;
	for (size_t i = 0; i < r->nstreams; i++) {
		struct stream *s = &r->streams[i];
		if (stream_advance(r, s)) {
			r->heap[r->nheap++] = s;
			if (s->ev->ts < r->base_ts)
				r->base_ts = s->ev->ts; /* events before the recorder's start-up */
			if (r->nstreams > 64 && !s->ev->str && !s->has_split)
				park(s);
		}
	}
	for (size_t i = r->nheap; i-- > 0;)
		heap_down(r, i);

	struct ht_trace_info *in = &r->info;
	in->version = r->hdr.version;
	in->pid = r->hdr.pid;
	in->ppid = r->hdr.ppid;
	in->start_brk = r->hdr.start_brk;
	in->sample_bytes = (r->hdr.flags & HT_FILE_F_SAMPLED) ? r->hdr.sample_bytes : 0;
	in->sample_every = (r->hdr.flags & HT_FILE_F_SAMPLED) && (r->hdr.flags & HT_FILE_F_SAMPLE_EVERY)
				   ? r->hdr.sample_every : 0;
	in->flags = r->hdr.flags;
	in->start_realtime_ns = r->hdr.start_realtime_ns;
	in->ts_per_ns = r->ts_per_ns;
	in->events_hdr = r->hdr.events;
	in->dropped = r->hdr.dropped;
	in->nchunks = (uint32_t)r->nchunks;
	in->nthreads = (uint32_t)r->nstreams;
	in->cmdline = r->cmdline ? r->cmdline : "";
	in->exe = r->exe ? r->exe : "";
	if (in->closed && r->hdr.end_mono_ns > r->hdr.start_mono_ns)
		in->duration_ns = r->hdr.end_mono_ns - r->hdr.start_mono_ns;
	else if (r->nclocks)
		in->duration_ns = r->clocks[r->nclocks - 1].mono_ns - r->hdr.start_mono_ns;
	in->duration_ns += ht_reader__ts_to_ns(r, r->hdr.start_ts);

	/* RSS samples, in time order. */
	r->rss_t = calloc(r->nclocks + 1, sizeof(uint64_t));
	r->rss_v = calloc(r->nclocks + 1, sizeof(uint64_t));
	return r;
fail:
	ht_reader__close(r);
	return NULL;
}

void ht_reader__order(const struct ht_reader *r, struct ht_order_info *o)
{
	memset(o, 0, sizeof(*o));
	o->ordered = (r->hdr.flags & HT_FILE_F_ORDERED) != 0;
	o->final = r->at_end;
	o->undated = r->undated_threads > 1 ? r->undated : 0;
	o->anomalies = r->anomalies;
	/* pending ones stand unless a control event drops them: at the end,
	 * those of a recording that ends paused go */
	if (r->ctl_state == 0 || (r->ctl_state == 2 && !r->at_end))
		o->anomalies += r->anomalies_pend;
	o->events_concerned = o->undated + o->anomalies;
	o->exact = o->events_concerned == 0;
}

size_t ht_reader__rss_samples(const struct ht_reader *r, const uint64_t **time_ns,
			      const uint64_t **rss_kb)
{
	size_t n = 0;
	for (size_t i = 0; i < r->nclocks; i++) {
		if (!r->clocks[i].rss_kb)
			continue;
		r->rss_t[n] = ht_reader__ts_to_ns(r, r->clocks[i].ts);
		r->rss_v[n] = r->clocks[i].rss_kb;
		n++;
	}
	*time_ns = r->rss_t;
	*rss_kb = r->rss_v;
	return n;
}

void ht_reader__close(struct ht_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	for (size_t i = 0; i < r->nstreams; i++) {
		free(r->streams[i].buf);
		free(r->streams[i].batch);
		free(r->streams[i].pend_err);
		free(r->streams[i].pend_warn);
		ht_coldec__free(r->streams[i].cd);
		free(r->streams[i].nodes);
		ht_modview__free(&r->streams[i].mods);
	}
	free(r->streams);
	free(r->nodes);
	free(r->node_hash);
	ht_modmap__free(&r->mods);
	free(r->heap);
	free(r->held);
	free(r->live);
	free(r->chunks);
	free(r->clocks);
	free(r->rss_t);
	free(r->rss_v);
	free(r->zbuf);
	free(r->cmdline);
	free(r->exe);
	free(r->path);
	if (r->dctx)
		ZSTD_freeDCtx(r->dctx);
	free(r);
}

const struct ht_trace_info *ht_reader__info(const struct ht_reader *r)
{
	return &r->info;
}

const char *ht_reader__error(const struct ht_reader *r)
{
	return r->err[0] ? r->err : NULL;
}

const char *ht_reader__warning(const struct ht_reader *r)
{
	return r->warn[0] ? r->warn : NULL;
}

void ht_reader__progress(const struct ht_reader *r, uint64_t *done, uint64_t *total)
{
	*done = r->done_bytes;
	*total = r->total_bytes;
}

uint64_t ht_reader__node_ip(const struct ht_reader *r, uint32_t node)
{
	return node && node < r->nnodes ? r->nodes[node].ip : 0;
}

uint32_t ht_reader__node_parent(const struct ht_reader *r, uint32_t node)
{
	return node && node < r->nnodes ? r->nodes[node].parent : 0;
}

int ht_reader__node_module(const struct ht_reader *r, uint32_t node)
{
	return node && node < r->nnodes ? (int)r->nodes[node].mod - 1 : -1;
}

size_t ht_reader__nnodes(const struct ht_reader *r)
{
	return r->nnodes;
}

size_t ht_reader__modules(const struct ht_reader *r, const struct ht_module **mods)
{
	*mods = r->mods.mods;
	return r->mods.n;
}

uint32_t ht_sample_weight(uint64_t size, uint64_t ptr, uint64_t sample_bytes)
{
	if (!sample_bytes)
		return 1;
	double p = -expm1(-(double)(size ? size : 1) / (double)sample_bytes);
	double w = p > 0 ? 1.0 / p : 1.0;
	if (w > 4e9)
		w = 4e9;
	uint64_t h = (ptr >> 4) * 0x9E3779B97F4A7C15ull;
	h ^= h >> 31;
	double u = (double)(h >> 11) / 9007199254740992.0;
	uint32_t k = (uint32_t)w;
	return k + (u < w - (double)k);
}
