/* The trace reader's decoding: one thread's chunks, decompressed and
 * decoded into batches of events (reader_int.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "reader_int.h"

/* ---- decoding ------------------------------------------------------------ */

static size_t hash_node(uint32_t parent, uint64_t ip)
{
	uint64_t h = (ip ^ ((uint64_t)parent << 32 | parent)) * 0x9E3779B97F4A7C15ull;
	return (size_t)(h ^ (h >> 29));
}


int ht_rd__load_payload(struct ht_reader *r, struct stream *s, const struct chunk_ref *c)
{
	s->buf = ht_grow(s->buf, &s->cap, c->raw_size + 1, 1);
	uint8_t *dst = s->buf;
	uint64_t poff = c->offset + sizeof(struct ht_chunk_header);
	if (c->flags & HT_CHUNK_F_ZSTD) {
		r->zbuf = ht_grow(r->zbuf, &r->zcap, c->comp_size + 1, 1);
		if (ht_rd__read_at(r, r->zbuf, c->comp_size, poff) < 0) {
			ht_rd__err(r, "offset %llu: cannot read chunk payload", (unsigned long long)c->offset);
			return -1;
		}
		size_t n = ZSTD_decompressDCtx(r->dctx, dst, c->raw_size, r->zbuf, c->comp_size);
		if (ZSTD_isError(n) || n != c->raw_size) {
			ht_rd__err(r, "offset %llu: chunk of thread %u does not decompress (%s): the trace "
				   "is corrupt here", (unsigned long long)c->offset, c->tid,
				ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short payload");
			return -1;
		}
	} else if (ht_rd__read_at(r, dst, c->raw_size, poff) < 0) {
		ht_rd__err(r, "offset %llu: cannot read chunk payload", (unsigned long long)c->offset);
		return -1;
	}
	return 0;
}

static int load_chunk(struct ht_reader *r, struct stream *s)
{
	struct chunk_ref *c = &s->chunks[s->next_chunk++];
	if (c->first_seq != s->seq && s->synced) {
		ht_rd__warn(r, "thread %u: events %llu..%llu are missing (a chunk was lost)", s->tid,
			 (unsigned long long)s->seq, (unsigned long long)c->first_seq - 1);
		s->synced = 0;
		s->gap_said = 1;
	}
	if (!(c->flags & HT_CHUNK_F_SYNC) && !s->synced) {
		/* A continuation without its start cannot be decoded.  After a
		 * lost chunk that was said already; otherwise (a thread's first
		 * chunk, or one after a chunk that held no SYNC) say it now. */
		if (!s->gap_said) {
			s->gap_said = 1;
			ht_rd__warn(r, "offset %llu: thread %u: events %llu..%llu are skipped: their "
				    "chunk continues one that is missing", (unsigned long long)c->offset,
				 s->tid, (unsigned long long)c->first_seq,
				 (unsigned long long)(c->first_seq + c->nevents - 1));
		}
		return 0;
	}
	/* The payload, decompressed, into the stream's buffer: records, or
	 * the columns they are decoded from one by one. */
	int cols = (c->flags & HT_CHUNK_F_COLUMNS) != 0;
	s->cols = 0;
	if (ht_rd__load_payload(r, s, c) < 0)
		return -1;
	size_t len = c->raw_size;
	if (cols) {
		const char *why = "out of memory";
		if (!s->cd)
			s->cd = ht_coldec__new();
		if (!s->cd ||
		    ht_coldec__start(s->cd, s->buf, c->raw_size, r->hdr.version, &why) < 0) {
			ht_rd__err(r, "offset %llu: column-coded chunk of thread %u: %s: the trace is "
				   "corrupt here", (unsigned long long)c->offset, c->tid, why);
			return -1;
		}
		s->cols = 1;
		len = 0; /* pos = end: the chunk's end is checked once cd is done */
	}
	r->done_bytes += c->comp_size;
	s->pos = s->buf;
	s->end = s->buf + len;
	s->chunk_off = c->offset;
	s->chunk_events = 0;
	s->chunk_expect = c->nevents;
	s->seq = c->first_seq;
	return 1;
}

/* A stack or module record as an item of a decoding thread's block
 * (reader_par.c): its fields in v, its string (the bytes of the record,
 * valid until the stream's next record) in str, the seq and chunk offset
 * a message about it would name in seq and ts. */
static void emit_meta(const struct stream *s, const struct ht_rec *rec, struct ht_event *e)
{
	e->kind = rec->kind;
	e->flags = 0;
	e->tid = s->tid;
	e->seq = s->seq;
	e->ts = s->chunk_off;
	e->nv = rec->nf;
	for (unsigned i = 0; i < rec->nf; i++)
		e->v[i] = rec->f[i];
	e->str = (const char *)rec->str;
}

int ht_rd__corrupt(struct ht_reader *r, struct stream *s, const char *what)
{
	ht_rd__err(r, "offset %llu: thread %u, event %llu: %s: the trace is corrupt here",
		(unsigned long long)s->chunk_off, s->tid, (unsigned long long)s->seq, what);
	s->done = 1;
	return 0;
}


static uint32_t node_intern(struct ht_reader *r, uint32_t parent, uint64_t ip, uint32_t mod)
{
	if (!r->nnodes) {
		r->nodes = ht_grow(r->nodes, &r->capnodes, 1024, sizeof(*r->nodes));
		r->nodes[0].ip = 0;
		r->nodes[0].parent = 0;
		r->nodes[0].mod = 0;
		r->nnodes = 1;
	}
	if (r->nnodes * 2 >= r->node_hcap) {
		size_t cap = r->node_hcap ? r->node_hcap * 2 : 4096;
		uint32_t *h = ht_xzalloc(cap, sizeof(*h));
		for (size_t id = 1; id < r->nnodes; id++) {
			size_t i = hash_node(r->nodes[id].parent, r->nodes[id].ip) & (cap - 1);
			while (h[i])
				i = (i + 1) & (cap - 1);
			h[i] = (uint32_t)id;
		}
		free(r->node_hash);
		r->node_hash = h;
		r->node_hcap = cap;
	}
	size_t mask = r->node_hcap - 1;
	size_t i = hash_node(parent, ip) & mask;
	for (; r->node_hash[i]; i = (i + 1) & mask) {
		const struct node *n = &r->nodes[r->node_hash[i]];
		if (n->ip == ip && n->parent == parent && n->mod == mod)
			return r->node_hash[i];
	}
	r->nodes = ht_grow(r->nodes, &r->capnodes, r->nnodes + 1, sizeof(*r->nodes));
	uint32_t id = (uint32_t)r->nnodes++;
	r->nodes[id].ip = ip;
	r->nodes[id].parent = parent;
	r->nodes[id].mod = mod;
	r->node_hash[i] = id;
	return id;
}

/* FRAME, MODULE, BUILD_ID, MODULE_GONE: what stacks need, not events. */
int ht_rd__meta(struct ht_reader *r, struct stream *s, const struct ht_rec *rec)
{
	const uint64_t *f = rec->f;
	switch (rec->kind) {
	case HT_EV_FRAME: {
		/* Ids are handed out in order: a new one is the next; one seen
		 * before (a stream decoded again) is defined the same way. */
		if (f[0] == 0 || f[0] > s->nnodes + 1 || f[1] >= f[0])
			return ht_rd__corrupt(r, s, "stack frame record out of order"), -1;
		uint32_t parent = f[1] ? s->nodes[f[1] - 1] : 0;
		uint32_t id = node_intern(r, parent, f[2], ht_modmap__find(&r->mods, &s->mods, f[2]));
		if (f[0] == s->nnodes + 1) {
			s->nodes = ht_grow(s->nodes, &s->capnodes, s->nnodes + 1, sizeof(*s->nodes));
			s->nnodes++;
		}
		s->nodes[f[0] - 1] = id;
		break;
	}
	case HT_EV_MODULE:
		ht_modmap__module(&r->mods, &s->mods, f[0], f[1], f[2], (const char *)rec->str,
				  (size_t)f[3]);
		break;
	case HT_EV_BUILD_ID:
		ht_modmap__build_id(&r->mods, &s->mods, f[0], rec->str, (size_t)f[1]);
		break;
	case HT_EV_MODULE_GONE:
		ht_modmap__gone(&r->mods, &s->mods, f[0]);
		break;
	default:
		break; /* HT_EV_EXT itself cannot be a kind */
	}
	return 0;
}

/* Decodes the stream's next event into e: 1; 0 when the stream ends (or
 * stops at an error).  With ahead DEC_AHEAD (events decoded ahead wait in
 * the batch), returns 2 instead of taking a step that must come in its
 * turn: a stack or module record (the reader's node ids are given out in
 * the order of delivery) or the next chunk (its warnings).  With
 * DEC_EMIT (a decoding thread, reader_par.c), loads chunks as they come
 * and returns 3 with a stack or module record in e (ht_rd__decode). */
static int decode_next(struct ht_reader *r, struct stream *s, struct ht_event *e, int ahead)
{
	for (;;) {
		if (s->done)
			return 0;
		struct ht_rec rec;
		const char *why = NULL;
		const uint8_t *p = s->pos; /* past the record */
		if (s->has_pend) {
			s->has_pend = 0;
			rec = s->pend;
			goto got_record;
		}
		if (s->cols) {
			int k = ht_coldec__next(s->cd, &rec, &why);
			if (k < 0) {
				ht_rd__err(r, "offset %llu: column-coded chunk of thread %u: %s: the trace is "
					   "corrupt here", (unsigned long long)s->chunk_off, s->tid, why);
				s->done = 1;
				return 0;
			}
			if (k == 0)
				s->cols = 0; /* the chunk's end (pos = end) */
			else
				goto got_record;
		}
		if (s->pos >= s->end) {
			if (s->pos && s->chunk_events != s->chunk_expect)
				return ht_rd__corrupt(r, s, "chunk holds fewer events than its header says");
			/* Following a trace being written, a chunk that does not
			 * continue the stream may be followed by the one that does,
			 * written later (an older recorder's order): waited for,
			 * as the end of the chunks so far is, until the writer is
			 * gone, when a gap is one. */
			int gap = r->follow && !r->writer_gone && s->synced &&
				  s->next_chunk < s->nchunks &&
				  s->chunks[s->next_chunk].first_seq != s->seq;
			if (s->next_chunk >= s->nchunks || gap) {
				s->done = 1;
				s->exhausted = 1;
				ht_coldec__free(s->cd);
				s->cd = NULL;
				free(s->buf);
				s->buf = NULL;
				s->cap = 0;
				s->pos = s->end = NULL;
				return 0;
			}
			if (ahead == DEC_AHEAD)
				return 2;
			int k = load_chunk(r, s);
			if (k < 0) {
				s->done = 1;
				return 0;
			}
			if (k == 0)
				s->pos = s->end = NULL;
			continue; /* an empty chunk ends here too */
		}
		size_t used = ht_rec__parse(&rec, s->pos, s->end, r->hdr.version, &why);
		if (!used)
			return ht_rd__corrupt(r, s, why);
		p = s->pos + used;
	got_record:;
		int kind = rec.kind;
		const struct ht_kind_desc *d = &ht_kind_descs[kind];
		unsigned nf = rec.nf;
		const uint64_t *f = rec.f;
		int v2 = r->hdr.version >= 2;
		if (kind == HT_EV_TICK) {
			if (!s->synced)
				return ht_rd__corrupt(r, s, "event before any sync record");
			s->last_ts += f[0] + (v2 && f[1] ? f[1] - 1 : f[1]);
			s->pos = p;
			continue;
		}
		if (kind == HT_EV_SYNC) {
			if (f[0] != s->seq)
				return ht_rd__corrupt(r, s, "sync record disagrees with the chunk's sequence number");
			s->last_ts = f[1];
			s->last_ptr = 0;
			s->dur = 0;
			s->synced = 1;
			s->gap_said = 0;
			s->pos = p;
			continue;
		}
		if (!s->synced)
			return ht_rd__corrupt(r, s, "event before any sync record");
		if (kind == HT_EV_DURATION) { /* times the thread's next event */
			s->dur = f[0];
			s->pos = p;
			continue;
		}
		if (kind >= 32) {
			if (ahead == DEC_EMIT) {
				emit_meta(s, &rec, e);
				s->pos = p;
				return 3;
			}
			if (ahead) {
				if (s->cols) {
					s->pend = rec;
					s->has_pend = 1;
				}
				return 2; /* (a record's is parsed again) */
			}
			if (ht_rd__meta(r, s, &rec) < 0)
				return 0;
			s->pos = p;
			continue;
		}
		e->kind = (uint8_t)kind;
		e->flags = rec.kb & ~HT_KIND_MASK;
		e->tid = s->tid;
		e->seq = s->seq;
		e->ts_taken = !v2 || f[nf] != 0;
		e->ts = s->last_ts + (v2 && f[nf] ? f[nf] - 1 : f[nf]);
		e->usable = 0;
		e->duration = s->dur; /* a 'd' field below takes precedence */
		s->dur = 0;
		e->str = NULL;
		e->nv = 0;
		e->part = HT_PART_WHOLE;
		e->stack = 0;
		/* the thread's own id, for a decoding thread (reader_par.c):
		 * its stream knows no nodes, the reader's thread maps it */
		e->time_ns = rec.has_stack ? f[nf + 1] : 0;
		if (rec.has_stack && f[nf + 1] && f[nf + 1] <= s->nnodes)
			e->stack = s->nodes[f[nf + 1] - 1];
		uint64_t result_ptr = 0, slack = 0;
		if (kind == HT_EV_FREE) {
			/* the common kinds without the walk over field codes */
			uint64_t v = s->last_ptr + (uint64_t)ht_unzigzag(f[0]);
			s->last_ptr = v;
			e->v[0] = v;
			e->nv = 1;
			nf = 0;
		} else if (kind == HT_EV_MALLOC) {
			uint64_t v = s->last_ptr + (uint64_t)ht_unzigzag(f[1]);
			s->last_ptr = v;
			e->v[0] = f[0];
			e->v[1] = result_ptr = v;
			e->v[2] = slack = f[2];
			e->nv = 3;
			nf = 0;
		}
		for (unsigned i = 0; i < nf; i++) {
			uint64_t v = f[i];
			switch (d->fields[i]) {
			case 's':
				v = (uint64_t)ht_unzigzag(v);
				break;
			case 'p':
				v = s->last_ptr + (uint64_t)ht_unzigzag(v);
				s->last_ptr = v;
				if ((int)i == d->result)
					result_ptr = v;
				break;
			case 'U':
				slack = v;
				break;
			case 'd':
				e->duration = v;
				break;
			case 'S':
				memcpy(s->str, rec.str, v); /* v <= HT_MAX_STR: checked by the parse */
				s->str[v] = 0;
				e->str = s->str;
				continue; /* no value slot */
			}
			e->v[e->nv++] = v;
		}
		e->weight = 1;
		if (d->is_alloc && result_ptr) {
			uint64_t req = ht_event__size(e);
			e->usable = ht_usable_of(r->hdr.version, e->flags, req, slack);
			e->weight = ht_alloc_weight(r->sampled,
						    r->hdr.sample_every ? r->hdr.sample_every : 1, req,
						    result_ptr, ht_weight_salt(e->tid, e->seq),
						    r->hdr.sample_bytes);
		}
		s->last_ts = e->ts;
		s->pos = p;
		s->seq++;
		s->chunk_events++;
		return 1;
	}
}

/* ---- the row fast loop ---------------------------------------------------- */

static inline uint32_t load32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* The tag of the record at p (kind byte first) that holds nv values, one
 * length nibble each (nv <= 7 here): *q is set past it.  0 if a length is
 * above 8: decode_next takes the record and says so. */
HOT int row_tag(const uint8_t *p, unsigned nv, uint32_t *tag, const uint8_t **q)
{
	*tag = load32(p + 1) & ((1u << (4 * nv)) - 1);
	*q = p + 1 + (nv + 1) / 2;
	return !ht_rec__bad_lengths(*tag);
}

/* The next value of a record whose tag (its lengths, lowest nibble
 * first) is at *tag: read without a branch, the tag and the cursor moved
 * on. */
HOT uint64_t row_value(const uint8_t **q, uint32_t *tag)
{
	unsigned len = *tag & 15;
	uint64_t v = ht_rec__value(*q, len);
	*q += len;
	*tag >>= 4;
	return v;
}

/* The usable size and weight decode_next gives an allocation of req bytes
 * at ptr (none when ptr is 0: the call failed). */
HOT void row_alloc(struct ht_event *e, uint32_t version, unsigned kb, uint64_t req, uint64_t ptr,
		   uint64_t slack, const int sampled, uint32_t weight, uint64_t salt,
		   uint64_t sample_bytes)
{
	e->usable = ptr ? ht_usable_of(version, kb & ~HT_KIND_MASK, req, slack) : 0;
	e->weight = ht_alloc_weight(sampled, weight, req, ptr, salt, sample_bytes);
}

/* The loop of ht_rd__fast over a row chunk: malloc, free, calloc and
 * realloc records, each with HT_RD_ROW_SAFE bytes of the chunk left at
 * least, made into the events decode_next makes of them.  It stops before any other record, and before
 * one it cannot take for sure (a length above 8): decode_next takes those
 * and says what is wrong with them.  sampled: r->sampled, v2: the format
 * is 2 or later (a copy of the loop for each but the rare version 1). */
HOT unsigned row_loop(struct ht_reader *r, struct stream *s, struct ht_event *ev, unsigned max,
		      const int sampled, const int v2)
{
	const uint8_t *p = s->pos, *lim = s->end - HT_RD_ROW_SAFE; /* end - pos >= HT_RD_ROW_SAFE */
	uint64_t last_ts = s->last_ts, last_ptr = s->last_ptr, seq = s->seq, dur = s->dur;
	const uint32_t version = r->hdr.version;
	const int v6 = version >= HT_VERSION_SHORT;
	const uint32_t tid = s->tid;
	const uint32_t weight = r->hdr.sample_every ? r->hdr.sample_every : 1;
	const uint64_t sample_bytes = r->hdr.sample_bytes;
	const uint32_t *nodes = s->nodes;
	const uint64_t nnodes = s->nnodes;
	struct ht_event *e = ev, *e_end = ev + max;
	for (; e < e_end && p <= lim; e++) {
		unsigned kb = p[0], kind = kb & HT_KIND_MASK, st = kb >> 7; /* HT_F_STACK */
		uint64_t tf, node;
		const uint8_t *q;
		if (v6 && (kb & HT_SHORT) == HT_SHORT) {
			/* a short record (format.h): malloc or free, no tag,
			 * undated, no stack; kb becomes its long form's */
			if (kb & HT_F_STACK)
				break; /* (invalid: decode_next says so) */
			unsigned nonmain = (kb & HT_SHORT_NONMAIN) << 3;
			tf = 0;
			node = 0;
			if (kb & HT_SHORT_FREE) {
				unsigned cp = kb & 7;
				uint64_t ptr =
				    last_ptr + (uint64_t)ht_unzigzag(ht_rec__value(p + 1, cp));
				q = p + 1 + cp;
				last_ptr = ptr;
				kind = HT_EV_FREE;
				kb = kind | nonmain;
				e->v[0] = ptr;
				e->nv = 1;
				e->usable = 0;
				e->weight = 1;
			} else {
				unsigned cs = ((kb >> 2) & 1) + 1, cp = kb & 3;
				uint64_t size = ht_rec__value(p + 1, cs);
				uint64_t ptr =
				    last_ptr + (uint64_t)ht_unzigzag(ht_rec__value(p + 1 + cs, cp));
				q = p + 1 + cs + cp;
				last_ptr = ptr;
				kind = HT_EV_MALLOC;
				kb = kind | nonmain;
				e->v[0] = size;
				e->v[1] = ptr;
				e->v[2] = 0;
				e->nv = 3;
				row_alloc(e, version, kb, size, ptr, 0, sampled, weight,
					  ht_weight_salt(tid, seq), sample_bytes);
			}
		} else if (kind == HT_EV_MALLOC) {
			/* size, ptr, slack, timestamp, stack */
			uint32_t tag;
			if (!row_tag(p, 4 + st, &tag, &q))
				break;
			uint64_t size = row_value(&q, &tag);
			uint64_t ptr = last_ptr + (uint64_t)ht_unzigzag(row_value(&q, &tag));
			uint64_t slack = row_value(&q, &tag);
			tf = row_value(&q, &tag);
			node = row_value(&q, &tag);
			last_ptr = ptr;
			e->v[0] = size;
			e->v[1] = ptr;
			e->v[2] = slack;
			e->nv = 3;
			row_alloc(e, version, kb, size, ptr, slack, sampled, weight,
				  ht_weight_salt(tid, seq), sample_bytes);
		} else if (kind == HT_EV_FREE) {
			/* ptr, timestamp, stack */
			uint32_t tag;
			if (!row_tag(p, 2 + st, &tag, &q))
				break;
			uint64_t ptr = last_ptr + (uint64_t)ht_unzigzag(row_value(&q, &tag));
			tf = row_value(&q, &tag);
			node = row_value(&q, &tag);
			last_ptr = ptr;
			e->v[0] = ptr;
			e->nv = 1;
			e->usable = 0;
			e->weight = 1;
		} else if (kind == HT_EV_CALLOC) {
			/* nmemb, size, ptr, slack, timestamp, stack */
			uint32_t tag;
			if (!row_tag(p, 5 + st, &tag, &q))
				break;
			uint64_t nmemb = row_value(&q, &tag);
			uint64_t size = row_value(&q, &tag);
			uint64_t ptr = last_ptr + (uint64_t)ht_unzigzag(row_value(&q, &tag));
			uint64_t slack = row_value(&q, &tag);
			tf = row_value(&q, &tag);
			node = row_value(&q, &tag);
			last_ptr = ptr;
			e->v[0] = nmemb;
			e->v[1] = size;
			e->v[2] = ptr;
			e->v[3] = slack;
			e->nv = 4;
			/* the request as ht_event__size has it (mod 2^64) */
			row_alloc(e, version, kb, nmemb * size, ptr, slack, sampled, weight,
				  ht_weight_salt(tid, seq),
				  sample_bytes);
		} else if (kind == HT_EV_REALLOC) {
			/* old, size, ptr, slack, duration, timestamp, stack; both
			 * pointers are deltas, old first */
			uint32_t tag;
			if (!row_tag(p, 6 + st, &tag, &q))
				break;
			uint64_t old = last_ptr + (uint64_t)ht_unzigzag(row_value(&q, &tag));
			uint64_t size = row_value(&q, &tag);
			uint64_t ptr = old + (uint64_t)ht_unzigzag(row_value(&q, &tag));
			uint64_t slack = row_value(&q, &tag);
			uint64_t d = row_value(&q, &tag);
			tf = row_value(&q, &tag);
			node = row_value(&q, &tag);
			last_ptr = ptr;
			e->v[0] = old;
			e->v[1] = size;
			e->v[2] = ptr;
			e->v[3] = slack;
			e->v[4] = d;
			e->nv = 5;
			dur = d; /* the record's own duration, not a DURATION record's */
			row_alloc(e, version, kb, size, ptr, slack, sampled, weight,
				  ht_weight_salt(tid, seq), sample_bytes);
		} else {
			break;
		}
		p = q;
		e->kind = (uint8_t)kind;
		e->flags = (uint8_t)(kb & ~HT_KIND_MASK);
		e->tid = tid;
		e->seq = seq++;
		e->ts_taken = !v2 || tf != 0;
		last_ts += v2 ? tf - (tf != 0) : tf;
		e->ts = last_ts;
		e->duration = dur;
		dur = 0;
		e->str = NULL;
		e->part = HT_PART_WHOLE;
		e->stack = node - 1 < nnodes ? nodes[node - 1] : 0; /* (0 wraps) */
		e->time_ns = node; /* the thread's own id, for the reader's decoding threads */
	}
	unsigned n = (unsigned)(e - ev);
	s->pos = p;
	s->last_ts = last_ts;
	s->last_ptr = last_ptr;
	s->seq = seq;
	s->dur = dur;
	s->chunk_events += n;
	return n;
}

/* The malloc, free, calloc and realloc records that come next in a row
 * chunk (ht_rd__fast). */
static unsigned fast_rows(struct ht_reader *r, struct stream *s, struct ht_event *ev, unsigned max)
{
	if (s->end - s->pos < HT_RD_ROW_SAFE)
		return 0;
	if (r->hdr.version < 2)
		return row_loop(r, s, ev, max, r->sampled, 0);
	switch (r->sampled) {
	case 0:
		return row_loop(r, s, ev, max, 0, 1);
	case 1:
		return row_loop(r, s, ev, max, 1, 1);
	default:
		return row_loop(r, s, ev, max, 2, 1);
	}
}

int ht_read_fast_path = -1;

int ht_rd__fast_path(void)
{
	if (ht_read_fast_path < 0) {
		const char *e = getenv("HEAPTRAIL_READ_FAST_PATH");
		ht_read_fast_path = !(e && (!strcmp(e, "0") || !strcasecmp(e, "false") ||
					      !strcasecmp(e, "no") || !strcasecmp(e, "off")));
	}
	return ht_read_fast_path;
}

/* Malloc and free records of a column-coded chunk (ht_coldec__events), or
 * those and calloc and realloc ones of a row chunk (row_loop), straight into events: what decode_next makes of
 * them.  Returns how many; *failed on an error, said as decode_next says
 * it (a row chunk leaves its errors to decode_next). */
unsigned ht_rd__fast(struct ht_reader *r, struct stream *s, struct ht_event *ev, unsigned max,
		     int *failed)
{
	*failed = 0;
	if (!s->cols)
		return fast_rows(r, s, ev, max);
	struct ht_coldec_thread t = {
		.last_ts = s->last_ts,
		.last_ptr = s->last_ptr,
		.seq = s->seq,
		.dur = s->dur,
		.tid = s->tid,
		.nodes = s->nodes,
		.nnodes = s->nnodes,
		.sampled = r->sampled,
		.weight = r->hdr.sample_every ? r->hdr.sample_every : 1,
		.sample_bytes = r->hdr.sample_bytes,
	};
	unsigned n = 0;
	const char *why = NULL;
	*failed = ht_coldec__events(s->cd, &t, ev, max, &n, &why) < 0;
	s->last_ts = t.last_ts;
	s->last_ptr = t.last_ptr;
	s->seq = t.seq;
	s->dur = t.dur;
	s->chunk_events += n;
	if (*failed) {
		ht_rd__err(r, "offset %llu: column-coded chunk of thread %u: %s: the trace is corrupt here",
			(unsigned long long)s->chunk_off, s->tid, why);
		s->done = 1;
	}
	return n;
}

/* What decoding ahead found wrong waits until the events before it are
 * delivered: the first error and warning said stay those of the first
 * events in time. */
static void defer_messages(struct ht_reader *r, struct stream *s, int had_err, int had_warn)
{
	if (!had_err && r->err[0] && !s->pend_err) {
		s->pend_err = strdup(r->err);
		r->err[0] = 0;
	}
	if (!had_warn && r->warn[0] && !s->pend_warn) {
		s->pend_warn = strdup(r->warn);
		r->warn[0] = 0;
	}
}

int ht_rd__decode(struct ht_reader *r, struct stream *s, struct ht_event *e, int ahead)
{
	return decode_next(r, s, e, ahead);
}

unsigned ht_rd__fill(struct ht_reader *r, struct stream *s)
{
	if (s->pipe)
		return ht_rd__par_fill(r, s);
	s->bi = s->bn = 0;
	if (s->pend_warn) {
		ht_rd__warn(r, "%s", s->pend_warn);
		free(s->pend_warn);
		s->pend_warn = NULL;
	}
	if (s->pend_err) {
		ht_rd__err(r, "%s", s->pend_err);
		free(s->pend_err);
		s->pend_err = NULL;
		s->done = 1;
		return 0;
	}
	if (!s->batch) {
		s->batch = ht_xmalloc(BATCH * sizeof(*s->batch));
	}
	unsigned n = 0;
	int more = 1;
	while (more && n < BATCH) {
		int had_err = r->err[0] != 0, had_warn = r->warn[0] != 0, failed = 0;
		if (ht_rd__fast_ready(r, s))
			n += ht_rd__fast(r, s, s->batch + n, BATCH - n, &failed);
		if (failed) {
			more = 0;
		} else if (n < BATCH) {
			int k = decode_next(r, s, &s->batch[n], n > 0 ? DEC_AHEAD : 0);
			/* an event's string lives in the stream until its next one */
			more = k == 1 && !s->batch[n].str;
			n += k == 1;
		}
		if (n)
			defer_messages(r, s, had_err, had_warn);
	}
	s->bn = n;
	return n;
}
