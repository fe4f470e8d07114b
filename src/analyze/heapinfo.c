/* glibc's arenas, heaps, break, thresholds and lock waits from a trace
 * (heapinfo.h).  Every glibc fact used here is listed, with its place in
 * glibc 2.36's malloc/malloc.c and malloc/arena.c, in docs/heap.md. */
#define _GNU_SOURCE
#include "heapinfo_model.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/keyindex.h"
#include "analyze/pass.h"
#include "common/json.h"
#include "common/util.h"

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
	t->split_arena = -1;
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
	if (!in_window(h, now))
		return;
	ar->allocs++; /* (those in the window, as its uses and the calls) */
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
		t->tc = ht_xcalloc((size_t)G_TCACHE_BINS * G_TCACHE_COUNT, sizeof(*t->tc));
		t->tcn = ht_xcalloc(G_TCACHE_BINS, 1);
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
		struct cell *c = ht_xcalloc(cap, sizeof(*c));
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
		d = h->dists[di] = ht_xcalloc(1, sizeof(*d));
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

/* At the window's start (--from) the peaks start from what is in use then,
 * and that is when they were reached until the window passes them: the
 * time of a peak is in the window.  (It kept the time of no event, 0 ns:
 * "peak 7.8 MiB at 0 ns" for a break raised at 91 ms, seen from 250 ms.)
 * The thresholds the window starts from are those then too (it said
 * glibc's defaults beside a final threshold a free before it had set). */
static void seed_peaks(struct ht_heapinfo *h)
{
	h->seeded = 1;
	h->mmap_thr_start = h->mmap_thr;
	h->trim_thr_start = h->trim_thr;
	h->no_dyn_start = h->no_dyn;
	h->peak_req = h->live_req;
	h->peak_use = h->live_use;
	h->peak_ns = h->from;
	h->peak_carried = h->live_req > 0;
	h->mm_peak = h->mm_live;
	for (size_t i = 0; i < h->narenas; i++) {
		h->arenas[i].peak = h->arenas[i].live;
		h->arenas[i].peak_ns = h->from;
	}
	h->brk_peak = h->brk > h->brk_first ? h->brk - h->brk_first : 0;
	h->brk_peak_ns = h->from;
	h->brk_peak_carried = h->brk_peak > 0;
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
	uint64_t w = op->acquired->weight; /* > 1 in a sampled trace */
	int arena = -1;
	if (e->flags & HT_F_MMAPPED) {
		uint64_t c = usable + G_MMAPPED_OVERHEAD;
		h->mm_live += c * w;
		if (in_window(h, now)) { /* (made in the window: --from) */
			h->mm_count += w;
			h->mm_bytes += c * w;
			if ((op->released && (op->released->pad & HT_BLOCK_MMAPPED)) ||
			    (e->part == HT_PART_ACQUIRE && t->split_mmapped))
				h->mm_resized += w; /* (a realloc that mremapped one) */
		}
		if (h->mm_live > h->mm_peak && in_window(h, now))
			h->mm_peak = h->mm_live;
		/* sysmalloc mmaps when nb >= mmap_threshold (or the heap cannot grow) */
		uint64_t nb = ht_glibc_usable(req) + G_CHUNK_OVERHEAD;
		if ((e->kind == HT_EV_MALLOC || e->kind == HT_EV_CALLOC) && nb < h->mmap_thr &&
		    in_window(h, now))
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
			hp->live += usable * w;
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
		else if (in_window(h, now))
			h->arenas[arena].allocs++;
		struct arena *a = &h->arenas[arena];
		if (in_window(h, now))
			a->allocs += w - 1; /* (use counted the call once) */
		a->live += usable * w;
		a->live_req += req * w;
		a->blocks += w;
		if (a->live > a->peak && in_window(h, now)) {
			a->peak = a->live;
			a->peak_ns = now;
		}
	}
	h->live_req += req * w;
	h->live_use += usable * w;
	if (h->live_req > h->peak_req && in_window(h, now)) {
		h->peak_req = h->live_req;
		h->peak_use = h->live_use;
		h->peak_ns = now;
		h->peak_carried = 0;
	}
	const struct ht_block *old = op->replaced;
	if (old && !(old->pad & HT_BLOCK_FORGOTTEN)) { /* handed out while live: trust the new */
		h->live_req -= old->size * old->weight;
		h->live_use -= old->usable * old->weight;
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
		if (in_window(h, e->time_ns)) {
			h->unknown_frees++;
			if (is_free && (e->flags & HT_F_MMAPPED))
				h->mmapped_free_unknown++;
		}
		return -1;
	}
	const struct ht_block b = *bp;
	uint64_t w = b.weight; /* > 1 in a sampled trace */
	*size = b.size;
	h->live_req -= b.size * w;
	h->live_use -= b.usable * w;
	if (!(b.pad & HT_BLOCK_ARENA)) { /* mmapped */
		uint64_t c = b.usable + G_MMAPPED_OVERHEAD;
		h->mm_live -= c * w;
		if (is_free)
			free_mmapped(h, e, c);
		return -1;
	}
	int arena = block_arena(&b);
	struct arena *a = &h->arenas[arena];
	a->live -= b.usable * w;
	a->live_req -= b.size * w;
	a->blocks -= w;
	if (arena > 0) {
		struct heap *hp = heap_find(h, ptr & ~(G_HEAP_MAX - 1));
		if (hp)
			hp->live -= b.usable * w;
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
	h->brk = b;
	uint64_t ext = b > h->brk_first ? b - h->brk_first : 0;
	if (in_window(h, e->time_ns)) { /* (the steps made in it, as the calls) */
		if (b > prev) {
			h->grown += b - prev;
			h->grow_steps++;
		} else if (b < prev) {
			h->shrunk += prev - b;
			h->shrink_steps++;
		}
		if (ext > h->brk_peak) {
			h->brk_peak = ext;
			h->brk_peak_ns = e->time_ns;
			h->brk_peak_carried = 0;
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
	h->fast_ix = UINT32_MAX;
	h->r = r;
	h->sampled = (in->flags & HT_FILE_F_SAMPLED) != 0;
	arena_add(h, 0, 0, 0); /* the main arena, glibc's static one */
	ht_heapinfo__window(h, 0, 0);
	return h;
}

static void rss_pick(struct ht_heapinfo *h, const struct ht_reader *r);

void ht_heapinfo__window(struct ht_heapinfo *h, uint64_t from_ns, uint64_t to_ns)
{
	h->from = from_ns;
	h->to = to_ns ? to_ns : UINT64_MAX;
	h->seeded = from_ns == 0;
	h->mmap_thr_start = h->mmap_thr; /* (before the events: glibc's defaults) */
	h->trim_thr_start = h->trim_thr;
	h->no_dyn_start = h->no_dyn;
	rss_pick(h, h->r);
	set_gate(h);
}

/* The RSS peak in the window, from the samples of the clock chunks, which
 * the reader has from the start (a trace being followed gets more later:
 * finish picks again); the live bytes at that time are taken as the events
 * pass it (window_checks).  (It was picked by finish only, after every
 * event had passed: the live bytes shown beside the peak were those at the
 * end, 1.9 KiB beside a 50 MiB RSS peak that 48 MiB of blocks made.) */
static void rss_pick(struct ht_heapinfo *h, const struct ht_reader *r)
{
	const uint64_t *t, *v;
	size_t n = r ? ht_reader__rss_samples(r, &t, &v) : 0;
	h->rss_peak_kb = h->rss_peak_ns = 0;
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

/* What event_fast takes from the state of thread ix (tid) at time now,
 * if it qualifies. */
static void fast_setup(struct ht_heapinfo *h, uint32_t ix, uint32_t tid, uint64_t now)
{
	h->fast_ix = UINT32_MAX;
	if (ix >= h->nthrs || h->sampled)
		return; /* (the fast paths count every block once) */
	struct thr *t = &h->thrs[ix];
	if (t->tid != tid || t->arena != 0 || !t->first_ns)
		return;
	struct arena *a = &h->arenas[0];
	struct use *u = NULL;
	if (in_window(h, now)) {
		if (t->last_arena != 0 || t->last_use >= a->nuses || a->uses[t->last_use].tid != t->tid)
			return;
		u = &a->uses[t->last_use];
	}
	h->fast_ix = ix;
	h->fast_thr = t;
	h->fast_use = u;
}

static void event_apply(struct ht_heapinfo *h, const struct ht_event *e,
			const struct ht_blockop *op);

/* Every event event_fast does not take. */
static __attribute__((noinline)) void event_slow(struct ht_heapinfo *h,
						 const struct ht_event *e,
						 const struct ht_blockop *op)
{
	h->fast_ix = UINT32_MAX; /* (it may move threads, arenas and uses) */
	event_apply(h, e, op);
	fast_setup(h, op->thread, e->tid, e->time_ns);
}

static void event_apply(struct ht_heapinfo *h, const struct ht_event *e,
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
		h->calls[HT_EV_MALLOC] += in_window(h, now) ? op->weight : 0;
		arena = acquire(h, e, t, -1, op);
		timed_call(h, e, t, arena, ht_event__size(e));
		return;
	}
	if (e->kind == HT_EV_FREE) {
		/* (a sampled block's free stands for as many as its weight) */
		h->calls[HT_EV_FREE] +=
			!in_window(h, now) ? 0 : op->released ? op->released->weight : 1;
		if (e->v[0])
			arena = release(h, e, t, e->v[0], 1, &size, op);
		timed_call(h, e, t, arena, size);
		return;
	}
	if (ht_event__is_call(e) && e->kind < HT_EV_NR)
		h->calls[e->kind] += in_window(h, now) ? op->weight : 0;
	switch (e->kind) {
	case HT_EV_REALLOC:
	case HT_EV_REALLOCARRAY: {
		int old_arena = -1;
		uint64_t old = ht_event__old_ptr(e);
		if (e->part == HT_PART_ACQUIRE) {
			/* The RELEASE part released the old block: its arena is
			 * where glibc grew the new one (a new heap there is that
			 * arena's, not the thread's: docs/heap.md, "Which arena a new
			 * heap belongs to"). */
			old_arena = t->split_arena;
			t->split_arena = -1;
		} else if (ht_event__release_now(e)) {
			/* realloc(p, 0) (and reallocarray(p, 0, n)) is glibc's
			 * __libc_free (p), which moves the dynamic threshold as
			 * free does; a realloc that moves p does not. */
			int frees = !ht_event__result_ptr(e);
			old_arena = release(h, e, t, old, frees, &size, op);
		} else if (old) {
			const struct ht_block *b = ht_pass__get(op->live, old, 0);
			old_arena = b ? block_arena(b) : -1;
		}
		if (e->part == HT_PART_RELEASE) {
			t->split_mmapped = op->released && (op->released->pad & HT_BLOCK_MMAPPED);
			t->split_arena = old_arena;
			return;
		}
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
		h->own_brk += (unsigned)in_window(h, now);
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

/* What both fast paths do for a malloc or calloc they take, once it
 * qualifies: the counts of the call, of arena a (ar) and of heap hp (NULL
 * in the main arena), the peaks in the window, the block's arena; u is the
 * thread's use of the arena (NULL out of the window). */
static inline __attribute__((always_inline)) void
fast_acquire(struct ht_heapinfo *h, const struct ht_event *e, struct thr *t, struct arena *a,
	     int ar, struct heap *hp, struct use *u, struct ht_block *b, int win)
{
	uint64_t now = e->time_ns;
	if (u) {
		u->last_ns = now;
		u->calls++;
	}
	h->last_ns = now;
	t->last_ns = now;
	h->calls[e->kind] += (unsigned)win; /* (calls: those in the window) */
	uint64_t req = e->kind == HT_EV_MALLOC ? (e->nv > 0 ? e->v[0] : 0)
					       : (e->nv > 1 ? e->v[0] * e->v[1] : 0),
		 usable = e->usable; /* (ht_event__size, for these two) */
	if (hp)
		hp->live += usable;
	a->allocs += (unsigned)win;
	a->live += usable;
	a->live_req += req;
	a->blocks++;
	if (a->live > a->peak && win) {
		a->peak = a->live;
		a->peak_ns = now;
	}
	h->live_req += req;
	h->live_use += usable;
	if (h->live_req > h->peak_req && win) {
		h->peak_req = h->live_req;
		h->peak_use = h->live_use;
		h->peak_ns = now;
		h->peak_carried = 0;
	}
	b->pad = (b->pad & ~HT_BLOCK_ARENA) | (uint32_t)(ar + 1);
}

/* What both fast paths do for a free they take: block b of arena a (heap
 * hp, NULL in the main arena) is no longer live. */
static inline __attribute__((always_inline)) void
fast_release(struct ht_heapinfo *h, const struct ht_event *e, struct thr *t, struct arena *a,
	     struct heap *hp, const struct ht_block *b)
{
	h->last_ns = e->time_ns;
	t->last_ns = e->time_ns;
	h->calls[HT_EV_FREE] += in_window(h, e->time_ns);
	h->live_req -= b->size;
	h->live_use -= b->usable;
	a->live -= b->usable;
	a->live_req -= b->size;
	a->blocks--;
	if (hp)
		hp->live -= b->usable;
}

/* The common events: malloc or calloc of a block in the main arena, or
 * free of one, by a thread seen before whose arena is the main one, no
 * duration, no window edge to pass: what acquire, release and use do for
 * them, with no call.  Returns 0 when the event is not one of these,
 * before it changed anything. */
static inline int event_fast(struct ht_heapinfo *h, const struct ht_event *e,
			     const struct ht_blockop *op)
{
	uint64_t now = e->time_ns;
	if (now >= h->gate || e->duration || op->replaced || op->thread != h->fast_ix)
		return 0;
	struct thr *t = h->fast_thr;
	struct arena *a = &h->arenas[0];
	if (e->kind == HT_EV_MALLOC || e->kind == HT_EV_CALLOC) {
		struct ht_block *b = op->acquired;
		if (!b || (e->flags & (HT_F_MMAPPED | HT_F_NONMAIN)))
			return 0;
		int win = in_window(h, now);
		struct use *u = h->fast_use;
		if (win && !u)
			return 0;
		fast_acquire(h, e, t, a, 0, NULL, win ? u : NULL, b, win);
		return 1;
	}
	if (e->kind == HT_EV_FREE) {
		const struct ht_block *b = op->released;
		if (!b || (b->pad & (HT_BLOCK_FORGOTTEN | HT_BLOCK_ARENA)) != 1u) /* not arena 0 */
			return 0;
		fast_release(h, e, t, a, NULL, b);
		return 1;
	}
	return 0;
}

/* The heap at base, known already: the thread's last one first (the
 * threads of a program take turns, so heap_find's last heap is the other
 * thread's), NULL if none. */
static inline struct heap *thread_heap(struct ht_heapinfo *h, struct thr *t, uint64_t base)
{
	if (t->heap_hint && t->heap_hint <= h->nheaps && h->heaps[t->heap_hint - 1].base == base)
		return &h->heaps[t->heap_hint - 1];
	struct heap *hp = heap_find(h, base);
	if (hp)
		t->heap_hint = (size_t)(hp - h->heaps) + 1;
	return hp;
}

/* event_fast for any thread in any arena: a malloc or calloc of a block,
 * or a free of one, by a thread seen before, in the arena the thread
 * allocates from (the main one or a heap of its own, already seen and not
 * growing), no duration, no window edge to pass, the thread's use of the
 * arena cached.  The threads of a multi-threaded program allocate from
 * arenas of their own and change at every few events: they took the slow
 * path for every call when only event_fast was there (18% of report on a
 * trace of two threads).  Out of line, after event_fast, so that a
 * program of one thread in the main arena pays nothing for it.  Returns 0
 * when the event is not one of these, before it changed anything. */
static inline int event_fast_any(struct ht_heapinfo *h, const struct ht_event *e,
				 const struct ht_blockop *op)
{
	uint64_t now = e->time_ns;
	if (e->duration || (e->kind != HT_EV_MALLOC && e->kind != HT_EV_CALLOC &&
			    e->kind != HT_EV_FREE) || h->sampled)
		return 0; /* (what event_fast left for this is mostly realloc; the fast
			   * paths count every block once) */
	if (now >= h->gate || op->replaced || op->thread >= h->nthrs)
		return 0;
	struct thr *t = &h->thrs[op->thread];
	int ar = t->arena;
	if (t->tid != e->tid || !t->first_ns || ar < 0)
		return 0;
	struct arena *a = &h->arenas[ar];
	if (e->kind == HT_EV_MALLOC || e->kind == HT_EV_CALLOC) {
		struct ht_block *b = op->acquired;
		if (!b || (e->flags & HT_F_MMAPPED))
			return 0;
		uint64_t p = b->ptr, usable = e->usable;
		struct heap *hp = NULL; /* (stays NULL in the main arena) */
		if (e->flags & HT_F_NONMAIN) {
			uint64_t base = p & ~(G_HEAP_MAX - 1);
			if (!ar || !(hp = thread_heap(h, t, base)) || hp->arena != ar ||
			    p - base < hp->min_off || p - base + usable > hp->size)
				return 0; /* another arena, a new heap, or one that grows */
		} else if (ar) {
			return 0;
		}
		int win = in_window(h, now);
		struct use *u = NULL;
		if (win) {
			if (t->last_arena != ar || t->last_use >= a->nuses ||
			    a->uses[t->last_use].tid != t->tid)
				return 0;
			u = &a->uses[t->last_use];
		}
		fast_acquire(h, e, t, a, ar, hp, u, b, win);
		return 1;
	}
	if (e->kind == HT_EV_FREE) {
		const struct ht_block *b = op->released;
		/* (a block of another arena goes to the thread's tcache model) */
		if (!b || (b->pad & (HT_BLOCK_FORGOTTEN | HT_BLOCK_ARENA)) != (uint32_t)(ar + 1))
			return 0;
		struct heap *hp = NULL;
		if (ar && !(hp = thread_heap(h, t, e->v[0] & ~(G_HEAP_MAX - 1))))
			return 0;
		fast_release(h, e, t, a, hp, b);
		return 1;
	}
	return 0;
}

/* What event_fast does not take: event_fast_any, else the slow path (one
 * call out of ht_heapinfo__event, whose fast path stays as lean as it was
 * for a program of one thread). */
static __attribute__((noinline)) void event_other(struct ht_heapinfo *h, const struct ht_event *e,
						  const struct ht_blockop *op)
{
	if (!event_fast_any(h, e, op))
		event_slow(h, e, op);
}

void ht_heapinfo__event(struct ht_heapinfo *h, const struct ht_event *e,
			const struct ht_blockop *op)
{
	if (!event_fast(h, e, op))
		event_other(h, e, op);
}

static int by_dur(const void *a, const void *b)
{
	const struct worst *x = a, *y = b;
	return x->dur < y->dur ? 1 : x->dur > y->dur ? -1 : 0;
}

void ht_heapinfo__finish(struct ht_heapinfo *h, const struct ht_reader *r)
{
	if (!h->seeded) /* no event in the window: its peaks are what was in use at its start */
		seed_peaks(h);
	/* the RSS peak: if no event came after it, the live bytes at the end
	 * (and so if samples that came since the start moved it) */
	uint64_t picked = h->rss_peak_ns;
	rss_pick(h, r);
	if (h->rss_peak_ns != picked)
		h->rss_taken = 0;
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
	struct worst *all = ht_xcalloc((size_t)32 * NCLASS * WORST_KEEP, sizeof(*all));
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
