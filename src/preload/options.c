/* Options of the recorder, read from the environment through one table:
 * from HEAPTRAIL_OPTIONS="name=value,...,out=PATH" when it is set (what
 * `record` passes: the program's environment gets one variable, not one per
 * option), else from one variable per option (HEAPTRAIL_STACKS=64, ...: by
 * hand with LD_PRELOAD).  Booleans take 1/true/yes/on and 0/false/no/off;
 * sizes take K/M/G; times take ms/s.  A bad value is a warning on stderr
 * and the default stays.  Read at start-up, maybe inside the first malloc:
 * nothing here allocates. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"
#include "../common/pidpath.h"

struct ht_options ht_opt = {
	.out = "heaptrail.%p.ht",
	.start_paused = 0,
	.follow_exec = 0,
	.follow_fork = 1,
	.flush_interval_ms = 100,
	.rss_interval_ms = 10,
	.buffer_size = 65536,
	.toggle_signal = 0,
	.zstd_level = 1, /* while the writer keeps up (writer.c); 0: raw */
	.use_tsc = 1,
	.ts_every = 64,
	.quiet = 0,
	.writer_process = 1,
	.stack_depth = 0,
	.unwind_fp = 1,
	.sample_bytes = 0,
	.fast_path = 1,
	.self_write = 1, /* writer.c, self_drain: when no CPU is free for the helper */
	.slow_malloc = 1, /* until the options are read: see malloc_slow */
	.slow_free = 1,   /* (and until alloc.c knows the allocator) */
};

enum opt_type { OPT_BOOL, OPT_INT, OPT_SIZE, OPT_MSEC, OPT_PATH, OPT_CLOCK, OPT_WRITER, OPT_UNWIND };

struct opt_desc {
	const char *env;  /* environment variable */
	enum opt_type type; /* how its value is parsed */
	void *dst;        /* field of ht_opt */
	long min, max;    /* accepted range for numbers */
};

static const struct opt_desc descs[] = {
	{"HEAPTRAIL_OUT", OPT_PATH, ht_opt.out, 0, 0},
	{"HEAPTRAIL_START_PAUSED", OPT_BOOL, &ht_opt.start_paused, 0, 1},
	{"HEAPTRAIL_FOLLOW_EXEC", OPT_BOOL, &ht_opt.follow_exec, 0, 1},
	{"HEAPTRAIL_FOLLOW_FORK", OPT_BOOL, &ht_opt.follow_fork, 0, 1},
	{"HEAPTRAIL_FLUSH_INTERVAL", OPT_MSEC, &ht_opt.flush_interval_ms, 1, 60000},
	{"HEAPTRAIL_RSS_INTERVAL", OPT_MSEC, &ht_opt.rss_interval_ms, 0, 60000},
	{"HEAPTRAIL_BUFFER_SIZE", OPT_SIZE, &ht_opt.buffer_size, 4096, 1 << 19},
	{"HEAPTRAIL_TOGGLE_SIGNAL", OPT_BOOL, &ht_opt.toggle_signal, 0, 1},
	{"HEAPTRAIL_ZSTD_LEVEL", OPT_INT, &ht_opt.zstd_level, -7, 19},
	{"HEAPTRAIL_CLOCK", OPT_CLOCK, &ht_opt.use_tsc, 0, 1},
	{"HEAPTRAIL_TIMESTAMP_EVERY", OPT_INT, &ht_opt.ts_every, 1, 65536},
	{"HEAPTRAIL_QUIET", OPT_BOOL, &ht_opt.quiet, 0, 1},
	{"HEAPTRAIL_WRITER", OPT_WRITER, &ht_opt.writer_process, 0, 1},
	{"HEAPTRAIL_STACKS", OPT_INT, &ht_opt.stack_depth, 0, 256},
	{"HEAPTRAIL_UNWIND", OPT_UNWIND, &ht_opt.unwind_fp, 0, 2},
	{"HEAPTRAIL_SAMPLE_BYTES", OPT_SIZE, &ht_opt.sample_bytes, 0, 1L << 30},
	{"HEAPTRAIL_DURATIONS", OPT_BOOL, &ht_opt.durations, 0, 1},
	{"HEAPTRAIL_FAST_PATH", OPT_BOOL, &ht_opt.fast_path, 0, 1},
	{"HEAPTRAIL_SELF_WRITE", OPT_INT, &ht_opt.self_write, 0, 2},
	{"HEAPTRAIL_SCAN_DELAY_US", OPT_INT, &ht_opt.scan_delay_us, 0, 1000000},
};

/* stderr without stdio: stdio may allocate, and may be locked by the
 * program when we are called. */
void ht_msg(const char *fmt, ...)
{
	if (ht_opt.quiet)
		return;
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "heaptrail: ");
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	n += m;
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	ssize_t w = ht_sys_write(2, buf, (size_t)n);
	(void)w;
}

static int parse_bool(const char *v, int *out)
{
	static const char *yes[] = {"1", "true", "yes", "on"};
	static const char *no[] = {"0", "false", "no", "off"};
	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(v, yes[i]))
			return *out = 1, 0;
		if (!strcasecmp(v, no[i]))
			return *out = 0, 0;
	}
	return -1;
}

/* A number with an optional suffix: K/M/G (x1024) for sizes, ms/s for
 * times (default unit ms). */
static int parse_num(const char *v, enum opt_type type, long *out)
{
	char *end;
	long long n = strtoll(v, &end, 10);
	if (end == v)
		return -1;
	long long mul = 1;
	if (type == OPT_SIZE) {
		switch (*end) {
		case 'k': case 'K': mul = 1024, end++; break;
		case 'm': case 'M': mul = 1024 * 1024, end++; break;
		case 'g': case 'G': mul = 1024LL * 1024 * 1024, end++; break;
		}
		if (*end == 'B' || *end == 'b' || (*end == 'i' && end[1] == 'B'))
			end += (*end == 'i') ? 2 : 1;
	} else if (type == OPT_MSEC) {
		if (!strcmp(end, "ms"))
			end += 2;
		else if (!strcmp(end, "s"))
			mul = 1000, end++;
	}
	if (*end)
		return -1;
	*out = (long)(n * mul);
	return 0;
}

/* A relative output path names a file in the directory the program
 * started in, whatever directory it moves to later: a daemon's chdir("/")
 * before it forks, a wrapper's cd before it execs.  (getcwd by system
 * call: no malloc, no lock.)  A working directory that cannot be named
 * keeps the path relative. */
static void absolute_out(void)
{
	if (ht_opt.out[0] == '/')
		return;
	char cwd[sizeof(ht_opt.out)];
	long n = syscall(SYS_getcwd, cwd, sizeof(cwd));
	if (n <= 0 || cwd[0] != '/')
		return;
	const char *rel = ht_opt.out;
	while (rel[0] == '.' && rel[1] == '/')
		rel += 2;
	char abs[sizeof(ht_opt.out)];
	int len = snprintf(abs, sizeof(abs), "%s%s%s", cwd, cwd[1] ? "/" : "", rel);
	if (len > 0 && (size_t)len < sizeof(abs))
		memcpy(ht_opt.out, abs, (size_t)len + 1);
}

/* Sets option d from the text v; name is how the warning names it. */
static void set_option(const struct opt_desc *d, const char *v, const char *name)
{
	int ok = 0;
	long n = 0;
	switch (d->type) {
	case OPT_PATH:
		/* (a longer path is never cut to another name) */
		if (strlen(v) <= HT_PIDPATH_MAX) {
			strcpy(d->dst, v);
			ok = 1;
		}
		break;
	case OPT_BOOL: {
		int b;
		if (parse_bool(v, &b) == 0)
			*(int *)d->dst = b, ok = 1;
		break;
	}
	case OPT_CLOCK:
		if (!strcasecmp(v, "tsc"))
			*(int *)d->dst = 1, ok = 1;
		else if (!strcasecmp(v, "monotonic"))
			*(int *)d->dst = 0, ok = 1;
		break;
	case OPT_UNWIND:
		if (!strcasecmp(v, "auto"))
			*(int *)d->dst = 1, ok = 1;
		else if (!strcasecmp(v, "dwarf"))
			*(int *)d->dst = 0, ok = 1;
		else if (!strcasecmp(v, "check"))
			*(int *)d->dst = 2, ok = 1;
		break;
	case OPT_WRITER:
		if (!strcasecmp(v, "process"))
			*(int *)d->dst = 1, ok = 1;
		else if (!strcasecmp(v, "thread"))
			*(int *)d->dst = 0, ok = 1;
		break;
	case OPT_INT:
	case OPT_SIZE:
	case OPT_MSEC:
		if (parse_num(v, d->type, &n) == 0 && n >= d->min && n <= d->max) {
			if (d->type == OPT_INT)
				*(int *)d->dst = (int)n;
			else
				*(long *)d->dst = n;
			ok = 1;
		}
		break;
	}
	if (ok)
		return;
	if (d->type == OPT_BOOL)
		ht_msg("warning: %s=%s is not a boolean (1/true/yes/on, 0/false/no/off); "
		       "using the default", name, v);
	else if (d->type == OPT_CLOCK)
		ht_msg("warning: %s=%s: expected tsc or monotonic; using the default", name, v);
	else if (d->type == OPT_UNWIND)
		ht_msg("warning: %s=%s: expected auto, dwarf or check; using the default", name, v);
	else if (d->type == OPT_WRITER)
		ht_msg("warning: %s=%s: expected process or thread; using the default", name, v);
	else if (d->type == OPT_PATH)
		ht_msg("warning: %s is too long (%zu bytes; at most %d); using the default", name,
		       strlen(v), HT_PIDPATH_MAX);
	else
		ht_msg("warning: %s=%s: expected a number from %ld to %ld%s; using the default",
		       name, v, d->min, d->max,
		       d->type == OPT_SIZE ? " (K/M/G suffixes)"
		       : d->type == OPT_MSEC ? " ms (or with an ms/s suffix)" : "");
}

#define NDESCS (sizeof(descs) / sizeof(descs[0]))
#define PREFIX_LEN 10 /* "HEAPTRAIL_" */

/* The option of HEAPTRAIL_OPTIONS named key (klen bytes): the variable's
 * name without HEAPTRAIL_, in any case (stacks, sample_bytes, out). */
static const struct opt_desc *packed_desc(const char *key, size_t klen)
{
	for (size_t i = 0; i < NDESCS; i++) {
		const char *name = descs[i].env + PREFIX_LEN;
		if (strlen(name) == klen && !strncasecmp(name, key, klen))
			return &descs[i];
	}
	return NULL;
}

/* A whole number for the internal root= and image=. */
static int parse_pid(const char *v, int *out)
{
	long n;
	if (parse_num(v, OPT_INT, &n) < 0 || n < 0 || n > 1 << 30)
		return -1;
	*out = (int)n;
	return 0;
}

/* HEAPTRAIL_OPTIONS: items "name=value" separated by commas; out= takes
 * the rest of the text, commas included (a path may hold them), so it
 * comes last.  root= and image= are the recorder's own (exec'd images). */
static void load_packed(const char *p)
{
	while (*p) {
		const char *eq = strchr(p, '=');
		const char *comma = strchr(p, ',');
		if (!comma)
			comma = p + strlen(p);
		if (!eq || eq > comma) {
			if (comma > p)
				ht_msg("warning: " HT_OPTIONS_ENV ": '%.*s' is not name=value; ignored",
				       (int)(comma - p), p);
			p = *comma ? comma + 1 : comma;
			continue;
		}
		size_t klen = (size_t)(eq - p);
		const struct opt_desc *d = packed_desc(p, klen);
		char name[64];
		snprintf(name, sizeof(name), HT_OPTIONS_ENV ": %.*s", (int)klen, p);
		if (d && d->type == OPT_PATH) {
			set_option(d, eq + 1, name); /* to the end */
			return;
		}
		char v[64];
		size_t vlen = (size_t)(comma - eq - 1);
		snprintf(v, sizeof(v), "%.*s", (int)vlen, eq + 1);
		if (vlen >= sizeof(v))
			v[0] = '?'; /* too long for any value: a bad one */
		if (d) {
			set_option(d, v, name);
		} else if (klen == 4 && !strncmp(p, "root", 4)) {
			if (parse_pid(v, &ht_opt.root_pid) < 0)
				ht_msg("warning: %s=%s: expected a pid; ignored", name, v);
		} else if (klen == 5 && !strncmp(p, "image", 5)) {
			if (parse_pid(v, &ht_opt.image) < 0)
				ht_msg("warning: %s=%s: expected a number; ignored", name, v);
		} else {
			ht_msg("warning: %s: no such option; ignored", name);
		}
		p = *comma ? comma + 1 : comma;
	}
}

/* The options as they were before they were read: the defaults. */
static struct ht_options defaults;

void ht_options__load(void)
{
	defaults = ht_opt;
	const char *packed = getenv(HT_OPTIONS_ENV);
	if (packed) {
		load_packed(packed);
	} else {
		for (size_t i = 0; i < NDESCS; i++) {
			const struct opt_desc *d = &descs[i];
			const char *v = getenv(d->env);
			if (!v && d->type == OPT_PATH)
				v = getenv("MTRACE_CTL_FILE"); /* glibc tracer's name */
			if (v && *v)
				set_option(d, v, d->env);
		}
	}
	absolute_out();
#if !defined(__x86_64__) && !defined(__i386__)
	ht_opt.use_tsc = 0;
#endif
	/* A buffer holds whole records, and offsets fit HT_COMMIT_SHIFT bits. */
	ht_opt.buffer_size &= ~63L;
	if (ht_opt.sample_bytes && ht_sample__init() < 0) {
		ht_msg("warning: no memory for sampling; recording every allocation");
		ht_opt.sample_bytes = 0;
	}
	int general = !ht_opt.fast_path || ht_alloc_other; /* (alloc.c) */
	ht_opt.slow_malloc = ht_opt.stack_depth || ht_opt.sample_bytes || ht_opt.durations || general;
	ht_opt.slow_free = ht_opt.sample_bytes || ht_opt.durations || general;
}

int ht_options__entry(char *buf, size_t cap, int root_pid, int image)
{
	size_t n = 0;
#define PUT(...)                                                                      \
	do {                                                                          \
		int m_ = snprintf(buf + n, n < cap ? cap - n : 0, __VA_ARGS__);       \
		if (m_ < 0 || n + (size_t)m_ >= cap)                                 \
			return -1;                                                    \
		n += (size_t)m_;                                                      \
	} while (0)
	PUT(HT_OPTIONS_ENV "=");
	for (size_t i = 0; i < NDESCS; i++) {
		const struct opt_desc *d = &descs[i];
		size_t off = (size_t)((const char *)d->dst - (const char *)&ht_opt);
		const void *def = (const char *)&defaults + off;
		const char *key = d->env + PREFIX_LEN;
		char lower[32];
		size_t k = 0;
		for (; key[k] && k + 1 < sizeof(lower); k++)
			lower[k] = (char)(key[k] >= 'A' && key[k] <= 'Z' ? key[k] + 32 : key[k]);
		lower[k] = 0;
		switch (d->type) {
		case OPT_PATH:
			break; /* last */
		case OPT_BOOL:
		case OPT_INT:
			if (*(const int *)d->dst != *(const int *)def)
				PUT("%s=%d,", lower, *(const int *)d->dst);
			break;
		case OPT_SIZE:
		case OPT_MSEC:
			if (*(const long *)d->dst != *(const long *)def)
				PUT("%s=%ld,", lower, *(const long *)d->dst);
			break;
		case OPT_CLOCK:
		case OPT_UNWIND:
		case OPT_WRITER: {
			int v = *(const int *)d->dst;
			if (v == *(const int *)def)
				break;
			const char *word = d->type == OPT_CLOCK    ? (v ? "tsc" : "monotonic")
					   : d->type == OPT_UNWIND ? (v ? "auto" : "dwarf")
								   : (v ? "process" : "thread");
			PUT("%s=%s,", lower, word);
			break;
		}
		}
	}
	if (root_pid)
		PUT("root=%d,", root_pid);
	if (image)
		PUT("image=%d,", image);
	PUT("out=%s", ht_opt.out);
#undef PUT
	return 0;
}
