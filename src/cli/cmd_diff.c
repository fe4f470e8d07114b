/* heaptrail diff: what grew, by stack: two traces (or two times of one)
 * compared per symbolized call path, as a table, JSON, folded "stack
 * before after" lines (difffolded.pl's) or a differential flame graph.
 * The analysis is src/analyze/diff.c. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/diff.h"
#include "cli/builtin.h"
#include "common/json.h"
#include "common/options.h"
#include "common/outfile.h"
#include "common/util.h"

/* One configuration per run; each default is labelled by its flag. */
struct diff_config {
	struct ht_opt_strings at; /* --at (none): two points of one trace */
	const char *from;        /* --from (the start, with --to) */
	const char *to;          /* --to (the end, with --from) */
	const char *by;          /* --by (stack): stack or function */
	const char *sort;        /* --sort (live): live, alloc or count */
	uint64_t top;            /* -n, --top (20): entries shown, 0 = all */
	uint64_t depth;          /* --depth (3): frames per text row */
	int normalize;           /* --normalize */
	int json;                /* --json */
	int folded;              /* --folded */
	int svg;                 /* --svg (or -o NAME.svg) */
	int negate;              /* --negate: SVG widths from the before side */
	const char *out;         /* -o, --output (standard output) */
	const char *title;       /* --title (the metric and the traces) */
	uint64_t width;          /* --width (1200) */
	const char *sysroot;     /* --sysroot */
	const char *debug_dir;   /* --debug-dir */
	int quiet;             /* -q: no progress line, no warnings about the trace's state */
};

static const char usage_text[] =
	"usage: heaptrail diff [options] BEFORE AFTER\n"
	"       heaptrail diff [options] --at T1 --at T2 TRACE\n"
	"\n"
	"Compares two traces recorded with --stacks, or one trace at two times, by\n"
	"call path: bytes and blocks allocated and live in each, and the change,\n"
	"the most grown first.  Stacks are matched by their function names (module\n"
	"+offset where there is no symbol), so runs with different addresses\n"
	"(ASLR, a rebuilt program) compare.  A time is a duration since the start\n"
	"(2.5s, 300ms), mark:LABEL (right after heaptrail_mark(LABEL)), start or end.\n"
	"\fEXAMPLES\n"
	"  heaptrail diff before.ht after.ht                  # what grew, by stack\n"
	"  heaptrail diff --by function --sort alloc before.ht after.ht\n"
	"  heaptrail diff -o diff.svg before.ht after.ht      # differential flame graph\n"
	"  heaptrail diff --folded before.ht after.ht > diff.folded   # for flamegraph.pl\n"
	"  heaptrail diff --at 1s --at 5s app.ht              # live at 1 s vs at 5 s\n"
	"  heaptrail diff --from mark:warm --to mark:done app.ht\n"
	"  heaptrail diff --json before.ht after.ht | jq '.entries[0].delta'\n";

/* A point: a duration, mark:LABEL, start or end. */
static int parse_point(const char *s, const char *opt, struct ht_diff_point *p)
{
	p->mark = NULL;
	p->opt = opt;
	if (!strncmp(s, "mark:", 5) && s[5]) {
		p->mark = s + 5;
		p->time_ns = 0;
		return 0;
	}
	if (!strcmp(s, "end")) {
		p->time_ns = UINT64_MAX;
		return 0;
	}
	if (!strcmp(s, "start")) {
		p->time_ns = 0;
		return 0;
	}
	if (ht_parse_duration(s, &p->time_ns) == 0)
		return 0;
	ht_error("%s '%s': expected a time like 2.5s or 300ms, mark:LABEL, start or end", opt, s);
	return -1;
}

/* The two points of the two-times mode from --at, --from, --to; 0 if none
 * was given, 2 if they are, -1 after an error. */
static int points(const struct diff_config *cfg, struct ht_diff_point pt[2])
{
	if (!cfg->at.n && !cfg->from && !cfg->to)
		return 0;
	if (cfg->at.n > 2 || (cfg->at.n && (cfg->from || cfg->to))) {
		ht_error("two times at most: --at T1 --at T2, or --from T1 --to T2");
		return -1;
	}
	const char *a = cfg->at.n ? cfg->at.v[0] : cfg->from ? cfg->from : "start";
	const char *b = cfg->at.n == 2 ? cfg->at.v[1] : cfg->to ? cfg->to : "end";
	if (parse_point(a, cfg->at.n ? "--at" : "--from", &pt[0]) < 0 ||
	    parse_point(b, cfg->at.n ? "--at" : "--to", &pt[1]) < 0)
		return -1;
	if (!pt[0].mark && !pt[1].mark && pt[0].time_ns > pt[1].time_ns) {
		ht_error("the first time (%s) is after the second (%s)", a, b);
		return -1;
	}
	return 2;
}

int cmd_diff(int argc, char **argv)
{
	struct diff_config cfg = {.by = "stack", .sort = "live", .top = 20, .depth = 3,
				  .width = 1200};
	const struct ht_option opts[] = {
		{0, "at", HT_OPT_STRINGS, &cfg.at, "TIME", "twice: compare one trace at these two times"},
		{0, "from", HT_OPT_STRING, &cfg.from, "TIME", "compare one trace from TIME (the start)"},
		{0, "to", HT_OPT_STRING, &cfg.to, "TIME", "... to TIME (the end)"},
		{0, "by", HT_OPT_STRING, &cfg.by, "WHAT", "stack, or function: the function that called the allocator (stack)"},
		{0, "sort", HT_OPT_STRING, &cfg.sort, "WHAT", "live, alloc or count: by the growth of live bytes, bytes allocated or allocations; graphs show it (live)"},
		{'n', "top", HT_OPT_U64, &cfg.top, "N", "entries shown, 0 for all (20)"},
		{0, "depth", HT_OPT_U64, &cfg.depth, "N", "frames shown per stack in the text output (3)"},
		{0, "normalize", HT_OPT_FLAG, &cfg.normalize, NULL, "scale the before side to the after side's totals"},
		{0, "json", HT_OPT_FLAG, &cfg.json, NULL, "JSON: before, after, entries[{stack, before, after, delta}]"},
		{0, "folded", HT_OPT_FLAG, &cfg.folded, NULL, "'stack before after' lines (difffolded.pl's), for flamegraph.pl"},
		{0, "svg", HT_OPT_FLAG, &cfg.svg, NULL, "a differential flame graph (-o NAME.svg implies it)"},
		{0, "negate", HT_OPT_FLAG, &cfg.negate, NULL, "the flame graph's widths from the before side (to see what shrank)"},
		{'o', "output", HT_OPT_STRING, &cfg.out, "FILE", "write here, - for standard output (standard output)"},
		{0, "title", HT_OPT_STRING, &cfg.title, "TEXT", "the SVG's title (the metric and the traces)"},
		{0, "width", HT_OPT_U64, &cfg.width, "PIXELS", "the SVG's width (1200)"},
		{0, "sysroot", HT_OPT_STRING, &cfg.sysroot, "DIR", "find the traced modules under DIR"},
		{0, "debug-dir", HT_OPT_STRING, &cfg.debug_dir, "DIR", "also look for separate debug files in DIR"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no progress line, no \"wrote\" line, no warning for traces not closed cleanly, not in exact order or without stacks"},
		HT_OPT_THREADS,
		{0},
	};
	int ret = HT_EXIT_USAGE;
	struct ht_diff *d = NULL;
	struct ht_out of = {.fd = -1, .slot = -1};
	char err[1024];
	FILE *out = stdout;
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	struct ht_diff_point pt[2];
	int npts = points(&cfg, pt);
	if (npts < 0)
		goto cleanup;
	if (nargs != (npts ? 1 : 2)) {
		ht_error("%s; usage: heaptrail diff [options] BEFORE AFTER, or --at T1 --at T2 TRACE",
			 npts ? "one trace with --at, --from or --to"
			      : nargs < 2 ? "two traces to compare" : "two traces at most");
		goto cleanup;
	}
	struct ht_diff_opts o = {.sysroot = cfg.sysroot, .debug_dir = cfg.debug_dir,
				 .normalize = cfg.normalize};
	o.by_function = !strcmp(cfg.by, "function");
	if (!o.by_function && strcmp(cfg.by, "stack")) {
		ht_error("--by=%s: expected stack or function", cfg.by);
		goto cleanup;
	}
	if (!strcmp(cfg.sort, "live"))
		o.sort = HT_DIFF_LIVE;
	else if (!strcmp(cfg.sort, "alloc"))
		o.sort = HT_DIFF_ALLOC;
	else if (!strcmp(cfg.sort, "count"))
		o.sort = HT_DIFF_COUNT;
	else {
		ht_error("--sort=%s: expected live, alloc or count", cfg.sort);
		goto cleanup;
	}
	if (cfg.out && !strcmp(cfg.out, "-"))
		cfg.out = NULL; /* standard output, as every command's -o - */
	if (ht_out__named(cfg.out, ".svg") && !cfg.json && !cfg.folded)
		cfg.svg = 1;
	/* a directory at the output (-o .) failed the rename only after both
	 * traces were read: said now, in the words of the others */
	if (cfg.out && ht_out__check(cfg.out, err, sizeof(err))) {
		ht_error("%s", err);
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	if (cfg.json + cfg.folded + cfg.svg > 1) {
		ht_error("one output at a time: --json, --folded or --svg");
		goto cleanup;
	}
	if (cfg.width < 100 || cfg.width > 100000) {
		ht_error("--width=%llu: expected 100 to 100000 pixels", (unsigned long long)cfg.width);
		goto cleanup;
	}
	if (npts)
		ret = ht_diff__times(argv[0], pt, &o, &d);
	else
		ret = ht_diff__traces(argv[0], argv[1], &o, &d);
	if (!d)
		goto cleanup;
	int other = ht_diff__programs_differ(d);
	if (other && !ht_quiet) {
		/* Not an error (two builds, two inputs of one program are what diff
		 * is for), but stacks are matched by function names: those of two
		 * programs pair up wherever a name is the same (main, libc's). */
		const struct ht_diff_side *b = ht_diff__side(d, 0), *a = ht_diff__side(d, 1);
		if (other & HT_DIFF_OTHER_EXE)
			fprintf(stderr,
				"heaptrail: note: %s and %s are traces of different executables "
				"(%s, %s): their stacks are matched by function names alone, so "
				"frames such as main pair up across them\n",
				b->path, a->path, *b->exe ? b->exe : b->command,
				*a->exe ? a->exe : a->command);
		else
			fprintf(stderr, "heaptrail: note: %s and %s ran different commands of %s ('%s', "
				"'%s')\n",
				b->path, a->path, *a->exe ? a->exe : "one executable", b->command,
				a->command);
	}
	/* (a trace with no allocation has no stacks either, whatever it
	 * was recorded with: nothing to say of it) */
	for (int s = 0; s < 2 - (npts ? 1 : 0); s++)
		if (!ht_diff__side(d, s)->has_stacks && ht_diff__side(d, s)->total.alloc_blocks &&
		    !cfg.quiet) /* (-q: as flamegraph and export) */
			ht_warning("%s has no stacks: its blocks are compared as one \"[no stack]\" "
				   "entry; record with --stacks to compare by stack",
				   ht_diff__side(d, s)->path);
	if (ht_out__open(&of, cfg.out, HT_OUT_PUBLIC, HT_OUT_STDOUT, err, sizeof(err))) {
		ht_error("%s", err);
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	out = of.f;
	if (cfg.json) {
		struct ht_json j;
		ht_json__init(&j, out, 1);
		ht_diff__json(d, &j, cfg.top);
		ht_json__finish(&j);
	} else if (cfg.folded) {
		ht_diff__folded(d, out);
	} else if (cfg.svg) {
		static const char *const what[] = {"Live bytes", "Bytes allocated", "Allocations"};
		const struct ht_diff_side *b = ht_diff__side(d, 0), *a = ht_diff__side(d, 1);
		char title[1024], t0[32], t1[32];
		if (npts)
			snprintf(title, sizeof(title), "%s, %s: %s%s to %s%s", what[o.sort], b->path,
				 b->mark ? "mark " : "", b->mark ? b->mark : ht_fmt_ns(t0, b->at_ns),
				 a->mark ? "mark " : "", a->mark ? a->mark : ht_fmt_ns(t1, a->at_ns));
		else
			snprintf(title, sizeof(title), "%s, %s to %s", what[o.sort], b->path, a->path);
		if (cfg.negate)
			strncat(title, " (widths: before)", sizeof(title) - strlen(title) - 1);
		int drawn = ht_diff__svg(d, out, cfg.title ? cfg.title : title, cfg.width, cfg.negate);
		if (cfg.out && !cfg.quiet) /* (as flamegraph -q and timeline -q: probe V) */
			fprintf(stderr, "heaptrail: wrote %s: %d frame%s from %zu %s%s\n", cfg.out,
				drawn, ht_s((uint64_t)drawn), ht_diff__count(d),
				o.by_function ? "function" : "stack", ht_s(ht_diff__count(d)));
	} else {
		ht_diff__text(d, out, cfg.top, cfg.depth);
	}
	/* a failed write (ferror) is said by the commit, with its reason:
	 * "cannot write FILE: No space left on device" (it was said here,
	 * without one) */
	if (ht_out__commit(&of, err, sizeof(err))) {
		ht_error("%s", err);
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
cleanup:
	ht_out__abort(&of);
	ht_diff__free(d);
	return ret;
}
