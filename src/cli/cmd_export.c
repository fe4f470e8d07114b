/* heaptrail export: a trace in the formats other tools read: pprof
 * (go tool pprof, pprof's web view), Chrome/Perfetto trace JSON
 * (ui.perfetto.dev, chrome://tracing), massif (ms_print,
 * massif-visualizer) and CSV.  The renderers are export_<format>.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/export.h"
#include "cli/builtin.h"
#include "common/options.h"
#include "common/outfile.h"
#include "common/util.h"

/* One configuration per run; each default is labelled by its flag. */
struct export_config {
	const char *format;    /* --format (none: required) */
	const char *out;       /* -o, --output (stdout; also -) */
	const char *threshold; /* --threshold (1.0) */
	struct ht_export_opts o; /* the renderers' options, defaults below */
	int quiet;             /* -q: no progress line, no warnings about the trace's state */
};

static const char usage_text[] =
	"usage: heaptrail export --format pprof|perfetto|massif|csv [-o FILE] TRACE\n"
	"\n"
	"Writes the trace in a format other tools read:\n"
	"  pprof     gzipped profile.proto: alloc_objects, alloc_space, inuse_objects,\n"
	"            inuse_space per stack (record --stacks), for go tool pprof\n"
	"  perfetto  Chrome trace JSON: threads as tracks, counters for the live heap\n"
	"            and RSS, markers and big allocations as instants; for\n"
	"            ui.perfetto.dev and chrome://tracing\n"
	"  massif    valgrind massif's out file: snapshots over time, the peak, trees\n"
	"            of allocation sites; for ms_print and massif-visualizer\n"
	"  csv       one row per event, a column per argument\n"
	"The output file appears only once complete.\n"
	"\fEXAMPLES\n"
	"  heaptrail export --format pprof -o app.pb.gz app.ht && go tool pprof -top app.pb.gz\n"
	"  go tool pprof -http=:8080 app.pb.gz\n"
	"  heaptrail export --format perfetto -o app.json app.ht     # open in ui.perfetto.dev\n"
	"  heaptrail export --format massif -o massif.out.app app.ht && ms_print massif.out.app\n"
	"  heaptrail export --format csv app.ht | head\n";

static const char *const formats[] = {"pprof", "perfetto", "massif", "csv"};
static int (*const renderers[])(const struct ht_export_opts *, FILE *) = {
	ht_export__pprof, ht_export__perfetto, ht_export__massif, ht_export__csv};

int cmd_export(int argc, char **argv)
{
	struct export_config cfg = {
		.o = {.max_points = 2000, .big = 1 << 20, .snapshots = 50, .time_unit = "B",
		      .threshold = 1.0, .depth = 30, .detailed_freq = 10},
	};
	const struct ht_option opts[] = {
		{'f', "format", HT_OPT_STRING, &cfg.format, "FORMAT", "pprof, perfetto, massif or csv (required)"},
		{'o', "output", HT_OPT_STRING, &cfg.out, "FILE", "write here, - for standard output (standard output)"},
		{0, "at-peak", HT_OPT_FLAG, &cfg.o.at_peak, NULL, "pprof: inuse_* at the peak of the heap (at the end)"},
		{0, "max-points", HT_OPT_U64, &cfg.o.max_points, "N", "perfetto: at most N points per counter (2000)"},
		{0, "big", HT_OPT_SIZE, &cfg.o.big, "SIZE", "perfetto: an instant for each allocation of SIZE or more, 0 for none (1M)"},
		{0, "all-events", HT_OPT_FLAG, &cfg.o.all_events, NULL, "perfetto: every call as an instant on its thread (big)"},
		{0, "snapshots", HT_OPT_U64, &cfg.o.snapshots, "N", "massif: about N snapshots at regular times (2 or more), and the peak (50)"},
		{0, "time-unit", HT_OPT_STRING, &cfg.o.time_unit, "UNIT", "massif: B (bytes allocated and freed), ms, or i (heap calls) (B)"},
		{0, "detailed-freq", HT_OPT_U64, &cfg.o.detailed_freq, "N", "massif: every Nth snapshot with its tree, 0 for none (10)"},
		{0, "threshold", HT_OPT_STRING, &cfg.threshold, "PCT", "massif: sites below PCT% of the heap are summed up (1.0)"},
		{0, "depth", HT_OPT_U64, &cfg.o.depth, "N", "massif: frames per tree, 1 or more (30)"},
		{0, "sysroot", HT_OPT_STRING, &cfg.o.sysroot, "DIR", "find the traced modules under DIR"},
		{0, "debug-dir", HT_OPT_STRING, &cfg.o.debug_dir, "DIR", "also look for separate debug files in DIR"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no progress line, no warning for traces not closed cleanly, not in exact order or without stacks"},
		HT_OPT_THREADS,
		{0},
	};
	int ret = HT_EXIT_USAGE;
	struct ht_out out = {.f = NULL, .fd = -1, .slot = -1};
	char err[1024];
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs != 1) {
		ht_error("%s; usage: heaptrail export --format FORMAT [-o FILE] TRACE",
			 nargs ? "one trace at a time" : "no trace given");
		goto cleanup;
	}
	cfg.o.trace = argv[0];
	size_t fmt = 0, nfmt = sizeof(formats) / sizeof(formats[0]);
	while (cfg.format && fmt < nfmt && strcmp(cfg.format, formats[fmt]))
		fmt++;
	if (!cfg.format || fmt == nfmt) {
		ht_error("%s%s: expected --format pprof, perfetto, massif or csv",
			 cfg.format ? "unknown format " : "no --format given",
			 cfg.format ? cfg.format : "");
		goto cleanup;
	}
	/* an option of another format would be ignored: said, as diff says
	 * its conflicts (a value different from the default counts as given) */
	const char *other = NULL;
	if (fmt != 0 && cfg.o.at_peak)
		other = "--at-peak is pprof's";
	else if (fmt != 1 && (cfg.o.max_points != 2000 || cfg.o.big != 1 << 20 || cfg.o.all_events))
		other = "--max-points, --big and --all-events are perfetto's";
	else if (fmt != 2 && (cfg.o.snapshots != 50 || strcmp(cfg.o.time_unit, "B") ||
			      cfg.o.detailed_freq != 10 || cfg.threshold || cfg.o.depth != 30))
		other = "--snapshots, --time-unit, --detailed-freq, --threshold and --depth are "
			"massif's";
	if (other) {
		ht_error("--format %s: %s, not this format's", formats[fmt], other);
		goto cleanup;
	}
	const char *tu = cfg.o.time_unit;
	if (strcmp(tu, "B") && strcmp(tu, "ms") && strcmp(tu, "i")) {
		ht_error("--time-unit=%s: expected B, ms or i", tu);
		goto cleanup;
	}
	if (cfg.threshold) {
		char *end;
		cfg.o.threshold = strtod(cfg.threshold, &end);
		/* (nan compares false both ways: refused by isfinite) */
		if (end == cfg.threshold || *end || !isfinite(cfg.o.threshold) ||
		    cfg.o.threshold < 0 || cfg.o.threshold > 100) {
			ht_error("--threshold=%s: expected a percentage from 0 to 100", cfg.threshold);
			goto cleanup;
		}
	}
	if (cfg.o.snapshots < 2) {
		ht_error("--snapshots=%llu: the first is at time 0 and the last at the end; "
			 "expected 2 or more",
			 (unsigned long long)cfg.o.snapshots);
		goto cleanup;
	}
	if (!cfg.o.depth) {
		ht_error("--depth=0: a tree shows at least one frame per site; expected 1 or more");
		goto cleanup;
	}
	if (cfg.o.max_points < 4) {
		ht_error("--max-points=%llu: expected 4 or more", (unsigned long long)cfg.o.max_points);
		goto cleanup;
	}
	int to_stdout = !cfg.out || !strcmp(cfg.out, "-");
	if (to_stdout && fmt == 0 && isatty(STDOUT_FILENO)) {
		ht_error("a pprof profile is binary: give -o FILE (or redirect the output)");
		goto cleanup;
	}
	if (access(argv[0], R_OK) != 0) { /* before an output file is made */
		ht_open_error(err, sizeof(err), argv[0], errno, "trace");
		ht_error("%s", err);
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	/* a directory at the output (-o .) would fail the rename only after
	 * the whole trace was read: said now, in the words of the others */
	if (!to_stdout && ht_out__check(cfg.out, err, sizeof(err))) {
		ht_error("%s", err);
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	/* private: the rows, stacks and tracks carry the program's addresses */
	if (ht_out__open(&out, cfg.out, HT_OUT_PRIVATE, HT_OUT_STDOUT | HT_OUT_DASH, err,
			 sizeof(err))) {
		ht_error("%s", err);
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	ret = renderers[fmt](&cfg.o, out.f);
	/* a damaged trace: the output covers the events before the damage (as
	 * the other analyzers' results do), kept, and the exit status says so */
	int damaged = ret == HT_EXPORT_DAMAGED;
	if (damaged)
		ret = HT_EXIT_OK;
	if (!ret && ht_out__commit(&out, err, sizeof(err))) {
		ht_error("%s", err);
		ret = HT_EXIT_DATA;
	}
	if (!ret && damaged)
		ret = HT_EXIT_DATA;
cleanup:
	ht_out__abort(&out);
	return ret;
}
