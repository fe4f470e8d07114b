/* heaptrail export --format massif: valgrind massif's out-file format, for
 * ms_print and massif-visualizer.  The trace is read twice: once to find
 * its length in the chosen time unit and the moment the heap peaked, once
 * to take the snapshots: about --snapshots of them at regular steps of
 * that unit (each taken at the first event at or past its step, so that
 * its figures are exact), every --detailed-freq-th with the tree of
 * allocation sites, and the peak, detailed.  The steps are fractions of
 * the length, and ms steps are taken on the nanosecond clock: a trace
 * shorter than --snapshots units (a 5 ms run) still gets its regular
 * snapshots (whole steps of the unit gave it none, and a length just
 * under twice --snapshots got twice as many).
 *
 * The file:
 *   desc: ...              (massif's arguments; ours)
 *   cmd: the traced command
 *   time_unit: i|ms|B
 *   #-----------
 *   snapshot=N
 *   #-----------
 *   time=T
 *   mem_heap_B=live requested bytes
 *   mem_heap_extra_B=live usable bytes - requested bytes
 *   mem_stacks_B=0
 *   heap_tree=empty|detailed|peak
 *   nK: BYTES (heap allocation functions) malloc/new/new[], --alloc-fns, etc.
 *    nK: BYTES 0xADDR: function (file:line)      children biggest first,
 *     ...                                          one space deeper each
 *    n0: BYTES in N places, all below massif's threshold (1.00%) */
#define _GNU_SOURCE
#include "export.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/blocks.h"
#include "analyze/pass.h"
#include "common/util.h"

enum unit { U_CALLS, U_MS, U_BYTES };

/* One reading of the trace. */
struct pass {
	struct ht_pass *blocks; /* live blocks, aux = stack */
	enum unit unit;         /* the time unit */
	uint64_t heap, usable;  /* live requested / usable bytes */
	uint64_t bytes;         /* allocated + freed so far (unit B) */
	uint64_t calls;         /* heap calls so far (unit i): malloc-family and free */
	uint64_t ms;            /* the last event's time in ms (unit ms) */
	uint64_t ns;            /* and in ns (the clock of the ms steps) */
	uint64_t events;        /* events read (the peak's place in the trace) */
	uint64_t peak;          /* the most live bytes so far */
	uint64_t peak_event;    /* events read when it was reached */
};

static void on_acquire(void *ctx, const struct ht_event *e, const struct ht_block *b)
{
	(void)e;
	struct pass *p = ctx;
	p->heap += b->size * b->weight;
	p->usable += b->usable * b->weight;
	p->bytes += b->size * b->weight;
	if (p->heap > p->peak) {
		p->peak = p->heap;
		p->peak_event = p->events;
	}
}

static void on_release(void *ctx, const struct ht_event *e, const struct ht_block *b)
{
	(void)e;
	struct pass *p = ctx;
	p->heap -= b->size * b->weight;
	p->usable -= b->usable * b->weight;
	p->bytes += b->size * b->weight;
}

/* Applies e; the pass's clock moves on.  Unit i counts the heap calls
 * (the malloc family and free, failed ones and free(NULL) too; a moving
 * realloc once), massif's "instructions" being none a trace has: not the
 * program break moves, marks, threads and mappings the trace also holds.
 * In a sampled trace a call counts as the calls it stands for, as stats
 * counts them: an allocation or realloc by the pass's weight, a free by
 * that of the block it frees; so that the axis ends at stats' sum. */
static void step(struct pass *p, const struct ht_event *e)
{
	struct ht_block_cbs cbs = {on_release, on_acquire, p};
	const struct ht_blockop *op = ht_pass__event(p->blocks, e);
	p->events++;
	if (e->kind >= HT_EV_MALLOC && e->kind <= HT_EV_PVALLOC && ht_event__is_call(e))
		p->calls +=
		    e->kind == HT_EV_FREE && op->released ? op->released->weight : op->weight;
	p->ns = e->time_ns;
	p->ms = e->time_ns / 1000000;
	if (e->kind == HT_EV_CONTROL && e->v[0] == HT_CTL_RESET)
		p->heap = p->usable = 0; /* the blocks before are forgotten */
	ht_blockop__callbacks(op, e, &cbs);
}

static uint64_t now(const struct pass *p)
{
	return p->unit == U_CALLS ? p->calls : p->unit == U_MS ? p->ms : p->bytes;
}

/* The clock the steps are measured on: the unit's, but nanoseconds for
 * ms (the time written is still whole ms, as massif writes it). */
static uint64_t clock_of(const struct pass *p)
{
	return p->unit == U_MS ? p->ns : now(p);
}

/* The first of the regular steps at k * end / nsteps (k = 1..nsteps,
 * rounded up) that lies past clock c; UINT64_MAX when none is left. */
static uint64_t next_step(uint64_t c, uint64_t end, uint64_t nsteps)
{
	if (!end || c >= end)
		return UINT64_MAX;
	unsigned __int128 k = (unsigned __int128)c * nsteps / end + 1; /* (k <= nsteps) */
	return (uint64_t)((k * end + nsteps - 1) / nsteps);
}

/* s on one line: a control character (a newline in the command's
 * arguments or the trace's name) as a space, for massif's line format. */
static void put_flat(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc((unsigned char)*s < 0x20 || *s == 0x7f ? ' ' : *s, f);
}

static void write_site(FILE *f, const struct ht_site *s, size_t depth, uint64_t total,
		       double threshold)
{
	size_t sig = 0, insig = 0;
	uint64_t insig_bytes = 0;
	for (size_t i = 0; i < s->nkids; i++) {
		if (total && (double)s->kids[i].bytes * 100.0 >= threshold * (double)total)
			sig++;
		else {
			insig++;
			insig_bytes += s->kids[i].bytes;
		}
	}
	fprintf(f, "%*sn%zu: %llu ", (int)depth, "", sig + (insig > 0),
		(unsigned long long)s->bytes);
	if (!depth)
		fprintf(f, "(heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n");
	else
		fprintf(f, "0x%llX: %s\n", (unsigned long long)s->ip, s->label);
	for (size_t i = 0; i < s->nkids; i++) /* biggest first: the significant ones lead */
		if (total && (double)s->kids[i].bytes * 100.0 >= threshold * (double)total)
			write_site(f, &s->kids[i], depth + 1, total, threshold);
	if (insig)
		fprintf(f, "%*sn0: %llu in %zu place%s, %sbelow massif's threshold (%.2f%%)\n",
			(int)depth + 1, "", (unsigned long long)insig_bytes, insig,
			insig > 1 ? "s" : "", insig > 1 ? "all " : "", threshold);
}

struct massif {
	FILE *f;                   /* output */
	const struct ht_export_opts *o; /* options */
	struct ht_reader *r;       /* the second pass's reader (stacks) */
	struct ht_symbolizer *sym; /* for the trees */
	uint64_t nsnap;            /* snapshots written */
	uint64_t last_clock;       /* clock_of the last one */
	uint64_t last_events;      /* events read when it was taken */
};

static void snapshot(struct massif *m, const struct pass *p, const char *tree)
{
	FILE *f = m->f;
	fprintf(f, "#-----------\nsnapshot=%llu\n#-----------\n", (unsigned long long)m->nsnap++);
	fprintf(f, "time=%llu\nmem_heap_B=%llu\nmem_heap_extra_B=%llu\nmem_stacks_B=0\n",
		(unsigned long long)now(p), (unsigned long long)p->heap,
		(unsigned long long)(p->usable > p->heap ? p->usable - p->heap : 0));
	fprintf(f, "heap_tree=%s\n", tree);
	m->last_clock = clock_of(p);
	m->last_events = p->events;
	if (!strcmp(tree, "empty"))
		return;
	struct ht_sitetree t;
	ht_sitetree__build(&t, ht_pass__live(p->blocks), m->r, m->sym, m->o->depth);
	uint64_t total = p->usable > p->heap ? p->usable : p->heap;
	write_site(f, &t.root, 0, total, m->o->threshold);
	ht_sitetree__free(&t);
}

/* A regular snapshot, detailed every detailed_freq-th. */
static void regular(struct massif *m, const struct pass *p)
{
	uint64_t freq = m->o->detailed_freq;
	snapshot(m, p, freq && m->nsnap % freq == freq - 1 ? "detailed" : "empty");
}

int ht_export__massif(const struct ht_export_opts *o, FILE *f)
{
	enum unit unit;
	if (!strcmp(o->time_unit, "B"))
		unit = U_BYTES;
	else if (!strcmp(o->time_unit, "ms"))
		unit = U_MS;
	else
		unit = U_CALLS; /* "i", checked by the command */
	struct pass p1 = {.unit = unit}, p2 = {.unit = unit};
	p1.blocks = ht_pass__new();
	p2.blocks = ht_pass__new();
	struct massif m = {.f = f, .o = o};
	struct ht_reader *r1 = NULL;
	struct ht_event e;
	int ret = HT_EXIT_DATA, damaged = 0;
	if (!(r1 = ht_analyze__open(o->trace)))
		goto cleanup;
	while (ht_analyze__next(r1, &e))
		step(&p1, &e);
	damaged = ht_analyze__finish_pass(r1, o->trace, 0, ht_pass__pauses(p1.blocks)) != 0; /* then up to the damage */
	ht_pass__delete(p1.blocks); /* (its blocks are not needed again) */
	p1.blocks = ht_pass__new();
	/* the symbolizer knows every module once the whole trace is read */
	ret = HT_EXIT_DATA;
	if (!(m.sym = ht_blocks__symbolizer(r1, o->sysroot, o->debug_dir)))
		goto cleanup;
	if (!(m.r = ht_analyze__open(o->trace)))
		goto cleanup;
	/* the second pass's progress counts its own events, at its own rate
	 * (it counted on from the first's: 32.9 M events on a trace of 20 M,
	 * probe V) */
	ht_analyze__progress_restart();
	const struct ht_trace_info *in = ht_reader__info(m.r);
	/* n regular snapshots: time 0, then n - 1 steps to the end (the
	 * command refuses fewer than 2) */
	uint64_t end = clock_of(&p1), nsteps = o->snapshots > 1 ? o->snapshots - 1 : 1;
	uint64_t next = next_step(0, end, nsteps);
	char note[256];
	ht_analyze__order_note(r1, note, sizeof(note));
	fprintf(f, "desc: heaptrail export --format massif --time-unit %s%s (of ", o->time_unit,
		unit == U_CALLS ? " (i: heap calls, not instructions)" : "");
	put_flat(f, o->trace);
	char snote[256];
	ht_analyze__sample_note(in, snote, sizeof(snote));
	fprintf(f, ")%s%s%s%s\ncmd: ", *note ? "; " : "", note, *snote ? "; " : "", snote);
	put_flat(f, in->cmdline && *in->cmdline ? in->cmdline : "?");
	fprintf(f, "\ntime_unit: %s\n", o->time_unit);
	regular(&m, &p2); /* the empty heap at time 0 */
	while (ht_analyze__next(m.r, &e)) {
		step(&p2, &e);
		uint64_t c = clock_of(&p2);
		if (p1.peak && p2.events == p1.peak_event)
			snapshot(&m, &p2, "peak");
		else if (c >= next)
			regular(&m, &p2);
		else
			continue;
		if (c >= next)
			next = next_step(c, end, nsteps); /* the steps this one covered are done */
	}
	ret = damaged || ht_reader__error(m.r) ? HT_EXPORT_DAMAGED : HT_EXIT_OK;
	/* the end, unless the last snapshot was taken after the last event
	 * (with --time-unit ms, many events share a clock: the heap after
	 * the last of them was left out when an earlier one's snapshot had
	 * the same time) */
	if (m.last_events != p2.events || m.nsnap == 1)
		regular(&m, &p2); /* the end */
cleanup:
	ht_symbolizer__free(m.sym);
	ht_reader__close(m.r);
	ht_reader__close(r1);
	ht_pass__delete(p1.blocks);
	ht_pass__delete(p2.blocks);
	return ret;
}
