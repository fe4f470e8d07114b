/* Reading one trace in time slices (reader_slice.h). */
#define _GNU_SOURCE
#include "reader_slice.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "reader_int.h"

int ht_reader__sliceable(const struct ht_reader *r, uint64_t min_events)
{
	const struct ht_trace_info *in = &r->info;
	if (r->par || r->follow || r->causal || r->at_end || r->err[0] || r->warn[0])
		return 0;
	if (!in->closed || !in->indexed || in->orphaned || in->disk_full || in->dropped)
		return 0;
	if (in->flags & (HT_FILE_F_SAMPLED | HT_FILE_F_SAMPLE_EVERY))
		return 0;
	if (in->events_hdr < min_events || in->events_chunks != in->events_hdr)
		return 0;
	/* (more threads than that park streams, which restart does not undo) */
	return r->nstreams > 0 && r->nstreams <= 64;
}

/* Chunk c of stream s decompressed into s's buffer, its column decoder
 * started if it is column-coded; its first record is read with
 * next_rec from *pos. */
static int open_chunk(struct ht_reader *r, struct stream *s, const struct chunk_ref *c,
		      const uint8_t **pos)
{
	if (ht_rd__load_payload(r, s, c) < 0)
		return -1;
	*pos = s->buf;
	if (!(c->flags & HT_CHUNK_F_COLUMNS))
		return 0;
	const char *why = NULL;
	if (!s->cd)
		s->cd = ht_coldec__new();
	return s->cd && ht_coldec__start(s->cd, s->buf, c->raw_size, r->hdr.version, &why) == 0
		       ? 0
		       : -1;
}

/* The next record of chunk c that open_chunk opened: 1, 0 at its end, -1
 * if it does not parse. */
static int next_rec(const struct ht_reader *r, struct stream *s, const struct chunk_ref *c,
		    const uint8_t **pos, struct ht_rec *rec)
{
	const char *why = NULL;
	if (c->flags & HT_CHUNK_F_COLUMNS)
		return ht_coldec__next(s->cd, rec, &why);
	const uint8_t *end = s->buf + c->raw_size;
	if (*pos >= end)
		return 0;
	size_t used = ht_rec__parse(rec, *pos, end, r->hdr.version, &why);
	if (!used)
		return -1;
	*pos += used;
	return 1;
}

/* The timestamp of chunk c's SYNC record (decompressing the chunk into
 * the stream's buffers). */
static int sync_ts(struct ht_reader *r, struct stream *s, const struct chunk_ref *c, uint64_t *ts)
{
	const uint8_t *pos;
	struct ht_rec rec;
	if (!(c->flags & HT_CHUNK_F_SYNC) || open_chunk(r, s, c, &pos) < 0 ||
	    next_rec(r, s, c, &pos, &rec) != 1 || rec.kind != HT_EV_SYNC ||
	    rec.f[0] != c->first_seq)
		return -1;
	*ts = rec.f[1];
	return 0;
}

int ht_reader__stacks_seen(struct ht_reader *r)
{
	/* a trace recorded with stacks says so in its header (a thread's first
	 * chunk may hold no allocation: marks alone, probe W); one whose
	 * header does not (attach's, an older recorder's) has frame records
	 * in every thread's first chunk that allocates: the first chunk of
	 * each of (at most 8) streams is scanned */
	if (r->hdr.stack_depth)
		return 1;
	for (size_t i = 0; i < r->nstreams && i < 8; i++) {
		struct stream *s = &r->streams[i];
		const struct chunk_ref *c = &s->chunks[0];
		const uint8_t *pos;
		struct ht_rec rec;
		int k;
		if (!s->nchunks || open_chunk(r, s, c, &pos) < 0)
			return -1;
		while ((k = next_rec(r, s, c, &pos, &rec)) == 1)
			if (rec.kind == HT_EV_FRAME || rec.has_stack)
				return 1; /* (not any kind from 32 on: a DURATION record of
					   * --durations is none, probe X) */
		if (k < 0)
			return -1;
	}
	return 0;
}

/* The time of s's i/k-th event: within the chunk where it lies, between
 * that chunk's SYNC time and the next one's, as far as the event is into
 * the chunk (else the SYNC time of the first SYNC chunk from there); -1 if
 * none.  A compacted trace has chunks of some 400,000 events: the chunk's
 * own time alone put every cut up to a chunk early, and the second of two
 * slices read 17% more events than the first (10.8 M against 9.2 M). */
static int time_at(struct ht_reader *r, struct stream *s, unsigned i, unsigned k, uint64_t *ts)
{
	uint64_t total = 0, upto = 0;
	for (size_t c = 0; c < s->nchunks; c++)
		total += s->chunks[c].nevents;
	uint64_t want = total * i / k;
	size_t c = 0;
	for (; c < s->nchunks && upto + s->chunks[c].nevents <= want; c++)
		upto += s->chunks[c].nevents;
	uint64_t t0, t1;
	if (c + 1 < s->nchunks && want > upto && sync_ts(r, s, &s->chunks[c], &t0) == 0 &&
	    sync_ts(r, s, &s->chunks[c + 1], &t1) == 0 && t1 > t0) {
		*ts = t0 + (uint64_t)((long double)(t1 - t0) * (long double)(want - upto) /
				      (long double)s->chunks[c].nevents);
		return 0;
	}
	while (c < s->nchunks && !(s->chunks[c].flags & HT_CHUNK_F_SYNC))
		c++;
	if (c == 0 || c >= s->nchunks)
		return -1;
	return sync_ts(r, s, &s->chunks[c], ts);
}

/* Streams whose times the cuts average (the longest ones): more cost a
 * chunk's decompression each for every cut. */
#define CUT_STREAMS 8

unsigned ht_reader__cut_times(struct ht_reader *r, unsigned k, uint64_t *cut)
{
	if (k < 2 || !r->nstreams)
		return 0;
	/* the longest streams, by their events (selection: CUT_STREAMS passes) */
	struct stream *top[CUT_STREAMS];
	uint64_t ev[CUT_STREAMS];
	unsigned ntop = 0;
	uint64_t *count = ht_xcalloc(r->nstreams, sizeof(*count));
	for (size_t i = 0; i < r->nstreams; i++)
		for (size_t c = 0; c < r->streams[i].nchunks; c++)
			count[i] += r->streams[i].chunks[c].nevents;
	for (; ntop < CUT_STREAMS && ntop < r->nstreams; ntop++) {
		size_t best = 0;
		for (size_t i = 1; i < r->nstreams; i++)
			if (count[i] > count[best])
				best = i;
		if (!count[best])
			break;
		top[ntop] = &r->streams[best];
		ev[ntop] = count[best];
		count[best] = 0;
	}
	free(count);
	/* each cut: the time where those streams have done i/k of their
	 * events, averaged by their events (one stream's alone cuts a run
	 * whose threads went at different paces unevenly) */
	unsigned n = 0;
	for (unsigned i = 1; i < k; i++) {
		long double sum = 0, w = 0;
		for (unsigned j = 0; j < ntop; j++) {
			uint64_t ts;
			if (time_at(r, top[j], i, k, &ts) < 0)
				continue;
			sum += (long double)ts * (long double)ev[j];
			w += (long double)ev[j];
		}
		if (w == 0)
			continue;
		uint64_t t = (uint64_t)(sum / w) + 1;
		if (n && t <= cut[n - 1])
			continue;
		cut[n++] = t;
	}
	return n;
}

/* Decodes s again from its chunk c on (its first event, ready for the
 * merge); 0 if it has none.  As a parked stream is taken up again
 * (reader_merge.c). */
static int restart(struct ht_reader *r, struct stream *s, size_t c)
{
	s->next_chunk = c;
	s->synced = 0;
	s->gap_said = 0;
	s->seq = s->chunks[c].first_seq;
	s->pos = s->end = NULL;
	s->cols = 0;
	s->chunk_events = s->chunk_expect = 0;
	s->has_pend = 0;
	s->has_split = 0;
	s->done = s->exhausted = 0;
	s->dur = 0;
	s->bi = s->bn = 0;
	return stream_advance(r, s);
}

int ht_reader__start_at(struct ht_reader *r, uint64_t lo)
{
	if (!lo)
		return 0;
	r->nheap = 0;
	r->run = NULL;
	for (size_t i = 0; i < r->nstreams; i++) {
		struct stream *s = &r->streams[i];
		/* the SYNC chunks' times do not go back: the last one before
		 * lo by bisection over them (a chunk without one is skipped
		 * towards the start) */
		size_t a = 0, b = s->nchunks, found = 0;
		while (a < b) {
			size_t m = a + (b - a) / 2, j = m;
			while (j > a && !(s->chunks[j].flags & HT_CHUNK_F_SYNC))
				j--;
			uint64_t ts;
			if (!(s->chunks[j].flags & HT_CHUNK_F_SYNC)) {
				a = m + 1; /* none in [a, m]: look after */
				continue;
			}
			if (sync_ts(r, s, &s->chunks[j], &ts) < 0) {
				ht_rd__err(
				    r,
				    "offset %llu: the SYNC record of a chunk of thread %u cannot "
				    "be read",
				    (unsigned long long)s->chunks[j].offset, s->tid);
				return -1;
			}
			if (ts < lo) {
				found = j;
				a = m + 1;
			} else {
				b = j;
			}
		}
		/* (the time base stays the one the whole trace gave at open) */
		if (restart(r, s, found))
			r->heap[r->nheap++] = s;
	}
	for (size_t i = r->nheap; i-- > 0;)
		ht_rd__heap_down(r, i);
	return 0;
}

uint64_t ht_reader__ts_raised(const struct ht_reader *r)
{
	return r->ts_raised;
}

void ht_reader__slices_done(struct ht_reader *r, const struct ht_order_info *sum,
			    uint64_t released_live)
{
	r->at_end = 1;
	r->undated = 0;
	r->anomalies = sum->anomalies;
	if (r->check_free && released_live <= r->anomalies)
		r->anomalies -= released_live;
	r->anomalies_pend = 0;
	r->done_bytes = r->total_bytes;
	ht_reader__order(r, &r->info.order);
}
