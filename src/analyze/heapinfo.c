/* glibc's arenas, heaps, break, thresholds and lock waits from a trace
 * (heapinfo.h).  Every glibc fact used here is listed, with its place in
 * glibc 2.36's malloc/malloc.c and malloc/arena.c, in docs/heap.md. */
#define _GNU_SOURCE
#include "heapinfo.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/keyindex.h"
#include "analyze/pass.h"
#include "common/json.h"
#include "common/util.h"

/* ---- glibc 2.36 on 64-bit Linux (docs/heap.md cites each) ---------------- */
#define G_HEAP_MAX (64ull << 20)        /* HEAP_MAX_SIZE = 2 * DEFAULT_MMAP_THRESHOLD_MAX */
#define G_MMAP_THRESHOLD_MAX (32ull << 20) /* DEFAULT_MMAP_THRESHOLD_MAX */
#define G_MMAP_THRESHOLD UINT64_C(131072)     /* DEFAULT_MMAP_THRESHOLD(_MIN) */
#define G_TRIM_THRESHOLD UINT64_C(131072)     /* DEFAULT_TRIM_THRESHOLD */
#define G_HEAP_INFO 48u                 /* sizeof (heap_info) */
#define G_ARENA_FIRST 2256u             /* first chunk of an arena's first heap:
					 * heap_info + malloc_state, aligned */
#define G_MMAPPED_OVERHEAD 16u          /* mmapped chunk size - usable size */
#define G_CHUNK_OVERHEAD 8u             /* chunk size - usable size, in a heap */
#define G_TCACHE_BINS 64                /* TCACHE_MAX_BINS */
#define G_TCACHE_COUNT 7                /* TCACHE_FILL_COUNT */
#define M_TRIM_THRESHOLD (-1)
#define M_TOP_PAD (-2)
#define M_MMAP_THRESHOLD (-3)
#define M_MMAP_MAX (-4)
#define M_ARENA_TEST (-7)
#define M_ARENA_MAX (-8)

/* ---- lock waits --------------------------------------------------------- */
#define NCLASS 48      /* size classes: bit length of the size */
#define NBIN 256       /* duration bins: a quarter octave each */
#define MIN_PEERS 100  /* calls of a function and class before judging */
#define SLOW_FACTOR 10 /* and slower than this many times the median */
#define WORST_KEEP 16  /* slowest calls kept per function and class */
#define WORST_SHOW 10  /* shown in the text report */
#define WORST_JSON 100 /* listed in JSON */
#define MAX_CHANGES 100000 /* threshold changes kept */

struct series {
	uint64_t *t, *v; /* time ns, value */
	size_t n, cap;   /* points / room */
	uint64_t step;   /* keep one point per this many offered (thinning) */
	uint64_t offered;
};

struct use {
	uint32_t tid;       /* thread */
	uint64_t first_ns;  /* its first allocation in the arena */
	uint64_t last_ns;   /* its last */
	uint64_t calls;     /* allocations it made there */
};

struct arena {
	uint64_t first_heap;  /* base of its first heap; 0 = the main arena */
	uint32_t nheaps;      /* heaps seen */
	uint64_t created_ns;  /* first block seen in it */
	uint32_t creator;     /* thread of that block */
	struct use *uses;     /* threads that allocated in it */
	size_t nuses, capuses;
	uint64_t live, live_req, peak; /* usable bytes in use, requested, peak usable */
	uint64_t peak_ns;     /* when */
	uint64_t blocks;      /* blocks in use */
	uint64_t allocs;      /* allocations */
	uint64_t slow;        /* calls slower than their peers (finish) */
	uint64_t slow_worst;  /* the slowest of them, ticks */
};

struct heap {
	uint64_t base;        /* aligned to G_HEAP_MAX */
	int arena;            /* index in arenas */
	int first;            /* 1: the arena's first heap (holds the arena) */
	uint64_t min_off;     /* lowest block offset seen */
	uint64_t first_ns;    /* first block seen */
	uint64_t size;        /* highest block end - base, so far */
	uint64_t size_ns;     /* when it got there */
	uint64_t live;        /* usable bytes in use */
	struct series s;      /* size over time */
};

struct thr {
	uint32_t tid;         /* kernel thread id */
	int arena;            /* arena of its allocations, -1 before the first */
	int last_arena;       /* cache: arena of uses[last_use] */
	size_t last_use;
	uint64_t first_ns, last_ns; /* first and last event */
	uint64_t start_ns, exit_ns; /* thread_start / thread_exit, 0 if none */
	int started, exited;  /* seen */
	char name[HT_MAX_STR + 1];
	uint64_t *tc;         /* freed blocks that may sit in its tcache:
			       * G_TCACHE_BINS x G_TCACHE_COUNT, newest last */
	uint8_t *tcn;         /* entries per bin */
	uint64_t timed;       /* calls with a duration */
	uint64_t slow, slow_worst; /* slow calls (finish), the slowest in ticks */
};

struct change {
	uint64_t time_ns;
	uint32_t tid;
	uint64_t mmap, trim;  /* the thresholds after it */
	int cause;            /* 0 free of an mmapped chunk, else the mallopt param */
	uint64_t arg;         /* the chunk size, or mallopt's value */
	int pins;             /* this mallopt turned the dynamic threshold off */
};

struct worst {
	uint64_t dur;         /* ticks */
	uint64_t time_ns;
	uint32_t tid;
	int arena;            /* -1 mmapped / unknown */
	uint64_t size;        /* requested (free: the block's) */
	uint8_t kind;
};

struct dist {
	uint32_t bins[NBIN];
	uint64_t n;
	struct worst w[WORST_KEEP]; /* slowest first */
	uint64_t thr;         /* finish: slower than this (ticks) is slow; 0 = not judged */
	uint64_t median;      /* finish: ticks */
	uint64_t slow;        /* finish: calls slower than thr */
};

/* (owner, dist, bin) -> calls; owner: thread index * 2, arena index * 2 + 1 */
struct cell {
	uint64_t key;         /* 0 = empty */
	uint64_t n;
};

struct ht_heapinfo {
	uint64_t from, to;    /* window */
	int seeded;           /* peaks started at the window */
	uint64_t gate;        /* events from this time on take window_checks (set_gate) */
	uint64_t start_brk;   /* from the header */
	double ts_per_ns;     /* clock */
	int durations_flag;   /* HT_FILE_F_DURATIONS in the header */
	const char *cmdline;
	int32_t pid;
	uint64_t last_ns;     /* last event's time */

	struct arena *arenas;
	size_t narenas, caparenas;
	struct heap *heaps;
	size_t nheaps, capheaps;
	struct ht_keyindex heap_idx;  /* base -> heap */
	size_t last_heap;     /* index + 1 of the last heap found, 0 none (heaps are only added) */
	struct thr *thrs;
	size_t nthrs, capthrs;
	struct ht_keyindex thr_idx;  /* tid -> thread */

	/* thresholds */
	uint64_t mmap_thr, trim_thr;
	int no_dyn;           /* a mallopt turned the dynamic threshold off */
	struct change *changes;
	size_t nchanges, capchanges;
	uint64_t changes_lost;
	uint64_t arena_max;   /* mallopt(M_ARENA_MAX), 0 none */
	uint64_t mallopts, trims;
	uint64_t mmapped_free_unknown; /* frees of mmapped blocks not seen allocated */
	uint64_t below_thr;   /* malloc/calloc mmapped below the modelled threshold */

	/* main heap */
	uint64_t brk;         /* current break, 0 = not seen */
	uint64_t brk_first;   /* where growth is counted from */
	uint64_t grown, shrunk; /* sbrk total raised / lowered */
	uint64_t grow_steps, shrink_steps;
	uint64_t brk_peak, brk_peak_ns;
	struct series brk_s;
	uint64_t own_brk;     /* the program's own brk/sbrk calls */

	/* whole heap */
	uint64_t calls[HT_EV_NR];
	uint64_t live_req, live_use; /* in use: requested, usable */
	uint64_t peak_req, peak_use, peak_ns; /* at the peak of requested bytes */
	uint64_t mm_live, mm_peak, mm_count, mm_bytes; /* mmapped chunks */
	uint64_t unknown_frees;
	uint64_t rss_peak_kb, rss_peak_ns; /* the RSS peak in the window */
	int rss_taken;
	uint64_t rss_live_req, rss_live_use; /* in use then */

	/* lock waits */
	struct dist *dists[32 * NCLASS]; /* by kind and size class, lazily */
	struct cell *cells;
	size_t ncells, capcells;
	uint64_t timed;       /* calls with a duration */
	uint64_t timed_hot;   /* of them malloc/free/calloc/memalign: needs --durations */
	uint64_t slow;        /* finish */
	struct worst worst[WORST_JSON];
	size_t nworst;
	struct dist *worst_dist[WORST_JSON];
};

/* calloc, or the end of the command with ht_xrealloc()'s error. */
static void *xcalloc(size_t n, size_t s)
{
	void *q = ht_xcalloc(n ? n : 1, s);
	return q;
}

#define GROW(arr, n, cap)                                                               \
	do {                                                                            \
		if ((n) >= (cap)) {                                                     \
			(cap) = (cap) ? (cap) * 2 : 16;                                 \
			(arr) = ht_xrealloc((arr), (cap) * sizeof(*(arr)));               \
		}                                                                       \
	} while (0)

/* ---- time series ------------------------------------------------------- */

static void series_add(struct series *s, uint64_t t, uint64_t v)
{
	if (!s->step)
		s->step = 1;
	if (s->offered++ % s->step)
		return;
	if (s->n == HT_HEAPINFO_MAX_SAMPLES) { /* keep every other point */
		size_t o = 0;
		for (size_t i = 0; i < s->n; i += 2, o++) {
			s->t[o] = s->t[i];
			s->v[o] = s->v[i];
		}
		s->n = o;
		s->step *= 2;
	}
	if (s->n >= s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->t = ht_xrealloc(s->t, s->cap * sizeof(*s->t));
		s->v = ht_xrealloc(s->v, s->cap * sizeof(*s->v));
	}
	s->t[s->n] = t;
	s->v[s->n] = v;
	s->n++;
}

/* The last point always shows the latest value. */
static void series_end(struct series *s, uint64_t t, uint64_t v)
{
	if (s->n && s->t[s->n - 1] == t && s->v[s->n - 1] == v)
		return;
	s->step = 1;
	s->offered = 0;
	series_add(s, t, v);
}

/* ---- lookups ------------------------------------------------------------ */

static uint64_t thr_key(const void *arr, size_t i)
{
	return ((const struct thr *)arr)[i].tid;
}

static uint64_t heap_key(const void *arr, size_t i)
{
	return ((const struct heap *)arr)[i].base;
}

static struct thr *thread_lookup(struct ht_heapinfo *h, uint32_t tid);

/* Thread tid's record; ix is the pass's index of the thread (op->thread),
 * the record's own when every event reached the collector (a hint only:
 * UINT32_MAX when there is none). */
static inline struct thr *thread_of(struct ht_heapinfo *h, uint32_t ix, uint32_t tid)
{
	if (ix < h->nthrs && h->thrs[ix].tid == tid)
		return &h->thrs[ix];
	return thread_lookup(h, tid);
}

static struct thr *thread_lookup(struct ht_heapinfo *h, uint32_t tid)
{
	ht_keyindex__reserve(&h->thr_idx, h->nthrs, h->thrs, thr_key);
	size_t k = ht_keyindex__find(&h->thr_idx, tid, h->thrs, thr_key);
	if (h->thr_idx.slot[k])
		return &h->thrs[h->thr_idx.slot[k] - 1];
	GROW(h->thrs, h->nthrs, h->capthrs);
	struct thr *t = &h->thrs[h->nthrs++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->arena = -1;
	t->last_arena = -1;
	h->thr_idx.slot[k] = (uint32_t)h->nthrs;
	return t;
}

static struct heap *heap_lookup(struct ht_heapinfo *h, uint64_t base)
{
	if (!h->heap_idx.cap)
		return NULL;
	size_t k = ht_keyindex__find(&h->heap_idx, base, h->heaps, heap_key);
	if (!h->heap_idx.slot[k])
		return NULL;
	h->last_heap = h->heap_idx.slot[k];
	return &h->heaps[h->last_heap - 1];
}

static inline struct heap *heap_find(struct ht_heapinfo *h, uint64_t base)
{
	if (h->last_heap && h->heaps[h->last_heap - 1].base == base) /* blocks of one heap in a row */
		return &h->heaps[h->last_heap - 1];
	return heap_lookup(h, base);
}

static struct heap *heap_add(struct ht_heapinfo *h, uint64_t base, int arena, int first,
			     uint64_t now)
{
	ht_keyindex__reserve(&h->heap_idx, h->nheaps, h->heaps, heap_key);
	GROW(h->heaps, h->nheaps, h->capheaps);
	struct heap *hp = &h->heaps[h->nheaps++];
	memset(hp, 0, sizeof(*hp));
	hp->base = base;
	hp->arena = arena;
	hp->first = first;
	hp->min_off = UINT64_MAX;
	hp->first_ns = now;
	h->heap_idx.slot[ht_keyindex__find(&h->heap_idx, base, h->heaps, heap_key)] = (uint32_t)h->nheaps;
	h->arenas[arena].nheaps++;
	return hp;
}

static int arena_add(struct ht_heapinfo *h, uint64_t first_heap, uint64_t now, uint32_t tid)
{
	GROW(h->arenas, h->narenas, h->caparenas);
	struct arena *a = &h->arenas[h->narenas];
	memset(a, 0, sizeof(*a));
	a->first_heap = first_heap;
	a->created_ns = now;
	a->creator = tid;
	return (int)h->narenas++;
}

static int in_window(const struct ht_heapinfo *h, uint64_t t)
{
	return t >= h->from;
}

/* The record of thread t in arena ar (a), found or added. */
static struct use *use_lookup(struct arena *ar, struct thr *t, int a, uint64_t now)
{
	struct use *u = NULL;
	for (size_t i = 0; i < ar->nuses; i++)
		if (ar->uses[i].tid == t->tid) {
			u = &ar->uses[i];
			t->last_use = i;
			break;
		}
	if (!u) {
		GROW(ar->uses, ar->nuses, ar->capuses);
		u = &ar->uses[ar->nuses];
		memset(u, 0, sizeof(*u));
		u->tid = t->tid;
		u->first_ns = now;
		t->last_use = ar->nuses++;
	}
	t->last_arena = a;
	return u;
}

/* Thread t allocated in arena a. */
static inline void use(struct ht_heapinfo *h, struct thr *t, int a, uint64_t now)
{
	struct arena *ar = &h->arenas[a];
	ar->allocs++;
	if (!in_window(h, now))
		return;
	struct use *u;
	if (t->last_arena == a && t->last_use < ar->nuses && ar->uses[t->last_use].tid == t->tid)
		u = &ar->uses[t->last_use];
	else
		u = use_lookup(ar, t, a, now);
	u->last_ns = now;
	u->calls++;
}

/* ---- the tcache model: a foreign block back from the thread's tcache ----- */

/* tcache bin of a chunk of usable size u, -1 if none (csize2tidx). */
static int tc_bin(uint64_t usable)
{
	uint64_t csize = usable + G_CHUNK_OVERHEAD;
	if (csize < 32)
		return -1;
	uint64_t b = (csize - 32 + 15) / 16;
	return b < G_TCACHE_BINS ? (int)b : -1;
}

static void tc_put(struct thr *t, uint64_t ptr, uint64_t usable)
{
	int b = tc_bin(usable);
	if (b < 0)
		return;
	if (!t->tc) {
		t->tc = xcalloc((size_t)G_TCACHE_BINS * G_TCACHE_COUNT, sizeof(*t->tc));
		t->tcn = xcalloc(G_TCACHE_BINS, 1);
	}
	uint64_t *bin = &t->tc[(size_t)b * G_TCACHE_COUNT];
	if (t->tcn[b] == G_TCACHE_COUNT) { /* keep the newest */
		memmove(bin, bin + 1, (G_TCACHE_COUNT - 1) * sizeof(*bin));
		t->tcn[b]--;
	}
	bin[t->tcn[b]++] = ptr;
}

/* Whether ptr came back from the thread's tcache (and takes it out). */
static int tc_take(struct thr *t, uint64_t ptr, uint64_t usable)
{
	int b = tc_bin(usable);
	if (b < 0 || !t->tc)
		return 0;
	uint64_t *bin = &t->tc[(size_t)b * G_TCACHE_COUNT];
	for (int i = t->tcn[b] - 1; i >= 0; i--)
		if (bin[i] == ptr) {
			memmove(bin + i, bin + i + 1, (size_t)(t->tcn[b] - 1 - i) * sizeof(*bin));
			t->tcn[b]--;
			return 1;
		}
	return 0;
}

/* ---- lock waits --------------------------------------------------------- */

static unsigned size_class(uint64_t n)
{
	unsigned c = n ? 64 - (unsigned)__builtin_clzll(n) : 0;
	return c < NCLASS ? c : NCLASS - 1;
}

/* Quarter-octave bin of a duration in ticks, and its lower edge. */
static unsigned dur_bin(uint64_t d)
{
	if (d < 4)
		return (unsigned)d;
	unsigned l = 63 - (unsigned)__builtin_clzll(d);
	unsigned b = 4 * (l - 1) + (unsigned)((d >> (l - 2)) & 3);
	return b < NBIN ? b : NBIN - 1;
}

static uint64_t bin_lo(unsigned b)
{
	if (b < 4)
		return b;
	unsigned l = b / 4 + 1;
	if (l >= 63)
		return UINT64_MAX; /* past any real duration */
	return (4ull + (b & 3)) << (l - 2);
}

static void cell_add(struct ht_heapinfo *h, uint64_t key)
{
	if (h->ncells * 2 >= h->capcells) {
		size_t cap = h->capcells ? h->capcells * 2 : 1024;
		struct cell *c = xcalloc(cap, sizeof(*c));
		for (size_t i = 0; i < h->capcells; i++) {
			if (!h->cells[i].key)
				continue;
			size_t k = ht_livemap__hash(h->cells[i].key, cap - 1);
			while (c[k].key)
				k = (k + 1) & (cap - 1);
			c[k] = h->cells[i];
		}
		free(h->cells);
		h->cells = c;
		h->capcells = cap;
	}
	size_t k = ht_livemap__hash(key, h->capcells - 1);
	for (; h->cells[k].key; k = (k + 1) & (h->capcells - 1))
		if (h->cells[k].key == key) {
			h->cells[k].n++;
			return;
		}
	h->cells[k].key = key;
	h->cells[k].n = 1;
	h->ncells++;
}

/* key: owner (thread index * 2, arena index * 2 + 1), dist, bin */
static uint64_t cell_key(uint64_t owner, unsigned dist, unsigned bin)
{
	return (owner + 1) << 20 | (uint64_t)dist << 8 | bin;
}

static void timed_add(struct ht_heapinfo *h, const struct ht_event *e, struct thr *t,
			int arena, uint64_t size)
{
	if (e->kind >= 32 || !in_window(h, e->time_ns))
		return;
	size_t ti = (size_t)(t - h->thrs);
	unsigned di = e->kind * NCLASS + size_class(size);
	struct dist *d = h->dists[di];
	if (!d)
		d = h->dists[di] = xcalloc(1, sizeof(*d));
	unsigned b = dur_bin(e->duration);
	d->bins[b]++;
	d->n++;
	h->timed++;
	if (e->kind != HT_EV_REALLOC && e->kind != HT_EV_REALLOCARRAY)
		h->timed_hot++;
	t->timed++;
	if (e->duration > d->w[WORST_KEEP - 1].dur) {
		int i = WORST_KEEP - 1;
		while (i > 0 && d->w[i - 1].dur < e->duration) {
			d->w[i] = d->w[i - 1];
			i--;
		}
		d->w[i] = (struct worst){e->duration, e->time_ns, e->tid, arena, size, e->kind};
	}
	cell_add(h, cell_key(ti * 2, di, b));
	if (arena >= 0)
		cell_add(h, cell_key((uint64_t)arena * 2 + 1, di, b));
}

/* A call with its duration: in the lock-wait statistics (most have none). */
static inline void timed_call(struct ht_heapinfo *h, const struct ht_event *e, struct thr *t,
			      int arena, uint64_t size)
{
	if (e->duration)
		timed_add(h, e, t, arena, size);
}

/* ---- thresholds --------------------------------------------------------- */

static void change(struct ht_heapinfo *h, const struct ht_event *e, int cause, uint64_t arg,
		   int pins)
{
	if (!in_window(h, e->time_ns))
		return;
	if (h->nchanges >= MAX_CHANGES) {
		h->changes_lost++;
		return;
	}
	GROW(h->changes, h->nchanges, h->capchanges);
	h->changes[h->nchanges++] =
		(struct change){e->time_ns, e->tid, h->mmap_thr, h->trim_thr, cause, arg, pins};
}

/* free() of an mmapped chunk of csize bytes (malloc.c, __libc_free). */
static void free_mmapped(struct ht_heapinfo *h, const struct ht_event *e, uint64_t csize)
{
	uint64_t nomask = csize | 2; /* chunksize_nomask: IS_MMAPPED is set */
	if (!h->no_dyn && nomask > h->mmap_thr && nomask <= G_MMAP_THRESHOLD_MAX) {
		int same = h->mmap_thr == csize && h->trim_thr == 2 * csize;
		h->mmap_thr = csize;
		h->trim_thr = 2 * csize;
		if (!same) /* glibc's probe fires then too; nothing moved */
			change(h, e, 0, csize, 0);
	}
}

static void on_mallopt(struct ht_heapinfo *h, const struct ht_event *e)
{
	int64_t param = (int64_t)e->v[0], value = (int64_t)e->v[1], ret = (int64_t)e->v[2];
	h->mallopts++;
	if (ret != 1)
		return; /* refused: nothing changed */
	uint64_t v = (uint64_t)(int64_t)(int32_t)value; /* an int, as size_t */
	switch (param) {
	case M_TRIM_THRESHOLD:
		h->trim_thr = v;
		change(h, e, (int)param, (uint64_t)value, !h->no_dyn);
		h->no_dyn = 1;
		break;
	case M_MMAP_THRESHOLD:
		h->mmap_thr = v;
		change(h, e, (int)param, (uint64_t)value, !h->no_dyn);
		h->no_dyn = 1;
		break;
	case M_TOP_PAD:
	case M_MMAP_MAX:
		if (!h->no_dyn)
			change(h, e, (int)param, (uint64_t)value, 1);
		h->no_dyn = 1;
		break;
	case M_ARENA_MAX:
		if (value > 0)
			h->arena_max = (uint64_t)value;
		break;
	default:
		break;
	}
}

/* ---- blocks ------------------------------------------------------------- */

static void seed_peaks(struct ht_heapinfo *h)
{
	h->seeded = 1;
	h->peak_req = h->live_req;
	h->peak_use = h->live_use;
	h->mm_peak = h->mm_live;
	for (size_t i = 0; i < h->narenas; i++)
		h->arenas[i].peak = h->arenas[i].live;
	h->brk_peak = h->brk > h->brk_first ? h->brk - h->brk_first : 0;
}

/* The arena a new heap belongs to: see docs/heap.md, "Arenas". */
static int new_heap_arena(struct ht_heapinfo *h, const struct ht_event *e, struct thr *t,
			  int old_arena, uint64_t base, uint64_t off, int *first)
{
	*first = 0;
	if (old_arena > 0) /* realloc grew a block of that arena */
		return old_arena;
	if (t->arena > 0) /* the thread's arena grew a heap */
		return t->arena;
	if (off < G_ARENA_FIRST + 16) /* no room for an arena before it: an
				       * extension, of an arena we cannot tell */
		if (h->narenas > 1)
			return (int)h->narenas - 1;
	*first = 1;
	return arena_add(h, base, e->time_ns, e->tid);
}

/* The block the event handed out (op->acquired); returns its arena, -1 if
 * glibc mmapped it or there is none. */
static inline __attribute__((always_inline)) int
acquire(struct ht_heapinfo *h, const struct ht_event *e, struct thr *t, int old_arena,
	const struct ht_blockop *op)
{
	if (!op->acquired)
		return -1;
	uint64_t p = op->acquired->ptr;
	uint64_t req = ht_event__size(e), usable = e->usable, now = e->time_ns;
	int arena = -1;
	if (e->flags & HT_F_MMAPPED) {
		uint64_t c = usable + G_MMAPPED_OVERHEAD;
		h->mm_live += c;
		h->mm_count++;
		h->mm_bytes += c;
		if (h->mm_live > h->mm_peak && in_window(h, now))
			h->mm_peak = h->mm_live;
		/* sysmalloc mmaps when nb >= mmap_threshold (or the heap cannot grow) */
		uint64_t nb = ht_glibc_usable(req) + G_CHUNK_OVERHEAD;
		if ((e->kind == HT_EV_MALLOC || e->kind == HT_EV_CALLOC) && nb < h->mmap_thr)
			h->below_thr++;
	} else {
		int switched = 0;
		if (e->flags & HT_F_NONMAIN) {
			uint64_t base = p & ~(G_HEAP_MAX - 1);
			struct heap *hp = heap_find(h, base);
			if (!hp) {
				int first;
				int a = new_heap_arena(h, e, t, old_arena, base, p - base, &first);
				hp = heap_add(h, base, a, first, now);
			}
			arena = hp->arena;
			uint64_t off = p - base;
			if (off < hp->min_off)
				hp->min_off = off;
			uint64_t end = off + usable;
			if (end > hp->size) {
				hp->size = end;
				hp->size_ns = now;
				if (in_window(h, now))
					series_add(&hp->s, now, end);
			}
			hp->live += usable;
		} else {
			arena = 0;
		}
		/* Who uses the arena: its own allocations, not realloc in the
		 * block's arena, not a foreign block from its tcache. */
		int own = !(e->kind == HT_EV_REALLOC || e->kind == HT_EV_REALLOCARRAY) ||
			  !ht_event__old_ptr(e);
		if (own && arena != t->arena) {
			if (e->kind == HT_EV_MALLOC || e->kind == HT_EV_REALLOC ||
			    e->kind == HT_EV_REALLOCARRAY)
				switched = !tc_take(t, p, usable);
			else
				switched = 1;
			if (switched)
				t->arena = arena;
		}
		if (own && arena == t->arena)
			use(h, t, arena, now);
		else
			h->arenas[arena].allocs++;
		struct arena *a = &h->arenas[arena];
		a->live += usable;
		a->live_req += req;
		a->blocks++;
		if (a->live > a->peak && in_window(h, now)) {
			a->peak = a->live;
			a->peak_ns = now;
		}
	}
	h->live_req += req;
	h->live_use += usable;
	if (h->live_req > h->peak_req && in_window(h, now)) {
		h->peak_req = h->live_req;
		h->peak_use = h->live_use;
		h->peak_ns = now;
	}
	const struct ht_block *old = op->replaced;
	if (old && !(old->pad & HT_BLOCK_FORGOTTEN)) { /* handed out while live: trust the new */
		h->live_req -= old->size;
		h->live_use -= old->usable;
	}
	op->acquired->pad = (op->acquired->pad & ~HT_BLOCK_ARENA) | (uint32_t)(arena + 1);
	return arena;
}

/* The arena of a live block (its pad), -1 if mmapped. */
static int block_arena(const struct ht_block *b)
{
	return (int)(b->pad & HT_BLOCK_ARENA) - 1;
}

/* Releases the block at ptr (op->released: forgotten blocks were not
 * there for us); returns its arena (-1 mmapped or unknown) and size. */
static inline __attribute__((always_inline)) int
release(struct ht_heapinfo *h, const struct ht_event *e, struct thr *t, uint64_t ptr, int is_free,
	uint64_t *size, const struct ht_blockop *op)
{
	const struct ht_block *bp = op->released;
	*size = 0;
	if (!bp || (bp->pad & HT_BLOCK_FORGOTTEN)) {
		h->unknown_frees++;
		if (is_free && (e->flags & HT_F_MMAPPED))
			h->mmapped_free_unknown++;
		return -1;
	}
	const struct ht_block b = *bp;
	*size = b.size;
	h->live_req -= b.size;
	h->live_use -= b.usable;
	if (!(b.pad & HT_BLOCK_ARENA)) { /* mmapped */
		uint64_t c = b.usable + G_MMAPPED_OVERHEAD;
		h->mm_live -= c;
		if (is_free)
			free_mmapped(h, e, c);
		return -1;
	}
	int arena = block_arena(&b);
	struct arena *a = &h->arenas[arena];
	a->live -= b.usable;
	a->live_req -= b.size;
	a->blocks--;
	if (arena > 0) {
		struct heap *hp = heap_find(h, ptr & ~(G_HEAP_MAX - 1));
		if (hp)
			hp->live -= b.usable;
	}
	/* a block of another arena freed into this thread's tcache may come
	 * back to it (only malloc takes from the tcache) */
	if (arena != t->arena)
		tc_put(t, ptr, b.usable);
	return arena;
}

static void heap_break(struct ht_heapinfo *h, const struct ht_event *e)
{
	uint64_t b = e->v[0];
	if (!h->brk_first)
		h->brk_first = h->start_brk && h->start_brk <= b ? h->start_brk : b;
	uint64_t prev = h->brk ? h->brk : h->brk_first;
	if (b > prev) {
		h->grown += b - prev;
		h->grow_steps++;
	} else if (b < prev) {
		h->shrunk += prev - b;
		h->shrink_steps++;
	}
	h->brk = b;
	uint64_t ext = b > h->brk_first ? b - h->brk_first : 0;
	if (in_window(h, e->time_ns)) {
		if (ext > h->brk_peak) {
			h->brk_peak = ext;
			h->brk_peak_ns = e->time_ns;
		}
		series_add(&h->brk_s, e->time_ns, ext);
	}
}

/* ---- the collector ------------------------------------------------------ */

/* The earliest time at which window_checks has something to do. */
static void set_gate(struct ht_heapinfo *h)
{
	uint64_t g = h->to == UINT64_MAX ? UINT64_MAX : h->to + 1;
	if (!h->seeded && h->from < g)
		g = h->from;
	if (h->rss_peak_ns && !h->rss_taken && h->rss_peak_ns < g)
		g = h->rss_peak_ns;
	h->gate = g;
}

struct ht_heapinfo *ht_heapinfo__new(const struct ht_reader *r)
{
	struct ht_heapinfo *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	const struct ht_trace_info *in = ht_reader__info(r);
	h->start_brk = in->start_brk;
	h->ts_per_ns = in->ts_per_ns > 0 ? in->ts_per_ns : 1;
	h->durations_flag = (in->flags & HT_FILE_F_DURATIONS) != 0;
	h->cmdline = in->cmdline;
	h->pid = in->pid;
	h->mmap_thr = G_MMAP_THRESHOLD;
	h->trim_thr = G_TRIM_THRESHOLD;
	arena_add(h, 0, 0, 0); /* the main arena, glibc's static one */
	ht_heapinfo__window(h, 0, 0);
	return h;
}

void ht_heapinfo__window(struct ht_heapinfo *h, uint64_t from_ns, uint64_t to_ns)
{
	h->from = from_ns;
	h->to = to_ns ? to_ns : UINT64_MAX;
	h->seeded = from_ns == 0;
	set_gate(h);
}

/* The RSS peak in the window: found by finish from the samples; the live
 * bytes at that time are taken as the events pass it. */
static void rss_pick(struct ht_heapinfo *h, const struct ht_reader *r)
{
	const uint64_t *t, *v;
	size_t n = ht_reader__rss_samples(r, &t, &v);
	h->rss_peak_kb = 0;
	for (size_t i = 0; i < n; i++)
		if (t[i] >= h->from && t[i] <= h->to && v[i] > h->rss_peak_kb) {
			h->rss_peak_kb = v[i];
			h->rss_peak_ns = t[i];
		}
	set_gate(h);
}

/* What an event at time now does first, once now reaches the gate: past
 * the window it is ignored (returns 0); at its start the peaks start; at
 * the RSS peak the live bytes are taken. */
static int window_checks(struct ht_heapinfo *h, uint64_t now)
{
	if (now > h->to)
		return 0;
	if (!h->seeded && now >= h->from)
		seed_peaks(h);
	if (h->rss_peak_ns && !h->rss_taken && now >= h->rss_peak_ns) {
		h->rss_taken = 1;
		h->rss_live_req = h->live_req;
		h->rss_live_use = h->live_use;
	}
	set_gate(h);
	return 1;
}

void ht_heapinfo__event(struct ht_heapinfo *h, const struct ht_event *e,
			const struct ht_blockop *op)
{
	uint64_t now = e->time_ns;
	if (__builtin_expect(now >= h->gate, 0) && !window_checks(h, now))
		return;
	h->last_ns = now;
	struct thr *t = thread_of(h, op->thread, e->tid);
	if (!t->first_ns)
		t->first_ns = now ? now : 1;
	t->last_ns = now;
	uint64_t size = 0;
	int arena = -1;
	/* the common calls first (whole events: each counts as a call) */
	if (e->kind == HT_EV_MALLOC) {
		h->calls[HT_EV_MALLOC]++;
		arena = acquire(h, e, t, -1, op);
		timed_call(h, e, t, arena, ht_event__size(e));
		return;
	}
	if (e->kind == HT_EV_FREE) {
		h->calls[HT_EV_FREE]++;
		if (e->v[0])
			arena = release(h, e, t, e->v[0], 1, &size, op);
		timed_call(h, e, t, arena, size);
		return;
	}
	if (ht_event__is_call(e) && e->kind < HT_EV_NR)
		h->calls[e->kind]++;
	switch (e->kind) {
	case HT_EV_REALLOC:
	case HT_EV_REALLOCARRAY: {
		int old_arena = -1;
		uint64_t old = ht_event__old_ptr(e);
		if (ht_event__release_now(e)) {
			old_arena = release(h, e, t, old, 0, &size, op);
		} else if (old) {
			const struct ht_block *b = ht_pass__get(op->live, old, 0);
			old_arena = b ? block_arena(b) : -1;
		}
		if (e->part == HT_PART_RELEASE)
			return;
		arena = acquire(h, e, t, old_arena, op);
		if (arena < 0)
			arena = old_arena;
		timed_call(h, e, t, arena, ht_event__size(e));
		return;
	}
	case HT_EV_MALLOPT:
		on_mallopt(h, e);
		timed_call(h, e, t, 0, 0);
		return;
	case HT_EV_MALLOC_TRIM:
		h->trims++;
		timed_call(h, e, t, -1, 0);
		return;
	case HT_EV_HEAP_BREAK:
		heap_break(h, e);
		return;
	case HT_EV_BRK:
	case HT_EV_SBRK:
		h->own_brk++;
		return;
	case HT_EV_THREAD_START:
		t->started = 1;
		t->start_ns = now;
		return;
	case HT_EV_THREAD_EXIT:
		t->exited = 1;
		t->exit_ns = now;
		return;
	case HT_EV_THREAD_NAME:
		if (e->str)
			snprintf(t->name, sizeof(t->name), "%s", e->str);
		return;
	case HT_EV_CONTROL:
		if (e->v[0] == HT_CTL_RESET) { /* forget the blocks (the pass flags them), keep
						* the heaps */
			h->live_req = h->live_use = h->mm_live = 0;
			for (size_t i = 0; i < h->narenas; i++) {
				h->arenas[i].live = h->arenas[i].live_req = h->arenas[i].blocks = 0;
			}
			for (size_t i = 0; i < h->nheaps; i++)
				h->heaps[i].live = 0;
		}
		return;
	default:
		break;
	}
	if (e->kind < 32 && ht_kind_descs[e->kind].is_alloc) {
		arena = acquire(h, e, t, -1, op);
		timed_call(h, e, t, arena, ht_event__size(e));
	}
}

static int by_dur(const void *a, const void *b)
{
	const struct worst *x = a, *y = b;
	return x->dur < y->dur ? 1 : x->dur > y->dur ? -1 : 0;
}

void ht_heapinfo__finish(struct ht_heapinfo *h, const struct ht_reader *r)
{
	/* the RSS peak: if no event came after it, the live bytes at the end */
	rss_pick(h, r);
	if (!h->rss_taken) {
		h->rss_live_req = h->live_req;
		h->rss_live_use = h->live_use;
	}
	for (size_t i = 0; i < h->nheaps; i++)
		series_end(&h->heaps[i].s, h->heaps[i].size_ns, h->heaps[i].size);
	if (h->brk)
		series_end(&h->brk_s, h->last_ns, h->brk > h->brk_first ? h->brk - h->brk_first : 0);
	/* Each function and size class: the median and p99 of its durations;
	 * slower than both p99 and SLOW_FACTOR x the median is slow. */
	struct worst *all = xcalloc((size_t)32 * NCLASS * WORST_KEEP, sizeof(*all));
	size_t nall = 0;
	for (unsigned di = 0; di < 32 * NCLASS; di++) {
		struct dist *d = h->dists[di];
		if (!d || d->n < MIN_PEERS)
			continue;
		uint64_t acc = 0, med = 0, p99 = 0;
		for (unsigned b = 0; b < NBIN; b++) {
			acc += d->bins[b];
			if (!med && acc * 2 >= d->n)
				med = bin_lo(b) + (bin_lo(b + 1) - bin_lo(b)) / 2;
			if (acc * 100 >= d->n * 99) {
				p99 = bin_lo(b + 1); /* the upper edge of p99's bin */
				break;
			}
		}
		d->median = med ? med : 1;
		uint64_t thr = p99 > SLOW_FACTOR * d->median ? p99 : SLOW_FACTOR * d->median;
		unsigned b = dur_bin(thr);
		d->thr = bin_lo(b) < thr ? bin_lo(b + 1) : bin_lo(b); /* a bin edge: counts
									* by bin are exact */
		for (int k = 0; k < WORST_KEEP; k++)
			if (d->w[k].dur >= d->thr)
				all[nall++] = d->w[k];
	}
	for (size_t i = 0; i < h->capcells; i++) {
		struct cell *c = &h->cells[i];
		if (!c->key)
			continue;
		uint64_t owner = (c->key >> 20) - 1;
		unsigned di = (unsigned)(c->key >> 8) & 0xfff, b = (unsigned)c->key & 0xff;
		struct dist *d = h->dists[di];
		if (!d || !d->thr || bin_lo(b) < d->thr)
			continue;
		if (owner & 1) {
			h->arenas[owner >> 1].slow += c->n;
			continue;
		}
		d->slow += c->n;
		h->thrs[owner >> 1].slow += c->n;
		h->slow += c->n;
	}
	/* the worst calls: also count those of a straddling bin per owner */
	qsort(all, nall, sizeof(*all), by_dur);
	h->nworst = nall < WORST_JSON ? nall : WORST_JSON;
	memcpy(h->worst, all, h->nworst * sizeof(*all));
	for (size_t i = 0; i < nall; i++) {
		struct thr *t = thread_of(h, UINT32_MAX, all[i].tid);
		if (all[i].dur > t->slow_worst)
			t->slow_worst = all[i].dur;
		if (all[i].arena >= 0 && all[i].dur > h->arenas[all[i].arena].slow_worst)
			h->arenas[all[i].arena].slow_worst = all[i].dur;
	}
	for (size_t i = 0; i < h->nworst; i++)
		h->worst_dist[i] = h->dists[h->worst[i].kind * NCLASS + size_class(h->worst[i].size)];
	free(all);
}

void ht_heapinfo__delete(struct ht_heapinfo *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->narenas; i++)
		free(h->arenas[i].uses);
	for (size_t i = 0; i < h->nheaps; i++) {
		free(h->heaps[i].s.t);
		free(h->heaps[i].s.v);
	}
	for (size_t i = 0; i < h->nthrs; i++) {
		free(h->thrs[i].tc);
		free(h->thrs[i].tcn);
	}
	for (unsigned i = 0; i < 32 * NCLASS; i++)
		free(h->dists[i]);
	free(h->brk_s.t);
	free(h->brk_s.v);
	free(h->arenas);
	free(h->heaps);
	free(h->heap_idx.slot);
	free(h->thrs);
	free(h->thr_idx.slot);
	free(h->changes);
	free(h->cells);
	free(h);
}

/* ---- renderers ---------------------------------------------------------- */

static const char *param_name(int p)
{
	switch (p) {
	case M_TRIM_THRESHOLD:
		return "M_TRIM_THRESHOLD";
	case M_TOP_PAD:
		return "M_TOP_PAD";
	case M_MMAP_THRESHOLD:
		return "M_MMAP_THRESHOLD";
	case M_MMAP_MAX:
		return "M_MMAP_MAX";
	default:
		return "?";
	}
}

static double ticks_ns(const struct ht_heapinfo *h, uint64_t ticks)
{
	return (double)ticks / h->ts_per_ns;
}

/* Whole nanoseconds for JSON (every digit kept). */
static uint64_t ticks_ns_u64(const struct ht_heapinfo *h, uint64_t ticks)
{
	return (uint64_t)(ticks_ns(h, ticks) + 0.5);
}

static const char *fmt_ticks(const struct ht_heapinfo *h, char *buf, uint64_t ticks)
{
	return ht_fmt_ns(buf, (uint64_t)ticks_ns(h, ticks));
}

static int by_tid(const void *a, const void *b)
{
	const struct use *x = a, *y = b;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Threads of an arena sorted by tid (a copy, the caller frees it). */
static struct use *sorted_uses(const struct arena *a)
{
	struct use *u = xcalloc(a->nuses, sizeof(*u));
	if (a->nuses) {
		memcpy(u, a->uses, a->nuses * sizeof(*u));
		qsort(u, a->nuses, sizeof(*u), by_tid);
	}
	return u;
}

static const char *arena_name(char *buf, size_t len, const struct ht_heapinfo *h, int i)
{
	if (i == 0 && !h->arenas[0].first_heap)
		snprintf(buf, len, "main");
	else
		snprintf(buf, len, "%d", i);
	return buf;
}

static int lock_durations(const struct ht_heapinfo *h)
{
	return h->durations_flag || h->timed_hot;
}

void ht_heapinfo__text(const struct ht_heapinfo *h, FILE *f)
{
	char b1[32], b2[32], b3[32], nm[32];
	fprintf(f, "%s (pid %d): glibc's heap as the trace shows it\n", h->cmdline ? h->cmdline : "?",
		h->pid);

	fprintf(f, "\narenas: %zu", h->narenas);
	if (h->narenas)
		fprintf(f, " (the main arena and %zu more)", h->narenas - 1);
	if (h->arena_max)
		fprintf(f, ", mallopt(M_ARENA_MAX, %" PRIu64 ")", h->arena_max);
	fprintf(f, "\n");
	if (h->narenas)
		fprintf(f, "  %-6s %5s %10s %10s %9s  %s\n", "arena", "heaps", "in use", "peak",
			"allocs", "threads (first .. last allocation)");
	for (size_t i = 0; i < h->narenas; i++) {
		const struct arena *a = &h->arenas[i];
		struct use *u = sorted_uses(a);
		fprintf(f, "  %-6s %5u %10s %10s %9" PRIu64 " ", arena_name(nm, sizeof(nm), h, (int)i),
			a->nheaps, ht_fmt_bytes(b1, a->live), ht_fmt_bytes(b2, a->peak), a->allocs);
		for (size_t k = 0; k < a->nuses; k++)
			fprintf(f, " %u (%s .. %s)", u[k].tid, ht_fmt_ns(b1, u[k].first_ns),
				ht_fmt_ns(b2, u[k].last_ns));
		if (!a->nuses)
			fprintf(f, " -");
		fprintf(f, "\n");
		free(u);
	}

	fprintf(f, "\nheaps of the other arenas (64 MiB of address space each; size = the highest\n"
		   "block end above the heap's start, headers included):\n");
	if (!h->nheaps)
		fprintf(f, "  none\n");
	for (size_t i = 0; i < h->nheaps; i++) {
		const struct heap *hp = &h->heaps[i];
		fprintf(f, "  0x%" PRIx64 "  arena %-3d from %-10s size %10s (at %s)  in use %10s  %s\n",
			hp->base, hp->arena, ht_fmt_ns(b1, hp->first_ns), ht_fmt_bytes(b2, hp->size),
			ht_fmt_ns(b3, hp->size_ns), ht_fmt_bytes(nm, hp->live),
			hp->first ? "header: heap_info + the arena (2256 bytes)"
				  : "header: heap_info (48 bytes)");
		if (hp->s.n > 1) {
			fprintf(f, "      size over time:");
			size_t stride = hp->s.n > 8 ? hp->s.n / 8 : 1;
			for (size_t k = 0; k < hp->s.n; k += stride)
				fprintf(f, " %s@%s", ht_fmt_bytes(b1, hp->s.v[k]), ht_fmt_ns(b2, hp->s.t[k]));
			fprintf(f, "\n");
		}
	}

	fprintf(f, "\nmain heap (the program break):\n");
	if (!h->brk) {
		fprintf(f, "  the break never moved\n");
	} else {
		fprintf(f, "  start 0x%" PRIx64 "%s, now 0x%" PRIx64 "\n", h->brk_first,
			h->start_brk == h->brk_first ? " (start_brk)" : " (first break seen)", h->brk);
		fprintf(f, "  sbrk total: %" PRIu64 " bytes raised in %" PRIu64 " steps, %" PRIu64
			   " bytes trimmed in %" PRIu64 " steps\n",
			h->grown, h->grow_steps, h->shrunk, h->shrink_steps);
		fprintf(f, "  size at the end %s, peak %s at %s\n",
			ht_fmt_bytes(b1, h->brk > h->brk_first ? h->brk - h->brk_first : 0),
			ht_fmt_bytes(b2, h->brk_peak), ht_fmt_ns(b3, h->brk_peak_ns));
	}
	if (h->own_brk)
		fprintf(f, "  the program called brk/sbrk itself %" PRIu64 " times\n", h->own_brk);

	fprintf(f, "\nmmap and trim thresholds (start: glibc's defaults, mmap %" PRIu64
		   " bytes, trim %" PRIu64 " bytes):\n",
		G_MMAP_THRESHOLD, G_TRIM_THRESHOLD);
	if (!h->nchanges)
		fprintf(f, "  no change\n");
	for (size_t i = 0; i < h->nchanges; i++) {
		const struct change *c = &h->changes[i];
		fprintf(f, "  %10s  thread %-7u ", ht_fmt_ns(b1, c->time_ns), c->tid);
		if (!c->cause)
			fprintf(f, "free of an mmapped chunk of %" PRIu64 " bytes", c->arg);
		else
			fprintf(f, "mallopt(%s, %" PRId64 ")", param_name(c->cause), (int64_t)c->arg);
		fprintf(f, ": New thresholds:: mmap: %" PRIu64 " bytes, trim: %" PRIu64 " bytes%s\n",
			c->mmap, c->trim, c->pins ? " (the dynamic threshold is off from here)" : "");
	}
	if (h->changes_lost)
		fprintf(f, "  ... and %" PRIu64 " more changes\n", h->changes_lost);
	if (h->below_thr)
		fprintf(f, "  note: %" PRIu64 " blocks were mmapped below the threshold modelled here:\n"
			   "  the program likely ran with GLIBC_TUNABLES (glibc.malloc.mmap_threshold\n"
			   "  and the like), which the trace does not record\n",
			h->below_thr);

	fprintf(f, "\nlock waits (calls far slower than their peers: above p99 and %dx the median\n"
		   "of the same function and size class):\n", SLOW_FACTOR);
	if (!lock_durations(h)) {
		fprintf(f, "  the trace times only realloc; record with `heaptrail record --durations`\n"
			   "  to time every malloc-API call\n");
	}
	if (!h->timed) {
		fprintf(f, "  no timed calls\n");
	} else {
		fprintf(f, "  %" PRIu64 " slow calls of %" PRIu64 " timed\n", h->slow, h->timed);
		for (size_t i = 0; i < h->nthrs; i++) {
			const struct thr *t = &h->thrs[i];
			if (t->slow)
				fprintf(f, "  thread %-7u %6" PRIu64 " slow of %9" PRIu64
					   " timed, the worst %s\n",
					t->tid, t->slow, t->timed, fmt_ticks(h, b1, t->slow_worst));
		}
		for (size_t i = 0; i < h->narenas; i++) {
			const struct arena *a = &h->arenas[i];
			if (a->slow)
				fprintf(f, "  arena %-8s %6" PRIu64 " slow, the worst %s\n",
					arena_name(nm, sizeof(nm), h, (int)i), a->slow,
					fmt_ticks(h, b1, a->slow_worst));
		}
		for (size_t i = 0; i < h->nworst && i < WORST_SHOW; i++) {
			const struct worst *w = &h->worst[i];
			fprintf(f, "  %10s  thread %-7u %-14s %9" PRIu64 " bytes  arena %-5s %10s (median %s)\n",
				ht_fmt_ns(b1, w->time_ns), w->tid, ht_kind_descs[w->kind].name, w->size,
				w->arena >= 0 ? arena_name(nm, sizeof(nm), h, w->arena) : "-",
				fmt_ticks(h, b2, w->dur), fmt_ticks(h, b3, h->worst_dist[i]->median));
		}
	}

	fprintf(f, "\nsummary:\n");
	fprintf(f, "  calls: malloc %" PRIu64 ", free %" PRIu64 ", calloc %" PRIu64
		   ", realloc %" PRIu64 ", memalign family %" PRIu64 ", mallopt %" PRIu64
		   ", malloc_trim %" PRIu64 "\n",
		h->calls[HT_EV_MALLOC], h->calls[HT_EV_FREE], h->calls[HT_EV_CALLOC],
		h->calls[HT_EV_REALLOC] + h->calls[HT_EV_REALLOCARRAY],
		h->calls[HT_EV_MEMALIGN] + h->calls[HT_EV_POSIX_MEMALIGN] +
			h->calls[HT_EV_ALIGNED_ALLOC] + h->calls[HT_EV_VALLOC] + h->calls[HT_EV_PVALLOC],
		h->calls[HT_EV_MALLOPT], h->calls[HT_EV_MALLOC_TRIM]);
	fprintf(f, "  arenas %zu, heaps %zu, sbrk total %" PRIu64 " bytes, threshold changes %zu\n",
		h->narenas, h->nheaps, h->grown, h->nchanges);
	fprintf(f, "  mmapped chunks: %" PRIu64 " (%s), %s at the peak, %s at the end\n", h->mm_count,
		ht_fmt_bytes(b1, h->mm_bytes), ht_fmt_bytes(b2, h->mm_peak), ht_fmt_bytes(b3, h->mm_live));
	fprintf(f, "  final thresholds: mmap %" PRIu64 " bytes, trim %" PRIu64 " bytes%s\n", h->mmap_thr,
		h->trim_thr, h->no_dyn ? " (fixed by mallopt)" : " (dynamic)");
	fprintf(f, "  in use at the peak (%s): %s requested in %s usable (%.1f%% overhead)\n",
		ht_fmt_ns(b1, h->peak_ns), ht_fmt_bytes(b2, h->peak_req), ht_fmt_bytes(b3, h->peak_use),
		h->peak_use ? 100.0 * (double)(h->peak_use - h->peak_req) / (double)h->peak_use : 0.0);
	fprintf(f, "  in use at the end: %s requested in %s usable (%.1f%% overhead)\n",
		ht_fmt_bytes(b1, h->live_req), ht_fmt_bytes(b2, h->live_use),
		h->live_use ? 100.0 * (double)(h->live_use - h->live_req) / (double)h->live_use : 0.0);
	if (h->rss_peak_kb)
		fprintf(f, "  RSS peak %s at %s, when %s was in use (%.2fx)\n",
			ht_fmt_bytes(b1, h->rss_peak_kb * 1024), ht_fmt_ns(b2, h->rss_peak_ns),
			ht_fmt_bytes(b3, h->rss_live_use),
			h->rss_live_use ? (double)h->rss_peak_kb * 1024 / (double)h->rss_live_use : 0.0);
	if (h->unknown_frees)
		fprintf(f, "  %" PRIu64 " frees of blocks the trace did not see allocated%s\n",
			h->unknown_frees,
			h->mmapped_free_unknown ? " (mmapped ones among them could have moved the threshold)"
						: "");
}

void ht_heapinfo__json(const struct ht_heapinfo *h, struct ht_json *j)
{
	ht_json__arr_begin(j, "arenas");
	for (size_t i = 0; i < h->narenas; i++) {
		const struct arena *a = &h->arenas[i];
		struct use *u = sorted_uses(a);
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "arena", i);
		ht_json__bool(j, "main", a->first_heap == 0);
		if (a->first_heap)
			ht_json__u64(j, "first_heap", a->first_heap);
		ht_json__u64(j, "created_ns", a->created_ns);
		ht_json__arr_begin(j, "threads");
		for (size_t k = 0; k < a->nuses; k++)
			ht_json__u64(j, NULL, u[k].tid);
		ht_json__arr_end(j);
		ht_json__arr_begin(j, "uses");
		for (size_t k = 0; k < a->nuses; k++) {
			ht_json__obj_begin(j, NULL);
			ht_json__u64(j, "tid", u[k].tid);
			ht_json__u64(j, "first_ns", u[k].first_ns);
			ht_json__u64(j, "last_ns", u[k].last_ns);
			ht_json__u64(j, "allocations", u[k].calls);
			ht_json__obj_end(j);
		}
		ht_json__arr_end(j);
		ht_json__arr_begin(j, "heaps");
		for (size_t k = 0; k < h->nheaps; k++)
			if (h->heaps[k].arena == (int)i)
				ht_json__u64(j, NULL, h->heaps[k].base);
		ht_json__arr_end(j);
		ht_json__u64(j, "allocations", a->allocs);
		ht_json__u64(j, "live_bytes", a->live);
		ht_json__u64(j, "live_requested_bytes", a->live_req);
		ht_json__u64(j, "live_blocks", a->blocks);
		ht_json__u64(j, "peak_bytes", a->peak);
		ht_json__u64(j, "slow_calls", a->slow);
		ht_json__obj_end(j);
		free(u);
	}
	ht_json__arr_end(j);

	ht_json__arr_begin(j, "heaps");
	for (size_t i = 0; i < h->nheaps; i++) {
		const struct heap *hp = &h->heaps[i];
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "base", hp->base);
		ht_json__u64(j, "arena", (uint64_t)hp->arena);
		ht_json__bool(j, "arena_first_heap", hp->first);
		ht_json__u64(j, "header_bytes", hp->first ? G_ARENA_FIRST : G_HEAP_INFO);
		ht_json__u64(j, "first_ns", hp->first_ns);
		ht_json__u64(j, "size_bytes", hp->size);
		ht_json__u64(j, "live_bytes", hp->live);
		ht_json__arr_begin(j, "sizes");
		for (size_t k = 0; k < hp->s.n; k++) {
			ht_json__arr_begin(j, NULL);
			ht_json__u64(j, NULL, hp->s.t[k]);
			ht_json__u64(j, NULL, hp->s.v[k]);
			ht_json__arr_end(j);
		}
		ht_json__arr_end(j);
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);

	ht_json__obj_begin(j, "main_heap");
	ht_json__u64(j, "start", h->brk_first);
	ht_json__u64(j, "break", h->brk);
	ht_json__u64(j, "sbrk_bytes", h->grown);
	ht_json__u64(j, "grow_steps", h->grow_steps);
	ht_json__u64(j, "trimmed_bytes", h->shrunk);
	ht_json__u64(j, "trim_steps", h->shrink_steps);
	ht_json__u64(j, "size_bytes", h->brk > h->brk_first ? h->brk - h->brk_first : 0);
	ht_json__u64(j, "peak_bytes", h->brk_peak);
	ht_json__u64(j, "peak_ns", h->brk_peak_ns);
	ht_json__u64(j, "program_brk_calls", h->own_brk);
	ht_json__obj_end(j);
	ht_json__u64(j, "sbrk_bytes", h->grown);

	ht_json__obj_begin(j, "threshold_start");
	ht_json__u64(j, "mmap", G_MMAP_THRESHOLD);
	ht_json__u64(j, "trim", G_TRIM_THRESHOLD);
	ht_json__obj_end(j);
	ht_json__arr_begin(j, "thresholds");
	for (size_t i = 0; i < h->nchanges; i++) {
		const struct change *c = &h->changes[i];
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "time_ns", c->time_ns);
		ht_json__u64(j, "tid", c->tid);
		ht_json__u64(j, "mmap", c->mmap);
		ht_json__u64(j, "trim", c->trim);
		if (!c->cause) {
			ht_json__str(j, "cause", "free");
			ht_json__u64(j, "chunk_bytes", c->arg);
		} else {
			ht_json__str(j, "cause", "mallopt");
			ht_json__str(j, "param", param_name(c->cause));
			ht_json__i64(j, "value", (int64_t)c->arg);
		}
		ht_json__bool(j, "dynamic_off", c->pins);
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__obj_begin(j, "threshold_end");
	ht_json__u64(j, "mmap", h->mmap_thr);
	ht_json__u64(j, "trim", h->trim_thr);
	ht_json__bool(j, "dynamic", !h->no_dyn);
	ht_json__obj_end(j);

	ht_json__obj_begin(j, "lock_waits");
	ht_json__bool(j, "durations", lock_durations(h));
	ht_json__u64(j, "timed_calls", h->timed);
	ht_json__u64(j, "slow_calls", h->slow);
	ht_json__arr_begin(j, "threads");
	for (size_t i = 0; i < h->nthrs; i++) {
		const struct thr *t = &h->thrs[i];
		if (!t->timed)
			continue;
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "tid", t->tid);
		ht_json__u64(j, "timed_calls", t->timed);
		ht_json__u64(j, "slow_calls", t->slow);
		ht_json__u64(j, "worst_ns", ticks_ns_u64(h, t->slow_worst));
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__arr_begin(j, "arenas");
	for (size_t i = 0; i < h->narenas; i++) {
		if (!h->arenas[i].slow)
			continue;
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "arena", i);
		ht_json__u64(j, "slow_calls", h->arenas[i].slow);
		ht_json__u64(j, "worst_ns", ticks_ns_u64(h, h->arenas[i].slow_worst));
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__arr_begin(j, "classes"); /* each function and size class judged */
	for (unsigned di = 0; di < 32 * NCLASS; di++) {
		const struct dist *d = h->dists[di];
		if (!d || !d->thr)
			continue;
		ht_json__obj_begin(j, NULL);
		ht_json__str(j, "function", ht_kind_descs[di / NCLASS].name);
		ht_json__u64(j, "size_bits", di % NCLASS);
		ht_json__u64(j, "calls", d->n);
		ht_json__u64(j, "slow_calls", d->slow);
		ht_json__u64(j, "median_ns", ticks_ns_u64(h, d->median));
		ht_json__u64(j, "threshold_ns", ticks_ns_u64(h, d->thr));
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__arr_begin(j, "worst");
	for (size_t i = 0; i < h->nworst; i++) {
		const struct worst *w = &h->worst[i];
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "time_ns", w->time_ns);
		ht_json__u64(j, "tid", w->tid);
		ht_json__str(j, "function", ht_kind_descs[w->kind].name);
		ht_json__u64(j, "size", w->size);
		if (w->arena >= 0)
			ht_json__u64(j, "arena", (uint64_t)w->arena);
		else
			ht_json__null(j, "arena");
		ht_json__u64(j, "duration_ns", ticks_ns_u64(h, w->dur));
		ht_json__u64(j, "median_ns", ticks_ns_u64(h, h->worst_dist[i]->median));
		ht_json__u64(j, "threshold_ns", ticks_ns_u64(h, h->worst_dist[i]->thr));
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__obj_end(j);

	ht_json__obj_begin(j, "summary");
	ht_json__u64(j, "malloc", h->calls[HT_EV_MALLOC]);
	ht_json__u64(j, "free", h->calls[HT_EV_FREE]);
	ht_json__u64(j, "calloc", h->calls[HT_EV_CALLOC]);
	ht_json__u64(j, "realloc", h->calls[HT_EV_REALLOC] + h->calls[HT_EV_REALLOCARRAY]);
	ht_json__u64(j, "mallopt", h->calls[HT_EV_MALLOPT]);
	ht_json__u64(j, "malloc_trim", h->calls[HT_EV_MALLOC_TRIM]);
	ht_json__u64(j, "arenas", h->narenas);
	ht_json__u64(j, "heaps", h->nheaps);
	ht_json__u64(j, "mmapped_chunks", h->mm_count);
	ht_json__u64(j, "mmapped_bytes", h->mm_bytes);
	ht_json__u64(j, "mmapped_peak_bytes", h->mm_peak);
	ht_json__u64(j, "mmapped_below_threshold", h->below_thr);
	ht_json__u64(j, "peak_ns", h->peak_ns);
	ht_json__u64(j, "peak_requested_bytes", h->peak_req);
	ht_json__u64(j, "peak_usable_bytes", h->peak_use);
	ht_json__u64(j, "end_requested_bytes", h->live_req);
	ht_json__u64(j, "end_usable_bytes", h->live_use);
	ht_json__u64(j, "rss_peak_bytes", h->rss_peak_kb * 1024);
	ht_json__u64(j, "rss_peak_ns", h->rss_peak_ns);
	ht_json__u64(j, "rss_peak_live_requested_bytes", h->rss_live_req);
	ht_json__u64(j, "rss_peak_live_usable_bytes", h->rss_live_use);
	ht_json__u64(j, "unknown_frees", h->unknown_frees);
	ht_json__obj_end(j);
}

/* ---- HTML --------------------------------------------------------------- */

static void html_series(FILE *f, const struct series *s, uint64_t tmax, uint64_t vmax,
			const char *color, int w, int ht)
{
	if (!s->n)
		return;
	fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
	double px = 0, py = ht;
	for (size_t i = 0; i < s->n; i++) {
		double x = tmax ? (double)s->t[i] * w / (double)tmax : 0;
		double y = ht - (vmax ? (double)s->v[i] * ht / (double)vmax : 0);
		if (i)
			fprintf(f, "%.1f,%.1f ", x, py); /* steps: the size holds until the next */
		fprintf(f, "%.1f,%.1f ", x, y);
		px = x;
		py = y;
	}
	fprintf(f, "%.1f,%.1f\"/>\n", px > w ? px : (double)w, py);
}

void ht_heapinfo__html(const struct ht_heapinfo *h, FILE *f)
{
	char b1[32], b2[32], nm[32];
	static const char *const colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e",
					     "#9467bd", "#8c564b", "#e377c2", "#17becf"};
	/* the page around it (report) gives the section its heading */
	fprintf(f, "<section class=\"ht-heap\">\n<h3>Arenas</h3>\n");
	fprintf(f, "<table>\n<tr><th>arena</th><th>heaps</th><th>in use</th><th>peak</th>"
		   "<th>allocations</th><th>threads (first .. last allocation)</th></tr>\n");
	for (size_t i = 0; i < h->narenas; i++) {
		const struct arena *a = &h->arenas[i];
		struct use *u = sorted_uses(a);
		fprintf(f, "<tr><td>%s</td><td>%u</td><td>%s</td><td>%s</td><td>%" PRIu64 "</td><td>",
			arena_name(nm, sizeof(nm), h, (int)i), a->nheaps, ht_fmt_bytes(b1, a->live),
			ht_fmt_bytes(b2, a->peak), a->allocs);
		for (size_t k = 0; k < a->nuses; k++)
			fprintf(f, "%s%u (%s .. %s)", k ? ", " : "", u[k].tid,
				ht_fmt_ns(b1, u[k].first_ns), ht_fmt_ns(b2, u[k].last_ns));
		fprintf(f, "</td></tr>\n");
		free(u);
	}
	fprintf(f, "</table>\n");
	/* the heap sizes and the break over time */
	uint64_t tmax = h->last_ns, vmax = h->brk_peak;
	for (size_t i = 0; i < h->nheaps; i++)
		if (h->heaps[i].size > vmax)
			vmax = h->heaps[i].size;
	const int w = 720, ht = 240, ml = 70, mb = 30;
	fprintf(f, "<h3>Heap sizes over time</h3>\n");
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		   "font-family=\"sans-serif\" font-size=\"11\">\n", w + ml + 10, ht + mb + 10);
	fprintf(f, "<g transform=\"translate(%d,5)\">\n", ml);
	fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n", w, ht);
	fprintf(f, "<text x=\"-5\" y=\"10\" text-anchor=\"end\">%s</text>\n", ht_fmt_bytes(b1, vmax));
	fprintf(f, "<text x=\"-5\" y=\"%d\" text-anchor=\"end\">0</text>\n", ht);
	fprintf(f, "<text x=\"0\" y=\"%d\">0</text>\n", ht + 15);
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", w, ht + 15,
		ht_fmt_ns(b1, tmax));
	html_series(f, &h->brk_s, tmax, vmax, "#000", w, ht);
	for (size_t i = 0; i < h->nheaps; i++)
		html_series(f, &h->heaps[i].s, tmax, vmax, colors[i % 8], w, ht);
	fprintf(f, "</g>\n</svg>\n");
	/* a legend of the lines drawn, and only of those */
	fprintf(f, "<p class=\"legend\">");
	int drawn = 0;
	if (h->brk_s.n)
		fprintf(f, "<span style=\"color:#000\">&#9644;</span> the main heap (program "
			   "break above its start) "),
			drawn++;
	for (size_t i = 0; i < h->nheaps; i++) {
		if (!h->heaps[i].s.n)
			continue;
		fprintf(f, "<span style=\"color:%s\">&#9644;</span> heap %zu of arena %s (highest "
			   "block end) ",
			colors[i % 8], i, arena_name(nm, sizeof(nm), h, h->heaps[i].arena));
		drawn++;
	}
	if (!drawn)
		fprintf(f, "no heap grew or shrank during the trace: nothing to draw");
	fprintf(f, "</p>\n");
	fprintf(f, "<table>\n<tr><th>time</th><th>thread</th><th>cause</th><th>mmap threshold</th>"
		   "<th>trim threshold</th></tr>\n");
	for (size_t i = 0; i < h->nchanges; i++) {
		const struct change *c = &h->changes[i];
		fprintf(f, "<tr><td>%s</td><td>%u</td><td>", ht_fmt_ns(b1, c->time_ns), c->tid);
		if (!c->cause)
			fprintf(f, "free of an mmapped chunk of %" PRIu64 " bytes", c->arg);
		else
			fprintf(f, "mallopt(%s, %" PRId64 ")", param_name(c->cause), (int64_t)c->arg);
		fprintf(f, "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td></tr>\n", c->mmap, c->trim);
	}
	fprintf(f, "</table>\n</section>\n");
}
