/* heaptrail compact: shrink traces written raw by the recorder. */
#define _GNU_SOURCE
#include <stdio.h>

#include "builtin.h"
#include "common/options.h"
#include "common/util.h"
#include "trace/compact.h"

struct compact_config {
	int level; /* --level (3) */
	int quiet; /* -q */
};

int cmd_compact(int argc, char **argv)
{
	struct compact_config cfg = {.level = 3};
	const struct ht_option opts[] = {
		{'l', "level", HT_OPT_INT, &cfg.level, "N", "zstd level, 1..19 (3)"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no size report"},
		{0},
	};
	static const char usage_text[] =
		"usage: heaptrail compact [options] TRACE...\n"
		"\n"
		"Rewrites traces in place with each thread's events in large zstd\n"
		"chunks.  The recorder writes raw chunks, the cheapest thing for the\n"
		"traced program; 'heaptrail record' compacts when the program exits, so\n"
		"this is for traces recorded with LD_PRELOAD directly.\n"
		"\fEXAMPLES\n"
		"  LD_PRELOAD=.../libheaptrail.so HEAPTRAIL_OUT=app.ht ./app && heaptrail compact app.ht\n";
	int ret = HT_EXIT_USAGE;
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs < 1) {
		ht_error("no trace given; usage: heaptrail compact [--level N] TRACE...");
		goto cleanup;
	}
	if (cfg.level < 1 || cfg.level > 19) {
		ht_error("--level must be between 1 and 19");
		goto cleanup;
	}
	ret = HT_EXIT_OK;
	for (int i = 0; i < nargs; i++) {
		char err[512], a[32], b[32];
		struct ht_compact_result res;
		if (ht_trace__compact(argv[i], cfg.level, &res, err, sizeof(err)) < 0) {
			ht_error("%s", err);
			ret = HT_EXIT_DATA;
			continue;
		}
		if (!cfg.quiet)
			fprintf(stderr, "heaptrail: %s: %s -> %s, %llu events%s\n", argv[i],
				ht_fmt_bytes(a, res.in_bytes), ht_fmt_bytes(b, res.out_bytes),
				(unsigned long long)res.events,
				res.truncated ? " (the trace ends in a damaged chunk: kept what came before)" : "");
	}
cleanup:
	return ret;
}
