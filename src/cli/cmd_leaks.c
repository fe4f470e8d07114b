/* heaptrail leaks: the blocks a program never freed, grouped by the stack
 * that allocated them, biggest first (like memleak and valgrind's leak
 * summary).  The stacks come from `record --stacks`; addresses resolve
 * offline (src/symbols). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/blocks.h"
#include "analyze/pass.h"
#include "analyze/readto.h"
#include "analyze/suppressions.h"
#include "cli/builtin.h"
#include "common/json.h"
#include "common/livemap.h"
#include "common/options.h"
#include "common/util.h"
#include "symbols/symbolize.h"

#define MAX_FRAMES 1024 /* frames printed per stack, inlined ones included */

/* One configuration per run; each default is labelled by its flag. */
struct leaks_config {
	uint64_t top;            /* --top (20): groups shown, 0 = all */
	int json;                /* --json */
	uint64_t older;          /* --older (0): only blocks at least this old */
	uint64_t at;             /* --at (the end): the time to report at */
	uint64_t interval;       /* --interval (0: none): also report every TIME */
	const char *suppressions; /* --suppressions FILE */
	int no_default_supp;     /* --no-default-suppressions */
	const char *sysroot;     /* --sysroot */
	const char *debug_dir;   /* --debug-dir */
	int quiet;             /* -q: no progress line, no warnings about the trace's state */
};

static const char usage_text[] =
	"usage: heaptrail leaks [options] TRACE\n"
	"\n"
	"Lists the heap blocks the program never freed, grouped by the stack that\n"
	"allocated them, most bytes first.  Record with --stacks to see the stacks.\n"
	HT_HELP_PERF_MAP
	"\fEXAMPLES\n"
	"  heaptrail record --stacks -o app.ht -- ./app && heaptrail leaks app.ht\n"
	"  heaptrail leaks --older 10s --top 5 app.ht       # blocks alive for 10 s or more\n"
	"  heaptrail leaks --at 2.5s app.ht                 # what was live 2.5 s in\n"
	"  heaptrail leaks --interval 1s --top 3 app.ht     # and every second, to see growth\n"
	"  heaptrail leaks --suppressions known.supp --json app.ht | jq .leaked_bytes\n"
	"SUPPRESSIONS\n"
	"  One pattern a line (fnmatch: '*' and '?'), optionally after \"leak:\" as in\n"
	"  LeakSanitizer's files; '#' starts a comment.  A group whose stack has a\n"
	"  frame whose function, source file or module contains a match is left out\n"
	"  and counted as suppressed.  A file that is not text (a NUL or control\n"
	"  byte) or a line of another sanitizer's type (\"race:f\") is refused,\n"
	"  naming its line (exit 2).  Built in (--no-default-suppressions shows\n"
	"  them): glibc's and ld.so's own blocks that they keep for the process's\n"
	"  lifetime or free only at its very end, as valgrind and LeakSanitizer hide\n"
	"  them: the thread vector of every thread that ever ran (allocate_dtv,\n"
	"  _dl_allocate_tls) and its growth for dlopen'ed TLS (_dl_resize_dtv,\n"
	"  _dl_update_slotinfo).\n";

struct group {
	uint32_t stack;    /* stack node, 0 = none recorded */
	uint64_t bytes;    /* requested bytes */
	uint64_t blocks;   /* blocks */
	uint64_t off_bytes, off_blocks; /* of those, allocated before recording last
					 * went off: maybe freed meanwhile */
	int suppressed;    /* matched a suppression */
	uint64_t key;      /* ht_blocks__stack_key of its stack */
};

struct leaks {
	struct ht_pass *blocks;   /* the live blocks, aux = stack node */
	struct group *groups;     /* by stack */
	size_t ngroups, capgroups; /* count / allocated */
	struct ht_suppressions supp; /* default and --suppressions patterns */
	uint64_t end_ns;          /* the time reported at */
	uint64_t at_ns;           /* --at as given (UINT64_MAX: none) */
	uint64_t trace_end_ns;    /* the trace's end (or where a cut one's events stop) */
	struct ht_readto readto;  /* how far a cut or damaged trace was read */
	struct snap *snaps;       /* --interval: the groups at each step */
	size_t nsnaps, capsnaps;  /* count / allocated */
};

/* The groups at one --interval step. */
struct snap {
	uint64_t at;          /* time since the start */
	struct group *groups; /* as group_blocks left them */
	size_t n;             /* count */
};

static struct group *group_of(struct leaks *l, uint32_t stack, size_t *hash, size_t hcap)
{
	size_t k = (size_t)((stack + 1) * 0x9E3779B97F4A7C15ull >> 17) & (hcap - 1);
	for (; hash[k]; k = (k + 1) & (hcap - 1))
		if (l->groups[hash[k] - 1].stack == stack)
			return &l->groups[hash[k] - 1];
	if (l->ngroups == l->capgroups) {
		l->capgroups = l->capgroups ? l->capgroups * 2 : 256;
		l->groups = realloc(l->groups, l->capgroups * sizeof(*l->groups));
		if (!l->groups)
			exit(1);
	}
	struct group *g = &l->groups[l->ngroups++];
	memset(g, 0, sizeof(*g));
	g->stack = stack;
	hash[k] = l->ngroups;
	return g;
}

static int by_bytes(const void *a, const void *b)
{
	const struct group *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	if (x->blocks != y->blocks)
		return x->blocks < y->blocks ? 1 : -1;
	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* Groups the blocks still live, old enough, by stack. */
static void group_blocks(struct leaks *l, uint64_t older)
{
	const struct ht_livemap *live = ht_pass__live(l->blocks);
	const struct ht_pauses *ps = ht_pass__pauses(l->blocks);
	size_t hcap = 1024;
	while (hcap < 2 * live->count + 2)
		hcap *= 2;
	size_t *hash = calloc(hcap, sizeof(*hash));
	if (!hash)
		exit(1);
	for (size_t i = 0; i < live->cap; i++) {
		const struct ht_block *b = &live->slots[i];
		if (!b->ptr || ht_block__forgotten(b))
			continue;
		if (older && (b->time_ns > l->end_ns || l->end_ns - b->time_ns < older))
			continue;
		struct group *g = group_of(l, b->aux, hash, hcap);
		g->bytes += b->size * b->weight;
		g->blocks += b->weight;
		if (ps->count && b->time_ns < ps->last_off_ns) {
			g->off_bytes += b->size * b->weight;
			g->off_blocks += b->weight;
		}
	}
	free(hash);
	if (l->ngroups > 1) /* (groups is NULL when there are none) */
		qsort(l->groups, l->ngroups, sizeof(*l->groups), by_bytes);
}

/* --interval: keeps the groups live at time at. */
static void snapshot(struct leaks *l, uint64_t at, uint64_t older)
{
	uint64_t end = l->end_ns;
	l->end_ns = at;
	l->ngroups = 0;
	group_blocks(l, older);
	if (l->nsnaps == l->capsnaps) {
		l->capsnaps = l->capsnaps ? l->capsnaps * 2 : 16;
		l->snaps = realloc(l->snaps, l->capsnaps * sizeof(*l->snaps));
		if (!l->snaps)
			exit(1);
	}
	struct snap *s = &l->snaps[l->nsnaps++];
	s->at = at;
	s->n = l->ngroups;
	s->groups = malloc((s->n ? s->n : 1) * sizeof(*s->groups));
	if (!s->groups)
		exit(1);
	memcpy(s->groups, l->groups, s->n * sizeof(*s->groups));
	l->ngroups = 0;
	l->end_ns = end;
}

static int by_key(const void *a, const void *b)
{
	const struct group *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* Stacks that differ only in addresses that resolve alike (an unrolled
 * loop's call sites, a function duplicated by the compiler) are one group
 * to a reader: merged. */
static void merge_alike(struct leaks *l, struct ht_reader *r, struct ht_symbolizer *sym)
{
	uint64_t *memo = ht_xcalloc(ht_reader__nnodes(r) + 1, sizeof(*memo));
	for (size_t i = 0; i < l->ngroups; i++) /* (no stack: key 0, never merged) */
		l->groups[i].key = ht_blocks__stack_key(r, sym, l->groups[i].stack, memo);
	free(memo);
	if (l->ngroups > 1) /* (groups is NULL when there are none) */
		qsort(l->groups, l->ngroups, sizeof(*l->groups), by_key);
	size_t o = 0;
	for (size_t i = 0; i < l->ngroups; i++) {
		if (o && l->groups[o - 1].key == l->groups[i].key && l->groups[i].key) {
			l->groups[o - 1].bytes += l->groups[i].bytes;
			l->groups[o - 1].blocks += l->groups[i].blocks;
			l->groups[o - 1].off_bytes += l->groups[i].off_bytes;
			l->groups[o - 1].off_blocks += l->groups[i].off_blocks;
			continue;
		}
		l->groups[o++] = l->groups[i];
	}
	l->ngroups = o;
	if (l->ngroups > 1) /* (groups is NULL when there are none) */
		qsort(l->groups, l->ngroups, sizeof(*l->groups), by_bytes);
}

static void print_frame_text(const struct ht_frame *f)
{
	char name[1024];
	printf("\t%s", ht_blocks__frame_name(name, sizeof(name), f));
	if (f->file)
		printf(" %s:%d", f->file, f->line);
	if (f->function && f->module)
		printf(" [%s]", f->module);
	if (f->inlined)
		printf(" (inlined)");
	printf("\n");
}


struct totals {
	uint64_t bytes, blocks;         /* reported */
	uint64_t sup_bytes, sup_blocks; /* suppressed */
	uint64_t nostack;               /* blocks without a stack */
	uint64_t off_bytes, off_blocks; /* reported, allocated before recording last went off */
	size_t kept;                    /* groups reported */
};

static struct ht_frame frames[MAX_FRAMES];

/* Merges alike groups, marks the suppressed ones, adds up the rest. */
static struct totals summarize(struct leaks *l, struct ht_reader *r, struct ht_symbolizer *sym)
{
	struct totals t = {0};
	merge_alike(l, r, sym);
	for (size_t i = 0; i < l->ngroups; i++) {
		struct group *g = &l->groups[i];
		if (!g->suppressed)
			g->suppressed = ht_suppressions__stack(&l->supp, r, sym, g->stack);
		if (g->suppressed) {
			t.sup_bytes += g->bytes;
			t.sup_blocks += g->blocks;
			continue;
		}
		t.bytes += g->bytes;
		t.blocks += g->blocks;
		t.off_bytes += g->off_bytes;
		t.off_blocks += g->off_blocks;
		t.kept++;
		if (!g->stack)
			t.nostack += g->blocks;
	}
	return t;
}

static void json_groups(struct ht_json *j, struct leaks *l, struct ht_reader *r,
			struct ht_symbolizer *sym, uint64_t top)
{
	size_t shown = 0;
	ht_json__arr_begin(j, "groups");
	for (size_t i = 0; i < l->ngroups && shown < top; i++) {
		const struct group *g = &l->groups[i];
		if (g->suppressed)
			continue;
		shown++;
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "bytes", g->bytes);
		ht_json__u64(j, "blocks", g->blocks);
		if (ht_pass__pauses(l->blocks)->count) {
			ht_json__u64(j, "live_when_paused_bytes", g->off_bytes);
			ht_json__u64(j, "live_when_paused_blocks", g->off_blocks);
		}
		ht_json__arr_begin(j, "stack");
		size_t n = ht_blocks__frames(r, sym, g->stack, frames, MAX_FRAMES);
		for (size_t k = 0; k < n; k++)
			ht_blocks__json_frame(j, &frames[k]);
		ht_json__arr_end(j);
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
}

/* --interval: each step in turn, its groups in l->groups meanwhile. */
static void report_intervals(struct leaks *l, struct ht_reader *r, struct ht_symbolizer *sym,
			     const struct leaks_config *cfg, struct ht_json *j)
{
	struct group *keep = l->groups;
	size_t nkeep = l->ngroups;
	char b1[32], b2[32];
	if (j)
		ht_json__arr_begin(j, "intervals");
	for (size_t s = 0; s < l->nsnaps; s++) {
		l->groups = l->snaps[s].groups;
		l->ngroups = l->snaps[s].n;
		struct totals t = summarize(l, r, sym);
		if (j) {
			ht_json__obj_begin(j, NULL);
			ht_json__u64(j, "at_ns", l->snaps[s].at);
			ht_json__u64(j, "leaked_bytes", t.bytes);
			ht_json__u64(j, "leaked_blocks", t.blocks);
			json_groups(j, l, r, sym, cfg->top);
			ht_json__obj_end(j);
		} else {
			printf("at %s: %s in %llu block%s live, from %zu stack%s\n",
			       ht_fmt_ns(b1, l->snaps[s].at), ht_fmt_bytes(b2, t.bytes),
			       (unsigned long long)t.blocks, ht_s(t.blocks), t.kept, ht_s(t.kept));
			size_t shown = 0;
			for (size_t i = 0; i < l->ngroups && shown < cfg->top; i++) {
				const struct group *g = &l->groups[i];
				if (g->suppressed)
					continue;
				shown++;
				size_t n = ht_blocks__frames(r, sym, g->stack, frames, MAX_FRAMES);
				printf("  %10s in %6llu blocks  ", ht_fmt_bytes(b1, g->bytes),
				       (unsigned long long)g->blocks);
				char name[1024];
				for (size_t k = 0; k < n && k < 2; k++)
					printf("%s%s", k ? " <- " : "",
					       ht_blocks__frame_name(name, sizeof(name), &frames[k]));
				printf("%s\n", n ? "" : "[no stack]");
			}
			printf("\n");
		}
		l->snaps[s].groups = l->groups; /* merging may have moved them */
		l->snaps[s].n = l->ngroups;
	}
	if (j)
		ht_json__arr_end(j);
	l->groups = keep;
	l->ngroups = nkeep;
}

/* When the figures of --at stand, on the first line: a time past where a
 * cut or damaged trace's events stop, or past where one thread's stop, is
 * said to be (the figures at 500 ms of a trace whose events stop at 47 ms
 * are those of 47 ms, and frees after it are not in them). */
static void print_at(const struct leaks *l)
{
	const struct ht_readto *rt = &l->readto;
	char b1[32], b2[32];
	if (l->at_ns > l->end_ns && rt->read_to_ns != UINT64_MAX)
		printf(" by the trace's end at %s, before --at %s (the trace is cut short or "
		       "damaged: frees after it are not in it)",
		       ht_fmt_ns(b1, l->end_ns), ht_fmt_ns(b2, l->at_ns));
	else if (l->end_ns > rt->exact_to_ns && rt->short_tid)
		printf(" at %s (the trace is cut short or damaged: thread %u's events stop at %s, "
		       "and its frees after that may be missing)",
		       ht_fmt_ns(b1, l->end_ns), rt->short_tid, ht_fmt_ns(b2, rt->exact_to_ns));
	else
		printf(" at %s", ht_fmt_ns(b1, l->end_ns));
}

/* The same in JSON, for a cut or damaged trace only: complete (false),
 * where its events stop (as timeline's JSON says it) and whether --at is
 * past that. */
static void json_readto(struct ht_json *j, const struct leaks *l)
{
	const struct ht_readto *rt = &l->readto;
	if (!rt->damaged)
		return;
	ht_json__bool(j, "complete", 0);
	uint64_t read_to = rt->read_to_ns < l->trace_end_ns ? rt->read_to_ns : l->trace_end_ns;
	ht_json__u64(j, "read_to_ns", read_to);
	ht_json__u64(j, "exact_to_ns", rt->exact_to_ns < read_to ? rt->exact_to_ns : read_to);
	if (rt->short_tid)
		ht_json__u64(j, "missing_thread", rt->short_tid);
	ht_json__bool(j, "at_past_read_to", l->at_ns != UINT64_MAX && l->at_ns > read_to);
}

static int report(struct leaks *l, struct ht_reader *r, const struct leaks_config *cfg,
		  const char *path)
{
	struct ht_symbolizer *sym = ht_blocks__symbolizer(r, cfg->sysroot, cfg->debug_dir);
	if (!sym)
		return HT_EXIT_DATA;
	struct totals t = summarize(l, r, sym);
	uint64_t bytes = t.bytes, blocks = t.blocks, sup_bytes = t.sup_bytes,
		 sup_blocks = t.sup_blocks, nostack = t.nostack;
	size_t shown = 0, kept = t.kept;
	const struct ht_trace_info *in = ht_reader__info(r);
	char b1[32];
	if (cfg->json) {
		struct ht_json j;
		ht_json__init(&j, stdout, 1);
		ht_json__obj_begin(&j, NULL);
		ht_json__str(&j, "trace", path);
		ht_json__i64(&j, "pid", in->pid);
		ht_json__str(&j, "command", in->cmdline);
		ht_json__u64(&j, "at_ns", l->end_ns);
		json_readto(&j, l);
		struct ht_order_info order;
		ht_reader__order(r, &order); /* (--at stops reading early) */
		ht_analyze__order_json(&j, &order);
		ht_analyze__sample_json(&j, in);
		ht_json__u64(&j, "leaked_bytes", bytes);
		ht_json__u64(&j, "leaked_blocks", blocks);
		ht_json__u64(&j, "suppressed_bytes", sup_bytes);
		ht_json__u64(&j, "suppressed_blocks", sup_blocks);
		ht_json__u64(&j, "blocks_without_stack", nostack);
		ht_json__u64(&j, "paused_count", ht_pass__pauses(l->blocks)->count);
		ht_json__u64(&j, "live_when_paused_bytes", t.off_bytes);
		ht_json__u64(&j, "live_when_paused_blocks", t.off_blocks);
		json_groups(&j, l, r, sym, cfg->top);
		if (l->nsnaps)
			report_intervals(l, r, sym, cfg, &j);
		ht_json__obj_end(&j);
		ht_json__finish(&j);
	} else {
		if (l->nsnaps)
			report_intervals(l, r, sym, cfg, NULL);
		printf("%s (pid %d): %s in %llu block%s not freed", in->cmdline, in->pid,
		       ht_fmt_bytes(b1, bytes), (unsigned long long)blocks, ht_s(blocks));
		if (cfg->at != UINT64_MAX)
			print_at(l);
		else
			fputs(ht_analyze__end_not_freed(ht_analyze__trace_end(r)), stdout);
		if (cfg->older)
			printf(", allocated at least %s before", ht_fmt_ns(b1, cfg->older));
		printf(", from %zu stack%s", kept, ht_s(kept));
		if (sup_blocks)
			printf(" (%llu block%s, %s suppressed)", (unsigned long long)sup_blocks,
			       ht_s(sup_blocks), ht_fmt_bytes(b1, sup_bytes));
		const struct ht_pauses *ps = ht_pass__pauses(l->blocks);
		if (ps->count)
			printf("; recording was off %llu time%s: %s in %llu of these blocks were live "
			       "then, and may have been freed meanwhile",
			       (unsigned long long)ps->count, ps->count == 1 ? "" : "s",
			       ht_fmt_bytes(b1, t.off_bytes), (unsigned long long)t.off_blocks);
		char sb[HT_SAMPLED_TEXT_MAX];
		printf("%s\n", ht_analyze__sampled_text(in, sb));
		for (size_t i = 0; i < l->ngroups && shown < cfg->top; i++) {
			const struct group *g = &l->groups[i];
			if (g->suppressed)
				continue;
			shown++;
			printf("\n%llu bytes in %llu allocation%s from stack",
			       (unsigned long long)g->bytes, (unsigned long long)g->blocks,
			       ht_s(g->blocks));
			if (g->off_blocks)
				printf(" (%llu bytes in %llu of them allocated before recording went "
				       "off: maybe freed meanwhile)",
				       (unsigned long long)g->off_bytes,
				       (unsigned long long)g->off_blocks);
			printf("\n");
			size_t n = ht_blocks__frames(r, sym, g->stack, frames, MAX_FRAMES);
			for (size_t k = 0; k < n; k++)
				print_frame_text(&frames[k]);
			if (!g->stack && !ht_reader__nnodes(r))
				printf("\t(no stack: record with --stacks to see where these were "
				       "allocated)\n");
			else if (!g->stack)
				printf("\t(no stack: %s)\n", ht_blocks__no_stack_why(r));
		}
		if (kept > shown)
			printf("\n... and %zu more stacks (--top to see more)\n", kept - shown);
	}
	ht_symbolizer__free(sym);
	return HT_EXIT_OK;
}

int cmd_leaks(int argc, char **argv)
{
	struct leaks_config cfg = {.top = 20, .at = UINT64_MAX};
	const struct ht_option opts[] = {
		{'n', "top", HT_OPT_U64, &cfg.top, "N", "show the N biggest groups, 0 for all (20)"},
		{0, "older", HT_OPT_DURATION, &cfg.older, "TIME", "only blocks allocated at least TIME before the end (or --at)"},
		{0, "at", HT_OPT_DURATION, &cfg.at, "TIME", "report what was live at TIME since the start (the end)"},
		{0, "interval", HT_OPT_DURATION, &cfg.interval, "TIME", "also what was live every TIME, to see it grow (off)"},
		{0, "suppressions", HT_OPT_STRING, &cfg.suppressions, "FILE", "leave out stacks matching these patterns"},
		{0, "no-default-suppressions", HT_OPT_FLAG, &cfg.no_default_supp, NULL, "also list glibc's and ld.so's own blocks kept to the end (thread vectors)"},
		{0, "sysroot", HT_OPT_STRING, &cfg.sysroot, "DIR", "find the traced modules under DIR (another machine's files)"},
		{0, "debug-dir", HT_OPT_STRING, &cfg.debug_dir, "DIR", "also look for separate debug files in DIR"},
		{0, "json", HT_OPT_FLAG, &cfg.json, NULL, "JSON: leaked_bytes, leaked_blocks, groups[{bytes, blocks, stack[]}]"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no progress line, no warning for traces not closed cleanly or not in exact order"},
		HT_OPT_THREADS,
		{0},
	};
	int ret = HT_EXIT_USAGE;
	struct ht_reader *r = NULL;
	struct leaks l;
	memset(&l, 0, sizeof(l));
	l.blocks = ht_pass__new();
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs != 1) {
		ht_error("%s; usage: heaptrail leaks [options] TRACE",
			 nargs ? "one trace at a time" : "no trace given");
		goto cleanup;
	}
	if (!cfg.top) /* (0 for all, as in top and diff) */
		cfg.top = UINT64_MAX;
	if (!cfg.no_default_supp)
		ht_suppressions__add_defaults(&l.supp);
	char err[1024];
	if (cfg.suppressions &&
	    ht_suppressions__load(&l.supp, cfg.suppressions, err, sizeof(err))) {
		/* (2, before the trace is read: the option is what is wrong) */
		ht_error("--suppressions: %s; give a text file of patterns, one a line, optionally "
			 "after 'leak:' (docs/leaks.md, \"Suppressions\")",
			 err);
		goto cleanup;
	}
	ht_blocks__symbols_ahead(cfg.sysroot, cfg.debug_dir);
	r = ht_analyze__open(argv[0]);
	if (!r) {
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	ht_pass__check_order(l.blocks, r);
	const struct ht_event *e;
	uint64_t next_at = cfg.interval, last_ns = 0; /* (the last event read) */
	int stopped = 0; /* an event after --at ended the reading */
	while ((e = ht_analyze__next_event(r))) {
		ht_readto__event(&l.readto, e);
		last_ns = e->time_ns;
		if (e->time_ns > cfg.at) {
			stopped = 1;
			break;
		}
		while (cfg.interval && e->time_ns > next_at && next_at <= cfg.at) {
			snapshot(&l, next_at, cfg.older);
			next_at += cfg.interval;
		}
		ht_pass__event(l.blocks, e);
	}
	/* A trace known to be cut or damaged: where each thread's events stop
	 * is only known at the end of what can be read (readto.h), and it
	 * decides whether --at is a time whose events are all in it. */
	if (stopped && ht_reader__error(r))
		while ((e = ht_analyze__next_event(r)))
			ht_readto__event(&l.readto, e);
	ht_readto__finish(&l.readto, r);
	/* The trace's end, which --older and --interval count to: its
	 * duration, not its last event (a program may idle for a while after
	 * its last heap call, and the blocks live then are that much older),
	 * but where the events of a cut or damaged trace stop being read
	 * (nothing is known after that). */
	const struct ht_trace_info *ti = ht_reader__info(r);
	uint64_t end = ti->duration_ns > last_ns ? ti->duration_ns : last_ns;
	if (l.readto.read_to_ns < end)
		end = l.readto.read_to_ns;
	while (cfg.interval && next_at <= end && next_at <= cfg.at) {
		snapshot(&l, next_at, cfg.older);
		next_at += cfg.interval;
	}
	l.end_ns = l.trace_end_ns = end;
	l.at_ns = cfg.at;
	if (cfg.at != UINT64_MAX && (cfg.at <= end || ht_reader__following(r))) {
		l.end_ns = cfg.at;
	} else if (cfg.at != UINT64_MAX && l.readto.read_to_ns == UINT64_MAX && !ht_quiet) {
		/* nothing happens after the trace: say when it ends (past where
		 * a cut trace's events stop, the first line says it: report) */
		char b1[32], b2[32];
		fprintf(stderr,
			"heaptrail: note: --at %s is after the end of %s (%s): the blocks live "
			"at its end\n",
			ht_fmt_ns(b1, cfg.at), argv[0], ht_fmt_ns(b2, end));
	}
	ret = ht_analyze__finish_pass(r, argv[0], 0, ht_pass__pauses(l.blocks));
	group_blocks(&l, cfg.older);
	int rr = report(&l, r, &cfg, argv[0]);
	if (!ret)
		ret = rr;
	fflush(stdout);
cleanup:
	ht_pass__delete(l.blocks); /* (before its reader: pass.h) */
	ht_reader__close(r);
	ht_suppressions__free(&l.supp);
	free(l.groups);
	for (size_t i = 0; i < l.nsnaps; i++)
		free(l.snaps[i].groups);
	free(l.snaps);
	ht_readto__free(&l.readto);
	return ret;
}
