/* The converter behind heaptrail convert (trace2wl): a trace becomes a
 * workload (converter.h, workload.h, docs/WORKLOAD.md).
 *
 * The trace is read in merged order, which is causal: an address is never
 * handed out while it is still live, however deep the chain of reuses
 * across threads (docs/FORMAT.md, "Ordering").  Each block gets a slot.
 * A thread waits on another only where the trace says it must:
 *   - it frees or reallocs a block another thread allocated (or last
 *     realloc'ed): it waits until that op is done;
 *   - it allocates into a slot another thread freed: it waits until that
 *     free is done (so slots can be reused, and the slot table stays the
 *     size of the peak live set).
 * Both point back in the merged order, so the waits can always be met.
 * A thread remembers what it has already waited for and waits once.
 * One more kind of wait keeps the replay's live set within the trace's
 * (see "the live bound" below): before an allocation that, run ahead of
 * other threads' earlier frees, could hold more live bytes than the
 * trace's peak, the allocating thread waits for those threads.
 * Memory: the live set, the threads, and the pending ops of each thread
 * (a buffer from 256 bytes up to a 64 KiB block, freed when it exits). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "converter.h"

#include <stdio.h>

#include "analyze/analyze.h"
#include "common/livemap.h"
#include "common/util.h"
#include "workload.h"

/* A thread of the workload being built. */
struct cthread {
	uint32_t tid;        /* traced thread id */
	int exited;          /* its THREAD_EXIT was seen (the tid may come back) */
	uint64_t *known;     /* known[j]: ops of thread j this one has waited for */
	uint32_t nknown;     /* entries in known */
	uint64_t *fq;        /* ring of slots this thread freed, oldest first */
	size_t fq_head;      /* index of the oldest */
	size_t fq_len;       /* slots in the ring */
	size_t fq_cap;       /* ring capacity (a power of two) */
	uint64_t pending;    /* slot + 1 of a moving realloc between its two parts;
			      * UINT64_MAX: its block was unknown */
	uint64_t pending_size; /* that block's size */
	uint64_t mr_pending;   /* slot + 1 of the map a moving mremap takes between its two
				* parts (--mmap); UINT64_MAX: a map not replayed */
	uint64_t fresh, fresh_end; /* new slots reserved for this thread: [fresh, fresh_end) */
	/* the live bound (sync_frees) */
	uint64_t front;       /* every free numbered up to this is done before its next op */
	uint64_t front_bytes; /* the bytes those frees released (conv.freed_bytes then) */
	uint64_t own_since;   /* bytes this thread released since its front moved */
	uint64_t last_free;   /* number of its latest free (0: none) */
	uint64_t free_at;     /* its op count after that free */
	uint64_t free_front;  /* its front then */
	uint32_t mru_prev, mru_next; /* the threads by latest free, newest first (NONE ends) */
};

#define NONE UINT32_MAX

/* New slots are handed to a thread SLOT_GROUP at a time, so that the
 * threads of a replay do not share cache lines of the slot table (8
 * pointers a line). */
#define SLOT_GROUP 8

/* An anonymous map of the program (--mmap). */
struct region {
	uint64_t start, end; /* the mapped range now */
	uint64_t base;       /* where the slot's map began (offsets are from here) */
	uint64_t slot;       /* its slot */
};

struct conv {
	int mmap;                    /* the program's own anonymous mmaps too */
	struct ht_wl_writer *w;      /* output */
	struct cthread *th;          /* threads by index */
	uint32_t nth, capth;         /* count, capacity */
	uint32_t *tidmap;            /* open addressing: tid -> index + 1 */
	uint32_t *tidkey;            /* the tids */
	size_t tidcap;               /* power of two */
	struct ht_livemap live;      /* address -> slot (aux) and requested size */
	uint32_t *owner;             /* per slot: thread of the last op on it */
	uint64_t *at;                /* per slot: that thread's op count after it */
	uint64_t *mbytes;            /* per slot (--mmap): bytes still mapped */
	uint64_t *mlen;              /* per slot (--mmap): the map's length when made or remapped */
	uint64_t nslots, capslots;   /* slots made, capacity */
	uint32_t steal;              /* where to look first for another thread's free slot */
	uint64_t free_slots;         /* slots in all the rings */
	struct region *rg;           /* --mmap: sorted by start */
	size_t nrg, caprg;           /* count, capacity */
	uint64_t live_bytes, peak;   /* live requested bytes, their peak */
	uint64_t nfrees;             /* frees (and shrinks) numbered so far */
	uint64_t freed_bytes;        /* the bytes they released */
	uint32_t mru;                /* the thread that freed last (NONE: none yet) */
	uint64_t syncs;              /* waits written for the live bound */
	uint64_t calls[HT_FN_NR];    /* calls written */
	uint64_t waits, spawns;      /* synchronization ops written */
	uint64_t skipped_frees;      /* frees of blocks allocated before recording */
	uint64_t skipped_reallocs;   /* reallocs of such blocks */
	uint64_t skipped_maps;       /* mmap family calls not replayed (files, shared, fixed) */
	uint64_t failed_maps;        /* failed mmap family calls */
	uint64_t inversions;         /* addresses handed out while live (should not happen) */
};

static void *xrealloc(void *p, size_t n)
{
	p = ht_xrealloc(p, n ? n : 1);
	return p;
}

/* ---- threads ---- */

static uint32_t *tid_find(struct conv *c, uint32_t tid)
{
	size_t m = c->tidcap - 1, i = (tid * 0x9E3779B1u) & m;
	while (c->tidmap[i] && c->tidkey[i] != tid)
		i = (i + 1) & m;
	c->tidkey[i] = tid;
	return &c->tidmap[i];
}

static void tid_grow(struct conv *c)
{
	uint32_t *om = c->tidmap, *ok = c->tidkey;
	size_t ocap = c->tidcap;
	c->tidcap = ocap ? 2 * ocap : 64;
	c->tidmap = calloc(c->tidcap, sizeof(uint32_t));
	c->tidkey = calloc(c->tidcap, sizeof(uint32_t));
	if (!c->tidmap || !c->tidkey)
		ht_oom();
	for (size_t i = 0; i < ocap; i++)
		if (om[i])
			*tid_find(c, ok[i]) = om[i];
	free(om);
	free(ok);
}

static uint32_t new_thread(struct conv *c, uint32_t tid, uint32_t creator)
{
	if (c->nth == c->capth) {
		c->capth = c->capth ? 2 * c->capth : 16;
		c->th = xrealloc(c->th, c->capth * sizeof(*c->th));
	}
	uint32_t i = ht_wl_writer__thread(c->w, tid, creator);
	memset(&c->th[i], 0, sizeof(c->th[i]));
	c->th[i].tid = tid;
	c->th[i].mru_prev = c->th[i].mru_next = NONE;
	if (i) {
		/* it runs after its SPAWN: what its creator had done by then */
		c->th[i].front = c->th[creator].front;
		c->th[i].front_bytes = c->th[creator].front_bytes;
	}
	c->nth++;
	if (2 * (c->nth + 1) > c->tidcap)
		tid_grow(c);
	*tid_find(c, tid) = i + 1;
	if (i) {
		uint64_t a[1] = {i};
		ht_wl_writer__op(c->w, creator, HT_WL_SPAWN, a, 1);
		c->spawns++;
	}
	return i;
}

/* The thread of an event; a new one is spawned by its creator (the
 * THREAD_START event says which), else by thread 0. */
static uint32_t thread_of(struct conv *c, const struct ht_event *e)
{
	uint32_t *slot = tid_find(c, e->tid);
	if (*slot && !(c->th[*slot - 1].exited && e->kind == HT_EV_THREAD_START))
		return *slot - 1;
	uint32_t creator = 0;
	if (e->kind == HT_EV_THREAD_START && e->v[0]) {
		uint32_t *cs = tid_find(c, (uint32_t)e->v[0]);
		if (*cs && !c->th[*cs - 1].exited)
			creator = *cs - 1;
	}
	return new_thread(c, e->tid, creator);
}

/* Thread t waits until thread j has done count ops, unless it already has. */
static void need(struct conv *c, uint32_t t, uint32_t j, uint64_t count)
{
	if (t == j || !count)
		return;
	struct cthread *ct = &c->th[t];
	if (j >= ct->nknown) {
		uint32_t n = c->nth;
		ct->known = xrealloc(ct->known, n * sizeof(uint64_t));
		memset(ct->known + ct->nknown, 0, (n - ct->nknown) * sizeof(uint64_t));
		ct->nknown = n;
	}
	if (ct->known[j] >= count)
		return;
	uint64_t a[2] = {j, count};
	ht_wl_writer__op(c->w, t, HT_WL_WAIT, a, 2);
	ct->known[j] = count;
	c->waits++;
}

/* ---- the live bound ----
 *
 * Nothing but the waits above orders the threads of a replay, so a thread
 * that only allocates (a producer) ran ahead of the thread that frees its
 * blocks (the consumer) as far as slots allowed: the replay of a
 * producer/consumer with one block in flight held 144 blocks of 60,000
 * bytes (7.9 MiB) where the program held 3 (176 KiB), and the allocator
 * was charged for them in Max RSS and RSS/ideal.
 *
 * The frees are numbered in merged order.  A thread's front is a number
 * up to which every free is done before its next op, in any schedule the
 * waits allow.  Whatever runs, the replay's live blocks are then at most
 * those of the trace just after the latest allocation A already made,
 * plus the blocks other threads freed in the trace after A's thread's
 * front and before A and have not freed yet: at most live + W, where W is
 * the bytes other threads released after the front.  So before each
 * allocation, when live + W (live counting the allocation) would exceed
 * the trace's peak so far by more than LIVE_TOLERANCE, the thread syncs:
 * it waits for each thread that freed after its front, up to that
 * thread's last free, and its front becomes the last free.  A thread
 * waited for passes on the front it had at that free, which ends the
 * walk early: the threads are kept newest free first, and the walk stops
 * at one whose last free is within the front.  The waits point back in
 * the merged order, as the others do. */

/* How far above the trace's peak the replay may go, as a share of the
 * peak (1/64), or 4 KiB if more: tests/progs/churn (300 threads one after
 * the other, a few hundred bytes live) held at most 33 bytes more than
 * the trace without these waits, and with them each thread waited for the
 * one before: 9 ms of replay became 36 ms. */
#define LIVE_TOLERANCE 64

/* Thread t released bytes (a free, a realloc's old block or a shrink). */
static void released(struct conv *c, uint32_t t, uint64_t bytes)
{
	struct cthread *ct = &c->th[t];
	c->nfrees++;
	c->freed_bytes += bytes;
	ct->own_since += bytes;
	ct->last_free = c->nfrees;
	ct->free_at = ht_wl_writer__nops(c->w, t);
	ct->free_front = ct->front;
	if (c->mru == t)
		return;
	if (ct->mru_prev != NONE || ct->mru_next != NONE) { /* unlink it */
		if (ct->mru_prev != NONE)
			c->th[ct->mru_prev].mru_next = ct->mru_next;
		if (ct->mru_next != NONE)
			c->th[ct->mru_next].mru_prev = ct->mru_prev;
	}
	ct->mru_prev = NONE;
	ct->mru_next = c->mru;
	if (c->mru != NONE)
		c->th[c->mru].mru_prev = t;
	c->mru = t;
}

/* Before thread t allocates, live becoming after: the waits that keep the
 * replay's live bytes within the trace's peak. */
static void sync_frees(struct conv *c, uint32_t t, uint64_t after)
{
	struct cthread *ct = &c->th[t];
	uint64_t w = c->freed_bytes - ct->front_bytes - ct->own_since;
	uint64_t peak = after > c->peak ? after : c->peak;
	uint64_t tol = peak / LIVE_TOLERANCE > 4096 ? peak / LIVE_TOLERANCE : 4096;
	if (after + w <= peak + tol)
		return;
	uint64_t front = ct->front;
	for (uint32_t j = c->mru; j != NONE; j = c->th[j].mru_next) {
		const struct cthread *o = &c->th[j];
		if (o->last_free <= front)
			break; /* all older: done */
		if (j == t)
			continue; /* its own, done in its order */
		uint64_t before = c->waits;
		need(c, t, j, o->free_at);
		c->syncs += c->waits - before;
		if (o->free_front > front)
			front = o->free_front;
	}
	ct->front = c->nfrees;
	ct->front_bytes = c->freed_bytes;
	ct->own_since = 0;
}

/* ---- slots ---- */

/* Another thread's freed slot is taken only if this one already waited
 * for the free, or the free is this many ops of its thread old. */
#define STEAL_AGE 256

static uint64_t known_of(const struct conv *c, uint32_t t, uint32_t j)
{
	const struct cthread *ct = &c->th[t];
	return t == j ? UINT64_MAX : j < ct->nknown ? ct->known[j] : 0;
}

static void fq_push(struct cthread *t, uint64_t slot)
{
	if (t->fq_len == t->fq_cap) {
		size_t ncap = t->fq_cap ? 2 * t->fq_cap : 64;
		uint64_t *n = xrealloc(NULL, ncap * sizeof(uint64_t));
		for (size_t i = 0; i < t->fq_len; i++)
			n[i] = t->fq[(t->fq_head + i) & (t->fq_cap - 1)];
		free(t->fq);
		t->fq = n;
		t->fq_head = 0;
		t->fq_cap = ncap;
	}
	t->fq[(t->fq_head + t->fq_len++) & (t->fq_cap - 1)] = slot;
}

/* A slot for a new block of thread t: one it freed itself (the latest),
 * else one of its group of new slots, else the oldest one another thread
 * freed if that needs no new wait or the free is old (STEAL_AGE), else a
 * new group. */
static uint64_t take_slot(struct conv *c, uint32_t t)
{
	struct cthread *ct = &c->th[t];
	if (ct->fq_len) {
		c->free_slots--;
		ct->fq_len--;
		return ct->fq[(ct->fq_head + ct->fq_len) & (ct->fq_cap - 1)];
	}
	if (ct->fresh < ct->fresh_end) {
		uint64_t s = ct->fresh++;
		c->owner[s] = t;
		c->at[s] = 0;
		return s;
	}
	if (c->free_slots) {
		for (uint32_t k = 0; k < c->nth; k++) {
			uint32_t j = (c->steal + k) % c->nth;
			struct cthread *o = &c->th[j];
			if (!o->fq_len)
				continue;
			uint64_t s = o->fq[o->fq_head];
			/* a slot freed a while ago: the wait for its free is
			 * met long before it comes, or is one the thread has
			 * already made; else rather a new group */
			uint32_t ow = c->owner[s];
			if (c->at[s] > known_of(c, t, ow) &&
			    ht_wl_writer__nops(c->w, ow) - c->at[s] < STEAL_AGE)
				continue;
			o->fq_head = (o->fq_head + 1) & (o->fq_cap - 1);
			o->fq_len--;
			c->free_slots--;
			c->steal = j;
			need(c, t, c->owner[s], c->at[s]);
			return s;
		}
	}
	if (ct->fresh == ct->fresh_end) {
		/* the first slot of a group starts a cache line of the table */
		c->nslots = (c->nslots + SLOT_GROUP - 1) / SLOT_GROUP * SLOT_GROUP;
		if (c->nslots + SLOT_GROUP > c->capslots) {
			c->capslots = c->capslots ? 2 * c->capslots : 1024;
			c->owner = xrealloc(c->owner, c->capslots * sizeof(*c->owner));
			c->at = xrealloc(c->at, c->capslots * sizeof(*c->at));
			if (c->mmap) {
				c->mbytes = xrealloc(c->mbytes, c->capslots * sizeof(*c->mbytes));
				c->mlen = xrealloc(c->mlen, c->capslots * sizeof(*c->mlen));
			}
		}
		ct->fresh = c->nslots;
		ct->fresh_end = c->nslots + SLOT_GROUP;
		c->nslots += SLOT_GROUP;
	}
	uint64_t s = ct->fresh++;
	c->owner[s] = t;
	c->at[s] = 0;
	return s;
}

/* After thread t's op on slot s: the next user waits for this op. */
static void touched(struct conv *c, uint32_t t, uint64_t s)
{
	c->owner[s] = t;
	c->at[s] = ht_wl_writer__nops(c->w, t);
}

/* After thread t's op freed slot s. */
static void freed(struct conv *c, uint32_t t, uint64_t s)
{
	touched(c, t, s);
	fq_push(&c->th[t], s);
	c->free_slots++;
}

static void note_alloc(struct conv *c, uint64_t ptr, uint64_t size, uint64_t slot)
{
	struct ht_block old;
	if (ht_livemap__del(&c->live, ptr, &old)) {
		/* handed out while live: the trace disagrees with itself; the
		 * old slot is left holding its block, never reused */
		c->inversions++;
		c->live_bytes -= old.size;
	}
	struct ht_block b = {.ptr = ptr, .size = size, .aux = (uint32_t)slot};
	b.pad = (uint32_t)(slot >> 32);
	ht_livemap__put(&c->live, &b);
	c->live_bytes += size;
	if (c->live_bytes > c->peak)
		c->peak = c->live_bytes;
}

static uint64_t block_slot(const struct ht_block *b)
{
	return b->aux | (uint64_t)b->pad << 32;
}

/* Finds ptr's slot and forgets the block; 0 if unknown, else slot + 1
 * (and its size in *size). */
static uint64_t note_free(struct conv *c, uint64_t ptr, uint64_t *size)
{
	struct ht_block b;
	if (!ptr || !ht_livemap__del(&c->live, ptr, &b))
		return 0;
	c->live_bytes -= b.size;
	*size = b.size;
	return block_slot(&b) + 1;
}

static void emit(struct conv *c, uint32_t t, int op, const uint64_t *a)
{
	ht_wl_writer__op(c->w, t, op, a, ht_wl_op_nargs(op));
	c->calls[ht_wl_op_fn(op)]++;
}

/* ---- the malloc API ---- */

/* An allocation: a[0] is set here to the result's slot. */
static void on_alloc(struct conv *c, uint32_t t, int op, uint64_t res, uint64_t size, uint64_t *a)
{
	if (res)
		sync_frees(c, t, c->live_bytes + size);
	uint64_t s = res ? take_slot(c, t) : 0;
	a[0] = res ? s + 1 : 0;
	emit(c, t, op, a);
	if (res) {
		touched(c, t, s);
		note_alloc(c, res, size, s);
	}
}

static void on_free(struct conv *c, uint32_t t, uint64_t ptr)
{
	uint64_t a[1] = {0}, size = 0;
	if (ptr) {
		a[0] = note_free(c, ptr, &size);
		if (!a[0]) {
			c->skipped_frees++;
			return;
		}
		need(c, t, c->owner[a[0] - 1], c->at[a[0] - 1]);
	}
	emit(c, t, HT_WL_FREE, a);
	if (a[0]) {
		freed(c, t, a[0] - 1);
		released(c, t, size);
	}
}

/* realloc and reallocarray, whole or in parts (reader.h). */
static void on_realloc(struct conv *c, uint32_t t, const struct ht_event *e)
{
	struct cthread *ct = &c->th[t];
	uint64_t old = ht_event__old_ptr(e), res = ht_event__result_ptr(e);
	uint64_t size = ht_event__size(e);
	int op = e->kind == HT_EV_REALLOC ? HT_WL_REALLOC : HT_WL_REALLOCARRAY;
	uint64_t a[4] = {0, 0, e->v[1], e->kind == HT_EV_REALLOCARRAY ? e->v[2] : 0};
	uint64_t olds = 0;    /* slot + 1 of the old block */
	uint64_t oldsize = 0; /* its size */
	if (e->part == HT_PART_RELEASE) {
		/* the old block goes now; the call is written with its result */
		struct ht_block *b = ht_livemap__get(&c->live, old);
		if (!b) {
			ct->pending = UINT64_MAX;
			return;
		}
		olds = note_free(c, old, &ct->pending_size);
		need(c, t, c->owner[olds - 1], c->at[olds - 1]);
		ct->pending = olds;
		return;
	}
	if (e->part == HT_PART_ACQUIRE) {
		olds = ct->pending;
		oldsize = ct->pending_size;
		ct->pending = 0;
		if (olds == UINT64_MAX || !olds) {
			c->skipped_reallocs++;
			return;
		}
	} else if (old) {
		struct ht_block *b = ht_livemap__get(&c->live, old);
		if (!b) {
			c->skipped_reallocs++;
			return;
		}
		if (!res && size) {
			/* failed in the trace (the block stays): made anyway on
			 * no block, its result freed at once (new 0, old 0), as a
			 * failed malloc is.  Written as in place, the replay kept
			 * the size the trace never had: a failed 300 MiB realloc
			 * replayed a 300 MiB heap (probe R). */
			emit(c, t, op, a);
			return;
		}
		olds = block_slot(b) + 1;
		need(c, t, c->owner[olds - 1], c->at[olds - 1]);
		if (!ht_event__frees_old(e) || res == old) {
			/* in place: same slot */
			uint64_t was = b->size;
			if (res && size > was)
				sync_frees(c, t, c->live_bytes - was + size);
			a[0] = a[1] = olds;
			emit(c, t, op, a);
			touched(c, t, olds - 1);
			if (res) {
				/* (b again: sync_frees does not touch the live map) */
				c->live_bytes -= was;
				b->size = size;
				c->live_bytes += size;
				if (c->live_bytes > c->peak)
					c->peak = c->live_bytes;
				if (size < was)
					released(c, t, was - size);
			}
			return;
		}
		note_free(c, old, &oldsize);
	}
	/* moved, freed (size 0), or realloc(NULL, n) */
	a[1] = olds;
	on_alloc(c, t, op, res, size, a);
	if (olds) {
		freed(c, t, olds - 1);
		released(c, t, oldsize);
	}
}

/* ---- the program's mmaps (--mmap) ---- */

static size_t rg_find(const struct conv *c, uint64_t addr)
{
	size_t lo = 0, hi = c->nrg; /* first region ending after addr */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c->rg[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void rg_insert(struct conv *c, struct region r)
{
	size_t i = rg_find(c, r.start);
	if (c->nrg == c->caprg) {
		c->caprg = c->caprg ? 2 * c->caprg : 64;
		c->rg = xrealloc(c->rg, c->caprg * sizeof(*c->rg));
	}
	memmove(&c->rg[i + 1], &c->rg[i], (c->nrg - i) * sizeof(*c->rg));
	c->rg[i] = r;
	c->nrg++;
}

static void rg_remove(struct conv *c, size_t i)
{
	memmove(&c->rg[i], &c->rg[i + 1], (c->nrg - i - 1) * sizeof(*c->rg));
	c->nrg--;
}

#define PAGE_UP(x) (((x) + 4095) & ~(uint64_t)4095)
#define MAP_ANON_ 0x20
#define MAP_PRIVATE_ 0x02
#define MAP_FIXED_ 0x10
#define MAP_FIXED_NOREPLACE_ 0x100000

/* Thread t unmaps [addr, addr + len) of the maps replayed: a MUNMAP per
 * map it touches.  Returns how many it touched. */
static int unmap_range(struct conv *c, uint32_t t, uint64_t addr, uint64_t len)
{
	int any = 0;
	for (size_t i = rg_find(c, addr); i < c->nrg && c->rg[i].start < addr + len;) {
		struct region *r = &c->rg[i];
		uint64_t lo = r->start > addr ? r->start : addr;
		uint64_t hi = r->end < addr + len ? r->end : addr + len;
		uint64_t a[4] = {r->slot + 1, lo - r->base, hi - lo, 0};
		c->mbytes[r->slot] -= hi - lo;
		a[3] = c->mbytes[r->slot] == 0;
		need(c, t, c->owner[r->slot], c->at[r->slot]);
		emit(c, t, HT_WL_MUNMAP, a);
		any++;
		uint64_t slot = r->slot;
		if (lo == r->start && hi == r->end) {
			rg_remove(c, i);
		} else if (lo == r->start) {
			r->start = hi;
		} else if (hi == r->end) {
			r->end = lo;
			i++;
		} else {
			struct region tail = *r;
			tail.start = hi;
			r->end = lo;
			rg_insert(c, tail);
			i += 2;
		}
		if (a[3])
			freed(c, t, slot);
		else
			touched(c, t, slot);
	}
	return any;
}

static void on_mmap(struct conv *c, uint32_t t, const struct ht_event *e)
{
	uint64_t len = e->v[1], flags = e->v[3], res = e->v[6];
	if (res == (uint64_t)-1 || !len) {
		c->failed_maps++;
		return;
	}
	if (!(flags & MAP_ANON_) || !(flags & MAP_PRIVATE_)) {
		c->skipped_maps++;
		return;
	}
	len = PAGE_UP(len);
	unmap_range(c, t, res, len); /* a fixed map replaces what was there */
	uint64_t a[4] = {0, len, e->v[2], flags & ~(uint64_t)(MAP_FIXED_ | MAP_FIXED_NOREPLACE_)};
	uint64_t s = take_slot(c, t);
	a[0] = s + 1;
	emit(c, t, HT_WL_MMAP, a);
	touched(c, t, s);
	c->mbytes[s] = c->mlen[s] = len;
	rg_insert(c, (struct region){res, res + len, res, s});
}

static void on_munmap(struct conv *c, uint32_t t, const struct ht_event *e)
{
	uint64_t addr = e->v[0], len = PAGE_UP(e->v[1]);
	if ((int64_t)e->v[2] != 0) {
		c->failed_maps++;
		return;
	}
	int any = unmap_range(c, t, addr, len);
	if (!any)
		c->skipped_maps++; /* not one of the maps replayed */
}

/* mremap: whole, or in two parts when it moved (reader.h).  The kernel
 * frees the old range within the call, and another thread's mmap can get
 * it before the call returns: the map leaves the table at the release
 * part, and its move is written at the acquire part.  Handled whole at
 * its end, such an mmap took the old range for a fixed map over the
 * mremap's live one: the workload unmapped it in the other thread, and
 * lost the mremap and its munmaps (9 of 20,000 on two threads, said as
 * maps "on file, shared or foreign"; probe Y). */
static void on_mremap(struct conv *c, uint32_t t, const struct ht_event *e)
{
	struct cthread *ct = &c->th[t];
	uint64_t old = e->v[0], oldlen = PAGE_UP(e->v[1]), newlen = PAGE_UP(e->v[2]);
	uint64_t flags = e->v[3], res = e->v[5];
	uint64_t s;
	if (e->part == HT_PART_ACQUIRE) {
		uint64_t p = ct->mr_pending;
		ct->mr_pending = 0;
		if (!p || p == UINT64_MAX) {
			c->skipped_maps++;
			return;
		}
		s = p - 1;
	} else {
		if (res == (uint64_t)-1) {
			c->failed_maps++;
			return;
		}
		size_t i = rg_find(c, old);
		if (i >= c->nrg || c->rg[i].start != old || c->rg[i].base != old ||
		    c->rg[i].end != old + oldlen || c->mbytes[c->rg[i].slot] != oldlen ||
		    c->mlen[c->rg[i].slot] != oldlen || (flags & ~1ull)) {
			/* only whole maps never partly unmapped (a map whose
			 * tail went is one region still, but the replay's map
			 * has a hole there), without MREMAP_FIXED */
			if (e->part == HT_PART_RELEASE)
				ct->mr_pending = UINT64_MAX;
			else
				c->skipped_maps++;
			return;
		}
		s = c->rg[i].slot;
		rg_remove(c, i);
		if (e->part == HT_PART_RELEASE) {
			ct->mr_pending = s + 1;
			return;
		}
	}
	need(c, t, c->owner[s], c->at[s]);
	uint64_t a[5] = {s + 1, s + 1, oldlen, newlen, flags};
	/* the range it grows into (in place) or moves to was free in the
	 * program: maps the converter still has there were unmapped without
	 * the tracer seeing it (a raw syscall), and go now, so that no two
	 * regions overlap; as for a fixed mmap */
	if (res == old && newlen > oldlen)
		unmap_range(c, t, old + oldlen, newlen - oldlen);
	else if (res != old)
		unmap_range(c, t, res, newlen);
	if (res == old) {
		emit(c, t, HT_WL_MREMAP, a);
		touched(c, t, s);
		c->mbytes[s] = c->mlen[s] = newlen;
		rg_insert(c, (struct region){old, old + newlen, old, s});
		return;
	}
	uint64_t ns = take_slot(c, t);
	a[0] = ns + 1;
	emit(c, t, HT_WL_MREMAP, a);
	touched(c, t, ns);
	c->mbytes[ns] = c->mlen[ns] = newlen;
	c->mbytes[s] = 0;
	freed(c, t, s);
	rg_insert(c, (struct region){res, res + newlen, res, ns});
}

/* ---- events ---- */

static void on_event(struct conv *c, const struct ht_event *e)
{
	uint32_t t = thread_of(c, e);
	uint64_t res = ht_event__result_ptr(e);
	uint64_t a[HT_WL_MAX_ARGS] = {0};
	switch (e->kind) {
	case HT_EV_MALLOC:
		a[1] = e->v[0];
		on_alloc(c, t, HT_WL_MALLOC, res, e->v[0], a);
		break;
	case HT_EV_VALLOC:
	case HT_EV_PVALLOC:
		a[1] = e->v[0];
		on_alloc(c, t, e->kind == HT_EV_VALLOC ? HT_WL_VALLOC : HT_WL_PVALLOC, res, e->v[0], a);
		break;
	case HT_EV_CALLOC:
		a[1] = e->v[0], a[2] = e->v[1];
		on_alloc(c, t, HT_WL_CALLOC, res, ht_event__size(e), a);
		break;
	case HT_EV_MEMALIGN:
	case HT_EV_ALIGNED_ALLOC:
	case HT_EV_POSIX_MEMALIGN: {
		int op = e->kind == HT_EV_MEMALIGN	 ? HT_WL_MEMALIGN
			 : e->kind == HT_EV_ALIGNED_ALLOC ? HT_WL_ALIGNED_ALLOC
							  : HT_WL_POSIX_MEMALIGN;
		if (e->kind == HT_EV_POSIX_MEMALIGN && e->v[3] != 0)
			res = 0; /* failed: *memptr untouched */
		a[1] = e->v[0], a[2] = e->v[1];
		on_alloc(c, t, op, res, e->v[1], a);
		break;
	}
	case HT_EV_FREE:
		on_free(c, t, e->v[0]);
		break;
	case HT_EV_REALLOC:
	case HT_EV_REALLOCARRAY:
		on_realloc(c, t, e);
		break;
	case HT_EV_MALLOPT:
		a[0] = ht_zigzag((int64_t)e->v[0]);
		a[1] = ht_zigzag((int64_t)e->v[1]);
		emit(c, t, HT_WL_MALLOPT, a);
		break;
	case HT_EV_MALLOC_TRIM:
		a[0] = e->v[0];
		emit(c, t, HT_WL_MALLOC_TRIM, a);
		break;
	case HT_EV_MMAP:
		if (c->mmap)
			on_mmap(c, t, e);
		break;
	case HT_EV_MUNMAP:
		if (c->mmap)
			on_munmap(c, t, e);
		break;
	case HT_EV_MREMAP:
		if (c->mmap)
			on_mremap(c, t, e);
		break;
	case HT_EV_THREAD_EXIT:
		/* a thread's buffer and what it has waited for go with it (an
		 * op after its exit gets a new buffer, and waits again) */
		c->th[t].exited = 1;
		ht_wl_writer__idle(c->w, t);
		free(c->th[t].known);
		c->th[t].known = NULL;
		c->th[t].nknown = 0;
		break;
	default:
		break;
	}
}

static char *source_text(const char *in, const struct ht_trace_info *info, const struct conv *c)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);
	char *abs = realpath(in, NULL);
	fprintf(f, "trace=%s\npid=%d\ncmdline=%s\nexe=%s\nformat=%u\n", abs ? abs : in, info->pid,
		info->cmdline ? info->cmdline : "", info->exe ? info->exe : "", info->version);
	fprintf(f, "skipped_frees=%" PRIu64 "\nskipped_reallocs=%" PRIu64 "\nskipped_maps=%" PRIu64
		   "\n", c->skipped_frees, c->skipped_reallocs, c->skipped_maps);
	free(abs);
	fclose(f);
	return s;
}


/* The counts of the summary. */
static void summarize(const struct conv *c, struct ht_convert_summary *s)
{
	memset(s, 0, sizeof(*s));
	s->threads = c->nth;
	s->slots = c->nslots;
	s->peak = c->peak;
	for (int i = 0; i < HT_FN_NR; i++) {
		s->calls[i] = c->calls[i];
		s->ncalls += c->calls[i];
	}
	s->waits = c->waits;
	s->sync_waits = c->syncs;
	s->spawns = c->spawns;
	s->ops = s->ncalls + c->waits + c->spawns;
	s->skipped_frees = c->skipped_frees;
	s->skipped_reallocs = c->skipped_reallocs;
	s->skipped_maps = c->skipped_maps;
	s->failed_maps = c->failed_maps;
	s->inversions = c->inversions;
}

static void conv_free(struct conv *c)
{
	ht_livemap__free(&c->live);
	for (uint32_t i = 0; i < c->nth; i++) {
		free(c->th[i].known);
		free(c->th[i].fq);
	}
	free(c->th);
	free(c->tidmap);
	free(c->tidkey);
	free(c->owner);
	free(c->at);
	free(c->mbytes);
	free(c->mlen);
	free(c->rg);
}

struct ht_converter {
	struct conv c; /* the state above */
};

struct ht_converter *ht_converter__open(const char *out, int mmap, uint32_t main_tid, char *err,
					size_t errlen)
{
	struct ht_converter *cv = calloc(1, sizeof(*cv));
	if (!cv) {
		snprintf(err, errlen, "%s: out of memory", out);
		return NULL;
	}
	struct conv *c = &cv->c;
	c->mmap = mmap;
	c->w = ht_wl_writer__open(out, err, errlen);
	if (!c->w) {
		free(cv);
		return NULL;
	}
	ht_livemap__init(&c->live);
	c->mru = NONE;
	tid_grow(c);
	new_thread(c, main_tid, 0); /* thread 0: main */
	return cv;
}

void ht_converter__event(struct ht_converter *cv, const struct ht_event *e)
{
	on_event(&cv->c, e);
}

void ht_converter__abort(struct ht_converter *cv)
{
	if (!cv)
		return;
	if (cv->c.w)
		ht_wl_writer__abort(cv->c.w);
	conv_free(&cv->c);
	free(cv);
}

int ht_converter__close(struct ht_converter *cv, const char *in, const struct ht_trace_info *info,
			struct ht_convert_summary *sum, char *err, size_t errlen)
{
	struct conv *c = &cv->c;
	char *src = source_text(in, info, c);
	int rc = ht_wl_writer__close(c->w, c->nslots, c->peak, c->mmap ? HT_WL_F_MMAP : 0, c->calls,
				     src, err, errlen);
	c->w = NULL;
	free(src);
	if (!rc)
		summarize(c, sum);
	ht_converter__abort(cv);
	return rc ? -1 : 0;
}

int ht_convert__run(struct ht_reader *r, const char *in, const char *out,
		    const struct ht_convert_opts *o, struct ht_convert_summary *sum, char *err,
		    size_t errlen)
{
	uint64_t nev = 0;
	const struct ht_trace_info *info = ht_reader__info(r);
	memset(sum, 0, sizeof(*sum));
	if (info->sample_bytes) {
		snprintf(err, errlen,
			 "%s: a sampled trace (record --sample-bytes) holds only some of the calls; "
			 "record again without --sample-bytes to replay it", in);
		return -1;
	}
	struct ht_converter *cv = ht_converter__open(out, o->mmap, (uint32_t)info->pid, err, errlen);
	if (!cv)
		return -1;
	struct ht_event e;
	while ((!o->max_events || nev < o->max_events) &&
	       (o->progress ? ht_analyze__next(r, &e) : ht_reader__next(r, &e))) {
		on_event(&cv->c, &e);
		nev++;
	}
	if (ht_reader__error(r)) {
		snprintf(err, errlen, "%s: %s; no workload written", in, ht_reader__error(r));
		ht_converter__abort(cv);
		return -1;
	}
	if (ht_converter__close(cv, in, info, sum, err, errlen))
		return -1;
	sum->events = nev;
	sum->stopped = o->max_events && nev == o->max_events;
	return 0;
}
