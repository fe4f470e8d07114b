/* One read of a trace, the live blocks kept once for every collector fed
 * from it.  The pass applies each event to the live-block map (a single
 * lookup, insert or removal per address) and says what it did: the block
 * the event released, a live block its result replaced, the block it
 * handed out.  The collectors (stats, stackstats, timeline, heapinfo) take
 * that instead of keeping maps of their own, so that `report`, which feeds
 * all four, hashes each address once, and every command that feeds one of
 * them uses the same code:
 *
 *	struct ht_pass *p = ht_pass__new();
 *	while (ht_analyze__next(r, &e)) {
 *		const struct ht_blockop *op = ht_pass__event(p, &e);
 *		ht_stats__event(s, &e, op);
 *		ht_timeline__event(tl, &e, op);
 *	}
 *	ht_pass__delete(p);
 *
 * The rules are those of `stats`: realloc's parts (the RELEASE part
 * releases, the ACQUIRE part hands out), and heaptrail_reset(), after which
 * the blocks allocated before stay in the map flagged HT_BLOCK_FORGOTTEN
 * (their frees are not "unknown"; collectors that forget them skip them). */
#ifndef HEAPTRAIL_ANALYZE_PASS_H
#define HEAPTRAIL_ANALYZE_PASS_H

#include <stdint.h>

#include "analyze/blocks.h"
#include "common/livemap.h"
#include "trace/reader.h"

/* In a pass's blocks, ht_block.aux is the allocation's stack node, weight
 * its weight, and pad holds these flags and a collector's arena: */
#define HT_BLOCK_FORGOTTEN 0x80000000u /* allocated before a heaptrail_reset() */
#define HT_BLOCK_MMAPPED 0x40000000u   /* glibc served it by mmap (HT_F_MMAPPED) */
#define HT_BLOCK_BEFORE_CTL 0x20000000u /* allocated before the latest control event that
					 * was not a pause or sync (ht_pass__check_order) */
#define HT_BLOCK_ARENA 0x00ffffffu     /* heapinfo's arena index + 1, 0 = none (at most
					* 2^21 heaps fit in the address space) */

/* What one event did to the live blocks (valid until the next event). */
struct ht_blockop {
	uint8_t releases;              /* the event releases released_ptr: free of non-NULL,
					* realloc's old block (its RELEASE part) */
	uint64_t released_ptr;         /* that address (may be 0 in a damaged trace) */
	const struct ht_block *released; /* the block as allocated, NULL if it was not live */
	const struct ht_block *replaced; /* a live block at the address the event hands
					  * out (trace and program disagree), else NULL */
	struct ht_block *acquired;     /* the block handed out (its slot), else NULL */
	const struct ht_livemap *live; /* every live block, forgotten ones included */
	uint32_t thread;               /* the event's thread as a dense index: 0, 1, ... in
					* the order the pass first saw each tid */
	uint32_t weight;               /* the calls the event stands for: its own weight,
					* but a realloc's is that of the block it resizes
					* (sampled at its allocation, by its size then),
					* which its result keeps */
};

struct ht_pass; /* opaque */

/* The times recording was off (heaptrail_pause() or _stop(), SIGUSR2 with
 * --toggle-signal, --start-paused until heaptrail_start()), from the
 * trace's control events.  The calls made meanwhile are not in the trace:
 * a block freed then stays live in it (a leak that was freed), the free of
 * a block allocated then is unknown. */
struct ht_pauses {
	uint64_t count;       /* times it went off (a start paused is one) */
	uint64_t off_ns;      /* time off before the latest one (ht_pauses__total) */
	uint64_t last_off_ns; /* when it last went off (0: the trace's start) */
	int off;              /* off since last_off_ns */
	int seen;             /* a pause, resume, start or stop came */
};

/* A control event (HT_EV_CONTROL) e. */
static inline void ht_pauses__control(struct ht_pauses *ps, const struct ht_event *e)
{
	uint64_t op = e->nv ? e->v[0] : 0;
	if (op == HT_CTL_PAUSE || op == HT_CTL_STOP) {
		if (!ps->off) {
			ps->off = 1;
			ps->count++;
			ps->last_off_ns = e->time_ns;
		}
		ps->seen = 1;
	} else if (op == HT_CTL_RESUME || op == HT_CTL_START) {
		if (ps->off) {
			ps->off_ns += e->time_ns - ps->last_off_ns;
			ps->off = 0;
		} else if (!ps->seen && op == HT_CTL_START) {
			ps->count++; /* started paused: off from the start */
			ps->off_ns += e->time_ns;
			ps->last_off_ns = 0;
		}
		ps->seen = 1;
	}
}

/* Time off up to end_ns (a pause still on counts to there). */
static inline uint64_t ht_pauses__total(const struct ht_pauses *ps, uint64_t end_ns)
{
	return ps->off_ns + (ps->off && end_ns > ps->last_off_ns ? end_ns - ps->last_off_ns : 0);
}

/* Exits (after a message) if out of memory. */
struct ht_pass *ht_pass__new(void);
/* Ties the pass to the reader r that feeds it, before the first event:
 * the pass makes r's checks of the merged order (ht_reader__hand_over_check)
 * in its own lookups, when r wants them, and once its live map outgrows
 * the caches nearest the core, it looks ahead in r's decoded events
 * (ht_reader__peek) so that the map's cache misses overlap.  Every event
 * r delivers must then come to ht_pass__event, in order, until the
 * reading stops; delete the pass before closing r. */
void ht_pass__check_order(struct ht_pass *p, struct ht_reader *r);
/* Applies e (in the reader's order) and says what changed. */
const struct ht_blockop *ht_pass__event(struct ht_pass *p, const struct ht_event *e);
/* Every live block (forgotten ones included: ht_block__forgotten). */
const struct ht_livemap *ht_pass__live(const struct ht_pass *p);
/* Moves the live blocks to *to (which must not hold any: it is
 * overwritten); the pass is left with none (the end of a time slice). */
void ht_pass__take_live(struct ht_pass *p, struct ht_livemap *to);
/* The times recording was off, so far. */
const struct ht_pauses *ht_pass__pauses(const struct ht_pass *p);
/* Whether b was allocated before a heaptrail_reset() (then it is in the
 * map only so that its free is not "unknown"). */
static inline int ht_block__forgotten(const struct ht_block *b)
{
	return (b->pad & HT_BLOCK_FORGOTTEN) != 0;
}
/* The live block at ptr, NULL if none; forgotten blocks only if asked. */
const struct ht_block *ht_pass__get(const struct ht_livemap *live, uint64_t ptr, int forgotten);
void ht_pass__delete(struct ht_pass *p);

/* For collectors that forget blocks at a reset: calls cbs->release for the
 * released and the replaced block and cbs->acquire for the acquired one,
 * in that order, skipping forgotten blocks.
 * Inline, so that a caller's constant cbs become direct calls. */
static inline __attribute__((always_inline)) void
ht_blockop__callbacks(const struct ht_blockop *op, const struct ht_event *e,
		      const struct ht_block_cbs *cbs)
{
	if (op->released && !(op->released->pad & HT_BLOCK_FORGOTTEN) && cbs->release)
		cbs->release(cbs->ctx, e, op->released);
	if (op->replaced && !(op->replaced->pad & HT_BLOCK_FORGOTTEN) && cbs->release)
		cbs->release(cbs->ctx, e, op->replaced);
	if (op->acquired && cbs->acquire)
		cbs->acquire(cbs->ctx, e, op->acquired);
}

#endif
