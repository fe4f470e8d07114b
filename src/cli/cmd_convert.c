/* heaptrail convert (trace2wl): a trace becomes a workload (workload.h,
 * docs/WORKLOAD.md); the conversion itself is in converter.c. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "analyze/analyze.h"
#include "cli/builtin.h"
#include "common/json.h"
#include "common/options.h"
#include "common/outfile.h"
#include "common/util.h"
#include "replay/converter.h"
#include "replay/workload.h"

struct convert_config {
	int mmap;  /* --mmap: the program's own anonymous mmaps too */
	int json;  /* --json: the summary as JSON */
	int quiet; /* -q: no warnings, and no text summary (the JSON stays) */
	int force; /* --force: replace a file that is not a workload */
};

static void print_summary(const struct ht_convert_summary *c, const char *out, const char *in,
			  const struct ht_trace_info *info, int json)
{
	uint64_t nops = c->ops, ncalls = c->ncalls;
	if (json) {
		struct ht_json j;
		ht_json__init(&j, stdout, 1);
		ht_json__obj_begin(&j, NULL);
		ht_json__str(&j, "workload", out);
		ht_json__str(&j, "trace", in);
		ht_json__u64(&j, "threads", c->threads);
		ht_json__u64(&j, "ops", nops);
		ht_json__u64(&j, "slots", c->slots);
		ht_json__u64(&j, "max_ideal_rss_bytes", c->peak);
		ht_json__obj_begin(&j, "calls");
		for (int i = 0; i < HT_FN_NR; i++)
			if (c->calls[i])
				ht_json__u64(&j, ht_wl_fn_names[i], c->calls[i]);
		ht_json__obj_end(&j);
		ht_json__u64(&j, "waits", c->waits);
		ht_json__u64(&j, "live_waits", c->sync_waits);
		ht_json__u64(&j, "spawns", c->spawns);
		ht_json__u64(&j, "skipped_frees", c->skipped_frees);
		ht_json__u64(&j, "skipped_reallocs", c->skipped_reallocs);
		ht_json__u64(&j, "skipped_maps", c->skipped_maps);
		ht_json__u64(&j, "failed_maps", c->failed_maps);
		ht_json__u64(&j, "inversions", c->inversions);
		ht_analyze__order_json(&j, &info->order);
		ht_json__u64(&j, "source_pid", (uint64_t)info->pid);
		ht_json__obj_end(&j);
		ht_json__finish(&j);
		return;
	}
	char b1[32];
	printf("%s: %u thread%s, %" PRIu64 " op%s (%" PRIu64 " call%s, %" PRIu64 " wait%s), %" PRIu64
	       " slot%s, ideal peak %s\n",
	       out, c->threads, ht_s(c->threads), nops, ht_s(nops), ncalls, ht_s(ncalls), c->waits,
	       ht_s(c->waits), c->slots, ht_s(c->slots), ht_fmt_bytes(b1, c->peak));
	/* (of a trace still being written, or cut, the allocations are more
	 * likely missing from it: it blamed the recording's start, probe R) */
	const char *cause =
	    info->being_written ? "the trace is still being written: their allocations may not be "
				  "in it yet; convert it when the program has ended"
	    : !info->closed || info->events_chunks < info->events_hdr
		? "the trace is cut short or was not closed cleanly: their allocations may be "
		  "missing from it, or came before recording began"
		: "blocks allocated before recording began";
	if (c->skipped_frees || c->skipped_reallocs)
		printf("skipped %" PRIu64 " free%s and %" PRIu64
		       " realloc%s of addresses not live (%s)\n",
		       c->skipped_frees, c->skipped_frees == 1 ? "" : "s", c->skipped_reallocs,
		       c->skipped_reallocs == 1 ? "" : "s", cause);
	if (c->skipped_maps)
		printf("skipped %" PRIu64 " mmap/munmap/mremap call%s on file, shared or foreign maps\n",
		       c->skipped_maps, c->skipped_maps == 1 ? "" : "s");
}

int cmd_convert(int argc, char **argv)
{
	struct convert_config cfg = {0};
	const char *out_opt = NULL;
	const struct ht_option opts[] = {
		{'o', "output", HT_OPT_STRING, &out_opt, "OUT.wl",
		 "the workload to write (or as the first argument)"},
		{0, "mmap", HT_OPT_FLAG, &cfg.mmap, NULL,
		 "also replay the program's own anonymous mmap/munmap/mremap calls"},
		{0, "json", HT_OPT_FLAG, &cfg.json, NULL, "print the summary as JSON"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL,
		 "no warnings about the trace, no text summary (--json still prints)"},
		{'f', "force", HT_OPT_FLAG, &cfg.force, NULL,
		 "replace OUT.wl even if it is a file other than a workload"},
		HT_OPT_THREADS,
		{0},
	};
	static const char usage_text[] =
		"usage: heaptrail convert [options] OUT.wl TRACE\n"
		"       heaptrail convert [options] -o OUT.wl TRACE\n"
		"       trace2wl OUT.wl TRACE\n"
		"\n"
		"Turns a trace into a workload for 'heaptrail replay': one op stream per\n"
		"thread over dense pointer slots, with a wait wherever a thread uses a\n"
		"block another thread allocated or reuses a slot another thread freed.\n"
		"Frees and reallocs of blocks allocated before recording began are\n"
		"skipped and counted.  The trace is streamed: memory follows the live set.\n"
		"\fEXAMPLES\n"
		"  heaptrail convert app.wl app.ht\n"
		"  heaptrail convert --mmap app.wl app.ht && heaptrail replay app.wl\n"
		"  heaptrail convert --json -q app.wl app.ht | jq .ops\n";
	int ret = HT_EXIT_USAGE;
	struct ht_reader *r = NULL;
	struct ht_convert_summary sum;
	char err[1024];
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	/* -o OUT.wl, as every other command that writes a file takes it
	 * (probe V: "unknown option '-o'") */
	int want = out_opt ? 1 : 2;
	if (nargs != want) {
		ht_error("%s; usage: heaptrail convert [options] OUT.wl TRACE",
			 nargs < want ? (out_opt ? "need a trace" : "need an output workload and a trace")
				      : "too many arguments");
		goto cleanup;
	}
	const char *out = out_opt ? out_opt : argv[0], *in = argv[nargs - 1];
	if (!strcmp(out, "-")) {
		/* (it was written to a file named "-": probe V) */
		ht_error("convert writes its workload to a file, not to standard output: name one "
			 "(OUT.wl)");
		goto cleanup;
	}
	/* what is at the output's path: a trace (the arguments swapped?) is
	 * never replaced; another file that is not a workload (a typo for some
	 * other name) only with --force */
	struct stat st;
	FILE *probe = lstat(out, &st) == 0 && S_ISREG(st.st_mode) ? fopen(out, "rb") : NULL;
	if (probe) {
		char magic[8] = {0};
		size_t got = fread(magic, 1, 8, probe);
		fclose(probe);
		if (got == 8 && !memcmp(magic, "HEAPTRL", 8)) {
			ht_error("%s is a trace; the workload comes first: heaptrail convert OUT.wl %s", out,
				 out);
			goto cleanup;
		}
		if (st.st_size && (got < 8 || memcmp(magic, HT_WL_MAGIC, 8)) && !cfg.force) {
			ht_error("%s exists and is not a workload, which convert would replace: "
				 "choose another path, or pass --force to replace it",
				 out);
			goto cleanup;
		}
	}
	ret = HT_EXIT_DATA;
	/* a directory at the output (convert . T) failed the rename only
	 * after the whole trace was converted: said now */
	if (ht_out__check_data(out, err, sizeof(err))) {
		ht_error("%s", err);
		goto cleanup;
	}
	r = ht_analyze__open(in);
	if (!r)
		goto cleanup;
	struct ht_convert_opts co = {.mmap = cfg.mmap, .progress = 1};
	if (ht_convert__run(r, in, out, &co, &sum, err, sizeof(err))) {
		ht_error("%s", err);
		goto cleanup;
	}
	if (!cfg.quiet || cfg.json)
		print_summary(&sum, out, in, ht_reader__info(r), cfg.json);
	ret = ht_analyze__finish(r, in, cfg.quiet);
	/* after the reader's line on the order (ht_analyze__order_warning):
	 * what it did to the workload */
	if (!ht_reader__info(r)->order.exact && !cfg.quiet)
		ht_warning("%s: the workload follows that order: %" PRIu64 " frees or reallocs of "
			   "addresses not live skipped, %" PRIu64 " addresses handed out while live; "
			   "%s",
			   in, sum.skipped_frees + sum.skipped_reallocs, sum.inversions,
			   ht_reader__info(r)->being_written
				   ? "the trace is still being written: convert it again once the "
				     "recording has ended"
				   : "for an exact workload record the program again with this "
				     "heaptrail, or with --timestamp-every=1 (docs/FORMAT.md, "
				     "\"Ordering guarantee\")");
cleanup:
	ht_reader__close(r);
	return ret;
}
