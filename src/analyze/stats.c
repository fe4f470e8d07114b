/* The summary of a trace (heaptrail stats): the model fed by the pass and its text and JSON renderings. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/pass.h"
#include "analyze/slicerel.h"
#include "analyze/stats.h"
#include "common/json.h"
#include "common/util.h"

/* Functions that count as calls (in calls/failed), in output order. */
static const int call_kinds[] = {
	HT_EV_MALLOC, HT_EV_FREE, HT_EV_CALLOC, HT_EV_REALLOC, HT_EV_REALLOCARRAY,
	HT_EV_MEMALIGN, HT_EV_POSIX_MEMALIGN, HT_EV_ALIGNED_ALLOC, HT_EV_VALLOC, HT_EV_PVALLOC,
	HT_EV_MALLOPT, HT_EV_MALLOC_TRIM, HT_EV_MMAP, HT_EV_MUNMAP, HT_EV_MREMAP, HT_EV_BRK,
	HT_EV_SBRK, HT_EV_SHMGET, HT_EV_SHMAT, HT_EV_SHMDT, HT_EV_SHMCTL,
};
#define NCALL_KINDS (sizeof(call_kinds) / sizeof(call_kinds[0]))

/* The record of thread tid; ix is the pass's index of it (op->thread),
 * which is the record's own when stats is fed every event of the pass (its
 * threads are then in the same order of appearance). */
static struct ht_stats_thread *thread_of(struct ht_stats *s, uint32_t ix, uint32_t tid)
{
	if (ix < s->nthreads && s->threads[ix].tid == tid)
		return &s->threads[ix];
	for (size_t i = 0; i < s->nthreads; i++)
		if (s->threads[i].tid == tid)
			return &s->threads[i];
	if (s->nthreads == s->capthreads) {
		s->capthreads = s->capthreads ? s->capthreads * 2 : 16;
		s->threads = ht_xrealloc(s->threads, s->capthreads * sizeof(*s->threads));
	}
	struct ht_stats_thread *t = &s->threads[s->nthreads++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	return t;
}

static int size_bucket(uint64_t size)
{
	return size <= 1 ? 0 : 64 - __builtin_clzll(size - 1);
}

/* The life_hist bucket of a lifetime in ns: 0 below 1 us, k from 10^(k+2)
 * ns, the last from 100 s.  floor(log10) from the bit length (1233/4096
 * is just above log10(2)) and one comparison, without branches (a loop
 * over the bounds mispredicted its exit on one free in eight, on a cc1
 * trace). */
static unsigned life_bucket(uint64_t life)
{
	static const uint64_t p10[20] = {
		1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
		100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
		10000000000000ull, 100000000000000ull, 1000000000000000ull,
		10000000000000000ull, 100000000000000000ull, 1000000000000000000ull,
		10000000000000000000ull};
	_Static_assert(HT_STATS_LIFE_BUCKETS == 10, "the buckets run from 10^3 to 10^11 ns");
	uint64_t x = life | 1;
	unsigned t = ((64u - (unsigned)__builtin_clzll(x)) * 1233u) >> 12; /* 0..19 */
	unsigned d = t - (x < p10[t]); /* floor(log10(x)) */
	return d < 3 ? 0 : d > 11 ? 9 : d - 2;
}

static void note_peak(struct ht_stats *s, uint64_t t)
{
	if (s->live_bytes > s->peak_bytes) {
		s->peak_bytes = s->live_bytes;
		s->peak_blocks = s->live_blocks;
		s->peak_usable_at = s->live_usable;
		s->peak_time = t;
	}
	if (s->live_blocks > s->max_blocks)
		s->max_blocks = s->live_blocks;
	if (s->live_usable > s->peak_usable)
		s->peak_usable = s->live_usable;
}

/* A block the event released (b NULL: not live, an unknown free). */
static void release(struct ht_stats *s, const struct ht_event *e, const struct ht_block *b,
		    struct ht_stats_thread *th)
{
	if (!b) {
		s->unknown_frees++;
		th->frees++; /* (a free of a non-NULL pointer still: the thread's calls add up) */
		return;
	}
	uint64_t w = b->weight; /* > 1 for a sampled allocation */
	th->frees += w;
	if (e->kind == HT_EV_FREE)
		s->calls[HT_EV_FREE] += w - 1; /* the call itself was counted once */
	if (b->pad & HT_BLOCK_FORGOTTEN)
		return;
	s->live_bytes -= b->size * w;
	s->live_usable -= b->usable * w;
	s->live_blocks -= w;
	if (b->tid != e->tid)
		s->cross_thread_frees += w;
	uint64_t life = e->time_ns > b->time_ns ? e->time_ns - b->time_ns : 0;
	s->life_hist[life_bucket(life)] += w;
}

/* The block the event handed out (op->acquired). */
static void acquire(struct ht_stats *s, const struct ht_event *e, const struct ht_blockop *op,
		    struct ht_stats_thread *th)
{
	const struct ht_block *old = op->replaced;
	if (old) {
		/* Address handed out while still live: the trace's order and
		 * the program disagree.  Count it, and let the new block win. */
		s->inversions++;
		th->frees -= old->weight;
		release(s, e, old, th);
	}
	uint64_t size = op->acquired->size;
	uint64_t w = op->weight; /* > 1 for a sampled allocation */
	s->live_bytes += size * w;
	s->live_usable += e->usable * w;
	s->live_blocks += w;
	s->bytes_allocated += size * w;
	s->usable_allocated += e->usable * w;
	s->bytes_by[e->kind] += size * w;
	s->size_hist[size_bucket(size)] += w;
	th->allocations += w;
	th->bytes_allocated += size * w;
	if (e->flags & HT_F_MMAPPED) {
		s->mmc_allocs += w;
		s->mmc_bytes += size * w;
	}
	note_peak(s, e->time_ns);
}

/* heaptrail_reset(): the pass flagged the live blocks forgotten. */
static void forget_all(struct ht_stats *s)
{
	s->live_bytes = s->live_usable = s->live_blocks = 0;
}

static int is_failure(const struct ht_event *e)
{
	const struct ht_kind_desc *d = &ht_kind_descs[e->kind];
	if (d->is_alloc) {
		if (e->kind == HT_EV_POSIX_MEMALIGN)
			return e->v[3] != 0;
		/* realloc(p, 0) returning NULL is a free, not a failure */
		if ((e->kind == HT_EV_REALLOC || e->kind == HT_EV_REALLOCARRAY) && ht_event__frees_old(e))
			return 0;
		return ht_event__result_ptr(e) == 0;
	}
	switch (e->kind) {
	case HT_EV_MMAP:
	case HT_EV_MREMAP:
	case HT_EV_SHMAT:
		return e->v[d->result] == (uint64_t)-1;
	case HT_EV_SBRK:
		return e->v[1] == (uint64_t)-1;
	case HT_EV_MUNMAP:
	case HT_EV_BRK:
	case HT_EV_SHMDT:
	case HT_EV_SHMCTL:
	case HT_EV_SHMGET:
		return (int64_t)e->v[d->result] < 0;
	case HT_EV_MALLOPT:
		return e->v[2] == 0; /* mallopt returns 1 on success */
	default:
		return 0;
	}
}

void ht_stats__event(struct ht_stats *s, const struct ht_event *e, const struct ht_blockop *op)
{
	struct ht_stats_thread *th = thread_of(s, op->thread, e->tid);
	if (e->part == HT_PART_RELEASE) {
		/* the first half of a moving realloc/mremap: only the release */
		if (e->kind == HT_EV_MREMAP)
			return;
		release(s, e, op->released, th);
		return;
	}
	s->events++;
	s->ts_taken += e->ts_taken;
	th->events++;
	s->last_time = e->time_ns;
	/* The common calls first, as the general code below has them (a
	 * malloc failed when the pass was handed no block). */
	if (e->kind == HT_EV_MALLOC) {
		s->calls[HT_EV_MALLOC] += e->weight;
		if (op->acquired)
			acquire(s, e, op, th);
		else
			s->failed[HT_EV_MALLOC]++;
		return;
	}
	if (e->kind == HT_EV_FREE) {
		s->calls[HT_EV_FREE] += e->weight;
		if (!e->v[0])
			s->free_null++;
		else
			release(s, e, op->released, th);
		return;
	}
	const struct ht_kind_desc *d = &ht_kind_descs[e->kind];
	if (e->kind != HT_EV_HEAP_BREAK && e->kind < HT_EV_HEAP_BREAK) {
		s->calls[e->kind] += op->weight;
		if (is_failure(e))
			s->failed[e->kind]++;
	}
	switch (e->kind) {
	case HT_EV_REALLOC:
	case HT_EV_REALLOCARRAY: {
		uint64_t old = ht_event__old_ptr(e), res = ht_event__result_ptr(e), w = op->weight;
		s->re_calls += w;
		if (!old && res)
			s->re_as_malloc += w;
		else if (!old) /* (a failed realloc(NULL, n): failed, as the calls table has it) */
			s->re_failed += w;
		if (ht_event__frees_old(e)) {
			if (!res)
				s->re_as_free += w;
			else if (res == old)
				s->re_inplace += w;
			else
				s->re_moved += w;
			if (ht_event__release_now(e))
				release(s, e, op->released, th);
		} else if (old && !res) {
			s->re_failed += w;
		}
		if (res)
			acquire(s, e, op, th);
		return;
	}
	case HT_EV_MMAP:
	case HT_EV_MUNMAP:
	case HT_EV_MREMAP: {
		/* mapped and unmapped: what the calls asked for; live: the
		 * pages mapped now (mmranges.h) */
		s->mm_calls++;
		struct ht_mmcall c;
		if (!ht_mmcall__of(e, &c))
			break;
		if (e->kind == HT_EV_MMAP) {
			s->mm_mapped += e->v[1];
			if (e->v[2] == 0) /* PROT_NONE */
				s->mm_prot_none += e->v[1];
		} else if (e->kind == HT_EV_MUNMAP) {
			s->mm_unmapped += e->v[1];
		} else if (e->v[2] > e->v[1]) { /* mremap: growth counts as mapped, */
			s->mm_mapped += e->v[2] - e->v[1];
		} else { /* shrinking as unmapped */
			s->mm_unmapped += e->v[1] - e->v[2];
		}
		ht_mmranges__apply(&s->mm_ranges, &c);
		s->mm_live = (int64_t)s->mm_ranges.bytes;
		break;
	}
	case HT_EV_HEAP_BREAK:
		/* (an sbrk(0), or one that failed: the break where it was, no
		 * move; "grew +0 bytes in 1 moves" was said of two sbrk(0)) */
		if (s->brk_events && e->v[0] == s->brk_final)
			return;
		if (!s->brk_events++)
			s->brk_initial = e->v[0];
		s->brk_final = e->v[0];
		if (e->v[0] > s->brk_max)
			s->brk_max = e->v[0];
		return;
	case HT_EV_THREAD_START:
		s->thread_starts++;
		return;
	case HT_EV_THREAD_EXIT:
		s->thread_exits++;
		return;
	case HT_EV_THREAD_NAME:
		snprintf(th->name, sizeof(th->name), "%s", e->str ? e->str : "");
		return;
	case HT_EV_FORK:
		s->forks++;
		return;
	case HT_EV_MARK:
		ht_marks__add(&s->marks, e);
		return;
	case HT_EV_CONTROL:
		if (e->v[0] == HT_CTL_RESET)
			forget_all(s);
		ht_pauses__control(&s->pauses, e);
		return;
	default:
		break;
	}
	if (s->mm_live > 0 && (uint64_t)s->mm_live > s->mm_peak)
		s->mm_peak = (uint64_t)s->mm_live;
	if (d->is_alloc) {
		if (op->acquired)
			acquire(s, e, op, th);
	}
}

struct ht_stats *ht_stats__new(const struct ht_trace_info *in)
{
	struct ht_stats *s = ht_xcalloc(1, sizeof(*s));
	s->marks.max = HT_MARKS_MAX;
	if (in->start_brk) {
		s->brk_initial = s->brk_final = s->brk_max = in->start_brk;
		s->brk_events = 1;
	}
	return s;
}

void ht_stats__delete(struct ht_stats *s)
{
	if (!s)
		return;
	ht_marks__free(&s->marks);
	ht_mmranges__free(&s->mm_ranges);
	free(s->threads);
	free(s);
}

uint64_t ht_stats__duration(const struct ht_stats *s, const struct ht_trace_info *in)
{
	return in->duration_ns > s->last_time ? in->duration_ns : s->last_time;
}

void ht_stats__json(const struct ht_stats *s, struct ht_json *j, const struct ht_trace_info *in,
		    const char *path, int complete)
{
	ht_json__obj_begin(j, NULL);
	ht_json__str(j, "trace", path);
	ht_json__i64(j, "pid", in->pid);
	ht_json__str(j, "command", in->cmdline);
	if (in->allocator) /* (only then: glibc's otherwise) */
		ht_json__str(j, "allocator", in->allocator);
	ht_json__bool(j, "complete", complete);
	ht_json__bool(j, "closed", in->closed);
	ht_json__bool(j, "orphaned", in->orphaned);
	ht_json__bool(j, "untraced_namespace", in->namespace);
	if (in->orphaned) /* (only then) */
		ht_json__bool(j, "exit_syscall", in->exit_syscall);
	ht_json__bool(j, "being_written", in->being_written && !in->closed);
	ht_json__bool(j, "disk_full", in->disk_full);
	ht_json__bool(j, "detached", in->detached);
	char sig[16];
	if (in->signal) /* (the fatal signal the program died of) */
		ht_json__str(j, "killed_by", ht_signal_name(in->signal, sig));
	else
		ht_json__null(j, "killed_by");
	ht_json__bool(j, "sampled", (in->flags & HT_FILE_F_SAMPLED) != 0);
	ht_json__u64(j, "sample_bytes", in->sample_bytes);
	ht_json__u64(j, "sample_every", in->sample_every);
	ht_json__u64(j, "duration_ns", ht_stats__duration(s, in));
	ht_json__u64(j, "events", s->events);
	ht_json__u64(j, "timestamps_taken", s->ts_taken);
	ht_json__u64(j, "dropped", in->dropped);
	ht_json__u64(j, "threads", s->nthreads);
	ht_analyze__order_json(j, &in->order);
	ht_json__u64(j, "paused_count", s->pauses.count);
	ht_json__u64(j, "paused_ns", ht_pauses__total(&s->pauses, ht_stats__duration(s, in)));
	ht_json__obj_begin(j, "calls");
	for (size_t i = 0; i < NCALL_KINDS; i++)
		ht_json__u64(j, ht_kind_name(call_kinds[i]), s->calls[call_kinds[i]]);
	ht_json__obj_end(j);
	ht_json__obj_begin(j, "failed");
	for (size_t i = 0; i < NCALL_KINDS; i++)
		ht_json__u64(j, ht_kind_name(call_kinds[i]), s->failed[call_kinds[i]]);
	ht_json__obj_end(j);
	ht_json__u64(j, "free_null", s->free_null);
	ht_json__u64(j, "bytes_allocated", s->bytes_allocated);
	ht_json__u64(j, "usable_bytes_allocated", s->usable_allocated);
	ht_json__obj_begin(j, "bytes_by_function");
	for (size_t i = 0; i < NCALL_KINDS; i++)
		if (ht_kind_descs[call_kinds[i]].is_alloc)
			ht_json__u64(j, ht_kind_name(call_kinds[i]), s->bytes_by[call_kinds[i]]);
	ht_json__obj_end(j);
	ht_json__u64(j, "peak_live_bytes", s->peak_bytes);
	ht_json__u64(j, "peak_live_usable_bytes", s->peak_usable);
	ht_json__u64(j, "peak_live_blocks", s->max_blocks);
	ht_json__u64(j, "live_blocks_at_peak", s->peak_blocks);
	ht_json__u64(j, "live_usable_bytes_at_peak", s->peak_usable_at);
	ht_json__u64(j, "peak_time_ns", s->peak_time);
	ht_json__u64(j, "live_bytes_at_exit", s->live_bytes);
	ht_json__u64(j, "live_usable_bytes_at_exit", s->live_usable);
	ht_json__u64(j, "live_blocks_at_exit", s->live_blocks);
	ht_json__u64(j, "cross_thread_frees", s->cross_thread_frees);
	ht_json__u64(j, "unknown_frees", s->unknown_frees);
	ht_json__u64(j, "address_reuse_while_live", s->inversions);
	ht_json__obj_begin(j, "realloc");
	ht_json__u64(j, "calls", s->re_calls);
	ht_json__u64(j, "moved", s->re_moved);
	ht_json__u64(j, "in_place", s->re_inplace);
	ht_json__u64(j, "as_malloc", s->re_as_malloc);
	ht_json__u64(j, "as_free", s->re_as_free);
	ht_json__u64(j, "failed", s->re_failed);
	ht_json__obj_end(j);
	ht_json__obj_begin(j, "mmap");
	ht_json__u64(j, "calls", s->mm_calls);
	ht_json__u64(j, "bytes_mapped", s->mm_mapped);
	ht_json__u64(j, "bytes_unmapped", s->mm_unmapped);
	ht_json__u64(j, "live_mapped_bytes", s->mm_live > 0 ? (uint64_t)s->mm_live : 0);
	ht_json__u64(j, "peak_mapped_bytes", s->mm_peak);
	if (s->mm_prot_none) /* (only then) */
		ht_json__u64(j, "bytes_mapped_prot_none", s->mm_prot_none);
	ht_json__obj_end(j);
	ht_json__obj_begin(j, "mmapped_chunks");
	ht_json__u64(j, "allocations", s->mmc_allocs);
	ht_json__u64(j, "bytes", s->mmc_bytes);
	ht_json__obj_end(j);
	ht_json__obj_begin(j, "heap_break");
	ht_json__u64(j, "initial", s->brk_initial);
	ht_json__u64(j, "final", s->brk_final);
	ht_json__u64(j, "max", s->brk_max);
	ht_json__i64(j, "growth_bytes", (int64_t)(s->brk_final - s->brk_initial));
	ht_json__u64(j, "changes", s->brk_events ? s->brk_events - 1 : 0);
	ht_json__obj_end(j);
	ht_json__arr_begin(j, "size_histogram");
	for (int b = 0; b < HT_STATS_SIZE_BUCKETS; b++) {
		if (!s->size_hist[b])
			continue;
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "min", b == 0 ? 0 : (1ull << (b - 1)) + 1);
		ht_json__u64(j, "max", b == 0 ? 1 : (b == 64 ? UINT64_MAX : 1ull << b));
		ht_json__u64(j, "count", s->size_hist[b]);
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__arr_begin(j, "lifetime_histogram");
	uint64_t lim = 1000;
	for (int b = 0; b < HT_STATS_LIFE_BUCKETS; b++, lim *= 10) {
		ht_json__obj_begin(j, NULL);
		if (b == HT_STATS_LIFE_BUCKETS - 1)
			ht_json__null(j, "max_ns");
		else
			ht_json__u64(j, "max_ns", lim);
		ht_json__u64(j, "count", s->life_hist[b]);
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__arr_begin(j, "per_thread");
	for (size_t i = 0; i < s->nthreads; i++) {
		const struct ht_stats_thread *t = &s->threads[i];
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "tid", t->tid);
		ht_json__str(j, "name", t->name);
		ht_json__u64(j, "events", t->events);
		ht_json__u64(j, "allocations", t->allocations);
		ht_json__u64(j, "frees", t->frees);
		ht_json__u64(j, "bytes_allocated", t->bytes_allocated);
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_marks__json(&s->marks, j);
	ht_json__u64(j, "marks_not_kept", s->marks.dropped);
	ht_json__u64(j, "thread_starts", s->thread_starts);
	ht_json__u64(j, "thread_exits", s->thread_exits);
	ht_json__u64(j, "forks", s->forks);
	ht_json__obj_end(j);
}

void ht_stats__text(const struct ht_stats *s, FILE *f, const struct ht_reader *r,
		    const char *path)
{
	const struct ht_trace_info *in = ht_reader__info(r);
	char b1[32], b2[32], b3[32], b4[32], died[64] = "";
	if (in->signal)
		snprintf(died, sizeof(died), " (the program died of %s)",
			 ht_signal_name(in->signal, b1));
	fprintf(f, "trace      %s\ncommand    %s (pid %d)\n", path, in->cmdline, in->pid);
	if (in->allocator)
		fprintf(f, "allocator  %s (not glibc's: usable sizes are its own)\n", in->allocator);
	uint64_t dur = ht_stats__duration(s, in); /* (the last event's, past the last clock) */
	fprintf(f, "duration   %s, %llu events, %zu thread%s%s\n", ht_fmt_ns(b1, dur),
	       (unsigned long long)s->events, s->nthreads, s->nthreads == 1 ? "" : "s",
	       in->signal             ? died
	       : in->detached         ? " (tracing stopped; the program ran on)"
	       : in->closed           ? ""
	       : in->being_written    ? " (still being written: as of now)"
	       : in->disk_full        ? " (recording stopped: a write failed)"
				      : " (trace not closed cleanly)");
	if (in->flags & HT_FILE_F_SAMPLED) {
		if (in->sample_every)
			fprintf(f, "sampled    one allocation call in %u recorded (attach --sample): "
				   "the numbers below are estimates\n", in->sample_every);
		else
			fprintf(f, "sampled    about one allocation per %s recorded (--sample-bytes): "
				   "the numbers below are estimates\n", ht_fmt_bytes(b1, in->sample_bytes));
	}
	if (s->pauses.count) {
		uint64_t end = ht_stats__duration(s, in);
		fprintf(f, "paused     %llu time%s, %s of %s: the calls meanwhile are not in the trace "
			   "(blocks freed then show as live)\n",
			(unsigned long long)s->pauses.count, s->pauses.count == 1 ? "" : "s",
			ht_fmt_ns(b1, ht_pauses__total(&s->pauses, end)), ht_fmt_ns(b2, end));
	}
	fprintf(f, "\n%-16s %12s %10s %16s\n", "function", "calls", "failed", "bytes");
	for (size_t i = 0; i < NCALL_KINDS; i++) {
		int k = call_kinds[i];
		if (!s->calls[k])
			continue;
		if (ht_kind_descs[k].is_alloc)
			fprintf(f, "%-16s %12llu %10llu %16llu\n", ht_kind_name(k),
			       (unsigned long long)s->calls[k], (unsigned long long)s->failed[k],
			       (unsigned long long)s->bytes_by[k]);
		else
			fprintf(f, "%-16s %12llu %10llu %16s\n", ht_kind_name(k),
			       (unsigned long long)s->calls[k], (unsigned long long)s->failed[k], "");
	}
	fprintf(f, "\nallocated        %s requested, %s usable\n", ht_fmt_bytes(b1, s->bytes_allocated),
	       ht_fmt_bytes(b2, s->usable_allocated));
	fprintf(f, "peak live heap   %s requested (%s usable) in %llu block%s, at %s\n",
	       ht_fmt_bytes(b1, s->peak_bytes), ht_fmt_bytes(b2, s->peak_usable_at),
	       (unsigned long long)s->peak_blocks, ht_s(s->peak_blocks), ht_fmt_ns(b3, s->peak_time));
	fprintf(f, "most live blocks %llu\n", (unsigned long long)s->max_blocks);
	fprintf(f, "%-16s %s in %llu block%s\n", ht_analyze__end_label(ht_analyze__trace_end(r)),
	       ht_fmt_bytes(b1, s->live_bytes), (unsigned long long)s->live_blocks,
	       ht_s(s->live_blocks));
	fprintf(f, "free(NULL)       %llu\nfrees elsewhere  %llu block%s freed by another thread than "
	       "their allocator\n", (unsigned long long)s->free_null,
	       (unsigned long long)s->cross_thread_frees, ht_s(s->cross_thread_frees));
	/* A trace cut short or damaged lost the chunks that held some blocks'
	 * allocations (the reader's error; or a cut file salvaged by compact,
	 * whose chunks hold fewer events than its header counts): most frees
	 * of unknown blocks are of those, not of blocks from before the
	 * recording (which starts before main). */
	int lost = ht_reader__error(r) || (in->closed && in->events_hdr > in->events_chunks);
	if (s->unknown_frees)
		/* (hidden calls: in a trace from the program's start, its own
		 * __libc_malloc and the like, probe S) */
		fprintf(f, "unknown frees    %llu (blocks allocated %s%s%s, or by calls hidden "
			   "from the tracer%s)\n",
		       (unsigned long long)s->unknown_frees,
		       lost ? "in the part of the trace that is cut off or damaged, most likely; "
			      "or "
			    : "",
		       (in->flags & HT_FILE_F_FORK_CHILD) ? "by the parent before the fork"
							 : "before recording started",
		       s->pauses.count ? ", or while it was off" : "",
		       in->allocator ? ", or by the allocator's own functions: mallocx, tc_malloc, "
				       "mi_malloc..."
				     : "");
	if (s->inversions)
		/* (the block the trace held there is taken as freed then, so
		 * the live figures and leaks lose it) */
		fprintf(f, "reused live      %llu addresses handed out while the trace held them "
			   "live (their frees were not recorded: %s)\n",
			(unsigned long long)s->inversions,
			s->pauses.count ? "made while recording was off, or hidden from the tracer"
					: "hidden from the tracer");
	if (in->dropped)
		fprintf(f,
			"not recorded     %llu calls (of other threads while the program exited, "
			"of signal handlers while the recorder was busy, of threads after an "
			"asynchronous cancel cut a call short or in seccomp's strict mode, or of "
			"threads beyond its buffers: "
			"not in the figures above)\n",
			(unsigned long long)in->dropped);
	if (s->re_calls)
		fprintf(f, "realloc          %llu call%s: %llu moved, %llu in place, %llu as malloc, %llu "
		       "as free, %llu failed\n", (unsigned long long)s->re_calls, ht_s(s->re_calls),
		       (unsigned long long)s->re_moved, (unsigned long long)s->re_inplace,
		       (unsigned long long)s->re_as_malloc, (unsigned long long)s->re_as_free,
		       (unsigned long long)s->re_failed);
	if (!in->allocator) /* (glibc's chunk flag: another allocator's blocks have none) */
		fprintf(f, "mmapped chunks   %llu allocation%s served by mmap, %s\n",
		       (unsigned long long)s->mmc_allocs, ht_s(s->mmc_allocs), ht_fmt_bytes(b1, s->mmc_bytes));
	if (s->brk_events)
		fprintf(f,
			"heap break       grew %+lld bytes in %llu move%s (max %s above start)\n",
			(long long)(s->brk_final - s->brk_initial),
			(unsigned long long)(s->brk_events - 1), s->brk_events == 2 ? "" : "s",
			ht_fmt_bytes(b1, s->brk_max - s->brk_initial));
	if (s->mm_calls) {
		char none[96] = "";
		if (s->mm_prot_none) /* (a JVM's 8 GiB heap reservation is no memory yet) */
			snprintf(none, sizeof(none),
				 " (%s of it PROT_NONE: address space reserved, not memory)",
				 ht_fmt_bytes(b4, s->mm_prot_none));
		fprintf(f, "program's mmaps  %llu calls, %s mapped%s, %s unmapped, peak %s\n",
		       (unsigned long long)s->mm_calls, ht_fmt_bytes(b1, s->mm_mapped), none,
		       ht_fmt_bytes(b2, s->mm_unmapped), ht_fmt_bytes(b3, s->mm_peak));
	}

	fprintf(f, "\nsizes (requested bytes)\n");
	uint64_t max = 1;
	for (int b = 0; b < HT_STATS_SIZE_BUCKETS; b++)
		if (s->size_hist[b] > max)
			max = s->size_hist[b];
	for (int b = 0; b < HT_STATS_SIZE_BUCKETS; b++) {
		if (!s->size_hist[b])
			continue;
		char lo[32], hi[32];
		ht_fmt_bytes(lo, b == 0 ? 0 : (1ull << (b - 1)) + 1);
		ht_fmt_bytes(hi, b == 0 ? 1 : 1ull << (b < 64 ? b : 63));
		int bar = (int)(40 * s->size_hist[b] / max);
		fprintf(f, "  %10s .. %-10s %12llu %.*s\n", lo, hi, (unsigned long long)s->size_hist[b],
		       bar, "########################################");
	}
	static const char *life_names[HT_STATS_LIFE_BUCKETS] = {"< 1 us", "< 10 us", "< 100 us", "< 1 ms",
							 "< 10 ms", "< 100 ms", "< 1 s", "< 10 s",
							 "< 100 s", ">= 100 s"};
	fprintf(f, "\nlifetimes of freed blocks\n");
	max = 1;
	for (int b = 0; b < HT_STATS_LIFE_BUCKETS; b++)
		if (s->life_hist[b] > max)
			max = s->life_hist[b];
	for (int b = 0; b < HT_STATS_LIFE_BUCKETS; b++) {
		if (!s->life_hist[b])
			continue;
		int bar = (int)(40 * s->life_hist[b] / max);
		fprintf(f, "  %-10s %12llu %.*s\n", life_names[b], (unsigned long long)s->life_hist[b], bar,
		       "########################################");
	}
	fprintf(f, "\n%-8s %-16s %10s %10s %10s %12s\n", "tid", "name", "events", "allocs", "frees",
	       "bytes");
	for (size_t i = 0; i < s->nthreads; i++) {
		const struct ht_stats_thread *t = &s->threads[i];
		fprintf(f, "%-8u %-16s %10llu %10llu %10llu %12llu\n", t->tid, t->name[0] ? t->name : "-",
		       (unsigned long long)t->events, (unsigned long long)t->allocations,
		       (unsigned long long)t->frees, (unsigned long long)t->bytes_allocated);
	}
	for (size_t i = 0; i < s->marks.n; i++)
		fprintf(f, "%s %s  mark \"%s\" (thread %u)\n", i ? "" : "\n",
			ht_fmt_ns(b1, s->marks.v[i].time_ns), s->marks.v[i].label, s->marks.v[i].tid);
	if (s->marks.dropped)
		fprintf(f, "  (%llu later marks counted, not kept)\n",
			(unsigned long long)s->marks.dropped);
}

/* ---- time slices (analyze/slices.c) ----------------------------------------- */

/* The highest live figures between two deferred releases (the live bytes
 * the slice knows are off from the true ones by what the releases before
 * them free, known only once the slices before are added).  Local values:
 * what the slice's own events add.  The model's own peak fields give them
 * (seg_close): nothing more an allocation. */
struct seg {
	uint64_t live_at, blocks_at, usable_at, time_at; /* at the first highest live bytes */
	uint64_t max_blocks, max_usable;
	int has; /* an allocation came in it */
};

struct ht_stats_slice {
	struct ht_stats *s;     /* the slice's model: counts add; live figures are its own */
	int first;              /* the first slice: its figures are the true ones */
	size_t ndef;            /* releases it could not place (slicerel.h) */
	struct seg *seg;        /* ndef + 1: before the first such release, ... */
	size_t capseg;
	struct ht_mmcall *mm;   /* the program's own mapping calls, in order (not the first's) */
	size_t nmm, capmm;
	uint8_t *named;         /* per thread of s: its name was set in the slice */
	size_t capnamed;
};

struct ht_stats_slice *ht_stats__slice_new(const struct ht_trace_info *in, int first)
{
	struct ht_stats_slice *sl = ht_xcalloc(1, sizeof(*sl));
	struct ht_trace_info none = {0};
	sl->s = ht_stats__new(first ? in : &none); /* (the break from the header: the first's) */
	sl->first = first;
	sl->capseg = 16;
	sl->seg = ht_xcalloc(sl->capseg, sizeof(*sl->seg));
	return sl;
}

void ht_stats__slice_delete(struct ht_stats_slice *sl)
{
	if (!sl)
		return;
	ht_stats__delete(sl->s);
	free(sl->seg);
	free(sl->mm);
	free(sl->named);
	free(sl);
}

size_t ht_stats__slice_kept(const struct ht_stats_slice *sl)
{
	return sl->nmm;
}

/* The model's highest figures so far, as those of segment j (note_peak
 * keeps them, with its own comparisons: a slice's live figures never go
 * below 0, since it releases only blocks it handed out).  Highest since
 * the slice began, not since the segment did: an earlier segment's
 * highest, where fewer blocks from before were released, is higher still
 * once those are taken off, so it wins there and not here. */
static void seg_close(struct ht_stats_slice *sl, size_t j)
{
	const struct ht_stats *s = sl->s;
	sl->seg[j] = (struct seg){s->peak_bytes, s->peak_blocks, s->peak_usable_at, s->peak_time,
				  s->max_blocks, s->peak_usable, s->max_blocks != 0};
}

void ht_stats__slice_event(struct ht_stats_slice *sl, const struct ht_event *e,
			   const struct ht_blockop *op, int deferred)
{
	struct ht_stats *s = sl->s;
	if (deferred) {
		/* a block from before, or an unknown free: it ends a segment
		 * (an allocation the event also makes is the next one's) */
		if (sl->ndef + 2 > sl->capseg) {
			size_t cap = 2 * sl->capseg;
			sl->seg = ht_xrealloc(sl->seg, cap * sizeof(*sl->seg));
			sl->capseg = cap;
		}
		seg_close(sl, sl->ndef++);
	}
	ht_stats__event(s, e, op);
	switch (e->kind) {
	case HT_EV_MMAP:
	case HT_EV_MUNMAP:
	case HT_EV_MREMAP: {
		/* what they map or unmap depends on the mappings before the
		 * slice: replayed on them by ht_stats__slice_add */
		struct ht_mmcall c;
		if (!sl->first && ht_mmcall__of(e, &c)) {
			sl->mm = ht_grow(sl->mm, &sl->capmm, sl->nmm + 1, sizeof(*sl->mm));
			sl->mm[sl->nmm++] = c;
		}
		break;
	}
	case HT_EV_THREAD_NAME: {
		size_t ix = (size_t)(thread_of(s, op->thread, e->tid) - s->threads);
		if (ix >= sl->capnamed) {
			size_t cap = sl->capnamed ? sl->capnamed : 16;
			while (cap <= ix)
				cap *= 2;
			sl->named = ht_xrealloc(sl->named, cap);
			memset(sl->named + sl->capnamed, 0, cap - sl->capnamed);
			sl->capnamed = cap;
		}
		sl->named[ix] = 1;
		break;
	}
	default:
		break;
	}
}

void ht_stats__slice_add(struct ht_stats *s, struct ht_stats_slice *sl,
			 const struct ht_slice_releases *rs)
{
	struct ht_stats *k = sl->s;
	/* the blocks of the slices before that its deferred releases free, in
	 * order, and each segment's highest figures as they truly were */
	uint64_t base_bytes = s->live_bytes, base_blocks = s->live_blocks,
		 base_usable = s->live_usable;
	uint64_t ub = 0, ubl = 0, uu = 0; /* freed so far of the blocks from before */
	seg_close(sl, sl->ndef); /* the last segment, to the slice's end */
	for (size_t j = 0; j <= sl->ndef; j++) {
		const struct seg *g = &sl->seg[j];
		if (g->has) {
			uint64_t bytes = base_bytes + g->live_at - ub;
			if (bytes > s->peak_bytes) {
				s->peak_bytes = bytes;
				s->peak_blocks = base_blocks + g->blocks_at - ubl;
				s->peak_usable_at = base_usable + g->usable_at - uu;
				s->peak_time = g->time_at;
			}
			uint64_t blocks = base_blocks + g->max_blocks - ubl;
			if (blocks > s->max_blocks)
				s->max_blocks = blocks;
			uint64_t usable = base_usable + g->max_usable - uu;
			if (usable > s->peak_usable)
				s->peak_usable = usable;
		}
		if (j == sl->ndef)
			break;
		const struct ht_slice_release *d = &rs->rel[j];
		const struct ht_block b = rs->b[j];
		if (!b.ptr)
			continue; /* unknown in the serial pass too */
		/* what release() does with a block it knows, where the slice
		 * counted an unknown free */
		uint64_t w = b.weight;
		k->unknown_frees--;
		thread_of(k, d->thread, d->tid)->frees += w - 1;
		if (d->is_free)
			k->calls[HT_EV_FREE] += w - 1;
		ub += b.size * w;
		ubl += w;
		uu += b.usable * w;
		if (b.tid != d->tid)
			k->cross_thread_frees += w;
		uint64_t life = d->time_ns > b.time_ns ? d->time_ns - b.time_ns : 0;
		k->life_hist[life_bucket(life)] += w;
	}
	s->live_bytes = base_bytes + k->live_bytes - ub;
	s->live_blocks = base_blocks + k->live_blocks - ubl;
	s->live_usable = base_usable + k->live_usable - uu;
	/* the program's own mappings: the slice's calls on those before it,
	 * in order, the peak noted after each as the serial pass does */
	for (size_t i = 0; i < sl->nmm; i++) {
		ht_mmranges__apply(&s->mm_ranges, &sl->mm[i]);
		if (s->mm_ranges.bytes > s->mm_peak)
			s->mm_peak = s->mm_ranges.bytes;
	}
	s->mm_live = (int64_t)s->mm_ranges.bytes;
	/* counts add */
	s->events += k->events;
	s->ts_taken += k->ts_taken;
	s->free_null += k->free_null;
	s->bytes_allocated += k->bytes_allocated;
	s->usable_allocated += k->usable_allocated;
	for (int i = 0; i < HT_EV_NR; i++) {
		s->calls[i] += k->calls[i];
		s->failed[i] += k->failed[i];
		s->bytes_by[i] += k->bytes_by[i];
	}
	s->cross_thread_frees += k->cross_thread_frees;
	s->unknown_frees += k->unknown_frees;
	s->inversions += k->inversions;
	s->re_calls += k->re_calls;
	s->re_moved += k->re_moved;
	s->re_inplace += k->re_inplace;
	s->re_as_malloc += k->re_as_malloc;
	s->re_as_free += k->re_as_free;
	s->re_failed += k->re_failed;
	s->mm_calls += k->mm_calls;
	s->mm_mapped += k->mm_mapped;
	s->mm_unmapped += k->mm_unmapped;
	s->mm_prot_none += k->mm_prot_none;
	s->mmc_allocs += k->mmc_allocs;
	s->mmc_bytes += k->mmc_bytes;
	if (k->brk_events) {
		/* (the slice's first break, where the slices before left it:
		 * no move, as serially) */
		uint64_t same = s->brk_events && k->brk_initial == s->brk_final;
		if (!s->brk_events)
			s->brk_initial = k->brk_initial;
		s->brk_final = k->brk_final;
		if (k->brk_max > s->brk_max)
			s->brk_max = k->brk_max;
		s->brk_events += k->brk_events - same;
	}
	for (int i = 0; i < HT_STATS_SIZE_BUCKETS; i++)
		s->size_hist[i] += k->size_hist[i];
	for (int i = 0; i < HT_STATS_LIFE_BUCKETS; i++)
		s->life_hist[i] += k->life_hist[i];
	s->thread_starts += k->thread_starts;
	s->thread_exits += k->thread_exits;
	s->forks += k->forks;
	if (k->events && k->last_time > s->last_time)
		s->last_time = k->last_time;
	for (size_t i = 0; i < k->nthreads; i++) {
		const struct ht_stats_thread *t = &k->threads[i];
		struct ht_stats_thread *c = thread_of(s, (uint32_t)s->nthreads, t->tid); /* (new ones
											   * in order) */
		c->events += t->events;
		c->allocations += t->allocations;
		c->frees += t->frees;
		c->bytes_allocated += t->bytes_allocated;
		if (i < sl->capnamed && sl->named[i])
			memcpy(c->name, t->name, sizeof(c->name));
	}
	ht_marks__append(&s->marks, &k->marks);
}

struct ht_stats *ht_stats__slice_take(struct ht_stats_slice *sl)
{
	struct ht_stats *s = sl->s;
	sl->s = NULL;
	return s;
}
