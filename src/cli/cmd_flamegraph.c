/* heaptrail flamegraph: memory flame graphs from the stacks of a trace
 * (record --stacks), as folded stacks (flamegraph.pl, speedscope, inferno)
 * or as a self-contained interactive SVG (flamesvg.c: click to zoom,
 * search, tooltips with bytes and counts). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/blocks.h"
#include "analyze/flamegraph.h"
#include "analyze/flamesvg.h"
#include "analyze/stackstats.h"
#include "cli/builtin.h"
#include "common/options.h"
#include "common/outfile.h"
#include "common/util.h"

#define MAX_FRAMES 1024

/* One configuration per run; each default is labelled by its flag. */
struct fg_config {
	const char *out;       /* -o, --output (stdout; also -) */
	int folded;            /* --folded: text, not SVG */
	const char *metric;    /* --metric (allocated) */
	int reverse;           /* --reverse: callers of the allocating functions */
	uint64_t tid;          /* --thread (all) */
	const char *title;     /* --title, as given (the metric and the command) */
	uint64_t width;        /* --width (1200) */
	const char *sysroot;   /* --sysroot */
	const char *debug_dir; /* --debug-dir */
	int quiet;             /* -q: no progress line, no warnings about the trace's state */
};

enum metric {
	M_ALLOCATED = HT_FLAME_ALLOCATED,
	M_ALLOCATIONS = HT_FLAME_ALLOCATIONS,
	M_LEAKED = HT_FLAME_LEAKED,
	M_PEAK = HT_FLAME_PEAK,
	M_TEMPORARY = HT_FLAME_TEMPORARY,
};

static const struct {
	const char *name;  /* as --metric takes it */
	const char *unit;  /* of the values */
	const char *title; /* default title */
} metrics[] = {
	[M_ALLOCATED] = {"allocated", "bytes", "Bytes allocated"},
	[M_ALLOCATIONS] = {"allocations", "allocations", "Allocation calls"},
	[M_LEAKED] = {"leaked", "bytes", "Bytes never freed"},
	[M_PEAK] = {"peak", "bytes", "Bytes live at the peak of the heap"},
	[M_TEMPORARY] = {"temporary", "allocations", "Temporary allocations (freed before the thread's next allocation or free)"},
};

static const char usage_text[] =
	"usage: heaptrail flamegraph [options] TRACE\n"
	"\n"
	"A flame graph of where memory is allocated, from a trace recorded with\n"
	"--stacks: an interactive SVG (click a frame to zoom, Search to highlight,\n"
	"hover for bytes and counts), or folded stacks for flamegraph.pl,\n"
	"speedscope and inferno.\n"
	"\n"
	"Metrics: allocated (bytes, every allocation), allocations (calls),\n"
	"leaked (bytes never freed), peak (bytes live when the heap peaked),\n"
	"temporary (allocations freed before their thread's next allocation or free).\n"
	HT_HELP_PERF_MAP
	"\fEXAMPLES\n"
	"  heaptrail flamegraph -o alloc.svg app.ht\n"
	"  heaptrail flamegraph -o leaks.svg --metric leaked app.ht\n"
	"  heaptrail flamegraph --folded --metric allocated app.ht > app.folded\n"
	"  heaptrail flamegraph --reverse --metric peak -o peak-callers.svg app.ht\n";

int cmd_flamegraph(int argc, char **argv)
{
	struct fg_config cfg = {.metric = "allocated", .width = 1200};
	const struct ht_option opts[] = {
		{'o', "output", HT_OPT_STRING, &cfg.out, "FILE", "write here, - for standard output (standard output); NAME.folded or NAME.txt: folded stacks"},
		{0, "folded", HT_OPT_FLAG, &cfg.folded, NULL, "folded stacks, one 'a;b;c VALUE' line each, not SVG"},
		{'m', "metric", HT_OPT_STRING, &cfg.metric, "METRIC", "allocated, allocations, leaked, peak or temporary (allocated)"},
		{0, "reverse", HT_OPT_FLAG, &cfg.reverse, NULL, "the allocating functions at the root, their callers above"},
		{0, "thread", HT_OPT_U64, &cfg.tid, "TID", "only blocks this thread allocated (all)"},
		{0, "title", HT_OPT_STRING, &cfg.title, "TEXT", "the SVG's title, as given (the metric and the command)"},
		{0, "width", HT_OPT_U64, &cfg.width, "PIXELS", "the SVG's width (1200)"},
		{0, "sysroot", HT_OPT_STRING, &cfg.sysroot, "DIR", "find the traced modules under DIR"},
		{0, "debug-dir", HT_OPT_STRING, &cfg.debug_dir, "DIR", "also look for separate debug files in DIR"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no progress line, no warning for traces not closed cleanly, not in exact order or without stacks"},
		HT_OPT_THREADS,
		{0},
	};
	int ret = HT_EXIT_USAGE;
	struct ht_reader *r = NULL;
	struct ht_symbolizer *sym = NULL;
	struct ht_flame_stack *fl = NULL;
	size_t nfl = 0;
	FILE *out = stdout;
	struct ht_out of = {.fd = -1, .slot = -1};
	char err[1024];
	struct ht_stackstats ss;
	memset(&ss, 0, sizeof(ss));
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs != 1) {
		ht_error("%s; usage: heaptrail flamegraph [options] TRACE",
			 nargs ? "one trace at a time" : "no trace given");
		goto cleanup;
	}
	int m = -1;
	for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++)
		if (!strcmp(cfg.metric, metrics[i].name))
			m = (int)i;
	if (m < 0) {
		ht_error("--metric=%s: expected allocated, allocations, leaked, peak or temporary",
			 cfg.metric);
		goto cleanup;
	}
	if (cfg.width < 100 || cfg.width > 100000) {
		ht_error("--width=%llu: expected 100 to 100000 pixels", (unsigned long long)cfg.width);
		goto cleanup;
	}
	int to_stdout = !cfg.out || !strcmp(cfg.out, "-");
	/* -o NAME.folded or NAME.txt: folded stacks, as the name says (an
	 * SVG went into app.folded, probe V) */
	if (ht_out__named(cfg.out, ".folded") || ht_out__named(cfg.out, ".txt"))
		cfg.folded = 1;
	/* a directory or a symlink at the output, or a directory where no
	 * file can be made, is said now, not after the whole trace is read */
	if (!to_stdout && ht_out__check(cfg.out, err, sizeof(err))) {
		ht_error("%s", err);
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	ht_blocks__symbols_ahead(cfg.sysroot, cfg.debug_dir);
	ret = ht_stackstats__collect(argv[0], (uint32_t)cfg.tid, &ss, &r);
	if (!r)
		goto cleanup;
	if (ht_stackstats__thread_missing(&ss, argv[0])) {
		ret = HT_EXIT_USAGE;
		goto cleanup;
	}
	sym = ht_blocks__symbolizer(r, cfg.sysroot, cfg.debug_dir);
	if (!sym) {
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	fl = ht_flamegraph__fold(r, sym, &ss, m, cfg.reverse, &nfl);
	if (ht_out__open(&of, cfg.out, HT_OUT_PUBLIC, HT_OUT_STDOUT | HT_OUT_DASH, err,
			 sizeof(err))) {
		ht_error("%s", err);
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	out = of.f;
	int drawn = -1; /* frames in the SVG */
	if (cfg.folded) {
		for (size_t i = 0; i < nfl; i++)
			fprintf(out, "%s %llu\n", fl[i].stack, (unsigned long long)fl[i].value);
	} else {
		/* --title is the title as given, as in diff (the metric and the
		 * command were added to it) */
		char title[512];
		const struct ht_trace_info *in = ht_reader__info(r);
		snprintf(title, sizeof(title), "%s%s: %s", metrics[m].title,
			 cfg.reverse ? " (callers)" : "", in->cmdline ? in->cmdline : "");
		struct ht_flame_style style = {.title = cfg.title ? cfg.title : title,
					       .unit = metrics[m].unit, .width = cfg.width};
		drawn = ht_flame__svg(out, fl, nfl, &style);
	}
	/* Blocks without a stack are drawn as "[no stack]": stacks missing
	 * never leave a graph empty.  It is empty when nothing was allocated
	 * (a trace has no stack nodes then, --stacks or not: the format keeps
	 * no flag of it, so "record with --stacks" was wrong advice) or
	 * nothing had the metric's value (nothing leaked). */
	uint64_t allocs = 0;
	for (size_t i = 0; i < ss.cap; i++)
		allocs += ss.slots[i].node ? ss.slots[i].alloc_calls : 0;
	char why[64] = "";
	if (!allocs && cfg.tid)
		snprintf(why, sizeof(why), " (thread %llu allocated nothing)",
			 (unsigned long long)cfg.tid);
	else if (!allocs)
		snprintf(why, sizeof(why), " (the trace has no allocation)");
	if (!nfl)
		ht_warning("%s: nothing to show for --metric=%s%s", argv[0], metrics[m].name, why);
	else if (!ht_reader__nnodes(r) && !ht_quiet) /* (as export -f pprof says it) */
		ht_warning("%s has no stacks: one frame \"[no stack]\" (record with --stacks to see "
			   "where memory is allocated)",
			   argv[0]);
	/* a failed write (ferror) is said by the commit, with its reason:
	 * "cannot write FILE: No space left on device" */
	if (ht_out__commit(&of, err, sizeof(err))) {
		ht_error("%s", err);
		ret = HT_EXIT_DATA;
	} else if (drawn >= 0 && !to_stdout && !cfg.quiet) {
		/* (only once the file is in place: a failed commit wrote nothing) */
		fprintf(stderr, "heaptrail: wrote %s: %d frame%s from %zu stack%s\n", cfg.out, drawn,
			ht_s((uint64_t)drawn), nfl, ht_s(nfl));
	}
cleanup:
	ht_out__abort(&of);
	for (size_t i = 0; i < nfl; i++)
		free(fl[i].stack);
	free(fl);
	ht_symbolizer__free(sym);
	ht_reader__close(r);
	ht_stackstats__free(&ss);
	return ret;
}
