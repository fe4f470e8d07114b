/* heaptrail timeline: the heap over time (live bytes, usable bytes, RSS,
 * program break, mmapped bytes, allocation rate, markers) as an SVG plot,
 * CSV or JSON, from one pass over the trace (analyze/timeline.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "analyze/pass.h"
#include "analyze/slices.h"
#include "analyze/timeline.h"
#include "cli/builtin.h"
#include "common/json.h"
#include "common/options.h"
#include "common/outfile.h"
#include "common/util.h"

/* One configuration per run; each default is labelled by its flag. */
struct timeline_config {
	const char *out;  /* -o, --output (TRACE-timeline.svg, .csv, .json) */
	int csv;          /* --csv */
	int json;         /* --json */
	uint64_t bins;    /* --bins (1000) */
	uint64_t from;    /* --from (0) */
	uint64_t to;      /* --to (the end) */
	uint64_t width;   /* --width (1200) */
	uint64_t height;  /* --height (600) */
	int quiet;        /* -q: no progress, no "wrote" line, no warnings about the trace */
};

static const char usage_text[] =
	"usage: heaptrail timeline [options] TRACE\n"
	"\n"
	"The heap over time: live requested and usable bytes, RSS, program break,\n"
	"bytes in glibc-mmapped chunks and in the program's own mappings, and the\n"
	"allocation rate, in time bins that keep each series' min, max and last\n"
	"value; heaptrail_mark() markers as labelled lines, paused recording\n"
	"shaded, and the time after the events read of a cut, damaged or\n"
	"unfinished trace (still being written).\n"
	"An SVG plot by default (TRACE-timeline.svg), or CSV or JSON.  With\n"
	"--from/--to, the peak is the range's.\n"
	"\fEXAMPLES\n"
	"  heaptrail timeline -o heap.svg app.ht\n"
	"  heaptrail timeline --csv -o heap.csv --bins 200 app.ht\n"
	"  heaptrail timeline --from 1.5s --to 3s -o zoom.svg app.ht\n"
	"  heaptrail timeline --json -o - app.ht | jq .peak_live_bytes\n";

/* TRACE.ht -> TRACE-timeline.EXT beside it. */
static char *default_output(const char *trace, const char *ext)
{
	size_t n = strlen(trace);
	if (n > 3 && !strcmp(trace + n - 3, ".ht"))
		n -= 3;
	char *s = NULL;
	if (asprintf(&s, "%.*s-timeline.%s", (int)n, trace, ext) < 0)
		return NULL;
	return s;
}

/* The timeline's options: the trace's, and the command's bins and range;
 * the SVG's title into title. */
static void timeline_opts(struct ht_timeline_opts *o, const struct timeline_config *cfg,
			  const struct ht_trace_info *in, char *title, size_t titlelen)
{
	ht_timeline__opts_init(o, in);
	o->bins = (unsigned)cfg->bins;
	o->from_ns = cfg->from;
	o->to_ns = cfg->to;
	snprintf(title, titlelen, "heap over time: %s (pid %d)", in->cmdline, in->pid);
	o->title = title;
}

int cmd_timeline(int argc, char **argv)
{
	struct timeline_config cfg = {.bins = 1000, .width = 1200, .height = 600};
	const char *from_s = NULL, *to_s = NULL;
	const struct ht_option opts[] = {
		{'o', "output", HT_OPT_STRING, &cfg.out, "FILE", "write here; - = standard output (TRACE-timeline.svg/.csv/.json); NAME.csv or NAME.json alone chooses that format"},
		{0, "csv", HT_OPT_FLAG, &cfg.csv, NULL, "CSV: a header, then one row per bin"},
		{0, "json", HT_OPT_FLAG, &cfg.json, NULL, "JSON: the bins, markers, paused ranges, the peak, whether complete"},
		{0, "bins", HT_OPT_U64, &cfg.bins, "N", "time bins (1000), 1..1000000"},
		{0, "from", HT_OPT_STRING, &from_s, "TIME", "from this time since the start (0)"},
		{0, "to", HT_OPT_STRING, &to_s, "TIME", "up to this time (the end)"},
		{0, "width", HT_OPT_U64, &cfg.width, "PIXELS", "the SVG's width (1200)"},
		{0, "height", HT_OPT_U64, &cfg.height, "PIXELS", "the SVG's height (600)"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no progress line, no \"wrote\" line, no warning for traces not closed cleanly or not in exact order"},
		HT_OPT_SLICES,
		{0},
	};
	int ret = HT_EXIT_USAGE;
	struct ht_reader *r = NULL;
	struct ht_timeline *tl = NULL;
	struct ht_pass *pass = NULL;
	char *out = NULL, err[1024];
	struct ht_out of = {.fd = -1, .slot = -1};
	FILE *f = NULL;
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs != 1) {
		ht_error("%s; usage: heaptrail timeline [options] TRACE",
			 nargs ? "one trace at a time" : "no trace given");
		goto cleanup;
	}
	if (cfg.bins < 1 || cfg.bins > HT_TIMELINE_MAX_BINS) {
		ht_error("--bins=%llu: expected 1 to %d", (unsigned long long)cfg.bins,
			 HT_TIMELINE_MAX_BINS);
		goto cleanup;
	}
	if (from_s && ht_parse_duration(from_s, &cfg.from)) {
		ht_error("--from: '%s' is not a duration like 1.5s, 200ms or 30us (under 292 years)",
			 from_s);
		goto cleanup;
	}
	if (to_s && ht_parse_duration(to_s, &cfg.to)) {
		ht_error("--to: '%s' is not a duration like 1.5s, 200ms or 30us (under 292 years)",
			 to_s);
		goto cleanup;
	}
	if (to_s && cfg.to <= cfg.from) {
		ht_error("--to must come after --from");
		goto cleanup;
	}
	if (cfg.csv && cfg.json) {
		ht_error("--csv and --json: choose one");
		goto cleanup;
	}
	/* -o NAME.csv or NAME.json without a format: that format, as diff's
	 * -o NAME.svg (an SVG went into heap.csv, probe V) */
	if (!cfg.csv && !cfg.json) {
		cfg.csv = ht_out__named(cfg.out, ".csv");
		cfg.json = ht_out__named(cfg.out, ".json");
	}
	if (cfg.width < 300 || cfg.width > 100000 || cfg.height < 200 || cfg.height > 100000) {
		ht_error("--width takes 300 to 100000 pixels, --height 200 to 100000");
		goto cleanup;
	}
	ret = HT_EXIT_DATA;
	/* a directory at the output (-o .) failed the rename only after the
	 * trace was read: said now, in the words of the others */
	if (cfg.out && strcmp(cfg.out, "-") && ht_out__check(cfg.out, err, sizeof(err))) {
		ht_error("%s", err);
		goto cleanup;
	}
	/* with threads to spare, in time slices (analyze/slices.h), as stats;
	 * else, or where the slices cannot give the serial answer, serially */
	int sliced = 0;
	char title[512];
	if (ht_slices__wanted() > 1 && (r = ht_reader__open_info(argv[0], err, sizeof(err)))) {
		/* (a trace that cannot be opened: said when opened serially) */
		struct ht_timeline_opts o;
		timeline_opts(&o, &cfg, ht_reader__info(r), title, sizeof(title));
		const struct ht_slices_want w = {.timeline = &o};
		struct ht_slices_got g;
		if (ht_slices__read(argv[0], r, &w, &g) == 0) {
			tl = g.timeline;
			sliced = 1;
		} else {
			ht_reader__close(r);
			r = NULL;
		}
	}
	if (!r)
		r = ht_analyze__open(argv[0]);
	if (!r)
		goto cleanup;
	const struct ht_trace_info *in = ht_reader__info(r);
	if (!to_s && ht_analyze__from_past_end(in, cfg.from, argv[0])) {
		ret = HT_EXIT_USAGE;
		goto cleanup;
	}
	static const struct ht_pauses no_pauses;
	const struct ht_pauses *pauses = &no_pauses;
	if (!sliced) {
		struct ht_timeline_opts o;
		timeline_opts(&o, &cfg, in, title, sizeof(title));
		tl = ht_timeline__new(&o);
		if (!tl) {
			ht_error("out of memory for %llu bins", (unsigned long long)cfg.bins);
			goto cleanup;
		}
		pass = ht_pass__new();
		ht_pass__check_order(pass, r);
		const struct ht_event *ev;
		while ((ev = ht_analyze__next_event(r))) {
			if (cfg.to && ev->time_ns > cfg.to)
				break; /* the rest cannot show */
			ht_timeline__event(tl, ev, ht_pass__event(pass, ev));
		}
		pauses = ht_pass__pauses(pass);
	}
	ht_timeline__finish(tl, r);
	int read_ret = ht_analyze__finish_pass(r, argv[0], cfg.quiet, pauses);

	const char *ext = cfg.csv ? "csv" : cfg.json ? "json" : "svg";
	out = cfg.out ? strdup(cfg.out) : default_output(argv[0], ext);
	int to_stdout = !strcmp(out, "-");
	/* never a partial file: write beside it, then rename */
	if (ht_out__open(&of, out, HT_OUT_PUBLIC, HT_OUT_DASH, err, sizeof(err))) {
		ht_error("%s", err);
		goto cleanup;
	}
	f = of.f;
	int werr;
	if (cfg.csv) {
		werr = ht_timeline__csv(tl, f);
	} else if (cfg.json) {
		struct ht_json j;
		ht_json__init(&j, f, 1);
		ht_timeline__json(tl, &j, NULL);
		ht_json__finish(&j);
		werr = ferror(f) ? -1 : 0;
	} else {
		werr = ht_timeline__svg(tl, f, (unsigned)cfg.width, (unsigned)cfg.height);
	}
	if (to_stdout) {
		if (werr || fflush(stdout)) {
			/* (says why when it can: ENOSPC of /dev/full, EBADF) */
			if (ht_stdout_done(HT_EXIT_OK) == HT_EXIT_OK)
				ht_error("cannot write to standard output");
			goto cleanup;
		}
		f = NULL;
	} else {
		f = NULL;
		if (werr) {
			ht_error("cannot write %s: %m", out);
			goto cleanup;
		}
		if (ht_out__commit(&of, err, sizeof(err))) {
			ht_error("%s", err);
			goto cleanup;
		}
		uint64_t peak_ns;
		uint32_t short_tid;
		char b1[32], b2[32], b3[32], past[128] = "";
		uint64_t peak = ht_timeline__peak(tl, &peak_ns);
		uint64_t exact_to = ht_timeline__exact_to(tl, &short_tid);
		if (peak_ns > exact_to) /* (a peak where calls are missing: said so) */
			snprintf(past, sizeof(past),
				 ", where calls are missing (thread %u's events stop at %s)",
				 short_tid, ht_fmt_ns(b3, exact_to));
		if (!cfg.quiet) /* (as flamegraph -q and report -q) */
			fprintf(stderr,
				"heaptrail: wrote %s: %llu time bins; the live heap peaked at %s at "
				"%s%s%s\n",
				out, (unsigned long long)cfg.bins, ht_fmt_bytes(b1, peak),
				ht_fmt_ns(b2, peak_ns), from_s || to_s ? " in the range" : "", past);
	}
	ret = read_ret;
cleanup:
	ht_out__abort(&of);
	free(out);
	ht_timeline__delete(tl);
	ht_pass__delete(pass);
	ht_reader__close(r);
	return ret;
}
