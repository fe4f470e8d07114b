/* Two traces (or two times of one) compared by stack: bytes and blocks
 * allocated and live in each, and the change, per symbolized call path
 * (node ids and addresses differ between runs: names do not) or per
 * allocating function.  Collect into an ht_diff, then render it as a
 * text table, JSON, folded "stack before after" lines or a differential
 * flame graph; `heaptrail diff` does that, `heaptrail report` can too. */
#ifndef HEAPTRAIL_ANALYZE_DIFF_H
#define HEAPTRAIL_ANALYZE_DIFF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "symbols/symbolize.h"

struct ht_json;

/* The quantity entries are sorted by (growth first) and graphs show. */
enum ht_diff_metric {
	HT_DIFF_LIVE,  /* bytes live at the end (or the time) */
	HT_DIFF_ALLOC, /* bytes allocated */
	HT_DIFF_COUNT, /* allocations */
};

/* What one side holds for a key, allocations weighted in sampled traces. */
struct ht_diff_vals {
	uint64_t alloc_bytes;  /* requested by the allocations (up to the time) */
	uint64_t alloc_blocks; /* allocations that returned a block */
	uint64_t live_bytes;   /* live at the end (or the time) */
	uint64_t live_blocks;  /* blocks of those */
};

/* One compared call path (or function). */
struct ht_diff_entry {
	char *key;                /* frame labels joined by ';', outermost first */
	struct ht_diff_vals v[2]; /* before, after (before scaled by --normalize) */
	struct ht_frame *frames;  /* of one of its stacks (the after trace's if it
				   * has it), innermost first */
	size_t nframes;           /* (--by function: 1; no stack: 0) */
};

/* Where a side is taken in its trace. */
struct ht_diff_point {
	uint64_t time_ns; /* after the events up to this time; 0: the start, before
			   * any event; UINT64_MAX: the end */
	const char *mark; /* or right after the first heaptrail_mark(mark), if set */
	const char *opt;  /* the option that gave it (--at, --from, --to), for messages */
};

struct ht_diff_opts {
	int by_function;           /* key by the innermost function, not the stack */
	int normalize;             /* scale the before side to the after side's totals */
	enum ht_diff_metric sort;  /* sort and graph by this */
	const char *sysroot;       /* symbolization: modules under this root */
	const char *debug_dir;     /* symbolization: separate debug files */
};

/* What a side is. */
struct ht_diff_side {
	const char *path;          /* the trace */
	const char *command;       /* its command line */
	const char *exe;           /* its executable's path ("" if not recorded) */
	int pid;                   /* its process */
	uint64_t at_ns;            /* the time it was taken at */
	int at_end;                /* at the end of the trace */
	const char *mark;          /* at this mark, or NULL */
	int has_stacks;            /* recorded with --stacks */
	uint64_t sample_bytes;     /* recorded with --sample-bytes, else 0 */
	struct ht_order_info order; /* whether its trace was read in its exact order */
	/* A trace cut short or damaged (analyze/readto.h): */
	int complete;              /* it was read to its end (then the next four are 0) */
	int read_cut;              /* its events stop at read_to_ns: nothing after is known */
	uint64_t read_to_ns;       /* events read up to here (its end if one thread's were
				    * lost and the others read on) */
	uint64_t exact_to_ns;      /* every thread's events in up to here */
	uint32_t short_tid;        /* the thread whose events stop there, if before read_to_ns */
	struct ht_diff_vals total; /* summed over every key, before --normalize */
	double scale[4];           /* --normalize: the factors each field of the
				    * before side was scaled by, in ht_diff_vals
				    * order (else 1) */
};

struct ht_diff; /* opaque */

/* Compares trace before with trace after, each at its end.  Returns the
 * exit status: 0; HT_EXIT_DATA for an unreadable trace (*out NULL, after
 * an error message) or a damaged one (*out filled from what could be
 * read).  The traces stay open until ht_diff__free (their frames). */
int ht_diff__traces(const char *before, const char *after, const struct ht_diff_opts *o,
		    struct ht_diff **out);
/* Compares one trace at two points (at[0] before at[1]): live at each,
 * allocated up to each.  A point past the trace's end or a mark it lacks
 * is HT_EXIT_USAGE (*out NULL, after an error message).  In a trace cut
 * short or damaged, a time past where its events stop is taken there (the
 * side says so: read_cut, read_to_ns), and "end" is that time. */
int ht_diff__times(const char *path, const struct ht_diff_point at[2],
		   const struct ht_diff_opts *o, struct ht_diff **out);
void ht_diff__free(struct ht_diff *d);

/* The entries, sorted by the growth of opts->sort (largest first). */
size_t ht_diff__count(const struct ht_diff *d);
/* Side 0 (before) or 1 (after). */
const struct ht_diff_side *ht_diff__side(const struct ht_diff *d, int side);
/* What differs between the programs of the two sides (two traces: stacks
 * are matched by function names, so those of two different programs
 * match where they share a name, main or libc's): HT_DIFF_OTHER_EXE if
 * their executables differ, else HT_DIFF_OTHER_COMMAND if their command
 * lines do, else 0 (and always 0 for one trace at two times). */
enum { HT_DIFF_OTHER_COMMAND = 1, HT_DIFF_OTHER_EXE = 2 };
int ht_diff__programs_differ(const struct ht_diff *d);
/* A metric of one side of an entry. */
uint64_t ht_diff__value(const struct ht_diff_vals *v, enum ht_diff_metric m);

/* Renderers.  top: entries shown (0: all); depth: frames per text row. */
void ht_diff__text(const struct ht_diff *d, FILE *f, size_t top, size_t depth);
void ht_diff__json(const struct ht_diff *d, struct ht_json *j, size_t top);
/* "stack before after" lines of the sort metric (difffolded.pl's output). */
void ht_diff__folded(const struct ht_diff *d, FILE *f);
/* A differential flame graph of the sort metric: widths from the after
 * side (the before side if negate), red where it grew, blue where it
 * shrank, deeper for larger changes.  Returns the frames drawn. */
int ht_diff__svg(const struct ht_diff *d, FILE *f, const char *title, uint64_t width,
		 int negate);

#endif
