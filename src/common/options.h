/* Command-line options of the subcommands: one table per command, parsed
 * and printed (--help) from that table, perf style. */
#ifndef HEAPTRAIL_COMMON_OPTIONS_H
#define HEAPTRAIL_COMMON_OPTIONS_H

#include <stdint.h>

enum ht_opt_type {
	HT_OPT_END = 0,   /* table terminator */
	HT_OPT_FLAG,      /* int, set to 1 */
	HT_OPT_STRING,    /* const char * */
	HT_OPT_U64,       /* uint64_t, plain number */
	HT_OPT_SIZE,      /* uint64_t, K/M/G suffixes */
	HT_OPT_DURATION,  /* uint64_t ns, s/ms/us/ns suffixes */
	HT_OPT_DURATION_POS, /* the same, above 0 (where 0 stands for "none": -d 0 would
			      * mean "for ever" instead of "at once") */
	HT_OPT_INT,       /* int */
	HT_OPT_OPT_INT,   /* int, value optional: --name sets -1, --name=N sets N */
	HT_OPT_STRINGS,   /* struct ht_opt_strings: each use adds a value */
	HT_OPT_NTHREADS,  /* int, a thread count: 0 (one per CPU) to HT_THREADS_MAX */
};

#define HT_OPT_STRINGS_MAX 8 /* values an HT_OPT_STRINGS option takes */

/* The values of an option that can be given more than once. */
struct ht_opt_strings {
	const char *v[HT_OPT_STRINGS_MAX]; /* in the order given */
	int n;                             /* how many */
};

struct ht_option {
	char short_name;      /* 0 if none */
	const char *long_name; /* without the dashes */
	enum ht_opt_type type; /* how the value is parsed */
	void *value;          /* where it goes */
	const char *argh;     /* placeholder shown in --help, e.g. "FILE" */
	const char *help;     /* one line; the default in parentheses */
};

/* -j N of every command that reads a trace: the threads its reader uses
 * (ht_threads, common/util.h; trace/reader_par.c). */
#define HT_OPT_THREADS                                                                             \
	{'j', "threads", HT_OPT_NTHREADS, &ht_threads, "N",                                        \
	 "read the trace with N threads, N-1 of them decoding ahead "                                 \
	 "(HEAPTRAIL_THREADS; default 1: serial; 0: one per CPU)"}

/* -j N of the commands that read a long trace in time slices
 * (analyze/slices.h), serially where the slices cannot give the same
 * answer. */
#define HT_OPT_SLICES                                                                              \
	{'j', "threads", HT_OPT_NTHREADS, &ht_threads, "N",                                        \
	 "read a long trace in N time slices at once, one thread each (HEAPTRAIL_THREADS; "         \
	 "default and 0: one per CPU; 1: serially)"}

/* -j N of report: a long trace's glibc heap model read on a thread of its
 * own beside the rest (cmd_report.c, heap_side). */
#define HT_OPT_REPORT_THREADS                                                                      \
	{'j', "threads", HT_OPT_NTHREADS, &ht_threads, "N",                                        \
	 "with 2 or more (HEAPTRAIL_THREADS; 0: one per CPU; default 1: serially), read a long "    \
	 "trace's glibc heap model on a thread of its own: faster with few blocks live, slower "    \
	 "with millions"}

#define HT_OPT_STOP_AT_NONOPT 1 /* first non-option ends parsing (record) */

/* Parses argv[1..] (argv[0] is the command name).  Non-option arguments are
 * moved to the front of argv, in order; returns their count.  On --help
 * prints the usage and exits 0; on a bad option prints a one-line error
 * naming it, and a hint to run --help, then exits 2. */
int ht_parse_options(int argc, char **argv, const struct ht_option *opts, const char *usage,
		     int flags);
void ht_print_usage(const char *usage, const struct ht_option *opts);

#endif
