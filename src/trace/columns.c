/* Column coding of event records (columns.h, docs/FORMAT.md "Column
 * coding").
 *
 * The recorder writes each record as kind byte, length tag and fields, with
 * pointers as deltas from the thread's previous pointer: cheap to write,
 * but a mix zstd compresses poorly.  Here every field goes to the column of
 * its type, and every pointer becomes a code that is 0 whenever a small
 * model of the allocator guesses it:
 *   - a block an allocation returns is guessed to be the block of the same
 *     usable size freed last (what tcache, fastbins and a top chunk that
 *     keeps its start all do), from one LIFO of freed addresses per usable
 *     size;
 *   - any other pointer (free, realloc's input, munmap, ...) is guessed to
 *     be one of the HT_COL_MRU blocks allocated last.
 * A miss stores the recorder's own delta.  Encoder and decoder update the
 * model from the same decoded values in the same order, so the decoder
 * makes the same guesses and gives back the recorder's bytes exactly.  The
 * model lives for one chunk: a chunk decodes on its own. */
#include "columns.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "reader.h"
#include "record.h"

/* ---- columns --------------------------------------------------------------- */

struct wcol {
	uint8_t *p; /* bytes */
	size_t len; /* used */
	size_t cap; /* allocated */
};

static int wcol_reserve(struct wcol *c, size_t more)
{
	if (c->len + more <= c->cap)
		return 0;
	size_t cap = c->cap ? c->cap : 4096;
	while (cap < c->len + more)
		cap *= 2;
	uint8_t *p = realloc(c->p, cap);
	if (!p)
		return -1;
	c->p = p;
	c->cap = cap;
	return 0;
}

static int wcol_u64(struct wcol *c, uint64_t v)
{
	if (wcol_reserve(c, 10) < 0)
		return -1;
	c->len = (size_t)(ht_leb128_put(c->p + c->len, v) - c->p);
	return 0;
}

static int wcol_bytes(struct wcol *c, const void *p, size_t n)
{
	if (wcol_reserve(c, n + 1) < 0)
		return -1;
	if (n)
		memcpy(c->p + c->len, p, n);
	c->len += n;
	return 0;
}

struct rcol {
	const uint8_t *p;   /* next byte */
	const uint8_t *end; /* end of the column */
};

static int rcol_u64_long(struct rcol *c, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (c->p >= c->end)
			return -1;
		uint8_t b = *c->p++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1; /* more than 10 bytes */
}

static inline int rcol_u64(struct rcol *c, uint64_t *v)
{
	if (__builtin_expect(c->p < c->end && *c->p < 0x80, 1)) {
		*v = *c->p++;
		return 0;
	}
	return rcol_u64_long(c, v);
}

/* ---- the model --------------------------------------------------------------- */

struct live_slot {
	uint64_t addr;	 /* block address, 0 = empty slot */
	uint64_t usable; /* its usable size */
};

struct lifo_head {
	uint64_t usable; /* the size class */
	uint64_t addr;	 /* the newest freed block (kept here: a pop or push of a
			  * stack of one needs no node), 0 = empty stack */
	uint32_t top;	 /* node + 1 of the block freed before addr, 0 = none */
	uint32_t used;	 /* slot holds a size class */
};

struct lifo_node {
	uint64_t addr; /* a freed block */
	uint32_t next; /* older node + 1, 0 = none */
};

struct model {
	uint32_t version;	   /* of the trace: how 'U' reads */
	uint64_t last_ptr;	   /* base of the records' 'p' deltas */
	uint64_t mru[HT_COL_MRU];  /* blocks allocated last, newest first */
	struct live_slot *live;	   /* live blocks: open addressing */
	struct live_slot last;	   /* the newest live block, kept out of live (the set
				    * is live + it): mostly freed next; addr 0 none */
	unsigned live_lg;	   /* log2 of its capacity */
	size_t live_n;		   /* slots used */
	struct lifo_head *heads;   /* freed blocks by usable size */
	unsigned heads_lg;	   /* log2 of its capacity */
	size_t heads_n;		   /* slots used */
	struct lifo_node *nodes;   /* the stacks' nodes */
	size_t nodes_n, nodes_cap; /* used / allocated */
	uint32_t spare;		   /* popped nodes for reuse: first + 1, linked by next; 0 none */
	struct lifo_head *head;	   /* the head head_find found last (a malloc's size
				    * class, freed next), NULL none; in heads */
	int oom;		   /* an allocation failed */
};

/* The model's steps on the path of every record: inlined into the decoder. */
#define HOT static inline __attribute__((always_inline))

static size_t hash(uint64_t x, unsigned lg)
{
	return (size_t)((x * 0x9E3779B97F4A7C15ull) >> (64 - lg));
}

/* log2 of the tables' first capacity: small, so that a chunk with few
 * live blocks and sizes keeps them in the first level of cache. */
#define MODEL_LG0 6

static int model_init(struct model *m, uint32_t version)
{
	memset(m, 0, sizeof(*m));
	m->version = version;
	m->live_lg = m->heads_lg = MODEL_LG0;
	m->live = calloc((size_t)1 << m->live_lg, sizeof(*m->live));
	m->heads = calloc((size_t)1 << m->heads_lg, sizeof(*m->heads));
	return m->live && m->heads ? 0 : -1;
}

static void model_free(struct model *m)
{
	free(m->live);
	free(m->heads);
	free(m->nodes);
}

HOT size_t live_find(const struct model *m, uint64_t addr)
{
	size_t mask = ((size_t)1 << m->live_lg) - 1;
	for (size_t i = hash(addr, m->live_lg);; i = (i + 1) & mask) {
		if (m->live[i].addr == addr)
			return i;
		if (!m->live[i].addr)
			return (size_t)-1;
	}
}

static void live_insert(struct live_slot *t, unsigned lg, uint64_t addr, uint64_t usable)
{
	size_t mask = ((size_t)1 << lg) - 1;
	size_t i = hash(addr, lg);
	while (t[i].addr && t[i].addr != addr)
		i = (i + 1) & mask;
	t[i].addr = addr;
	t[i].usable = usable;
}

static void live_insert_grow(struct model *m, uint64_t addr, uint64_t usable);

/* addr (not 0) is live with usable bytes: it becomes the last block
 * unless the table holds it (then its entry is updated). */
HOT void live_put(struct model *m, uint64_t addr, uint64_t usable)
{
	if (addr == m->last.addr) {
		m->last.usable = usable;
		return;
	}
	if (m->live_n) {
		size_t i = live_find(m, addr);
		if (i != (size_t)-1) {
			m->live[i].usable = usable;
			return;
		}
	}
	if (m->last.addr)
		live_insert_grow(m, m->last.addr, m->last.usable);
	m->last.addr = addr;
	m->last.usable = usable;
}

/* Puts addr (not 0) into the table, growing it if need be. */
static void live_insert_grow(struct model *m, uint64_t addr, uint64_t usable)
{
	if ((m->live_n + 1) * 2 > ((size_t)1 << m->live_lg)) {
		unsigned lg = m->live_lg + 1;
		struct live_slot *t = calloc((size_t)1 << lg, sizeof(*t));
		if (!t) {
			m->oom = 1;
			return;
		}
		for (size_t i = 0; i < ((size_t)1 << m->live_lg); i++)
			if (m->live[i].addr)
				live_insert(t, lg, m->live[i].addr, m->live[i].usable);
		free(m->live);
		m->live = t;
		m->live_lg = lg;
	}
	size_t mask = ((size_t)1 << m->live_lg) - 1;
	size_t i = hash(addr, m->live_lg);
	while (m->live[i].addr && m->live[i].addr != addr)
		i = (i + 1) & mask;
	m->live_n += !m->live[i].addr;
	m->live[i].addr = addr;
	m->live[i].usable = usable;
}

/* Linear probing: deleting shifts the later members of the cluster back. */
static void live_del(struct model *m, size_t i)
{
	size_t mask = ((size_t)1 << m->live_lg) - 1;
	m->live[i].addr = 0;
	m->live_n--;
	for (size_t j = (i + 1) & mask; m->live[j].addr; j = (j + 1) & mask) {
		size_t home = hash(m->live[j].addr, m->live_lg);
		/* Move j to the hole if its home is not in (i, j]. */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->live[i] = m->live[j];
			m->live[j].addr = 0;
			i = j;
		}
	}
}

/* The head head_find found last, if it is usable's. */
HOT struct lifo_head *head_cached(const struct model *m, uint64_t usable)
{
	return m->head && m->head->usable == usable ? m->head : NULL;
}

HOT struct lifo_head *head_find(struct model *m, uint64_t usable)
{
	struct lifo_head *c = head_cached(m, usable);
	if (c)
		return c;
	size_t mask = ((size_t)1 << m->heads_lg) - 1;
	for (size_t i = hash(usable, m->heads_lg);; i = (i + 1) & mask) {
		if (!m->heads[i].used)
			return NULL;
		if (m->heads[i].usable == usable)
			return m->head = &m->heads[i];
	}
}

static __attribute__((noinline)) struct lifo_head *head_get(struct model *m, uint64_t usable)
{
	struct lifo_head *h = head_find(m, usable);
	if (h)
		return h;
	if ((m->heads_n + 1) * 2 > ((size_t)1 << m->heads_lg)) {
		unsigned lg = m->heads_lg + 1;
		struct lifo_head *t = calloc((size_t)1 << lg, sizeof(*t));
		if (!t) {
			m->oom = 1;
			return NULL;
		}
		for (size_t i = 0; i < ((size_t)1 << m->heads_lg); i++) {
			if (!m->heads[i].used)
				continue;
			size_t k = hash(m->heads[i].usable, lg);
			while (t[k].used)
				k = (k + 1) & (((size_t)1 << lg) - 1);
			t[k] = m->heads[i];
		}
		free(m->heads);
		m->heads = t;
		m->heads_lg = lg;
		m->head = NULL;
	}
	size_t mask = ((size_t)1 << m->heads_lg) - 1;
	size_t i = hash(usable, m->heads_lg);
	while (m->heads[i].used)
		i = (i + 1) & mask;
	m->heads[i].used = 1;
	m->heads[i].usable = usable;
	m->heads[i].addr = 0;
	m->heads[i].top = 0;
	m->heads_n++;
	return &m->heads[i];
}

/* Pops h's newest block (there is one): the node under it moves up into
 * the head, and nothing points at that node any more: it is kept for the
 * next push, so that the nodes stay as many as the freed blocks below the
 * heads. */
HOT void lifo_pop(struct model *m, struct lifo_head *h)
{
	if (!h->top) {
		h->addr = 0;
		return;
	}
	uint32_t i = h->top - 1;
	h->addr = m->nodes[i].addr;
	h->top = m->nodes[i].next;
	m->nodes[i].next = m->spare;
	m->spare = i + 1;
}

/* Takes the top of usable's LIFO: its address, 0 if it is empty. */
HOT uint64_t lifo_take(struct model *m, uint64_t usable)
{
	struct lifo_head *h = head_find(m, usable);
	if (!h || !h->addr)
		return 0;
	uint64_t a = h->addr;
	lifo_pop(m, h);
	return a;
}

/* Takes the top of usable's LIFO if it is addr (not 0): 1, else 0. */
static int lifo_take_if(struct model *m, uint64_t usable, uint64_t addr)
{
	struct lifo_head *h = addr ? head_find(m, usable) : NULL;
	if (!h || h->addr != addr)
		return 0;
	lifo_pop(m, h);
	return 1;
}

/* Pushes addr (not 0) on usable's LIFO: the head's block, if any, goes
 * down into a node. */
HOT void lifo_push(struct model *m, uint64_t usable, uint64_t addr)
{
	struct lifo_head *h = head_cached(m, usable);
	if (!h)
		h = head_get(m, usable);
	if (!h)
		return;
	if (!h->addr) {
		h->addr = addr;
		return;
	}
	uint32_t i;
	if (m->spare) {
		i = m->spare - 1;
		m->spare = m->nodes[i].next;
	} else {
		if (m->nodes_n == m->nodes_cap) {
			size_t cap = m->nodes_cap ? m->nodes_cap * 2 : 1024;
			struct lifo_node *n =
				cap < UINT32_MAX ? realloc(m->nodes, cap * sizeof(*n)) : NULL;
			if (!n) {
				m->oom = 1;
				return;
			}
			m->nodes = n;
			m->nodes_cap = cap;
		}
		i = (uint32_t)m->nodes_n++;
	}
	m->nodes[i].addr = h->addr;
	m->nodes[i].next = h->top;
	h->top = i + 1;
	h->addr = addr;
}

/* Requested bytes of an allocation record, from its raw fields (the size
 * fields are 'u', stored as they are): ht_event__size on the record. */
static uint64_t rec_size(unsigned kind, const uint64_t *f)
{
	switch (kind) {
	case HT_EV_MALLOC:
	case HT_EV_VALLOC:
	case HT_EV_PVALLOC:
		return f[0];
	case HT_EV_CALLOC:
		return f[0] * f[1];
	case HT_EV_REALLOC:
	case HT_EV_MEMALIGN:
	case HT_EV_POSIX_MEMALIGN:
	case HT_EV_ALIGNED_ALLOC:
		return f[1];
	case HT_EV_REALLOCARRAY:
		return f[1] * f[2];
	default:
		return 0;
	}
}

/* The usable size of the block an allocation record returns: the key of
 * the LIFOs.  Reads no 'p' field. */
static uint64_t alloc_usable(const struct model *m, const struct ht_rec *rec)
{
	const struct ht_kind_desc *d = &ht_kind_descs[rec->kind];
	uint64_t slack = 0;
	for (unsigned i = 0; i < rec->nf; i++)
		if (d->fields[i] == 'U')
			slack = rec->f[i];
	return ht_usable_of(m->version, rec->kb & ~HT_KIND_MASK, rec_size(rec->kind, rec->f), slack);
}

/* Pointer codes: a result is 0 when it is the top of its LIFO, else the
 * recorder's delta + 1; any other pointer is j < HT_COL_MRU when it is
 * mru[j], else the delta + HT_COL_MRU. */
static int ptr_encode(struct model *m, int is_result, uint64_t usable, uint64_t v, uint64_t *code)
{
	uint64_t delta = ht_zigzag((int64_t)(v - m->last_ptr));
	if (is_result) {
		if (lifo_take_if(m, usable, v)) {
			*code = 0;
		} else if (delta > UINT64_MAX - 1) {
			return -1;
		} else {
			*code = delta + 1;
		}
	} else {
		unsigned j = 0;
		while (j < HT_COL_MRU && !(v && m->mru[j] == v))
			j++;
		if (j < HT_COL_MRU)
			*code = j;
		else if (delta > UINT64_MAX - HT_COL_MRU)
			return -1;
		else
			*code = delta + HT_COL_MRU;
	}
	return 0;
}

HOT int ptr_decode(struct model *m, int is_result, uint64_t usable, uint64_t code, uint64_t *v)
{
	if (is_result) {
		if (code == 0) {
			*v = lifo_take(m, usable);
			if (!*v)
				return -1;
		} else {
			*v = m->last_ptr + (uint64_t)ht_unzigzag(code - 1);
		}
	} else if (code < HT_COL_MRU) {
		*v = m->mru[code];
		if (!*v)
			return -1;
	} else {
		*v = m->last_ptr + (uint64_t)ht_unzigzag(code - HT_COL_MRU);
	}
	return 0;
}

/* After a pointer field's value is known, on both sides. */
HOT void ptr_seen(struct model *m, int is_result, uint64_t usable, uint64_t v)
{
	m->last_ptr = v;
	if (!is_result || !v)
		return;
	live_put(m, v, usable);
	if (m->mru[0] != v) {
		for (unsigned j = HT_COL_MRU - 1; j > 0; j--)
			m->mru[j] = m->mru[j - 1];
		m->mru[0] = v;
	}
}

HOT void release(struct model *m, uint64_t addr)
{
	if (addr && addr == m->last.addr) {
		m->last.addr = 0;
		lifo_push(m, m->last.usable, addr);
		return;
	}
	size_t i = addr && m->live_n ? live_find(m, addr) : (size_t)-1;
	if (i == (size_t)-1)
		return;
	uint64_t usable = m->live[i].usable;
	live_del(m, i);
	lifo_push(m, usable, addr);
}

/* After a whole record, on both sides; vals are its field values with the
 * pointers decoded. */
static void record_seen(struct model *m, const struct ht_rec *rec, const uint64_t *vals)
{
	if (rec->kind == HT_EV_SYNC) {
		m->last_ptr = 0;
	} else if (rec->kind == HT_EV_FREE) {
		release(m, vals[0]);
	} else if (rec->kind == HT_EV_REALLOC || rec->kind == HT_EV_REALLOCARRAY) {
		struct ht_event e; /* what ht_event__frees_old reads: kind, nv, v */
		e.kind = rec->kind;
		e.nv = rec->nf;
		memcpy(e.v, vals, rec->nf * sizeof(vals[0]));
		if (ht_event__frees_old(&e) && ht_event__result_ptr(&e) != vals[0])
			release(m, vals[0]);
	}
}

/* Column of a field code (not 'p', which has its own pass). */
static enum ht_col column_of(char code)
{
	switch (code) {
	case 'u':
		return HT_COL_UINT;
	case 'U':
		return HT_COL_SLACK;
	case 'p':
		return HT_COL_PTR;
	default:
		return HT_COL_OTHER; /* 's', 'd', 'S' (its length) */
	}
}

/* ---- encoding ------------------------------------------------------------------ */

size_t ht_columns__encode(const uint8_t *recs, size_t n, uint32_t version, uint8_t **out)
{
	struct wcol col[HT_COL_NR];
	struct model m;
	size_t ret = 0;
	uint32_t nrec = 0;
	memset(col, 0, sizeof(col));
	memset(&m, 0, sizeof(m));
	*out = NULL;
	if (n > HT_MAX_CHUNK_RAW || model_init(&m, version) < 0)
		goto cleanup;
	for (const uint8_t *p = recs, *end = recs + n; p < end; nrec++) {
		struct ht_rec rec;
		const char *why;
		size_t used = ht_rec__parse(&rec, p, end, version, &why);
		if (!used)
			goto cleanup;
		p += used;
		const struct ht_kind_desc *d = &ht_kind_descs[rec.kind];
		uint64_t vals[HT_MAX_FIELDS + 1];
		int err = wcol_bytes(&col[HT_COL_KIND], &rec.kb, 1);
		if (rec.kind >= 32) {
			uint8_t ext = (uint8_t)(rec.kind - 32);
			err |= wcol_bytes(&col[HT_COL_KIND], &ext, 1);
		}
		for (unsigned i = 0; i < rec.nf; i++) {
			vals[i] = rec.f[i];
			if (d->fields[i] == 'p')
				continue;
			err |= wcol_u64(&col[column_of(d->fields[i])], rec.f[i]);
			if (d->fields[i] == 'S')
				err |= wcol_bytes(&col[HT_COL_STR], rec.str, (size_t)rec.f[i]);
		}
		err |= wcol_u64(&col[HT_COL_TIME], rec.f[rec.nf]);
		if (rec.has_stack)
			err |= wcol_u64(&col[HT_COL_OTHER], rec.f[rec.nf + 1]);
		uint64_t usable = d->is_alloc ? alloc_usable(&m, &rec) : 0;
		for (unsigned i = 0; i < rec.nf; i++) {
			if (d->fields[i] != 'p')
				continue;
			int res = d->is_alloc && (int)i == d->result;
			uint64_t v = m.last_ptr + (uint64_t)ht_unzigzag(rec.f[i]), code;
			if (ptr_encode(&m, res, usable, v, &code) < 0)
				goto cleanup;
			err |= wcol_u64(&col[HT_COL_PTR], code);
			ptr_seen(&m, res, usable, v);
			vals[i] = v;
		}
		record_seen(&m, &rec, vals);
		if (err || m.oom)
			goto cleanup;
	}
	struct ht_col_header h = {.magic = HT_COL_MAGIC, .rec_bytes = (uint32_t)n, .nrec = nrec};
	size_t total = sizeof(h);
	for (int c = 0; c < HT_COL_NR; c++) {
		h.len[c] = (uint32_t)col[c].len;
		total += col[c].len;
	}
	uint8_t *buf = malloc(total);
	if (!buf)
		goto cleanup;
	memcpy(buf, &h, sizeof(h));
	size_t at = sizeof(h);
	for (int c = 0; c < HT_COL_NR; c++) {
		if (col[c].len)
			memcpy(buf + at, col[c].p, col[c].len);
		at += col[c].len;
	}
	*out = buf;
	ret = total;
cleanup:
	for (int c = 0; c < HT_COL_NR; c++)
		free(col[c].p);
	model_free(&m);
	return ret;
}

/* ---- decoding ------------------------------------------------------------------ */

size_t ht_columns__rec_bytes(const uint8_t *in, size_t n)
{
	struct ht_col_header h;
	if (n < sizeof(h))
		return 0;
	memcpy(&h, in, sizeof(h));
	if (h.magic != HT_COL_MAGIC || h.rec_bytes > HT_MAX_CHUNK_RAW)
		return 0;
	return h.rec_bytes;
}

/* A column payload being decoded, one record at a time. */
struct ht_coldec {
	struct rcol col[HT_COL_NR]; /* cursors in the columns */
	struct model m;             /* the allocator model of this payload */
	uint32_t left;              /* records still to decode */
	uint32_t rec_bytes;         /* record bytes the header announces */
	size_t at;                  /* record bytes decoded so far */
	int ready;                  /* m holds tables (reset, not freed, between payloads) */
};

static void detect_lzcnt(void)
{
#if defined(__x86_64__)
	unsigned eax, ebx, ecx = 0, edx;
	/* CPUID 0x80000001: ECX bit 5 is LZCNT (ABM) */
	ht_lzcnt = __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 5));
#endif
}

struct ht_coldec *ht_coldec__new(void)
{
	/* once: the reader's decoding threads make decoders at the same time */
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, detect_lzcnt);
	return calloc(1, sizeof(struct ht_coldec));
}

void ht_coldec__free(struct ht_coldec *d)
{
	if (!d)
		return;
	if (d->ready)
		model_free(&d->m);
	free(d);
}

/* The model as model_init leaves it: the tables are cleared when they
 * are still at their first size, else made anew (clearing a table a
 * large live set grew, for every chunk after it, would cost more than
 * growing it again when a chunk needs it). */
static int model_reset(struct model *m, uint32_t version, int ready)
{
	if (!ready || m->oom || m->live_lg > 10 || m->heads_lg > 10) {
		if (ready)
			model_free(m);
		return model_init(m, version);
	}
	m->version = version;
	m->last_ptr = 0;
	memset(m->mru, 0, sizeof(m->mru));
	memset(m->live, 0, ((size_t)1 << m->live_lg) * sizeof(*m->live));
	m->live_n = 0;
	m->last.addr = 0;
	m->head = NULL;
	memset(m->heads, 0, ((size_t)1 << m->heads_lg) * sizeof(*m->heads));
	m->heads_n = 0;
	m->nodes_n = 0;
	m->spare = 0;
	return 0;
}

int ht_coldec__start(struct ht_coldec *d, const uint8_t *in, size_t n, uint32_t version,
		     const char **why)
{
	struct ht_col_header h;
	*why = "column header out of range";
	d->left = 0;
	int ok = model_reset(&d->m, version, d->ready) == 0;
	d->ready = d->m.live && d->m.heads;
	if (!ok) {
		*why = "out of memory";
		return -1;
	}
	if (!ht_columns__rec_bytes(in, n))
		return -1;
	memcpy(&h, in, sizeof(h));
	size_t off = sizeof(h);
	for (int c = 0; c < HT_COL_NR; c++) {
		if (h.len[c] > n - off)
			return -1;
		d->col[c].p = in + off;
		d->col[c].end = in + off + h.len[c];
		off += h.len[c];
	}
	if (off != n || h.nrec > h.rec_bytes)
		return -1;
	d->left = h.nrec;
	d->rec_bytes = h.rec_bytes;
	d->at = 0;
	return 0;
}

/* Bytes of v in a record (ht_rec__encode's length). */
static unsigned field_bytes(uint64_t v)
{
	return v ? (unsigned)(71 - __builtin_clzll(v)) >> 3 : 0;
}

int ht_coldec__next(struct ht_coldec *d, struct ht_rec *rec, const char **why)
{
	struct rcol *col = d->col;
	*why = "column data does not decode";
	if (!d->left) {
		/* tables a large live set grew are not kept past their payload */
		if (d->ready && (d->m.live_lg > 10 || d->m.heads_lg > 10 || d->m.nodes_cap > 1024)) {
			model_free(&d->m);
			memset(&d->m, 0, sizeof(d->m));
			d->ready = 0;
		}
		for (int c = 0; c < HT_COL_NR; c++)
			if (col[c].p != col[c].end)
				return -1;
		return d->at == d->rec_bytes ? 0 : -1;
	}
	d->left--;
	struct model *m = &d->m;
	uint64_t vals[HT_MAX_FIELDS + 1];
	struct rcol *kc = &col[HT_COL_KIND];
	if (kc->p >= kc->end)
		return -1;
	rec->kb = *kc->p++;
	unsigned kind = rec->kb & HT_KIND_MASK;
	size_t len = 1;
	if (kind == HT_EV_EXT) {
		if (kc->p >= kc->end)
			return -1;
		kind = 32u + *kc->p++;
		len++;
	}
	if (kind >= HT_EV_NR)
		return -1;
	rec->kind = (uint8_t)kind;
	rec->has_stack = (rec->kb & HT_F_STACK) != 0;
	rec->str = NULL;
	if (kind == HT_EV_MALLOC && !rec->has_stack) {
		/* the common records, field by field: size(u) ptr(p) usable(U), ts */
		uint64_t code, v, *f = rec->f;
		rec->nf = 3;
		if (rcol_u64(&col[HT_COL_UINT], &f[0]) < 0 || rcol_u64(&col[HT_COL_SLACK], &f[2]) < 0 ||
		    rcol_u64(&col[HT_COL_TIME], &f[3]) < 0 || rcol_u64(&col[HT_COL_PTR], &code) < 0)
			return -1;
		uint64_t usable = ht_usable_of(m->version, rec->kb & ~HT_KIND_MASK, f[0], f[2]);
		if (ptr_decode(m, 1, usable, code, &v) < 0)
			return -1;
		f[1] = ht_zigzag((int64_t)(v - m->last_ptr));
		ptr_seen(m, 1, usable, v);
		if (m->version >= HT_VERSION_SHORT &&
		    ht_short_malloc_ok(rec->kb & ~HT_KIND_MASK, field_bytes(f[0]),
				       field_bytes(f[1]), f[2], f[3]))
			len += field_bytes(f[0]) + field_bytes(f[1]); /* a short record */
		else
			len += 2 + field_bytes(f[0]) + field_bytes(f[1]) + field_bytes(f[2]) +
			       field_bytes(f[3]);
		goto done;
	}
	if (kind == HT_EV_FREE && !rec->has_stack) {
		uint64_t code, v, *f = rec->f;
		rec->nf = 1;
		if (rcol_u64(&col[HT_COL_TIME], &f[1]) < 0 || rcol_u64(&col[HT_COL_PTR], &code) < 0 ||
		    ptr_decode(m, 0, 0, code, &v) < 0)
			return -1;
		f[0] = ht_zigzag((int64_t)(v - m->last_ptr));
		m->last_ptr = v;
		release(m, v);
		if (m->version >= HT_VERSION_SHORT &&
		    ht_short_free_ok(rec->kb & ~HT_KIND_MASK, field_bytes(f[0]), f[1]))
			len += field_bytes(f[0]); /* a short record */
		else
			len += 1 + field_bytes(f[0]) + field_bytes(f[1]);
		goto done;
	}
	const struct ht_kind_desc *kd = &ht_kind_descs[kind];
	unsigned nf = ht_kind_nf(kind);
	rec->nf = (uint8_t)nf;
	rec->str = NULL;
	unsigned nptr = 0;
	for (unsigned i = 0; i < nf; i++) {
		char code = kd->fields[i];
		rec->f[i] = 0;
		if (code == 'p') {
			nptr++;
			continue;
		}
		if (rcol_u64(&col[column_of(code)], &rec->f[i]) < 0)
			return -1;
		vals[i] = rec->f[i];
		len += field_bytes(rec->f[i]);
		if (code == 'S') {
			struct rcol *s = &col[HT_COL_STR];
			if (rec->f[i] > HT_MAX_STR || (uint64_t)(s->end - s->p) < rec->f[i])
				return -1;
			rec->str = s->p;
			s->p += rec->f[i];
			len += (size_t)rec->f[i];
		}
	}
	if (rcol_u64(&col[HT_COL_TIME], &rec->f[nf]) < 0)
		return -1;
	len += field_bytes(rec->f[nf]);
	if (rec->has_stack) {
		if (rcol_u64(&col[HT_COL_OTHER], &rec->f[nf + 1]) < 0)
			return -1;
		len += field_bytes(rec->f[nf + 1]);
	}
	len += ht_tag_bytes(nf + rec->has_stack);
	if (nptr) {
		uint64_t usable = kd->is_alloc ? alloc_usable(m, rec) : 0;
		for (unsigned i = 0; i < nf; i++) {
			if (kd->fields[i] != 'p')
				continue;
			int res = kd->is_alloc && (int)i == kd->result;
			uint64_t code, v;
			if (rcol_u64(&col[HT_COL_PTR], &code) < 0 ||
			    ptr_decode(m, res, usable, code, &v) < 0)
				return -1;
			rec->f[i] = ht_zigzag((int64_t)(v - m->last_ptr));
			len += field_bytes(rec->f[i]);
			ptr_seen(m, res, usable, v);
			vals[i] = v;
		}
	}
	record_seen(m, rec, vals);
done:
	if (m->oom) {
		*why = "out of memory";
		return -1;
	}
	if (len > d->rec_bytes - d->at)
		return -1;
	d->at += len;
	return 1;
}

/* A LEB128 value of a column known to hold 10 bytes more at least. */
HOT uint64_t rcol_u64_unchecked(const uint8_t **pp)
{
	const uint8_t *p = *pp;
	uint64_t x = *p++;
	if (__builtin_expect(x >= 0x80, 0)) {
		x &= 0x7f;
		for (unsigned shift = 7;; shift += 7) {
			uint64_t b = *p++;
			x |= (b & 0x7f) << shift;
			if (!(b & 0x80) || shift == 63)
				break;
		}
		if (p[-1] & 0x80)
			x = UINT64_MAX, p = NULL; /* more than 10 bytes: the caller fails */
	}
	*pp = p;
	return x;
}

/* Bytes of v in a record, as field_bytes, with LZCNT when lz says the CPU
 * has it (three instructions, 0 for 0). */
HOT unsigned rec_bytes_of(uint64_t v, int lz)
{
#if defined(__x86_64__)
	if (lz) {
		uint64_t z;
		__asm__("lzcnt %1, %0" : "=r"(z) : "rm"(v) : "cc");
		return (unsigned)(71 - z) >> 3;
	}
#endif
	return field_bytes(v);
}

/* The loop of ht_coldec__events over the records [i, max): malloc, free,
 * calloc and realloc records, each with the model updated as
 * ht_coldec__next updates it (ptr_decode, ptr_seen, record_seen's
 * release, in the same order).  checked = 0 when every column it reads
 * holds 10 bytes more at least for each value a record takes from it, so
 * that no read needs its own bound (a realloc's duration and the stack
 * node ids of OTHER are read checked always); lz: rec_bytes_of's. */
HOT int events_loop(struct ht_coldec *d, struct ht_coldec_thread *t, struct ht_event *ev,
		    unsigned *pi, unsigned max, const int checked, const int lz)
{
	struct model *m = &d->m;
	const uint8_t *kp = d->col[HT_COL_KIND].p, *up = d->col[HT_COL_UINT].p,
		      *pp = d->col[HT_COL_PTR].p, *tp = d->col[HT_COL_TIME].p,
		      *sp = d->col[HT_COL_SLACK].p;
	const int v2 = m->version >= 2, v6 = m->version >= HT_VERSION_SHORT;
	/* the reader's pointers: the model's plus what the two differed by
	 * when the payload started (nothing, after its SYNC record) */
	const uint64_t off = t->last_ptr - m->last_ptr;
	uint64_t last_ts = t->last_ts, seq = t->seq, dur = t->dur;
	size_t at = d->at;
	unsigned i = *pi;
	int ret = 0;
#define RD(c_, ptr, out)                                                                          \
	do {                                                                                       \
		if (checked) {                                                                     \
			d->col[c_].p = ptr;                                                       \
			if (rcol_u64(&d->col[c_], &(out)) < 0)                                    \
				goto bad;                                                          \
			ptr = d->col[c_].p;                                                       \
		} else {                                                                           \
			out = rcol_u64_unchecked(&ptr);                                            \
			if (__builtin_expect(!ptr, 0))                                             \
				goto bad;                                                          \
		}                                                                                  \
	} while (0)
	for (; i < max; i++) {
		if (checked && kp >= d->col[HT_COL_KIND].end)
			break;
		uint8_t kb = *kp;
		unsigned kind = kb & HT_KIND_MASK;
		/* malloc, free, calloc, realloc: 1..4 */
		if (kind - HT_EV_MALLOC > HT_EV_REALLOC - HT_EV_MALLOC)
			break;
		kp++;
		unsigned has_stack = kb >> 7; /* HT_F_STACK */
		struct ht_event *e = &ev[i];
		uint64_t tf, code, v, node = 0, ticks = 0;
		size_t len;
		RD(HT_COL_TIME, tp, tf);
		/* OTHER holds a realloc's duration field, then the stack id */
		if (kind == HT_EV_REALLOC && rcol_u64(&d->col[HT_COL_OTHER], &ticks) < 0)
			goto bad;
		if (has_stack && rcol_u64(&d->col[HT_COL_OTHER], &node) < 0)
			goto bad;
		RD(HT_COL_PTR, pp, code);
		if (kind == HT_EV_MALLOC) {
			uint64_t size, slack;
			RD(HT_COL_UINT, up, size);
			RD(HT_COL_SLACK, sp, slack);
			uint64_t usable = ht_usable_of(m->version, kb & ~HT_KIND_MASK, size, slack);
			if (ptr_decode(m, 1, usable, code, &v) < 0)
				goto bad;
			unsigned cs = rec_bytes_of(size, lz),
				 cp = rec_bytes_of(ht_zigzag((int64_t)(v - m->last_ptr)), lz);
			/* a short record (version 6) has no tag, and no timestamp
			 * or stack to add below (both 0) */
			len = v6 && ht_short_malloc_ok(kb & ~HT_KIND_MASK, cs, cp, slack, tf)
				  ? 1 + cs + cp
				  : 1 + ht_tag_bytes(3 + has_stack) + cs + cp +
					rec_bytes_of(slack, lz);
			ptr_seen(m, 1, usable, v);
			uint64_t p = v + off;
			e->v[0] = size;
			e->v[1] = p;
			e->v[2] = slack;
			e->nv = 3;
			e->usable = p ? usable : 0;
			e->weight = ht_alloc_weight(t->sampled, t->weight, size, p,
						    ht_weight_salt(t->tid, seq), t->sample_bytes);
		} else if (kind == HT_EV_CALLOC) {
			/* what ht_coldec__next's general path does with nmemb(u)
			 * size(u) ptr(p) usable(U) */
			uint64_t nmemb, size, slack;
			RD(HT_COL_UINT, up, nmemb);
			RD(HT_COL_UINT, up, size);
			RD(HT_COL_SLACK, sp, slack);
			uint64_t req = nmemb * size; /* rec_size */
			uint64_t usable = ht_usable_of(m->version, kb & ~HT_KIND_MASK, req, slack);
			if (ptr_decode(m, 1, usable, code, &v) < 0)
				goto bad;
			len = 1 + ht_tag_bytes(4 + has_stack) + rec_bytes_of(nmemb, lz) +
			      rec_bytes_of(size, lz) +
			      rec_bytes_of(ht_zigzag((int64_t)(v - m->last_ptr)), lz) +
			      rec_bytes_of(slack, lz);
			ptr_seen(m, 1, usable, v);
			uint64_t p = v + off;
			e->v[0] = nmemb;
			e->v[1] = size;
			e->v[2] = p;
			e->v[3] = slack;
			e->nv = 4;
			e->usable = p ? usable : 0;
			e->weight = ht_alloc_weight(t->sampled, t->weight, req, p,
						    ht_weight_salt(t->tid, seq), t->sample_bytes);
		} else if (kind == HT_EV_REALLOC) {
			/* the same with old(p) size(u) ptr(p) usable(U) duration(d):
			 * the pointers in field order, then record_seen's release */
			uint64_t size, slack, code2, old;
			RD(HT_COL_UINT, up, size);
			RD(HT_COL_SLACK, sp, slack);
			RD(HT_COL_PTR, pp, code2);
			uint64_t usable = ht_usable_of(m->version, kb & ~HT_KIND_MASK, size, slack);
			if (ptr_decode(m, 0, usable, code, &old) < 0)
				goto bad;
			len = 1 + ht_tag_bytes(5 + has_stack) +
			      rec_bytes_of(ht_zigzag((int64_t)(old - m->last_ptr)), lz) +
			      rec_bytes_of(size, lz) + rec_bytes_of(slack, lz) + rec_bytes_of(ticks, lz);
			ptr_seen(m, 0, usable, old);
			if (ptr_decode(m, 1, usable, code2, &v) < 0)
				goto bad;
			len += rec_bytes_of(ht_zigzag((int64_t)(v - m->last_ptr)), lz);
			ptr_seen(m, 1, usable, v);
			/* ht_event__frees_old, and the result elsewhere */
			if (old && (v || !size) && v != old)
				release(m, old);
			uint64_t p = v + off;
			e->v[0] = old + off;
			e->v[1] = size;
			e->v[2] = p;
			e->v[3] = slack;
			e->v[4] = ticks;
			e->nv = 5;
			e->usable = p ? usable : 0;
			e->weight = ht_alloc_weight(t->sampled, t->weight, size, p,
						    ht_weight_salt(t->tid, seq), t->sample_bytes);
			dur = ticks; /* the record's own duration, not a DURATION record's */
		} else {
			if (ptr_decode(m, 0, 0, code, &v) < 0)
				goto bad;
			unsigned cp = rec_bytes_of(ht_zigzag((int64_t)(v - m->last_ptr)), lz);
			len = v6 && ht_short_free_ok(kb & ~HT_KIND_MASK, cp, tf)
				  ? 1 + cp
				  : 1 + ht_tag_bytes(1 + has_stack) + cp;
			m->last_ptr = v;
			release(m, v);
			e->v[0] = v + off;
			e->nv = 1;
			e->usable = 0;
			e->weight = 1;
		}
		if (m->oom) {
			ret = -2;
			break;
		}
		len += rec_bytes_of(tf, lz) + rec_bytes_of(node, lz);
		if (len > d->rec_bytes - at)
			goto bad;
		at += len;
		e->kind = (uint8_t)kind;
		e->flags = kb & ~HT_KIND_MASK;
		e->tid = t->tid;
		e->seq = seq++;
		e->ts_taken = !v2 || tf != 0;
		last_ts += v2 && tf ? tf - 1 : tf;
		e->ts = last_ts;
		e->duration = dur;
		dur = 0;
		e->str = NULL;
		e->part = HT_PART_WHOLE;
		e->stack = node && node <= t->nnodes ? t->nodes[node - 1] : 0;
		e->time_ns = node; /* the thread's own id, for the reader's decoding threads */
	}
#undef RD
	goto out;
bad:
	ret = -1;
out:
	d->col[HT_COL_KIND].p = kp;
	d->col[HT_COL_UINT].p = up;
	d->col[HT_COL_PTR].p = pp;
	d->col[HT_COL_TIME].p = tp;
	d->col[HT_COL_SLACK].p = sp;
	d->left -= i - *pi;
	d->at = at;
	t->last_ts = last_ts;
	t->seq = seq;
	t->dur = dur;
	t->last_ptr = m->last_ptr + off;
	*pi = i;
	return ret;
}

/* Malloc, free, calloc and realloc records, made into the events
 * decode_next (reader_decode.c) makes of ht_coldec__next's records of them, without the record
 * in between: first as many as the columns surely hold without a bound
 * checked on every read, then the rest with the bounds. */
int ht_coldec__events(struct ht_coldec *d, struct ht_coldec_thread *t, struct ht_event *ev,
		      unsigned max, unsigned *n, const char **why)
{
	unsigned i = 0;
	int k = 0;
	if (max > d->left)
		max = d->left;
	size_t safe = (size_t)(d->col[HT_COL_KIND].end - d->col[HT_COL_KIND].p);
	/* the columns read without a bound, and the values a record takes
	 * from each at most (a calloc two sizes, a realloc two pointers) */
	static const int cols[] = {HT_COL_UINT, HT_COL_PTR, HT_COL_TIME, HT_COL_SLACK};
	static const unsigned per_rec[] = {2, 2, 1, 1};
	for (unsigned c = 0; c < sizeof(cols) / sizeof(cols[0]); c++) {
		size_t room = (size_t)(d->col[cols[c]].end - d->col[cols[c]].p) / (10 * per_rec[c]);
		if (room < safe)
			safe = room;
	}
	if (safe > max)
		safe = max;
	if (ht_lzcnt)
		k = events_loop(d, t, ev, &i, (unsigned)safe, 0, 1);
	else
		k = events_loop(d, t, ev, &i, (unsigned)safe, 0, 0);
	if (!k && i == safe)
		k = events_loop(d, t, ev, &i, max, 1, 0);
	*n = i;
	*why = k == -2 ? "out of memory" : "column data does not decode";
	return k < 0 ? -1 : 0;
}

size_t ht_columns__decode(const uint8_t *in, size_t n, uint32_t version, uint8_t *out, size_t cap,
			  const char **why)
{
	struct ht_coldec *d = ht_coldec__new();
	size_t ret = 0, at = 0;
	if (!d) {
		*why = "out of memory";
		return 0;
	}
	if (ht_coldec__start(d, in, n, version, why) < 0)
		goto cleanup;
	if (d->rec_bytes > cap) {
		*why = "column header out of range";
		goto cleanup;
	}
	struct ht_rec rec;
	int k;
	while ((k = ht_coldec__next(d, &rec, why)) > 0) {
		/* ht_coldec__next checked that the record fits in rec_bytes */
		uint8_t tmp[HT_MAX_RECORD];
		size_t len = ht_rec__encode(&rec, tmp, version);
		memcpy(out + at, tmp, len);
		at += len;
	}
	if (k == 0)
		ret = at;
cleanup:
	ht_coldec__free(d);
	return ret;
}
