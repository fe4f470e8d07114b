/* Shared analyzer helpers. */
#define _GNU_SOURCE
#include "analyze.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/pass.h"
#include "common/json.h"
#include "common/util.h"

struct ht_reader *ht_analyze__open(const char *path)
{
	char err[1024];
	struct ht_reader *r = ht_reader__open(path, err, sizeof(err));
	if (r)
		return r;
	ht_error("%s", err); /* (a "-" said as standard input: ht_open_error) */
	return NULL;
}

/* Events read, for the progress line every 65536. */
uint64_t ht_analyze__nread;
void (*ht_analyze__tick)(struct ht_reader *r);

void ht_analyze__progress_restart(void)
{
	ht_analyze__nread = 0;
	ht_progress_start();
}

void ht_analyze__progress(struct ht_reader *r, int end)
{
	if (end) {
		ht_progress_done();
		return;
	}
	if (ht_analyze__tick)
		ht_analyze__tick(r);
	uint64_t done, total;
	ht_reader__progress(r, &done, &total);
	ht_progress("reading", done, total, ht_analyze__nread, "events");
}

int ht_analyze__next(struct ht_reader *r, struct ht_event *ev)
{
	const struct ht_event *e = ht_analyze__next_event(r);
	if (!e)
		return 0;
	*ev = *e;
	return 1;
}

const char *ht_analyze__order_note(const struct ht_reader *r, char *buf, size_t len)
{
	struct ht_order_info o;
	ht_reader__order(r, &o);
	if (o.exact) {
		if (len)
			buf[0] = 0;
		return buf;
	}
	/* in an older trace, addresses out of step are the guesses' doing; in
	 * one that lacks events (cut, damaged, not closed), most likely the
	 * missing events' */
	const struct ht_trace_info *in = ht_reader__info(r);
	/* (and a trace whose header counts more events than its chunks hold:
	 * a cut one compact salvaged, which reads cleanly; it said "calls
	 * hidden from the tracer" there, probe O) */
	int lacking = ht_reader__error(r) || !in->closed || !(in->indexed || in->unindexed) ||
		      in->events_hdr > in->events_chunks;
	const char *why = o.undated
			      ? "recorded by an older heaptrail: record it again for an exact order"
		      : lacking ? "events missing from a trace that is cut, damaged or was not "
				  "closed, or calls hidden from the tracer"
				: "calls hidden from the tracer, or a recorder that missed an order";
	snprintf(buf, len,
		 "the order of %" PRIu64 " event%s across threads is not exact (%s); "
		 "peaks, leaks and live bytes may be wrong",
		 o.events_concerned, o.events_concerned == 1 ? "" : "s", why);
	return buf;
}

/* Readers a line was said of, per kind of line (a command reads a trace
 * once, diff two, massif one twice: a few). */
#define SAID_MAX 8
static const struct ht_reader *order_said[SAID_MAX], *sample_said[SAID_MAX],
	*pause_said[SAID_MAX];

/* Whether r is not in said yet; notes it there. */
static int first_said(const struct ht_reader **said, const struct ht_reader *r)
{
	size_t i = 0;
	for (; i < SAID_MAX && said[i]; i++)
		if (said[i] == r)
			return 0;
	if (i < SAID_MAX)
		said[i] = r;
	return 1;
}

int ht_analyze__order_warning(const struct ht_reader *r, const char *path)
{
	char note[256];
	if (!*ht_analyze__order_note(r, note, sizeof(note)))
		return 1;
	if (first_said(order_said, r))
		ht_warning("%s: %s", path, note);
	return 0;
}

void ht_analyze__order_json(struct ht_json *j, const struct ht_order_info *o)
{
	ht_json__bool(j, "order_exact", o->exact);
	ht_json__u64(j, "order_events_concerned", o->events_concerned);
}

const char *ht_analyze__sample_note(const struct ht_trace_info *in, char *buf, size_t len)
{
	char b[32];
	if (!(in->flags & HT_FILE_F_SAMPLED)) {
		if (len)
			buf[0] = 0;
		return buf;
	}
	if (in->sample_every)
		snprintf(buf, len,
			 "a sampled trace (one allocation call in %u recorded, attach --sample): "
			 "counts, bytes and blocks are estimates",
			 in->sample_every);
	else
		snprintf(buf, len,
			 "a sampled trace (about one allocation per %s recorded, --sample-bytes): "
			 "counts, bytes and blocks are estimates; the peak runs high when few "
			 "sampled blocks are live",
			 ht_fmt_bytes(b, in->sample_bytes));
	return buf;
}

const char *ht_analyze__sampled_text(const struct ht_trace_info *in, char *buf)
{
	char b[32];
	if (!(in->flags & HT_FILE_F_SAMPLED))
		buf[0] = 0;
	else if (in->sample_every)
		snprintf(buf, HT_SAMPLED_TEXT_MAX, " (estimates: a sampled trace, one allocation call in %u)",
			 in->sample_every);
	else
		snprintf(buf, HT_SAMPLED_TEXT_MAX, " (estimates: a sampled trace, about one allocation per %s)",
			 ht_fmt_bytes(b, in->sample_bytes));
	return buf;
}

void ht_analyze__sample_json(struct ht_json *j, const struct ht_trace_info *in)
{
	int sampled = (in->flags & HT_FILE_F_SAMPLED) != 0;
	ht_json__bool(j, "sampled", sampled);
	if (sampled && in->sample_every)
		ht_json__u64(j, "sample_every", in->sample_every);
	else if (sampled)
		ht_json__u64(j, "sample_bytes", in->sample_bytes);
}

static void sample_note(const struct ht_reader *r, const char *path)
{
	char note[512];
	if (*ht_analyze__sample_note(ht_reader__info(r), note, sizeof(note)) &&
	    first_said(sample_said, r))
		fprintf(stderr, "heaptrail: note: %s: %s\n", path, note);
}

const char *ht_analyze__pause_note(const struct ht_pauses *ps, uint64_t end_ns, char *buf,
				   size_t len)
{
	char b1[32], b2[32];
	if (!ps->count) {
		if (len)
			buf[0] = 0;
		return buf;
	}
	snprintf(buf, len,
		 "recording was off %" PRIu64 " time%s, %s of %s (heaptrail_pause() or _stop(), "
		 "SIGUSR2, a start paused): the calls meanwhile are not in the trace, so blocks "
		 "freed then stay live in it and frees of blocks allocated then are unknown",
		 ps->count, ps->count == 1 ? "" : "s", ht_fmt_ns(b1, ht_pauses__total(ps, end_ns)),
		 ht_fmt_ns(b2, end_ns));
	return buf;
}

static void pause_note(const struct ht_reader *r, const char *path, const struct ht_pauses *ps)
{
	char note[512];
	if (ps && *ht_analyze__pause_note(ps, ht_reader__info(r)->duration_ns, note, sizeof(note)) &&
	    first_said(pause_said, r))
		fprintf(stderr, "heaptrail: note: %s: %s\n", path, note);
}

int ht_analyze__from_past_end(const struct ht_trace_info *in, uint64_t from_ns,
			      const char *path)
{
	if (!in->closed || !from_ns || from_ns < in->duration_ns)
		return 0;
	char b1[32], b2[32];
	ht_error("--from=%s: the trace %s lasts %s", ht_fmt_ns(b1, from_ns), path,
		 ht_fmt_ns(b2, in->duration_ns));
	return 1;
}

enum ht_trace_end ht_analyze__trace_end(const struct ht_reader *r)
{
	const struct ht_trace_info *in = ht_reader__info(r);
	if (ht_reader__error(r))
		return HT_END_CUT;
	if (in->signal)
		return HT_END_SIGNAL;
	if (in->detached)
		return HT_END_DETACHED;
	if (in->being_written && !in->closed)
		return HT_END_NOW;
	/* (a program that ended by the exit_group system call did exit) */
	if (!in->closed || (in->orphaned && !in->exit_syscall))
		return HT_END_UNCLEAN;
	return HT_END_EXIT;
}

const char *ht_analyze__end_not_freed(enum ht_trace_end e)
{
	switch (e) {
	case HT_END_NOW:
		return " yet (the program still runs: live now)";
	case HT_END_UNCLEAN:
		return " by the trace's end (the program did not exit cleanly)";
	case HT_END_CUT:
		return " by the trace's end (the trace is cut short or damaged: frees after it "
		       "are not in it)";
	case HT_END_DETACHED:
		return " when tracing stopped (the program ran on: not at exit)";
	case HT_END_SIGNAL:
		return " by the trace's end (the program died of a signal it did not handle: "
		       "not at exit)";
	default:
		return " at exit";
	}
}

const char *ht_analyze__end_label(enum ht_trace_end e)
{
	return e == HT_END_NOW        ? "live now"
	       : e == HT_END_EXIT     ? "live at exit"
	       : e == HT_END_DETACHED ? "live at detach"
				      : "live at the end";
}

int ht_analyze__finish_pass(struct ht_reader *r, const char *path, int quiet_warnings,
			    const struct ht_pauses *ps)
{
	quiet_warnings |= ht_quiet;
	const char *w = ht_reader__warning(r);
	const char *e = ht_reader__error(r);
	if (w && !quiet_warnings)
		ht_warning("%s: %s", path, w);
	if (!quiet_warnings) {
		ht_analyze__order_warning(r, path);
		sample_note(r, path);
		pause_note(r, path, ps);
	}
	if (e) {
		/* One thread's damaged chunk ends that thread's events only: the
		 * others were read on, and what they did after it comes without
		 * that thread's frees and allocations. */
		struct ht_damage d;
		char b1[32], b2[32];
		ht_reader__damage(r, &d);
		if (d.tid && d.read_on && d.thread_read)
			ht_error("%s: %s (thread %u's events after %s are missing; the other "
				 "threads were read on to %s, so the results from %s on, peaks, "
				 "leaks and live bytes, may be wrong)",
				 path, e, d.tid, ht_fmt_ns(b1, d.thread_ns),
				 ht_fmt_ns(b2, d.last_ns), b1);
		else if (d.tid && d.read_on)
			ht_error("%s: %s (none of thread %u's events could be read; the other "
				 "threads were read to %s, so peaks, leaks and live bytes may be "
				 "wrong)",
				 path, e, d.tid, ht_fmt_ns(b2, d.last_ns));
		else
			ht_error("%s: %s (results above cover the events before it)", path, e);
		return HT_EXIT_DATA;
	}
	return HT_EXIT_OK;
}

int ht_analyze__finish(struct ht_reader *r, const char *path, int quiet_warnings)
{
	return ht_analyze__finish_pass(r, path, quiet_warnings, NULL);
}

int ht_parse_kinds(const char *list, uint64_t *mask, const char *kinds)
{
	if (!kinds)
		kinds = "the names dump prints (malloc, free, mmap, ...) or alloc, shm, thread";
	char *copy = strdup(list);
	*mask = 0;
	for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
		if (!strcmp(tok, "alloc")) {
			for (int k = 0; k < HT_EV_NR; k++)
				if (ht_kind_descs[k].is_alloc || k == HT_EV_FREE)
					*mask |= 1ull << k;
			continue;
		}
		if (!strcmp(tok, "shm")) {
			*mask |= 1ull << HT_EV_SHMGET | 1ull << HT_EV_SHMAT | 1ull << HT_EV_SHMDT |
				 1ull << HT_EV_SHMCTL;
			continue;
		}
		if (!strcmp(tok, "thread")) {
			*mask |= 1ull << HT_EV_THREAD_START | 1ull << HT_EV_THREAD_EXIT |
				 1ull << HT_EV_THREAD_NAME;
			continue;
		}
		int k = ht_kind_parse(tok);
		if (k <= 0) {
			ht_error("unknown event kind '%s'; kinds are %s", tok, kinds);
			free(copy);
			return -1;
		}
		*mask |= 1ull << k;
	}
	free(copy);
	if (!*mask) { /* (--kind '' or ',': nothing would match, said as nothing found) */
		ht_error("--kind '%s': name at least one kind (%s)", list, kinds);
		return -1;
	}
	return 0;
}
