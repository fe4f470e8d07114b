/* heaptrail heap's renderings of the model (heapinfo_model.h): text,
 * JSON and the HTML section of the report. */
#define _GNU_SOURCE
#include "heapinfo_model.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"

/* ---- renderers ---------------------------------------------------------- */

static const char *param_name(int p)
{
	switch (p) {
	case M_TRIM_THRESHOLD:
		return "M_TRIM_THRESHOLD";
	case M_TOP_PAD:
		return "M_TOP_PAD";
	case M_MMAP_THRESHOLD:
		return "M_MMAP_THRESHOLD";
	case M_MMAP_MAX:
		return "M_MMAP_MAX";
	default:
		return "?";
	}
}

static double ticks_ns(const struct ht_heapinfo *h, uint64_t ticks)
{
	return (double)ticks / h->ts_per_ns;
}

/* Whole nanoseconds for JSON (every digit kept). */
static uint64_t ticks_ns_u64(const struct ht_heapinfo *h, uint64_t ticks)
{
	return (uint64_t)(ticks_ns(h, ticks) + 0.5);
}

static const char *fmt_ticks(const struct ht_heapinfo *h, char *buf, uint64_t ticks)
{
	return ht_fmt_ns(buf, (uint64_t)ticks_ns(h, ticks));
}

static int by_tid(const void *a, const void *b)
{
	const struct use *x = a, *y = b;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Threads of an arena sorted by tid (a copy, the caller frees it). */
static struct use *sorted_uses(const struct arena *a)
{
	struct use *u = ht_xcalloc(a->nuses, sizeof(*u));
	if (a->nuses) {
		memcpy(u, a->uses, a->nuses * sizeof(*u));
		qsort(u, a->nuses, sizeof(*u), by_tid);
	}
	return u;
}

static const char *arena_name(char *buf, size_t len, const struct ht_heapinfo *h, int i)
{
	if (i == 0 && !h->arenas[0].first_heap)
		snprintf(buf, len, "main");
	else
		snprintf(buf, len, "%d", i);
	return buf;
}

static int lock_durations(const struct ht_heapinfo *h)
{
	return h->durations_flag || h->timed_hot;
}

/* Beside the time of a peak the window (--from) started at: it was
 * reached before and not passed in it. */
#define CARRIED "the window's start: reached before it"

void ht_heapinfo__text(const struct ht_heapinfo *h, FILE *f)
{
	char b1[32], b2[32], b3[32], nm[32];
	fprintf(f, "%s (pid %d): glibc's heap as the trace shows it\n", h->cmdline ? h->cmdline : "?",
		h->pid);
	if (h->from || h->to != UINT64_MAX)
		fprintf(f,
			"window: %s .. %s: calls, allocations, sbrk steps and threshold changes\n"
			"  are those made in it; bytes in use include the blocks from before it\n",
			ht_fmt_ns(b1, h->from),
			h->to == UINT64_MAX ? "the end" : ht_fmt_ns(b2, h->to));

	fprintf(f, "\narenas: %zu", h->narenas);
	if (h->narenas)
		fprintf(f, " (the main arena and %zu more)", h->narenas - 1);
	if (h->arena_max)
		fprintf(f, ", mallopt(M_ARENA_MAX, %" PRIu64 ")", h->arena_max);
	fprintf(f, "\n");
	if (h->narenas)
		fprintf(f, "  %-6s %5s %10s %10s %9s  %s\n", "arena", "heaps", "in use", "peak",
			"allocs", "threads (first .. last allocation)");
	for (size_t i = 0; i < h->narenas; i++) {
		const struct arena *a = &h->arenas[i];
		struct use *u = sorted_uses(a);
		fprintf(f, "  %-6s %5u %10s %10s %9" PRIu64 " ", arena_name(nm, sizeof(nm), h, (int)i),
			a->nheaps, ht_fmt_bytes(b1, a->live), ht_fmt_bytes(b2, a->peak), a->allocs);
		for (size_t k = 0; k < a->nuses; k++)
			fprintf(f, " %u (%s .. %s)", u[k].tid, ht_fmt_ns(b1, u[k].first_ns),
				ht_fmt_ns(b2, u[k].last_ns));
		if (!a->nuses)
			fprintf(f, " -");
		fprintf(f, "\n");
		free(u);
	}

	fprintf(f, "\nheaps of the other arenas (64 MiB of address space each; size = the highest\n"
		   "block end above the heap's start, headers included):\n");
	if (!h->nheaps)
		fprintf(f, "  none\n");
	for (size_t i = 0; i < h->nheaps; i++) {
		const struct heap *hp = &h->heaps[i];
		fprintf(f, "  0x%" PRIx64 "  arena %-3d from %-10s size %10s (at %s)  in use %10s  %s\n",
			hp->base, hp->arena, ht_fmt_ns(b1, hp->first_ns), ht_fmt_bytes(b2, hp->size),
			ht_fmt_ns(b3, hp->size_ns), ht_fmt_bytes(nm, hp->live),
			hp->first ? "header: heap_info + the arena (2256 bytes)"
				  : "header: heap_info (48 bytes)");
		if (hp->s.n > 1) {
			fprintf(f, "      size over time:");
			size_t stride = hp->s.n > 8 ? hp->s.n / 8 : 1;
			for (size_t k = 0; k < hp->s.n; k += stride)
				fprintf(f, " %s@%s", ht_fmt_bytes(b1, hp->s.v[k]), ht_fmt_ns(b2, hp->s.t[k]));
			fprintf(f, "\n");
		}
	}

	fprintf(f, "\nmain heap (the program break):\n");
	if (!h->brk) {
		fprintf(f, "  the break never moved\n");
	} else {
		fprintf(f, "  start 0x%" PRIx64 "%s, now 0x%" PRIx64 "\n", h->brk_first,
			h->start_brk == h->brk_first ? " (start_brk)" : " (first break seen)", h->brk);
		fprintf(f, "  sbrk total: %" PRIu64 " bytes raised in %" PRIu64 " step%s, %" PRIu64
			   " bytes trimmed in %" PRIu64 " step%s\n",
			h->grown, h->grow_steps, ht_s(h->grow_steps), h->shrunk, h->shrink_steps,
			ht_s(h->shrink_steps));
		fprintf(f, "  size at the end %s, peak %s at %s%s\n",
			ht_fmt_bytes(b1, h->brk > h->brk_first ? h->brk - h->brk_first : 0),
			ht_fmt_bytes(b2, h->brk_peak), ht_fmt_ns(b3, h->brk_peak_ns),
			h->brk_peak_carried ? " (" CARRIED ")" : "");
	}
	if (h->own_brk)
		fprintf(f, "  the program called brk/sbrk itself %" PRIu64 " times\n", h->own_brk);

	/* a window (--from) starts from the thresholds set before it */
	if (!h->from)
		fprintf(f, "\nmmap and trim thresholds (start: glibc's defaults, mmap %" PRIu64
			   " bytes, trim %" PRIu64 " bytes):\n",
			h->mmap_thr_start, h->trim_thr_start);
	else
		fprintf(f, "\nmmap and trim thresholds (at the window's start: mmap %" PRIu64
			   " bytes, trim %" PRIu64 " bytes, %s):\n",
			h->mmap_thr_start, h->trim_thr_start,
			h->no_dyn_start ? "fixed by mallopt" : "dynamic");
	if (!h->nchanges)
		fprintf(f, "  no change\n");
	for (size_t i = 0; i < h->nchanges; i++) {
		const struct change *c = &h->changes[i];
		fprintf(f, "  %10s  thread %-7u ", ht_fmt_ns(b1, c->time_ns), c->tid);
		if (!c->cause)
			fprintf(f, "free of an mmapped chunk of %" PRIu64 " bytes", c->arg);
		else
			fprintf(f, "mallopt(%s, %" PRId64 ")", param_name(c->cause), (int64_t)c->arg);
		fprintf(f, ": New thresholds:: mmap: %" PRIu64 " bytes, trim: %" PRIu64 " bytes%s\n",
			c->mmap, c->trim, c->pins ? " (the dynamic threshold is off from here)" : "");
	}
	if (h->changes_lost)
		fprintf(f, "  ... and %" PRIu64 " more changes\n", h->changes_lost);
	if (h->below_thr)
		fprintf(f, "  note: %" PRIu64 " blocks were mmapped below the threshold modelled here:\n"
			   "  the program likely ran with GLIBC_TUNABLES (glibc.malloc.mmap_threshold\n"
			   "  and the like), which the trace does not record\n",
			h->below_thr);

	fprintf(f, "\nlock waits (calls far slower than their peers: above p99 and %dx the median\n"
		   "of the same function and size class):\n", SLOW_FACTOR);
	if (!lock_durations(h)) {
		fprintf(f, "  the trace times only realloc; record with `heaptrail record --durations`\n"
			   "  to time every malloc-API call\n");
	}
	if (!h->timed) {
		fprintf(f, "  no timed calls\n");
	} else {
		fprintf(f, "  %" PRIu64 " slow calls of %" PRIu64 " timed\n", h->slow, h->timed);
		for (size_t i = 0; i < h->nthrs; i++) {
			const struct thr *t = &h->thrs[i];
			if (t->slow)
				fprintf(f, "  thread %-7u %6" PRIu64 " slow of %9" PRIu64
					   " timed, the worst %s\n",
					t->tid, t->slow, t->timed, fmt_ticks(h, b1, t->slow_worst));
		}
		for (size_t i = 0; i < h->narenas; i++) {
			const struct arena *a = &h->arenas[i];
			if (a->slow)
				fprintf(f, "  arena %-8s %6" PRIu64 " slow, the worst %s\n",
					arena_name(nm, sizeof(nm), h, (int)i), a->slow,
					fmt_ticks(h, b1, a->slow_worst));
		}
		for (size_t i = 0; i < h->nworst && i < WORST_SHOW; i++) {
			const struct worst *w = &h->worst[i];
			fprintf(f, "  %10s  thread %-7u %-14s %9" PRIu64 " bytes  arena %-5s %10s (median %s)\n",
				ht_fmt_ns(b1, w->time_ns), w->tid, ht_kind_descs[w->kind].name, w->size,
				w->arena >= 0 ? arena_name(nm, sizeof(nm), h, w->arena) : "-",
				fmt_ticks(h, b2, w->dur), fmt_ticks(h, b3, h->worst_dist[i]->median));
		}
	}

	fprintf(f, "\nsummary:\n");
	fprintf(f, "  calls: malloc %" PRIu64 ", free %" PRIu64 ", calloc %" PRIu64
		   ", realloc %" PRIu64 ", memalign family %" PRIu64 ", mallopt %" PRIu64
		   ", malloc_trim %" PRIu64 "\n",
		h->calls[HT_EV_MALLOC], h->calls[HT_EV_FREE], h->calls[HT_EV_CALLOC],
		h->calls[HT_EV_REALLOC] + h->calls[HT_EV_REALLOCARRAY],
		h->calls[HT_EV_MEMALIGN] + h->calls[HT_EV_POSIX_MEMALIGN] +
			h->calls[HT_EV_ALIGNED_ALLOC] + h->calls[HT_EV_VALLOC] + h->calls[HT_EV_PVALLOC],
		h->calls[HT_EV_MALLOPT], h->calls[HT_EV_MALLOC_TRIM]);
	fprintf(f, "  arenas %zu, heaps %zu, sbrk total %" PRIu64 " bytes, threshold changes %zu\n",
		h->narenas, h->nheaps, h->grown, h->nchanges);
	fprintf(f, "  mmapped chunks: %" PRIu64 " (%s as mapped)", h->mm_count,
		ht_fmt_bytes(b1, h->mm_bytes));
	if (h->mm_resized)
		fprintf(f, ", %" PRIu64 " of them reallocs resizing one", h->mm_resized);
	fprintf(f, ", at most %s at once, %s at the end\n", ht_fmt_bytes(b2, h->mm_peak),
		ht_fmt_bytes(b3, h->mm_live));
	fprintf(f, "  final thresholds: mmap %" PRIu64 " bytes, trim %" PRIu64 " bytes%s\n", h->mmap_thr,
		h->trim_thr, h->no_dyn ? " (fixed by mallopt)" : " (dynamic)");
	fprintf(f, "  in use at the peak (%s%s): %s requested in %s usable (%.1f%% overhead)\n",
		ht_fmt_ns(b1, h->peak_ns), h->peak_carried ? ", " CARRIED : "",
		ht_fmt_bytes(b2, h->peak_req), ht_fmt_bytes(b3, h->peak_use),
		h->peak_use ? 100.0 * (double)(h->peak_use - h->peak_req) / (double)h->peak_use : 0.0);
	fprintf(f, "  in use at the end: %s requested in %s usable (%.1f%% overhead)\n",
		ht_fmt_bytes(b1, h->live_req), ht_fmt_bytes(b2, h->live_use),
		h->live_use ? 100.0 * (double)(h->live_use - h->live_req) / (double)h->live_use : 0.0);
	if (h->rss_peak_kb)
		fprintf(f, "  RSS peak %s at %s, when %s was in use (%.2fx)\n",
			ht_fmt_bytes(b1, h->rss_peak_kb * 1024), ht_fmt_ns(b2, h->rss_peak_ns),
			ht_fmt_bytes(b3, h->rss_live_use),
			h->rss_live_use ? (double)h->rss_peak_kb * 1024 / (double)h->rss_live_use : 0.0);
	if (h->unknown_frees)
		fprintf(f, "  %" PRIu64 " free%s of blocks the trace did not see allocated%s\n",
			h->unknown_frees, ht_s(h->unknown_frees),
			h->mmapped_free_unknown ? " (mmapped ones among them could have moved the threshold)"
						: "");
}

void ht_heapinfo__json(const struct ht_heapinfo *h, struct ht_json *j)
{
	ht_json__arr_begin(j, "arenas");
	for (size_t i = 0; i < h->narenas; i++) {
		const struct arena *a = &h->arenas[i];
		struct use *u = sorted_uses(a);
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "arena", i);
		ht_json__bool(j, "main", a->first_heap == 0);
		if (a->first_heap)
			ht_json__u64(j, "first_heap", a->first_heap);
		ht_json__u64(j, "created_ns", a->created_ns);
		ht_json__arr_begin(j, "threads");
		for (size_t k = 0; k < a->nuses; k++)
			ht_json__u64(j, NULL, u[k].tid);
		ht_json__arr_end(j);
		ht_json__arr_begin(j, "uses");
		for (size_t k = 0; k < a->nuses; k++) {
			ht_json__obj_begin(j, NULL);
			ht_json__u64(j, "tid", u[k].tid);
			ht_json__u64(j, "first_ns", u[k].first_ns);
			ht_json__u64(j, "last_ns", u[k].last_ns);
			ht_json__u64(j, "allocations", u[k].calls);
			ht_json__obj_end(j);
		}
		ht_json__arr_end(j);
		ht_json__arr_begin(j, "heaps");
		for (size_t k = 0; k < h->nheaps; k++)
			if (h->heaps[k].arena == (int)i)
				ht_json__u64(j, NULL, h->heaps[k].base);
		ht_json__arr_end(j);
		ht_json__u64(j, "allocations", a->allocs);
		ht_json__u64(j, "live_bytes", a->live);
		ht_json__u64(j, "live_requested_bytes", a->live_req);
		ht_json__u64(j, "live_blocks", a->blocks);
		ht_json__u64(j, "peak_bytes", a->peak);
		ht_json__u64(j, "slow_calls", a->slow);
		ht_json__obj_end(j);
		free(u);
	}
	ht_json__arr_end(j);

	ht_json__arr_begin(j, "heaps");
	for (size_t i = 0; i < h->nheaps; i++) {
		const struct heap *hp = &h->heaps[i];
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "base", hp->base);
		ht_json__u64(j, "arena", (uint64_t)hp->arena);
		ht_json__bool(j, "arena_first_heap", hp->first);
		ht_json__u64(j, "header_bytes", hp->first ? G_ARENA_FIRST : G_HEAP_INFO);
		ht_json__u64(j, "first_ns", hp->first_ns);
		ht_json__u64(j, "size_bytes", hp->size);
		ht_json__u64(j, "live_bytes", hp->live);
		ht_json__arr_begin(j, "sizes");
		for (size_t k = 0; k < hp->s.n; k++) {
			ht_json__arr_begin(j, NULL);
			ht_json__u64(j, NULL, hp->s.t[k]);
			ht_json__u64(j, NULL, hp->s.v[k]);
			ht_json__arr_end(j);
		}
		ht_json__arr_end(j);
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);

	ht_json__obj_begin(j, "main_heap");
	ht_json__u64(j, "start", h->brk_first);
	ht_json__u64(j, "break", h->brk);
	ht_json__u64(j, "sbrk_bytes", h->grown);
	ht_json__u64(j, "grow_steps", h->grow_steps);
	ht_json__u64(j, "trimmed_bytes", h->shrunk);
	ht_json__u64(j, "trim_steps", h->shrink_steps);
	ht_json__u64(j, "size_bytes", h->brk > h->brk_first ? h->brk - h->brk_first : 0);
	ht_json__u64(j, "peak_bytes", h->brk_peak);
	ht_json__u64(j, "peak_ns", h->brk_peak_ns);
	ht_json__u64(j, "program_brk_calls", h->own_brk);
	ht_json__obj_end(j);
	ht_json__u64(j, "sbrk_bytes", h->grown);

	ht_json__obj_begin(j, "threshold_start");
	ht_json__u64(j, "mmap", h->mmap_thr_start); /* (the window's: --from) */
	ht_json__u64(j, "trim", h->trim_thr_start);
	ht_json__bool(j, "dynamic", !h->no_dyn_start); /* (as the text says it) */
	ht_json__obj_end(j);
	ht_json__arr_begin(j, "thresholds");
	for (size_t i = 0; i < h->nchanges; i++) {
		const struct change *c = &h->changes[i];
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "time_ns", c->time_ns);
		ht_json__u64(j, "tid", c->tid);
		ht_json__u64(j, "mmap", c->mmap);
		ht_json__u64(j, "trim", c->trim);
		if (!c->cause) {
			ht_json__str(j, "cause", "free");
			ht_json__u64(j, "chunk_bytes", c->arg);
		} else {
			ht_json__str(j, "cause", "mallopt");
			ht_json__str(j, "param", param_name(c->cause));
			ht_json__i64(j, "value", (int64_t)c->arg);
		}
		ht_json__bool(j, "dynamic_off", c->pins);
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__obj_begin(j, "threshold_end");
	ht_json__u64(j, "mmap", h->mmap_thr);
	ht_json__u64(j, "trim", h->trim_thr);
	ht_json__bool(j, "dynamic", !h->no_dyn);
	ht_json__obj_end(j);

	ht_json__obj_begin(j, "lock_waits");
	ht_json__bool(j, "durations", lock_durations(h));
	ht_json__u64(j, "timed_calls", h->timed);
	ht_json__u64(j, "slow_calls", h->slow);
	ht_json__arr_begin(j, "threads");
	for (size_t i = 0; i < h->nthrs; i++) {
		const struct thr *t = &h->thrs[i];
		if (!t->timed)
			continue;
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "tid", t->tid);
		ht_json__u64(j, "timed_calls", t->timed);
		ht_json__u64(j, "slow_calls", t->slow);
		ht_json__u64(j, "worst_ns", ticks_ns_u64(h, t->slow_worst));
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__arr_begin(j, "arenas");
	for (size_t i = 0; i < h->narenas; i++) {
		if (!h->arenas[i].slow)
			continue;
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "arena", i);
		ht_json__u64(j, "slow_calls", h->arenas[i].slow);
		ht_json__u64(j, "worst_ns", ticks_ns_u64(h, h->arenas[i].slow_worst));
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__arr_begin(j, "classes"); /* each function and size class judged */
	for (unsigned di = 0; di < 32 * NCLASS; di++) {
		const struct dist *d = h->dists[di];
		if (!d || !d->thr)
			continue;
		ht_json__obj_begin(j, NULL);
		ht_json__str(j, "function", ht_kind_descs[di / NCLASS].name);
		ht_json__u64(j, "size_bits", di % NCLASS);
		ht_json__u64(j, "calls", d->n);
		ht_json__u64(j, "slow_calls", d->slow);
		ht_json__u64(j, "median_ns", ticks_ns_u64(h, d->median));
		ht_json__u64(j, "threshold_ns", ticks_ns_u64(h, d->thr));
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__arr_begin(j, "worst");
	for (size_t i = 0; i < h->nworst; i++) {
		const struct worst *w = &h->worst[i];
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "time_ns", w->time_ns);
		ht_json__u64(j, "tid", w->tid);
		ht_json__str(j, "function", ht_kind_descs[w->kind].name);
		ht_json__u64(j, "size", w->size);
		if (w->arena >= 0)
			ht_json__u64(j, "arena", (uint64_t)w->arena);
		else
			ht_json__null(j, "arena");
		ht_json__u64(j, "duration_ns", ticks_ns_u64(h, w->dur));
		ht_json__u64(j, "median_ns", ticks_ns_u64(h, h->worst_dist[i]->median));
		ht_json__u64(j, "threshold_ns", ticks_ns_u64(h, h->worst_dist[i]->thr));
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
	ht_json__obj_end(j);

	ht_json__obj_begin(j, "summary");
	ht_json__u64(j, "malloc", h->calls[HT_EV_MALLOC]);
	ht_json__u64(j, "free", h->calls[HT_EV_FREE]);
	ht_json__u64(j, "calloc", h->calls[HT_EV_CALLOC]);
	ht_json__u64(j, "realloc", h->calls[HT_EV_REALLOC] + h->calls[HT_EV_REALLOCARRAY]);
	ht_json__u64(j, "memalign_family",
		     h->calls[HT_EV_MEMALIGN] + h->calls[HT_EV_POSIX_MEMALIGN] +
			     h->calls[HT_EV_ALIGNED_ALLOC] + h->calls[HT_EV_VALLOC] +
			     h->calls[HT_EV_PVALLOC]);
	ht_json__u64(j, "mallopt", h->calls[HT_EV_MALLOPT]);
	ht_json__u64(j, "malloc_trim", h->calls[HT_EV_MALLOC_TRIM]);
	ht_json__u64(j, "arenas", h->narenas);
	ht_json__u64(j, "heaps", h->nheaps);
	ht_json__u64(j, "mmapped_chunks", h->mm_count);
	ht_json__u64(j, "mmapped_resized", h->mm_resized);
	ht_json__u64(j, "mmapped_bytes", h->mm_bytes);
	ht_json__u64(j, "mmapped_peak_bytes", h->mm_peak);
	ht_json__u64(j, "mmapped_below_threshold", h->below_thr);
	ht_json__u64(j, "peak_ns", h->peak_ns);
	ht_json__u64(j, "peak_requested_bytes", h->peak_req);
	ht_json__u64(j, "peak_usable_bytes", h->peak_use);
	ht_json__u64(j, "end_requested_bytes", h->live_req);
	ht_json__u64(j, "end_usable_bytes", h->live_use);
	ht_json__u64(j, "rss_peak_bytes", h->rss_peak_kb * 1024);
	ht_json__u64(j, "rss_peak_ns", h->rss_peak_ns);
	ht_json__u64(j, "rss_peak_live_requested_bytes", h->rss_live_req);
	ht_json__u64(j, "rss_peak_live_usable_bytes", h->rss_live_use);
	ht_json__u64(j, "unknown_frees", h->unknown_frees);
	ht_json__obj_end(j);
}

/* ---- HTML --------------------------------------------------------------- */

static void html_series(FILE *f, const struct series *s, uint64_t tmax, uint64_t vmax,
			const char *color, int w, int ht)
{
	if (!s->n)
		return;
	fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
	double px = 0, py = ht;
	for (size_t i = 0; i < s->n; i++) {
		double x = tmax ? (double)s->t[i] * w / (double)tmax : 0;
		double y = ht - (vmax ? (double)s->v[i] * ht / (double)vmax : 0);
		if (i)
			fprintf(f, "%.1f,%.1f ", x, py); /* steps: the size holds until the next */
		fprintf(f, "%.1f,%.1f ", x, y);
		px = x;
		py = y;
	}
	fprintf(f, "%.1f,%.1f\"/>\n", px > w ? px : (double)w, py);
}

void ht_heapinfo__html(const struct ht_heapinfo *h, FILE *f)
{
	char b1[32], b2[32], nm[32];
	static const char *const colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e",
					     "#9467bd", "#8c564b", "#e377c2", "#17becf"};
	/* the page around it (report) gives the section its heading */
	fprintf(f, "<section class=\"ht-heap\">\n<h3>Arenas</h3>\n");
	fprintf(f, "<table>\n<tr><th>arena</th><th>heaps</th><th>in use</th><th>peak</th>"
		   "<th>allocations</th><th>threads (first .. last allocation)</th></tr>\n");
	for (size_t i = 0; i < h->narenas; i++) {
		const struct arena *a = &h->arenas[i];
		struct use *u = sorted_uses(a);
		fprintf(f, "<tr><td>%s</td><td>%u</td><td>%s</td><td>%s</td><td>%" PRIu64 "</td><td>",
			arena_name(nm, sizeof(nm), h, (int)i), a->nheaps, ht_fmt_bytes(b1, a->live),
			ht_fmt_bytes(b2, a->peak), a->allocs);
		for (size_t k = 0; k < a->nuses; k++)
			fprintf(f, "%s%u (%s .. %s)", k ? ", " : "", u[k].tid,
				ht_fmt_ns(b1, u[k].first_ns), ht_fmt_ns(b2, u[k].last_ns));
		fprintf(f, "</td></tr>\n");
		free(u);
	}
	fprintf(f, "</table>\n");
	/* the heap sizes and the break over time */
	uint64_t tmax = h->last_ns, vmax = h->brk_peak;
	for (size_t i = 0; i < h->nheaps; i++)
		if (h->heaps[i].size > vmax)
			vmax = h->heaps[i].size;
	const int w = 720, ht = 240, ml = 70, mb = 30;
	fprintf(f, "<h3>Heap sizes over time</h3>\n");
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		   "font-family=\"sans-serif\" font-size=\"11\">\n", w + ml + 10, ht + mb + 10);
	fprintf(f, "<g transform=\"translate(%d,5)\">\n", ml);
	fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n", w, ht);
	fprintf(f, "<text x=\"-5\" y=\"10\" text-anchor=\"end\">%s</text>\n", ht_fmt_bytes(b1, vmax));
	fprintf(f, "<text x=\"-5\" y=\"%d\" text-anchor=\"end\">0</text>\n", ht);
	fprintf(f, "<text x=\"0\" y=\"%d\">0</text>\n", ht + 15);
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", w, ht + 15,
		ht_fmt_ns(b1, tmax));
	html_series(f, &h->brk_s, tmax, vmax, "#000", w, ht);
	for (size_t i = 0; i < h->nheaps; i++)
		html_series(f, &h->heaps[i].s, tmax, vmax, colors[i % 8], w, ht);
	fprintf(f, "</g>\n</svg>\n");
	/* a legend of the lines drawn, and only of those */
	fprintf(f, "<p class=\"legend\">");
	int drawn = 0;
	if (h->brk_s.n)
		fprintf(f, "<span style=\"color:#000\">&#9644;</span> the main heap (program "
			   "break above its start) "),
			drawn++;
	for (size_t i = 0; i < h->nheaps; i++) {
		if (!h->heaps[i].s.n)
			continue;
		fprintf(f, "<span style=\"color:%s\">&#9644;</span> heap %zu of arena %s (highest "
			   "block end) ",
			colors[i % 8], i, arena_name(nm, sizeof(nm), h, h->heaps[i].arena));
		drawn++;
	}
	if (!drawn)
		fprintf(f, "no heap grew or shrank during the trace: nothing to draw");
	fprintf(f, "</p>\n");
	fprintf(f, "<table>\n<tr><th>time</th><th>thread</th><th>cause</th><th>mmap threshold</th>"
		   "<th>trim threshold</th></tr>\n");
	for (size_t i = 0; i < h->nchanges; i++) {
		const struct change *c = &h->changes[i];
		fprintf(f, "<tr><td>%s</td><td>%u</td><td>", ht_fmt_ns(b1, c->time_ns), c->tid);
		if (!c->cause)
			fprintf(f, "free of an mmapped chunk of %" PRIu64 " bytes", c->arg);
		else
			fprintf(f, "mallopt(%s, %" PRId64 ")", param_name(c->cause), (int64_t)c->arg);
		fprintf(f, "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td></tr>\n", c->mmap, c->trim);
	}
	fprintf(f, "</table>\n</section>\n");
}
