/* The live blocks of one pass over a trace (pass.h). */
#include "pass.h"

#include <stdlib.h>

#include "common/keyindex.h"
#include "common/util.h"

struct ht_pass {
	struct ht_livemap live;  /* the live blocks */
	struct ht_blockop op;    /* what the latest event did */
	struct ht_block released; /* op.released points here */
	struct ht_block replaced; /* op.replaced points here */
	uint32_t last_tid;       /* tid of the latest event (op.thread is its index) */
	uint32_t *tids;          /* index -> tid, nthreads of them */
	uint32_t *split_w;       /* index -> weight of the block a RELEASE part of its
				  * realloc released, for the ACQUIRE part (0 none) */
	size_t nthreads, capthreads; /* used / allocated */
	struct ht_keyindex tid_idx; /* tid -> index */
	struct ht_pauses pauses;    /* recording off */
	struct ht_reader *r;        /* checks the merged order for it, NULL none */
	struct ht_reader *reader;   /* feeds it (ht_pass__check_order), NULL unknown */
};

struct ht_pass *ht_pass__new(void)
{
	struct ht_pass *p = ht_xcalloc(1, sizeof(*p));
	ht_livemap__init(&p->live);
	p->op.live = &p->live;
	return p;
}

void ht_pass__delete(struct ht_pass *p)
{
	if (!p)
		return;
	ht_livemap__free(&p->live);
	free(p->tids);
	free(p->split_w);
	free(p->tid_idx.slot);
	free(p);
}

static uint64_t tid_key(const void *arr, size_t i)
{
	return ((const uint32_t *)arr)[i];
}

/* The dense index of tid, given one if it is new. */
static uint32_t thread_index(struct ht_pass *p, uint32_t tid)
{
	ht_keyindex__reserve(&p->tid_idx, p->nthreads, p->tids, tid_key);
	size_t k = ht_keyindex__find(&p->tid_idx, tid, p->tids, tid_key);
	if (p->tid_idx.slot[k])
		return p->tid_idx.slot[k] - 1;
	if (p->nthreads == p->capthreads) {
		p->capthreads = p->capthreads ? p->capthreads * 2 : 16;
		p->tids = ht_xrealloc(p->tids, p->capthreads * sizeof(*p->tids));
		p->split_w = ht_xrealloc(p->split_w, p->capthreads * sizeof(*p->split_w));
	}
	p->tids[p->nthreads] = tid;
	p->split_w[p->nthreads] = 0;
	p->tid_idx.slot[k] = (uint32_t)++p->nthreads;
	return (uint32_t)p->nthreads - 1;
}

/* The look-ahead (ht_reader__peek): the slot of the live map the event
 * AHEAD places on will look up, prefetched.  Only once the map has
 * AHEAD_SLOTS slots (12 MiB, some 200,000 live blocks): on a trace of two
 * threads with 100,000 random live blocks each (a 24 MiB map), stats took
 * 1.68 s in place of 2.65 and report 2.09 in place of 3.26 (a batch's
 * slots asked for at once, when the reader decodes it: 2.12 for stats);
 * on cc1's trace (75,000 live blocks, a 6 MiB map whose blocks mostly die
 * young, in cache) it cost 8%, so a smaller map does without. */
#define AHEAD_SLOTS (1u << 18)
#define AHEAD 8

static __attribute__((noinline)) void prefetch_ahead(const struct ht_pass *p)
{
	const struct ht_event *e = ht_reader__peek(p->reader, AHEAD);
	if (!e)
		return;
	uint64_t a = e->kind == HT_EV_FREE ? e->v[0] : e->kind == HT_EV_MALLOC ? e->v[1] : 0;
	if (a)
		__builtin_prefetch(&p->live.slots[ht_livemap__hash(a, p->live.cap - 1)]);
}

void ht_pass__check_order(struct ht_pass *p, struct ht_reader *r)
{
	p->r = ht_reader__hand_over_check(r) ? r : NULL;
	p->reader = r;
}

static void release(struct ht_pass *p, uint64_t ptr)
{
	p->op.releases = 1;
	p->op.released_ptr = ptr;
	if (ht_livemap__del(&p->live, ptr, &p->released))
		p->op.released = &p->released;
	else if (__builtin_expect(p->r != NULL, 0) && ptr)
		ht_reader__out_of_step(p->r, 1);
}

/* Flags every live block (HT_BLOCK_FORGOTTEN, HT_BLOCK_BEFORE_CTL). */
static void flag_all(struct ht_pass *p, uint32_t flag)
{
	for (size_t i = 0; i < p->live.cap; i++)
		if (p->live.slots[i].ptr)
			p->live.slots[i].pad |= flag;
}

/* A control event, for the order's checks: calls went untraced since
 * the latest one, unless it paused or synced (the reader's rule). */
static void check_control(struct ht_pass *p, const struct ht_event *e)
{
	uint64_t op = e->nv ? e->v[0] : 0;
	if (op != HT_CTL_SYNC && op != HT_CTL_PAUSE)
		flag_all(p, HT_BLOCK_BEFORE_CTL);
	ht_reader__control(p->r, e);
}

/* e hands out the block at ptr of size bytes. */
static inline void hand_out(struct ht_pass *p, const struct ht_event *e, uint64_t ptr,
			    uint64_t size)
{
	int added;
	struct ht_block *b = ht_livemap__find_or_add(&p->live, ptr, &added);
	if (!added) {
		p->replaced = *b;
		p->op.replaced = &p->replaced;
		if (__builtin_expect(p->r != NULL, 0) && !(b->pad & HT_BLOCK_BEFORE_CTL))
			ht_reader__out_of_step(p->r, 0);
	}
	*b = (struct ht_block){ptr,
			       size,
			       e->usable,
			       e->time_ns,
			       e->tid,
			       e->stack,
			       p->op.weight,
			       (e->flags & HT_F_MMAPPED) ? HT_BLOCK_MMAPPED : 0};
	p->op.acquired = b;
}

const struct ht_blockop *ht_pass__event(struct ht_pass *p, const struct ht_event *e)
{
	struct ht_blockop *op = &p->op;
	if (__builtin_expect(p->live.cap >= AHEAD_SLOTS, 0) && p->reader)
		prefetch_ahead(p);
	op->releases = 0;
	op->released_ptr = 0;
	op->released = op->replaced = NULL;
	op->acquired = NULL;
	op->weight = e->weight;
	if (e->tid != p->last_tid || !p->nthreads) { /* (runs of one thread are the rule) */
		op->thread = thread_index(p, e->tid);
		p->last_tid = e->tid;
	}
	uint8_t kind = e->kind;
	if (kind == HT_EV_MALLOC) { /* the common call first (never split) */
		uint64_t ptr = e->nv > 1 ? e->v[1] : 0;
		if (ptr)
			hand_out(p, e, ptr, e->v[0]);
		return op;
	}
	if (e->part == HT_PART_RELEASE) {
		if (kind != HT_EV_MREMAP) {
			release(p, ht_event__old_ptr(e));
			p->split_w[op->thread] = op->released ? op->released->weight : 0;
		}
		return op;
	}
	switch (kind) {
	case HT_EV_FREE:
		if (e->v[0])
			release(p, e->v[0]);
		return op;
	case HT_EV_CONTROL:
		if (e->v[0] == HT_CTL_RESET)
			flag_all(p, HT_BLOCK_FORGOTTEN);
		ht_pauses__control(&p->pauses, e);
		if (p->r)
			check_control(p, e);
		return op;
	case HT_EV_REALLOC:
	case HT_EV_REALLOCARRAY:
		/* In a sampled trace the reader weighs the event by its new
		 * size, but it is in the trace because the old block was
		 * sampled: it counts, and its result weighs, as that block. */
		if (e->part == HT_PART_ACQUIRE) {
			if (p->split_w[op->thread])
				op->weight = p->split_w[op->thread];
			p->split_w[op->thread] = 0;
		} else if (ht_event__release_now(e)) {
			release(p, ht_event__old_ptr(e));
			if (op->released)
				op->weight = op->released->weight;
		} else if (ht_event__old_ptr(e)) { /* failed: the old block stays */
			const struct ht_block *old = ht_livemap__get(&p->live, ht_event__old_ptr(e));
			if (old)
				op->weight = old->weight;
		}
		break;
	default:
		break;
	}
	if (!ht_kind_descs[kind].is_alloc)
		return op;
	uint64_t ptr = ht_event__result_ptr(e);
	if (ptr)
		hand_out(p, e, ptr, ht_event__size(e));
	return op;
}

const struct ht_pauses *ht_pass__pauses(const struct ht_pass *p)
{
	return &p->pauses;
}

const struct ht_livemap *ht_pass__live(const struct ht_pass *p)
{
	return &p->live;
}

void ht_pass__take_live(struct ht_pass *p, struct ht_livemap *to)
{
	*to = p->live;
	ht_livemap__init(&p->live);
}

const struct ht_block *ht_pass__get(const struct ht_livemap *live, uint64_t ptr, int forgotten)
{
	const struct ht_block *b = ht_livemap__get((struct ht_livemap *)live, ptr);
	if (b && !forgotten && (b->pad & HT_BLOCK_FORGOTTEN))
		return NULL;
	return b;
}
