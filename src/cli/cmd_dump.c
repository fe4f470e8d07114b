/* heaptrail dump: every event, one line each. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "cli/builtin.h"
#include "common/json.h"
#include "common/options.h"
#include "common/util.h"

struct dump_config {
	const char *tids;  /* --tid: comma-separated thread ids (all) */
	const char *kinds; /* --kind: comma-separated kinds (all) */
	uint64_t from;     /* --from: start time, ns since start (0) */
	uint64_t to;       /* --to: end time (end of trace) */
	uint64_t limit;    /* --limit: stop after N events (no limit: UINT64_MAX) */
	int json;          /* --json: JSON lines */
	int quiet;             /* -q: no progress line, no warnings about the trace's state */
};

static const char usage_text[] =
	"usage: heaptrail dump [options] TRACE\n"
	"\n"
	"Prints the events of a trace in time order, one per line:\n"
	"  TIME(s) TID SEQ KIND field=value ... [= result ...] [flags]\n"
	"\fEXAMPLES\n"
	"  heaptrail dump app.ht | less\n"
	"  heaptrail dump --kind malloc,free --tid 4242 app.ht\n"
	"  heaptrail dump --kind mmap,munmap,brk,sbrk,heap_break --from 1.5s --to 2s app.ht\n"
	"  heaptrail dump --json app.ht | jq -c 'select(.kind==\"realloc\")'\n";

#define DUMP_MAX_TIDS 256

/* Parses --tid: thread ids separated by commas; -1 with a message if bad. */
static int parse_tids(const char *list, uint32_t *tids, size_t *n)
{
	const char *p = list;
	*n = 0;
	while (*p) {
		char *end;
		errno = 0;
		unsigned long v = strtoul(p, &end, 10);
		if (end == p || (*end && *end != ',') || errno || v == 0 || v > UINT32_MAX ||
		    *p == '-' || *p == '+') {
			ht_error("--tid: '%s' is not a list of thread ids (example: --tid 4242,4243)", list);
			return -1;
		}
		if (*n == DUMP_MAX_TIDS) {
			ht_error("--tid: at most %d thread ids", DUMP_MAX_TIDS);
			return -1;
		}
		tids[(*n)++] = (uint32_t)v;
		p = *end ? end + 1 : end;
	}
	if (!*n) {
		ht_error("--tid: no thread id given (example: --tid 4242,4243)");
		return -1;
	}
	return 0;
}

/* Whether --tid keeps the thread's events; seen[i]: tids[i] had one. */
static int tid_selected(const uint32_t *tids, size_t n, uint32_t tid, uint8_t *seen)
{
	if (!n)
		return 1;
	for (size_t i = 0; i < n; i++)
		if (tids[i] == tid) {
			seen[i] = 1;
			return 1;
		}
	return 0;
}

/* A --tid thread with no event in the trace (read to its end): said as top
 * and flamegraph say it, for an empty output was all there was. */
static int tid_missing(const uint32_t *tids, size_t n, const uint8_t *seen, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (!seen[i]) {
			ht_error("--tid=%u: no event of thread %u in %s (its threads: 'heaptrail "
				 "stats %s' lists them)",
				 tids[i], tids[i], path, path);
			return 1;
		}
	return 0;
}

/* Walks the field names of a kind alongside its values. */
static const char *next_name(const char **names, char *buf, size_t len)
{
	const char *p = *names;
	size_t n = strcspn(p, ",");
	if (n >= len)
		n = len - 1;
	memcpy(buf, p, n);
	buf[n] = 0;
	*names = p[n] ? p + n + 1 : p + n;
	return buf;
}

/* One line of text output, formatted by hand: printf's format parsing
 * was most of the time of a dump.  Writes what printf would. */
struct line {
	char b[4096]; /* the line (a string field is at most HT_MAX_STR bytes) */
	size_t n;     /* bytes used */
};

static void put_str(struct line *l, const char *s)
{
	size_t k = strlen(s);
	memcpy(l->b + l->n, s, k);
	l->n += k;
}

/* v in decimal, at least width digits (zero-padded) */
static void put_u64(struct line *l, uint64_t v, int width)
{
	char t[24];
	int k = 0;
	do {
		t[k++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (k < width)
		t[k++] = '0';
	while (k)
		l->b[l->n++] = t[--k];
}

static void put_i64(struct line *l, int64_t v)
{
	if (v < 0) {
		l->b[l->n++] = '-';
		put_u64(l, 0 - (uint64_t)v, 0);
	} else {
		put_u64(l, (uint64_t)v, 0);
	}
}

static void put_hex(struct line *l, uint64_t v)
{
	char t[16];
	int k = 0;
	do {
		t[k++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	l->b[l->n++] = '0';
	l->b[l->n++] = 'x';
	while (k)
		l->b[l->n++] = t[--k];
}

/* " name=" */
static void put_name(struct line *l, const char *name)
{
	l->b[l->n++] = ' ';
	put_str(l, name);
	l->b[l->n++] = '=';
}

static void print_text(const struct ht_event *e)
{
	const struct ht_kind_desc *d = &ht_kind_descs[e->kind];
	struct line l;
	l.n = 0;
	put_u64(&l, e->time_ns / 1000000000ull, 0);
	l.b[l.n++] = '.';
	put_u64(&l, e->time_ns % 1000000000ull, 9);
	l.b[l.n++] = ' ';
	put_u64(&l, e->tid, 0);
	l.b[l.n++] = ' ';
	put_u64(&l, e->seq, 0);
	l.b[l.n++] = ' ';
	put_str(&l, d->name);
	const char *names = d->names;
	int vi = 0;
	for (const char *f = d->fields; *f; f++) {
		char name[32];
		next_name(&names, name, sizeof(name));
		if (f - d->fields == d->result)
			put_str(&l, " =");
		if (*f == 'S') {
			put_name(&l, name);
			l.b[l.n++] = '"';
			put_str(&l, e->str ? e->str : "");
			l.b[l.n++] = '"';
			continue;
		}
		uint64_t v = e->v[vi++];
		switch (*f) {
		case 'p':
			put_name(&l, name);
			put_hex(&l, v);
			break;
		case 's':
			put_name(&l, name);
			put_i64(&l, (int64_t)v);
			break;
		case 'U':
			if (e->usable) {
				put_name(&l, name);
				put_u64(&l, e->usable, 0);
			}
			break;
		default:
			put_name(&l, name);
			put_u64(&l, v, 0);
		}
	}
	if (e->duration && !strchr(d->fields, 'd')) { /* record --durations */
		put_str(&l, " duration=");
		put_u64(&l, e->duration, 0);
	}
	if (e->flags & HT_F_MMAPPED)
		put_str(&l, " [mmapped]");
	if (e->flags & HT_F_NONMAIN)
		put_str(&l, " [non-main-arena]");
	if (e->stack) {
		put_str(&l, " stack=");
		put_u64(&l, e->stack, 0);
	}
	l.b[l.n++] = '\n';
	fwrite(l.b, 1, l.n, stdout);
}

static void print_json(struct ht_json *j, const struct ht_event *e)
{
	const struct ht_kind_desc *d = &ht_kind_descs[e->kind];
	ht_json__obj_begin(j, NULL);
	ht_json__u64(j, "time_ns", e->time_ns);
	ht_json__u64(j, "tid", e->tid);
	ht_json__u64(j, "seq", e->seq);
	ht_json__str(j, "kind", d->name);
	const char *names = d->names;
	int vi = 0;
	for (const char *f = d->fields; *f; f++) {
		char name[32];
		next_name(&names, name, sizeof(name));
		if (*f == 'S') {
			ht_json__str(j, name, e->str ? e->str : "");
			continue;
		}
		uint64_t v = e->v[vi++];
		if (*f == 's')
			ht_json__i64(j, name, (int64_t)v);
		else if (*f == 'U')
			ht_json__u64(j, name, e->usable);
		else
			ht_json__u64(j, name, v);
	}
	if (e->duration && !strchr(d->fields, 'd')) /* record --durations */
		ht_json__u64(j, "duration", e->duration);
	if (e->flags & HT_F_MMAPPED)
		ht_json__bool(j, "mmapped", 1);
	if (e->flags & HT_F_NONMAIN)
		ht_json__bool(j, "non_main_arena", 1);
	if (e->stack)
		ht_json__u64(j, "stack", e->stack);
	ht_json__obj_end(j);
	ht_json__finish(j);
}

int cmd_dump(int argc, char **argv)
{
	struct dump_config cfg = {.to = UINT64_MAX, .limit = UINT64_MAX};
	const struct ht_option opts[] = {
		{0, "tid", HT_OPT_STRING, &cfg.tids, "TIDS", "only these threads (comma-separated)"},
		{'k', "kind", HT_OPT_STRING, &cfg.kinds, "KINDS", "only these kinds: malloc,free,... or alloc, shm, thread"},
		{0, "from", HT_OPT_DURATION, &cfg.from, "TIME", "from this time since the start (0)"},
		{0, "to", HT_OPT_DURATION, &cfg.to, "TIME", "up to this time (the end)"},
		{'n', "limit", HT_OPT_U64, &cfg.limit, "N", "at most N events"},
		{0, "json", HT_OPT_FLAG, &cfg.json, NULL, "one JSON object per line"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no progress line, no warning for traces not closed cleanly or not in exact order"},
		HT_OPT_THREADS,
		{0},
	};
	int ret = HT_EXIT_USAGE;
	struct ht_reader *r = NULL;
	uint64_t kinds = ~0ull;
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs != 1) {
		ht_error("%s; usage: heaptrail dump [options] TRACE", nargs ? "one trace at a time" : "no trace given");
		goto cleanup;
	}
	if (cfg.to < cfg.from) { /* (--to 0 too: a time, the default is UINT64_MAX) */
		ht_error("--to must come after --from"); /* (one wording for all: probe V) */
		goto cleanup;
	}
	if (!cfg.limit) {
		ht_error("-n 0: give 1 or more events, or leave -n out for all of them");
		goto cleanup;
	}
	if (cfg.kinds && ht_parse_kinds(cfg.kinds, &kinds, NULL) < 0)
		goto cleanup;
	uint32_t tids[DUMP_MAX_TIDS];
	uint8_t seen[DUMP_MAX_TIDS] = {0};
	size_t ntids = 0;
	if (cfg.tids && parse_tids(cfg.tids, tids, &ntids) < 0)
		goto cleanup;
	r = ht_analyze__open(argv[0]);
	if (!r) {
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	if (ht_analyze__from_past_end(ht_reader__info(r), cfg.from, argv[0]))
		goto cleanup; /* (exit 2, as heap and timeline) */
	struct ht_json j;
	ht_json__init(&j, stdout, 0);
	struct ht_event e;
	uint64_t shown = 0;
	int whole = 1; /* read to the end (not stopped by -n) */
	while (ht_analyze__next(r, &e)) {
		if (e.part == HT_PART_RELEASE)
			continue; /* shown once, at its end, with its duration */
		if (!tid_selected(tids, ntids, e.tid, seen) || !(kinds >> e.kind & 1) ||
		    e.time_ns < cfg.from || e.time_ns > cfg.to)
			continue;
		if (cfg.json)
			print_json(&j, &e);
		else
			print_text(&e);
		if (++shown >= cfg.limit) {
			whole = 0;
			break;
		}
	}
	fflush(stdout);
	ret = ht_analyze__finish(r, argv[0], 0);
	if (!ret && whole && tid_missing(tids, ntids, seen, argv[0]))
		ret = HT_EXIT_USAGE;
cleanup:
	ht_reader__close(r);
	return ret;
}
