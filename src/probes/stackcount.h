/* User stacks counted in BPF (stacks.bpf.h), collected, symbolized through
 * the offline symbolizer (procsyms.h) and rendered: a text table, JSON,
 * folded stacks, a flame graph SVG (flamesvg.h).  Shared by brkstack and
 * faults; `heaptrail report` can call the renderers too. */
#ifndef HEAPTRAIL_PROBES_STACKCOUNT_H
#define HEAPTRAIL_PROBES_STACKCOUNT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/json.h"
#include "symbols/symbolize.h"

/* One counted stack, symbolized. */
struct ht_counted_stack {
	uint32_t pid;            /* process */
	char comm[17];           /* its thread name */
	uint64_t count;          /* events */
	uint64_t bytes;          /* bytes summed (brk growth), 0 if none */
	struct ht_frame *frames; /* innermost first; strings owned by the stackcount */
	size_t nframes;          /* count; 0 with error */
	int error;               /* the stack could not be taken: -errno, else 0 */
};

struct ht_stackcount; /* opaque */

/* first_is_ip: the first address of each stack is the interrupted
 * instruction (a fault), not a return address (a system call's). */
struct ht_stackcount *ht_stackcount__new(const struct ht_symbol_opts *opts, int first_is_ip);
void ht_stackcount__free(struct ht_stackcount *sc);

/* Ring buffer callback for the new-process notes (struct ht_pid_note):
 * reads the process's map while it runs; ctx is the stackcount. */
int ht_stackcount__on_note(void *ctx, void *data, size_t len);
/* ht_probe_exit_fn: reads the map of -c's command before it exits. */
void ht_stackcount__on_exit(void *ctx, pid_t pid);

/* Reads the counts map (struct ht_stack_key -> struct ht_stack_val) and
 * the stack map, symbolizes, replaces the stacks held, sorted by count
 * (then bytes), biggest first; with clear, empties the counts map and the
 * stacks it used (for the next interval).  Returns the number of stacks, or -1 after an error. */
int ht_stackcount__collect(struct ht_stackcount *sc, int counts_fd, int stacks_fd, int clear);

/* The top stacks as text: "what" names the events ("page faults", "brk
 * calls"); show_bytes adds the bytes column. */
void ht_stackcount__print(const struct ht_stackcount *sc, FILE *f, size_t top, const char *what,
			  int show_bytes);
/* The top stacks as a JSON array member "stacks" with totals. */
void ht_stackcount__json(const struct ht_stackcount *sc, struct ht_json *j, size_t top,
			 int show_bytes);
/* Folded stacks ("comm;outer;...;inner count\n"), every stack. */
void ht_stackcount__folded(const struct ht_stackcount *sc, FILE *f);
/* A flame graph SVG of every stack (the process name as the root frame). */
void ht_stackcount__svg(const struct ht_stackcount *sc, FILE *f, const char *title,
			const char *unit);

/* What a counting command prints: the options shared by brkstack and
 * faults; defaults labelled by their flag. */
struct ht_stackcount_out {
	uint64_t top;      /* -n, --top (10): stacks shown per report */
	const char *out;   /* -o, --output (none): flame graph SVG (folded with --folded) */
	int folded;        /* --folded: folded stacks (to -o's file, else stdout) */
	const char *what;  /* "page faults", "brk calls" */
	const char *unit;  /* of the flame graph: "faults", "calls" */
	const char *title; /* of the flame graph */
	int show_bytes;    /* the bytes column (brk growth) */
};

/* The option-table rows of struct ht_stackcount_out. */
#define HT_STACKCOUNT_OPTIONS(o)                                                              \
	{'n', "top", HT_OPT_U64, &(o)->top, "N", "stacks shown per report, 0 for all (10)"},   \
	{'o', "output", HT_OPT_STRING, &(o)->out, "FILE",                                       \
	 "also write a flame graph SVG of the stacks (folded stacks with --folded)"},          \
	{0, "folded", HT_OPT_FLAG, &(o)->folded, NULL,                                          \
	 "folded stacks (flamegraph.pl, speedscope) instead of the table"}

struct ht_probe_session;
struct ht_probe_opts;

/* The maps of a counting BPF program (stacks.bpf.h) and its counter of
 * events not counted. */
struct ht_stackcount_maps {
	int notes_fd;             /* ring buffer of struct ht_pid_note */
	int counts_fd;            /* struct ht_stack_key -> struct ht_stack_val */
	int stacks_fd;            /* the stack map */
	volatile unsigned long long *dropped; /* the program's global (a __u64) */
};

/* Runs a counting probe command whose probes are attached and whose
 * session s has not gone yet: reads the new-process notes, releases the
 * target, makes a report every interval (the counts cleared) and one at
 * the end; with --json one document with an "intervals" array; -o's file.
 * Returns 0 or HT_EXIT_DATA. */
int ht_stackcount__run(struct ht_stackcount *sc, struct ht_probe_session *s,
		       const struct ht_probe_opts *po, const struct ht_stackcount_out *o,
		       const struct ht_stackcount_maps *m, const char *cmd);

/* Writes path atomically (a temporary file renamed): the SVG, or folded
 * stacks if folded.  Returns 0, or -1 after a one-line error. */
int ht_stackcount__write(const struct ht_stackcount *sc, const char *path, int folded,
			 const char *title, const char *unit);

#endif
