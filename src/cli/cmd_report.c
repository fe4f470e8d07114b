/* heaptrail report: everything the analyzers show, in one self-contained
 * HTML page (no network needed to open it).  The trace is read once and
 * every collector is fed from that pass; the page holds aggregates only
 * (never raw events), so its size does not grow with the trace. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "analyze/blocks.h"
#include "analyze/flamegraph.h"
#include "analyze/heapinfo.h"
#include "analyze/htmlout.h"
#include "analyze/pass.h"
#include "analyze/slices.h"
#include "analyze/stackstats.h"
#include "analyze/stats.h"
#include "analyze/suppressions.h"
#include "analyze/timeline.h"
#include "cli/builtin.h"
#include "common/json.h"
#include "common/jsonread.h"
#include "common/options.h"
#include "common/outfile.h"
#include "common/util.h"
#include "trace/reader_slice.h"

#define MAX_FRAMES 256

/* One configuration per run; each default is labelled by its flag. */
struct report_config {
	const char *out;       /* -o, --output (TRACE's name with .html; - for stdout) */
	const char *compare[8]; /* --compare (none): `compare --json` results, repeatable */
	int ncompare;          /* how many */
	uint64_t top;          /* -n, --top (10): stacks per table, 0 = all */
	uint64_t depth;        /* --depth (4): frames shown before "more" */
	const char *title;     /* --title (the traced command) */
	const char *sysroot;   /* --sysroot */
	const char *debug_dir; /* --debug-dir */
	int quiet;             /* -q: no "wrote" line */
};

static const char usage_text[] =
	"usage: heaptrail report [options] TRACE\n"
	"\n"
	"One self-contained HTML page (no network needed to open it) with the\n"
	"summary, the live heap over time, size and lifetime histograms, the top\n"
	"stacks, the leaks, a flame graph, glibc's heap internals and, given\n"
	"`heaptrail compare --json` results, the allocator table.  The trace is\n"
	"read once; the page holds aggregates only, whatever the trace's length.\n"
	HT_HELP_PERF_MAP
	"\fEXAMPLES\n"
	"  heaptrail report app.ht                       # writes app.html\n"
	"  heaptrail report -o /tmp/app.html --top 20 app.ht\n"
	"  heaptrail report -q -o - app.ht | gzip > app.html.gz\n"
	"  heaptrail compare --json -a glibc,jemalloc app.wl > cmp.json\n"
	"  heaptrail report --compare cmp.json app.ht\n";

/* ---- the pass ------------------------------------------------------------ */

struct collectors {
	struct ht_stats *stats;     /* summary, histograms, threads, marks */
	struct ht_stackstats stacks; /* per stack: peak, calls, temporary, leaks */
	struct ht_timeline *timeline; /* the heap over time */
	struct ht_heapinfo *heap;    /* glibc's arenas, heaps, thresholds */
	struct ht_reader *heap_r;    /* heap's own reader (read beside), or NULL */
};

/* glibc's heap model on a thread of its own, with a reader and a pass of
 * its own, beside the other three (docs/FORMAT.md, "What report in slices
 * still needs"): the same events in the same order, so the same model. */
struct heap_side {
	struct ht_reader *r; /* a second reader of the main reader's file */
	struct ht_heapinfo *h;
};

static void *heap_side_main(void *arg)
{
	struct heap_side *hs = arg;
	struct ht_pass *pass = ht_pass__new();
	ht_pass__check_order(pass, hs->r); /* (as the main pass: the reader keeps no set) */
	const struct ht_event *e;
	while ((e = ht_reader__next_event(hs->r)))
		ht_heapinfo__event(hs->h, e, ht_pass__event(pass, e));
	ht_pass__delete(pass);
	ht_heapinfo__finish(hs->h, hs->r);
	return NULL;
}

/* Whether two readers of one file met the same trouble (none, or the same
 * damage at the same place: then they read the same events). */
static int same_end(const struct ht_reader *a, const struct ht_reader *b)
{
	const char *ea = ht_reader__error(a), *eb = ht_reader__error(b);
	const char *wa = ht_reader__warning(a), *wb = ht_reader__warning(b);
	return !ea == !eb && (!ea || !strcmp(ea, eb)) && !wa == !wb && (!wa || !strcmp(wa, wb));
}

/* The main reader, and whether the heap model may be read beside it: asked
 * for (-j N, N > 1, or 0 with several CPUs: not by default, since a second
 * pass over a large live set costs more than it gives, docs/report.md), a
 * long trace that is whole and closed (the second reader must read what
 * the first does). */
static struct ht_reader *open_main(const char *path, int *beside)
{
	*beside = 0;
	if (ht_reader__threads_given() && ht_slices__wanted() > 1) {
		char err[1024];
		struct ht_reader *r = ht_reader__open_info(path, err, sizeof(err));
		if (r && ht_reader__sliceable(r, ht_slices__min_events())) {
			*beside = 1;
			return r;
		}
		ht_reader__close(r);
	}
	return ht_analyze__open(path);
}

static int read_trace(const char *path, uint64_t top, struct collectors *c,
		      struct ht_reader **rp)
{
	int beside;
	*rp = open_main(path, &beside);
	if (!*rp)
		return HT_EXIT_DATA;
	const struct ht_trace_info *in = ht_reader__info(*rp);
	c->stats = ht_stats__new(in);
	ht_stackstats__init(&c->stacks, 0);
	ht_stackstats__keep_big(&c->stacks, top); /* (-n: the biggest allocations' table too) */
	struct ht_timeline_opts to;
	ht_timeline__opts_init(&to, in);
	c->timeline = ht_timeline__new(&to);
	if (!c->timeline) {
		ht_error("out of memory");
		exit(HT_EXIT_DATA);
	}
	struct heap_side hs = {0};
	pthread_t th;
	if (beside) {
		/* (the same file, even if another is renamed over it meanwhile:
		 * the page was half one trace, half the other, probe X) */
		char err[1024];
		hs.r = ht_reader__open_again(*rp, err, sizeof(err));
		if (!hs.r || !(hs.h = ht_heapinfo__new(hs.r)) ||
		    pthread_create(&th, NULL, heap_side_main, &hs) != 0) {
			ht_heapinfo__delete(hs.h);
			ht_reader__close(hs.r);
			hs = (struct heap_side){0};
			beside = 0;
		}
	}
	if (!beside && !(c->heap = ht_heapinfo__new(*rp))) {
		ht_error("out of memory");
		exit(HT_EXIT_DATA);
	}
	struct ht_pass *pass = ht_pass__new(); /* the live blocks, once for all four */
	ht_pass__check_order(pass, *rp);
	const struct ht_event *e;
	while ((e = ht_analyze__next_event(*rp))) {
		const struct ht_blockop *op = ht_pass__event(pass, e);
		ht_stats__event(c->stats, e, op);
		ht_stackstats__event(&c->stacks, e, op);
		ht_timeline__event(c->timeline, e, op);
		if (!beside) /* (else heap_side's) */
			ht_heapinfo__event(c->heap, e, op);
	}
	struct ht_pauses pauses = *ht_pass__pauses(pass);
	ht_pass__delete(pass);
	ht_stackstats__finish(&c->stacks);
	ht_timeline__finish(c->timeline, *rp);
	if (beside) {
		pthread_join(th, NULL);
		c->heap_r = hs.r;
		c->heap = hs.h;
		/* (a damaged trace stops both readers at one place, with one
		 * message: anything else is a file written over meanwhile) */
		if (!same_end(*rp, hs.r)) {
			ht_error("%s changed while it was read", path);
			exit(HT_EXIT_DATA);
		}
		if (getenv("HEAPTRAIL_SLICE_NOTE"))
			fprintf(stderr, "heaptrail: note: glibc's heap model read beside the rest\n");
	} else {
		ht_heapinfo__finish(c->heap, *rp);
	}
	return ht_analyze__finish_pass(*rp, path, 0, &pauses);
}

/* ---- sections -------------------------------------------------------------- */

struct page {
	FILE *f;                     /* the HTML being written */
	struct ht_reader *r;         /* the trace (stacks, modules, info) */
	struct ht_symbolizer *sym;   /* its symbols */
	const struct report_config *cfg;
	struct collectors *c;        /* what the pass collected */
	const char *path;            /* the trace's path */
	struct ht_suppressions *supp; /* leaks' default suppressions */
};

/* The blocks handed out, as stats' threads table counts them: not the
 * calls of allocating kinds, of which failed ones and realloc(p, 0) that
 * freed hand out none. */
static uint64_t blocks_handed_out(const struct ht_stats *s)
{
	uint64_t n = 0;
	for (size_t i = 0; i < s->nthreads; i++)
		n += s->threads[i].allocations;
	return n;
}

/* How the trace ended, in the words stats and leaks use (the end of
 * ht_analyze__trace_end): a trace is "closed cleanly" only if the program
 * exited. */
static const char *end_words(const struct page *pg, char *buf, size_t len)
{
	const struct ht_trace_info *in = ht_reader__info(pg->r);
	char b1[32];
	switch (ht_analyze__trace_end(pg->r)) {
	case HT_END_EXIT:
		return "trace closed cleanly";
	case HT_END_NOW:
		return "still being written: as of now";
	case HT_END_DETACHED:
		return "tracing stopped; the program ran on";
	case HT_END_SIGNAL:
		snprintf(buf, len, "the program died of %s: not at exit",
			 ht_signal_name(in->signal, b1));
		return buf;
	case HT_END_CUT:
		snprintf(buf, len,
			 "the trace is cut short or damaged: its events end at %s, later ones "
			 "are not in it",
			 ht_fmt_ns(b1, pg->c->stats->last_time));
		return buf;
	case HT_END_UNCLEAN:
	default:
		return in->disk_full ? "recording stopped: a write failed"
		       : !in->closed ? "trace not closed cleanly"
				     : "the program did not exit cleanly";
	}
}

static void section_summary(struct page *pg)
{
	const struct ht_stats *s = pg->c->stats;
	const struct ht_trace_info *in = ht_reader__info(pg->r);
	FILE *f = pg->f;
	char b1[32], b2[32], ended[160];
	uint64_t allocs = blocks_handed_out(s), calls = 0;
	for (int k = 1; k < HT_EV_HEAP_BREAK; k++)
		calls += s->calls[k];
	fputs("<section id=\"summary\"><h2>Summary</h2>\n", f);
	char note[256];
	if (*ht_analyze__order_note(pg->r, note, sizeof(note))) {
		fputs("<p class=\"warn\" id=\"order-warning\">Warning: ", f);
		ht_html__text(f, note);
		fputs(" (docs/FORMAT.md, &ldquo;Ordering guarantee&rdquo;).</p>\n", f);
	}
	if (*ht_analyze__sample_note(in, note, sizeof(note))) {
		fputs("<p class=\"warn\" id=\"sampled-note\">Note: ", f);
		ht_html__text(f, note);
		fputs(" (docs/FORMAT.md, &ldquo;Sampling&rdquo;).</p>\n", f);
	}
	if (s->pauses.count) {
		uint64_t end = ht_stats__duration(s, in);
		fprintf(f, "<p class=\"warn\" id=\"paused-note\">Note: recording was off %llu "
			   "time%s, %s of %s (heaptrail_pause() or _stop(), SIGUSR2, a start paused): "
			   "the calls meanwhile are not in the trace, so a block freed then shows as "
			   "live (and leaked), the free of one allocated then as unknown.</p>\n",
			(unsigned long long)s->pauses.count, s->pauses.count == 1 ? "" : "s",
			ht_fmt_ns(b1, ht_pauses__total(&s->pauses, end)), ht_fmt_ns(b2, end));
	}
	if (in->allocator) {
		fputs("<p id=\"allocator\">The program's malloc was ", f);
		ht_html__text(f, in->allocator);
		fputs("'s, not glibc's: usable sizes are its own.</p>\n", f);
	}
	fputs("<div class=\"cards\">\n", f);
	ht_html__card(f, "peak live heap", ht_fmt_bytes(b1, s->peak_bytes), "requested, at %s (%s usable)",
		      ht_fmt_ns(b2, s->peak_time), ht_fmt_bytes((char[32]){0}, s->peak_usable_at));
	ht_html__card(f, ht_analyze__end_label(ht_analyze__trace_end(pg->r)),
		      ht_fmt_bytes(b1, s->live_bytes), "in %llu block%s never freed",
		      (unsigned long long)s->live_blocks, ht_s(s->live_blocks));
	ht_html__card(f, "allocated", ht_fmt_bytes(b1, s->bytes_allocated), "in %llu allocation%s",
		      (unsigned long long)allocs, ht_s(allocs));
	ht_html__card(f, "calls", ht_html__count(b1, calls), "%llu events, %s timestamps taken",
		      (unsigned long long)s->events, ht_html__count(b2, s->ts_taken));
	ht_html__card(f, "threads", ht_html__count(b1, s->nthreads), "%llu cross-thread frees",
		      (unsigned long long)s->cross_thread_frees);
	ht_html__card(f, "duration", ht_fmt_ns(b1, ht_stats__duration(s, in)), "%s",
		      end_words(pg, ended, sizeof(ended)));
	fputs("</div>\n<table class=\"calls\"><tr><th>function</th><th>calls</th><th>failed</th>"
	      "<th>bytes requested</th></tr>\n", f);
	for (int k = 1; k < HT_EV_HEAP_BREAK; k++) {
		if (!s->calls[k])
			continue;
		fprintf(f, "<tr><td>%s</td><td>%llu</td><td>%llu</td><td>", ht_kind_name(k),
			(unsigned long long)s->calls[k], (unsigned long long)s->failed[k]);
		if (ht_kind_descs[k].is_alloc)
			fprintf(f, "%s", ht_fmt_bytes(b1, s->bytes_by[k]));
		fputs("</td></tr>\n", f);
	}
	fputs("</table>\n", f);
	if (s->unknown_frees || s->inversions || in->dropped)
		fprintf(f, "<p class=\"warn\">%llu frees of blocks the trace never handed out, %llu "
			   "addresses handed out while live, %llu events dropped by the recorder.</p>\n",
			(unsigned long long)s->unknown_frees, (unsigned long long)s->inversions,
			(unsigned long long)in->dropped);
	fputs("</section>\n", f);
}

/* Copies html to f, marking its first <svg> as a chart with this id for
 * the page's self-check. */
static void put_marked_svg(FILE *f, const char *html, const char *id)
{
	const char *at = strstr(html, "<svg");
	if (!at) {
		fputs(html, f);
		return;
	}
	fwrite(html, 1, (size_t)(at - html) + 4, f);
	fprintf(f, " data-chart=\"1\" id=\"%s\"", id);
	fputs(at + 4, f);
}

/* A collector's output, caught in memory. */
static void caught(FILE *m, char **buf)
{
	if (fclose(m) != 0 || !*buf) { /* (fclose sets *buf) */
		ht_error("out of memory");
		exit(HT_EXIT_DATA);
	}
}

/* The timeline's SVG, inline. */
static void section_timeline(struct page *pg)
{
	FILE *f = pg->f;
	char *svg = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&svg, &len);
	if (!m || ht_timeline__svg(pg->c->timeline, m, 1200, 520) < 0) {
		ht_error("out of memory");
		exit(HT_EXIT_DATA);
	}
	caught(m, &svg);
	fputs("<section id=\"timeline\"><h2>The heap over time</h2>\n<div class=\"chart\">", f);
	put_marked_svg(f, svg, "timeline-chart");
	fputs("</div>\n<p>Live requested and usable bytes, RSS, the program break, the bytes of "
	      "blocks glibc mmapped and of the program's own maps; hover for each time bin's "
	      "figures. <code>heaptrail timeline --csv</code> gives the numbers.</p></section>\n", f);
	free(svg);
}

static void section_histograms(struct page *pg)
{
	const struct ht_stats *s = pg->c->stats;
	FILE *f = pg->f;
	const char *labels[HT_STATS_SIZE_BUCKETS];
	char names[HT_STATS_SIZE_BUCKETS][72];
	uint64_t vals[HT_STATS_SIZE_BUCKETS];
	int n = 0, lo = -1, hi = -1;
	for (int b = 0; b < HT_STATS_SIZE_BUCKETS; b++)
		if (s->size_hist[b]) {
			if (lo < 0)
				lo = b;
			hi = b;
		}
	fputs("<section id=\"histograms\"><h2>Sizes and lifetimes</h2><div class=\"row\">\n", f);
	for (int b = lo; lo >= 0 && b <= hi; b++) {
		char x[32], y[32];
		ht_fmt_bytes(x, b == 0 ? 0 : (1ull << (b - 1)) + 1);
		ht_fmt_bytes(y, b == 0 ? 1 : 1ull << (b < 64 ? b : 63));
		snprintf(names[n], sizeof(names[n]), "%s..%s", x, y);
		labels[n] = names[n];
		vals[n++] = s->size_hist[b];
	}
	ht_html__bars(f, "sizes", "Allocations by requested size", labels, vals, n, "allocations");
	static const char *const life[HT_STATS_LIFE_BUCKETS] = {
		"< 1 us", "< 10 us", "< 100 us", "< 1 ms", "< 10 ms",
		"< 100 ms", "< 1 s", "< 10 s", "< 100 s", ">= 100 s"};
	ht_html__bars(f, "lifetimes", "Freed blocks by lifetime", (const char **)life, s->life_hist,
		      HT_STATS_LIFE_BUCKETS, "blocks");
	fputs("</div></section>\n", f);
}

/* The frames of a stack as one line (depth frames) and, folded under it,
 * all of them with file:line. */
static void stack_cell(struct page *pg, uint32_t node)
{
	static struct ht_frame fr[MAX_FRAMES];
	FILE *f = pg->f;
	size_t n = node ? ht_blocks__frames(pg->r, pg->sym, node, fr, MAX_FRAMES) : 0;
	if (!n) {
		fprintf(f, "<td class=\"stack\">[no stack: %s]</td>",
			ht_blocks__no_stack_why(pg->r));
		return;
	}
	char name[1024];
	fputs("<td class=\"stack\"><details><summary>", f);
	for (size_t i = 0; i < n && i < pg->cfg->depth; i++) {
		if (i)
			fputs(" &larr; ", f);
		ht_html__text(f, ht_blocks__frame_name(name, sizeof(name), &fr[i]));
	}
	fputs("</summary><ol>", f);
	for (size_t i = 0; i < n; i++) {
		fputs("<li>", f);
		ht_html__text(f, ht_blocks__frame_name(name, sizeof(name), &fr[i]));
		if (fr[i].file) {
			fputs(" <span class=\"loc\">", f);
			ht_html__text(f, fr[i].file);
			fprintf(f, ":%d</span>", fr[i].line);
		}
		if (fr[i].inlined)
			fputs(" <span class=\"loc\">(inlined)</span>", f);
		fputs("</li>", f);
	}
	fputs("</ol></details></td>", f);
}

enum stack_table { ST_PEAK, ST_LEAKED, ST_CALLS, ST_TEMP, ST_N };

static const struct {
	const char *id, *title, *unit; /* anchor, heading, what the value counts */
} stack_tables[ST_N] = {
	[ST_PEAK] = {"peak", "Live at the peak of the heap", "bytes"},
	[ST_LEAKED] = {"leaks", "Leaks: live at the end, never freed", "bytes"},
	[ST_CALLS] = {"calls", "Most allocation calls", "calls"},
	[ST_TEMP] = {"temporary", "Most temporary allocations (freed before the thread's next allocation or free)", "calls"},
};

static enum stack_table sort_by;

static uint64_t table_value(const struct ht_stackstat *st, enum stack_table t)
{
	switch (t) {
	case ST_PEAK: return st->peak_bytes;
	case ST_LEAKED: return st->end_bytes;
	case ST_CALLS: return st->alloc_calls;
	default: return st->temp_calls;
	}
}

static int by_table_value(const void *a, const void *b)
{
	const struct ht_stackstat *x = *(const struct ht_stackstat *const *)a;
	const struct ht_stackstat *y = *(const struct ht_stackstat *const *)b;
	uint64_t u = table_value(x, sort_by), v = table_value(y, sort_by);
	if (u != v)
		return u < v ? 1 : -1;
	return x->node < y->node ? -1 : x->node > y->node;
}

/* The leaks table leaves out what `heaptrail leaks` suppresses by default
 * (glibc's thread vectors), so that the two list the same leaks: the
 * stacks of all (v, n) not suppressed into kept, their count returned;
 * what was left out added up in *sup_bytes and *sup_blocks. */
static size_t unsuppressed_leaks(struct page *pg, const struct ht_stackstat **v, size_t n,
				 const struct ht_stackstat **kept, uint64_t *sup_bytes,
				 uint64_t *sup_blocks)
{
	size_t k = 0;
	*sup_bytes = *sup_blocks = 0;
	for (size_t i = 0; i < n; i++) {
		if (!v[i]->end_blocks)
			continue;
		if (ht_suppressions__stack(pg->supp, pg->r, pg->sym, v[i]->node - 1)) {
			*sup_bytes += v[i]->end_bytes;
			*sup_blocks += v[i]->end_blocks;
			continue;
		}
		kept[k++] = v[i];
	}
	return k;
}

static void section_stacks(struct page *pg)
{
	const struct ht_stackstats *ss = &pg->c->stacks;
	FILE *f = pg->f;
	char b1[32], b2[32];
	const struct ht_stackstat **all = calloc(ss->n ? 2 * ss->n : 1, sizeof(*all));
	if (!all) {
		ht_error("out of memory");
		exit(HT_EXIT_DATA);
	}
	size_t nall = 0;
	for (size_t i = 0; i < ss->cap; i++)
		if (ss->slots[i].node)
			all[nall++] = &ss->slots[i];
	const struct ht_stackstat **leaks = all + nall;
	uint64_t sup_bytes, sup_blocks;
	size_t nleaks = unsuppressed_leaks(pg, all, nall, leaks, &sup_bytes, &sup_blocks);
	fputs("<section id=\"stacks\"><h2>Top stacks</h2>\n", f);
	if (!blocks_handed_out(pg->c->stats)) /* (no stack either, whatever it was recorded with) */
		fputs("<p>The trace has no allocation.</p>\n", f);
	else if (!ht_reader__nnodes(pg->r))
		fputs("<p class=\"warn\">This trace has no stacks: record with <code>heaptrail record "
		      "--stacks</code> to see where allocations come from.</p>\n", f);
	for (int t = 0; t < ST_N; t++) {
		const struct ht_stackstat **v = t == ST_LEAKED ? leaks : all;
		size_t n = t == ST_LEAKED ? nleaks : nall;
		sort_by = (enum stack_table)t;
		qsort(v, n, sizeof(*v), by_table_value);
		uint64_t total = 0;
		for (size_t i = 0; i < n; i++)
			total += table_value(v[i], sort_by);
		fprintf(f, "<h3 id=\"%s\">%s</h3>\n", stack_tables[t].id, stack_tables[t].title);
		if (t == ST_LEAKED && sup_blocks)
			fprintf(f,
				"<p id=\"leaks-suppressed\">Not listed, as <code>heaptrail "
				"leaks</code> leaves them out (%llu block%s, %s suppressed): glibc's "
				"and ld.so's own blocks, kept for the process's lifetime (the thread "
				"vectors); <code>heaptrail leaks --no-default-suppressions</code> "
				"lists them.</p>\n",
				(unsigned long long)sup_blocks, ht_s(sup_blocks),
				ht_fmt_bytes(b1, sup_bytes));
		if (!total) {
			fputs("<p>None.</p>\n", f);
			continue;
		}
		fprintf(f, "<table class=\"stacks\"><tr><th>%s</th><th>share</th><th>blocks</th>"
			   "<th>allocated</th><th class=\"stack\">stack (innermost first)</th></tr>\n",
			stack_tables[t].unit);
		for (size_t i = 0; i < n && i < pg->cfg->top; i++) {
			uint64_t val = table_value(v[i], sort_by);
			if (!val)
				break;
			/* (of temporaries: their own blocks and bytes, as top shows
			 * them, not all the stack's) */
			uint64_t blocks = t == ST_PEAK	   ? v[i]->peak_blocks
					  : t == ST_LEAKED ? v[i]->end_blocks
					  : t == ST_TEMP   ? v[i]->temp_calls
							   : v[i]->alloc_calls;
			uint64_t bytes = t == ST_TEMP ? v[i]->temp_bytes : v[i]->alloc_bytes;
			fprintf(f, "<tr><td>%s</td><td>%.1f%%</td><td>%llu</td><td>%s</td>",
				stack_tables[t].unit[0] == 'b' ? ht_fmt_bytes(b1, val)
							       : ht_html__count(b1, val),
				100.0 * (double)val / (double)total, (unsigned long long)blocks,
				ht_fmt_bytes(b2, bytes));
			stack_cell(pg, v[i]->node - 1);
			fputs("</tr>\n", f);
		}
		fputs("</table>\n", f);
	}
	free(all);
	fputs("<h3 id=\"biggest\">Biggest single allocations</h3>\n", f);
	if (!ss->nbig) {
		fputs("<p>None.</p>\n", f);
	} else {
		fputs("<table class=\"stacks\"><tr><th>bytes</th><th>when</th><th>thread</th>"
		      "<th class=\"stack\">stack (innermost first)</th></tr>\n", f);
		for (size_t i = 0; i < ss->nbig && i < pg->cfg->top; i++) {
			fprintf(f, "<tr><td>%s</td><td>%s</td><td>%u</td>", ht_fmt_bytes(b1, ss->big[i].size),
				ht_fmt_ns(b2, ss->big[i].time_ns), ss->big[i].tid);
			stack_cell(pg, ss->big[i].node);
			fputs("</tr>\n", f);
		}
		fputs("</table>\n", f);
		/* the allocations -n asks for and the table did not keep (-n 0
		 * or above HT_BIG_ALLOCS_MAX), said as top says it */
		uint64_t want = ss->big_seen < pg->cfg->top ? ss->big_seen : pg->cfg->top;
		uint64_t shown = ss->nbig < pg->cfg->top ? ss->nbig : pg->cfg->top;
		if (want > shown)
			fprintf(f,
				"<p id=\"biggest-left-out\">%llu smaller allocations left out: the "
				"table keeps the %d biggest.</p>\n",
				(unsigned long long)(want - shown), HT_BIG_ALLOCS_MAX);
	}
	fputs("</section>\n", f);
}

static void section_threads(struct page *pg)
{
	const struct ht_stats *s = pg->c->stats;
	FILE *f = pg->f;
	char b1[32];
	fputs("<section id=\"threads\"><h2>Threads</h2><table><tr><th>tid</th><th>name</th>"
	      "<th>events</th><th>allocations</th><th>frees</th><th>bytes allocated</th></tr>\n", f);
	for (size_t i = 0; i < s->nthreads; i++) {
		const struct ht_stats_thread *t = &s->threads[i];
		fprintf(f, "<tr><td>%u</td><td>", t->tid);
		ht_html__text(f, t->name[0] ? t->name : "-");
		fprintf(f, "</td><td>%llu</td><td>%llu</td><td>%llu</td><td>%s</td></tr>\n",
			(unsigned long long)t->events, (unsigned long long)t->allocations,
			(unsigned long long)t->frees, ht_fmt_bytes(b1, t->bytes_allocated));
	}
	fputs("</table>\n", f);
	if (s->marks.n) {
		fputs("<h3>Marks</h3><table><tr><th>time</th><th>thread</th><th>label</th></tr>\n", f);
		for (size_t i = 0; i < s->marks.n; i++) {
			fprintf(f, "<tr><td>%s</td><td>%u</td><td>", ht_fmt_ns(b1, s->marks.v[i].time_ns),
				s->marks.v[i].tid);
			ht_html__text(f, s->marks.v[i].label);
			fputs("</td></tr>\n", f);
		}
		fputs("</table>\n", f);
	}
	fputs("</section>\n", f);
}

/* Flame graphs of bytes allocated and of bytes live at the peak, inline
 * (each graph's script works on its own <svg>). */
static void section_flame(struct page *pg)
{
	static const struct {
		int metric;
		const char *id, *title;
	} graphs[] = {
		{HT_FLAME_ALLOCATED, "flame-allocated", "Bytes allocated, by stack"},
		{HT_FLAME_PEAK, "flame-peak", "Bytes live at the peak of the heap, by stack"},
	};
	FILE *f = pg->f;
	fputs("<section id=\"flamegraph\"><h2>Flame graphs</h2>\n", f);
	if (!ht_reader__nnodes(pg->r)) {
		fputs("<p class=\"warn\">No stacks in this trace: record with <code>--stacks</code>.</p>"
		      "</section>\n", f);
		return;
	}
	fputs("<p>Click a frame to zoom, Reset Zoom to go back, Search to highlight; hover for "
	      "bytes and counts.</p>\n", f);
	for (size_t g = 0; g < sizeof(graphs) / sizeof(graphs[0]); g++) {
		struct ht_flame_style style = {.title = graphs[g].title, .unit = "bytes",
					       .width = 1200, .id = graphs[g].id};
		fputs("<div class=\"chart\">", f);
		ht_flamegraph__svg(f, pg->r, pg->sym, &pg->c->stacks, graphs[g].metric, &style);
		fputs("</div>\n", f);
	}
	fputs("</section>\n", f);
}

/* glibc's internals (heaptrail heap): arenas, heaps, thresholds, lock waits. */
static void section_heap(struct page *pg)
{
	FILE *f = pg->f;
	const char *other = ht_reader__info(pg->r)->allocator;
	if (other) {
		fputs("<section id=\"heap\"><h2>glibc's heap: arenas, heaps, thresholds</h2>\n<p>"
		      "The program's malloc was not glibc's but that of ", f);
		ht_html__text(f, other);
		fputs(": there are no glibc arenas, heaps or thresholds to show.</p>\n</section>\n", f);
		return;
	}
	char *html = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&html, &len);
	if (!m) {
		ht_error("out of memory");
		exit(HT_EXIT_DATA);
	}
	ht_heapinfo__html(pg->c->heap, m);
	caught(m, &html);
	fputs("<section id=\"heap\"><h2>glibc's heap: arenas, heaps, thresholds</h2>\n", f);
	put_marked_svg(f, html, "heap-chart");
	fputs("</section>\n", f);
	free(html);
}

/* ---- compare results ---------------------------------------------------- */

/* A --compare file, or NULL after an error naming the option and the file
 * (the command then exits 2: a file named by an option that cannot be
 * read is a bad command line, as leaks --suppressions says it). */
static struct ht_jvalue *load_compare(const char *path)
{
	size_t len;
	char err[1024];
	char *text = ht_read_file_err(path, 64u << 20, &len, err, sizeof(err));
	if (!text) {
		ht_error("--compare: %s; give the output of 'heaptrail compare --json'", err);
		return NULL;
	}
	struct ht_jvalue *v = ht_jvalue__parse(text, len, err, sizeof(err));
	free(text);
	if (!v) {
		ht_error("--compare: %s: not JSON (%s); give the output of 'heaptrail compare "
			 "--json'",
			 path, err);
		return NULL;
	}
	const struct ht_jvalue *res = ht_jvalue__get(v, "results");
	if (!res || res->type != HT_JARR || !ht_jvalue__str(v, "workload")) {
		ht_error("--compare: %s: not the output of 'heaptrail compare --json' (no workload "
			 "and results)",
			 path);
		ht_jvalue__free(v);
		return NULL;
	}
	return v;
}

/* A count from a user's JSON (any double: negative, fractional, 1e300) as
 * uint64_t, saturating: converting a double out of range is undefined. */
static uint64_t count_of(double v)
{
	if (!(v > 0))
		return 0; /* negative, or NaN */
	return v < 18446744073709551616.0 ? (uint64_t)v : UINT64_MAX;
}

static void section_compare(struct page *pg, struct ht_jvalue **cmp, int ncmp)
{
	FILE *f = pg->f;
	if (!ncmp)
		return;
	fputs("<section id=\"allocators\"><h2>Allocators</h2>\n", f);
	for (int i = 0; i < ncmp; i++) {
		const struct ht_jvalue *res = ht_jvalue__get(cmp[i], "results");
		fputs("<h3>Workload ", f);
		ht_html__text(f, ht_jvalue__str(cmp[i], "workload"));
		fputs("</h3>\n<table class=\"compare\"><tr><th>allocator</th><th>runs</th>"
		      "<th>wall</th><th>cycles in calls</th><th>Max RSS</th><th>RSS / ideal</th></tr>\n", f);
		double best = 0;
		for (size_t k = 0; k < res->n; k++) {
			double w = ht_jvalue__num(&res->items[k], "wall_usec", 0);
			if (w > 0 && (best == 0 || w < best))
				best = w;
		}
		for (size_t k = 0; k < res->n; k++) {
			const struct ht_jvalue *x = &res->items[k];
			const char *label = ht_jvalue__str(x, "label");
			char b1[32], b2[32];
			double w = ht_jvalue__num(x, "wall_usec", 0);
			fputs("<tr><td>", f);
			ht_html__text(f, label ? label : "?");
			fprintf(f, "</td><td>%.0f</td><td>%s%s</td><td>%s</td><td>%s</td><td>%.2f</td></tr>\n",
				ht_jvalue__num(x, "runs", 0), ht_fmt_ns(b1, count_of(w * 1000)),
				w > 0 && w == best ? " (fastest)" : "",
				ht_html__count(b2, count_of(ht_jvalue__num(x, "total_call_cycles", 0))),
				ht_fmt_bytes((char[32]){0}, count_of(ht_jvalue__num(x, "max_rss_kb", 0) * 1024)),
				ht_jvalue__num(x, "rss_ideal_ratio", 0));
		}
		fputs("</table>\n", f);
		/* the RSS chart compare wrote, inlined */
		const char *chart = ht_jvalue__str(cmp[i], "chart");
		size_t len;
		char *svg = chart ? ht_read_file(chart, 16u << 20, &len) : NULL;
		if (svg && strstr(svg, "<svg")) {
			fputs("<div class=\"chart\">", f);
			fputs(strstr(svg, "<svg"), f);
			fputs("</div>\n", f);
		} else if (chart) {
			fputs("<p class=\"warn\">The RSS chart ", f);
			ht_html__text(f, chart);
			fputs(" could not be read.</p>\n", f);
		}
		free(svg);
	}
	fputs("</section>\n", f);
}

/* ---- the page ----------------------------------------------------------- */

static void write_page(struct page *pg, struct ht_jvalue **cmp, int ncmp)
{
	const struct ht_trace_info *in = ht_reader__info(pg->r);
	FILE *f = pg->f;
	char title[1024];
	snprintf(title, sizeof(title), "heaptrail: %s", pg->cfg->title ? pg->cfg->title
					 : in->cmdline && *in->cmdline ? in->cmdline : pg->path);
	ht_html__begin(f, title);
	fputs("<header><h1>", f);
	ht_html__text(f, title);
	fprintf(f, "</h1><p>pid %d, trace ", in->pid);
	ht_html__text(f, pg->path);
	fputs("</p><nav><a href=\"#summary\">summary</a> <a href=\"#histograms\">sizes</a> "
	      "<a href=\"#stacks\">top stacks</a> <a href=\"#leaks\">leaks</a> "
	      "<a href=\"#flamegraph\">flame graphs</a> <a href=\"#heap\">glibc's heap</a> "
	      "<a href=\"#threads\">threads</a>", f);
	if (ncmp)
		fputs(" <a href=\"#allocators\">allocators</a>", f);
	fputs("</nav></header>\n", f);
	section_summary(pg);
	section_timeline(pg);
	section_histograms(pg);
	section_stacks(pg);
	section_flame(pg);
	section_heap(pg);
	section_threads(pg);
	section_compare(pg, cmp, ncmp);
	ht_html__end(f);
}

/* "app.ht" -> "app.html" (in the current directory, like the other
 * commands' default outputs). */
static char *default_output(const char *trace)
{
	const char *base = strrchr(trace, '/') ? strrchr(trace, '/') + 1 : trace;
	size_t n = strlen(base);
	if (n > 3 && !strcmp(base + n - 3, ".ht"))
		n -= 3;
	char *out = malloc(n + 6);
	if (!out)
		exit(HT_EXIT_DATA);
	memcpy(out, base, n);
	strcpy(out + n, ".html");
	return out;
}

int cmd_report(int argc, char **argv)
{
	struct report_config cfg = {.top = 10, .depth = 4};
	const char *cmp_arg = NULL;
	const struct ht_option opts[] = {
		{'o', "output", HT_OPT_STRING, &cfg.out, "FILE", "write the page here, - for standard output (TRACE's name with .html)"},
		{0, "compare", HT_OPT_STRING, &cmp_arg, "FILE[,FILE]", "'heaptrail compare --json' results to show (none)"},
		{'n', "top", HT_OPT_U64, &cfg.top, "N", "stacks per table, 0 for all (10; biggest allocations: 10000 at most)"},
		{0, "depth", HT_OPT_U64, &cfg.depth, "N", "frames shown per stack before the rest is folded (4)"},
		{0, "title", HT_OPT_STRING, &cfg.title, "TEXT", "the page's title (the traced command)"},
		{0, "sysroot", HT_OPT_STRING, &cfg.sysroot, "DIR", "find the traced modules under DIR"},
		{0, "debug-dir", HT_OPT_STRING, &cfg.debug_dir, "DIR", "also look for separate debug files in DIR"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no line saying what was written"},
		HT_OPT_REPORT_THREADS,
		{0},
	};
	int ret = HT_EXIT_USAGE;
	struct ht_reader *r = NULL;
	struct ht_symbolizer *sym = NULL;
	struct collectors c = {0};
	struct ht_jvalue *cmp[8] = {0};
	char *out = NULL, *cmp_list = NULL;
	struct ht_html_file hf = {0};
	struct ht_suppressions supp = {0};
	char err[1024];
	memset(&c, 0, sizeof(c));
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs != 1) {
		ht_error("%s; usage: heaptrail report [-o FILE.html] TRACE",
			 nargs ? "one trace at a time" : "no trace given");
		goto cleanup;
	}
	if (cfg.depth == 0) {
		ht_error("--depth 0: a row shows at least one frame: give 1 or more (4)");
		goto cleanup;
	}
	if (!cfg.top) /* (0 for all, as in top, leaks and diff) */
		cfg.top = UINT64_MAX;
	if (cmp_arg) {
		cmp_list = strdup(cmp_arg);
		for (char *tok = strtok(cmp_list, ","); tok; tok = strtok(NULL, ",")) {
			if (cfg.ncompare == (int)(sizeof(cmp) / sizeof(cmp[0]))) {
				ht_error("--compare: at most %zu files", sizeof(cmp) / sizeof(cmp[0]));
				goto cleanup;
			}
			cfg.compare[cfg.ncompare] = tok;
			if (!(cmp[cfg.ncompare++] = load_compare(tok)))
				goto cleanup; /* (HT_EXIT_USAGE) */
		}
	}
	out = cfg.out ? strdup(cfg.out) : default_output(argv[0]);
	int to_stdout = !strcmp(out, "-");
	/* a directory or a symlink at the output, or a directory where no
	 * file can be made, is said now, not after the whole trace is read */
	if (!to_stdout && ht_out__check(out, err, sizeof(err))) {
		ht_error("%s", err);
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	ht_blocks__symbols_ahead(cfg.sysroot, cfg.debug_dir);
	ret = read_trace(argv[0], cfg.top, &c, &r);
	if (!r)
		goto cleanup;
	if (ret && !c.stats->events) /* nothing read: no page */
		goto cleanup;
	sym = ht_blocks__symbolizer(r, cfg.sysroot, cfg.debug_dir);
	if (!sym) {
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	/* stacks that read alike are one row (several calls on one line) */
	ht_stackstats__merge_alike(&c.stacks, r, sym);
	if (ht_html__open(&hf, out) < 0) {
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	ht_suppressions__add_defaults(&supp);
	struct page pg = {hf.f, r, sym, &cfg, &c, argv[0], &supp};
	write_page(&pg, cmp, cfg.ncompare);
	if (ht_html__commit(&hf) < 0) {
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	if (!cfg.quiet && !to_stdout) {
		struct stat st;
		char b1[32];
		if (stat(out, &st) == 0 && S_ISREG(st.st_mode))
			fprintf(stderr,
				"heaptrail: wrote %s (%s) from %llu events; open it in a browser\n", out,
				ht_fmt_bytes(b1, (uint64_t)st.st_size),
				(unsigned long long)c.stats->events);
		else /* (-o /dev/null, a pipe: no page to open) */
			fprintf(stderr, "heaptrail: wrote %s from %llu events\n", out,
				(unsigned long long)c.stats->events);
	}
cleanup:
	ht_html__abort(&hf);
	ht_suppressions__free(&supp);
	for (int i = 0; i < cfg.ncompare; i++)
		ht_jvalue__free(cmp[i]);
	free(cmp_list);
	free(out);
	ht_symbolizer__free(sym);
	ht_reader__close(r);
	ht_stats__delete(c.stats);
	ht_stackstats__free(&c.stacks);
	if (c.timeline)
		ht_timeline__delete(c.timeline);
	if (c.heap)
		ht_heapinfo__delete(c.heap);
	ht_reader__close(c.heap_r); /* (after the model: it keeps the reader's info) */
	return ret;
}
