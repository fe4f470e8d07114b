/* heaptrail top: the biggest contributors, from a trace recorded with
 * --stacks: what held the most memory at the peak of the heap, what
 * allocates most often, what allocates only to free at once, and the
 * biggest single allocations; by stack or by allocating function. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/blocks.h"
#include "analyze/stackstats.h"
#include "cli/builtin.h"
#include "common/json.h"
#include "common/options.h"
#include "common/util.h"

#define MAX_FRAMES 1024

/* One configuration per run; each default is labelled by its flag. */
struct top_config {
	uint64_t top;          /* -n, --top (10): entries per table, 0 = all */
	const char *by;        /* --by (stack): stack or function */
	uint64_t depth;        /* --depth (3): frames shown per entry */
	uint64_t tid;          /* --thread (all) */
	int json;              /* --json */
	const char *sysroot;   /* --sysroot */
	const char *debug_dir; /* --debug-dir */
	int quiet;             /* -q: no progress line, no warnings about the trace's state */
};

static const char usage_text[] =
	"usage: heaptrail top [options] TRACE\n"
	"\n"
	"The biggest contributors of a trace recorded with --stacks: the stacks (or\n"
	"functions) that held the most memory when the heap peaked, that allocate\n"
	"most often, that make the most temporary allocations (freed before the\n"
	"thread allocates again), and the biggest single allocations.\n"
	HT_HELP_PERF_MAP
	"\fEXAMPLES\n"
	"  heaptrail top app.ht\n"
	"  heaptrail top --by function --top 20 app.ht\n"
	"  heaptrail top --json app.ht | jq '.peak.entries[0]'\n";

enum table { T_PEAK, T_CALLS, T_TEMP, T_NTABLES };

static const char *const table_key[T_NTABLES] = {"peak", "calls", "temporary"};

/* A row: a stack, or all the stacks of one allocating function. */
struct entry {
	uint32_t node;       /* a stack (with --by function: its first) */
	uint64_t key;        /* hash of the function, --by function */
	uint64_t value[T_NTABLES]; /* bytes at the peak, calls, temporary calls */
	uint64_t bytes;      /* bytes allocated */
	uint64_t temp_bytes; /* bytes of the temporary allocations */
	uint64_t blocks;     /* blocks live at the peak */
	struct ht_frame site; /* --by function: its frame, the place all its stacks share
			       * (ht_blocks__merge_site) */
};

static enum table sort_table;

static int by_value(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	if (x->value[sort_table] != y->value[sort_table])
		return x->value[sort_table] < y->value[sort_table] ? 1 : -1;
	return x->node < y->node ? -1 : x->node > y->node;
}

static int by_key(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* The frame that names a stack --by function: its innermost (in *site). */
static const char *function_of(struct ht_reader *r, struct ht_symbolizer *sym, uint32_t node,
			       char *buf, size_t len, struct ht_frame *site)
{
	static struct ht_frame f[MAX_FRAMES];
	size_t n = node ? ht_blocks__frames(r, sym, node, f, MAX_FRAMES) : 0;
	memset(site, 0, sizeof(*site));
	if (!n) {
		snprintf(buf, len, "[no stack]");
		return buf;
	}
	*site = f[0];
	return ht_blocks__frame_name(buf, len, &f[0]);
}

static void print_where(struct ht_reader *r, struct ht_symbolizer *sym, uint32_t node,
			uint64_t depth, const struct ht_frame *site)
{
	static struct ht_frame f[MAX_FRAMES];
	size_t n = node ? ht_blocks__frames(r, sym, node, f, MAX_FRAMES) : 0;
	if (!n) {
		printf("[no stack: %s]\n", ht_blocks__no_stack_why(r));
		return;
	}
	if (site) { /* --by function: the place its stacks share */
		f[0] = *site;
		depth = 1;
	}
	ht_blocks__print_frames(stdout, f, n, depth);
	printf("\n");
}

/* How many frames each of the n rows of a table needs so that no two rows
 * read the same: at least depth, and one more than the longest run of
 * frames (by name) it shares with another row from the top, up to its
 * whole stack.  Two call paths often differ only below the allocator's
 * wrappers (sqlite3Malloc <- ...), which --depth alone would hide. */
static void distinct_depths(struct ht_reader *r, struct ht_symbolizer *sym, const uint32_t *nodes,
			    size_t n, uint64_t depth, uint64_t *out)
{
	static struct ht_frame f[MAX_FRAMES];
	char ***names = calloc(n, sizeof(*names));
	size_t *len = calloc(n, sizeof(*len));
	if (!names || !len) {
		for (size_t i = 0; i < n; i++)
			out[i] = depth;
		free(names), free(len);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		size_t k = nodes[i] ? ht_blocks__frames(r, sym, nodes[i], f, MAX_FRAMES) : 0;
		names[i] = calloc(k ? k : 1, sizeof(char *));
		for (size_t x = 0; names[i] && x < k; x++) {
			char buf[1024];
			const char *nm = ht_blocks__frame_name(buf, sizeof(buf), &f[x]);
			size_t l = strlen(nm) + 1;
			names[i][x] = memcpy(ht_xrealloc(NULL, l), nm, l);
		}
		len[i] = names[i] ? k : 0;
	}
	for (size_t i = 0; i < n; i++) {
		size_t need = depth;
		for (size_t j = 0; j < n; j++) {
			if (j == i || nodes[j] == nodes[i])
				continue; /* the same call path (the largest blocks) */
			size_t c = 0;
			while (c < len[i] && c < len[j] && !strcmp(names[i][c], names[j][c]))
				c++;
			if (c + 1 > need)
				need = c + 1;
		}
		out[i] = need < len[i] ? need : len[i] > depth ? len[i] : depth;
	}
	for (size_t i = 0; i < n; i++) {
		for (size_t x = 0; x < len[i]; x++)
			free(names[i][x]);
		free(names[i]);
	}
	free(names);
	free(len);
}

static void json_stack(struct ht_json *j, struct ht_reader *r, struct ht_symbolizer *sym,
		       uint32_t node, int by_function, const struct ht_frame *site)
{
	static struct ht_frame f[MAX_FRAMES];
	size_t n = node ? ht_blocks__frames(r, sym, node, f, MAX_FRAMES) : 0;
	if (by_function && n > 1)
		n = 1;
	if (site && n)
		f[0] = *site;
	ht_json__arr_begin(j, by_function ? "function" : "stack");
	for (size_t i = 0; i < n; i++)
		ht_blocks__json_frame(j, &f[i]);
	ht_json__arr_end(j);
}

int cmd_top(int argc, char **argv)
{
	struct top_config cfg = {.top = 10, .by = "stack", .depth = 3};
	const struct ht_option opts[] = {
		{'n', "top", HT_OPT_U64, &cfg.top, "N", "entries per table, 0 for all (10; biggest allocations: 10000 at most)"},
		{0, "by", HT_OPT_STRING, &cfg.by, "WHAT", "stack, or function: the function that called the allocator (stack)"},
		{0, "depth", HT_OPT_U64, &cfg.depth, "N", "frames shown per stack in the text output (3)"},
		{0, "thread", HT_OPT_U64, &cfg.tid, "TID", "only blocks this thread allocated (all)"},
		{0, "json", HT_OPT_FLAG, &cfg.json, NULL, "JSON: peak, calls, temporary, largest"},
		{0, "sysroot", HT_OPT_STRING, &cfg.sysroot, "DIR", "find the traced modules under DIR"},
		{0, "debug-dir", HT_OPT_STRING, &cfg.debug_dir, "DIR", "also look for separate debug files in DIR"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no progress line, no warning for traces not closed cleanly or not in exact order"},
		HT_OPT_THREADS,
		{0},
	};
	int ret = HT_EXIT_USAGE;
	struct ht_reader *r = NULL;
	struct ht_symbolizer *sym = NULL;
	struct ht_stackstats ss;
	struct entry *e = NULL;
	size_t ne = 0;
	memset(&ss, 0, sizeof(ss));
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs != 1) {
		ht_error("%s; usage: heaptrail top [options] TRACE",
			 nargs ? "one trace at a time" : "no trace given");
		goto cleanup;
	}
	if (!cfg.depth) {
		ht_error("--depth=0: a row shows at least one frame; expected 1 or more");
		goto cleanup;
	}
	if (!cfg.top) /* (0 for all, as in diff) */
		cfg.top = UINT64_MAX;
	int by_function = !strcmp(cfg.by, "function");
	if (!by_function && strcmp(cfg.by, "stack")) {
		ht_error("--by=%s: expected stack or function", cfg.by);
		goto cleanup;
	}
	ht_blocks__symbols_ahead(cfg.sysroot, cfg.debug_dir);
	/* (as many of the biggest single allocations as rows asked for, up
	 * to HT_BIG_ALLOCS_MAX: with -n 0 or more, the table says how many it
	 * left out; it stopped at 64 without a word) */
	ret = ht_stackstats__collect_big(argv[0], (uint32_t)cfg.tid, cfg.top, &ss, &r);
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
	/* stacks that read alike are one row (several calls on one line) */
	ht_stackstats__merge_alike(&ss, r, sym);
	e = calloc(ss.n ? ss.n : 1, sizeof(*e));
	if (!e)
		exit(HT_EXIT_DATA);
	for (size_t i = 0; i < ss.cap; i++) {
		const struct ht_stackstat *st = &ss.slots[i];
		if (!st->node)
			continue;
		struct entry *x = &e[ne++];
		x->node = st->node - 1;
		x->value[T_PEAK] = st->peak_bytes;
		x->value[T_CALLS] = st->alloc_calls;
		x->value[T_TEMP] = st->temp_calls;
		x->bytes = st->alloc_bytes;
		x->temp_bytes = st->temp_bytes;
		x->blocks = st->peak_blocks;
	}
	if (by_function) {
		/* one row per allocating function: sum the stacks that share it */
		char buf[1024];
		for (size_t i = 0; i < ne; i++)
			e[i].key = ht_hash_str(0xcbf29ce484222325ull,
					       function_of(r, sym, e[i].node, buf, sizeof(buf),
							   &e[i].site));
		qsort(e, ne, sizeof(*e), by_key);
		size_t o = 0;
		for (size_t i = 0; i < ne; i++) {
			if (o && e[o - 1].key == e[i].key) {
				for (int t = 0; t < T_NTABLES; t++)
					e[o - 1].value[t] += e[i].value[t];
				e[o - 1].bytes += e[i].bytes;
				e[o - 1].temp_bytes += e[i].temp_bytes;
				e[o - 1].blocks += e[i].blocks;
				ht_blocks__merge_site(&e[o - 1].site, &e[i].site);
				continue;
			}
			e[o++] = e[i];
		}
		ne = o;
	}
	const struct ht_trace_info *in = ht_reader__info(r);
	char b1[32], b2[32];
	struct ht_json j;
	if (cfg.json) {
		ht_json__init(&j, stdout, 1);
		ht_json__obj_begin(&j, NULL);
		ht_json__str(&j, "trace", argv[0]);
		ht_json__str(&j, "by", by_function ? "function" : "stack");
		ht_analyze__order_json(&j, &in->order);
		ht_analyze__sample_json(&j, in);
		ht_json__u64(&j, "paused_count", ss.pauses.count);
	} else {
		printf("%s (pid %d): the heap peaked at %s at %s", in->cmdline, in->pid,
		       ht_fmt_bytes(b1, ss.peak_bytes), ht_fmt_ns(b2, ss.peak_time_ns));
		if (ss.pauses.count)
			printf(" (recording was off %llu time%s: the calls meanwhile are not in the "
			       "trace)",
			       (unsigned long long)ss.pauses.count, ss.pauses.count == 1 ? "" : "s");
		char sb[HT_SAMPLED_TEXT_MAX];
		printf("%s\n", ht_analyze__sampled_text(in, sb));
	}
	static const char *const heading[T_NTABLES] = {
		"held the most at the peak", "most allocation calls",
		"most temporary allocations (freed before the thread's next allocation or free)"};
	size_t maxrows = ne > ss.nbig ? ne : ss.nbig;
	if (maxrows > cfg.top)
		maxrows = (size_t)cfg.top;
	uint32_t *rows = ht_xrealloc(NULL, (maxrows + 1) * sizeof(*rows));
	uint64_t *depths = ht_xrealloc(NULL, (maxrows + 1) * sizeof(*depths));
	for (int t = 0; t < T_NTABLES; t++) {
		sort_table = (enum table)t;
		qsort(e, ne, sizeof(*e), by_value);
		if (cfg.json) {
			ht_json__obj_begin(&j, table_key[t]);
			if (t == T_PEAK) {
				ht_json__u64(&j, "bytes", ss.peak_bytes);
				ht_json__u64(&j, "time_ns", ss.peak_time_ns);
			}
			ht_json__arr_begin(&j, "entries");
		} else {
			printf("\n%s:\n", heading[t]);
		}
		size_t shown = 0;
		while (shown < ne && shown < cfg.top && e[shown].value[t])
			shown++;
		if (!cfg.json && !by_function && shown) {
			for (size_t i = 0; i < shown; i++)
				rows[i] = e[i].node;
			distinct_depths(r, sym, rows, shown, cfg.depth, depths);
		}
		for (size_t i = 0; i < shown; i++) {
			if (cfg.json) {
				ht_json__obj_begin(&j, NULL);
				if (t == T_PEAK) {
					ht_json__u64(&j, "bytes", e[i].value[t]);
					ht_json__u64(&j, "blocks", e[i].blocks);
				} else {
					ht_json__u64(&j, t == T_CALLS ? "calls" : "count", e[i].value[t]);
					/* (of temporaries: everything the stack allocated, as in
					 * calls, kept for the readers of it) */
					ht_json__u64(&j, "bytes_allocated", e[i].bytes);
					if (t == T_TEMP)
						ht_json__u64(&j, "temporary_bytes",
							     e[i].temp_bytes);
				}
				json_stack(&j, r, sym, e[i].node, by_function,
					   by_function ? &e[i].site : NULL);
				ht_json__obj_end(&j);
				continue;
			}
			if (t == T_PEAK)
				printf("  %10s in %6llu %-6s  ", ht_fmt_bytes(b1, e[i].value[t]),
				       (unsigned long long)e[i].blocks,
				       e[i].blocks == 1 ? "block" : "blocks");
			else /* (of temporaries: their own bytes, not all the stack's) */
				printf("  %10llu %-6s %9s  ", (unsigned long long)e[i].value[t],
				       e[i].value[t] == 1 ? "call," : "calls,",
				       ht_fmt_bytes(b1, t == T_TEMP ? e[i].temp_bytes : e[i].bytes));
			print_where(r, sym, e[i].node, by_function ? 1 : depths[i],
				    by_function ? &e[i].site : NULL);
		}
		if (cfg.json) {
			ht_json__arr_end(&j);
			ht_json__obj_end(&j);
		} else if (!shown) {
			printf("  none\n");
		}
	}
	/* the allocations the largest table would list and were not kept */
	uint64_t want = ss.big_seen < cfg.top ? ss.big_seen : cfg.top;
	uint64_t shown_big = ss.nbig < cfg.top ? ss.nbig : cfg.top, left_out = want - shown_big;
	if (cfg.json) {
		ht_json__u64(&j, "largest_left_out", left_out);
		ht_json__arr_begin(&j, "largest");
		for (size_t i = 0; i < ss.nbig && i < cfg.top; i++) {
			ht_json__obj_begin(&j, NULL);
			ht_json__u64(&j, "bytes", ss.big[i].size);
			ht_json__u64(&j, "time_ns", ss.big[i].time_ns);
			ht_json__u64(&j, "tid", ss.big[i].tid);
			json_stack(&j, r, sym, ss.big[i].node, by_function, NULL);
			ht_json__obj_end(&j);
		}
		ht_json__arr_end(&j);
		ht_json__obj_end(&j);
		ht_json__finish(&j);
	} else {
		printf("\nbiggest single allocations:\n");
		size_t shown = ss.nbig < cfg.top ? ss.nbig : (size_t)cfg.top;
		if (!shown)
			printf("  none\n");
		if (!by_function && shown) {
			for (size_t i = 0; i < shown; i++)
				rows[i] = ss.big[i].node;
			distinct_depths(r, sym, rows, shown, cfg.depth, depths);
		}
		for (size_t i = 0; i < shown; i++) {
			printf("  %10s at %9s, thread %u  ", ht_fmt_bytes(b1, ss.big[i].size),
			       ht_fmt_ns(b2, ss.big[i].time_ns), ss.big[i].tid);
			print_where(r, sym, ss.big[i].node, by_function ? 1 : depths[i], NULL);
		}
		if (left_out)
			printf("  (%llu smaller allocations left out: the table keeps the %d "
			       "biggest)\n",
			       (unsigned long long)left_out, HT_BIG_ALLOCS_MAX);
	}
	fflush(stdout);
	free(rows);
	free(depths);
cleanup:
	free(e);
	ht_symbolizer__free(sym);
	ht_reader__close(r);
	ht_stackstats__free(&ss);
	return ret;
}
