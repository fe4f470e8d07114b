/* Helpers every analyzer shares: opening a trace with a one-line error,
 * and the end-of-read report (error and exit code). */
#ifndef HEAPTRAIL_ANALYZE_ANALYZE_H
#define HEAPTRAIL_ANALYZE_ANALYZE_H

#include <stddef.h>

#include "trace/reader.h"

/* Opens path; on failure prints "heaptrail: error: <why>" and returns NULL
 * (exit with HT_EXIT_DATA). */
struct ht_reader *ht_analyze__open(const char *path);
/* Next event, with a progress line on a terminal. */
int ht_analyze__next(struct ht_reader *r, struct ht_event *ev);
/* The same without the copy (ht_reader__next_event): valid until the next
 * call, NULL at the end.  Inline: the loops of the hot commands call it
 * for every event. */
void ht_analyze__progress(struct ht_reader *r, int end);
/* A new pass over a trace read before (export massif's second): its
 * progress line counts from zero again. */
void ht_analyze__progress_restart(void);
/* If set, called with the reader at each progress tick (every 65,536
 * events read; ht_blocks__symbols_ahead sets it). */
extern void (*ht_analyze__tick)(struct ht_reader *r);
static inline const struct ht_event *ht_analyze__next_event(struct ht_reader *r)
{
	extern uint64_t ht_analyze__nread;
	const struct ht_event *e = ht_reader__next_event(r);
	if (!e) {
		ht_analyze__progress(r, 1);
		return e;
	}
	/* The events stats counts: the reader delivers a moving realloc in two
	 * parts, and counting both said "3.9 M events" of a 3.0 M trace. */
	if (ht_event__is_call(e) && __builtin_expect((++ht_analyze__nread & 0xffff) == 0, 0))
		ht_analyze__progress(r, 0);
	return e;
}
/* After the last event: prints the reader's warning, the order warning
 * (ht_analyze__order_warning) and the error (naming the file) on stderr;
 * quiet_warnings (-q) leaves out the first two.  Returns HT_EXIT_DATA if
 * the trace had an error, else 0. */
int ht_analyze__finish(struct ht_reader *r, const char *path, int quiet_warnings);
/* The same for a command that read the trace through a pass (pass.h),
 * whose times with recording off (ps) it also says, once per reader, as a
 * note (ht_analyze__pause_note). */
struct ht_pauses;
int ht_analyze__finish_pass(struct ht_reader *r, const char *path, int quiet_warnings,
			    const struct ht_pauses *ps);
/* --from past the end of a finished trace: says so (naming how long the
 * trace lasts) and returns 1; 0 if the window starts within it. */
int ht_analyze__from_past_end(const struct ht_trace_info *in, uint64_t from_ns,
			      const char *path);

/* How a trace ends, for the words given to the blocks live at its end. */
enum ht_trace_end {
	HT_END_EXIT,    /* the program exited and the trace is whole: "at exit" */
	HT_END_NOW,     /* a recorder still writes it: "live now" */
	HT_END_UNCLEAN, /* the program was killed or crashed (the trace closed by its
			 * writer process, or not at all): "by the trace's end" */
	HT_END_CUT,     /* the file is cut short or damaged (the reader's error):
			 * "by the trace's end" */
	HT_END_SIGNAL,  /* the program died of a fatal signal it left to its default
			 * action, the trace closed in the recorder's handler:
			 * "by the trace's end" */
	HT_END_DETACHED, /* attach stopped tracing while the program ran on:
			  * "when tracing stopped", "live at detach" */
};
enum ht_trace_end ht_analyze__trace_end(const struct ht_reader *r);
/* Its words for "not freed ..." (leaks) and for a "live ..." label. */
const char *ht_analyze__end_not_freed(enum ht_trace_end e);
const char *ht_analyze__end_label(enum ht_trace_end e);

/* Recording off (ps->count times, up to end_ns) in one sentence (no
 * newline), "" if it never was: that the calls meanwhile are not in the
 * trace, and what that does to the blocks. */
const char *ht_analyze__pause_note(const struct ht_pauses *ps, uint64_t end_ns, char *buf,
				   size_t len);

/* Whether the reader delivered the events in their true order across
 * threads (ht_reader__order).  When it did not: one line on stderr, once
 * per reader, "heaptrail: warning: PATH: the order of N events across
 * threads is not exact (...)".  Returns 1 if the order is exact. */
int ht_analyze__order_warning(const struct ht_reader *r, const char *path);
/* The same as JSON members of the object being written: order_exact
 * (true/false) and order_events_concerned, from ht_reader__order or a
 * trace info's order (complete once the reader reached the end). */
struct ht_json;
void ht_analyze__order_json(struct ht_json *j, const struct ht_order_info *o);
/* The same as one sentence (no newline), "" when the order is exact:
 * for notes in HTML or text reports. */
const char *ht_analyze__order_note(const struct ht_reader *r, char *buf, size_t len);

/* A sampled trace (record --sample-bytes, attach --sample) in one sentence
 * (no newline), "" for a trace of every call: what it holds, and that the
 * counts, bytes and blocks the analyzers give are estimates from it.
 * ht_analyze__finish says it on stderr, once per reader, as a note. */
const char *ht_analyze__sample_note(const struct ht_trace_info *in, char *buf, size_t len);
/* For the first line of a text report: "" for a trace of every call, else
 * " (estimates: a sampled trace, about one allocation per 4.0 KiB)" or
 * "(..., one allocation call in N)"; buf holds HT_SAMPLED_TEXT_MAX bytes. */
#define HT_SAMPLED_TEXT_MAX 96
const char *ht_analyze__sampled_text(const struct ht_trace_info *in, char *buf);
/* JSON members: "sampled" (true/false) and, for a sampled trace,
 * "sample_bytes" or "sample_every". */
void ht_analyze__sample_json(struct ht_json *j, const struct ht_trace_info *in);

/* Parses a comma-separated list of kind names into a bitmask (bit = kind);
 * "alloc" expands to the malloc family.  Returns -1 naming the bad one and
 * the kinds the command takes (kinds, as words; NULL: every kind, dump's). */
int ht_parse_kinds(const char *list, uint64_t *mask, const char *kinds);

#endif
