/* heaptrail heap: what SystemTap's malloc script shows from glibc's static
 * probes, from the trace alone: the arenas and the threads that used them,
 * each heap of the other arenas and its size over time, the main heap's
 * sbrk total, the mmap/trim thresholds as glibc moves them, calls that
 * waited (lock waits), and an end-of-run summary with fragmentation.  The
 * analysis is src/analyze/heapinfo.c, shared with the HTML report. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/heapinfo.h"
#include "analyze/pass.h"
#include "cli/builtin.h"
#include "common/json.h"
#include "common/options.h"
#include "common/util.h"

/* One configuration per run; each default is labelled by its flag. */
struct heap_config {
	int json;      /* --json */
	int html;      /* --html */
	uint64_t from; /* --from (0): report from this time, ns since the start */
	uint64_t to;   /* --to (the end: UINT64_MAX; 0 is a time): and up to this time */
	int quiet;             /* -q: no progress line, no warnings about the trace's state */
};

static const char usage_text[] =
	"usage: heaptrail heap [options] TRACE\n"
	"\n"
	"glibc's heap as the trace shows it, like the SystemTap malloc script on\n"
	"glibc's probes but with no probes: each arena and the threads that used\n"
	"it (first and last allocation), each heap of the other arenas and its\n"
	"size over time, the main heap's sbrk total, every change of the mmap and\n"
	"trim thresholds (\"New thresholds:: mmap: X bytes, trim: Y bytes\") with\n"
	"its cause, calls far slower than their peers (lock waits; record with\n"
	"--durations to time every call), and a summary with fragmentation.\n"
	"\fEXAMPLES\n"
	"  heaptrail record --durations -o app.ht -- ./app && heaptrail heap app.ht\n"
	"  heaptrail heap --json app.ht | jq '.arenas[] | {arena, threads}'\n"
	"  heaptrail heap --json app.ht | jq -c '.thresholds[] | [.mmap, .trim]'\n"
	"  heaptrail heap --from 2s --to 3s app.ht\n"
	"  heaptrail heap --html app.ht > heap.html   # a fragment: table and SVG\n";

int cmd_heap(int argc, char **argv)
{
	struct heap_config cfg = {.to = UINT64_MAX};
	const struct ht_option opts[] = {
		{0, "json", HT_OPT_FLAG, &cfg.json, NULL, "JSON: arenas, heaps, main_heap, sbrk_bytes, thresholds, lock_waits, summary"},
		{0, "html", HT_OPT_FLAG, &cfg.html, NULL, "an HTML fragment: the arena table and an SVG of the heap sizes"},
		{0, "from", HT_OPT_DURATION, &cfg.from, "TIME", "report what happens from this time since the start (0)"},
		{0, "to", HT_OPT_DURATION, &cfg.to, "TIME", "up to this time (the end)"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no progress line, no warning for traces not closed cleanly or not in exact order"},
		HT_OPT_THREADS,
		{0},
	};
	int ret = HT_EXIT_USAGE;
	struct ht_reader *r = NULL;
	struct ht_heapinfo *h = NULL;
	struct ht_pass *pass = NULL;
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs != 1) {
		ht_error("%s; usage: heaptrail heap [options] TRACE",
			 nargs ? "one trace at a time" : "no trace given");
		goto cleanup;
	}
	if (cfg.json && cfg.html) {
		ht_error("--json and --html: choose one");
		goto cleanup;
	}
	if (cfg.to < cfg.from) {
		ht_error("--to must come after --from"); /* (one wording for all: probe V) */
		goto cleanup;
	}
	/* (as events and timeline: --to 0 was taken for no --to, the whole
	 * trace, with no window named) */
	if (cfg.to <= cfg.from) {
		ht_error("--to must come after --from");
		goto cleanup;
	}
	r = ht_analyze__open(argv[0]);
	if (!r) {
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	if (ht_analyze__from_past_end(ht_reader__info(r), cfg.from, argv[0]))
		goto cleanup; /* (exit 2, as timeline) */
	const char *other = ht_reader__info(r)->allocator;
	if (other) {
		ht_error("%s: the program's malloc was not glibc's but that of %s: 'heap' shows glibc's "
			 "arenas, heaps and thresholds, which that allocator does not have; 'stats', "
			 "'timeline', 'top' and 'leaks' show its blocks",
			 argv[0], other);
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	h = ht_heapinfo__new(r);
	if (!h) {
		ht_error("out of memory");
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	ht_heapinfo__window(h, cfg.from, cfg.to);
	pass = ht_pass__new();
	ht_pass__check_order(pass, r);
	const struct ht_event *e;
	while ((e = ht_analyze__next_event(r))) {
		if (e->time_ns > cfg.to)
			break;
		ht_heapinfo__event(h, e, ht_pass__event(pass, e));
	}
	ht_heapinfo__finish(h, r);
	if (cfg.json) {
		struct ht_json j;
		ht_json__init(&j, stdout, 1);
		ht_json__obj_begin(&j, NULL);
		ht_json__str(&j, "trace", argv[0]);
		struct ht_order_info order;
		ht_reader__order(r, &order); /* (--to stops reading early) */
		ht_analyze__order_json(&j, &order);
		ht_analyze__sample_json(&j, ht_reader__info(r));
		ht_heapinfo__json(h, &j);
		ht_json__obj_end(&j);
		ht_json__finish(&j);
	} else if (cfg.html) {
		ht_heapinfo__html(h, stdout);
	} else {
		ht_heapinfo__text(h, stdout);
	}
	fflush(stdout);
	ret = ht_analyze__finish_pass(r, argv[0], 0, ht_pass__pauses(pass));
cleanup:
	ht_heapinfo__delete(h);
	ht_pass__delete(pass);
	ht_reader__close(r);
	return ret;
}
