/* Compaction: rewrites a trace with each thread's consecutive event chunks
 * merged, column-coded and compressed into large zstd frames
 * (`heaptrail compact`, `record --compact`).  And the cheap end step of
 * `heaptrail record` (ht_trace__finish): the recorder's writer compresses
 * chunks while the program runs, when it can; finishing compresses those
 * it wrote raw, on every CPU, and changes nothing else. */
#define _GNU_SOURCE
#include "compact.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_compressSequences: literals only */
#include <zstd.h>

#include "columns.h"
#include "common/outfile.h"
#include "common/readsmall.h"
#include "common/procstat.h"
#include "common/util.h"
#include "reader.h"
#include "record.h"

#define MERGE_LIMIT (1u << 20) /* raw bytes per merged chunk */

struct pending {
	uint32_t tid;        /* thread of the chunk being built */
	uint64_t first_seq;  /* its first event */
	uint32_t nevents;    /* events so far */
	uint16_t flags;      /* HT_CHUNK_F_SYNC if it starts a buffer */
	uint8_t *raw;        /* payload so far */
	size_t len, cap;     /* bytes used / allocated */
	int active;          /* something is pending */
};

struct compactor {
	int in, out;                    /* files */
	uint64_t in_size, off;          /* input size, output offset */
	ZSTD_CCtx *zc;                  /* compression context */
	ZSTD_DCtx *dc;                  /* to open compressed input chunks */
	uint8_t *zbuf, *cbuf;           /* scratch */
	size_t zcap, ccap;              /* their sizes */
	struct pending *pend;           /* one per thread */
	size_t npend, cappend;          /* count / allocated */
	struct ht_index_entry *index;   /* chunks written */
	size_t nindex, capindex;        /* count / allocated */
	uint64_t events;                /* events copied */
	const char *path;               /* the trace, for messages */
	char *err;                      /* message buffer */
	size_t errlen;                  /* its size */
	int failed;                     /* a write failed */
	uint32_t version;               /* of the input */
	int columns;                    /* column-code event chunks (version >= 2) */
	uint8_t *vbuf;                  /* scratch: a payload decompressed or decoded back */
	size_t vcap;                    /* its size */
	uint64_t bad_chunks;            /* event chunks that do not decode, copied as they are */
	uint32_t bad_tid;               /* the thread of the first */
};

static int out_write(struct compactor *c, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t w = write(c->out, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (!c->failed)
				snprintf(c->err, c->errlen,
					 "%s: cannot write its rewrite (%s): the trace is left as it "
					 "was", c->path, strerror(errno ? errno : EIO));
			c->failed = 1;
			return -1;
		}
		b += w;
		n -= (size_t)w;
		c->off += (uint64_t)w;
	}
	return 0;
}

/* Writes a chunk, header and comp_size bytes of payload as they are, and
 * notes it in the index. */
static void put_chunk(struct compactor *c, const struct ht_chunk_header *h, const void *payload)
{
	uint64_t at = c->off;
	if (out_write(c, h, sizeof(*h)) < 0 || out_write(c, payload, h->comp_size) < 0)
		return;
	c->index = ht_grow(c->index, &c->capindex, c->nindex + 1, sizeof(*c->index));
	struct ht_index_entry *e = &c->index[c->nindex++];
	memset(e, 0, sizeof(*e));
	e->offset = at;
	e->tid = h->tid;
	e->nevents = h->nevents;
	e->first_seq = h->first_seq;
	e->type = h->type;
	e->flags = h->flags;
}

/* Writes the index chunk of the chunks put so far, and sets hdr's CHUNKS
 * size (from start) and INDEX section. */
static void put_index(struct compactor *c, struct ht_file_header *hdr, uint64_t start)
{
	struct ht_chunk_header ih;
	memset(&ih, 0, sizeof(ih));
	ih.magic = HT_CHUNK_MAGIC;
	ih.type = HT_CHUNK_INDEX;
	ih.raw_size = ih.comp_size = (uint32_t)(c->nindex * sizeof(*c->index));
	hdr->sec[HT_SEC_CHUNKS].size = c->off - start;
	hdr->sec[HT_SEC_INDEX].offset = c->off;
	hdr->sec[HT_SEC_INDEX].size = sizeof(ih) + ih.raw_size;
	out_write(c, &ih, sizeof(ih));
	out_write(c, c->index, ih.raw_size);
}

static void emit(struct compactor *c, struct ht_chunk_header *h, const void *payload, size_t n,
		 int compress, int level)
{
	const void *data = payload;
	size_t len = n;
	h->magic = HT_CHUNK_MAGIC;
	if (compress) {
		h->raw_size = (uint32_t)n;
		h->flags &= (uint16_t)~(HT_CHUNK_F_ZSTD | HT_CHUNK_F_STORED);
		size_t bound = ZSTD_compressBound(n);
		c->cbuf = ht_grow(c->cbuf, &c->ccap, bound, 1);
		ZSTD_CCtx_setParameter(c->zc, ZSTD_c_compressionLevel, level);
		ZSTD_CCtx_setParameter(c->zc, ZSTD_c_checksumFlag, 1);
		size_t r = ZSTD_compress2(c->zc, c->cbuf, c->ccap, payload, n);
		if (!ZSTD_isError(r) && r < n) {
			data = c->cbuf;
			len = r;
			h->flags |= HT_CHUNK_F_ZSTD;
		}
	}
	h->comp_size = (uint32_t)len;
	put_chunk(c, h, data);
}

static void flush_pending(struct compactor *c, struct pending *p, int level)
{
	if (!p->active)
		return;
	struct ht_chunk_header h;
	memset(&h, 0, sizeof(h));
	h.type = HT_CHUNK_EVENTS;
	h.flags = p->flags;
	h.tid = p->tid;
	h.nevents = p->nevents;
	h.first_seq = p->first_seq;
	uint8_t *cols = NULL;
	size_t ncols = c->columns ? ht_columns__encode(p->raw, p->len, c->version, &cols) : 0;
	if (ncols) {
		/* Decode it back before trusting it with the events. */
		const char *why;
		c->vbuf = ht_grow(c->vbuf, &c->vcap, p->len + 1, 1);
		if (ht_columns__decode(cols, ncols, c->version, c->vbuf, p->len, &why) != p->len ||
		    memcmp(c->vbuf, p->raw, p->len) != 0)
			ncols = 0;
	}
	if (ncols) {
		h.flags |= HT_CHUNK_F_COLUMNS;
		emit(c, &h, cols, ncols, 1, level);
	} else {
		emit(c, &h, p->raw, p->len, 1, level);
	}
	free(cols);
	c->events += p->nevents;
	p->active = 0;
	p->len = 0;
}

static struct pending *pending_of(struct compactor *c, uint32_t tid)
{
	for (size_t i = 0; i < c->npend; i++)
		if (c->pend[i].tid == tid)
			return &c->pend[i];
	c->pend = ht_grow(c->pend, &c->cappend, c->npend + 1, sizeof(*c->pend));
	struct pending *p = &c->pend[c->npend++];
	memset(p, 0, sizeof(*p));
	p->tid = tid;
	return p;
}

/* The rewrite of path, written to tmp, read back before it replaces path
 * (as record's summary is: src/cli/cmd_record.c): its index (if it was
 * given one: indexed) and every chunk header it lists usable, the chunks
 * holding the events written.  0, or -1 with err: path is then left as it
 * was. */
static int read_back(const char *tmp, const char *path, uint64_t events, int indexed,
		     int damaged, char *err, size_t errlen)
{
	char why[512];
	struct ht_reader *r = ht_reader__open_info(tmp, why, sizeof(why));
	if (r) {
		const struct ht_trace_info *in = ht_reader__info(r);
		const char *e = ht_reader__error(r);
		/* (damaged: chunks that do not decode were copied as they
		 * are, and say so again; the file around them must be whole) */
		if (e && !(damaged && strstr(e, "the trace is corrupt here")))
			snprintf(why, sizeof(why), "%s", e);
		else if (indexed && !in->indexed)
			snprintf(why, sizeof(why), "its index is unusable");
		else if (in->events_chunks != events)
			snprintf(why, sizeof(why), "%llu events written, %llu read",
				 (unsigned long long)events, (unsigned long long)in->events_chunks);
		else
			why[0] = 0;
		ht_reader__close(r);
	}
	if (!why[0])
		return 0;
	snprintf(err, errlen, "%s: the rewritten trace did not read back whole (%s); the trace is "
		 "left as it was", path, why);
	return -1;
}

/* The input held while it is rewritten: its lock, as its writer held it,
 * so that a recorder starting on the same path meanwhile takes the file
 * for one being written and writes PATH.PID, where it took a finished
 * trace and moved it to PATH.old, and the rewrite then renamed the first
 * run's trace over the second's (its events lost, both summaries false).
 * 0, or -1 with the reason in err if another process holds it now. */
static int hold_input(int fd, const char *path, char *err, size_t errlen)
{
	/* Another process may hold it a while: a second compact that passed
	 * ht_trace__wait_writer at the same moment as this one (it rewrites
	 * the file and lets go; named_still then sends this one to the file
	 * it put there), a reader looking for a writer.  Waited for as long
	 * as a finishing writer is.  Before, this one gave up at once: of two
	 * `compact --fast` started together, one failed in 4 runs of 21. */
	for (int waited = 0;; waited += 5) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK)
			return 0; /* (no locks here: the name is checked before the rename) */
		if (waited >= HT_WAIT_WRITER_MS)
			break;
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL);
	}
	snprintf(err, errlen,
		 "%s: another process held the trace for %d s while it was to be rewritten (a "
		 "recording on the same path, or a stopped heaptrail?): left as it is",
		 path, HT_WAIT_WRITER_MS / 1000);
	return -1;
}

/* Whether path still names fd, once its lock is ours: another compact that
 * held it replaced it meanwhile (the rename of its rewrite), and a rewrite
 * of the file it replaced would do all the work for nothing, then fail at
 * its own rename (two `compact` at once: the second read 20 M events and
 * said "moved or replaced", probe O). */
static int named_still(int fd, const char *path)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* Whether path still names the input fd, before the rewrite is renamed
 * over it: -1 with the reason in err if something else is there now. */
static int still_named(int fd, const char *path, char *err, size_t errlen)
{
	if (named_still(fd, path))
		return 0;
	snprintf(err, errlen,
		 "%s: the trace was moved or replaced while it was rewritten: the file there now "
		 "is left as it is",
		 path);
	return -1;
}

/* Why path, which a recorder still holds (ht_trace__wait_writer), is not
 * rewritten: its program runs, or it has ended and the writer process
 * that finishes the trace did not get done in the time readers wait
 * (stopped, or stuck). */
static void still_written(const char *path, int32_t pid, char *err, size_t errlen)
{
	if (ht_proc_exists(pid))
		snprintf(err, errlen, "%s: still being written by the recorder (the program %d "
				      "runs); rewrite it when it has ended", path, (int)pid);
	else
		snprintf(err, errlen, "%s: its program has ended, but the recorder's writer "
				      "process still holds it unfinished (stopped, or stuck?); "
				      "rewrite it when that process has ended", path);
}

/* An EVENTS chunk of the input, for pass 2's order. */
struct ref {
	uint64_t off;              /* chunk header offset */
	struct ht_chunk_header h;  /* its header */
};

/* By thread, then sequence number, then place in the file: a total order
 * (one chunk per offset), so qsort gives the one result. */
static int ref_order(const void *a, const void *b)
{
	const struct ref *x = a, *y = b;
	if (x->h.tid != y->h.tid)
		return x->h.tid < y->h.tid ? -1 : 1;
	if (x->h.first_seq != y->h.first_seq)
		return x->h.first_seq < y->h.first_seq ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

#define REWRITTEN_MEANWHILE (-2) /* (another process replaced the trace while we waited) */

static int compact_once(const char *path, int level, struct ht_compact_result *res, char *err,
			size_t errlen)
{
	struct compactor c;
	memset(&c, 0, sizeof(c));
	c.path = path;
	c.err = err;
	c.errlen = errlen;
	c.out = -1;
	int ret = -1;
	struct ht_out o = {.fd = -1, .slot = -1};
	struct ht_file_header hdr;
	struct stat st;
	if (res)
		memset(res, 0, sizeof(*res));
	c.in = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (c.in < 0 || fstat(c.in, &st) < 0) {
		ht_open_error(err, errlen, path, errno, "trace");
		goto cleanup;
	}
	c.in_size = (uint64_t)st.st_size;
	if (c.in_size < sizeof(hdr) || ht_pread_full(c.in, &hdr, sizeof(hdr), 0) < 0 ||
	    memcmp(hdr.magic, HT_MAGIC, 8) || hdr.version < HT_VERSION_MIN || hdr.version > HT_VERSION ||
	    hdr.sec[HT_SEC_CHUNKS].offset > c.in_size ||
	    hdr.sec[HT_SEC_CHUNKS].offset < sizeof(hdr)) {
		/* the reader says what is wrong: a directory, empty, a
		 * workload, truncated, too new */
		struct ht_reader *why = ht_reader__open_info(path, err, errlen);
		if (why) {
			ht_reader__close(why);
			snprintf(err, errlen, "%s: not a heaptrail trace of format version %d..%d", path,
				 HT_VERSION_MIN, HT_VERSION);
		}
		goto cleanup;
	}
	if (ht_trace__wait_writer(c.in, hdr.pid, HT_WAIT_WRITER_MS) != 0) {
		still_written(path, hdr.pid, err, errlen);
		goto cleanup;
	}
	if (hold_input(c.in, path, err, errlen) < 0)
		goto cleanup;
	if (!named_still(c.in, path)) {
		ret = REWRITTEN_MEANWHILE;
		goto cleanup;
	}
	/* The writer may have finished meanwhile: the header and size now. */
	if (fstat(c.in, &st) < 0 || ht_pread_full(c.in, &hdr, sizeof(hdr), 0) < 0) {
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
		goto cleanup;
	}
	c.in_size = (uint64_t)st.st_size;
	/* an unpredictable temporary beside it (common/outfile.h) */
	if (ht_out__open(&o, path, HT_OUT_PRIVATE, HT_OUT_FD | HT_OUT_SYNC | HT_OUT_DATA, err,
			 errlen))
		goto cleanup;
	c.out = o.fd;
	/* Column coding needs version 2's timestamps and usable sizes; the
	 * output says version 3 at least, which readers need to know the
	 * columns.  A later version stays as it is: the records the columns
	 * decode to are that version's (a version 5 record whose kind byte has
	 * both glibc bits would be a short record in version 6). */
	c.version = hdr.version;
	c.columns = hdr.version >= 2;
	if (c.columns && hdr.version < 3)
		hdr.version = 3;
	c.zc = ZSTD_createCCtx();
	c.dc = ZSTD_createDCtx();
	/* Header and the strings that follow it, unchanged for now. */
	uint64_t start = hdr.sec[HT_SEC_CHUNKS].offset;
	uint8_t *head = malloc(start);
	if (!head || ht_pread_full(c.in, head, start, 0) < 0) {
		free(head);
		snprintf(err, errlen, "%s: cannot read the header", path);
		goto cleanup;
	}
	out_write(&c, head, start);
	free(head);

	uint64_t off = start, stop = c.in_size;
	if ((hdr.flags & HT_FILE_F_CLOSED) && hdr.sec[HT_SEC_INDEX].size)
		stop = hdr.sec[HT_SEC_INDEX].offset; /* the old index is dropped */
	int truncated = 0;
	/* Pass 1: where the chunks are.  Clock chunks are copied at once. */
	struct ref *refs = NULL;
	size_t nrefs = 0, caprefs = 0;
	while (off + sizeof(struct ht_chunk_header) <= stop && !c.failed) {
		struct ht_chunk_header h;
		if (ht_pread_full(c.in, &h, sizeof(h), off) < 0 || h.magic != HT_CHUNK_MAGIC ||
		    h.comp_size > HT_MAX_CHUNK_RAW || h.raw_size > HT_MAX_CHUNK_RAW ||
		    off + sizeof(h) + h.comp_size > c.in_size) {
			truncated = 1;
			break;
		}
		if (h.type == HT_CHUNK_EVENTS) {
			refs = ht_grow(refs, &caprefs, nrefs + 1, sizeof(*refs));
			refs[nrefs].off = off;
			refs[nrefs++].h = h;
		} else if (h.type == HT_CHUNK_CLOCK) {
			c.zbuf = ht_grow(c.zbuf, &c.zcap, h.comp_size + 1, 1);
			if (ht_pread_full(c.in, c.zbuf, h.comp_size, off + sizeof(h)) == 0)
				emit(&c, &h, c.zbuf, h.comp_size, 0, level);
		}
		off += sizeof(h) + h.comp_size;
	}
	/* Pass 2: each thread's chunks in sequence order, merged into runs.
	 * (An insertion sort did this before: quadratic in the chunks,
	 * minutes for a trace of a million of them.) */
	if (nrefs > 1)
		qsort(refs, nrefs, sizeof(*refs), ref_order);
	struct pending *p = NULL;
	uint64_t done = start, seen = 0; /* input bytes and events gone through (progress) */
	for (size_t i = 0; i < nrefs && !c.failed; i++) {
		struct ht_chunk_header h = refs[i].h;
		done += sizeof(h) + h.comp_size;
		seen += h.nevents;
		ht_progress("compacting", done, c.in_size, seen, "events");
		c.zbuf = ht_grow(c.zbuf, &c.zcap, h.comp_size + 1, 1);
		if (ht_pread_full(c.in, c.zbuf, h.comp_size, refs[i].off + sizeof(h)) < 0) {
			truncated = 1;
			break;
		}
		if (p && p->tid != h.tid)
			flush_pending(&c, p, level);
		p = pending_of(&c, h.tid);
		/* Merge only what continues the pending run exactly. */
		if (p->active && (h.first_seq != p->first_seq + p->nevents ||
				  p->len + h.raw_size > MERGE_LIMIT ||
				  (h.flags & HT_CHUNK_F_COLUMNS)))
			flush_pending(&c, p, level);
		/* The payload as stored, decompressed, in c.vbuf; column-coded,
		 * decoded after p's run (its length taken only below). */
		size_t rawlen = h.raw_size;
		int bad = 0;
		c.vbuf = ht_grow(c.vbuf, &c.vcap, h.raw_size + 1, 1);
		if (h.flags & HT_CHUNK_F_ZSTD) {
			size_t n = ZSTD_decompressDCtx(c.dc, c.vbuf, h.raw_size, c.zbuf, h.comp_size);
			bad = ZSTD_isError(n) || n != h.raw_size;
		} else {
			memcpy(c.vbuf, c.zbuf, h.raw_size);
		}
		if (!bad && (h.flags & HT_CHUNK_F_COLUMNS)) {
			const char *why;
			size_t nrec = ht_columns__rec_bytes(c.vbuf, h.raw_size);
			p->raw = ht_grow(p->raw, &p->cap, p->len + nrec + 1, 1);
			rawlen = ht_columns__decode(c.vbuf, h.raw_size, c.version, p->raw + p->len,
						    nrec, &why);
			bad = !rawlen;
		}
		if (bad) {
			/* Damaged inside (the readers stop this thread here, and
			 * read every other on): copied as it is, after what came
			 * before it, so that they read the same events from the
			 * result, and every later chunk is kept too.  Dropping
			 * the rest lost every later thread's events. */
			if (p->active && p->nevents)
				flush_pending(&c, p, level);
			p->active = 0;
			p->len = 0;
			emit(&c, &h, c.zbuf, h.comp_size, 0, level);
			c.events += h.nevents;
			if (!c.bad_chunks++)
				c.bad_tid = h.tid;
			continue;
		}
		if (!p->active) {
			if (!(h.flags & HT_CHUNK_F_SYNC)) {
				/* A continuation without its start (damaged input):
				 * copy it as it is. */
				emit(&c, &h, c.zbuf, h.comp_size, 0, level);
				c.events += h.nevents;
				continue;
			}
			p->active = 1;
			p->first_seq = h.first_seq;
			p->nevents = 0;
			p->flags = HT_CHUNK_F_SYNC;
		}
		if (!(h.flags & HT_CHUNK_F_COLUMNS)) { /* (decoded into p->raw above) */
			p->raw = ht_grow(p->raw, &p->cap, p->len + rawlen + 1, 1);
			memcpy(p->raw + p->len, c.vbuf, rawlen);
		}
		p->len += rawlen;
		p->nevents += h.nevents;
	}
	free(refs);
	for (size_t i = 0; i < c.npend; i++)
		flush_pending(&c, &c.pend[i], level);
	ht_progress_done();
	/* New index and header. */
	put_index(&c, &hdr, start);
	if (truncated || !(hdr.flags & HT_FILE_F_CLOSED)) {
		/* Not closed cleanly: keep saying so; readers scan. */
		hdr.sec[HT_SEC_INDEX].offset = 0;
		hdr.sec[HT_SEC_INDEX].size = 0;
	}
	if (c.failed || pwrite(c.out, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr)) {
		if (!c.failed)
			snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		goto cleanup;
	}
	if (read_back(o.tmp, path, c.events, hdr.sec[HT_SEC_INDEX].size != 0, c.bad_chunks != 0, err,
		      errlen) < 0)
		goto cleanup;
	c.out = -1; /* closed by the commit, or the abort below */
	if (still_named(c.in, path, err, errlen) < 0 ||
	    ht_out__commit(&o, err, errlen)) /* fsync, close, rename */
		goto cleanup;
	if (res) {
		res->in_bytes = c.in_size;
		res->out_bytes = c.off;
		res->events = c.events;
		res->truncated = truncated;
		res->bad_chunks = c.bad_chunks;
		res->bad_tid = c.bad_tid;
	}
	ret = 0;
cleanup:
	ht_progress_done(); /* (a progress line left by an error) */
	if (c.in >= 0)
		close(c.in);
	ht_out__abort(&o);
	for (size_t i = 0; i < c.npend; i++)
		free(c.pend[i].raw);
	free(c.pend);
	free(c.index);
	free(c.zbuf);
	free(c.cbuf);
	free(c.vbuf);
	ZSTD_freeCCtx(c.zc);
	ZSTD_freeDCtx(c.dc);
	return ret;
}

/* ---- finishing: the raw chunks compressed, nothing else changed ---------- */

#define FINISH_AHEAD (16u << 20) /* raw payload bytes compressed ahead of the writing */
#define FINISH_MIN 256u          /* smaller raw chunks stay as they are */
#define FINISH_THREADS 8         /* workers at most */

struct fchunk {
	uint64_t off;              /* chunk header offset in the input */
	struct ht_chunk_header h;  /* its header (rewritten when compressed) */
	uint8_t *z;                /* compressed payload, or NULL: copy it */
	int bad;                   /* a stored frame whose checksum fails: copied as it is
				    * (readers stop its thread there, as at any damaged chunk) */
	_Atomic int done;          /* a worker is through with it (h and z final) */
};

/* The chunks are taken in file order by the workers (the calling thread
 * among them), each with its own zstd context for the whole run, and
 * written in that order by the calling thread as soon as the first one
 * not written is done: the writing overlaps the compression, and no
 * worker waits for the others but when it runs FINISH_AHEAD bytes ahead
 * of the writing (which bounds the memory the compressed chunks take). */
struct finisher {
	const uint8_t *in;         /* the input, mapped */
	struct fchunk *ch;         /* every chunk */
	size_t n;                  /* how many */
	_Atomic size_t next;       /* the next one to take */
	_Atomic size_t written;    /* chunks written (the first not written) */
	int level;                 /* zstd level, or HT_FINISH_HUFFMAN */
	_Atomic int stop;          /* out of memory, or the writing failed */
	pthread_mutex_t mu;        /* with cv: waits for a chunk done or written */
	pthread_cond_t cv;
};

/* A chunk the recorder wrote raw: bare records (recorders before stored
 * frames), or a stored zstd frame of them (HT_CHUNK_F_STORED). */
static int finish_raw(const struct ht_chunk_header *h)
{
	if (h->type != HT_CHUNK_EVENTS || (h->flags & HT_CHUNK_F_COLUMNS) || h->raw_size < FINISH_MIN)
		return 0;
	if (h->flags & HT_CHUNK_F_ZSTD)
		return (h->flags & HT_CHUNK_F_STORED) != 0;
	return 1;
}

static void finish_wake(struct finisher *f)
{
	pthread_mutex_lock(&f->mu);
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

/* Compresses chunk i with zc, a stored frame checked and taken out of
 * its frame with dc first (it stays as it is if compressing does not
 * make it smaller); 0, or -1 out of memory. */
static int finish_one(struct finisher *f, ZSTD_CCtx *zc, ZSTD_DCtx *dc, size_t i)
{
	struct fchunk *c = &f->ch[i];
	int ret = 0;
	if (finish_raw(&c->h)) {
		const uint8_t *src = f->in + c->off + sizeof(c->h);
		size_t n = c->h.raw_size, cap = c->h.comp_size; /* (a result this long is no use) */
		uint8_t *z = malloc(cap), *plain = NULL;
		if (z && (c->h.flags & HT_CHUNK_F_STORED)) {
			plain = malloc(n + 1);
			size_t r = plain && dc ? ZSTD_decompressDCtx(dc, plain, n, src, c->h.comp_size)
					       : 0;
			if (!plain || !dc) {
				free(z);
				z = NULL;
			} else if (ZSTD_isError(r) || r != n) {
				c->bad = 1;
				free(z);
				z = NULL;
				n = 0; /* copied as it is */
			}
			src = plain;
		}
		if (!z && n) {
			ret = -1;
		} else if (n) {
			/* Huffman alone: every byte a literal, no sequence (no
			 * match search), still one zstd frame with its checksum */
			size_t r = f->level == HT_FINISH_HUFFMAN
				       ? ZSTD_compressSequences(zc, z, cap, NULL, 0, src, n)
				       : ZSTD_compress2(zc, z, cap, src, n);
			if (ZSTD_isError(r) || r >= cap) {
				free(z); /* stays as it is */
			} else {
				c->z = z;
				c->h.raw_size = (uint32_t)n;
				c->h.comp_size = (uint32_t)r;
				c->h.flags = (uint16_t)((c->h.flags & ~HT_CHUNK_F_STORED) | HT_CHUNK_F_ZSTD);
			}
		}
		free(plain);
	}
	atomic_store_explicit(&c->done, 1, memory_order_release);
	return ret;
}

/* Whether chunk i lies more than FINISH_AHEAD bytes past the first chunk
 * not written, w. */
static int too_far_ahead(const struct finisher *f, size_t i, size_t w)
{
	return w < f->n && f->ch[i].off - f->ch[w].off > FINISH_AHEAD;
}

/* Takes the next chunk, unless it is too far ahead of the writing (then
 * waits, unless nowait: the calling thread has the writing to do) or none
 * is left: SIZE_MAX. */
static size_t finish_take(struct finisher *f, int nowait)
{
	for (;;) {
		if (atomic_load(&f->stop))
			return SIZE_MAX;
		size_t i = atomic_load(&f->next);
		if (i >= f->n)
			return SIZE_MAX;
		size_t w = atomic_load(&f->written);
		if (too_far_ahead(f, i, w)) {
			if (nowait)
				return SIZE_MAX;
			pthread_mutex_lock(&f->mu);
			while (!atomic_load(&f->stop) && atomic_load(&f->written) == w)
				pthread_cond_wait(&f->cv, &f->mu);
			pthread_mutex_unlock(&f->mu);
			continue;
		}
		if (atomic_compare_exchange_weak(&f->next, &i, i + 1))
			return i;
	}
}

static ZSTD_CCtx *finish_cctx(int level)
{
	ZSTD_CCtx *zc = ZSTD_createCCtx();
	if (zc) {
		/* (a negative level would turn the Huffman coding of literals off) */
		ZSTD_CCtx_setParameter(zc, ZSTD_c_compressionLevel,
				       level == HT_FINISH_HUFFMAN ? 1 : level);
		ZSTD_CCtx_setParameter(zc, ZSTD_c_checksumFlag, 1);
		if (level == HT_FINISH_HUFFMAN)
			ZSTD_CCtx_setParameter(zc, ZSTD_c_blockDelimiters,
					       ZSTD_sf_noBlockDelimiters);
	}
	return zc;
}

static void *finish_worker(void *arg)
{
	struct finisher *f = arg;
	ZSTD_CCtx *zc = finish_cctx(f->level);
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	size_t i;
	while (zc && dc && (i = finish_take(f, 0)) != SIZE_MAX) {
		if (finish_one(f, zc, dc, i) < 0)
			atomic_store(&f->stop, 1);
		finish_wake(f);
	}
	if (!zc || !dc)
		atomic_store(&f->stop, 1);
	finish_wake(f);
	ZSTD_freeCCtx(zc);
	ZSTD_freeDCtx(dc);
	return NULL;
}

/* CPUs this process may run on, at most FINISH_THREADS. */
static int finish_threads(void)
{
	cpu_set_t set;
	int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
	return n < 1 ? 1 : n > FINISH_THREADS ? FINISH_THREADS : n;
}

typedef int rewrite_fn(const char *, int, struct ht_compact_result *, char *, size_t);

/* once(), again on the trace another compact put there meanwhile (at
 * most a few times: each time another process's rewrite). */
static int rewrite(rewrite_fn *once, const char *path, int level, struct ht_compact_result *res,
		   char *err, size_t errlen)
{
	int ret = REWRITTEN_MEANWHILE;
	for (int k = 0; k < 5 && ret == REWRITTEN_MEANWHILE; k++)
		ret = once(path, level, res, err, errlen);
	if (ret == REWRITTEN_MEANWHILE) {
		snprintf(err, errlen, "%s: other processes kept rewriting the trace: left to them",
			 path);
		ret = -1;
	}
	return ret;
}

int ht_trace__compact(const char *path, int level, struct ht_compact_result *res, char *err,
		      size_t errlen)
{
	return rewrite(compact_once, path, level, res, err, errlen);
}

static int finish_once(const char *path, int level, struct ht_compact_result *res, char *err,
		       size_t errlen)
{
	int ret = -1, in = -1, out = -1;
	struct ht_out o = {.fd = -1, .slot = -1};
	uint8_t *map = MAP_FAILED;
	size_t maplen = 0;
	struct fchunk *ch = NULL;
	size_t nch = 0, capch = 0, nraw = 0;
	uint64_t events = 0; /* in the chunks */
	struct compactor c; /* its output and index (put_chunk, put_index) */
	memset(&c, 0, sizeof(c));
	c.out = -1;
	c.path = path;
	c.err = err;
	c.errlen = errlen;
	struct ht_file_header hdr;
	struct stat st;
	if (res)
		memset(res, 0, sizeof(*res));
	in = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (in < 0 || fstat(in, &st) < 0 || (uint64_t)st.st_size < sizeof(hdr) ||
	    ht_pread_full(in, &hdr, sizeof(hdr), 0) < 0 || memcmp(hdr.magic, HT_MAGIC, 8)) {
		/* the reader says what it is: empty, a directory, a FIFO, a
		 * workload (it said "not a heaptrail trace" of all, probe O) */
		struct ht_reader *why = ht_reader__open_info(path, err, errlen);
		if (why) {
			ht_reader__close(why);
			snprintf(err, errlen, "%s: not a heaptrail trace", path);
		}
		goto cleanup;
	}
	if (ht_trace__wait_writer(in, hdr.pid, HT_WAIT_WRITER_MS) != 0) {
		still_written(path, hdr.pid, err, errlen);
		goto cleanup;
	}
	if (hold_input(in, path, err, errlen) < 0)
		goto cleanup;
	if (!named_still(in, path)) {
		ret = REWRITTEN_MEANWHILE;
		goto cleanup;
	}
	if (fstat(in, &st) < 0 || ht_pread_full(in, &hdr, sizeof(hdr), 0) < 0) {
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
		goto cleanup;
	}
	uint64_t size = (uint64_t)st.st_size, start = hdr.sec[HT_SEC_CHUNKS].offset;
	if (res)
		res->in_bytes = res->out_bytes = size;
	/* Only a cleanly closed trace of this version: anything else is left
	 * for the reader to report, or for `heaptrail compact` to repair
	 * (res->untouched says why, for the command to say). */
	const char *why = NULL;
	if (memcmp(hdr.magic, HT_MAGIC, 8) == 0 && hdr.version > HT_VERSION) {
		/* (as the reader says it: it called that a damaged header) */
		snprintf(err, errlen, "%s: trace format version %u is newer than this heaptrail "
				      "reads (%d): use a newer heaptrail",
			 path, hdr.version, HT_VERSION);
		goto cleanup;
	}
	if (hdr.version < HT_VERSION_MIN || hdr.version > HT_VERSION || start < sizeof(hdr) ||
	    start > size)
		why = "it is damaged (its header does not fit the file)";
	else if (!(hdr.flags & HT_FILE_F_CLOSED))
		why = "it was not closed cleanly";
	else if (hdr.sec[HT_SEC_INDEX].size &&
		 (hdr.sec[HT_SEC_INDEX].offset < start || hdr.sec[HT_SEC_INDEX].offset > size ||
		  hdr.sec[HT_SEC_INDEX].size > size - hdr.sec[HT_SEC_INDEX].offset))
		why = "it is damaged (the file ends before its index: cut)";
	if (why) {
		if (res)
			res->untouched = why;
		ret = 0;
		goto cleanup;
	}
	maplen = (size_t)size;
	map = mmap(NULL, maplen, PROT_READ, MAP_PRIVATE, in, 0);
	if (map == MAP_FAILED) {
		snprintf(err, errlen, "%s: cannot map: %s", path, strerror(errno));
		goto cleanup;
	}
	/* (stop is within the file: checked above; every chunk header and
	 * payload read from the map lies before it) */
	uint64_t stop = hdr.sec[HT_SEC_INDEX].size ? hdr.sec[HT_SEC_INDEX].offset : size;
	for (uint64_t off = start; off < stop;) {
		struct ht_chunk_header h;
		if (stop - off < sizeof(h)) {
			why = "it is damaged (it ends inside a chunk header)";
			break;
		}
		memcpy(&h, map + off, sizeof(h));
		if (h.magic != HT_CHUNK_MAGIC || h.comp_size > HT_MAX_CHUNK_RAW ||
		    h.comp_size > stop - off - sizeof(h)) {
			why = "it is damaged (a chunk is cut or its header is bad)";
			break; /* not ours to repair */
		}
		if (h.type == HT_CHUNK_EVENTS || h.type == HT_CHUNK_CLOCK) {
			ch = ht_grow(ch, &capch, nch + 1, sizeof(*ch));
			ch[nch].off = off;
			ch[nch].h = h;
			ch[nch].z = NULL;
			ch[nch].bad = 0;
			ch[nch++].done = 0;
			nraw += finish_raw(&h);
			events += h.type == HT_CHUNK_EVENTS ? h.nevents : 0;
		}
		off += sizeof(h) + h.comp_size;
	}
	if (why) {
		/* (no count of events: what a damaged trace holds is for the
		 * reader to say) */
		if (res)
			res->untouched = why;
		ret = 0;
		goto cleanup;
	}
	if (res)
		res->events = events;
	if (!nraw) {
		ret = 0;
		goto cleanup;
	}
	if (ht_out__open(&o, path, HT_OUT_PRIVATE, HT_OUT_FD | HT_OUT_DATA, err, errlen))
		goto cleanup;
	out = o.fd;
	c.out = out;
	out_write(&c, map, start);
	struct finisher f = {.in = map, .ch = ch, .n = nch, .level = level};
	pthread_mutex_init(&f.mu, NULL);
	pthread_cond_init(&f.cv, NULL);
	int nthr = finish_threads(), started = 0;
	pthread_t thr[FINISH_THREADS];
	for (int t = 1; t < nthr; t++)
		if (pthread_create(&thr[started], NULL, finish_worker, &f) == 0)
			started++;
	ZSTD_CCtx *zc = finish_cctx(level);
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	if (!dc) {
		ZSTD_freeCCtx(zc);
		zc = NULL; /* (said as out of memory below) */
	}
	uint64_t done_events = 0, said = 0; /* for the progress line */
	for (size_t w = 0; w < nch && !c.failed; w++) {
		/* chunk w written as soon as it is done; meanwhile this thread
		 * compresses the next ones itself */
		while (!atomic_load_explicit(&ch[w].done, memory_order_acquire)) {
			size_t i = zc && !atomic_load(&f.stop) ? finish_take(&f, 1) : SIZE_MAX;
			if (i != SIZE_MAX) {
				if (finish_one(&f, zc, dc, i) < 0)
					atomic_store(&f.stop, 1);
				continue;
			}
			if (atomic_load(&f.stop) || !zc)
				break;
			pthread_mutex_lock(&f.mu);
			size_t nx;
			while (!atomic_load(&ch[w].done) && !atomic_load(&f.stop) &&
			       ((nx = atomic_load(&f.next)) >= nch || too_far_ahead(&f, nx, w)))
				pthread_cond_wait(&f.cv, &f.mu);
			pthread_mutex_unlock(&f.mu);
		}
		if (!zc || (atomic_load(&f.stop) && !atomic_load(&ch[w].done))) {
			snprintf(err, errlen, "out of memory");
			c.failed = 1;
			break;
		}
		put_chunk(&c, &ch[w].h, ch[w].z ? ch[w].z : map + ch[w].off + sizeof(ch[w].h));
		free(ch[w].z);
		ch[w].z = NULL;
		done_events += ch[w].h.type == HT_CHUNK_EVENTS ? ch[w].h.nevents : 0;
		atomic_store(&f.written, w + 1);
		finish_wake(&f);
		if (ch[w].off - said >= (8u << 20) || w + 1 == nch) {
			said = ch[w].off;
			ht_progress("compressing", w + 1 < nch ? ch[w + 1].off : size, size, done_events,
				    "events");
		}
	}
	atomic_store(&f.stop, 1); /* (the workers leave) */
	finish_wake(&f);
	for (int t = 0; t < started; t++)
		pthread_join(thr[t], NULL);
	ZSTD_freeCCtx(zc);
	ZSTD_freeDCtx(dc);
	pthread_cond_destroy(&f.cv);
	pthread_mutex_destroy(&f.mu);
	ht_progress_done();
	put_index(&c, &hdr, start);
	/* No fsync: the recorder's file had none either, and rename over it
	 * is ordered after the data on ext4 and the like (auto_da_alloc). */
	if (c.failed || pwrite(out, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr)) {
		if (!c.failed)
			snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		goto cleanup;
	}
	uint64_t nbad = 0;
	uint32_t bad_tid = 0;
	for (size_t i = 0; i < nch; i++)
		if (ch[i].bad && !nbad++)
			bad_tid = ch[i].h.tid;
	if (read_back(o.tmp, path, events, 1, nbad != 0, err, errlen) < 0)
		goto cleanup;
	out = -1; /* closed by the commit, or the abort below */
	if (still_named(in, path, err, errlen) < 0 || ht_out__commit(&o, err, errlen))
		goto cleanup;
	if (res) {
		res->out_bytes = c.off;
		res->rewritten = 1;
		res->compressed = nraw - nbad;
		res->bad_chunks = nbad;
		res->bad_tid = bad_tid;
	}
	ret = 0;
cleanup:
	ht_progress_done(); /* (a progress line left by an error) */
	if (map != MAP_FAILED)
		munmap(map, maplen);
	if (in >= 0)
		close(in);
	ht_out__abort(&o);
	if (ch)
		for (size_t i = 0; i < nch; i++)
			free(ch[i].z);
	free(ch);
	free(c.index);
	return ret;
}

int ht_trace__finish(const char *path, int level, struct ht_compact_result *res, char *err,
		     size_t errlen)
{
	return rewrite(finish_once, path, level, res, err, errlen);
}
