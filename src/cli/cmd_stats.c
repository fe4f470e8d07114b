/* heaptrail stats: the summary of a trace (the model: analyze/stats.c). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/pass.h"
#include "analyze/slices.h"
#include "analyze/stats.h"
#include "cli/builtin.h"
#include "common/json.h"
#include "common/options.h"
#include "common/util.h"

struct stats_config {
	int json;      /* --json */
	int quiet;     /* -q: no warnings about unclean traces */
};

int cmd_stats(int argc, char **argv)
{
	struct stats_config cfg = {0};
	const struct ht_option opts[] = {
		{0, "json", HT_OPT_FLAG, &cfg.json, NULL, "print JSON (for scripts)"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no warning for traces not closed cleanly or not in exact order"},
		HT_OPT_SLICES,
		{0},
	};
	static const char usage_text[] =
		"usage: heaptrail stats [options] TRACE\n"
		"\n"
		"Summarizes a trace: calls and bytes per function, peak live heap and\n"
		"when it happened, bytes still live at exit, size and lifetime\n"
		"histograms, threads, cross-thread frees, reallocs, heap-break growth and\n"
		"the program's own mmaps.  A long trace is read in time slices, one per\n"
		"CPU, and added up: the same figures as read serially (-j 1).\n"
		"\fEXAMPLES\n"
		"  heaptrail stats app.ht\n"
		"  heaptrail stats --json app.ht | jq .peak_live_bytes\n";
	int ret = HT_EXIT_USAGE;
	struct ht_reader *r = NULL;
	struct ht_stats *s = NULL;
	struct ht_pass *pass = NULL;
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs != 1) {
		ht_error("%s; usage: heaptrail stats [--json] TRACE", nargs ? "one trace at a time" : "no trace given");
		goto cleanup;
	}
	/* with threads to spare, in time slices (analyze/slices.h), else (or
	 * where the slices cannot give the serial reader's answer) serially */
	static const struct ht_pauses no_pauses;
	const struct ht_pauses *pauses = &no_pauses;
	if (ht_slices__wanted() > 1) {
		char err[1024];
		r = ht_reader__open_info(argv[0], err, sizeof(err));
		if (r && !(s = ht_slices__stats(argv[0], r))) {
			ht_reader__close(r);
			r = NULL;
		}
	}
	if (!s) {
		r = ht_analyze__open(argv[0]);
		if (!r) {
			ret = HT_EXIT_DATA;
			goto cleanup;
		}
		s = ht_stats__new(ht_reader__info(r));
		pass = ht_pass__new();
		ht_pass__check_order(pass, r);
		const struct ht_event *e;
		while ((e = ht_analyze__next_event(r)))
			ht_stats__event(s, e, ht_pass__event(pass, e));
		pauses = ht_pass__pauses(pass);
	}
	int complete = ht_reader__error(r) == NULL;
	if (cfg.json) {
		struct ht_json j;
		ht_json__init(&j, stdout, 1);
		ht_stats__json(s, &j, ht_reader__info(r), argv[0], complete);
		ht_json__finish(&j);
	} else {
		ht_stats__text(s, stdout, r, argv[0]);
	}
	fflush(stdout);
	ret = ht_analyze__finish_pass(r, argv[0], cfg.quiet, pauses);
cleanup:
	ht_pass__delete(pass); /* (before its reader: pass.h) */
	ht_reader__close(r);
	ht_stats__delete(s);
	return ret;
}
