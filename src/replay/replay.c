/* Replay's library part: the allocators known by name and where their
 * libraries are (ht_allocator_lookup), the check of glibc tunables
 * (ht_tunables_check, for replay -t and for every compare -t set before
 * its first run), and a run's results as text or JSON (engine.c does the
 * run; heaptrail replay and compare drive it). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/json.h"
#include "common/outfile.h"
#include "common/util.h"
#include "replay.h"
#include "symbols/elfsyms.h"

/* ---- allocators ---- */

/* The allocators known by name: their libraries and Debian packages. */
static const struct {
	const char *name;     /* as given to --allocator */
	const char *libs[3];  /* sonames to look for, in order */
	const char *package;  /* what to install */
} known_allocators[] = {
	{"jemalloc", {"libjemalloc.so.2", "libjemalloc.so", NULL}, "libjemalloc2"},
	{"tcmalloc", {"libtcmalloc_minimal.so.4", "libtcmalloc.so.4", NULL}, "libtcmalloc-minimal4"},
	{"mimalloc", {"libmimalloc.so.2", "libmimalloc.so", NULL}, "libmimalloc2.0"},
};

/* Directories to look in: where libc lives, its /usr twin, the usual. */
static size_t lib_dirs(char dirs[][PATH_MAX], size_t max)
{
	size_t n = 0;
	Dl_info di;
	if (dladdr((void *)printf, &di) && di.dli_fname && strchr(di.dli_fname, '/')) {
		char *d = strdup(di.dli_fname);
		*strrchr(d, '/') = 0;
		snprintf(dirs[n++], PATH_MAX, "%s", d);
		if (strncmp(d, "/usr/", 5) != 0 && n < max)
			snprintf(dirs[n++], PATH_MAX, "/usr%s", d);
		free(d);
	}
	static const char *more[] = {"/usr/local/lib", "/usr/lib", "/usr/lib64", "/lib64"};
	for (size_t i = 0; i < sizeof(more) / sizeof(more[0]) && n < max; i++)
		snprintf(dirs[n++], PATH_MAX, "%s", more[i]);
	return n;
}

/* The library at path is one LD_PRELOAD can load here and it defines
 * malloc and free: else the run, re-executed under it, found malloc still
 * glibc's and failed after the workload was read (and in compare, after
 * every glibc run), where this is a usage error before anything runs. */
static int preloadable(const char *name, const char *path, char *err, size_t errlen)
{
	static const char *const need[] = {"malloc", "free", NULL};
	char why[256];
	if (ht_elf__preloadable(path, need, why, sizeof(why)) == 0)
		return 0;
	if (strcmp(name, path))
		snprintf(err, errlen,
			 "allocator library %s (%s): %s; give a preloadable allocator "
			 "library (one that defines malloc and free)",
			 name, path, why);
	else
		snprintf(err, errlen,
			 "allocator library %s: %s; give a preloadable allocator "
			 "library (one that defines malloc and free)",
			 name, why);
	return -1;
}

int ht_allocator_lookup(const char *name, char *path, size_t pathlen, char *err, size_t errlen)
{
	if (!strcmp(name, "glibc") || !strcmp(name, "libc") || !name[0]) {
		path[0] = 0;
		return 0;
	}
	if (strchr(name, '/')) {
		struct stat st;
		/* (errno is stale after a stat that worked) */
		int st_err = stat(name, &st) ? errno : 0;
		if (st_err || !S_ISREG(st.st_mode)) {
			snprintf(err, errlen, "allocator library %s: %s", name,
				 st_err ? strerror(st_err) : "not a regular file");
			return -1;
		}
		if (!realpath(name, path))
			snprintf(path, pathlen, "%s", name);
		/* the loader splits LD_PRELOAD at spaces and colons: such a
		 * path preloads pieces of it, and the run then found malloc
		 * elsewhere and asked whether the library defines it */
		if (strpbrk(path, " \t:")) {
			snprintf(err, errlen,
				 "allocator library %s: its path holds a space or ':', which "
				 "LD_PRELOAD takes as separators; link it from a path without "
				 "them (ln -s '%s' /tmp/liballoc.so) and give that",
				 name, path);
			return -1;
		}
		return preloadable(name, path, err, errlen);
	}
	for (size_t k = 0; k < sizeof(known_allocators) / sizeof(known_allocators[0]); k++) {
		if (strcmp(name, known_allocators[k].name))
			continue;
		char dirs[8][PATH_MAX];
		size_t nd = lib_dirs(dirs, 8);
		for (int l = 0; known_allocators[k].libs[l]; l++) {
			for (size_t d = 0; d < nd; d++) {
				snprintf(path, pathlen, "%s/%s", dirs[d], known_allocators[k].libs[l]);
				if (access(path, R_OK) == 0)
					return preloadable(name, path, err, errlen);
			}
		}
		snprintf(err, errlen, "allocator %s not found (no %s in %s or the usual library "
			 "directories); install it: apt-get install %s",
			 name, known_allocators[k].libs[0], dirs[0], known_allocators[k].package);
		return -1;
	}
	snprintf(err, errlen, "unknown allocator '%s': give glibc, jemalloc, tcmalloc, mimalloc, "
		 "or the path of a preloadable allocator library", name);
	return -1;
}

/* ---- tunables ---- */

/* PT_INTERP of this executable: the dynamic loader glibc runs it with. */
static int find_interp(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_INTERP) {
			*(const char **)arg =
			    (const char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
			return 1;
		}
	return 1; /* (the executable comes first) */
}

/* A tunable as the loader lists it: "NAME: VALUE (min: MIN, max: MAX)";
 * a string tunable has no range. */
struct tunable {
	char name[128];
	int ranged;            /* numeric: min and max below */
	uint64_t min, max;     /* its range */
	char smin[32], smax[32]; /* as the list prints them */
};

/* A number as glibc's loader reads a tunable's value whole: decimal, or
 * hexadecimal after 0x; 0 and *v set, or -1.  glibc reads a leading 0 as
 * octal, stops silently at the first other character (64K is 64, abc 0)
 * and takes a sign (-5 is 2^64 - 5): none of those is accepted. */
static int tunable_number(const char *s, size_t n, uint64_t *v)
{
	int base = 10;
	if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		base = 16, s += 2, n -= 2;
	else if (n == 0 || (n > 1 && s[0] == '0'))
		return -1;
	uint64_t x = 0;
	for (size_t i = 0; i < n; i++) {
		int d = s[i] >= '0' && s[i] <= '9'   ? s[i] - '0'
			: s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
			: s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 10
						     : 99;
		if (d >= base || __builtin_mul_overflow(x, (uint64_t)base, &x) ||
		    __builtin_add_overflow(x, (uint64_t)d, &x))
			return -1;
	}
	*v = x;
	return 0;
}

/* The tunables this glibc has, from its loader's --list-tunables (glibc
 * 2.33); NULL (nothing checked) where it has no such option. */
static struct tunable *list_tunables(const char **interp, size_t *count)
{
	*interp = NULL;
	*count = 0;
	dl_iterate_phdr(find_interp, interp);
	if (!*interp || strchr(*interp, '\''))
		return NULL;
	char cmd[PATH_MAX + 32];
	snprintf(cmd, sizeof(cmd), "'%s' --list-tunables 2>/dev/null", *interp);
	FILE *p = popen(cmd, "r");
	if (!p)
		return NULL;
	struct tunable *t = NULL;
	size_t n = 0;
	char line[512];
	while (fgets(line, sizeof(line), p)) {
		char *colon = strchr(line, ':');
		if (!colon || (size_t)(colon - line) >= sizeof(t->name))
			continue;
		t = ht_xrealloc(t, (n + 1) * sizeof(*t));
		struct tunable *e = &t[n++];
		memset(e, 0, sizeof(*e));
		memcpy(e->name, line, (size_t)(colon - line));
		const char *r = strstr(colon, "(min: ");
		if (r && sscanf(r, "(min: %31[^,], max: %31[^)])", e->smin, e->smax) == 2 &&
		    !tunable_number(e->smin, strlen(e->smin), &e->min) &&
		    !tunable_number(e->smax, strlen(e->smax), &e->max))
			e->ranged = 1;
	}
	if (pclose(p) != 0 || !n) { /* (an older glibc: not checked) */
		free(t);
		return NULL;
	}
	*count = n;
	return t;
}

/* Caps glibc's malloc puts on a tunable's value beyond the range its
 * loader lists (which is the type's, 0 to 2^64-1): a value above is
 * ignored by the setter (do_set_tcache_count, do_set_tcache_max), with no
 * word.  Of glibc 2.30 on, 64-bit (MAX_TCACHE_COUNT, MAX_TCACHE_SIZE). */
static const struct {
	const char *name;
	uint64_t max;
} setter_caps[] = {
	{"glibc.malloc.tcache_count", 65535},
	{"glibc.malloc.tcache_max", 1032},
};

static uint64_t setter_cap(const char *name, size_t len)
{
	int major = 0, minor = 0;
	if (sizeof(size_t) != 8 || sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor) != 2 ||
	    major != 2 || minor < 30) /* (tcache_count's cap was 127 before) */
		return UINT64_MAX;
	for (size_t i = 0; i < sizeof(setter_caps) / sizeof(setter_caps[0]); i++)
		if (strlen(setter_caps[i].name) == len && !memcmp(setter_caps[i].name, name, len))
			return setter_caps[i].max;
	return UINT64_MAX;
}

/* Each item NAME=VALUE, each NAME one this glibc has, and each value of
 * a numeric tunable a number within its range, as its dynamic loader
 * lists them (--list-tunables, glibc 2.33): glibc ignores a name it does
 * not know, and reads a value only as far as it is a number, so a typo
 * or "64K" (64 bytes) replayed something else than asked and reported it
 * as applied. */
int ht_tunables_check(const char *spec, const char *opt, char *err, size_t errlen)
{
	const char *interp;
	size_t nknown;
	struct tunable *known = list_tunables(&interp, &nknown);
	int bad = 0;
	/* every item refused, one after the other (it stopped at the first:
	 * a second typo came only once the first was mended) */
	size_t o = (size_t)snprintf(err, errlen, "%s %s: ", opt, spec);
#define SAY(...)                                                                                   \
	do {                                                                                       \
		if (bad++ && o + 2 < errlen)                                                        \
			o += (size_t)snprintf(err + o, errlen - o, "; ");                           \
		if (o < errlen)                                                                     \
			o += (size_t)snprintf(err + o, errlen - o, __VA_ARGS__);                     \
	} while (0)
	for (const char *it = spec; *it;) {
		size_t n = strcspn(it, ":");
		const char *eq = memchr(it, '=', n);
		if (!n) {
			SAY("an empty item (a ':' too many)");
		} else if (!eq || eq == it || eq + 1 == it + n) {
			SAY("expected NAME=VALUE, several joined by ':' (%.*s)", (int)n, it);
		} else if (known) {
			int nl = (int)(eq - it);
			const char *val = eq + 1;
			size_t vl = (size_t)(it + n - val);
			const struct tunable *k = NULL;
			for (size_t i = 0; i < nknown && !k; i++)
				if ((size_t)nl == strlen(known[i].name) &&
				    !memcmp(known[i].name, it, (size_t)nl))
					k = &known[i];
			uint64_t v, cap = k ? setter_cap(it, (size_t)nl) : UINT64_MAX;
			if (!k)
				SAY("this glibc has no tunable %.*s ('%s --list-tunables' lists them)", nl,
				    it, interp);
			else if (k->ranged && tunable_number(val, vl, &v))
				SAY("%.*s=%.*s is not a number as glibc reads one (a decimal without a "
				    "leading 0, or 0x and hexadecimal digits; no sign, no K/M/G: glibc "
				    "would read the start of it and ignore the rest): give a number from "
				    "%s to %s",
				    nl, it, (int)vl, val, k->smin, k->smax);
			else if (k->ranged && (v < k->min || v > k->max))
				SAY("%.*s=%.*s is out of its range, %s to %s ('%s --list-tunables'): glibc "
				    "would ignore it",
				    nl, it, (int)vl, val, k->smin, k->smax, interp);
			else if (k->ranged && v > cap)
				SAY("%.*s=%.*s is above %llu, the most glibc's malloc takes (its loader "
				    "lists the type's range, but the setter ignores a larger value, "
				    "silently)",
				    nl, it, (int)vl, val, (unsigned long long)cap);
		}
		it += n + (it[n] == ':');
	}
#undef SAY
	free(known);
	return bad ? -1 : 0;
}

void ht_tunables_warn_inherited(void)
{
	const char *env = getenv("GLIBC_TUNABLES");
	char err[1024];
	if (env && env[0] &&
	    ht_tunables_check(env, "GLIBC_TUNABLES from the environment,", err, sizeof(err)))
		ht_warning("%s; the runs go on with it as glibc reads it", err);
}

/* ---- output ---- */

/* 1234567 -> "1,234,567" (buf of 32) */
static const char *comma(char *buf, uint64_t v)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%" PRIu64, v), o = 0;
	for (int i = 0; i < n; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = tmp[i];
	}
	buf[o] = 0;
	return buf;
}

double ht_replay__avg(const struct ht_replay_result *res, int fn)
{
	return res->calls[fn] ? (double)res->call_cycles[fn] / (double)res->calls[fn] : 0;
}

uint64_t ht_replay__live_excess(const struct ht_replay_result *res)
{
	/* convert lets a thread run ahead of others' frees by up to 1/64 of
	 * the peak or 4 KiB (converter.c, LIVE_TOLERANCE) */
	uint64_t tol = res->ideal_bytes / 64 > 4096 ? res->ideal_bytes / 64 : 4096;
	uint64_t over = res->ideal_bytes + tol + res->live_slack_bytes;
	return res->live_peak_bytes > over ? res->live_peak_bytes - res->ideal_bytes : 0;
}

uint64_t ht_replay__call_cycles(const struct ht_replay_result *res)
{
	uint64_t t = 0;
	for (int f = 0; f < HT_FN_NR; f++)
		t += res->call_cycles[f];
	return t;
}

/* Engine time per op that is neither a call nor a wait, in ns. */
static double bookkeeping_ns(const struct ht_replay_result *res)
{
	uint64_t calls = ht_replay__call_cycles(res);
	if (!res->ops || res->tsc_per_ns <= 0 || res->busy_cycles < calls)
		return 0;
	return (double)(res->busy_cycles - calls) / res->tsc_per_ns / (double)res->ops;
}

void ht_replay__print_text(FILE *f, const struct ht_replay_result *res, const struct ht_workload *w)
{
	char a[32], b[32], c[32];
	fprintf(f, "%s cycles\n", comma(a, res->cycles));
	fprintf(f, "%s usec wall time\n", comma(a, res->wall_usec));
	fprintf(f, "%s usec across %u thread%s\n", comma(a, res->user_usec), res->nthreads,
		res->nthreads == 1 ? "" : "s");
	uint64_t grow = res->maxrss_end_kb - res->maxrss_start_kb;
	fprintf(f, "%s Kb Max RSS (%s -> %s)\n", comma(a, grow), comma(b, res->maxrss_start_kb),
		comma(c, res->maxrss_end_kb));
	fprintf(f, "%s Kb Max Ideal RSS\n", comma(a, (res->ideal_bytes + 1023) / 1024));
	fprintf(f, "\n");
	static const struct {
		int fn;
		const char *name;
		int width; /* of the average: the columns line up as trace_run's */
	} glibc_lines[] = {{HT_FN_MALLOC, "malloc", 6},
			   {HT_FN_CALLOC, "calloc", 6},
			   {HT_FN_REALLOC, "realloc", 5},
			   {HT_FN_FREE, "free", 8}};
	for (size_t i = 0; i < 4; i++) {
		int fn = glibc_lines[i].fn;
		fprintf(f, "Avg %s time: %*s in %10s calls\n", glibc_lines[i].name, glibc_lines[i].width,
			comma(a, (uint64_t)(ht_replay__avg(res, fn) + 0.5)), comma(b, res->calls[fn]));
	}
	fprintf(f, "Total call time: %s cycles\n", comma(a, ht_replay__call_cycles(res)));
	fprintf(f, "\n");
	fprintf(f, "%-15s %12s %11s %9s %9s %9s\n", "function", "calls", "avg cycles", "p50", "p99",
		"p99.9");
	for (int fn = 0; fn < HT_FN_NR; fn++) {
		if (!res->calls[fn])
			continue;
		char d[32], e[32];
		fprintf(f, "%-15s %12s %11.1f %9s %9s %9s\n", ht_wl_fn_names[fn], comma(a, res->calls[fn]),
			ht_replay__avg(res, fn), comma(b, res->pct_cycles[fn][0]),
			comma(d, res->pct_cycles[fn][1]), comma(e, res->pct_cycles[fn][2]));
	}
	fprintf(f, "\n");
	fprintf(f, "allocator: %s\n", res->allocator);
	const char *tun = getenv("GLIBC_TUNABLES"); /* (this run's: inherited, then --tunable) */
	if (tun && tun[0])
		fprintf(f, "glibc tunables: %s\n", tun);
	fprintf(f, "threads: %u, ops: %s, waits: %s (%s found the other thread behind, %.3f ms "
		   "blocked)\n",
		res->nthreads, comma(a, res->ops), comma(b, res->waits), comma(c, res->waits_blocked),
		res->tsc_per_ns > 0 ? (double)res->wait_cycles / res->tsc_per_ns / 1e6 : 0.0);
	if (res->repeat > 1)
		fprintf(f, "repeated: %u times\n", res->repeat);
	fprintf(f, "live peak: %s%s bytes requested in the replay%s, %s in the trace (the ideal)\n",
		res->live_slack_bytes ? "at most " : "", comma(a, res->live_peak_bytes),
		res->live_slack_bytes ? " (each thread counts its frees up to 16 KiB late)" : "",
		comma(b, res->ideal_bytes));
	if (ht_replay__live_excess(res))
		fprintf(f, "warning: the replay held %s bytes more live than the trace ever did: "
			   "its threads allocated before frees that came first in the trace, and "
			   "Max RSS charges the allocator for them (a workload converted before "
			   "heaptrail kept to the trace's peak? convert the trace again)\n",
			comma(a, ht_replay__live_excess(res)));
	if (res->slot_errors)
		fprintf(f, "warning: %s ops found their slot in the wrong state (an allocation failed "
			   "here that succeeded in the trace?)\n", comma(a, res->slot_errors));
	if (res->trims)
		fprintf(f, "malloc_trim (--trim-interval): %s calls\n", comma(a, res->trims));
	fprintf(f, "replay bookkeeping: %.1f ns/op (time in the engine, touching included, that is "
		   "neither a call nor a wait)\n",
		bookkeeping_ns(res));
	fprintf(f, "TSC: %.3f cycles/ns\n", res->tsc_per_ns);
	if (res->nrss)
		fprintf(f, "RSS: %s Kb at start, peak %s Kb (%u samples, every %.1f ms at the end)\n",
			comma(a, res->rss_start_kb), comma(b, res->rss_peak_kb), res->nrss,
			res->rss_interval_us / 1000.0);
	(void)w;
}

void ht_replay__print_json(FILE *f, const struct ht_replay_result *res,
			   const struct ht_rss_sample *rss, const char *workload)
{
	struct ht_json j;
	ht_json__init(&j, f, 1);
	ht_json__obj_begin(&j, NULL);
	ht_json__str(&j, "workload", workload);
	ht_json__str(&j, "allocator_library", res->allocator);
	const char *tun = getenv("GLIBC_TUNABLES");
	if (tun)
		ht_json__str(&j, "glibc_tunables", tun);
	else
		ht_json__null(&j, "glibc_tunables");
	ht_json__u64(&j, "threads", res->nthreads);
	ht_json__u64(&j, "repeat", res->repeat);
	ht_json__u64(&j, "cycles", res->cycles);
	ht_json__u64(&j, "wall_usec", res->wall_usec);
	ht_json__u64(&j, "cpu_usec", res->user_usec);
	ht_json__u64(&j, "cpu_sys_usec", res->sys_usec);
	ht_json__u64(&j, "max_rss_kb", res->maxrss_end_kb);
	ht_json__u64(&j, "max_rss_start_kb", res->maxrss_start_kb);
	ht_json__u64(&j, "max_rss_growth_kb", res->maxrss_end_kb - res->maxrss_start_kb);
	ht_json__u64(&j, "rss_start_kb", res->rss_start_kb);
	ht_json__u64(&j, "rss_peak_kb", res->rss_peak_kb);
	ht_json__u64(&j, "max_ideal_rss_bytes", res->ideal_bytes);
	ht_json__u64(&j, "live_peak_bytes", res->live_peak_bytes);
	ht_json__u64(&j, "live_peak_slack_bytes", res->live_slack_bytes);
	ht_json__u64(&j, "live_excess_bytes", ht_replay__live_excess(res));
	ht_json__u64(&j, "total_call_cycles", ht_replay__call_cycles(res));
	ht_json__obj_begin(&j, "calls");
	for (int fn = 0; fn < HT_FN_NR; fn++)
		ht_json__u64(&j, ht_wl_fn_names[fn], res->calls[fn]);
	ht_json__obj_end(&j);
	ht_json__obj_begin(&j, "avg_cycles");
	for (int fn = 0; fn < HT_FN_NR; fn++)
		ht_json__double(&j, ht_wl_fn_names[fn], ht_replay__avg(res, fn));
	ht_json__obj_end(&j);
	static const char *pk[HT_NPCT] = {"p50_cycles", "p99_cycles", "p999_cycles"};
	for (int k = 0; k < HT_NPCT; k++) {
		ht_json__obj_begin(&j, pk[k]);
		for (int fn = 0; fn < HT_FN_NR; fn++)
			if (res->calls[fn])
				ht_json__u64(&j, ht_wl_fn_names[fn], res->pct_cycles[fn][k]);
		ht_json__obj_end(&j);
	}
	ht_json__u64(&j, "ops", res->ops);
	ht_json__u64(&j, "waits", res->waits);
	ht_json__u64(&j, "waits_blocked", res->waits_blocked);
	ht_json__u64(&j, "wait_cycles", res->wait_cycles);
	ht_json__u64(&j, "spawn_wait_cycles", res->spawn_wait_cycles);
	ht_json__u64(&j, "spawn_lends", res->spawn_lends);
	ht_json__u64(&j, "busy_cycles", res->busy_cycles);
	ht_json__double(&j, "bookkeeping_ns_per_op", bookkeeping_ns(res));
	ht_json__u64(&j, "trim_calls", res->trims);
	ht_json__u64(&j, "slot_errors", res->slot_errors);
	ht_json__double(&j, "tsc_per_ns", res->tsc_per_ns);
	ht_json__obj_begin(&j, "rss");
	ht_json__u64(&j, "interval_us", res->rss_interval_us);
	ht_json__arr_begin(&j, "samples");
	for (uint32_t i = 0; i < res->nrss; i++) {
		ht_json__arr_begin(&j, NULL);
		ht_json__u64(&j, NULL, rss[i].ms);
		ht_json__u64(&j, NULL, rss[i].kb);
		ht_json__arr_end(&j);
	}
	ht_json__arr_end(&j);
	ht_json__obj_end(&j);
	ht_json__obj_end(&j);
	ht_json__finish(&j);
}
