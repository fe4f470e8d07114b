/* heaptrail export --format perfetto: the Chrome Trace Event Format (JSON),
 * which ui.perfetto.dev and chrome://tracing open.
 *
 *   {"displayTimeUnit":"ns","traceEvents":[ EVENT, ... ]}
 *
 * with, in one streaming pass (memory bounded by threads and --max-points):
 *   ph "M"  process_name and thread_name metadata (names from THREAD_NAME)
 *   ph "X"  one slice per thread from its first event to its last: its track
 *   ph "C"  counters: live heap (requested bytes), live heap (usable
 *           bytes), RSS; downsampled (export_series.c), extremes kept
 *   ph "i"  instants: markers (heaptrail_mark, process scope), allocations
 *           of --big bytes or more (thread scope), and with --all-events
 *           every call (thread scope)
 * Times ("ts", "dur") are microseconds since the start of the recording,
 * with three decimals (nanoseconds). */
#define _GNU_SOURCE
#include "export.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/blocks.h"
#include "analyze/pass.h"
#include "common/json.h"
#include "common/util.h"

struct thread {
	uint32_t tid;              /* thread */
	char name[HT_MAX_STR + 1]; /* its last THREAD_NAME, "" if none */
	uint64_t first, last;      /* its first and last event (ns) */
	uint64_t events;           /* its events */
};

struct perfetto {
	FILE *f;                   /* output */
	const struct ht_export_opts *o; /* options */
	int32_t pid;               /* the traced process */
	uint64_t nevents;          /* trace events written */
	struct thread *threads;    /* seen so far */
	size_t nthreads, capthreads; /* count / allocated */
	struct ht_pass *blocks;    /* the live blocks */
	uint64_t heap, usable;     /* live requested / usable bytes */
	struct ht_series s_heap, s_usable, s_rss; /* the counters */
};

static struct thread *thread_of(struct perfetto *p, uint32_t tid)
{
	for (size_t i = 0; i < p->nthreads; i++)
		if (p->threads[i].tid == tid)
			return &p->threads[i];
	if (p->nthreads == p->capthreads) {
		p->capthreads = p->capthreads ? 2 * p->capthreads : 16;
		p->threads = ht_xrealloc(p->threads, p->capthreads * sizeof(*p->threads));
	}
	struct thread *t = &p->threads[p->nthreads++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->first = UINT64_MAX;
	return t;
}

/* Opens an event object: its name, phase, time, pid and tid (the pid's
 * for process-wide events: tid 0). */
static void begin(struct perfetto *p, const char *name, const char *ph, uint64_t ns,
		  uint32_t tid)
{
	FILE *f = p->f;
	fputs(p->nevents++ ? ",\n{\"name\":" : "\n{\"name\":", f);
	ht_json__put_string(f, name);
	fprintf(f, ",\"ph\":\"%s\",\"ts\":%llu.%03llu,\"pid\":%d", ph,
		(unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000), p->pid);
	fprintf(f, ",\"tid\":%u", tid ? tid : (uint32_t)p->pid);
}

static void on_acquire(void *ctx, const struct ht_event *e, const struct ht_block *b)
{
	struct perfetto *p = ctx;
	p->heap += b->size * b->weight;
	p->usable += b->usable * b->weight;
	if (!p->o->big || b->size < p->o->big)
		return;
	char name[64], sz[32];
	snprintf(name, sizeof(name), "%s %s", ht_kind_name(e->kind), ht_fmt_bytes(sz, b->size));
	begin(p, name, "i", e->time_ns, e->tid);
	fprintf(p->f, ",\"s\":\"t\",\"cat\":\"big allocation\",\"args\":{\"size\":%llu,"
		      "\"usable\":%llu,\"ptr\":\"0x%llx\"}}",
		(unsigned long long)b->size, (unsigned long long)b->usable,
		(unsigned long long)b->ptr);
}

static void on_release(void *ctx, const struct ht_event *e, const struct ht_block *b)
{
	(void)e;
	struct perfetto *p = ctx;
	p->heap -= b->size * b->weight;
	p->usable -= b->usable * b->weight;
}

/* --all-events: the call as an instant on its thread, its fields as args. */
static void call_instant(struct perfetto *p, const struct ht_event *e)
{
	const struct ht_kind_desc *d = &ht_kind_descs[e->kind];
	begin(p, ht_kind_name(e->kind), "i", e->time_ns, e->tid);
	fprintf(p->f, ",\"s\":\"t\",\"cat\":\"call\",\"args\":{");
	char names[128];
	snprintf(names, sizeof(names), "%s", d->names);
	int k = 0;
	const char *sep = "";
	for (char *save = NULL, *n = strtok_r(names, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
		char code = d->fields[k];
		fprintf(p->f, "%s\"%s\":", sep, n);
		sep = ",";
		if (code == 'S')
			ht_json__put_string(p->f, e->str ? e->str : "");
		else if (code == 'p')
			fprintf(p->f, "\"0x%llx\"", (unsigned long long)(k < e->nv ? e->v[k] : 0));
		else if (code == 's')
			fprintf(p->f, "%lld", (long long)(k < e->nv ? (int64_t)e->v[k] : 0));
		else if (code == 'U')
			fprintf(p->f, "%llu", (unsigned long long)e->usable);
		else
			fprintf(p->f, "%llu", (unsigned long long)(k < e->nv ? e->v[k] : 0));
		if (code != 'S')
			k++;
	}
	fprintf(p->f, "}}");
}

static void counter(struct perfetto *p, const char *name, const struct ht_series *s)
{
	struct ht_point *pts = ht_xrealloc(NULL, 4 * s->nbuckets * sizeof(*pts));
	size_t n = ht_series__points(s, pts);
	for (size_t i = 0; i < n; i++) {
		begin(p, name, "C", pts[i].t, 0);
		fprintf(p->f, ",\"args\":{\"bytes\":%llu}}", (unsigned long long)pts[i].v);
	}
	free(pts);
}

static void threads_out(struct perfetto *p, const char *cmd)
{
	begin(p, "process_name", "M", 0, 0);
	fputs(",\"args\":{\"name\":", p->f);
	ht_json__put_string(p->f, cmd);
	fputs("}}", p->f);
	for (size_t i = 0; i < p->nthreads; i++) {
		const struct thread *t = &p->threads[i];
		char name[HT_MAX_STR + 32];
		if (t->name[0])
			snprintf(name, sizeof(name), "%s", t->name);
		else
			snprintf(name, sizeof(name), "%s %u", (int32_t)t->tid == p->pid ? "main" : "thread",
				 t->tid);
		begin(p, "thread_name", "M", 0, t->tid);
		fputs(",\"args\":{\"name\":", p->f);
		ht_json__put_string(p->f, name);
		fputs("}}", p->f);
		uint64_t dur = t->last - t->first;
		begin(p, name, "X", t->first, t->tid);
		fprintf(p->f, ",\"dur\":%llu.%03llu,\"cat\":\"thread\",\"args\":{\"events\":%llu}}",
			(unsigned long long)(dur / 1000), (unsigned long long)(dur % 1000),
			(unsigned long long)t->events);
	}
}

int ht_export__perfetto(const struct ht_export_opts *o, FILE *f)
{
	struct perfetto p = {.f = f, .o = o};
	p.blocks = ht_pass__new();
	ht_series__init(&p.s_heap, o->max_points);
	ht_series__init(&p.s_usable, o->max_points);
	ht_series__init(&p.s_rss, o->max_points);
	int ret = HT_EXIT_DATA;
	struct ht_reader *r = ht_analyze__open(o->trace);
	if (!r)
		goto cleanup;
	const struct ht_trace_info *in = ht_reader__info(r);
	p.pid = in->pid;
	if (o->all_events)
		ht_warning("--all-events writes one JSON object (about 150 bytes) per call%s%llu "
			   "calls: the file is big and slow to open",
			   in->events_hdr ? ": " : "", (unsigned long long)in->events_hdr);
	fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", f);
	ht_series__add(&p.s_heap, 0, 0);
	ht_series__add(&p.s_usable, 0, 0);
	struct ht_block_cbs cbs = {on_release, on_acquire, &p};
	struct ht_event e;
	while (ht_analyze__next(r, &e)) {
		struct thread *t = thread_of(&p, e.tid);
		if (e.time_ns < t->first)
			t->first = e.time_ns;
		if (e.time_ns > t->last)
			t->last = e.time_ns;
		t->events += ht_event__is_call(&e);
		uint64_t heap = p.heap, usable = p.usable;
		if (e.kind == HT_EV_CONTROL && e.v[0] == HT_CTL_RESET)
			p.heap = p.usable = 0; /* the blocks before are forgotten */
		ht_blockop__callbacks(ht_pass__event(p.blocks, &e), &e, &cbs);
		if (p.heap != heap)
			ht_series__add(&p.s_heap, e.time_ns, p.heap);
		if (p.usable != usable)
			ht_series__add(&p.s_usable, e.time_ns, p.usable);
		if (e.kind == HT_EV_THREAD_NAME) {
			snprintf(t->name, sizeof(t->name), "%s", e.str ? e.str : "");
		} else if (e.kind == HT_EV_MARK) {
			begin(&p, e.str ? e.str : "", "i", e.time_ns, e.tid);
			fputs(",\"s\":\"p\",\"cat\":\"marker\"}", f);
		}
		if (o->all_events && ht_event__is_call(&e))
			call_instant(&p, &e);
	}
	ret = ht_analyze__finish_pass(r, o->trace, 0, ht_pass__pauses(p.blocks)) ? HT_EXPORT_DAMAGED
										 : HT_EXIT_OK;
	const uint64_t *rt, *rkb;
	size_t nrss = ht_reader__rss_samples(r, &rt, &rkb);
	for (size_t i = 0; i < nrss; i++)
		ht_series__add(&p.s_rss, rt[i], rkb[i] * 1024);
	threads_out(&p, in->cmdline && *in->cmdline ? in->cmdline : "?");
	counter(&p, "live heap (requested bytes)", &p.s_heap);
	counter(&p, "live heap (usable bytes)", &p.s_usable);
	if (nrss)
		counter(&p, "RSS", &p.s_rss);
	/* last: whether the order read is exact is known at the end */
	fputs("\n],\"otherData\":{\"trace\":", f);
	ht_json__put_string(f, o->trace);
	fputs(",\"command\":", f);
	ht_json__put_string(f, in->cmdline ? in->cmdline : "");
	fprintf(f, ",\"order_exact\":%s,\"order_events_concerned\":%llu",
		in->order.exact ? "true" : "false", (unsigned long long)in->order.events_concerned);
	/* a sample's counters are estimates: said where the file is read */
	fprintf(f, ",\"sampled\":%s", (in->flags & HT_FILE_F_SAMPLED) ? "true" : "false");
	if (in->flags & HT_FILE_F_SAMPLED) {
		char snote[256];
		fputs(",\"sample_note\":", f);
		ht_json__put_string(f, ht_analyze__sample_note(in, snote, sizeof(snote)));
	}
	fputs("}}\n", f);
cleanup:
	ht_reader__close(r);
	ht_pass__delete(p.blocks);
	ht_series__free(&p.s_heap);
	ht_series__free(&p.s_usable);
	ht_series__free(&p.s_rss);
	free(p.threads);
	return ret;
}
