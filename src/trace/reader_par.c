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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "reader_int.h"

/* Events (and items) a block holds: a handoff between threads per this
 * many events keeps the locking and the wake-ups out of the profile. */
#define PBLK 512
/* Room for the strings of a block's events, items and messages. */
#define PARENA 8192
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

struct pblock {
	struct pblock *next;
	unsigned n;		      /* items in ev */
	uint64_t done_bytes;	      /* chunk payload bytes loaded for them (progress) */
	size_t used;		      /* of arena */
	unsigned nitems;	      /* items that are not events */
	uint16_t item_at[PBLK + 3];   /* their places in ev, in order */
	struct ht_event ev[PBLK + 3]; /* a warning and an error may follow the last event */
	char arena[PARENA];
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
	char pad[64];		    /* (the next pstream's dec) */
	/* the reader's, on a cache line of their own (the worker writes dec) */
	_Alignas(64) struct pblock *cur; /* the block being read */
	unsigned pos;			 /* next item in cur */
	unsigned item;			 /* next of cur's items that are not events */
};

struct pworker {
	struct ht_par *p;
	pthread_t th;
	struct ht_reader *r; /* its own: file, header, zstd context, messages */
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

static unsigned thread_count(void)
{
	if (ht_threads > 0)
		return (unsigned)ht_threads;
	const char *e = getenv("HEAPTRAIL_THREADS");
	if (e && *e) {
		char *end;
		long v = strtol(e, &end, 10);
		if (!*end && v > 0)
			return v > 1024 ? 1024 : (unsigned)v;
	}
	/* the CPUs this process may use: `taskset -c 0` means one */
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

/* ---- a worker ------------------------------------------------------------ */

/* Copies n bytes to the block's arena, NUL-terminated; NULL if full. */
static const char *arena_put(struct pblock *b, const char *s, size_t n)
{
	if (b->used + n + 1 > PARENA)
		return NULL;
	char *d = b->arena + b->used;
	memcpy(d, s, n);
	d[n] = 0;
	b->used += n + 1;
	return d;
}

/* A message of the worker's reader as the block's next item. */
static void put_message(struct pblock *b, struct ht_event *e, int kind, char *msg)
{
	e->kind = (uint8_t)kind;
	e->str = arena_put(b, msg, strlen(msg)); /* fits: checked before each step */
	msg[0] = 0;
	b->item_at[b->nitems++] = (uint16_t)b->n++;
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

/* Decodes ps's next block into b. */
static void produce(struct pworker *w, struct pstream *ps, struct pblock *b)
{
	struct ht_reader *r = w->r;
	struct stream *d = &ps->dec;
	b->n = 0;
	b->used = 0;
	b->nitems = 0;
	r->done_bytes = 0;
	/* each step adds at most a warning, an item and an error, and two
	 * messages and a string fit in what is left */
	while (b->n < PBLK && !d->done && b->used + 2 * sizeof(r->err) + HT_MAX_STR + 1 <= PARENA) {
		if (d->cols && d->synced && !d->has_pend) {
			int failed = 0;
			b->n += ht_rd__fast(r, d, b->ev + b->n, PBLK - b->n, &failed);
			if (failed) {
				put_message(b, &b->ev[b->n], ITEM_ERR, r->err);
				break;
			}
			if (b->n >= PBLK)
				break;
		}
		struct ht_event *e = &b->ev[b->n];
		int k = ht_rd__decode(r, d, e);
		if (r->warn[0]) {
			/* met before what the step returns (loading a chunk) */
			if (k)
				b->ev[b->n + 1] = *e;
			put_message(b, e, ITEM_WARN, r->warn);
			e = &b->ev[b->n];
		}
		if (!k) {
			if (r->err[0])
				put_message(b, e, ITEM_ERR, r->err);
			break;
		}
		if (e->str)
			e->str = arena_put(b, e->str, k == 3 ? meta_str_len(e) : strlen(e->str));
		if (k == 1)
			ps->last_ts = e->ts;
		else
			b->item_at[b->nitems++] = (uint16_t)b->n;
		b->n++;
	}
	b->done_bytes = r->done_bytes;
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
			b = ht_xmalloc(sizeof(*b));
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
			__builtin_ia32_pause();
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
		struct ht_event *e = &b->ev[ps->pos];
		unsigned next = ps->item < b->nitems ? b->item_at[ps->item] : b->n;
		if (ps->pos < next) {
			/* the events up to the next item are delivered in place */
			unsigned n = next - ps->pos;
			if (s->nnodes)
				for (unsigned i = 0; i < n; i++) {
					uint64_t id = e[i].time_ns;
					e[i].stack = id && id <= s->nnodes ? s->nodes[id - 1] : 0;
				}
			ps->pos += n;
			s->batch = e;
			s->bn = n;
			return n;
		}
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
	unsigned n = thread_count();
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
		free(ps->cur);
		for (struct pblock *b = ps->head, *nb; b; b = nb) {
			nb = b->next;
			free(b);
		}
		r->streams[i].pipe = NULL;
		r->streams[i].batch = NULL; /* it was in a block */
	}
	for (struct pblock *b = p->spare, *nb; b; b = nb) {
		nb = b->next;
		free(b);
	}
	pthread_cond_destroy(&p->ready);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->mu);
	free(p->w);
	free(p->ps);
	free(p);
	r->par = NULL;
}
