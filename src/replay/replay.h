/* Replay: runs a workload (workload.h) and measures it; shared by the
 * replay and compare commands. */
#ifndef HEAPTRAIL_REPLAY_REPLAY_H
#define HEAPTRAIL_REPLAY_REPLAY_H

#include <stdint.h>
#include <stdio.h>

#include "workload.h"

enum ht_touch { HT_TOUCH_NONE, HT_TOUCH_PAGE, HT_TOUCH_ALL };

/* Percentiles reported per function. */
#define HT_NPCT 3
extern const double ht_replay_pcts[HT_NPCT]; /* 50, 99, 99.9 */

/* What one replay measured.  compare gets it from its replay children as
 * raw bytes over a pipe (the same binary on both ends), followed by nrss
 * samples. */
struct ht_replay_result {
	uint64_t calls[HT_FN_NR];          /* calls made per function */
	uint64_t call_cycles[HT_FN_NR];    /* TSC cycles inside them */
	uint64_t pct_cycles[HT_FN_NR][HT_NPCT]; /* percentiles of one call's cycles */
	uint64_t cycles;                   /* TSC cycles from start to end */
	uint64_t wall_usec;                /* wall time from start to end */
	uint64_t user_usec, sys_usec;      /* CPU time of the process over the run */
	uint64_t maxrss_start_kb;          /* peak RSS (VmHWM) before the first op */
	uint64_t maxrss_end_kb;            /* peak RSS (VmHWM) after the last */
	uint64_t rss_start_kb;             /* RSS before the first op */
	uint64_t rss_peak_kb;              /* peak of the sampled RSS */
	uint64_t ideal_bytes;              /* the workload's peak of live requested bytes */
	uint64_t live_peak_bytes;          /* the replay's own peak of them (an upper bound
					    * with threads, exact in one thread) */
	uint64_t live_slack_bytes;         /* how far above its true peak that can be (0:
					    * exact) */
	uint64_t ops;                      /* ops run, waits and spawns included */
	uint64_t waits;                    /* waits run */
	uint64_t waits_blocked;            /* of which found the other thread behind */
	uint64_t wait_cycles;              /* cycles spent blocked in them */
	uint64_t spawn_wait_cycles;        /* cycles SPAWNs waited for their thread to run */
	uint64_t spawn_lends;              /* SPAWNs that lent their CPU to their thread */
	uint64_t busy_cycles;              /* cycles the threads spent running ops, summed
					    * (waits and spawn waits excluded) */
	uint64_t trims;                    /* malloc_trim calls from --trim-interval */
	uint64_t slot_errors;              /* an empty slot freed or a live one overwritten:
					    * a block the replay lost track of (0 unless
					    * an allocation failed here but not in the trace) */
	double tsc_per_ns;                 /* TSC rate measured over the run */
	uint32_t nthreads;                 /* threads run */
	uint32_t repeat;                   /* times the workload ran */
	uint32_t nrss;                     /* RSS samples that follow */
	uint32_t rss_interval_us;          /* sampling interval at the end of the run */
	char allocator[256];               /* the library that served malloc ("glibc" if none) */
};

/* One RSS sample. */
struct ht_rss_sample {
	uint32_t ms; /* since the start of the run */
	uint32_t kb; /* resident set */
};

#define HT_RSS_INTERVAL_MIN 100000 /* ns: --rss-interval below is refused */

/* Options of a replay, labelled by their flag. */
struct ht_replay_config {
	const char *allocator;     /* --allocator (glibc) */
	const char *tunables;      /* --tunable: GLIBC_TUNABLES entries */
	const char *mallopts;      /* --mallopt PARAM=VALUE,... */
	uint64_t trim_interval;    /* --trim-interval N (0: never) */
	int threads_as_one;        /* --threads-as-one */
	int repeat;                /* --repeat K (1) */
	const char *touch;         /* --touch none|page|all (page) */
	uint64_t rss_interval_ns;  /* --rss-interval (10ms), HT_RSS_INTERVAL_MIN at least */
	int no_mlock;              /* --no-mlock */
	int json;                  /* --json */
	const char *rss_csv;       /* --rss-csv FILE */
	int result_fd;             /* --result-fd N (compare), -1 if none */
};

/* The library file of an allocator name (jemalloc, tcmalloc, mimalloc) or
 * path; NULL for glibc.  On failure returns -1 with a message in err. */
int ht_allocator_lookup(const char *name, char *path, size_t pathlen, char *err, size_t errlen);

/* Checks a GLIBC_TUNABLES list given to opt (--tunable, -t): each item
 * NAME=VALUE, each NAME one this glibc has (its loader's --list-tunables,
 * glibc 2.33 and later).  0, or -1 with a message naming opt in err. */
int ht_tunables_check(const char *spec, const char *opt, char *err, size_t errlen);

/* Warns (once, on stderr) if GLIBC_TUNABLES in the environment holds an
 * item ht_tunables_check refuses: every run inherits it, and glibc reads
 * such an item its own way (or not at all) without a word. */
void ht_tunables_warn_inherited(void);

/* Runs w in this process with cfg; fills res and *rss (malloc'ed, res->nrss
 * entries).  Returns 0, or -1 with a message printed. */
int ht_replay__run(const struct ht_workload *w, const struct ht_replay_config *cfg,
		   struct ht_replay_result *res, struct ht_rss_sample **rss);

/* Text output in the glibc trace_run order and wording, then the extras. */
void ht_replay__print_text(FILE *f, const struct ht_replay_result *res, const struct ht_workload *w);
/* JSON output (replay --json). */
void ht_replay__print_json(FILE *f, const struct ht_replay_result *res,
			   const struct ht_rss_sample *rss, const char *workload);

/* Average cycles of a function's calls (0 if none). */
double ht_replay__avg(const struct ht_replay_result *res, int fn);
/* How many bytes the replay's own live peak is above the trace's, when
 * it is above it by more than convert allows (1/64 of the peak or 4 KiB)
 * and than its count can be late (live_slack_bytes); else 0. */
uint64_t ht_replay__live_excess(const struct ht_replay_result *res);
/* Cycles inside all timed calls. */
uint64_t ht_replay__call_cycles(const struct ht_replay_result *res);

#endif
