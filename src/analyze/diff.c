/* Two traces, or two times of one, compared by call path (diff.h). */
#define _GNU_SOURCE
#include "diff.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/blocks.h"
#include "analyze/flamesvg.h"
#include "analyze/pass.h"
#include "analyze/readto.h"
#include "common/livemap.h"
#include "common/nodetab.h"
#include "common/json.h"
#include "common/util.h"

#define MAX_FRAMES 1024 /* frames kept per stack, inlined ones included */

struct ht_diff {
	struct ht_diff_opts o;       /* as collected */
	struct ht_diff_side side[2]; /* before, after */
	struct ht_diff_entry *e;     /* the keys */
	size_t n, cap;               /* entries / allocated */
	size_t *hash;                /* key -> entry index + 1, open addressing */
	size_t hcap;                 /* slots (power of two) */
	struct ht_reader *r[2];      /* the traces read (one in the two-times mode) */
	struct ht_symbolizer *sym[2]; /* theirs: the frames' strings live there */
	char *marks[2];              /* copies of the points' marks */
};

/* ---- per stack node, while one trace is read --------------------------------- */

struct nodestat {
	uint32_t node1;           /* stack node + 1, 0 = empty slot */
	struct ht_diff_vals v[2]; /* per side */
	uint64_t run_bytes;       /* allocated so far */
	uint64_t run_blocks;      /* allocations so far */
};

struct pass {
	struct ht_diff *d;              /* filled */
	const struct ht_diff_point *pt; /* where the sides are taken */
	int npts;                       /* how many (1, or 2 in the two-times mode) */
	int first;                      /* the side pt[0] fills */
	int k;                          /* points taken so far */
	struct nodestat *slots;         /* open addressing by node */
	size_t cap, n;                  /* slots / used */
	struct ht_pass *blocks;         /* the live blocks, aux = stack node */
	uint64_t last_ns;               /* the time of the last event read */
};

static inline struct nodestat *node_of(struct pass *p, uint32_t node)
{
	return ht_nodetab__get((void **)&p->slots, &p->cap, &p->n, sizeof(*p->slots), node);
}

static void on_acquire(void *ctx, const struct ht_event *e, const struct ht_block *b)
{
	(void)e;
	struct nodestat *s = node_of(ctx, b->aux);
	s->run_bytes += b->size * b->weight;
	s->run_blocks += b->weight;
}

/* Takes the next point's side: allocated so far, live now. */
static void take(struct pass *p, uint64_t at_ns)
{
	int side = p->first + p->k++;
	for (size_t i = 0; i < p->cap; i++) {
		struct nodestat *s = &p->slots[i];
		if (s->node1) {
			s->v[side].alloc_bytes = s->run_bytes;
			s->v[side].alloc_blocks = s->run_blocks;
		}
	}
	const struct ht_livemap *live = ht_pass__live(p->blocks);
	for (size_t i = 0; i < live->cap; i++) {
		const struct ht_block *b = &live->slots[i];
		if (!b->ptr || ht_block__forgotten(b))
			continue;
		struct nodestat *s = node_of(p, b->aux);
		s->v[side].live_bytes += b->size * b->weight;
		s->v[side].live_blocks += b->weight;
	}
	p->d->side[side].at_ns = at_ns;
}

/* ---- keys ------------------------------------------------------------------------ */

static uint64_t *field(struct ht_diff_vals *v, int i)
{
	switch (i) {
	case 0: return &v->alloc_bytes;
	case 1: return &v->alloc_blocks;
	case 2: return &v->live_bytes;
	default: return &v->live_blocks;
	}
}

static uint64_t key_hash(const char *s)
{
	return ht_hash_str(0xcbf29ce484222325ull, s);
}

static void rehash(struct ht_diff *d)
{
	free(d->hash);
	d->hcap = d->hcap ? d->hcap * 2 : 1024;
	d->hash = ht_xzalloc(d->hcap, sizeof(*d->hash));
	for (size_t i = 0; i < d->n; i++) {
		size_t k = (size_t)key_hash(d->e[i].key) & (d->hcap - 1);
		while (d->hash[k])
			k = (k + 1) & (d->hcap - 1);
		d->hash[k] = i + 1;
	}
}

static void set_frames(struct ht_diff_entry *e, const struct ht_frame *frames, size_t n)
{
	free(e->frames);
	e->nframes = n;
	e->frames = ht_xmalloc((n ? n : 1) * sizeof(*frames));
	memcpy(e->frames, frames, n * sizeof(*frames));
}

/* The entry of key (taken over: kept or freed), new ones with a copy of
 * frames; an entry found gets them too if newer (the after trace's). */
static struct ht_diff_entry *entry_of(struct ht_diff *d, char *key, const struct ht_frame *frames,
				      size_t nframes, int newer)
{
	if ((d->n + 1) * 2 > d->hcap)
		rehash(d);
	size_t k = (size_t)key_hash(key) & (d->hcap - 1);
	for (; d->hash[k]; k = (k + 1) & (d->hcap - 1)) {
		struct ht_diff_entry *e = &d->e[d->hash[k] - 1];
		if (!strcmp(e->key, key)) {
			free(key);
			/* one row of stacks that read alike by function names
			 * (--by function: one frame): only the places they share */
			if (newer && e->nframes == nframes) {
				struct ht_frame *old = e->frames;
				e->frames = NULL;
				set_frames(e, frames, nframes);
				for (size_t i = 0; i < nframes; i++)
					ht_blocks__merge_site(&e->frames[i], &old[i]);
				free(old);
			} else if (newer) {
				set_frames(e, frames, nframes);
			} else if (e->nframes == nframes) {
				for (size_t i = 0; i < nframes; i++)
					ht_blocks__merge_site(&e->frames[i], &frames[i]);
			}
			return e;
		}
	}
	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 256;
		d->e = ht_xrealloc(d->e, d->cap * sizeof(*d->e));
	}
	struct ht_diff_entry *e = &d->e[d->n++];
	memset(e, 0, sizeof(*e));
	e->key = key;
	set_frames(e, frames, nframes);
	d->hash[k] = d->n;
	return e;
}

/* The nodes of a pass into the entries, by symbolized call path. */
static void fold(struct ht_diff *d, struct pass *p, int ri)
{
	static struct ht_frame frames[MAX_FRAMES];
	for (size_t i = 0; i < p->cap; i++) {
		struct nodestat *s = &p->slots[i];
		if (!s->node1)
			continue;
		int empty = 1;
		for (int side = p->first; side < p->first + p->npts; side++)
			empty &= !memcmp(&s->v[side], &(struct ht_diff_vals){0},
					 sizeof(s->v[side]));
		if (empty)
			continue; /* allocated only after the last point */
		uint32_t node = s->node1 - 1;
		size_t nf = node ? ht_blocks__frames(d->r[ri], d->sym[ri], node, frames, MAX_FRAMES)
				 : 0;
		if (d->o.by_function && nf > 1)
			nf = 1;
		char *key = ht_flame__join(frames, nf, 0);
		struct ht_diff_entry *e = entry_of(d, key, frames, nf, ri);
		for (int side = p->first; side < p->first + p->npts; side++)
			for (int f = 0; f < 4; f++)
				*field(&e->v[side], f) += *field(&s->v[side], f);
	}
}

/* ---- reading --------------------------------------------------------------------- */

static int at_point(const struct ht_diff_point *q, const struct ht_event *e)
{
	return q->mark && e->kind == HT_EV_MARK && e->str && !strcmp(e->str, q->mark);
}

/* Reads path as reader ri, taking its npts points into sides first...;
 * sets *ok once its stacks are in the entries. */
static int read_trace(struct ht_diff *d, const char *path, const struct ht_diff_point *pt,
		      int npts, int first, int ri, int *ok)
{
	struct pass p = {.d = d, .pt = pt, .npts = npts, .first = first};
	struct ht_readto rt = {0};
	p.blocks = ht_pass__new();
	int ret = HT_EXIT_DATA;
	struct ht_reader *r = ht_analyze__open(path);
	if (!r)
		goto out;
	d->r[ri] = r;
	struct ht_block_cbs cbs = {NULL, on_acquire, &p};
	struct ht_event e;
	/* the mark of the second point seen before the first point was taken:
	 * the two points are in the wrong order, as two times would be */
	int early = 0;
	uint64_t early_ns = 0;
	while (ht_analyze__next(r, &e)) {
		while (p.k < npts && !pt[p.k].mark &&
		       (!pt[p.k].time_ns || e.time_ns > pt[p.k].time_ns))
			take(&p, pt[p.k].time_ns);
		ht_blockop__callbacks(ht_pass__event(p.blocks, &e), &e, &cbs);
		ht_readto__event(&rt, &e);
		p.last_ns = e.time_ns;
		while (p.k < npts && at_point(&pt[p.k], &e))
			take(&p, e.time_ns);
		if (p.k + 1 < npts && !early && at_point(&pt[p.k + 1], &e)) {
			early = 1;
			early_ns = e.time_ns;
		}
	}
	ret = ht_analyze__finish_pass(r, path, 0, ht_pass__pauses(p.blocks));
	const struct ht_trace_info *in = ht_reader__info(r);
	uint64_t end = p.last_ns > in->duration_ns ? p.last_ns : in->duration_ns;
	/* A cut or damaged trace: nothing is known after its events stop,
	 * and a time after that is taken there, as "end" is (the side says
	 * so) */
	ht_readto__finish(&rt, r);
	uint64_t read_end = rt.read_to_ns < end ? rt.read_to_ns : end;
	char b1[32], b2[32];
	while (p.k < npts) {
		const struct ht_diff_point *q = &pt[p.k];
		if (q->mark && early) {
			/* (the same words as two times in the wrong order, below) */
			const char *m0 = pt[p.k - 1].mark;
			ht_error("%s: the second point (mark:%s at %s) is before the first point "
				 "(%s%s%s%s): the second must come at or after the first",
				 path, q->mark, ht_fmt_ns(b1, early_ns), m0 ? "mark:" : "",
				 m0 ? m0 : "", m0 ? " at " : "",
				 ht_fmt_ns(b2, d->side[first].at_ns));
			ret = HT_EXIT_USAGE;
			goto out;
		}
		if (q->mark) {
			ht_error("%s: no heaptrail_mark(\"%s\")%s; 'heaptrail stats %s' lists "
				 "its marks", path, q->mark, p.k ? " at or after the first point" : "",
				 path);
			ret = HT_EXIT_USAGE;
			goto out;
		}
		if (q->time_ns != UINT64_MAX && q->time_ns > end) {
			/* (as dump, events, heap and timeline say it) */
			ht_error("%s=%s: the trace %s lasts %s", q->opt ? q->opt : "--at",
				 ht_fmt_ns(b1, q->time_ns), path, ht_fmt_ns(b2, end));
			ret = HT_EXIT_USAGE;
			goto out;
		}
		d->side[first + p.k].at_end = q->time_ns == UINT64_MAX;
		/* "end" is the trace's end, not its last event: a time between
		 * the two is before it (nothing changes from one to the other);
		 * in a cut or damaged trace, where its events stop */
		take(&p, q->time_ns == UINT64_MAX ? read_end : q->time_ns);
	}
	if (npts == 2 && !pt[1].mark && d->side[first].at_ns > d->side[first + 1].at_ns) {
		ht_error("%s: the second time (%s) is before the first point (%s)", path,
			 ht_fmt_ns(b1, d->side[first + 1].at_ns),
			 ht_fmt_ns(b2, d->side[first].at_ns));
		ret = HT_EXIT_USAGE;
		goto out;
	}
	for (int s = first; s < first + npts; s++) {
		struct ht_diff_side *sd = &d->side[s];
		sd->path = path;
		sd->command = in->cmdline ? in->cmdline : "";
		sd->exe = in->exe ? in->exe : "";
		sd->pid = in->pid;
		sd->mark = pt[s - first].mark;
		sd->has_stacks = ht_reader__nnodes(r) > 0;
		sd->sample_bytes = in->sample_bytes;
		sd->order = in->order;
		sd->complete = !rt.damaged;
		if (rt.damaged) {
			sd->read_cut = rt.read_to_ns != UINT64_MAX;
			sd->read_to_ns = read_end;
			sd->exact_to_ns = rt.exact_to_ns < read_end ? rt.exact_to_ns : read_end;
			sd->short_tid = rt.short_tid;
		}
	}
	d->sym[ri] = ht_blocks__symbolizer(r, d->o.sysroot, d->o.debug_dir);
	if (!d->sym[ri]) {
		ret = HT_EXIT_DATA;
		goto out;
	}
	fold(d, &p, ri);
	*ok = 1;
out:
	free(p.slots);
	ht_readto__free(&rt);
	ht_pass__delete(p.blocks);
	return ret;
}

uint64_t ht_diff__value(const struct ht_diff_vals *v, enum ht_diff_metric m)
{
	return m == HT_DIFF_LIVE ? v->live_bytes : m == HT_DIFF_ALLOC ? v->alloc_bytes
								      : v->alloc_blocks;
}

static int64_t change(const struct ht_diff_entry *e, enum ht_diff_metric m)
{
	return (int64_t)(ht_diff__value(&e->v[1], m) - ht_diff__value(&e->v[0], m));
}

/* Growth first; then the bigger after, the bigger before, the key. */
static int by_growth(const void *a, const void *b, void *ctx)
{
	const struct ht_diff_entry *x = a, *y = b;
	enum ht_diff_metric m = *(const enum ht_diff_metric *)ctx;
	int64_t cx = change(x, m), cy = change(y, m);
	if (cx != cy)
		return cx < cy ? 1 : -1;
	for (int s = 1; s >= 0; s--) {
		uint64_t vx = ht_diff__value(&x->v[s], m), vy = ht_diff__value(&y->v[s], m);
		if (vx != vy)
			return vx < vy ? 1 : -1;
	}
	return strcmp(x->key, y->key);
}

/* Totals, --normalize, the order. */
static void finish(struct ht_diff *d)
{
	for (int s = 0; s < 2; s++) {
		memset(&d->side[s].total, 0, sizeof(d->side[s].total));
		for (int f = 0; f < 4; f++)
			d->side[s].scale[f] = 1;
		for (size_t i = 0; i < d->n; i++)
			for (int f = 0; f < 4; f++)
				*field(&d->side[s].total, f) += *field(&d->e[i].v[s], f);
	}
	if (d->o.normalize) {
		struct ht_diff_side *b = &d->side[0];
		for (int f = 0; f < 4; f++) {
			uint64_t tb = *field(&b->total, f), ta = *field(&d->side[1].total, f);
			if (!tb)
				continue;
			b->scale[f] = (double)ta / (double)tb;
			for (size_t i = 0; i < d->n; i++) {
				uint64_t *v = field(&d->e[i].v[0], f);
				*v = (uint64_t)llround((double)*v * b->scale[f]);
			}
		}
	}
	/* a hash of entry indexes is no use once they move */
	free(d->hash);
	d->hash = NULL;
	d->hcap = 0;
	if (d->n > 1)
		qsort_r(d->e, d->n, sizeof(*d->e), by_growth, &d->o.sort);
}

static struct ht_diff *diff_new(const struct ht_diff_opts *o)
{
	struct ht_diff *d = ht_xcalloc(1, sizeof(*d));
	d->o = *o;
	return d;
}

/* The result of a collection: kept unless a trace could not be read. */
static int done(struct ht_diff *d, int ok, int ret, struct ht_diff **out)
{
	if (!ok) {
		ht_diff__free(d);
		*out = NULL;
		return ret ? ret : HT_EXIT_DATA;
	}
	finish(d);
	*out = d;
	return ret;
}

int ht_diff__traces(const char *before, const char *after, const struct ht_diff_opts *o,
		    struct ht_diff **out)
{
	static const struct ht_diff_point end = {UINT64_MAX, NULL, NULL};
	struct ht_diff *d = diff_new(o);
	int ok0 = 0, ok1 = 0;
	int ret = read_trace(d, before, &end, 1, 0, 0, &ok0);
	if (ok0) {
		int r2 = read_trace(d, after, &end, 1, 1, 1, &ok1);
		if (!ret || r2 == HT_EXIT_USAGE)
			ret = r2;
	}
	return done(d, ok0 && ok1, ret, out);
}

int ht_diff__times(const char *path, const struct ht_diff_point at[2],
		   const struct ht_diff_opts *o, struct ht_diff **out)
{
	struct ht_diff *d = diff_new(o);
	struct ht_diff_point pt[2];
	for (int i = 0; i < 2; i++) {
		pt[i] = at[i];
		if (at[i].mark) {
			d->marks[i] = ht_xstrdup(at[i].mark);
			pt[i].mark = d->marks[i];
		}
	}
	int ok = 0;
	int ret = read_trace(d, path, pt, 2, 0, 0, &ok);
	return done(d, ok, ret, out);
}

void ht_diff__free(struct ht_diff *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++) {
		free(d->e[i].key);
		free(d->e[i].frames);
	}
	free(d->e);
	free(d->hash);
	for (int i = 0; i < 2; i++) {
		ht_symbolizer__free(d->sym[i]);
		ht_reader__close(d->r[i]);
		free(d->marks[i]);
	}
	free(d);
}

size_t ht_diff__count(const struct ht_diff *d)
{
	return d->n;
}

const struct ht_diff_side *ht_diff__side(const struct ht_diff *d, int side)
{
	return &d->side[side ? 1 : 0];
}

int ht_diff__programs_differ(const struct ht_diff *d)
{
	const struct ht_diff_side *b = &d->side[0], *a = &d->side[1];
	if (a->path == b->path) /* (one trace at two times) */
		return 0;
	/* (a trace without the executable's path: its command's first word) */
	const char *xb = *b->exe ? b->exe : b->command, *xa = *a->exe ? a->exe : a->command;
	size_t lb = *b->exe ? strlen(xb) : strcspn(xb, " "),
	       la = *a->exe ? strlen(xa) : strcspn(xa, " ");
	if (lb != la || memcmp(xb, xa, la))
		return HT_DIFF_OTHER_EXE;
	return strcmp(b->command, a->command) ? HT_DIFF_OTHER_COMMAND : 0;
}

/* ---- text ------------------------------------------------------------------------ */

static const struct {
	const char *name;  /* as --sort takes it, and in JSON */
	const char *label; /* a column heading */
	int bytes;         /* its values are bytes */
} metric_desc[] = {
	[HT_DIFF_LIVE] = {"live", "live", 1},
	[HT_DIFF_ALLOC] = {"alloc", "allocated", 1},
	[HT_DIFF_COUNT] = {"count", "allocs", 0},
};

static const char *fmt_value(char *buf, uint64_t v, int bytes)
{
	if (bytes)
		return ht_fmt_bytes(buf, v);
	snprintf(buf, 32, "%llu", (unsigned long long)v);
	return buf;
}

/* "+3.9 KiB", "-12", "0": buf needs 40 bytes. */
static const char *fmt_change(char *buf, uint64_t before, uint64_t after, int bytes)
{
	char v[32];
	if (before == after)
		return strcpy(buf, "0");
	snprintf(buf, 40, "%c%s", after > before ? '+' : '-',
		 fmt_value(v, after > before ? after - before : before - after, bytes));
	return buf;
}

/* "+400.0%", "new", "gone": buf needs 32 bytes. */
static const char *fmt_pct(char *buf, uint64_t before, uint64_t after)
{
	if (before == after)
		return strcpy(buf, "0%");
	if (!before)
		return strcpy(buf, "new");
	if (!after)
		return strcpy(buf, "gone");
	snprintf(buf, 32, "%+.1f%%", 100.0 * ((double)after - (double)before) / (double)before);
	return buf;
}

/* A side of a trace cut short or damaged, after its time: the figures of a
 * time past where its events stop are those of where they stop (frees
 * after it are not in them), and "end" is there; past the time one
 * thread's events stop, that thread's calls may be missing.  (The words of
 * leaks' first line.) */
static void side_cut(FILE *f, const struct ht_diff_side *s)
{
	char b[32];
	if (s->complete)
		return;
	if (s->read_cut && s->at_end)
		fprintf(f, ", where the trace is cut short or damaged: frees after it are not in "
			   "it");
	else if (s->read_cut && s->at_ns > s->read_to_ns)
		fprintf(f, ": what was live by the trace's end at %s (the trace is cut short or "
			   "damaged: frees after it are not in it)", ht_fmt_ns(b, s->read_to_ns));
	else if (s->short_tid && s->at_ns > s->exact_to_ns)
		fprintf(f, " (the trace is cut short or damaged: thread %u's events stop at %s, "
			   "and its frees after that may be missing)", s->short_tid,
			ht_fmt_ns(b, s->exact_to_ns));
}

static void side_line(FILE *f, const char *what, const struct ht_diff_side *s)
{
	char b[32];
	fprintf(f, "%s %s (%s, pid %d) ", what, s->path, s->command, s->pid);
	if (s->mark)
		fprintf(f, "at mark \"%s\" (%s)", s->mark, ht_fmt_ns(b, s->at_ns));
	else if (s->at_end)
		fprintf(f, "at the end (%s)", ht_fmt_ns(b, s->at_ns));
	else if (!s->at_ns)
		fprintf(f, "at the start");
	else
		fprintf(f, "at %s", ht_fmt_ns(b, s->at_ns));
	side_cut(f, s);
	if (s->sample_bytes)
		fprintf(f, ", sampled every %s", ht_fmt_bytes(b, s->sample_bytes));
	fprintf(f, "\n");
}

static int unchanged(const struct ht_diff_entry *e)
{
	return !memcmp(&e->v[0], &e->v[1], sizeof(e->v[0]));
}

static void print_where(FILE *f, const struct ht_diff_entry *e, size_t depth)
{
	if (!e->nframes) {
		fprintf(f, "[no stack]\n");
		return;
	}
	ht_blocks__print_frames(f, e->frames, e->nframes, depth);
	fprintf(f, "\n");
}

void ht_diff__text(const struct ht_diff *d, FILE *f, size_t top, size_t depth)
{
	const struct ht_diff_side *b = &d->side[0], *a = &d->side[1];
	char s1[40], s2[40], s3[40], s4[40], s5[40], s6[40];
	side_line(f, "before:", b);
	side_line(f, "after: ", a);
	if (d->o.normalize)
		fprintf(f, "before scaled to the after side's totals "
			   "(--normalize: live bytes x%.4f)\n", b->scale[2]);
	fprintf(f, "\n%-16s %12s %12s %12s %9s\n", "", "before", "after", "change", "%");
	static const char *const rows[4] = {"bytes allocated", "allocations", "bytes live",
					     "blocks live"};
	for (int k = 0; k < 4; k++) {
		uint64_t vb = *field((struct ht_diff_vals *)&b->total, k);
		uint64_t va = *field((struct ht_diff_vals *)&a->total, k);
		int bytes = !(k & 1);
		fprintf(f, "%-16s %12s %12s %12s %9s\n", rows[k], fmt_value(s1, vb, bytes),
			fmt_value(s2, va, bytes), fmt_change(s3, vb, va, bytes),
			fmt_pct(s4, vb, va));
	}
	enum ht_diff_metric m[3] = {d->o.sort};
	for (int i = 0, k = 1; i < 3; i++)
		if (i != (int)d->o.sort)
			m[k++] = (enum ht_diff_metric)i;
	size_t nchanged = 0;
	for (size_t i = 0; i < d->n; i++)
		nchanged += !unchanged(&d->e[i]);
	const char *unit = d->o.by_function ? "functions" : "stacks";
	const char *unit1 = d->o.by_function ? "function" : "stack";
	if (!nchanged) {
		fprintf(f, "\nno change in any of %zu %s%s\n", d->n, unit1, ht_s(d->n));
		return;
	}
	char h0[40];
	snprintf(h0, sizeof(h0), "%s change", metric_desc[m[0]].label);
	fprintf(f, "\nby %s, %s growth first:\n%16s %9s %12s %12s %12s %9s  %s\n",
		d->o.by_function ? "allocating function" : "stack", metric_desc[m[0]].label, h0,
		"%", "before", "after", metric_desc[m[1]].label, metric_desc[m[2]].label,
		d->o.by_function ? "function" : "stack (innermost first)");
	size_t shown = 0;
	for (size_t i = 0; i < d->n && (!top || shown < top); i++) {
		const struct ht_diff_entry *e = &d->e[i];
		if (unchanged(e))
			continue;
		shown++;
		const struct ht_diff_vals *eb = &e->v[0], *ea = &e->v[1];
		uint64_t vb = ht_diff__value(eb, m[0]), va = ht_diff__value(ea, m[0]);
		int bytes = metric_desc[m[0]].bytes;
		fprintf(f, "%16s %9s %12s %12s %12s %9s  ", fmt_change(s1, vb, va, bytes),
			fmt_pct(s2, vb, va), fmt_value(s3, vb, bytes), fmt_value(s4, va, bytes),
			fmt_change(s5, ht_diff__value(eb, m[1]), ht_diff__value(ea, m[1]),
				   metric_desc[m[1]].bytes),
			fmt_change(s6, ht_diff__value(eb, m[2]), ht_diff__value(ea, m[2]),
				   metric_desc[m[2]].bytes));
		print_where(f, e, d->o.by_function ? 1 : depth);
	}
	if (nchanged > shown)
		fprintf(f, "... and %zu more %s that changed (--top 0 shows all)\n",
			nchanged - shown, nchanged - shown > 1 ? unit : unit1);
	if (d->n > nchanged)
		fprintf(f, "%zu %s unchanged\n", d->n - nchanged,
			d->n - nchanged > 1 ? unit : unit1);
}

/* ---- JSON ------------------------------------------------------------------------ */

static const char *const field_name[4] = {"alloc_bytes", "alloc_blocks", "live_bytes",
					  "live_blocks"};

static void json_vals(struct ht_json *j, const char *key, const struct ht_diff_vals *v)
{
	ht_json__obj_begin(j, key);
	for (int f = 0; f < 4; f++)
		ht_json__u64(j, field_name[f], *field((struct ht_diff_vals *)v, f));
	ht_json__obj_end(j);
}

static void json_delta(struct ht_json *j, const struct ht_diff_vals *b,
		       const struct ht_diff_vals *a)
{
	ht_json__obj_begin(j, "delta");
	for (int f = 0; f < 4; f++)
		ht_json__i64(j, field_name[f], (int64_t)(*field((struct ht_diff_vals *)a, f) -
							 *field((struct ht_diff_vals *)b, f)));
	ht_json__obj_end(j);
}

static void json_side(struct ht_json *j, const char *key, const struct ht_diff_side *s,
		      int normalize)
{
	ht_json__obj_begin(j, key);
	ht_json__str(j, "trace", s->path);
	ht_json__str(j, "command", s->command);
	ht_json__str(j, "executable", s->exe);
	ht_json__i64(j, "pid", s->pid);
	ht_json__str(j, "at", s->mark ? "mark" : s->at_end ? "end" : "time");
	ht_json__u64(j, "at_ns", s->at_ns);
	if (s->mark)
		ht_json__str(j, "mark", s->mark);
	ht_json__bool(j, "stacks", s->has_stacks);
	ht_json__u64(j, "sample_bytes", s->sample_bytes);
	ht_analyze__order_json(j, &s->order);
	if (!s->complete) { /* (as leaks --json says it) */
		ht_json__bool(j, "complete", 0);
		ht_json__u64(j, "read_to_ns", s->read_to_ns);
		ht_json__u64(j, "exact_to_ns", s->exact_to_ns);
		if (s->short_tid)
			ht_json__u64(j, "missing_thread", s->short_tid);
		ht_json__bool(j, "at_past_read_to", s->read_cut && s->at_ns > s->read_to_ns);
	}
	json_vals(j, "total", &s->total);
	if (normalize) {
		ht_json__obj_begin(j, "scale");
		for (int f = 0; f < 4; f++)
			ht_json__double(j, field_name[f], s->scale[f]);
		ht_json__obj_end(j);
	}
	ht_json__obj_end(j);
}

void ht_diff__json(const struct ht_diff *d, struct ht_json *j, size_t top)
{
	ht_json__obj_begin(j, NULL);
	json_side(j, "before", &d->side[0], d->o.normalize);
	json_side(j, "after", &d->side[1], 0);
	/* both sides: the second of one trace was read with the first */
	struct ht_order_info o = d->side[0].order;
	if (d->side[1].path != d->side[0].path) {
		o.exact = o.exact && d->side[1].order.exact;
		o.events_concerned += d->side[1].order.events_concerned;
	}
	ht_analyze__order_json(j, &o);
	int other = ht_diff__programs_differ(d);
	ht_json__bool(j, "same_executable", !(other & HT_DIFF_OTHER_EXE));
	ht_json__bool(j, "same_command", !other);
	ht_json__str(j, "by", d->o.by_function ? "function" : "stack");
	ht_json__str(j, "sort", metric_desc[d->o.sort].name);
	ht_json__bool(j, "normalized", d->o.normalize);
	json_delta(j, &d->side[0].total, &d->side[1].total);
	ht_json__u64(j, "entries_total", d->n);
	ht_json__arr_begin(j, "entries");
	for (size_t i = 0; i < d->n && (!top || i < top); i++) {
		const struct ht_diff_entry *e = &d->e[i];
		ht_json__obj_begin(j, NULL);
		ht_json__str(j, "key", e->key);
		ht_json__arr_begin(j, d->o.by_function ? "function" : "stack");
		for (size_t k = 0; k < e->nframes; k++)
			ht_blocks__json_frame(j, &e->frames[k]);
		ht_json__arr_end(j);
		json_vals(j, "before", &e->v[0]);
		json_vals(j, "after", &e->v[1]);
		json_delta(j, &e->v[0], &e->v[1]);
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__obj_end(j);
}

/* ---- folded and SVG ------------------------------------------------------------ */

static int by_key(const void *a, const void *b)
{
	const struct ht_flame_stack *x = a, *y = b;
	return strcmp(x->stack, y->stack);
}

/* The stacks with a value on either side, sorted by key; value from the
 * after side (or the before side if negate), base from the other. */
static struct ht_flame_stack *stacks(const struct ht_diff *d, int negate, size_t *n)
{
	struct ht_flame_stack *st = ht_xcalloc(d->n ? d->n : 1, sizeof(*st));
	*n = 0;
	for (size_t i = 0; i < d->n; i++) {
		const struct ht_diff_entry *e = &d->e[i];
		uint64_t b = ht_diff__value(&e->v[0], d->o.sort);
		uint64_t a = ht_diff__value(&e->v[1], d->o.sort);
		if (!a && !b)
			continue;
		st[*n].stack = e->key; /* (borrowed) */
		st[*n].value = negate ? b : a;
		st[*n].base = negate ? a : b;
		st[*n].count = e->v[negate ? 0 : 1].alloc_blocks;
		(*n)++;
	}
	if (*n > 1)
		qsort(st, *n, sizeof(*st), by_key);
	return st;
}

void ht_diff__folded(const struct ht_diff *d, FILE *f)
{
	size_t n;
	struct ht_flame_stack *st = stacks(d, 0, &n);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s %llu %llu\n", st[i].stack, (unsigned long long)st[i].base,
			(unsigned long long)st[i].value);
	free(st);
}

struct svg_ctx {
	int negate;       /* value is the before side */
	const char *unit; /* of the values */
};

/* Red where it grew, blue where it shrank, white-grey if the same; the
 * deeper, the nearer the change to the largest one (flamegraph.pl's
 * differential colours). */
static void diff_fill(void *ctx, const struct ht_flame_frame *fr, uint64_t max_change,
		      int rgb[3])
{
	const struct svg_ctx *c = ctx;
	uint64_t before = c->negate ? fr->value : fr->base;
	uint64_t after = c->negate ? fr->base : fr->value;
	if (before == after || !max_change) {
		rgb[0] = rgb[1] = rgb[2] = 230;
		return;
	}
	uint64_t ch = after > before ? after - before : before - after;
	int x = (int)lround(210.0 * (1.0 - (double)ch / (double)max_change));
	if (after > before)
		rgb[0] = 255, rgb[1] = rgb[2] = x;
	else
		rgb[2] = 255, rgb[0] = rgb[1] = x;
}

static void diff_details(void *ctx, FILE *f, const struct ht_flame_frame *fr, uint64_t total)
{
	(void)total;
	const struct svg_ctx *c = ctx;
	uint64_t before = c->negate ? fr->value : fr->base;
	uint64_t after = c->negate ? fr->base : fr->value;
	char pct[32];
	fprintf(f, " (before %llu, after %llu %s, %+lld, %s)", (unsigned long long)before,
		(unsigned long long)after, c->unit, (long long)(after - before),
		fmt_pct(pct, before, after));
}

int ht_diff__svg(const struct ht_diff *d, FILE *f, const char *title, uint64_t width,
		 int negate)
{
	size_t n;
	struct ht_flame_stack *st = stacks(d, negate, &n);
	struct svg_ctx c = {negate, metric_desc[d->o.sort].bytes ? "bytes" : "allocations"};
	struct ht_flame_style style = {title, c.unit, width, diff_fill, diff_details, &c, NULL};
	int drawn = ht_flame__svg(f, st, n, &style);
	free(st);
	return drawn;
}
