/* User stacks counted in BPF, symbolized and rendered (stackcount.h). */
#define _GNU_SOURCE
#include "stackcount.h"

#include <errno.h>
#include <linux/types.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/blocks.h"
#include "analyze/flamesvg.h"
#include "common/outfile.h"
#include "common/util.h"
#include "probes/probe.h"
#include "probes/procsyms.h"
#include "probes/stacks.h"

#ifdef HT_HAVE_BPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#endif

struct ht_stackcount {
	struct ht_procsyms *ps;          /* symbols of the processes seen */
	int first_is_ip;                 /* see ht_stackcount__new */
	struct ht_counted_stack *stacks; /* of the last collect, sorted */
	size_t n, cap;                   /* used / allocated */
	uint64_t total, total_bytes;     /* sums over them */
};

struct ht_stackcount *ht_stackcount__new(const struct ht_symbol_opts *opts, int first_is_ip)
{
	struct ht_stackcount *sc = calloc(1, sizeof(*sc));
	if (!sc || !(sc->ps = ht_procsyms__new(opts))) {
		free(sc);
		return NULL;
	}
	sc->first_is_ip = first_is_ip;
	return sc;
}

static void clear_stacks(struct ht_stackcount *sc)
{
	for (size_t i = 0; i < sc->n; i++) {
		for (size_t k = 0; k < sc->stacks[i].nframes; k++) {
			free((char *)sc->stacks[i].frames[k].function);
			free((char *)sc->stacks[i].frames[k].file);
			free((char *)sc->stacks[i].frames[k].module);
		}
		free(sc->stacks[i].frames);
	}
	sc->n = 0;
	sc->total = sc->total_bytes = 0;
}

void ht_stackcount__free(struct ht_stackcount *sc)
{
	if (!sc)
		return;
	clear_stacks(sc);
	free(sc->stacks);
	ht_procsyms__free(sc->ps);
	free(sc);
}

int ht_stackcount__on_note(void *ctx, void *data, size_t len)
{
	struct ht_stackcount *sc = ctx;
	const struct ht_pid_note *n = data;
	if (len >= sizeof(*n))
		ht_procsyms__load(sc->ps, (pid_t)n->pid);
	return 0;
}

void ht_stackcount__on_exit(void *ctx, pid_t pid)
{
	struct ht_stackcount *sc = ctx;
	ht_procsyms__load(sc->ps, pid);
}

static char *dup_or_null(const char *s)
{
	if (!s)
		return NULL;
	char *d = ht_xstrdup(s);
	return d;
}

static int by_count(const void *a, const void *b)
{
	const struct ht_counted_stack *x = a, *y = b;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Symbolizes the addresses of one stack into s. */
static void symbolize(struct ht_stackcount *sc, struct ht_counted_stack *s, const __u64 *ips,
		      size_t nips)
{
	size_t cap = 0;
	for (size_t i = 0; i < nips && ips[i]; i++) {
		const struct ht_frame *fr;
		size_t nf = ht_procsyms__resolve(sc->ps, (pid_t)s->pid, ips[i],
						 sc->first_is_ip && i == 0, &fr);
		if (s->nframes + nf > cap) {
			cap = (s->nframes + nf) * 2;
			s->frames = ht_xrealloc(s->frames, cap * sizeof(*s->frames));
		}
		for (size_t k = 0; k < nf; k++) {
			struct ht_frame *d = &s->frames[s->nframes++];
			*d = fr[k];
			d->function = dup_or_null(fr[k].function);
			d->file = dup_or_null(fr[k].file);
			d->module = dup_or_null(fr[k].module);
		}
	}
}

int ht_stackcount__collect(struct ht_stackcount *sc, int counts_fd, int stacks_fd, int clear)
{
	clear_stacks(sc);
#ifndef HT_HAVE_BPF
	(void)counts_fd;
	(void)stacks_fd;
	(void)clear;
	(void)by_count;  /* (used with BPF only) */
	(void)symbolize; /* (same) */
	return 0;
#else
	struct ht_stack_key key, next, *keys = NULL;
	size_t nkeys = 0, capkeys = 0;
	int first = 1;
	while (!bpf_map_get_next_key(counts_fd, first ? NULL : &key, &next)) {
		first = 0;
		key = next;
		if (nkeys == capkeys) {
			capkeys = capkeys ? capkeys * 2 : 256;
			keys = ht_xrealloc(keys, capkeys * sizeof(*keys));
		}
		keys[nkeys++] = key;
	}
	static __u64 ips[HT_STACK_DEPTH];
	for (size_t i = 0; i < nkeys; i++) {
		struct ht_stack_val v;
		if (bpf_map_lookup_elem(counts_fd, &keys[i], &v))
			continue;
		if (clear)
			bpf_map_delete_elem(counts_fd, &keys[i]);
		if (!v.count)
			continue;
		if (sc->n == sc->cap) {
			sc->cap = sc->cap ? sc->cap * 2 : 256;
			sc->stacks = ht_xrealloc(sc->stacks, sc->cap * sizeof(*sc->stacks));
		}
		struct ht_counted_stack *s = &sc->stacks[sc->n++];
		memset(s, 0, sizeof(*s));
		s->pid = keys[i].pid;
		memcpy(s->comm, v.comm, 16);
		s->comm[16] = 0;
		s->count = v.count;
		s->bytes = v.bytes;
		sc->total += v.count;
		sc->total_bytes += v.bytes;
		if (keys[i].error < 0) {
			s->error = keys[i].error;
			continue;
		}
		memset(ips, 0, sizeof(ips));
		if (bpf_map_lookup_elem(stacks_fd, &keys[i].stack, ips)) {
			s->error = -ENOENT;
			continue;
		}
		symbolize(sc, s, ips, HT_STACK_DEPTH);
	}
	/* the next interval starts with an empty stack map too (once every
	 * count that shares a stack has read it) */
	for (size_t i = 0; clear && i < nkeys; i++) {
		if (!keys[i].error)
			bpf_map_delete_elem(stacks_fd, &keys[i].stack);
	}
	free(keys);
	if (sc->n)
		qsort(sc->stacks, sc->n, sizeof(*sc->stacks), by_count);
	return (int)sc->n;
#endif
}

static const char *error_text(int error)
{
	switch (-error) {
	case EFAULT: return "[no user stack]";
	case ENOMEM: return "[stack map full]";
	default: return "[stack lost]";
	}
}

void ht_stackcount__print(const struct ht_stackcount *sc, FILE *f, size_t top, const char *what,
			  int show_bytes)
{
	char b1[32];
	size_t shown = top && top < sc->n ? top : sc->n;
	fprintf(f, "%llu %s", (unsigned long long)sc->total, what);
	if (show_bytes)
		fprintf(f, " asking for %s", ht_fmt_bytes(b1, sc->total_bytes));
	fprintf(f, " in %zu stacks%s", sc->n, shown < sc->n ? "" : "\n");
	if (shown < sc->n)
		fprintf(f, ", the %zu most:\n", shown);
	for (size_t i = 0; i < shown; i++) {
		const struct ht_counted_stack *s = &sc->stacks[i];
		fprintf(f, "\n  #%-3zu %llu %s (%.1f%%)", i + 1, (unsigned long long)s->count, what,
			sc->total ? 100.0 * (double)s->count / (double)sc->total : 0.0);
		if (show_bytes)
			fprintf(f, ", %s", ht_fmt_bytes(b1, s->bytes));
		fprintf(f, "  %s [%u]\n", s->comm, s->pid);
		if (s->error)
			fprintf(f, "        %s\n", error_text(s->error));
		for (size_t k = 0; k < s->nframes; k++) {
			char name[1024];
			const struct ht_frame *fr = &s->frames[k];
			fprintf(f, "        %s", ht_blocks__frame_name(name, sizeof(name), fr));
			if (fr->file)
				fprintf(f, " (%s:%d)",
					strrchr(fr->file, '/') ? strrchr(fr->file, '/') + 1 : fr->file,
					fr->line);
			else if (fr->function && fr->module)
				fprintf(f, " (%s)", fr->module);
			fprintf(f, "%s\n", fr->inlined ? " [inlined]" : "");
		}
	}
}

void ht_stackcount__json(const struct ht_stackcount *sc, struct ht_json *j, size_t top,
			 int show_bytes)
{
	ht_json__u64(j, "total", sc->total);
	if (show_bytes)
		ht_json__u64(j, "total_bytes", sc->total_bytes);
	ht_json__u64(j, "distinct_stacks", sc->n);
	ht_json__arr_begin(j, "stacks");
	size_t shown = top && top < sc->n ? top : sc->n;
	for (size_t i = 0; i < shown; i++) {
		const struct ht_counted_stack *s = &sc->stacks[i];
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "pid", s->pid);
		ht_json__str(j, "comm", s->comm);
		ht_json__u64(j, "count", s->count);
		if (show_bytes)
			ht_json__u64(j, "bytes", s->bytes);
		if (s->error)
			ht_json__str(j, "error", error_text(s->error));
		ht_json__arr_begin(j, "frames");
		for (size_t k = 0; k < s->nframes; k++)
			ht_blocks__json_frame(j, &s->frames[k]);
		ht_json__arr_end(j);
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
}

/* "comm;outer;...;inner" of a stack, malloc'd. */
static char *folded_line(const struct ht_counted_stack *s)
{
	char *frames = s->error ? strdup(error_text(s->error)) : ht_flame__join(s->frames, s->nframes, 0);
	char comm[17];
	snprintf(comm, sizeof(comm), "%s", s->comm);
	for (char *p = comm; *p; p++)
		if (*p == ';' || *p == ' ')
			*p = '_';
	char *line;
	if (!frames || asprintf(&line, "%s;%s", comm[0] ? comm : "?", frames) < 0)
		ht_oom();
	free(frames);
	return line;
}

void ht_stackcount__folded(const struct ht_stackcount *sc, FILE *f)
{
	for (size_t i = 0; i < sc->n; i++) {
		char *line = folded_line(&sc->stacks[i]);
		fprintf(f, "%s %llu\n", line, (unsigned long long)sc->stacks[i].count);
		free(line);
	}
}

void ht_stackcount__svg(const struct ht_stackcount *sc, FILE *f, const char *title,
			const char *unit)
{
	struct ht_flame_stack *st = ht_xrealloc(NULL, (sc->n ? sc->n : 1) * sizeof(*st));
	for (size_t i = 0; i < sc->n; i++) {
		st[i].stack = folded_line(&sc->stacks[i]);
		st[i].value = sc->stacks[i].count;
		st[i].count = sc->stacks[i].count;
		st[i].base = 0;
	}
	struct ht_flame_style style = {.title = title, .unit = unit, .width = 1200};
	ht_flame__svg(f, st, sc->n, &style);
	for (size_t i = 0; i < sc->n; i++)
		free(st[i].stack);
	free(st);
}

int ht_stackcount__write(const struct ht_stackcount *sc, const char *path, int folded,
			 const char *title, const char *unit)
{
	char err[1024];
	struct ht_out out;
	if (ht_out__open(&out, path, HT_OUT_PUBLIC, 0, err, sizeof(err))) {
		ht_error("%s", err); /* ("cannot write PATH: why", as every command says it) */
		return -1;
	}
	if (folded)
		ht_stackcount__folded(sc, out.f);
	else
		ht_stackcount__svg(sc, out.f, title, unit);
	if (ht_out__commit(&out, err, sizeof(err))) {
		ht_error("%s: cannot write: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* One report: text or a JSON interval. */
static void report(struct ht_stackcount *sc, struct ht_probe_session *s,
		   const struct ht_probe_opts *po, const struct ht_stackcount_out *o,
		   struct ht_json *j, int final)
{
	uint64_t t = ht_probe__elapsed(s);
	if (po->json) {
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "elapsed_ns", t);
		ht_json__bool(j, "final", final);
		ht_stackcount__json(sc, j, o->top, o->show_bytes);
		ht_json__obj_end(j);
		return;
	}
	if (o->folded && !o->out) {
		ht_stackcount__folded(sc, stdout);
		return;
	}
	char b[32];
	if (po->interval)
		printf("[%s] ", ht_fmt_ns(b, t));
	ht_stackcount__print(sc, stdout, o->top, o->what, o->show_bytes);
	if (po->interval)
		printf("\n");
	fflush(stdout);
}

int ht_stackcount__run(struct ht_stackcount *sc, struct ht_probe_session *s,
		       const struct ht_probe_opts *po, const struct ht_stackcount_out *o,
		       const struct ht_stackcount_maps *m, const char *cmd)
{
	struct ht_json j;
	enum ht_probe_step st;
	int rc = 0, counts_fd = m->counts_fd, stacks_fd = m->stacks_fd;
	struct ring_buffer *rb = NULL;
	char err[1024];
	if (o->out && ht_out__check(o->out, err, sizeof(err))) { /* (not after the probing) */
		ht_error("%s", err);
		return HT_EXIT_DATA;
	}
#ifdef HT_HAVE_BPF
	rb = ring_buffer__new(m->notes_fd, ht_stackcount__on_note, sc, NULL);
	if (!rb) {
		ht_error("%s: ring buffer: %s", cmd, strerror(errno));
		return HT_EXIT_DATA;
	}
#endif
	ht_probe__on_exit(s, ht_stackcount__on_exit, sc);
	if ((rc = ht_probe__go(s)))
		goto cleanup;
	if (po->json) {
		ht_json__init(&j, stdout, 0);
		ht_json__obj_begin(&j, NULL);
		ht_probe__json_head(&j, s, cmd);
		ht_json__arr_begin(&j, "intervals");
	}
	fprintf(stderr, "heaptrail %s: counting %s%s... Ctrl-C to end\n", cmd, o->what,
		po->interval ? " by interval" : "");
	while ((st = ht_probe__step(s, rb)) != HT_PROBE_STOP) {
		if (st != HT_PROBE_TICK)
			continue;
		ht_stackcount__collect(sc, counts_fd, stacks_fd, 1);
		report(sc, s, po, o, &j, 0);
	}
	if (!po->interval || ht_probe__final_due(s)) {
		ht_stackcount__collect(sc, counts_fd, stacks_fd, 1);
		report(sc, s, po, o, &j, 1);
	}
	if (o->out && ht_stackcount__write(sc, o->out, o->folded, o->title, o->unit))
		rc = HT_EXIT_DATA;
	if (po->json) {
		ht_json__arr_end(&j);
		ht_json__u64(&j, "not_counted", *m->dropped);
		ht_json__u64(&j, "elapsed_ns", ht_probe__elapsed(s));
		ht_json__str(&j, "stopped", ht_probe__reason(s));
		ht_json__obj_end(&j);
		ht_json__finish(&j);
	}
	if (*m->dropped)
		ht_warning("%s: %llu %s not counted (the counts map was full)", cmd,
			   (unsigned long long)*m->dropped, o->what);
	fprintf(stderr, "heaptrail %s: stopped: %s%s%s\n", cmd, ht_probe__reason(s),
		o->out && !rc ? "; wrote " : "", o->out && !rc ? o->out : "");
cleanup:
#ifdef HT_HAVE_BPF
	ring_buffer__free(rb);
#endif
	return rc;
}
