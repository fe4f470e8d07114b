/* The live model of `heaptrail live` (livetop.h). */
#define _GNU_SOURCE
#include "livetop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/blocks.h"
#include "common/util.h"

#define NCLASS 41        /* size classes: 0, 1, 2, 3-4, ..., 2^39 and more */
#define MAX_CHAIN 128    /* frames of a stack the table looks at */

/* What the table counts of a stack node, or of a size class in a thread. */
struct cell {
	int64_t live, blocks;          /* live requested bytes, blocks */
	uint64_t allocs, bytes;        /* allocations, bytes allocated */
	int64_t peak_live, peak_blocks; /* at the peak, if epoch is the model's */
	uint64_t peak_allocs, peak_bytes; /* allocs and bytes at the peak, the same */
	uint32_t epoch;                /* the peak epoch of its last change */
};

struct cells {
	struct cell *c;
	size_t n, cap;
};

/* An interned string: a function name, or a call site's label. */
struct strtab {
	char **s;
	size_t n, cap;
	uint32_t *slot; /* open addressing: index + 1, 0 empty */
	size_t scap;
};

/* A call site: its label (site table) and its function (fn table). */
struct site {
	uint32_t fn;
};

struct ht_livetop {
	struct ht_reader *r;
	struct ht_symbolizer *sym;
	struct ht_lt_totals tot;
	uint32_t epoch;              /* peaks so far */
	struct cells stack;          /* by stack node */
	struct cells cls;            /* by thread index * NCLASS + class */
	struct ht_lt_thread *thr;    /* by the pass's thread index */
	size_t nthr, capthr;
	int64_t strip[HT_LT_STRIP];  /* max live bytes per point */
	size_t strip_n;              /* points used */
	unsigned strip_shift;        /* a point is 2^shift ns */
	struct ht_lt_rate rate[HT_LT_RATE_SLOTS]; /* the recent calls of every thread */
	/* symbols: per node, where its sites start in node_sites + 1 (0 not
	 * known yet, UINT32_MAX: the tracer's own frame, skipped) */
	uint32_t *node_site;
	size_t cap_node_site;
	/* a node's sites: their count, then the sites, innermost first (a
	 * return address in inlined code is the inlined functions' sites and
	 * the one they were inlined in, as top and leaks show them) */
	uint32_t *node_sites;
	size_t nnode_sites, cap_node_sites;
	struct strtab fns, sites;
	struct site *site;          /* by site index */
	size_t capsite;
	/* the rows */
	struct ht_lt_row *rows;
	size_t nrows, caprows;
	uint32_t *chains;            /* active cells' sites, innermost first */
	size_t nchains, capchains;
	struct active *act;          /* active cells */
	size_t nact, capact;
	uint32_t *stamp;             /* by fn: the last active cell that counted it */
	size_t capstamp;
};

/* ---- strings ------------------------------------------------------------- */

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static uint32_t intern(struct strtab *t, const char *s)
{
	if ((t->n + 1) * 2 > t->scap) {
		size_t ncap = t->scap ? t->scap * 2 : 256;
		uint32_t *ns = ht_xzalloc(ncap, sizeof(*ns));
		for (size_t i = 0; i < t->n; i++) {
			size_t j = str_hash(t->s[i]) & (ncap - 1);
			while (ns[j])
				j = (j + 1) & (ncap - 1);
			ns[j] = (uint32_t)i + 1;
		}
		free(t->slot);
		t->slot = ns;
		t->scap = ncap;
	}
	size_t j = str_hash(s) & (t->scap - 1);
	for (; t->slot[j]; j = (j + 1) & (t->scap - 1))
		if (!strcmp(t->s[t->slot[j] - 1], s))
			return t->slot[j] - 1;
	t->s = ht_grow(t->s, &t->cap, t->n + 1, sizeof(*t->s));
	t->s[t->n] = ht_xstrdup(s);
	t->slot[j] = (uint32_t)++t->n;
	return (uint32_t)t->n - 1;
}

static void strtab_free(struct strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->s[i]);
	free(t->s);
	free(t->slot);
}

/* ---- feeding ------------------------------------------------------------- */

struct ht_livetop *ht_livetop__new(struct ht_reader *r, struct ht_symbolizer *sym)
{
	struct ht_livetop *lt = ht_xcalloc(1, sizeof(*lt));
	lt->r = r;
	lt->sym = sym;
	lt->strip_shift = 27; /* 134 ms */
	lt->tot.recording = 1;
	return lt;
}

void ht_livetop__set_symbolizer(struct ht_livetop *lt, struct ht_symbolizer *sym)
{
	lt->sym = sym;
	/* names are looked up again (the interned ones stay) */
	if (lt->node_site)
		memset(lt->node_site, 0, lt->cap_node_site * sizeof(*lt->node_site));
	lt->nnode_sites = 0;
}

void ht_livetop__delete(struct ht_livetop *lt)
{
	if (!lt)
		return;
	free(lt->stack.c);
	free(lt->cls.c);
	free(lt->thr);
	free(lt->node_site);
	free(lt->node_sites);
	strtab_free(&lt->fns);
	strtab_free(&lt->sites);
	free(lt->site);
	free(lt->rows);
	free(lt->chains);
	free(lt->act);
	free(lt->stamp);
	free(lt);
}

static __attribute__((noinline)) struct cell *cell_grow(struct cells *cs, size_t i)
{
	cs->c = ht_grow(cs->c, &cs->cap, i + 1, sizeof(*cs->c));
	memset(cs->c + cs->n, 0, (i + 1 - cs->n) * sizeof(*cs->c));
	cs->n = i + 1;
	return &cs->c[i];
}

static inline __attribute__((always_inline)) struct cell *cell_at(struct cells *cs, size_t i)
{
	if (__builtin_expect(i >= cs->n, 0))
		return cell_grow(cs, i);
	return &cs->c[i];
}

static inline unsigned size_class(uint64_t size)
{
	if (size <= 1)
		return (unsigned)size;
	unsigned k = 65 - (unsigned)__builtin_clzll(size - 1); /* 2: 2, 3-4: 3, 5-8: 4 */
	return k < NCLASS ? k : NCLASS - 1;
}

static __attribute__((noinline)) struct ht_lt_thread *thread_grow(struct ht_livetop *lt, uint32_t i)
{
	lt->thr = ht_grow(lt->thr, &lt->capthr, i + 1, sizeof(*lt->thr));
	memset(lt->thr + lt->nthr, 0, (i + 1 - lt->nthr) * sizeof(*lt->thr));
	lt->nthr = i + 1;
	return &lt->thr[i];
}

static inline __attribute__((always_inline)) struct ht_lt_thread *
thread_at(struct ht_livetop *lt, uint32_t i, uint32_t tid)
{
	struct ht_lt_thread *t = __builtin_expect(i < lt->nthr, 1) ? &lt->thr[i] : thread_grow(lt, i);
	if (__builtin_expect(!t->tid, 0))
		t->tid = tid;
	return t;
}

/* Counts calls at trace time t in a ring of rate slots.  A late event (the
 * merge of the threads is in time order, nearly) older than the ring's
 * window is left out rather than clearing a newer slot. */
static inline __attribute__((always_inline)) void rate_add(struct ht_lt_rate *r, uint64_t t,
							   uint64_t allocs, uint64_t frees)
{
	uint64_t k = (t >> HT_LT_RATE_SHIFT) + 1;
	struct ht_lt_rate *s = &r[k % HT_LT_RATE_SLOTS];
	if (__builtin_expect(s->slot != k, 0)) {
		if (s->slot > k)
			return;
		s->slot = k;
		s->allocs = s->frees = 0;
	}
	s->allocs += allocs;
	s->frees += frees;
}

/* The rates of a ring at trace time now: the calls of the slots that end
 * the window at now, over the time they cover. */
static void rate_of(const struct ht_lt_rate *r, uint64_t now, double *alloc_rate,
		    double *free_rate)
{
	uint64_t k = (now >> HT_LT_RATE_SHIFT) + 1, allocs = 0, frees = 0;
	uint64_t first = k > HT_LT_RATE_SLOTS ? k - HT_LT_RATE_SLOTS + 1 : 1;
	uint64_t from = (first - 1) << HT_LT_RATE_SHIFT;
	for (size_t i = 0; i < HT_LT_RATE_SLOTS; i++)
		if (r[i].slot >= first && r[i].slot <= k) {
			allocs += r[i].allocs;
			frees += r[i].frees;
		}
	double secs = (double)(now - from) / 1e9;
	*alloc_rate = secs > 0 ? (double)allocs / secs : 0;
	*free_rate = secs > 0 ? (double)frees / secs : 0;
}

/* A cell changes: keep its value at the peak first. */
static inline void touch(struct ht_livetop *lt, struct cell *c)
{
	if (c->epoch != lt->epoch) {
		c->peak_live = c->live;
		c->peak_blocks = c->blocks;
		c->peak_allocs = c->allocs;
		c->peak_bytes = c->bytes;
		c->epoch = lt->epoch;
	}
}

static __attribute__((noinline)) void strip_move(struct ht_livetop *lt, uint64_t t)
{
	uint64_t i = t >> lt->strip_shift;
	while (i >= HT_LT_STRIP) {
		for (size_t k = 0; k < HT_LT_STRIP / 2; k++)
			lt->strip[k] = lt->strip[2 * k] > lt->strip[2 * k + 1] ? lt->strip[2 * k]
									 : lt->strip[2 * k + 1];
		memset(lt->strip + HT_LT_STRIP / 2, 0, sizeof(lt->strip) / 2);
		lt->strip_n = (lt->strip_n + 1) / 2;
		lt->strip_shift++;
		i = t >> lt->strip_shift;
	}
	int64_t live = lt->tot.live_bytes;
	if (i >= lt->strip_n) {
		/* points without events hold what was live before */
		int64_t prev = lt->strip_n ? lt->strip[lt->strip_n - 1] : 0;
		for (size_t k = lt->strip_n; k < i; k++)
			lt->strip[k] = prev;
		lt->strip[i] = 0;
		lt->strip_n = i + 1;
	}
	if (live > lt->strip[i])
		lt->strip[i] = live;
}

static inline __attribute__((always_inline)) void strip_put(struct ht_livetop *lt, uint64_t t)
{
	uint64_t i = t >> lt->strip_shift;
	if (__builtin_expect(i + 1 != lt->strip_n, 0)) {
		strip_move(lt, t);
		return;
	}
	if (lt->tot.live_bytes > lt->strip[i])
		lt->strip[i] = lt->tot.live_bytes;
}

static inline __attribute__((always_inline)) void change(struct ht_livetop *lt, const struct ht_block *b, uint32_t tidx, int sign)
{
	int64_t w = b->weight ? b->weight : 1;
	int64_t bytes = (int64_t)b->size * w * sign;
	struct cell *c = cell_at(&lt->stack, b->aux);
	touch(lt, c);
	c->live += bytes;
	c->blocks += w * sign;
	struct cell *k = cell_at(&lt->cls, (size_t)tidx * NCLASS + size_class(b->size));
	touch(lt, k);
	k->live += bytes;
	k->blocks += w * sign;
	if (sign > 0) {
		c->allocs += (uint64_t)w;
		c->bytes += (uint64_t)bytes;
		k->allocs += (uint64_t)w;
		k->bytes += (uint64_t)bytes;
	}
	struct ht_lt_thread *t = thread_at(lt, tidx, sign > 0 ? b->tid : 0);
	t->live_bytes += bytes;
	t->live_blocks += w * sign;
	lt->tot.live_bytes += bytes;
	lt->tot.live_usable += (int64_t)b->usable * w * sign;
	lt->tot.live_blocks += w * sign;
}

void ht_livetop__event(struct ht_livetop *lt, const struct ht_event *e, const struct ht_blockop *op)
{
	struct ht_lt_totals *tot = &lt->tot;
	/* every thread the pass numbers gets its tid, heap calls or not (one
	 * that made none showed as tid 0 when a later thread made some) */
	thread_at(lt, op->thread, e->tid);
	tot->events += e->part != HT_PART_RELEASE; /* (a moving realloc is one event, as stats') */
	tot->time_ns = e->time_ns;
	if (e->stack)
		tot->stacks = 1;
	if (e->kind == HT_EV_CONTROL && e->nv) {
		if (e->v[0] == HT_CTL_PAUSE || e->v[0] == HT_CTL_STOP)
			tot->recording = 0;
		else if (e->v[0] == HT_CTL_RESUME || e->v[0] == HT_CTL_START)
			tot->recording = 1;
	}
	const struct ht_block *rel[2] = {op->released, op->replaced};
	for (int i = 0; i < 2; i++) {
		const struct ht_block *b = rel[i];
		if (!b || ht_block__forgotten(b))
			continue;
		uint32_t owner = b->pad & HT_BLOCK_ARENA;
		uint32_t tidx = owner ? owner - 1 : op->thread;
		change(lt, b, tidx, -1);
		uint64_t w = b->weight ? b->weight : 1;
		struct ht_lt_thread *t = thread_at(lt, op->thread, e->tid);
		t->frees += w;
		if (b->tid != e->tid)
			t->cross_frees += w;
		tot->frees += w;
		rate_add(t->rate, e->time_ns, 0, w);
		rate_add(lt->rate, e->time_ns, 0, w);
	}
	if (op->acquired) {
		struct ht_block *b = op->acquired;
		b->pad = (b->pad & ~HT_BLOCK_ARENA) | ((op->thread + 1) & HT_BLOCK_ARENA);
		change(lt, b, op->thread, 1);
		uint64_t w = b->weight ? b->weight : 1;
		struct ht_lt_thread *t = thread_at(lt, op->thread, e->tid);
		t->allocs += w;
		t->alloc_bytes += b->size * w;
		tot->allocs += w;
		rate_add(t->rate, e->time_ns, w, 0);
		rate_add(lt->rate, e->time_ns, w, 0);
		tot->alloc_bytes += b->size * w;
		if (tot->live_bytes > tot->peak_bytes) {
			tot->peak_bytes = tot->live_bytes;
			tot->peak_ns = e->time_ns;
			lt->epoch++;
		}
	}
	strip_put(lt, e->time_ns);
}

void ht_livetop__advance(struct ht_livetop *lt, uint64_t t_ns)
{
	if (t_ns > lt->tot.time_ns)
		strip_put(lt, t_ns);
}

void ht_livetop__tick(struct ht_livetop *lt, uint64_t now_ns)
{
	rate_of(lt->rate, now_ns, &lt->tot.alloc_rate, &lt->tot.free_rate);
	for (size_t i = 0; i < lt->nthr; i++)
		rate_of(lt->thr[i].rate, now_ns, &lt->thr[i].alloc_rate, &lt->thr[i].free_rate);
}

const struct ht_lt_totals *ht_livetop__totals(const struct ht_livetop *lt)
{
	return &lt->tot;
}

size_t ht_livetop__threads(const struct ht_livetop *lt, const struct ht_lt_thread **t)
{
	*t = lt->thr;
	return lt->nthr;
}

size_t ht_livetop__strip(const struct ht_livetop *lt, const int64_t **max_live, uint64_t *width_ns)
{
	*max_live = lt->strip;
	*width_ns = (uint64_t)1 << lt->strip_shift;
	return lt->strip_n;
}

/* ---- symbols ------------------------------------------------------------- */

/* The site of frame f (its function, file and line), interned. */
static uint32_t frame_site(struct ht_livetop *lt, const struct ht_frame *f)
{
	char buf[1024];
	const char *fn = ht_blocks__frame_name(buf, sizeof(buf), f); /* (whole) */
	char *label = NULL;
	if (f->file) {
		const char *slash = strrchr(f->file, '/');
		if (asprintf(&label, "%s (%s:%d)", fn, slash ? slash + 1 : f->file, f->line) < 0)
			label = NULL;
	}
	uint32_t s = intern(&lt->sites, label ? label : fn);
	free(label);
	lt->site = ht_grow(lt->site, &lt->capsite, s + 1, sizeof(*lt->site));
	lt->site[s].fn = intern(&lt->fns, fn);
	return s;
}

/* Appends a site to node_sites. */
static void put_site(struct ht_livetop *lt, uint32_t s)
{
	lt->node_sites = ht_grow(lt->node_sites, &lt->cap_node_sites, lt->nnode_sites + 1,
				 sizeof(*lt->node_sites));
	lt->node_sites[lt->nnode_sites++] = s;
}

/* Where the sites of a stack node start in node_sites + 1 (a count, then
 * the sites), UINT32_MAX for the tracer's own frames.  Every frame of the
 * address, not only the innermost: the inlined functions' frames and the
 * function they are inlined in.  (Only the innermost was kept: an
 * always-inline wrapper of malloc hid its callers, whose blocks were
 * shown under the wrapper's caller's caller, merged.) */
static uint32_t node_site(struct ht_livetop *lt, uint32_t node)
{
	if (node >= lt->cap_node_site) {
		size_t old = lt->cap_node_site;
		lt->node_site = ht_grow(lt->node_site, &lt->cap_node_site, node + 1,
					sizeof(*lt->node_site));
		memset(lt->node_site + old, 0, (lt->cap_node_site - old) * sizeof(*lt->node_site));
	}
	if (lt->node_site[node])
		return lt->node_site[node];
	uint64_t ip = ht_reader__node_ip(lt->r, node);
	const struct ht_frame *f = NULL;
	size_t nf = 0;
	if (lt->sym)
		nf = ht_symbolizer__resolve_in(lt->sym, ip, ht_reader__node_module(lt->r, node), &f);
	size_t own = 0;
	for (size_t j = 0; j < nf; j++)
		own += !ht_symbols__is_recorder(f[j].module);
	if (nf && !own)
		return lt->node_site[node] = UINT32_MAX;
	size_t at = lt->nnode_sites;
	put_site(lt, 0); /* (the count, below) */
	for (size_t j = 0; j < nf; j++)
		if (!ht_symbols__is_recorder(f[j].module))
			put_site(lt, frame_site(lt, &f[j]));
	if (!nf) {
		struct ht_frame addr = {0};
		char fn[32];
		snprintf(fn, sizeof(fn), "0x%llx", (unsigned long long)ip);
		addr.function = fn;
		put_site(lt, frame_site(lt, &addr));
	}
	lt->node_sites[at] = (uint32_t)(lt->nnode_sites - at - 1);
	return lt->node_site[node] = (uint32_t)at + 1;
}

/* The sites of a node's stack, innermost first; how many. */
static size_t chain(struct ht_livetop *lt, uint32_t node, uint32_t *out, size_t max)
{
	size_t k = 0;
	for (size_t i = 0; node && i < 4 * MAX_CHAIN && k < max; i++) {
		uint32_t s = node_site(lt, node);
		if (s != UINT32_MAX)
			for (uint32_t j = 0; j < lt->node_sites[s - 1] && k < max; j++)
				out[k++] = lt->node_sites[s + j];
		node = ht_reader__node_parent(lt->r, node);
	}
	return k;
}

/* ---- rows ---------------------------------------------------------------- */

struct active {
	uint32_t cell;
	uint32_t key;     /* the group at the current depth */
	size_t chain, n;  /* its sites in lt->chains */
	int64_t v[HT_LT_NCOLS]; /* what it adds to its rows' columns */
};

/* The mode's bytes and blocks of a cell. */
static void cell_values(const struct ht_livetop *lt, const struct cell *c, enum ht_lt_mode m,
			int64_t *v)
{
	switch (m) {
	case HT_LT_LIVE:
		v[HT_LT_TOTAL] = c->live;
		v[HT_LT_BLOCKS] = c->blocks;
		break;
	case HT_LT_PEAK:
		v[HT_LT_TOTAL] = c->epoch == lt->epoch ? c->peak_live : c->live;
		v[HT_LT_BLOCKS] = c->epoch == lt->epoch ? c->peak_blocks : c->blocks;
		break;
	default:
		v[HT_LT_TOTAL] = (int64_t)c->bytes;
		v[HT_LT_BLOCKS] = (int64_t)c->allocs;
		break;
	}
	v[HT_LT_OWN] = v[HT_LT_TOTAL];
	int at_peak = m == HT_LT_PEAK && c->epoch == lt->epoch;
	v[HT_LT_ALLOCS] = (int64_t)(at_peak ? c->peak_allocs : c->allocs);
	v[HT_LT_BYTES] = (int64_t)(at_peak ? c->peak_bytes : c->bytes);
}

static uint64_t path_of(uint64_t parent, uint64_t key)
{
	uint64_t h = (parent ^ (key + 0x9E3779B97F4A7C15ull)) * 0xff51afd7ed558ccdull;
	return h ^ (h >> 33);
}

/* A group of active cells, a row to be. */
struct group {
	size_t lo, hi;   /* its cells act[lo, hi) */
	uint32_t key;
	int caller;      /* a function that allocates nothing itself: no cells */
	struct ht_lt_row row;
};

static enum ht_lt_col sort_col;

static int cmp_group(const void *a, const void *b)
{
	const struct group *x = a, *y = b;
	int64_t vx = x->row.v[sort_col], vy = y->row.v[sort_col];
	if (sort_col == HT_LT_OWN && x->row.depth > 0) {
		vx = x->row.v[HT_LT_TOTAL];
		vy = y->row.v[HT_LT_TOTAL];
	}
	if (vx != vy)
		return vx > vy ? -1 : 1;
	if (x->row.v[HT_LT_OWN] != y->row.v[HT_LT_OWN]) /* what allocates first */
		return x->row.v[HT_LT_OWN] > y->row.v[HT_LT_OWN] ? -1 : 1;
	return strcmp(x->row.label, y->row.label);
}

static int cmp_key(const void *a, const void *b)
{
	const struct active *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

static int cmp_group_key(const void *a, const void *b)
{
	const struct group *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

static struct ht_lt_row *new_row(struct ht_livetop *lt)
{
	lt->rows = ht_grow(lt->rows, &lt->caprows, lt->nrows + 1, sizeof(*lt->rows));
	return &lt->rows[lt->nrows++];
}

static const char *class_label(char *buf, size_t len, unsigned k)
{
	char a[32], b[32];
	if (k <= 1)
		snprintf(buf, len, "%u B", k);
	else if (k == NCLASS - 1)
		snprintf(buf, len, "> %s", ht_lt_bytes(a, sizeof(a), (double)(1ull << (k - 2))));
	else
		snprintf(buf, len, "%s .. %s", ht_lt_bytes(a, sizeof(a), (double)(1ull << (k - 2)) + 1),
			 ht_lt_bytes(b, sizeof(b), (double)(1ull << (k - 1))));
	return buf;
}

static void label_of(struct ht_livetop *lt, const struct ht_lt_query *q, int depth, uint32_t key,
		     char *buf, size_t len)
{
	if (q->by_class || !lt->tot.stacks) {
		if (depth == 0) {
			class_label(buf, len, key);
		} else {
			uint32_t tid = key < lt->nthr ? lt->thr[key].tid : 0;
			snprintf(buf, len, "thread %u%s", tid, key == 0 ? " (main)" : "");
		}
	} else if (key == UINT32_MAX) {
		snprintf(buf, len, "(no stack)");
	} else if (depth == 0) {
		snprintf(buf, len, "%s", lt->fns.s[key]);
	} else {
		snprintf(buf, len, "%s", lt->sites.s[key]);
	}
}

/* Groups act[lo, hi) by their key at depth, emits the groups as rows in
 * the sort order, and the children of the open ones after each. */
static void emit(struct ht_livetop *lt, const struct ht_lt_query *q, size_t lo, size_t hi,
		 int depth, uint64_t parent, size_t *budget)
{
	int classes = q->by_class || !lt->tot.stacks;
	for (size_t i = lo; i < hi; i++) {
		struct active *a = &lt->act[i];
		if (classes)
			a->key = depth == 0 ? a->cell % NCLASS : a->cell / NCLASS;
		else if (depth == 0)
			a->key = a->n ? lt->site[lt->chains[a->chain]].fn : UINT32_MAX;
		else
			a->key = lt->chains[a->chain + depth];
	}
	if (hi == lo)
		return;
	qsort(lt->act + lo, hi - lo, sizeof(*lt->act), cmp_key);
	size_t ng = 0, capg = 0;
	struct group *g = NULL;
	for (size_t i = lo; i < hi;) {
		size_t j = i;
		g = ht_grow(g, &capg, ng + 1, sizeof(*g));
		struct group *x = &g[ng++];
		memset(x, 0, sizeof(*x));
		x->lo = i;
		x->key = lt->act[i].key;
		for (; j < hi && lt->act[j].key == x->key; j++)
			for (int c = 0; c < HT_LT_NCOLS; c++)
				x->row.v[c] += lt->act[j].v[c];
		x->hi = j;
		x->row.depth = depth;
		x->row.path = path_of(parent, x->key);
		if (classes)
			x->row.has_children = depth == 0;
		else
			for (size_t k = x->lo; k < x->hi && !x->row.has_children; k++)
				x->row.has_children = lt->act[k].n > (size_t)depth + 1;
		label_of(lt, q, depth, x->key, x->row.label, sizeof(x->row.label));
		if (depth > 0 || classes)
			x->row.v[HT_LT_OWN] = depth > 0 ? -1 : x->row.v[HT_LT_TOTAL];
		i = j;
	}
	if (!classes && depth == 0) {
		/* the functions that only call others (main, a thread's start
		 * routine): a row each too, with nothing of its own and the rest
		 * counted through it */
		lt->stamp = ht_grow(lt->stamp, &lt->capstamp, lt->fns.n + 1, sizeof(*lt->stamp));
		memset(lt->stamp, 0, lt->capstamp * sizeof(*lt->stamp));
		for (size_t k = 0; k < ng; k++)
			if (g[k].key != UINT32_MAX)
				lt->stamp[g[k].key] = 1;
		size_t nalloc = ng;
		for (size_t i = lo; i < hi; i++) {
			struct active *a = &lt->act[i];
			for (size_t d = 0; d < a->n; d++) {
				uint32_t fn = lt->site[lt->chains[a->chain + d]].fn;
				if (lt->stamp[fn])
					continue;
				lt->stamp[fn] = 1;
				g = ht_grow(g, &capg, ng + 1, sizeof(*g));
				struct group *x = &g[ng++];
				memset(x, 0, sizeof(*x));
				x->key = fn;
				x->caller = 1;
				x->row.path = path_of(parent, fn);
				label_of(lt, q, 0, fn, x->row.label, sizeof(x->row.label));
			}
		}
		if (ng > nalloc)
			qsort(g, ng, sizeof(*g), cmp_group_key);
		/* total: the function anywhere on the stack, once per stack */
		for (size_t k = 0; k < ng; k++)
			g[k].row.v[HT_LT_TOTAL] = 0;
		memset(lt->stamp, 0, lt->capstamp * sizeof(*lt->stamp));
		/* fn -> group, by a search in the groups sorted by key */
		for (size_t i = 0; i < lt->nact; i++) {
			struct active *a = &lt->act[i];
			for (size_t d = 0; d < a->n; d++) {
				uint32_t fn = lt->site[lt->chains[a->chain + d]].fn;
				if (lt->stamp[fn] == i + 1)
					continue;
				lt->stamp[fn] = (uint32_t)i + 1;
				size_t l = 0, h = ng;
				while (l < h) {
					size_t m = (l + h) / 2;
					if (g[m].key < fn)
						l = m + 1;
					else
						h = m;
				}
				if (l < ng && g[l].key == fn) {
					g[l].row.v[HT_LT_TOTAL] += a->v[HT_LT_OWN];
					if (g[l].caller)
						for (int c = HT_LT_BLOCKS; c < HT_LT_NCOLS; c++)
							g[l].row.v[c] += a->v[c];
				}
			}
		}
		for (size_t k = 0; k < ng; k++)
			if (g[k].key == UINT32_MAX) /* (no stack) */
				g[k].row.v[HT_LT_TOTAL] = g[k].row.v[HT_LT_OWN];
	}
	sort_col = q->sort;
	qsort(g, ng, sizeof(*g), cmp_group);
	for (size_t k = 0; k < ng && *budget; k++) {
		g[k].row.open = g[k].row.has_children && q->is_open &&
				q->is_open(q->ctx, g[k].row.path);
		*new_row(lt) = g[k].row;
		(*budget)--;
		if (g[k].row.open) {
			size_t a = g[k].lo, b = g[k].hi;
			if (!classes) {
				/* the cells whose stacks go deeper */
				size_t w = a;
				for (size_t i = a; i < b; i++)
					if (lt->act[i].n > (size_t)depth + 1) {
						struct active t = lt->act[w];
						lt->act[w++] = lt->act[i];
						lt->act[i] = t;
					}
				b = w;
			}
			emit(lt, q, a, b, depth + 1, g[k].row.path, budget);
		}
	}
	free(g);
}

static int chain_matches(struct ht_livetop *lt, const struct active *a, const char *search)
{
	for (size_t d = 0; d < a->n; d++)
		if (strstr(lt->fns.s[lt->site[lt->chains[a->chain + d]].fn], search))
			return 1;
	return 0;
}

const struct ht_lt_row *ht_livetop__rows(struct ht_livetop *lt, const struct ht_lt_query *q,
					 size_t *n)
{
	int classes = q->by_class || !lt->tot.stacks;
	struct cells *cs = classes ? &lt->cls : &lt->stack;
	lt->nrows = lt->nact = lt->nchains = 0;
	for (size_t i = 0; i < cs->n; i++) {
		const struct cell *c = &cs->c[i];
		int64_t v[HT_LT_NCOLS];
		cell_values(lt, c, q->mode, v);
		if (!v[HT_LT_TOTAL] && !v[HT_LT_BLOCKS])
			continue;
		lt->act = ht_grow(lt->act, &lt->capact, lt->nact + 1, sizeof(*lt->act));
		struct active *a = &lt->act[lt->nact];
		a->cell = (uint32_t)i;
		memcpy(a->v, v, sizeof(v));
		a->chain = lt->nchains;
		a->n = 0;
		if (!classes) {
			lt->chains = ht_grow(lt->chains, &lt->capchains, lt->nchains + MAX_CHAIN,
					     sizeof(*lt->chains));
			a->n = chain(lt, (uint32_t)i, lt->chains + lt->nchains, MAX_CHAIN);
			if (q->search && *q->search && !chain_matches(lt, a, q->search))
				continue;
			lt->nchains += a->n;
		}
		lt->nact++;
	}
	size_t budget = q->max_rows ? q->max_rows : SIZE_MAX;
	emit(lt, q, 0, lt->nact, 0, 0, &budget);
	*n = lt->nrows;
	return lt->rows;
}

/* ---- text ---------------------------------------------------------------- */

static int cmp_active_total(const void *a, const void *b)
{
	const struct active *x = a, *y = b;
	if (x->v[HT_LT_TOTAL] != y->v[HT_LT_TOTAL])
		return x->v[HT_LT_TOTAL] > y->v[HT_LT_TOTAL] ? -1 : 1;
	return x->cell < y->cell ? -1 : x->cell > y->cell;
}

void ht_livetop__write_text(struct ht_livetop *lt, enum ht_lt_mode mode, size_t max, FILE *out)
{
	int classes = !lt->tot.stacks;
	struct cells *cs = classes ? &lt->cls : &lt->stack;
	lt->nact = 0;
	for (size_t i = 0; i < cs->n; i++) {
		int64_t v[HT_LT_NCOLS];
		cell_values(lt, &cs->c[i], mode, v);
		if (!v[HT_LT_TOTAL] && !v[HT_LT_BLOCKS])
			continue;
		lt->act = ht_grow(lt->act, &lt->capact, lt->nact + 1, sizeof(*lt->act));
		lt->act[lt->nact].cell = (uint32_t)i;
		memcpy(lt->act[lt->nact].v, v, sizeof(v));
		lt->nact++;
	}
	if (lt->nact)
		qsort(lt->act, lt->nact, sizeof(*lt->act), cmp_active_total);
	const char *what = mode == HT_LT_ALLOCATED ? "allocations" : "blocks";
	for (size_t i = 0; i < lt->nact && i < max; i++) {
		const struct active *a = &lt->act[i];
		fprintf(out, "%lld bytes in %lld %s", (long long)a->v[HT_LT_TOTAL],
			(long long)a->v[HT_LT_BLOCKS], what);
		if (classes) {
			char lab[64];
			fprintf(out, " of %s in thread %u\n",
				class_label(lab, sizeof(lab), a->cell % NCLASS),
				a->cell / NCLASS < lt->nthr ? lt->thr[a->cell / NCLASS].tid : 0);
			continue;
		}
		fprintf(out, " (%lld allocations) at:\n", (long long)a->v[HT_LT_ALLOCS]);
		uint32_t sites[MAX_CHAIN];
		size_t n = chain(lt, a->cell, sites, MAX_CHAIN);
		if (!n)
			fprintf(out, "    (no stack)\n");
		for (size_t d = 0; d < n; d++)
			fprintf(out, "    %s\n", lt->sites.s[sites[d]]);
	}
}

const char *ht_lt_bytes(char *buf, size_t len, double bytes)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	double v = bytes < 0 ? -bytes : bytes;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (bytes < 0)
		v = -v;
	if (u == 0)
		snprintf(buf, len, "%.0f B", v);
	else
		snprintf(buf, len, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, unit[u]);
	return buf;
}
