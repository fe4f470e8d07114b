/* The trace reader's decoding threads: each thread's stream decoded ahead
 * into bounded blocks of events by worker threads, while the caller's
 * thread merges them and runs the analyses (reader_int.h; docs/FORMAT.md,
 * "Reading with several threads").
 *
 * What a worker does is a function of the stream's chunks alone: reading,
 * zstd, column and record decoding, the delta state, sequence numbers.
 * What depends on the other threads stays with the caller, in the order
 * of delivery, exactly as the serial reader does it: stack nodes are
 * interned and modules noted when the stream reaches their records (a
 * block carries them as items between its events), stack ids are mapped
 * then, and the errors and warnings a worker met are said when the stream
 * advances past the last event before them, which is where the serial
 * reader says them.  So the events, the node ids and the messages are the
 * same, with any number of workers. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "reader_int.h"
#include "reader_slice.h"

/* Events a block holds about (it ends after the serial reader's batch
 * that reaches it): a handoff between threads per this many events keeps
 * the locking and the wake-ups out of the profile. */
#define PBLK 512
/* Blocks decoded ahead per stream; the decoding threads, once they have
 * nothing to do, are woken again when the stream being read is down to a
 * quarter of that: a wake-up costs tens of microseconds in a VM. */
#define PAHEAD 8
/* Blocks decoded ahead in all, beyond which only a stream the reader waits
 * for gets one: memory stays bounded whatever the number of threads. */
#define PTOTAL 24
/* Pauses the reader spins for a block that a worker is decoding, before
 * it sleeps (about as long as a block takes). */
#define SPIN 20000
/* Item kinds of a block beside events (< 32) and stack and module records
 * (32..35): a warning and an error, their text in str. */
#define ITEM_WARN 254
#define ITEM_ERR  255
/* Bytes of a page of a block's strings. */
#define APAGE 8192

/* Strings of a block's events, items and messages, in pages that do not
 * move (the events point to them). */
struct apage {
	struct apage *next;
	size_t used;
	char data[APAGE];
};

/* An entry of a block: a malloc or a free in 64 bytes (a cache line,
 * where struct ht_event takes 136: what goes from one core to the other is
 * what costs, more than the decoding), or, with full set, the index of an
 * event or item in the block's big array. */
struct pev {
	uint64_t ts, seq;
	uint64_t v0, v1, v2; /* the event's v[0..2] (a free has v0 only); full: the index */
	uint64_t usable;
	uint32_t stack; /* the thread's own stack node id, 0 none */
	uint32_t weight;
	uint8_t kind, flags, ts_taken, full;
	uint8_t pad[4];
};

/* put_event writes the entry as eight words */
_Static_assert(sizeof(struct pev) == 64 && offsetof(struct pev, stack) == 48 &&
		   offsetof(struct pev, weight) == 52 && offsetof(struct pev, kind) == 56 &&
		   offsetof(struct pev, full) == 59,
	       "struct pev is one cache line, written as eight words");

/* Decoded events and, between them, the items that the reader handles in
 * the stream's turn; they grow as needed (a batch of the serial reader
 * stays whole in one block). */
struct pblock {
	struct pblock *next;
	size_t n, cap;		    /* entries in ev (events and items) / room */
	size_t nitems, capitems;    /* items that are not events / room */
	size_t nbig, capbig;	    /* entries of big / room */
	uint64_t done_bytes;	    /* chunk payload bytes loaded for them (progress) */
	struct pev *ev;		    /* events, and items by their index in big */
	struct ht_event *big;	    /* the other events and the items */
	size_t *item_at;	    /* places of the items that are not events, in order */
	struct apage *pages, *page; /* the strings: first page, page in use (NULL: none yet) */
};

/* One stream's pipeline.  dec is the worker side's decoding state, used by
 * the one worker that has the stream busy; the queue and flags are under
 * the pool's lock; cur and pos are the reader's. */
struct pstream {
	struct stream dec;	    /* decoding state (the chunks are the reader's) */
	struct pblock *head, *tail; /* blocks decoded, oldest first */
	unsigned ready;		    /* blocks in the queue */
	_Atomic unsigned published; /* blocks queued so far: the reader looks, unlocked */
	int busy;		    /* a worker decodes it now */
	int finished;		    /* dec is done: no more blocks */
	int exhausted;		    /* ... because its chunks ran out */
	int wanted;		    /* the reader waits for its next block */
	uint64_t last_ts;	    /* timestamp of its last event decoded */
	uint64_t nframes;	    /* stack frame ids the thread has defined */
	char pad[64];		    /* (the next pstream's dec) */
	/* the reader's, on a cache line of their own (the worker writes dec) */
	_Alignas(64) struct pblock *cur; /* the block being read */
	struct ht_event *own;		 /* the events of cur given out now (BATCH) */
	size_t pos;			 /* next entry in cur */
	size_t item;			 /* next of cur's items that are not events */
};

struct pworker {
	struct ht_par *p;
	pthread_t th;
	struct ht_reader *r;	    /* its own: file, header, zstd context, messages */
	struct ht_event loc[BATCH]; /* the fast path's events, before they are packed */
};

struct ht_par {
	pthread_mutex_t mu;
	pthread_cond_t work;  /* a stream may take a block */
	pthread_cond_t ready; /* a block came for a wanted stream */
	int stop;
	unsigned idle;	    /* workers waiting for work */
	unsigned total;	    /* blocks in all queues */
	struct pstream *ps; /* one per stream */
	size_t n;
	struct pblock *spare; /* blocks to use again */
	struct pworker *w;
	unsigned nw; /* workers started */
};

/* ---- the thread count ---------------------------------------------------- */

/* -j N, else HEAPTRAIL_THREADS, else 1: the serial reader by default.
 * Decoding threads did not pay on the machine of bench/RESULTS.md (two
 * vCPUs): `stats` 1.0-1.1x and `report` 1.0-1.1x the speed of the serial
 * reader on 100 M-event traces, slower on a real program's one-thread
 * trace, for 1.4-2x the CPU time (docs/FORMAT.md, "Reading with several
 * threads").  0 asks for one thread per CPU. */
int ht_reader__threads_given(void)
{
	const char *e = getenv("HEAPTRAIL_THREADS");
	return ht_threads >= 0 || (e && *e);
}

unsigned ht_reader__threads_wanted(void)
{
	int v = 1;
	if (ht_threads >= 0) {
		v = ht_threads;
	} else {
		const char *e = getenv("HEAPTRAIL_THREADS");
		if (e && *e && ht_parse_threads(e, &v) < 0) {
			static int warned;
			if (!warned++)
				ht_warning("HEAPTRAIL_THREADS='%s' is not a number of threads, 0 (one "
					   "per CPU) to %d: reading with one", e, HT_THREADS_MAX);
			v = 1;
		}
	}
	if (v > 0)
		return (unsigned)v;
	return ht_reader__cpus();
}

unsigned ht_reader__cpus(void)
{
	/* the CPUs this process may use: `taskset -c 0` means one */
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

/* ---- a worker ------------------------------------------------------------ */

/* Copies n bytes to the block's strings, NUL-terminated. */
static const char *arena_put(struct pblock *b, const char *s, size_t n)
{
	struct apage *pg = b->page;
	if (!pg || pg->used + n + 1 > APAGE) { /* (n <= 511) */
		struct apage *nx = pg ? pg->next : b->pages;
		if (!nx) {
			nx = ht_xmalloc(sizeof(*nx));
			nx->next = NULL;
			if (pg)
				pg->next = nx;
			else
				b->pages = nx;
		}
		nx->used = 0;
		b->page = pg = nx;
	}
	char *d = pg->data + pg->used;
	memcpy(d, s, n);
	d[n] = 0;
	pg->used += n + 1;
	return d;
}

/* Room for one more entry in b->ev. */
static struct pev *entry(struct pblock *b)
{
	if (b->n + 1 > b->cap)
		b->ev = ht_grow(b->ev, &b->cap, b->n + 1, sizeof(*b->ev));
	return &b->ev[b->n];
}

/* The next slot of b->big, where an event or item is decoded (pointers
 * into big move when it grows: the slot is used at once). */
static struct ht_event *big_slot(struct pblock *b)
{
	if (b->nbig + 1 > b->capbig)
		b->big = ht_grow(b->big, &b->capbig, b->nbig + 1, sizeof(*b->big));
	return &b->big[b->nbig];
}

/* The big slot filled becomes the block's next entry, an item (not an
 * event) if item is set. */
static void put_big(struct pblock *b, int item)
{
	struct pev *p = entry(b);
	p->kind = b->big[b->nbig].kind;
	p->full = 1;
	p->v0 = b->nbig++;
	if (item) {
		b->item_at = ht_grow(b->item_at, &b->capitems, b->nitems + 1, sizeof(*b->item_at));
		b->item_at[b->nitems++] = b->n;
	}
	b->n++;
}

/* An event (not in big) as the block's next entry: packed if it is a plain
 * malloc or free, else copied to big. */
static void put_event(struct pblock *b, const struct ht_event *e)
{
	int plain =
	    ((e->kind == HT_EV_MALLOC && e->nv == 3) || (e->kind == HT_EV_FREE && e->nv == 1)) &&
	    !e->duration && !e->str && e->part == HT_PART_WHOLE && e->time_ns <= UINT32_MAX;
	if (!plain) {
		*big_slot(b) = *e;
		put_big(b, 0);
		return;
	}
	struct pev *p = entry(b);
	/* the raw stack id: decode_next, ht_coldec__events */
	uint64_t w6 = (uint32_t)e->time_ns | (uint64_t)e->weight << 32;
	uint64_t w7 = e->kind | (uint64_t)e->flags << 8 | (uint64_t)e->ts_taken << 16;
#if defined(__x86_64__)
	/* Streaming stores: the line goes to the shared cache without being
	 * fetched first from the core that read the block last (which cost
	 * more than the decoding).  The worker fences before it hands the
	 * block over. */
	long long *q = (long long *)p;
	_mm_stream_si64(q + 0, (long long)e->ts);
	_mm_stream_si64(q + 1, (long long)e->seq);
	_mm_stream_si64(q + 2, (long long)e->v[0]);
	_mm_stream_si64(q + 3, (long long)e->v[1]);
	_mm_stream_si64(q + 4, (long long)e->v[2]);
	_mm_stream_si64(q + 5, (long long)e->usable);
	_mm_stream_si64(q + 6, (long long)w6);
	_mm_stream_si64(q + 7, (long long)w7);
#else
	p->ts = e->ts;
	p->seq = e->seq;
	p->v0 = e->v[0];
	p->v1 = e->v[1];
	p->v2 = e->v[2];
	p->usable = e->usable;
	memcpy(&p->stack, &w6, 8);
	memcpy(&p->kind, &w7, 8);
#endif
	b->n++;
}

/* A message as the block's next item. */
static void put_message(struct pblock *b, int kind, const char *msg)
{
	struct ht_event *e = big_slot(b);
	e->kind = (uint8_t)kind;
	e->str = arena_put(b, msg, strlen(msg));
	put_big(b, 1);
}

/* The length of a stack or module record's string (build_id: raw bytes). */
static size_t meta_str_len(const struct ht_event *e)
{
	if (e->kind == HT_EV_MODULE)
		return (size_t)e->v[3];
	if (e->kind == HT_EV_BUILD_ID)
		return (size_t)e->v[1];
	return 0;
}

/* One step of a batch (decode_next): the next event into the block (1;
 * *str: it has a string), 2 where the batch stops, 0 at the stream's end.
 * The first step of a batch (n = 0) takes the stack and module records
 * before its event, as items, and checks the frame ids as the reader would
 * on taking them. */
static int step(struct ht_reader *r, struct pstream *ps, struct pblock *b, unsigned n, int *str)
{
	struct stream *d = &ps->dec;
	for (;;) {
		struct ht_event *e = big_slot(b);
		int k = ht_rd__decode(r, d, e, n ? DEC_AHEAD : DEC_EMIT);
		if (k == 3) {
			if (e->kind == HT_EV_FRAME) {
				/* ht_rd__meta's check, which needs the ids of the
				 * thread only */
				if (e->v[0] == 0 || e->v[0] > ps->nframes + 1 || e->v[1] >= e->v[0])
					return ht_rd__corrupt(r, d,
							      "stack frame record out of order");
				if (e->v[0] == ps->nframes + 1)
					ps->nframes++;
			}
			if (e->str)
				e->str = arena_put(b, e->str, meta_str_len(e));
			put_big(b, 1);
			continue;
		}
		if (k == 1) {
			*str = e->str != NULL;
			ps->last_ts = e->ts;
			if (e->str) { /* the stream's, until its next event */
				e->str = arena_put(b, e->str, strlen(e->str));
				put_big(b, 0);
			} else {
				struct ht_event ev = *e;
				put_event(b, &ev);
			}
		}
		return k;
	}
}

/* One batch of the serial reader (ht_rd__fill), into the block: the same
 * steps, so that what the reader does between two batches (take stack and
 * module records, say what decoding found) comes between the same two
 * events.  A message met while the batch has events is said once they are
 * delivered: it follows them, as an item; one met in a batch without
 * events (the stream ends) is said at once. */
static void one_batch(struct pworker *w, struct pstream *ps, struct pblock *b)
{
	struct ht_reader *r = w->r;
	struct stream *d = &ps->dec;
	char warn[sizeof(r->warn)] = "", err[sizeof(r->err)] = "";
	unsigned n = 0;
	int more = 1;
	while (more && n < BATCH) {
		int failed = 0;
		if (ht_rd__fast_ready(r, d)) {
			unsigned k = ht_rd__fast(r, d, w->loc, BATCH - n, &failed);
			for (unsigned i = 0; i < k; i++)
				put_event(b, &w->loc[i]);
			if (k)
				ps->last_ts = w->loc[k - 1].ts;
			n += k;
		}
		if (failed) {
			more = 0;
		} else if (n < BATCH) {
			int str = 0, k = step(r, ps, b, n, &str);
			/* an event's string lives in the stream until its next one */
			more = k == 1 && !str;
			n += k == 1;
		}
		if (n) {
			/* (a batch meets one warning at most, and an error ends it) */
			if (r->warn[0] && !warn[0])
				memcpy(warn, r->warn, sizeof(warn));
			if (r->err[0] && !err[0])
				memcpy(err, r->err, sizeof(err));
			r->warn[0] = r->err[0] = 0;
		}
	}
	if (r->warn[0])
		memcpy(warn, r->warn, sizeof(warn));
	if (r->err[0])
		memcpy(err, r->err, sizeof(err));
	r->warn[0] = r->err[0] = 0;
	if (warn[0])
		put_message(b, ITEM_WARN, warn);
	if (err[0])
		put_message(b, ITEM_ERR, err);
}

/* Decodes ps's next block into b: whole batches, up to PBLK events or the
 * stream's end. */
static void produce(struct pworker *w, struct pstream *ps, struct pblock *b)
{
	struct ht_reader *r = w->r;
	b->n = 0;
	b->nitems = 0;
	b->nbig = 0;
	b->page = NULL;
	r->done_bytes = 0;
	while (!ps->dec.done && b->n < PBLK)
		one_batch(w, ps, b);
	b->done_bytes = r->done_bytes;
#if defined(__x86_64__)
	_mm_sfence(); /* the streaming stores of put_event, before the block is handed over */
#endif
}

/* The stream a worker decodes next: the one the reader waits for, else,
 * while there is room, the one whose decoded events end earliest (the
 * merge reaches it first).  Under the lock. */
static struct pstream *pick(struct ht_par *p)
{
	struct pstream *best = NULL;
	for (size_t i = 0; i < p->n; i++) {
		struct pstream *ps = &p->ps[i];
		if (ps->busy || ps->finished)
			continue;
		if (ps->wanted)
			return ps;
		if (ps->ready >= PAHEAD || p->total >= PTOTAL)
			continue;
		if (!best || ps->last_ts < best->last_ts)
			best = ps;
	}
	return best;
}

static void *worker(void *arg)
{
	struct pworker *w = arg;
	struct ht_par *p = w->p;
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		struct pstream *ps = pick(p);
		if (!ps) {
			p->idle++;
			pthread_cond_wait(&p->work, &p->mu);
			p->idle--;
			continue;
		}
		ps->busy = 1;
		struct pblock *b = p->spare;
		if (b)
			p->spare = b->next;
		pthread_mutex_unlock(&p->mu);
		if (!b)
			b = ht_xcalloc(1, sizeof(*b));
		produce(w, ps, b);
		pthread_mutex_lock(&p->mu);
		b->next = NULL;
		if (ps->tail)
			ps->tail->next = b;
		else
			ps->head = b;
		ps->tail = b;
		ps->ready++;
		p->total++;
		atomic_fetch_add_explicit(&ps->published, 1, memory_order_release);
		ps->busy = 0;
		if (ps->dec.done) {
			ps->finished = 1;
			ps->exhausted = ps->dec.exhausted;
		}
		if (ps->wanted) {
			/* served: until the reader, once awake, asks again */
			ps->wanted = 0;
			pthread_cond_broadcast(&p->ready);
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* ---- the reader's side --------------------------------------------------- */

/* A pause in a spin: leaves the core's other hardware thread (a decoding
 * worker, maybe) the execution units. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* Gives back the block read and takes the stream's next one, waiting for
 * it if need be; 0 when the stream has no more. */
static int next_block(struct ht_reader *r, struct ht_par *p, struct pstream *ps)
{
	pthread_mutex_lock(&p->mu);
	if (ps->cur) {
		ps->cur->next = p->spare;
		p->spare = ps->cur;
		ps->cur = NULL;
	}
	if (!ps->head && !ps->finished && ps->busy) {
		/* a worker is on it: the block comes within microseconds, and
		 * going to sleep and being woken costs more (a VM's vCPUs) */
		unsigned seen = atomic_load_explicit(&ps->published, memory_order_relaxed);
		pthread_mutex_unlock(&p->mu);
		for (int i = 0;
		     i < SPIN && atomic_load_explicit(&ps->published, memory_order_relaxed) == seen;
		     i++)
			cpu_relax();
		pthread_mutex_lock(&p->mu);
	}
	while (!ps->head && !ps->finished) {
		ps->wanted = 1;
		pthread_cond_broadcast(&p->work);
		pthread_cond_wait(&p->ready, &p->mu);
	}
	ps->wanted = 0;
	struct pblock *b = ps->head;
	if (b) {
		ps->head = b->next;
		if (!ps->head)
			ps->tail = NULL;
		ps->ready--;
		p->total--;
		/* wake the workers only once there is room for a few blocks */
		if (p->idle && (ps->ready <= PAHEAD / 4 || p->total <= PTOTAL / 4))
			pthread_cond_signal(&p->work);
	}
	pthread_mutex_unlock(&p->mu);
	if (!b)
		return 0;
	ps->cur = b;
	ps->pos = 0;
	ps->item = 0;
	r->done_bytes += b->done_bytes;
	return 1;
}

/* n entries of b into events of stream s. */
static void unpack(const struct pblock *b, const struct pev *p, unsigned n, const struct stream *s,
		   struct ht_event *out)
{
	for (unsigned i = 0; i < n; i++, p++) {
		struct ht_event *o = &out[i];
		__builtin_prefetch(p + 16); /* lines the other core wrote: not in this one's cache */
		uint64_t id;
		if (p->full) {
			*o = b->big[p->v0];
			id = o->time_ns;
		} else {
			o->kind = p->kind;
			o->flags = p->flags;
			o->tid = s->tid;
			o->seq = p->seq;
			o->ts = p->ts;
			o->v[0] = p->v0;
			o->v[1] = p->v1;
			o->v[2] = p->v2;
			o->nv = p->kind == HT_EV_FREE ? 1 : 3;
			o->usable = p->usable;
			o->duration = 0;
			o->str = NULL;
			o->part = HT_PART_WHOLE;
			o->ts_taken = p->ts_taken;
			o->weight = p->weight;
			id = p->stack;
		}
		o->stack = id && id <= s->nnodes ? s->nodes[id - 1] : 0;
	}
}

unsigned ht_rd__par_fill(struct ht_reader *r, struct stream *s)
{
	struct pstream *ps = s->pipe;
	s->bi = s->bn = 0;
	for (;;) {
		if (s->done)
			return 0;
		if (!ps->cur || ps->pos >= ps->cur->n) {
			if (!next_block(r, r->par, ps)) {
				s->done = 1;
				s->exhausted = ps->exhausted;
				s->batch = NULL;
				return 0;
			}
			continue;
		}
		struct pblock *b = ps->cur;
		size_t next = ps->item < b->nitems ? b->item_at[ps->item] : b->n;
		if (ps->pos < next) {
			/* the events up to the next item, unpacked here, where
			 * they stay in the cache of the thread that reads them */
			unsigned n = next - ps->pos < BATCH ? (unsigned)(next - ps->pos) : BATCH;
			if (!ps->own)
				ps->own = ht_xmalloc(BATCH * sizeof(*ps->own));
			unpack(b, b->ev + ps->pos, n, s, ps->own);
			ps->pos += n;
			s->batch = ps->own;
			s->bn = n;
			return n;
		}
		const struct ht_event *e = &b->big[b->ev[ps->pos].v0];
		ps->pos++;
		ps->item++;
		if (e->kind == ITEM_WARN) {
			ht_rd__warn(r, "%s", e->str);
		} else if (e->kind == ITEM_ERR) {
			ht_rd__err(r, "%s", e->str);
			s->done = 1;
		} else {
			struct ht_rec rec = {
			    .kind = e->kind, .nf = (uint8_t)e->nv, .str = (const uint8_t *)e->str};
			for (int i = 0; i < e->nv; i++)
				rec.f[i] = e->v[i];
			s->seq = e->seq; /* what a message about it names */
			s->chunk_off = e->ts;
			if (ht_rd__meta(r, s, &rec) < 0)
				return 0;
		}
	}
}

void ht_rd__par_start(struct ht_reader *r)
{
	if (r->follow || !r->nstreams || r->nstreams > HT_PAR_MAX_STREAMS)
		return;
	unsigned n = ht_reader__threads_wanted();
	if (n < 2)
		return;
	/* the caller's thread merges and analyses; the others decode, and
	 * one stream is decoded by one worker at a time */
	unsigned nw = n - 1;
	if (nw > r->nstreams)
		nw = (unsigned)r->nstreams;
	struct ht_par *p = ht_xcalloc(1, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->ready, NULL);
	p->n = r->nstreams;
	p->ps = ht_xcalloc(p->n, sizeof(*p->ps));
	for (size_t i = 0; i < p->n; i++) {
		struct stream *s = &r->streams[i];
		struct stream *d = &p->ps[i].dec;
		d->tid = s->tid;
		d->chunks = s->chunks;
		d->nchunks = s->nchunks;
		d->seq = s->seq;
		s->pipe = &p->ps[i];
	}
	p->w = ht_xcalloc(nw, sizeof(*p->w));
	r->par = p;
	for (unsigned i = 0; i < nw; i++) {
		struct pworker *w = &p->w[i];
		w->p = p;
		/* what decoding reads of the reader, and messages of its own */
		w->r = ht_xcalloc(1, sizeof(*w->r));
		w->r->fd = r->fd;
		w->r->hdr = r->hdr;
		w->r->sampled = r->sampled;
		w->r->fast = r->fast;
		w->r->dctx = ZSTD_createDCtx();
		if (!w->r->dctx || pthread_create(&w->th, NULL, worker, w) != 0) {
			if (w->r->dctx)
				ZSTD_freeDCtx(w->r->dctx);
			free(w->r);
			break; /* fewer workers; none: decoded here */
		}
		p->nw++;
	}
	if (!p->nw)
		ht_rd__par_stop(r);
}

static void free_block(struct pblock *b)
{
	if (!b)
		return;
	for (struct apage *pg = b->pages, *nx; pg; pg = nx) {
		nx = pg->next;
		free(pg);
	}
	free(b->big);
	free(b->ev);
	free(b->item_at);
	free(b);
}

static void free_stream_dec(struct stream *d)
{
	free(d->buf);
	ht_coldec__free(d->cd);
	free(d->batch);
	free(d->pend_err);
	free(d->pend_warn);
}

void ht_rd__par_stop(struct ht_reader *r)
{
	struct ht_par *p = r->par;
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->nw; i++) {
		pthread_join(p->w[i].th, NULL);
		ZSTD_freeDCtx(p->w[i].r->dctx);
		free(p->w[i].r->zbuf);
		free(p->w[i].r);
	}
	for (size_t i = 0; i < p->n; i++) {
		struct pstream *ps = &p->ps[i];
		free_stream_dec(&ps->dec);
		free_block(ps->cur);
		free(ps->own);
		for (struct pblock *b = ps->head, *nb; b; b = nb) {
			nb = b->next;
			free_block(b);
		}
		r->streams[i].pipe = NULL;
		r->streams[i].batch = NULL; /* it was in a block */
	}
	for (struct pblock *b = p->spare, *nb; b; b = nb) {
		nb = b->next;
		free_block(b);
	}
	pthread_cond_destroy(&p->ready);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->mu);
	free(p->w);
	free(p->ps);
	free(p);
	r->par = NULL;
}
