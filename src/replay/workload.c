/* Workload files: the writer convert uses and the loader replay uses, with
 * the checks that let the engine trust what it runs (workload.h). */
#define _GNU_SOURCE
#include "workload.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/outfile.h"
#include "common/util.h"
#include "trace/format.h"

const char *const ht_wl_fn_names[HT_FN_NR] = {
	"malloc", "calloc", "realloc", "reallocarray", "free", "memalign", "posix_memalign",
	"aligned_alloc", "valloc", "pvalloc", "mallopt", "malloc_trim", "mmap", "munmap", "mremap",
};

/* Per op: its name, arguments and function. */
static const struct {
	const char *name; /* for messages */
	int nargs;        /* LEB128 arguments */
	int fn;           /* enum ht_wl_fn, -1 for WAIT/SPAWN */
} op_descs[HT_WL_OP_NR] = {
	[HT_WL_MALLOC] = {"malloc", 2, HT_FN_MALLOC},
	[HT_WL_CALLOC] = {"calloc", 3, HT_FN_CALLOC},
	[HT_WL_REALLOC] = {"realloc", 3, HT_FN_REALLOC},
	[HT_WL_REALLOCARRAY] = {"reallocarray", 4, HT_FN_REALLOCARRAY},
	[HT_WL_FREE] = {"free", 1, HT_FN_FREE},
	[HT_WL_MEMALIGN] = {"memalign", 3, HT_FN_MEMALIGN},
	[HT_WL_POSIX_MEMALIGN] = {"posix_memalign", 3, HT_FN_POSIX_MEMALIGN},
	[HT_WL_ALIGNED_ALLOC] = {"aligned_alloc", 3, HT_FN_ALIGNED_ALLOC},
	[HT_WL_VALLOC] = {"valloc", 2, HT_FN_VALLOC},
	[HT_WL_PVALLOC] = {"pvalloc", 2, HT_FN_PVALLOC},
	[HT_WL_MALLOPT] = {"mallopt", 2, HT_FN_MALLOPT},
	[HT_WL_MALLOC_TRIM] = {"malloc_trim", 1, HT_FN_MALLOC_TRIM},
	[HT_WL_MMAP] = {"mmap", 4, HT_FN_MMAP},
	[HT_WL_MUNMAP] = {"munmap", 4, HT_FN_MUNMAP},
	[HT_WL_MREMAP] = {"mremap", 5, HT_FN_MREMAP},
	[HT_WL_WAIT] = {"wait", 2, -1},
	[HT_WL_SPAWN] = {"spawn", 1, -1},
};

int ht_wl_op_fn(int op)
{
	return op > 0 && op < HT_WL_OP_NR ? op_descs[op].fn : -1;
}

int ht_wl_op_nargs(int op)
{
	return op > 0 && op < HT_WL_OP_NR ? op_descs[op].nargs : 0;
}

const char *ht_wl_op_name(int op)
{
	return op > 0 && op < HT_WL_OP_NR ? op_descs[op].name : "?";
}

int ht_wl_decode(const uint8_t **pp, const uint8_t *end, uint64_t *args)
{
	const uint8_t *p = *pp;
	if (p >= end)
		return 0;
	int op = *p++;
	int n = ht_wl_op_nargs(op);
	if (!n)
		return 0;
	for (int i = 0; i < n; i++) {
		uint64_t v = 0;
		for (int shift = 0;; shift += 7) {
			if (p >= end || shift > 63)
				return 0;
			uint8_t b = *p++;
			if (shift == 63 && b > 1)
				return 0;
			v |= (uint64_t)(b & 0x7f) << shift;
			if (!(b & 0x80))
				break;
		}
		args[i] = v;
	}
	*pp = p;
	return op;
}

/* ---- little-endian fields ---- */

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

#define BLOCK_HDR 16   /* u32 thread, u32 nops, u32 nbytes, u32 zero */
#define THREAD_ENT 32  /* u32 tid, u32 creator, u64 nops, u64 nbytes, u64 zero */
#define FLUSH_AT 65536 /* a thread's pending ops become a block at this size */
#define MAX_OP (1 + HT_WL_MAX_ARGS * 10) /* an op's bytes at most: its byte, LEB128 args */

/* ---- the writer ---- */

/* A thread's stream being written. */
struct wthread {
	uint32_t tid;     /* traced thread id */
	uint32_t creator; /* thread index that spawns it */
	uint64_t nops;    /* ops so far */
	uint64_t nbytes;  /* stream bytes so far */
	uint8_t *buf;     /* pending ops, not yet in a block (NULL while idle) */
	size_t len;       /* bytes in buf */
	size_t cap;       /* its size: grows to a block's (FLUSH_AT + MAX_OP) */
	uint32_t pend;    /* ops in buf */
};

struct ht_wl_writer {
	FILE *f;              /* the temporary file (out.f) */
	struct ht_out out;    /* it, renamed into place on close */
	uint64_t off;         /* bytes written */
	struct wthread *th;   /* threads */
	uint32_t nth, capth;  /* count, capacity */
	int failed;           /* a write failed (errno in err_no) */
	int err_no;           /* errno of the failure */
};

struct ht_wl_writer *ht_wl_writer__open(const char *path, char *err, size_t errlen)
{
	struct ht_wl_writer *w = calloc(1, sizeof(*w));
	if (!w) {
		snprintf(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	/* private, as traces: the workload is the program's heap calls */
	if (ht_out__open(&w->out, path, HT_OUT_PRIVATE, HT_OUT_SYNC | HT_OUT_DATA, err, errlen)) {
		free(w); /* (err: the output layer's "cannot write PATH: why") */
		return NULL;
	}
	w->f = w->out.f;
	static const uint8_t zero[HT_WL_HEADER_SIZE];
	fwrite(zero, 1, sizeof(zero), w->f); /* the header, written last */
	w->off = HT_WL_HEADER_SIZE;
	return w;
}

uint32_t ht_wl_writer__thread(struct ht_wl_writer *w, uint32_t tid, uint32_t creator)
{
	if (w->nth == w->capth) {
		w->capth = w->capth ? 2 * w->capth : 16;
		w->th = ht_xrealloc(w->th, w->capth * sizeof(*w->th));
	}
	struct wthread *t = &w->th[w->nth];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->creator = creator;
	return w->nth++; /* its buffer comes with its first op */
}

uint64_t ht_wl_writer__nops(const struct ht_wl_writer *w, uint32_t thread)
{
	return w->th[thread].nops;
}

static void wwrite(struct ht_wl_writer *w, const void *p, size_t n)
{
	if (w->failed)
		return;
	if (fwrite(p, 1, n, w->f) != n) {
		w->failed = 1;
		w->err_no = errno ? errno : EIO;
	}
	w->off += n;
}

static void flush_thread(struct ht_wl_writer *w, uint32_t i)
{
	struct wthread *t = &w->th[i];
	if (!t->len)
		return;
	uint8_t h[BLOCK_HDR] = {0};
	put32(h, i);
	put32(h + 4, t->pend);
	put32(h + 8, (uint32_t)t->len);
	wwrite(w, h, sizeof(h));
	wwrite(w, t->buf, t->len);
	t->len = 0;
	t->pend = 0;
}

void ht_wl_writer__op(struct ht_wl_writer *w, uint32_t thread, int op, const uint64_t *args,
		      int nargs)
{
	struct wthread *t = &w->th[thread];
	if (t->cap - t->len < MAX_OP) {
		/* from 256 bytes up to a block: a short thread costs little */
		size_t ncap = t->cap ? 2 * t->cap : 256;
		if (ncap > FLUSH_AT + MAX_OP)
			ncap = FLUSH_AT + MAX_OP;
		t->buf = ht_xrealloc(t->buf, ncap);
		t->cap = ncap;
	}
	uint8_t *o = t->buf + t->len, *start = o;
	*o++ = (uint8_t)op;
	for (int i = 0; i < nargs; i++)
		o = ht_leb128_put(o, args[i]);
	t->len += (size_t)(o - start);
	t->nbytes += (size_t)(o - start);
	t->nops++;
	t->pend++;
	if (t->len >= FLUSH_AT)
		flush_thread(w, thread);
}

void ht_wl_writer__idle(struct ht_wl_writer *w, uint32_t thread)
{
	flush_thread(w, thread);
	free(w->th[thread].buf);
	w->th[thread].buf = NULL;
	w->th[thread].cap = 0;
}

static void writer_free(struct ht_wl_writer *w)
{
	for (uint32_t i = 0; i < w->nth; i++)
		free(w->th[i].buf);
	free(w->th);
	ht_out__abort(&w->out);
	free(w);
}

void ht_wl_writer__abort(struct ht_wl_writer *w)
{
	if (!w)
		return;
	writer_free(w);
}

int ht_wl_writer__close(struct ht_wl_writer *w, uint64_t nslots, uint64_t ideal_peak,
			uint64_t flags, const uint64_t *calls, const char *source, char *err,
			size_t errlen)
{
	uint64_t sec[HT_WL_SEC_NR][2];
	uint64_t nops = 0;
	for (uint32_t i = 0; i < w->nth; i++) {
		flush_thread(w, i);
		nops += w->th[i].nops;
	}
	sec[HT_WL_SEC_OPS][0] = HT_WL_HEADER_SIZE;
	sec[HT_WL_SEC_OPS][1] = w->off - HT_WL_HEADER_SIZE;
	sec[HT_WL_SEC_THREADS][0] = w->off;
	for (uint32_t i = 0; i < w->nth; i++) {
		uint8_t e[THREAD_ENT] = {0};
		put32(e, w->th[i].tid);
		put32(e + 4, w->th[i].creator);
		put64(e + 8, w->th[i].nops);
		put64(e + 16, w->th[i].nbytes);
		wwrite(w, e, sizeof(e));
	}
	sec[HT_WL_SEC_THREADS][1] = w->off - sec[HT_WL_SEC_THREADS][0];
	sec[HT_WL_SEC_CALLS][0] = w->off;
	for (int i = 0; i < HT_FN_NR; i++) {
		uint8_t b[8];
		put64(b, calls[i]);
		wwrite(w, b, 8);
	}
	sec[HT_WL_SEC_CALLS][1] = w->off - sec[HT_WL_SEC_CALLS][0];
	sec[HT_WL_SEC_SOURCE][0] = w->off;
	wwrite(w, source, strlen(source));
	sec[HT_WL_SEC_SOURCE][1] = w->off - sec[HT_WL_SEC_SOURCE][0];

	uint8_t h[HT_WL_HEADER_SIZE] = {0};
	memcpy(h, HT_WL_MAGIC, 8);
	put32(h + 8, HT_WL_VERSION);
	put32(h + 12, HT_WL_HEADER_SIZE);
	put64(h + 16, flags);
	put32(h + 24, w->nth);
	put64(h + 32, nslots);
	put64(h + 40, nops);
	put64(h + 48, ideal_peak);
	for (int i = 0; i < HT_WL_SEC_NR; i++) {
		put64(h + 64 + 16 * i, sec[i][0]);
		put64(h + 72 + 16 * i, sec[i][1]);
	}
	if (!w->failed && (fseek(w->f, 0, SEEK_SET) || fwrite(h, 1, sizeof(h), w->f) != sizeof(h))) {
		w->failed = 1;
		w->err_no = errno;
	}
	if (w->failed) {
		snprintf(err, errlen, "cannot write %s: %s", w->out.path,
			 strerror(w->err_no ? w->err_no : EIO));
		writer_free(w);
		return -1;
	}
	if (ht_out__commit(&w->out, err, errlen)) {
		writer_free(w);
		return -1;
	}
	writer_free(w);
	return 0;
}

/* ---- the loader ---- */

/* Where the bytes come from: a file or memory. */
struct src {
	int fd;             /* file, or -1 */
	const uint8_t *mem; /* memory, when fd < 0 */
	uint64_t len;       /* total bytes */
	const char *name;   /* for messages */
	char *err;          /* message buffer */
	size_t errlen;      /* its size */
};

static int fail(struct src *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct src *s, const char *fmt, ...)
{
	int n = snprintf(s->err, s->errlen, "%s: ", s->name);
	if (n < 0 || (size_t)n >= s->errlen)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->err + n, s->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static int read_at(struct src *s, void *buf, uint64_t off, uint64_t n)
{
	if (off > s->len || n > s->len - off)
		return fail(s, "truncated: %llu bytes at offset %llu run past the end (%llu bytes)",
			    (unsigned long long)n, (unsigned long long)off, (unsigned long long)s->len);
	if (s->fd < 0) {
		memcpy(buf, s->mem + off, n);
		return 0;
	}
	uint8_t *b = buf;
	while (n) {
		ssize_t k = pread(s->fd, b, n > (1u << 30) ? (1u << 30) : n, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return fail(s, "read error at offset %llu: %s", (unsigned long long)off,
				    k < 0 ? strerror(errno) : "unexpected end of file");
		b += k, off += (uint64_t)k, n -= (uint64_t)k;
	}
	return 0;
}

/* The simulation's state of one thread. */
struct simth {
	const uint8_t *p, *end; /* cursor in the stream */
	uint64_t done;           /* ops done */
	int started;             /* spawned (or thread 0) */
	uint32_t wait_on;        /* the thread it waits for, when blocked */
	uint64_t wait_for;       /* the count it waits for */
	uint32_t next_waiter;    /* list of threads waiting on the same one, +1 */
	uint32_t waiters;        /* head of the list of threads waiting on this one, +1 */
};

/* What a slot holds: the engine frees heap blocks and unmaps maps. */
enum { SLOT_EMPTY, SLOT_HEAP, SLOT_MAP };

/* A range munmap has taken out of a map. */
struct hole {
	uint64_t lo, hi; /* offsets in the map */
	uint64_t next;   /* the slot's next hole, +1 */
};

/* The slots during the simulation. */
struct simslots {
	uint8_t *state;     /* per slot: SLOT_* */
	uint64_t *extent;   /* per slot (mmap workloads): length of its map */
	uint64_t *holes;    /* per slot (mmap workloads): its first hole, +1 */
	struct hole *h;     /* the holes */
	size_t nh, caph;    /* count, capacity */
	uint32_t *owner;    /* per slot: the thread that used it last */
	uint64_t *at;       /* per slot: that thread's op count after it */
	uint64_t *kkey;     /* hash: (thread << 32 | other) + 1, 0 if free */
	uint64_t *kval;     /* ops of the other thread this one has waited for */
	size_t kcap, kn;    /* capacity (a power of two), entries */
};

/* The entry of (t, j) in the hash, or the free one where it goes. */
static size_t known_find(const struct simslots *m, uint32_t t, uint32_t j)
{
	uint64_t key = ((uint64_t)t << 32 | j) + 1;
	size_t mask = m->kcap - 1, i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
	while (m->kkey[i] && m->kkey[i] != key)
		i = (i + 1) & mask;
	return i;
}

/* Thread t has seen thread j do count ops (a wait, or j spawned it). */
static int known_raise(struct simslots *m, uint32_t t, uint32_t j, uint64_t count)
{
	if (2 * (m->kn + 1) > m->kcap) {
		size_t ocap = m->kcap;
		uint64_t *ok = m->kkey, *ov = m->kval;
		m->kcap = ocap ? 2 * ocap : 64;
		m->kkey = calloc(m->kcap, sizeof(uint64_t));
		m->kval = calloc(m->kcap, sizeof(uint64_t));
		if (!m->kkey || !m->kval) {
			free(ok);
			free(ov);
			return -1;
		}
		for (size_t i = 0; i < ocap; i++) {
			if (ok[i]) {
				size_t k = known_find(m, (uint32_t)((ok[i] - 1) >> 32), (uint32_t)(ok[i] - 1));
				m->kkey[k] = ok[i];
				m->kval[k] = ov[i];
			}
		}
		free(ok);
		free(ov);
	}
	size_t i = known_find(m, t, j);
	if (!m->kkey[i]) {
		m->kkey[i] = ((uint64_t)t << 32 | j) + 1;
		m->kn++;
	}
	if (m->kval[i] < count)
		m->kval[i] = count;
	return 0;
}

/* Ops of thread j that thread t has seen done. */
static uint64_t known(const struct simslots *m, uint32_t t, uint32_t j)
{
	if (!m->kcap)
		return 0;
	size_t i = known_find(m, t, j);
	return m->kkey[i] ? m->kval[i] : 0;
}

/* Checks that [lo, lo + len) of the map in slot k is still mapped (else
 * 1) and, if add, takes it out: a new hole, or one grown to it, so that a
 * map unmapped piece by piece in order keeps one hole.  -1: no memory. */
static int add_hole(struct simslots *m, uint64_t k, uint64_t lo, uint64_t len, int add)
{
	struct hole *left = NULL; /* the hole that ends at lo */
	uint64_t *right = NULL;   /* the link to the one that starts at lo + len */
	for (uint64_t *link = &m->holes[k]; *link; link = &m->h[*link - 1].next) {
		struct hole *x = &m->h[*link - 1];
		if (lo < x->hi && x->lo < lo + len)
			return 1;
		if (x->hi == lo)
			left = x;
		else if (x->lo == lo + len)
			right = link;
	}
	if (!add)
		return 0;
	if (left && right) {
		left->hi = m->h[*right - 1].hi;
		*right = m->h[*right - 1].next; /* merged into left */
	} else if (left) {
		left->hi = lo + len;
	} else if (right) {
		m->h[*right - 1].lo = lo;
	} else {
		if (m->nh == m->caph) {
			size_t ncap = m->caph ? 2 * m->caph : 64;
			struct hole *nh = realloc(m->h, ncap * sizeof(*nh));
			if (!nh)
				return -1;
			m->h = nh;
			m->caph = ncap;
		}
		m->h[m->nh++] = (struct hole){lo, lo + len, m->holes[k]};
		m->holes[k] = m->nh;
	}
	return 0;
}

/* One op against the slot states; -1 with a message if it breaks a rule. */
static int sim_slot(struct src *s, struct ht_workload *w, struct simslots *m, uint32_t ti,
		    uint64_t opno, int op, const uint64_t *a)
{
#define SLOT_OK(v) ((v) <= w->nslots)
#define BAD(...) fail(s, "thread %u op %llu (%s): " __VA_ARGS__)
	unsigned long long on = (unsigned long long)opno;
	const char *nm = ht_wl_op_name(op);
	uint64_t res = 0, old = 0;
	switch (op) {
	case HT_WL_MALLOC: case HT_WL_CALLOC: case HT_WL_MEMALIGN: case HT_WL_POSIX_MEMALIGN:
	case HT_WL_ALIGNED_ALLOC: case HT_WL_VALLOC: case HT_WL_PVALLOC: case HT_WL_MMAP:
		res = a[0];
		break;
	case HT_WL_REALLOC: case HT_WL_REALLOCARRAY: case HT_WL_MREMAP:
		res = a[0], old = a[1];
		break;
	case HT_WL_FREE: case HT_WL_MUNMAP:
		old = a[0];
		break;
	default:
		return 0;
	}
	if (!SLOT_OK(res) || !SLOT_OK(old))
		return BAD("slot %llu out of range (the workload has %llu)", ti, on, nm,
			   (unsigned long long)(SLOT_OK(res) ? old : res) - 1,
			   (unsigned long long)w->nslots);
	int map = op == HT_WL_MMAP || op == HT_WL_MUNMAP || op == HT_WL_MREMAP;
	if (map) {
		if (!(w->flags & HT_WL_F_MMAP))
			return BAD("an mmap op in a workload without the mmap flag", ti, on, nm);
		if (op == HT_WL_MUNMAP && !old)
			return BAD("munmap of NULL", ti, on, nm);
		if (op == HT_WL_MREMAP && (!old || a[4] & ~1ull))
			return BAD("mremap of NULL or with flags other than MREMAP_MAYMOVE", ti, on, nm);
		if (op == HT_WL_MMAP && (!(a[3] & 0x20) || (a[3] & 0x10) || !(a[3] & 0x02)))
			return BAD("not an anonymous private map without MAP_FIXED", ti, on, nm);
		/* the engine stores the result in its slot, failed or not */
		if (op != HT_WL_MUNMAP && !res)
			return BAD("no slot for the result", ti, on, nm);
	}
	/* the engine runs the threads in parallel: the thread that used a
	 * slot last must be this one, or one it has waited for since */
	for (int k = 0; k < 2; k++) {
		uint64_t v = k ? res : old;
		if (!v || (k && res == old))
			continue;
		uint32_t j = m->owner[v - 1];
		if (j != ti && m->at[v - 1] > known(m, ti, j))
			return BAD("slot %llu was last used by thread %u at its op %llu, and this "
				   "thread does not wait for that", ti, on, nm,
				   (unsigned long long)v - 1, j, (unsigned long long)m->at[v - 1] - 1);
		m->owner[v - 1] = ti;
		m->at[v - 1] = opno + 1;
	}
	if (old) {
		uint8_t st = m->state[old - 1];
		if (st == SLOT_EMPTY)
			return BAD("slot %llu is empty", ti, on, nm, (unsigned long long)old - 1);
		if (st != (map ? SLOT_MAP : SLOT_HEAP))
			return BAD("slot %llu holds %s", ti, on, nm, (unsigned long long)old - 1,
				   map ? "a heap block, not a map" : "a map, not a heap block");
		if (op == HT_WL_MUNMAP) {
			uint64_t lo = a[1], len = a[2];
			if (lo > m->extent[old - 1] || len > m->extent[old - 1] - lo)
				return BAD("unmaps past the end of the map", ti, on, nm);
			/* unmapped once, a range may be someone else's map now */
			int r = len ? add_hole(m, old - 1, lo, len, !a[3]) : 0;
			if (r > 0)
				return BAD("unmaps a range of the map already unmapped", ti, on, nm);
			if (r < 0)
				return fail(s, "out of memory checking the munmaps");
			if (a[3]) {
				m->state[old - 1] = SLOT_EMPTY;
				m->holes[old - 1] = 0;
			}
			return 0;
		}
		if (op == HT_WL_MREMAP && (m->holes[old - 1] || a[2] > m->extent[old - 1]))
			return BAD("remaps a map with holes, or past its end", ti, on, nm);
		if (res != old)
			m->state[old - 1] = SLOT_EMPTY;
	}
	if (res && res != old) {
		if (m->state[res - 1])
			return BAD("slot %llu is still live", ti, on, nm, (unsigned long long)res - 1);
	}
	if (res) {
		m->state[res - 1] = map ? SLOT_MAP : SLOT_HEAP;
		if (w->flags & HT_WL_F_MMAP) {
			m->extent[res - 1] = op == HT_WL_MMAP ? a[1] : op == HT_WL_MREMAP ? a[3] : 0;
			m->holes[res - 1] = 0;
		}
	}
	return 0;
#undef BAD
#undef SLOT_OK
}

/* Runs the workload once without calling anything: every thread as far
 * as its waits allow, until all are done.  Checks the rules the engine
 * relies on. */
/* The bytes an op asks for (saturating): the workload's ideal peak, the
 * live requested bytes at the trace's peak, cannot exceed their sum. */
static uint64_t op_request(int op, const uint64_t *a)
{
	uint64_t n = 0, sz = 0;
	switch (op) {
	case HT_WL_MALLOC: case HT_WL_VALLOC: case HT_WL_PVALLOC: case HT_WL_MMAP:
		return a[1];
	case HT_WL_CALLOC:
		n = a[1], sz = a[2];
		break;
	case HT_WL_REALLOC:
		return a[2];
	case HT_WL_REALLOCARRAY:
		n = a[2], sz = a[3];
		break;
	case HT_WL_MEMALIGN: case HT_WL_POSIX_MEMALIGN: case HT_WL_ALIGNED_ALLOC:
		return a[2];
	case HT_WL_MREMAP:
		return a[3];
	default:
		return 0;
	}
	uint64_t p;
	return __builtin_mul_overflow(n, sz, &p) ? UINT64_MAX : p;
}

static int simulate(struct src *s, struct ht_workload *w)
{
	int ret = -1;
	size_t n = w->nthreads, ns = w->nslots;
	struct simth *t = calloc(n, sizeof(*t));
	uint32_t *ready = calloc(n, sizeof(*ready));
	struct simslots m = {0};
	int mm = (w->flags & HT_WL_F_MMAP) && ns;
	if (ns) {
		m.state = calloc(ns, 1);
		m.owner = calloc(ns, sizeof(*m.owner));
		m.at = calloc(ns, sizeof(*m.at));
	}
	if (mm) {
		m.extent = calloc(ns, sizeof(*m.extent));
		m.holes = calloc(ns, sizeof(*m.holes));
	}
	if (!t || !ready || (ns && (!m.state || !m.owner || !m.at)) ||
	    (mm && (!m.extent || !m.holes))) {
		fail(s, "out of memory checking %llu slots", (unsigned long long)w->nslots);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		t[i].p = w->threads[i].ops;
		t[i].end = t[i].p + w->threads[i].nbytes;
	}
	size_t nready = 0, finished = 0;
	uint64_t requested = 0;
	t[0].started = 1;
	ready[nready++] = 0;
	while (nready) {
		uint32_t i = ready[--nready];
		struct simth *c = &t[i];
		for (;;) {
			if (c->p >= c->end) {
				finished++;
				break;
			}
			const uint8_t *at = c->p;
			uint64_t a[HT_WL_MAX_ARGS];
			int op = ht_wl_decode(&c->p, c->end, a);
			if (!op) {
				fail(s, "thread %u op %llu: malformed op (byte 0x%02x)", i,
				     (unsigned long long)c->done, *at);
				goto out;
			}
			if (op == HT_WL_WAIT) {
				/* a wait for 0 ops would keep the engine from
				 * publishing the thread's later counts */
				if (a[0] >= n || a[0] == i || !a[1] || a[1] > w->threads[a[0]].nops) {
					fail(s, "thread %u op %llu: wait for thread %llu op %llu, which does not exist",
					     i, (unsigned long long)c->done, (unsigned long long)a[0],
					     (unsigned long long)a[1]);
					goto out;
				}
				if (t[a[0]].done < a[1]) {
					c->p = at; /* blocked: join the target's waiters */
					c->wait_on = (uint32_t)a[0];
					c->wait_for = a[1];
					c->next_waiter = t[a[0]].waiters;
					t[a[0]].waiters = i + 1;
					break;
				}
				if (known_raise(&m, i, (uint32_t)a[0], a[1])) {
					fail(s, "out of memory checking the waits");
					goto out;
				}
			} else if (op == HT_WL_SPAWN) {
				if (a[0] >= n || a[0] == 0 || t[a[0]].started) {
					fail(s, "thread %u op %llu: spawns thread %llu, which %s", i,
					     (unsigned long long)c->done, (unsigned long long)a[0],
					     a[0] >= n ? "does not exist" : "is already started");
					goto out;
				}
				t[a[0]].started = 1;
				ready[nready++] = (uint32_t)a[0];
				/* what its creator did so far comes before it */
				if (c->done && known_raise(&m, (uint32_t)a[0], i, c->done)) {
					fail(s, "out of memory checking the waits");
					goto out;
				}
			} else if (sim_slot(s, w, &m, i, c->done, op, a)) {
				goto out;
			} else if (ht_wl_op_fn(op) >= 0) {
				w->fn_ops[ht_wl_op_fn(op)]++;
			}
			uint64_t q = op_request(op, a);
			requested = requested + q < requested ? UINT64_MAX : requested + q;
			c->done++;
		}
		/* i stopped: wake the threads it has satisfied */
		uint32_t *link = &c->waiters;
		while (*link) {
			struct simth *wt = &t[*link - 1];
			if (wt->wait_for <= c->done) {
				ready[nready++] = *link - 1;
				*link = wt->next_waiter;
			} else {
				link = &wt->next_waiter;
			}
		}
	}
	if (finished != n) {
		for (size_t i = 0; i < n; i++) {
			if (!t[i].started) {
				fail(s, "thread %zu is never started", i);
				goto out;
			}
		}
		for (size_t i = 0; i < n; i++) {
			if (t[i].p < t[i].end) {
				fail(s, "the waits cannot all be met: thread %zu stops at op %llu waiting "
					"for thread %u to reach op %llu", i, (unsigned long long)t[i].done,
				     t[i].wait_on, (unsigned long long)t[i].wait_for);
				goto out;
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (t[i].done != w->threads[i].nops) {
			fail(s, "thread %zu has %llu ops, its table says %llu", i,
			     (unsigned long long)t[i].done, (unsigned long long)w->threads[i].nops);
			goto out;
		}
	}
	if (w->ideal_peak_bytes > requested) {
		fail(s, "corrupt: its header's ideal peak, %llu bytes, is more than its ops request "
			"in all (%llu bytes)", (unsigned long long)w->ideal_peak_bytes,
		     (unsigned long long)requested);
		goto out;
	}
	ret = 0;
out:
	free(t);
	free(ready);
	free(m.state);
	free(m.extent);
	free(m.holes);
	free(m.h);
	free(m.owner);
	free(m.at);
	free(m.kkey);
	free(m.kval);
	return ret;
}

static struct ht_workload *load(struct src *s)
{
	struct ht_workload *w = calloc(1, sizeof(*w));
	uint8_t h[HT_WL_HEADER_SIZE];
	uint8_t *tab = NULL;
	uint64_t *filled = NULL;
	if (!w) {
		fail(s, "out of memory");
		return NULL;
	}
	if (!s->len) {
		char head[8];
		if (s->fd >= 0 && pread(s->fd, head, sizeof(head), 0) > 0) /* (a /proc file says
									      * 0 bytes, but reads) */
			fail(s, "not a heaptrail workload (bad magic); workloads come from heaptrail "
				"convert");
		else
			fail(s, "empty file, not a workload");
		goto bad;
	}
	memset(h, 0, sizeof(h));
	if (read_at(s, h, 0, s->len < sizeof(h) ? s->len : sizeof(h)))
		goto bad;
	if (memcmp(h, HT_WL_MAGIC, 8)) {
		if (!memcmp(h, "HEAPTRL", 8))
			fail(s, "this is a trace, not a workload; convert it first: heaptrail convert OUT.wl %s",
			     s->name);
		else
			fail(s, "not a heaptrail workload (bad magic); workloads come from heaptrail convert");
		goto bad;
	}
	if (s->len < sizeof(h)) {
		fail(s, "truncated: %llu bytes, the header alone takes %d", (unsigned long long)s->len,
		     HT_WL_HEADER_SIZE);
		goto bad;
	}
	uint32_t version = get32(h + 8);
	if (version != HT_WL_VERSION) {
		fail(s, "workload format version %u; this heaptrail reads version %d%s", version,
		     HT_WL_VERSION, version > HT_WL_VERSION ? " (convert the trace again with this heaptrail, or use a newer one)" : "");
		goto bad;
	}
	if (get32(h + 12) != HT_WL_HEADER_SIZE) {
		fail(s, "bad header size %u", get32(h + 12));
		goto bad;
	}
	w->flags = get64(h + 16);
	w->nthreads = get32(h + 24);
	w->nslots = get64(h + 32);
	w->nops = get64(h + 40);
	w->ideal_peak_bytes = get64(h + 48);
	uint64_t sec[HT_WL_SEC_NR][2];
	for (int i = 0; i < HT_WL_SEC_NR; i++) {
		sec[i][0] = get64(h + 64 + 16 * i);
		sec[i][1] = get64(h + 72 + 16 * i);
		if (sec[i][0] > s->len || sec[i][1] > s->len - sec[i][0]) {
			fail(s, "truncated or corrupt: section %d (%llu bytes at %llu) runs past the end "
				"(%llu bytes)", i, (unsigned long long)sec[i][1],
			     (unsigned long long)sec[i][0], (unsigned long long)s->len);
			goto bad;
		}
	}
	if (w->flags & ~(uint64_t)HT_WL_F_MMAP) {
		fail(s, "unknown flags 0x%llx", (unsigned long long)w->flags);
		goto bad;
	}
	if (!w->nthreads || sec[HT_WL_SEC_THREADS][1] != (uint64_t)w->nthreads * THREAD_ENT) {
		fail(s, "corrupt thread table (%u threads, %llu bytes)", w->nthreads,
		     (unsigned long long)sec[HT_WL_SEC_THREADS][1]);
		goto bad;
	}
	if (sec[HT_WL_SEC_CALLS][1] != 8 * HT_FN_NR) {
		fail(s, "corrupt call table (%llu bytes)", (unsigned long long)sec[HT_WL_SEC_CALLS][1]);
		goto bad;
	}
	if (w->nslots > (1ull << 36)) {
		fail(s, "corrupt: %llu slots", (unsigned long long)w->nslots);
		goto bad;
	}
	uint8_t calls[8 * HT_FN_NR];
	if (read_at(s, calls, sec[HT_WL_SEC_CALLS][0], sizeof(calls)))
		goto bad;
	for (int i = 0; i < HT_FN_NR; i++)
		w->calls[i] = get64(calls + 8 * i);
	w->source = calloc(1, sec[HT_WL_SEC_SOURCE][1] + 1);
	w->threads = calloc(w->nthreads, sizeof(*w->threads));
	tab = malloc(sec[HT_WL_SEC_THREADS][1]);
	filled = calloc(w->nthreads, sizeof(*filled));
	if (!w->source || !w->threads || !tab || !filled) {
		fail(s, "out of memory for %u threads", w->nthreads);
		goto bad;
	}
	if (read_at(s, w->source, sec[HT_WL_SEC_SOURCE][0], sec[HT_WL_SEC_SOURCE][1]) ||
	    read_at(s, tab, sec[HT_WL_SEC_THREADS][0], sec[HT_WL_SEC_THREADS][1]))
		goto bad;
	uint64_t total = 0, nops = 0;
	for (uint32_t i = 0; i < w->nthreads; i++) {
		struct ht_wl_thread *t = &w->threads[i];
		t->tid = get32(tab + THREAD_ENT * i);
		t->creator = get32(tab + THREAD_ENT * i + 4);
		t->nops = get64(tab + THREAD_ENT * i + 8);
		t->nbytes = get64(tab + THREAD_ENT * i + 16);
		if (t->nbytes > sec[HT_WL_SEC_OPS][1] || t->nops > t->nbytes ||
		    (i && t->creator >= w->nthreads)) {
			fail(s, "corrupt thread table entry %u", i);
			goto bad;
		}
		total += t->nbytes;
		nops += t->nops;
	}
	if (total > sec[HT_WL_SEC_OPS][1] || nops != w->nops) {
		fail(s, "corrupt: the thread table holds %llu ops in %llu bytes, the header %llu ops "
			"and the op section %llu bytes", (unsigned long long)nops,
		     (unsigned long long)total, (unsigned long long)w->nops,
		     (unsigned long long)sec[HT_WL_SEC_OPS][1]);
		goto bad;
	}
	/* each slot is filled by an op, give or take the groups of 8 new
	 * slots convert hands each thread: this bounds what the check
	 * allocates */
	if (w->nslots > nops + 8 * (uint64_t)w->nthreads) {
		fail(s, "corrupt: %llu slots for %llu ops", (unsigned long long)w->nslots,
		     (unsigned long long)nops);
		goto bad;
	}
	w->map_len = total ? total : 1;
	w->map = mmap(NULL, w->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (w->map == MAP_FAILED) {
		w->map = NULL;
		fail(s, "cannot map %llu bytes for the ops: %s", (unsigned long long)total, strerror(errno));
		goto bad;
	}
	uint8_t *base = w->map;
	for (uint32_t i = 0; i < w->nthreads; i++) {
		w->threads[i].ops = base;
		base += w->threads[i].nbytes;
	}
	/* the blocks, into each thread's stream in order */
	uint64_t off = sec[HT_WL_SEC_OPS][0], end = off + sec[HT_WL_SEC_OPS][1];
	while (off < end) {
		uint8_t b[BLOCK_HDR];
		if (end - off < BLOCK_HDR) {
			fail(s, "corrupt op block at offset %llu: truncated header", (unsigned long long)off);
			goto bad;
		}
		if (read_at(s, b, off, BLOCK_HDR))
			goto bad;
		uint32_t ti = get32(b), nb = get32(b + 8);
		if (ti >= w->nthreads || nb > end - off - BLOCK_HDR ||
		    nb > w->threads[ti].nbytes - filled[ti]) {
			fail(s, "corrupt op block at offset %llu (thread %u, %u bytes)",
			     (unsigned long long)off, ti, nb);
			goto bad;
		}
		if (read_at(s, (uint8_t *)w->threads[ti].ops + filled[ti], off + BLOCK_HDR, nb))
			goto bad;
		filled[ti] += nb;
		off += BLOCK_HDR + nb;
	}
	for (uint32_t i = 0; i < w->nthreads; i++) {
		if (filled[i] != w->threads[i].nbytes) {
			fail(s, "truncated or corrupt: thread %u has %llu of its %llu op bytes", i,
			     (unsigned long long)filled[i], (unsigned long long)w->threads[i].nbytes);
			goto bad;
		}
	}
	if (simulate(s, w))
		goto bad;
	mprotect(w->map, w->map_len, PROT_READ);
	free(tab);
	free(filled);
	return w;
bad:
	free(tab);
	free(filled);
	ht_workload__free(w);
	return NULL;
}

struct ht_workload *ht_workload__load(const char *path, char *err, size_t errlen)
{
	err[0] = 0;
	struct src s = {.fd = -1, .name = path, .err = err, .errlen = errlen};
	s.fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
	if (s.fd < 0) {
		ht_open_error(err, errlen, path, errno, "workload");
		return NULL;
	}
	struct stat st;
	if (fstat(s.fd, &st) || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: %s", path,
			 S_ISDIR(st.st_mode) ? "is a directory, not a workload" : "not a regular file");
		close(s.fd);
		return NULL;
	}
	s.len = (uint64_t)st.st_size;
	struct ht_workload *w = load(&s);
	close(s.fd);
	return w;
}

struct ht_workload *ht_workload__load_mem(const uint8_t *data, size_t len, const char *name,
					  char *err, size_t errlen)
{
	err[0] = 0;
	struct src s = {.fd = -1, .mem = data, .len = len, .name = name, .err = err, .errlen = errlen};
	return load(&s);
}

void ht_workload__free(struct ht_workload *w)
{
	if (!w)
		return;
	if (w->map)
		munmap(w->map, w->map_len);
	free(w->threads);
	free(w->source);
	free(w);
}
