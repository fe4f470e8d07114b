/* heaptrail replay (trace_run): runs a workload under an allocator and
 * tunables of the user's choice and reports what it cost (engine.c does
 * the run).
 *
 * Another allocator or GLIBC_TUNABLES must be in place before the process
 * starts, so replay re-executes itself with LD_PRELOAD and GLIBC_TUNABLES
 * set, and the child checks that malloc really comes from the library it
 * asked for. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/builtin.h"
#include "common/json.h"
#include "common/options.h"
#include "common/outfile.h"
#include "common/util.h"
#include "replay.h"

#define CHILD_ENV "HEAPTRAIL_REPLAY_ALLOCATOR" /* set in the re-executed replay */

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

int ht_allocator_lookup(const char *name, char *path, size_t pathlen, char *err, size_t errlen)
{
	if (!strcmp(name, "glibc") || !strcmp(name, "libc") || !name[0]) {
		path[0] = 0;
		return 0;
	}
	if (strchr(name, '/')) {
		struct stat st;
		if (stat(name, &st) || !S_ISREG(st.st_mode)) {
			snprintf(err, errlen, "allocator library %s: %s", name,
				 errno ? strerror(errno) : "not a regular file");
			return -1;
		}
		if (!realpath(name, path))
			snprintf(path, pathlen, "%s", name);
		return 0;
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
					return 0;
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

/* The file of the library whose malloc this process calls. */
static const char *malloc_owner(void)
{
	Dl_info di;
	void *m = dlsym(RTLD_DEFAULT, "malloc");
	if (m && dladdr(m, &di) && di.dli_fname)
		return di.dli_fname;
	return "?";
}

/* ---- mallopt ---- */

static const struct {
	const char *name; /* without M_ */
	int param;        /* for mallopt() */
} mallopt_params[] = {
	{"MXFAST", M_MXFAST},		{"TRIM_THRESHOLD", M_TRIM_THRESHOLD},
	{"TOP_PAD", M_TOP_PAD},		{"MMAP_THRESHOLD", M_MMAP_THRESHOLD},
	{"MMAP_MAX", M_MMAP_MAX},	{"CHECK_ACTION", M_CHECK_ACTION},
	{"PERTURB", M_PERTURB},		{"ARENA_TEST", M_ARENA_TEST},
	{"ARENA_MAX", M_ARENA_MAX},
};

/* Applies "PARAM=VALUE,..." (M_ prefix optional, case ignored, K/M/G on
 * the value); -1 naming the bad one. */
static int apply_mallopts(const char *list, int dry)
{
	char *copy = strdup(list), *save = NULL;
	int ret = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq) {
			ht_error("--mallopt '%s': expected PARAM=VALUE, e.g. M_MMAP_THRESHOLD=65536", tok);
			ret = -1;
			break;
		}
		*eq = 0;
		const char *nm = !strncasecmp(tok, "M_", 2) ? tok + 2 : tok;
		int param = 0, found = 0;
		for (size_t i = 0; i < sizeof(mallopt_params) / sizeof(mallopt_params[0]); i++)
			if (!strcasecmp(nm, mallopt_params[i].name))
				param = mallopt_params[i].param, found = 1;
		char *end;
		if (!found) {
			long v = strtol(tok, &end, 0);
			if (*tok && !*end)
				param = (int)v, found = 1;
		}
		uint64_t val;
		int neg = eq[1] == '-';
		if (!found || ht_parse_size(eq + 1 + neg, &val) || val > INT32_MAX) {
			ht_error("--mallopt %s=%s: %s", tok, eq + 1,
				 found ? "the value must be a number (K/M/G allowed)"
				       : "unknown parameter; use M_MXFAST, M_TRIM_THRESHOLD, M_TOP_PAD, "
					 "M_MMAP_THRESHOLD, M_MMAP_MAX, M_PERTURB, M_ARENA_TEST, "
					 "M_ARENA_MAX or a number");
			ret = -1;
			break;
		}
		if (!dry && mallopt(param, neg ? -(int)val : (int)val) != 1)
			ht_warning("mallopt(%s, %s) failed", tok, eq + 1);
	}
	free(copy);
	return ret;
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
		const char *label;
	} glibc_lines[] = {{HT_FN_MALLOC, "Avg malloc time: %6s in %10s calls\n"},
			   {HT_FN_CALLOC, "Avg calloc time: %6s in %10s calls\n"},
			   {HT_FN_REALLOC, "Avg realloc time: %5s in %10s calls\n"},
			   {HT_FN_FREE, "Avg free time: %8s in %10s calls\n"}};
	for (size_t i = 0; i < 4; i++) {
		int fn = glibc_lines[i].fn;
		fprintf(f, glibc_lines[i].label, comma(a, (uint64_t)(ht_replay__avg(res, fn) + 0.5)),
			comma(b, res->calls[fn]));
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
	fprintf(f, "threads: %u, ops: %s, waits: %s (%s found the other thread behind, %.3f ms "
		   "blocked)\n",
		res->nthreads, comma(a, res->ops), comma(b, res->waits), comma(c, res->waits_blocked),
		res->tsc_per_ns > 0 ? (double)res->wait_cycles / res->tsc_per_ns / 1e6 : 0.0);
	if (res->repeat > 1)
		fprintf(f, "repeated: %u times\n", res->repeat);
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

/* ---- the command ---- */

/* Adds value to the ':'-separated list in the environment variable name,
 * before what is there (first) or after it; nothing if value is empty. */
static int env_add(const char *name, const char *value, int first)
{
	if (!value || !value[0])
		return 0;
	const char *old = getenv(name);
	const char *sep = old && *old ? ":" : "";
	char *v = NULL;
	if (asprintf(&v, "%s%s%s", first ? value : old ? old : "", sep,
		     first ? old ? old : "" : value) < 0)
		return -1;
	setenv(name, v, 1);
	free(v);
	return 0;
}

/* Re-executes this replay with LD_PRELOAD=lib (if any) and GLIBC_TUNABLES
 * set; returns only on failure. */
static void reexec(char **saved, int nsaved, const char *lib, const char *tunables)
{
	/* the allocator before any other preload; the tunables after the
	 * user's, so that they win */
	if (env_add("LD_PRELOAD", lib, 1) || env_add("GLIBC_TUNABLES", tunables, 0))
		return;
	setenv(CHILD_ENV, lib && lib[0] ? lib : "glibc", 1);
	char **av = calloc((size_t)nsaved + 3, sizeof(char *));
	av[0] = "heaptrail";
	av[1] = "replay";
	for (int i = 0; i < nsaved; i++)
		av[i + 2] = saved[i];
	execv("/proc/self/exe", av);
	ht_error("replay: cannot re-execute heaptrail with the allocator: %s", strerror(errno));
	free(av);
}

int cmd_replay(int argc, char **argv)
{
	struct ht_replay_config cfg = {.allocator = "glibc", .repeat = 1, .touch = "page",
				       .rss_interval_ns = 10000000, .result_fd = -1};
	uint64_t trim = 0;
	int repeat = 1, result_fd = -1;
	const struct ht_option opts[] = {
		{'a', "allocator", HT_OPT_STRING, &cfg.allocator, "NAME|PATH",
		 "glibc, jemalloc, tcmalloc, mimalloc, or a preloadable .so (glibc)"},
		{'t', "tunable", HT_OPT_STRING, &cfg.tunables, "NAME=VALUE[:...]",
		 "glibc tunables, e.g. glibc.malloc.mmap_threshold=65536 (none)"},
		{0, "mallopt", HT_OPT_STRING, &cfg.mallopts, "PARAM=VALUE[,...]",
		 "mallopt() calls before the run, e.g. M_ARENA_MAX=2 (none)"},
		{0, "trim-interval", HT_OPT_U64, &trim, "N",
		 "call malloc_trim(0) every N ops of each thread (0: never)"},
		{0, "threads-as-one", HT_OPT_FLAG, &cfg.threads_as_one, NULL,
		 "run all threads' ops in one thread, in an order their waits allow"},
		{0, "repeat", HT_OPT_INT, &repeat, "K", "run the workload K times in a row (1)"},
		{0, "touch", HT_OPT_STRING, &cfg.touch, "none|page|all",
		 "write to the memory obtained: not at all, a byte per page, every byte (page)"},
		{0, "rss-interval", HT_OPT_DURATION, &cfg.rss_interval_ns, "TIME",
		 "RSS sampling interval (10ms)"},
		{0, "rss-csv", HT_OPT_STRING, &cfg.rss_csv, "FILE", "write the RSS samples as CSV"},
		{0, "no-mlock", HT_OPT_FLAG, &cfg.no_mlock, NULL, "do not lock the workload in memory"},
		{0, "json", HT_OPT_FLAG, &cfg.json, NULL, "print JSON (for scripts)"},
		{0, "result-fd", HT_OPT_INT, &result_fd, "FD",
		 "write the raw result to FD (used by heaptrail compare)"},
		{0},
	};
	static const char usage_text[] =
		"usage: heaptrail replay [options] WORKLOAD\n"
		"       trace_run WORKLOAD\n"
		"\n"
		"Runs a workload from 'heaptrail convert': one thread per traced thread,\n"
		"every call timed with the TSC, the memory obtained touched.  Prints, in\n"
		"the order of glibc's trace_run: cycles, wall time, CPU time, Max RSS,\n"
		"ideal RSS (peak of live requested bytes), average cycles and calls per\n"
		"function, total call time; then percentiles per function and RSS.\n"
		"\fEXAMPLES\n"
		"  heaptrail replay app.wl\n"
		"  heaptrail replay --allocator jemalloc app.wl\n"
		"  heaptrail replay --tunable glibc.malloc.mmap_threshold=65536 --json app.wl\n"
		"  heaptrail replay --mallopt M_ARENA_MAX=1 --trim-interval 100000 app.wl\n";
	int ret = HT_EXIT_USAGE;
	struct ht_workload *w = NULL;
	struct ht_rss_sample *rss = NULL;
	char err[1024], lib[PATH_MAX];
	int nsaved = argc - 1;
	char **saved = calloc((size_t)argc + 1, sizeof(char *));
	for (int i = 1; i < argc; i++)
		saved[i - 1] = argv[i];
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	cfg.trim_interval = trim;
	cfg.repeat = repeat;
	cfg.result_fd = result_fd;
	if (nargs != 1) {
		ht_error("%s; usage: heaptrail replay [options] WORKLOAD",
			 nargs ? "one workload at a time" : "no workload given");
		goto cleanup;
	}
	if (strcmp(cfg.touch, "none") && strcmp(cfg.touch, "page") && strcmp(cfg.touch, "all")) {
		ht_error("--touch '%s': give none, page or all", cfg.touch);
		goto cleanup;
	}
	if (repeat < 1) {
		ht_error("--repeat %d: give a count of 1 or more", repeat);
		goto cleanup;
	}
	if (cfg.mallopts && apply_mallopts(cfg.mallopts, 1))
		goto cleanup;
	if (ht_allocator_lookup(cfg.allocator, lib, sizeof(lib), err, sizeof(err))) {
		ht_error("%s", err);
		goto cleanup;
	}
	const char *child = getenv(CHILD_ENV);
	if (!child && (lib[0] || (cfg.tunables && cfg.tunables[0]))) {
#if defined(__SANITIZE_ADDRESS__)
		if (lib[0]) {
			ht_error("this heaptrail is built with AddressSanitizer, which must be the only "
				 "allocator; use a normal build for --allocator %s", cfg.allocator);
			goto cleanup;
		}
#endif
		/* the child loads (and checks) the workload, once */
		fflush(NULL);
		reexec(saved, nsaved, lib, cfg.tunables);
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	ret = HT_EXIT_DATA;
	if (child) {
		const char *owner = malloc_owner();
		unsetenv(CHILD_ENV); /* not for programs this one might start */
		if (strcmp(child, "glibc") && strcmp(owner, child)) {
			char a[PATH_MAX], b[PATH_MAX];
			if (!realpath(owner, a) || !realpath(child, b) || strcmp(a, b)) {
				ht_error("replay: malloc comes from %s, not from %s: is it a preloadable "
					 "allocator that defines malloc?", owner, child);
				goto cleanup;
			}
		}
	}
	w = ht_workload__load(argv[0], err, sizeof(err));
	if (!w) {
		ht_error("%s", err);
		goto cleanup;
	}
	if (cfg.mallopts)
		apply_mallopts(cfg.mallopts, 0);
	struct ht_replay_result res;
	if (ht_replay__run(w, &cfg, &res, &rss))
		goto cleanup;
	snprintf(res.allocator, sizeof(res.allocator), "%s", malloc_owner());
	if (result_fd >= 0) {
		/* for compare: the struct, then the samples */
		size_t n1 = sizeof(res), n2 = res.nrss * sizeof(*rss);
		if (write(result_fd, &res, n1) != (ssize_t)n1 ||
		    (n2 && write(result_fd, rss, n2) != (ssize_t)n2)) {
			ht_error("replay: cannot write the result to fd %d: %s", result_fd, strerror(errno));
			goto cleanup;
		}
	} else if (cfg.json) {
		ht_replay__print_json(stdout, &res, rss, argv[0]);
	} else {
		ht_replay__print_text(stdout, &res, w);
	}
	if (cfg.rss_csv) {
		struct ht_out out;
		if (ht_out__open(&out, cfg.rss_csv, HT_OUT_PUBLIC, 0, err, sizeof(err))) {
			ht_error("%s", err);
			goto cleanup;
		}
		fprintf(out.f, "ms,rss_kb\n");
		for (uint32_t i = 0; i < res.nrss; i++)
			fprintf(out.f, "%u,%u\n", rss[i].ms, rss[i].kb);
		if (ht_out__commit(&out, err, sizeof(err))) {
			ht_error("%s", err);
			goto cleanup;
		}
	}
	fflush(stdout);
	ret = HT_EXIT_OK;
cleanup:
	free(saved);
	free(rss);
	ht_workload__free(w);
	return ret;
}
