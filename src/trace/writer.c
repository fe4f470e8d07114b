/* A user-space trace writer (writer.h): records encoded as the recorder
 * encodes them (record.h), one buffer per thread, each cut into one SYNC
 * chunk when full or at close. */
#define _GNU_SOURCE
#include "writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "common/outfile.h"
#include "common/util.h"
#include "format.h"
#include "record.h"

#define BUF_BYTES (64 * 1024) /* a thread's buffer, like the recorder's default */

/* A thread's stream. */
struct stream {
	uint32_t tid;       /* thread */
	uint8_t *buf;       /* records since the last chunk, starting with a SYNC */
	size_t len;         /* bytes in buf */
	uint32_t nevents;   /* events in buf */
	uint64_t seq;       /* sequence number of the next event */
	uint64_t first_seq; /* sequence number of buf's first event */
	uint64_t last_ts;   /* delta state: previous timestamp */
	uint64_t last_ptr;  /* delta state: previous pointer */
	uint32_t next_node; /* next frame id of this thread */
};

/* A frame record written: (thread, parent, ip) -> id. */
struct node_slot {
	uint64_t ip;     /* return address */
	uint32_t tid;    /* thread whose stream defined it */
	uint32_t parent; /* parent id, 0 = root */
	uint32_t id;     /* the id, 0 = empty slot */
};

/* A module record waiting for the first stream. */
struct pending_mod {
	uint8_t *rec; /* encoded records (module, build_id) */
	size_t len;   /* bytes */
};

struct ht_writer {
	struct ht_out out;             /* the temporary, renamed to PATH on close */
	int fd;                        /* out.fd */
	uint64_t off;                  /* file offset of the next write */
	int failed;                    /* a write failed (errno in err_no) */
	int err_no;                    /* its errno */
	struct ht_file_header hdr;     /* as written first, patched on close */
	struct stream *streams;        /* by order of first event */
	size_t nstreams, cap_streams;  /* used, allocated */
	size_t last;                   /* the stream of the last event */
	struct node_slot *nodes;       /* open addressing, power-of-two size */
	size_t nnodes, cap_nodes;      /* used, slots */
	struct pending_mod *mods;      /* modules not written yet */
	size_t nmods;                  /* how many */
	struct ht_index_entry *index;  /* one per chunk written */
	size_t nindex, cap_index;      /* used, allocated */
	struct ht_clock_sample *clocks; /* samples not written yet */
	size_t nclocks, cap_clocks;    /* used, allocated */
	uint64_t events;               /* events written */
	ZSTD_CCtx *zc;                 /* compression context */
	void *zbuf;                    /* compressed payload */
	size_t zcap;                   /* its size */
};

static void write_all(struct ht_writer *w, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n && !w->failed) {
		ssize_t k = pwrite(w->fd, b, n, (off_t)w->off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			w->failed = 1;
			w->err_no = k < 0 ? errno : ENOSPC;
			return;
		}
		b += k;
		n -= (size_t)k;
		w->off += (uint64_t)k;
	}
}

static void write_chunk(struct ht_writer *w, struct ht_chunk_header *c, const void *payload,
			size_t n, int compress)
{
	c->magic = HT_CHUNK_MAGIC;
	c->raw_size = (uint32_t)n;
	const void *data = payload;
	size_t len = n;
	if (compress && w->zc) {
		size_t bound = ZSTD_compressBound(n);
		if (bound > w->zcap) {
			w->zbuf = ht_xrealloc(w->zbuf, bound);
			w->zcap = bound;
		}
		size_t r = ZSTD_compress2(w->zc, w->zbuf, w->zcap, payload, n);
		if (!ZSTD_isError(r) && r < n) {
			data = w->zbuf;
			len = r;
			c->flags |= HT_CHUNK_F_ZSTD;
		}
	}
	c->comp_size = (uint32_t)len;
	if (c->type != HT_CHUNK_INDEX) {
		if (w->nindex == w->cap_index) {
			w->cap_index = w->cap_index ? 2 * w->cap_index : 256;
			w->index = ht_xrealloc(w->index, w->cap_index * sizeof(*w->index));
		}
		struct ht_index_entry *e = &w->index[w->nindex++];
		memset(e, 0, sizeof(*e));
		e->offset = w->off;
		e->tid = c->tid;
		e->nevents = c->nevents;
		e->first_seq = c->first_seq;
		e->type = c->type;
		e->flags = c->flags;
	}
	write_all(w, c, sizeof(*c));
	write_all(w, data, len);
}

/* Appends rec (its f[] already in stored form) to s's buffer. */
static void put_rec(struct stream *s, struct ht_rec *rec)
{
	rec->nf = (uint8_t)ht_kind_nf(rec->kind);
	s->len += ht_rec__encode(rec, s->buf + s->len, HT_VERSION);
}

/* Starts a buffer: the SYNC record (absolute timestamp, seq of the next
 * event), and the delta state reset. */
static void start_buffer(struct stream *s)
{
	struct ht_rec rec = {.kb = HT_EV_SYNC, .kind = HT_EV_SYNC};
	rec.f[0] = s->seq;
	rec.f[1] = s->last_ts;
	s->len = 0;
	s->nevents = 0;
	s->first_seq = s->seq;
	s->last_ptr = 0;
	put_rec(s, &rec);
}

static void flush_stream(struct ht_writer *w, struct stream *s)
{
	struct ht_chunk_header c = {
		.type = HT_CHUNK_EVENTS,
		.flags = HT_CHUNK_F_SYNC,
		.tid = s->tid,
		.nevents = s->nevents,
		.first_seq = s->first_seq,
	};
	write_chunk(w, &c, s->buf, s->len, 1);
	start_buffer(s);
}

/* Room for one more record (strings included) in s's buffer. */
static void need_room(struct ht_writer *w, struct stream *s)
{
	if (s->len + HT_MAX_RECORD > BUF_BYTES)
		flush_stream(w, s);
}

static struct stream *stream_of(struct ht_writer *w, uint32_t tid, uint64_t ts)
{
	if (w->last < w->nstreams && w->streams[w->last].tid == tid)
		return &w->streams[w->last];
	for (size_t i = 0; i < w->nstreams; i++)
		if (w->streams[i].tid == tid) {
			w->last = i;
			return &w->streams[i];
		}
	if (w->nstreams == w->cap_streams) {
		w->cap_streams = w->cap_streams ? 2 * w->cap_streams : 16;
		w->streams = ht_xrealloc(w->streams, w->cap_streams * sizeof(*w->streams));
	}
	struct stream *s = &w->streams[w->nstreams++];
	memset(s, 0, sizeof(*s));
	s->tid = tid;
	s->buf = ht_xrealloc(NULL, BUF_BYTES);
	s->last_ts = ts;
	s->next_node = 1;
	start_buffer(s);
	/* the modules go into the first stream, before its first event */
	for (size_t i = 0; i < w->nmods; i++) {
		if (s->len + w->mods[i].len + 16 > BUF_BYTES)
			flush_stream(w, s);
		memcpy(s->buf + s->len, w->mods[i].rec, w->mods[i].len);
		s->len += w->mods[i].len;
		free(w->mods[i].rec);
	}
	w->nmods = 0;
	return s;
}

struct ht_writer *ht_writer__open(const char *path, const struct ht_writer_info *info,
				  char *err, size_t errlen)
{
	struct ht_writer *w = calloc(1, sizeof(*w));
	if (!w)
		goto oom;
	/* attach runs as root: an unpredictable temporary, never a planted
	 * file or symlink; 0600 as the recorder's traces */
	if (ht_out__open(&w->out, path, HT_OUT_PRIVATE, HT_OUT_FD | HT_OUT_SYNC | HT_OUT_DATA, err,
			 errlen)) {
		free(w); /* (err: the output layer's "cannot write PATH: why") */
		return NULL;
	}
	w->fd = w->out.fd;
	w->zc = ZSTD_createCCtx();
	if (w->zc) {
		ZSTD_CCtx_setParameter(w->zc, ZSTD_c_compressionLevel, 1);
		ZSTD_CCtx_setParameter(w->zc, ZSTD_c_checksumFlag, 1);
	}
	struct ht_file_header *h = &w->hdr;
	size_t clen = info->cmdline_len > 8192 ? 8192 : info->cmdline_len;
	size_t elen = info->exe ? strlen(info->exe) + 1 : 0;
	ht_file_header__init(h, info->flags, info->pid, info->ppid, clen, elen);
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	h->start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
	h->start_mono_ns = info->start_mono_ns;
	h->start_ts = info->start_mono_ns;
	h->ts_hz = 1000000000u;
	h->sample_every = info->sample_every;
	h->start_brk = info->start_brk;
	write_all(w, h, sizeof(*h));
	if (clen)
		write_all(w, info->cmdline, clen);
	if (elen)
		write_all(w, info->exe, elen);
	ht_writer__clock(w, info->start_mono_ns, 0);
	return w;
oom:
	snprintf(err, errlen, "%s: out of memory", path);
	free(w);
	return NULL;
}

/* Encodes an extended pseudo-record (no timestamp) into out. */
static size_t encode_meta(uint8_t *out, unsigned kind, const uint64_t *v, const void *str)
{
	struct ht_rec rec = {.kb = HT_EV_EXT, .kind = (uint8_t)kind};
	rec.nf = (uint8_t)ht_kind_nf(kind);
	for (unsigned i = 0; i < rec.nf; i++)
		rec.f[i] = v[i];
	rec.f[rec.nf] = 0;
	rec.str = str;
	return ht_rec__encode(&rec, out, HT_VERSION);
}

void ht_writer__module(struct ht_writer *w, uint64_t base, uint64_t lo, uint64_t hi,
		       const char *path, const uint8_t *build_id, size_t id_len)
{
	size_t plen = strlen(path);
	if (plen > HT_MAX_STR)
		plen = HT_MAX_STR;
	if (id_len > HT_MAX_STR)
		id_len = HT_MAX_STR;
	uint8_t *rec = ht_xrealloc(NULL, 2 * HT_MAX_RECORD);
	uint64_t mv[4] = {base, lo, hi, plen};
	size_t n = encode_meta(rec, HT_EV_MODULE, mv, path);
	if (id_len) {
		uint64_t bv[2] = {base, id_len};
		n += encode_meta(rec + n, HT_EV_BUILD_ID, bv, build_id);
	}
	if (w->nstreams) {
		struct stream *s = &w->streams[0];
		if (s->len + n + 16 > BUF_BYTES)
			flush_stream(w, s);
		memcpy(s->buf + s->len, rec, n);
		s->len += n;
		free(rec);
		return;
	}
	w->mods = ht_xrealloc(w->mods, (w->nmods + 1) * sizeof(*w->mods));
	w->mods[w->nmods].rec = rec;
	w->mods[w->nmods].len = n;
	w->nmods++;
}

static uint64_t node_hash(uint32_t tid, uint32_t parent, uint64_t ip)
{
	uint64_t h = ip * 0x9E3779B97F4A7C15ull;
	h ^= ((uint64_t)tid << 32 | parent) * 0xC2B2AE3D27D4EB4Full;
	return h ^ (h >> 29);
}

static void nodes_grow(struct ht_writer *w)
{
	size_t ncap = w->cap_nodes ? 2 * w->cap_nodes : 1024;
	struct node_slot *n = calloc(ncap, sizeof(*n));
	if (!n)
		ht_xrealloc(NULL, SIZE_MAX); /* the out-of-memory exit */
	for (size_t i = 0; i < w->cap_nodes; i++) {
		struct node_slot *o = &w->nodes[i];
		if (!o->id)
			continue;
		size_t j = node_hash(o->tid, o->parent, o->ip) & (ncap - 1);
		while (n[j].id)
			j = (j + 1) & (ncap - 1);
		n[j] = *o;
	}
	free(w->nodes);
	w->nodes = n;
	w->cap_nodes = ncap;
}

uint32_t ht_writer__stack(struct ht_writer *w, uint32_t tid, const uint64_t *ips, size_t n)
{
	if (!n)
		return 0;
	struct stream *s = NULL;
	uint32_t parent = 0;
	/* outermost first: each frame's parent is the one outside it */
	for (size_t k = n; k-- > 0;) {
		if (2 * (w->nnodes + 1) > w->cap_nodes)
			nodes_grow(w);
		size_t mask = w->cap_nodes - 1;
		size_t j = node_hash(tid, parent, ips[k]) & mask;
		while (w->nodes[j].id && !(w->nodes[j].tid == tid && w->nodes[j].parent == parent &&
					   w->nodes[j].ip == ips[k]))
			j = (j + 1) & mask;
		if (!w->nodes[j].id) {
			if (!s) {
				s = stream_of(w, tid, w->hdr.start_ts);
			}
			need_room(w, s);
			uint64_t v[3] = {s->next_node, parent, ips[k]};
			s->len += encode_meta(s->buf + s->len, HT_EV_FRAME, v, NULL);
			w->nodes[j] = (struct node_slot){.ip = ips[k], .tid = tid, .parent = parent,
							  .id = s->next_node++};
			w->nnodes++;
		}
		parent = w->nodes[j].id;
	}
	return parent;
}

int ht_writer__event(struct ht_writer *w, uint32_t tid, unsigned kind, unsigned flags,
		     const uint64_t *vals, uint64_t ts, uint32_t stack)
{
	if (kind == 0 || kind >= HT_EV_TICK)
		return -1;
	struct stream *s = stream_of(w, tid, ts);
	need_room(w, s);
	const struct ht_kind_desc *d = &ht_kind_descs[kind];
	struct ht_rec rec = {.kb = (uint8_t)(kind | (flags & (HT_F_MMAPPED | HT_F_NONMAIN))),
			     .kind = (uint8_t)kind};
	unsigned nf = ht_kind_nf(kind);
	for (unsigned i = 0; i < nf; i++) {
		uint64_t v = vals[i];
		switch (d->fields[i]) {
		case 's':
			v = ht_zigzag((int64_t)v);
			break;
		case 'p':
			v = ht_zigzag((int64_t)(vals[i] - s->last_ptr));
			s->last_ptr = vals[i];
			break;
		case 'S':
			return -1; /* no string events here */
		default:
			break;
		}
		rec.f[i] = v;
	}
	if (ts < s->last_ts)
		ts = s->last_ts; /* a thread's time never goes back */
	rec.f[nf] = ts - s->last_ts + 1;
	s->last_ts = ts;
	if (stack) {
		rec.kb |= HT_F_STACK;
		rec.has_stack = 1;
		rec.f[nf + 1] = stack;
	}
	put_rec(s, &rec);
	s->seq++;
	s->nevents++;
	w->events++;
	return w->failed ? -1 : 0;
}

static void flush_clocks(struct ht_writer *w)
{
	for (size_t i = 0; i < w->nclocks; i += 256) {
		size_t n = w->nclocks - i < 256 ? w->nclocks - i : 256;
		struct ht_chunk_header c = {.type = HT_CHUNK_CLOCK};
		write_chunk(w, &c, &w->clocks[i], n * sizeof(*w->clocks), 0);
	}
	w->nclocks = 0;
}

void ht_writer__clock(struct ht_writer *w, uint64_t mono_ns, uint64_t rss_kb)
{
	if (w->nclocks == w->cap_clocks) {
		w->cap_clocks = w->cap_clocks ? 2 * w->cap_clocks : 64;
		w->clocks = ht_xrealloc(w->clocks, w->cap_clocks * sizeof(*w->clocks));
	}
	w->clocks[w->nclocks++] = (struct ht_clock_sample){mono_ns, mono_ns, rss_kb};
	if (w->nclocks >= 256)
		flush_clocks(w);
}

static void writer_free(struct ht_writer *w)
{
	for (size_t i = 0; i < w->nstreams; i++)
		free(w->streams[i].buf);
	for (size_t i = 0; i < w->nmods; i++)
		free(w->mods[i].rec);
	free(w->mods);
	free(w->streams);
	free(w->nodes);
	free(w->index);
	free(w->clocks);
	free(w->zbuf);
	ZSTD_freeCCtx(w->zc);
	ht_out__abort(&w->out);
	free(w);
}

void ht_writer__abort(struct ht_writer *w)
{
	if (!w)
		return;
	writer_free(w);
}

void ht_writer__flags(struct ht_writer *w, uint64_t flags)
{
	w->hdr.flags |= flags;
}

void ht_writer__end_notes(struct ht_writer *w, uint64_t dropped, int signal)
{
	w->hdr.dropped += dropped;
	if (signal > 0) {
		w->hdr.flags |= HT_FILE_F_SIGNALED;
		w->hdr.signal = (uint32_t)signal;
	}
}

int ht_writer__close(struct ht_writer *w, uint64_t end_mono_ns, char *err, size_t errlen)
{
	for (size_t i = 0; i < w->nstreams; i++) {
		struct stream *s = &w->streams[i];
		if (s->len)
			flush_stream(w, s);
	}
	ht_writer__clock(w, end_mono_ns, 0);
	flush_clocks(w);
	struct ht_file_header *h = &w->hdr;
	h->sec[HT_SEC_CHUNKS].size = w->off - h->sec[HT_SEC_CHUNKS].offset;
	uint64_t at = w->off;
	struct ht_chunk_header c = {.type = HT_CHUNK_INDEX};
	write_chunk(w, &c, w->index, w->nindex * sizeof(*w->index), 0);
	h->sec[HT_SEC_INDEX].offset = at;
	h->sec[HT_SEC_INDEX].size = sizeof(c) + w->nindex * sizeof(*w->index);
	h->flags |= HT_FILE_F_CLOSED;
	h->end_ts = end_mono_ns;
	h->end_mono_ns = end_mono_ns;
	h->events = w->events;
	h->nthreads = (uint32_t)(w->nstreams > 4096 ? 4096 : w->nstreams);
	w->off = 0;
	write_all(w, h, sizeof(*h));
	int ret = 0;
	if (w->failed) {
		snprintf(err, errlen, "%s: cannot write: %s", w->out.path, strerror(w->err_no));
		ret = -1;
	} else if (ht_out__commit(&w->out, err, errlen)) { /* fsync, close, rename */
		ret = -1;
	}
	w->fd = -1;
	writer_free(w);
	return ret;
}
