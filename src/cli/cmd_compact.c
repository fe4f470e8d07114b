/* heaptrail compact: shrink traces: column coding and large zstd chunks, or
 * (--fast) only the chunks the recorder wrote raw compressed. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>

#include "cli/builtin.h"
#include "common/options.h"
#include "common/util.h"
#include "trace/compact.h"

struct compact_config {
	int level; /* --level (3; --fast: 1) */
	int fast;  /* --fast */
	int quiet; /* -q */
};

int cmd_compact(int argc, char **argv)
{
	struct compact_config cfg = {.level = INT_MIN}; /* (unset: 0 is a level, refused) */
	const struct ht_option opts[] = {
		{'l', "level", HT_OPT_INT, &cfg.level, "N",
		 "zstd level, 1..19 (3); with --fast, -7..19: zstd at that level in place of Huffman coding alone"},
		{0, "fast", HT_OPT_FLAG, &cfg.fast, NULL,
		 "only code the chunks the recorder wrote raw, Huffman alone, on every CPU (what record does at the end)"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no size report"},
		{0},
	};
	static const char usage_text[] =
		"usage: heaptrail compact [options] TRACE...\n"
		"\n"
		"Rewrites traces in place with each thread's events column-coded in large\n"
		"zstd chunks: about half the size of what 'heaptrail record' leaves (the\n"
		"recorder compresses each 64 KiB chunk as it goes, and record compresses\n"
		"those it wrote raw when the program ends), at ~70 ns an event.\n"
		"'heaptrail record --compact' does it when the program ends.  --fast does\n"
		"only record's end step, for traces recorded with LD_PRELOAD directly; it\n"
		"leaves a trace not closed cleanly, or damaged, as it was (exit status 1).\n"
		"\fEXAMPLES\n"
		"  LD_PRELOAD=.../libheaptrail.so HEAPTRAIL_OUT=app.ht ./app && heaptrail compact app.ht\n";
	int ret = HT_EXIT_USAGE;
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs < 1) {
		ht_error("no trace given; usage: heaptrail compact [--level N] TRACE...");
		goto cleanup;
	}
	int huffman = cfg.fast && cfg.level == INT_MIN; /* record's end step */
	if (cfg.level == INT_MIN)
		cfg.level = cfg.fast ? 1 : 3;
	if (cfg.level < (cfg.fast ? -7 : 1) || cfg.level > 19 || (cfg.fast && cfg.level == 0)) {
		ht_error("--level must be between 1 and 19 (with --fast: -7..19 but 0)");
		goto cleanup;
	}
	ret = HT_EXIT_OK;
	for (int i = 0; i < nargs; i++) {
		char err[512], a[32], b[32];
		struct ht_compact_result res;
		int r = cfg.fast
			    ? ht_trace__finish(argv[i], huffman ? HT_FINISH_HUFFMAN : cfg.level,
					       &res, err, sizeof(err))
			    : ht_trace__compact(argv[i], cfg.level, &res, err, sizeof(err));
		if (r < 0) {
			ht_error("%s", err);
			ret = HT_EXIT_DATA;
			continue;
		}
		if (res.untouched) {
			/* --fast repairs nothing: said, and an error, since the
			 * trace is not what --fast makes (-q or not) */
			ht_error("%s: left as it was: %s; 'heaptrail stats %s' says what it holds, "
				 "'heaptrail compact %s' rewrites what can be read of it",
				 argv[i], res.untouched, argv[i], argv[i]);
			ret = HT_EXIT_DATA;
			continue;
		}
		char bad[160] = "";
		if (res.bad_chunks)
			snprintf(bad, sizeof(bad),
				 " (%llu damaged chunk%s, the first of thread %u, copied as %s: "
				 "readers stop that thread there, as before)",
				 (unsigned long long)res.bad_chunks, res.bad_chunks == 1 ? "" : "s",
				 res.bad_tid, res.bad_chunks == 1 ? "it is" : "they are");
		if (!cfg.quiet && cfg.fast && !res.rewritten)
			/* (it printed "78.4 MiB -> 78.4 MiB" as if it had
			 * rewritten it, probe O) */
			fprintf(
			    stderr,
			    "heaptrail: %s: nothing to compress (no chunk was written raw): left "
			    "as it is, %s, %llu events\n",
			    argv[i], ht_fmt_bytes(a, res.in_bytes), (unsigned long long)res.events);
		else if (!cfg.quiet)
			fprintf(stderr, "heaptrail: %s: %s -> %s, %llu events%s%s\n", argv[i],
				ht_fmt_bytes(a, res.in_bytes), ht_fmt_bytes(b, res.out_bytes),
				(unsigned long long)res.events,
				res.truncated ? " (the trace ends in a damaged chunk: kept what came before)" : "",
				bad);
	}
cleanup:
	return ret;
}
