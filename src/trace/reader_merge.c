/* The trace reader's merge: the threads' streams in (timestamp, thread,
 * seq) order, and the set of live addresses that keeps traces recorded
 * without the order table in causal order (reader_int.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader_int.h"

/* ---- the merge ----------------------------------------------------------- */

HOT int before(const struct stream *a, const struct stream *b)
{
	if (a->ev->ts != b->ev->ts)
		return a->ev->ts < b->ev->ts;
	if (a->tid != b->tid)
		return a->tid < b->tid;
	return a->ev->seq < b->ev->seq;
}

void ht_rd__heap_down(struct ht_reader *r, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < r->nheap && before(r->heap[l], r->heap[m]))
			m = l;
		if (l + 1 < r->nheap && before(r->heap[l + 1], r->heap[m]))
			m = l + 1;
		if (m == i)
			return;
		struct stream *t = r->heap[i];
		r->heap[i] = r->heap[m];
		r->heap[m] = t;
		i = m;
	}
}

/* With many threads, a stream whose first event lies in the future gives
 * its decoded chunk back until the merge reaches it: memory then follows
 * the threads alive at a time, not all threads of the trace. */
void ht_rd__park(struct stream *s)
{
	/* Re-decoding must start where the delta state starts: at the
	 * thread's last chunk with a SYNC record at or before this one. */
	size_t k = s->next_chunk ? s->next_chunk - 1 : 0;
	while (k > 0 && !(s->chunks[k].flags & HT_CHUNK_F_SYNC))
		k--;
	s->park_chunk = k;
	s->parked = 1;
	s->split = *s->ev;
	s->ev = &s->split;
	free(s->batch);
	s->batch = NULL;
	s->bi = s->bn = 0;
	/* what decoding ahead met is met again */
	s->has_pend = 0;
	s->done = 0;
	free(s->pend_err);
	free(s->pend_warn);
	s->pend_err = s->pend_warn = NULL;
	s->cols = 0;
	ht_coldec__free(s->cd);
	s->cd = NULL;
	free(s->buf);
	s->buf = NULL;
	s->cap = 0;
	s->pos = s->end = NULL;
}

void ht_rd__stream_ended(struct ht_reader *r, const struct stream *s, int delivered,
			 uint64_t ts)
{
	/* An error is said when the stream it ends gets its turn, after the
	 * events before it: the stream that leaves with it, not exhausted,
	 * is the one cut short (the file's errors come before any turn). */
	if (s->exhausted || !r->err[0] || r->file_err || r->cut_tid)
		return;
	r->cut_tid = s->tid;
	r->cut_read = delivered;
	r->cut_ts = ts;
}

static int unpark_advance(struct ht_reader *r, struct stream *s)
{
	uint64_t want = s->ev->seq + 1;
	s->parked = 0;
	s->next_chunk = s->park_chunk;
	s->synced = 0;
	s->seq = s->chunks[s->park_chunk].first_seq;
	while (ht_rd__fill(r, s))
		for (; s->bi < s->bn; s->bi++)
			if (s->batch[s->bi].seq >= want)
				goto found;
	return 0;
found:
	s->ev = &s->batch[s->bi];
	split_event(s);
	return 1;
}

/* Restores the heap after its first stream advanced or left, and works
 * out how far the new first one may advance and stay first: while its
 * event comes before the next stream's (by timestamp, then thread). */
static void reorder_top(struct ht_reader *r)
{
	if (r->nheap > 1 && (before(r->heap[1], r->heap[0]) ||
			     (r->nheap > 2 && before(r->heap[2], r->heap[0]))))
		ht_rd__heap_down(r, 0);
	r->run = NULL;
	if (!r->nheap)
		return;
	struct stream *s = r->heap[0], *n = NULL;
	if (r->nheap > 1)
		n = r->heap[1];
	if (r->nheap > 2 && before(r->heap[2], n))
		n = r->heap[2];
	if (!n) {
		r->run_ts = UINT64_MAX;
	} else if (s->tid < n->tid) {
		r->run_ts = n->ev->ts;
	} else {
		if (!n->ev->ts)
			return;
		r->run_ts = n->ev->ts - 1;
	}
	r->run = s;
}

/* ---- causal order: the set of live block addresses ----------------------- */

HOT size_t live_slot(const struct ht_reader *r, uint64_t a)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 20) & (r->live_cap - 1);
}

/* Remembers where the probe stopped: the event's update of the set, just
 * after, starts there (until the set changes). */
HOT int live_has(struct ht_reader *r, uint64_t a)
{
	if (a == r->live_last)
		return 1; /* (a is not 0) */
	if (!r->live_n)
		return 0;
	for (size_t i = live_slot(r, a);; i = (i + 1) & (r->live_cap - 1)) {
		if (r->live[i] == a || !r->live[i]) {
			r->probe_a = a;
			r->probe_i = i;
			return r->live[i] != 0;
		}
	}
}

static void live_insert(struct ht_reader *r, uint64_t a);

/* a (not 0) becomes live_last, unless the set holds it already (returns
 * 1); the previous live_last goes into the table. */
HOT int live_add(struct ht_reader *r, uint64_t a)
{
	if (a == r->live_last)
		return 1;
	if (r->live_n && !(a == r->probe_a && !r->live[r->probe_i]) && live_has(r, a))
		return 1; /* (live_has probed the table: a is not live_last) */
	r->probe_a = 0;
	if (r->live_last)
		live_insert(r, r->live_last);
	r->live_last = a;
	return 0;
}

/* Puts a, which the set does not hold, into the table. */
static void live_insert(struct ht_reader *r, uint64_t a)
{
	if ((r->live_n + 1) * 2 > r->live_cap) {
		size_t ncap = r->live_cap ? r->live_cap * 2 : 64;
		uint64_t *old = r->live, *nl = calloc(ncap, sizeof(*nl));
		if (!nl)
			return; /* out of memory: order by time alone */
		size_t ocap = r->live_cap;
		r->live = nl;
		r->live_cap = ncap;
		for (size_t i = 0; i < ocap; i++) {
			if (!old[i])
				continue;
			size_t j = live_slot(r, old[i]);
			while (nl[j])
				j = (j + 1) & (ncap - 1);
			nl[j] = old[i];
		}
		free(old);
		r->probe_a = 0;
	}
	size_t i = a == r->probe_a ? r->probe_i : live_slot(r, a);
	r->probe_a = 0;
	for (; r->live[i]; i = (i + 1) & (r->live_cap - 1))
		if (r->live[i] == a)
			return;
	r->live[i] = a;
	r->live_n++;
}

/* Removes a; later entries of its probe run move back (no tombstones).
 * Returns 0 if a was not live. */
HOT int live_del(struct ht_reader *r, uint64_t a)
{
	if (a == r->live_last) {
		r->live_last = 0;
		return 1;
	}
	if (!r->live_n)
		return 0;
	size_t m = r->live_cap - 1, i = a == r->probe_a ? r->probe_i : live_slot(r, a);
	r->probe_a = 0;
	for (; r->live[i] != a; i = (i + 1) & m)
		if (!r->live[i])
			return 0;
	r->live[i] = 0;
	r->live_n--;
	for (size_t j = (i + 1) & m; r->live[j]; j = (j + 1) & m) {
		size_t k = live_slot(r, r->live[j]);
		/* move j to the hole at i unless its home lies in (i, j] */
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			r->live[i] = r->live[j];
			r->live[j] = 0;
			i = j;
		}
	}
	return 1;
}

/* The heap block an event hands out now, 0 if none.  A realloc that stays
 * in place hands out nothing new. */
HOT uint64_t acquired_block(const struct ht_event *e)
{
	if (e->kind == HT_EV_MALLOC)
		return e->v[1]; /* the common case: never split, no old block */
	if (e->kind == HT_EV_FREE)
		return 0;
	if (!ht_kind_descs[e->kind].is_alloc || !ht_event__acquire_now(e))
		return 0;
	uint64_t p = ht_event__result_ptr(e);
	return p == ht_event__old_ptr(e) ? 0 : p;
}

/* The heap block an event gives back now, 0 if none. */
HOT uint64_t released_block(const struct ht_event *e)
{
	if (e->kind == HT_EV_FREE)
		return e->nv ? e->v[0] : 0;
	if (e->kind == HT_EV_MALLOC)
		return 0;
	if (ht_event__release_now(e) && ht_event__result_ptr(e) != ht_event__old_ptr(e))
		return ht_event__old_ptr(e);
	return 0;
}

static void heap_up(struct ht_reader *r, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!before(r->heap[i], r->heap[p]))
			return;
		struct stream *t = r->heap[i];
		r->heap[i] = r->heap[p];
		r->heap[p] = t;
		i = p;
	}
}

static void unhold(struct ht_reader *r, size_t i, int forced)
{
	struct stream *s = r->held[i];
	r->held[i] = r->held[--r->nheld];
	s->held_on = 0;
	s->forced = forced;
	r->run = NULL;
	r->heap[r->nheap++] = s;
	heap_up(r, r->nheap - 1);
}

/* A held allocation whose release has not come within hold_ticks of its
 * own time never will (an untraced free, a paused recording): let the
 * oldest one through.  Also when nothing else is left to deliver. */
static void unhold_overdue(struct ht_reader *r)
{
	while (r->nheld) {
		size_t oldest = 0;
		for (size_t i = 1; i < r->nheld; i++)
			if (r->held[i]->ev->ts < r->held[oldest]->ev->ts)
				oldest = i;
		if (r->nheap && r->heap[0]->ev->ts <= r->held[oldest]->ev->ts + r->hold_ticks)
			return;
		unhold(r, oldest, 1);
	}
}

/* The blocks an event gives back (*rel) and hands out (*acq) now, 0 if
 * none: released_block and acquired_block, the common kinds first. */
HOT void event_blocks(const struct ht_event *e, uint64_t *rel, uint64_t *acq)
{
	if (e->kind == HT_EV_MALLOC) {
		*rel = 0;
		*acq = e->v[1];
	} else if (e->kind == HT_EV_FREE) {
		*rel = e->nv ? e->v[0] : 0;
		*acq = 0;
	} else {
		*rel = released_block(e);
		*acq = acquired_block(e);
	}
}

/* An address out of step with the merged order: counted, or kept
 * pending while recording may have been off (calls then went untraced). */
static void anomaly(struct ht_reader *r)
{
	if (r->ctl_state == 1)
		r->anomalies++;
	else
		r->anomalies_pend++;
}

/* A control event: recording starts, pauses or forgets (heaptrail_start,
 * _stop, _pause, _resume, _reset).  Blocks allocated while it was off, or
 * before, may be freed now: releases of addresses not live stop counting.
 * What was counted while it may have been off (the calls other threads
 * made between the switch and its control event, a recording started
 * paused) is dropped when it comes back on. */
static void track_control(struct ht_reader *r, uint64_t op)
{
	if (op == HT_CTL_SYNC)
		return;
	if (op != HT_CTL_PAUSE) {
		/* frees were not recorded while paused or stopped */
		r->live_n = 0;
		r->live_last = 0;
		r->probe_a = 0;
		if (r->live)
			memset(r->live, 0, r->live_cap * sizeof(*r->live));
	}
	r->check_free = 0;
	if (op == HT_CTL_START || op == HT_CTL_RESUME) {
		if (r->ctl_state != 1)
			r->anomalies_pend = 0;
		r->ctl_state = 1;
	} else if (op == HT_CTL_PAUSE || op == HT_CTL_STOP || op == HT_CTL_RESET) {
		if (r->ctl_state == 0) {
			r->anomalies += r->anomalies_pend;
			r->anomalies_pend = 0;
			r->ctl_state = 1;
		}
		if (op != HT_CTL_RESET)
			r->ctl_state = 2;
	}
}

int ht_reader__hand_over_check(struct ht_reader *r)
{
	if (!r->check || r->causal || r->handed)
		return 0;
	r->handed = 1;
	r->track = 0;
	return 1;
}

void ht_reader__out_of_step(struct ht_reader *r, int release)
{
	if (release ? r->check_free : r->check)
		anomaly(r);
}

const struct ht_event *ht_reader__peek(const struct ht_reader *r, unsigned k)
{
	/* the stream of the event delivered last, whose next event is at bi
	 * (mostly the one that goes on: reorder_top) */
	const struct stream *s = r->run ? r->run : r->nheap ? r->heap[0] : NULL;
	if (!s || !s->batch || s->bi + k >= s->bn)
		return NULL;
	return &s->batch[s->bi + k];
}

void ht_reader__control(struct ht_reader *r, const struct ht_event *e)
{
	if (r->handed && e->kind == HT_EV_CONTROL && e->nv)
		track_control(r, e->v[0]);
}

/* Keeps the live set in step with a delivered event e, which releases
 * rel and acquires acq (event_blocks), and counts what is out of step:
 * an address handed out while live, released while not live. */
HOT void track_live(struct ht_reader *r, const struct ht_event *e, uint64_t rel, uint64_t acq)
{
	if (!rel && !acq) {
		if (e->kind == HT_EV_CONTROL && e->nv)
			track_control(r, e->v[0]);
		else if (r->check_free && ht_event__old_ptr(e) && ht_event__acquire_now(e) &&
			 ht_event__result_ptr(e) == ht_event__old_ptr(e) &&
			 !live_has(r, ht_event__old_ptr(e)))
			anomaly(r); /* realloc in place of a block not live */
		return;
	}
	if (rel && !live_del(r, rel) && r->check_free)
		anomaly(r);
	if (acq && live_add(r, acq) && r->check)
		anomaly(r);
	/* wake the streams that wait for this address to change; each checks
	 * again when it comes first */
	for (size_t i = r->nheld; i-- > 0;)
		if (r->held[i]->held_on && (r->held[i]->held_on == rel || r->held[i]->held_on == acq))
			unhold(r, i, 0);
}

/* The address an event without a timestamp of its own must wait for, 0 if
 * it can be delivered now: an allocation of a block that is still live
 * waits for its release, a free of a block not yet live for its
 * allocation (both happened in another thread, and the free's timestamp
 * there, or the allocation's here, is only a lower bound).  Events with
 * their own timestamp are ordered by it (docs/FORMAT.md, "Ordering"). */
HOT uint64_t must_wait(struct ht_reader *r, const struct ht_event *e, uint64_t rel, uint64_t acq)
{
	if (e->ts_taken)
		return 0;
	if (acq)
		return live_has(r, acq) ? acq : 0;
	return rel && !live_has(r, rel) ? rel : 0;
}

static __attribute__((noinline)) const struct ht_event *next_event_general(struct ht_reader *r)
{
	struct stream *s;
	uint64_t rel = 0, acq = 0;
	for (;;) {
		if (r->nheld)
			unhold_overdue(r);
		if (!r->nheap) {
			if (r->follow && !r->writer_gone)
				return NULL; /* for now: ht_reader__poll brings more */
			r->at_end = 1;
			ht_reader__order(r, &r->info.order);
			/* a trace not closed cleanly ends at its last CLOCK sample,
			 * which its last events may have come after */
			if (r->last_out_ns > r->info.duration_ns)
				r->info.duration_ns = r->last_out_ns;
			return NULL;
		}
		s = r->heap[0];
		if (s->ev->ts > r->gate_ts)
			return NULL; /* follow mode: later events may still be on their way */
		if (!r->causal)
			break;
		event_blocks(s->ev, &rel, &acq);
		if (s->forced)
			break;
		uint64_t a = must_wait(r, s->ev, rel, acq);
		if (!a)
			break;
		s->held_on = a;
		r->run = NULL;
		r->held[r->nheld++] = s;
		r->heap[0] = r->heap[--r->nheap];
		ht_rd__heap_down(r, 0);
	}
	s->forced = 0;
	/* delivered in place, unless its slot is used again by the advance
	 * below (the batch's last, split, a parked stream's) */
	struct ht_event *ev = s->ev;
	if (ev == &s->split || s->bi + 1 >= s->bn || s->parked) {
		r->out_ev = *ev;
		ev = &r->out_ev;
	}
	if (ev->str) {
		memcpy(r->out_str, ev->str, strlen(ev->str) + 1);
		ev->str = r->out_str;
	}
	if (ev->ts < r->last_out_ts) {
		ev->ts = r->last_out_ts; /* a held allocation: after what it waited for */
		r->ts_raised++;
	}
	if (ev->ts != r->last_out_ts) {
		/* undated events repeat their thread's last timestamp: convert once
		 * (last_out_ns starts as ts_to_ns of 0: 0) */
		r->last_out_ts = ev->ts;
		r->last_out_ns = ht_reader__ts_to_ns(r, ev->ts);
	}
	ev->time_ns = r->last_out_ns;
	if (!(s->parked ? unpark_advance(r, s) : stream_advance(r, s))) {
		ht_rd__stream_ended(r, s, 1, r->last_out_ts);
		r->heap[0] = r->heap[--r->nheap];
		r->run = NULL;
		s->out = r->follow && s->exhausted;
		if (s->out) {
			/* a thread that may be over: its batch goes (the event
			 * delivered was copied out, as the batch's last) */
			free(s->batch);
			s->batch = NULL;
			s->bi = s->bn = 0;
		}
	}
	/* (mostly the same thread goes on: its next event still comes first) */
	if (s != r->run || s->ev->ts > r->run_ts)
		reorder_top(r);
	if (r->track) {
		if (r->causal) {
			if (!ev->ts_taken && !s->undated++)
				r->undated_threads++;
			r->undated += !ev->ts_taken;
		} else {
			event_blocks(ev, &rel, &acq);
		}
		track_live(r, ev, rel, acq);
	}
	return ev;
}

/* The next event; the general path above, but for the rule of a
 * single-threaded program (its only stream in the middle of its batch),
 * which is taken here in a few instructions. */
const struct ht_event *ht_reader__next_event(struct ht_reader *r)
{
	if (r->nheap == 1 && !r->nheld && !r->track && !r->follow) {
		/* One thread left (a single-threaded program: all along), in the
		 * middle of its batch: what the general path does then */
		struct stream *s = r->heap[0];
		struct ht_event *ev = s->ev;
		if (s == r->run && ev != &s->split && s->bi + 1 < s->bn && !s->has_split &&
		    !s->parked && !ev->str) {
			if (ev->ts < r->last_out_ts) {
				ev->ts = r->last_out_ts;
				r->ts_raised++;
			}
			if (ev->ts != r->last_out_ts) {
				r->last_out_ts = ev->ts;
				r->last_out_ns = ht_reader__ts_to_ns(r, ev->ts);
			}
			ev->time_ns = r->last_out_ns;
			s->ev = &s->batch[++s->bi];
			split_event(s);
			return ev;
		}
	}
	return next_event_general(r);
}

int ht_reader__next(struct ht_reader *r, struct ht_event *ev)
{
	const struct ht_event *e = ht_reader__next_event(r);
	if (!e)
		return 0;
	*ev = *e;
	return 1;
}
