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
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
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
#include "replay/replay.h"

#define CHILD_ENV "HEAPTRAIL_REPLAY_ALLOCATOR" /* set in the re-executed replay */

/* The file of the library whose function name this process calls. */
static const char *fn_owner(const char *name)
{
	Dl_info di;
	void *m = dlsym(RTLD_DEFAULT, name);
	if (m && dladdr(m, &di) && di.dli_fname)
		return di.dli_fname;
	return "?";
}

static const char *malloc_owner(void)
{
	return fn_owner("malloc");
}

/* Whether two library paths name the same file. */
static int same_file(const char *a, const char *b)
{
	char ra[PATH_MAX], rb[PATH_MAX];
	return !strcmp(a, b) || (realpath(a, ra) && realpath(b, rb) && !strcmp(ra, rb));
}

/* The functions that hand out or take back blocks of the allocator's own
 * heap.  One the preloaded library lacks is served by glibc's, from glibc's
 * heap, and the block later reaches the library's free or realloc, which
 * does not own it: jemalloc has no pvalloc, and replaying a pvalloc under
 * it crashed in jemalloc's free (as the program itself would).
 * reallocarray may come from glibc too (glibc's calls realloc), not from a
 * third library; mallopt and malloc_trim (glibc's act on glibc's heap
 * only) are not among them. */
static const int heap_fns[] = {
    HT_FN_MALLOC,	  HT_FN_CALLOC,	       HT_FN_REALLOC, HT_FN_FREE,    HT_FN_MEMALIGN,
    HT_FN_POSIX_MEMALIGN, HT_FN_ALIGNED_ALLOC, HT_FN_VALLOC,  HT_FN_PVALLOC, HT_FN_REALLOCARRAY};

/* Whether owner may serve a heap function of a glibc run although it is
 * not libc: this program itself or a sanitizer's runtime (the test builds,
 * whose allocator is the sanitizer's), or heaptrail's recorder, which
 * passes every call on (a replay recorded by heaptrail record). */
static int passes_to_glibc(const char *owner)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = 0;
		if (same_file(owner, self))
			return 1;
	}
	const char *base = strrchr(owner, '/');
	base = base ? base + 1 : owner;
	static const char *const ok[] = {"libheaptrail", "libasan", "libtsan", "libubsan",
					 "liblsan"};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strncmp(base, ok[i], strlen(ok[i])))
			return 1;
	return 0;
}

/* Every heap function the workload calls (and free, which frees what it
 * leaves) comes from lib, the allocator asked for (NULL: glibc); 0, or -1
 * said.  Another library in LD_PRELOAD from the environment can take any
 * of them: under -a glibc an inherited jemalloc served the run (and
 * compare labelled its figures glibc's), and with a workload that calls
 * pvalloc, or under -a jemalloc with mimalloc inherited, whose
 * reallocarray got jemalloc's blocks, the replay died of SIGSEGV with no
 * word (probe Y). */
static int check_functions(const struct ht_workload *w, const char *allocator, const char *lib)
{
	const char *libc = fn_owner("gnu_get_libc_version"), *pre = getenv("LD_PRELOAD");
	const char *m = malloc_owner();
	if (!lib && !same_file(m, libc) && !passes_to_glibc(m)) {
		ht_error("replay: this process's malloc comes from %s, not from glibc's %s "
			 "(LD_PRELOAD=%s): the run would not be glibc's; unset LD_PRELOAD, or "
			 "replay it with --allocator %s",
			 m, libc, pre ? pre : "", m);
		return -1;
	}
	for (size_t i = 0; i < sizeof(heap_fns) / sizeof(heap_fns[0]); i++) {
		int fn = heap_fns[i];
		if (!w->fn_ops[fn] && fn != HT_FN_FREE)
			continue;
		const char *name = ht_wl_fn_names[fn], *owner = fn_owner(name);
		unsigned long long n = (unsigned long long)w->fn_ops[fn];
		if (lib ? same_file(owner, lib) ||
			      (fn == HT_FN_REALLOCARRAY && same_file(owner, libc))
			: same_file(owner, libc) || passes_to_glibc(owner))
			continue;
		if (!lib)
			ht_error(
			    "replay: the workload calls %s (%llu time%s), and this process's %s "
			    "comes from %s, not from glibc's %s (LD_PRELOAD=%s): the run would "
			    "not be glibc's; unset LD_PRELOAD, or replay it with --allocator %s",
			    name, n, ht_s(n), name, owner, libc, pre ? pre : "", owner);
		else if (same_file(owner, libc))
			ht_error(
			    "replay: the workload calls %s (%llu time%s), which %s (%s) does not "
			    "define: %s's %s would serve it from its own heap and give %s's free "
			    "a block it does not own (a crash, as in the program itself under "
			    "it); replay this workload under an allocator that has %s",
			    name, n, ht_s(n), allocator, lib, owner, name, allocator, name);
		else
			ht_error(
			    "replay: the workload calls %s (%llu time%s), and this process's %s "
			    "comes from %s, not from %s (%s) (LD_PRELOAD=%s): it would be given "
			    "blocks it does not own; unset LD_PRELOAD in the environment",
			    name, n, ht_s(n), name, owner, allocator, lib, pre ? pre : "");
		return -1;
	}
	return 0;
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
		int neg = eq[1] == '-', num = !ht_parse_size(eq + 1 + neg, &val);
		if (!found || !num || val > INT32_MAX) {
			ht_error(
			    "--mallopt %s=%s: %s", tok, eq + 1,
			    found && num ? "mallopt takes an int: at most 2147483647"
			    : found
				? "the value must be a number (K/M/G allowed)"
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
	struct ht_out csv; /* --rss-csv, opened before the run */
	int csv_open = 0;
	const struct ht_option opts[] = {
		{'a', "allocator", HT_OPT_STRING, &cfg.allocator, "NAME|PATH",
		 "glibc, jemalloc, tcmalloc, mimalloc, or a preloadable .so (glibc)"},
		{'t', "tunable", HT_OPT_STRING, &cfg.tunables, "NAME=VALUE[:...]",
		 "glibc tunables this glibc has, e.g. glibc.malloc.mmap_threshold=65536; "
		 "values in decimal or 0x hex, checked against its ranges (none)"},
		{0, "mallopt", HT_OPT_STRING, &cfg.mallopts, "PARAM=VALUE[,...]",
		 "mallopt() calls before the run, e.g. M_ARENA_MAX=2 (none)"},
		{0, "trim-interval", HT_OPT_U64, &trim, "N",
		 "call malloc_trim(0) every N ops of each thread (0: never)"},
		{0, "threads-as-one", HT_OPT_FLAG, &cfg.threads_as_one, NULL,
		 "run all threads' ops in one thread, in an order their waits allow"},
		{0, "repeat", HT_OPT_INT, &repeat, "K", "run the workload K times in a row (1)"},
		{0, "touch", HT_OPT_STRING, &cfg.touch, "none|page|all",
		 "write to the memory obtained: not at all, a byte per page, every byte (page)"},
		{0, "rss-interval", HT_OPT_DURATION_POS, &cfg.rss_interval_ns, "TIME",
		 "RSS sampling interval, 100us at least (10ms)"},
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
	if (cfg.tunables && cfg.tunables[0] && !getenv(CHILD_ENV) &&
	    ht_tunables_check(cfg.tunables, "--tunable", err, sizeof(err))) {
		ht_error("%s", err);
		goto cleanup; /* (usage) */
	}
	if (!getenv(CHILD_ENV) && result_fd < 0)
		ht_tunables_warn_inherited(); /* (compare warns once for all its runs) */
	if (repeat < 1) {
		ht_error("--repeat %d: give a count of 1 or more", repeat);
		goto cleanup;
	}
	if (cfg.rss_interval_ns < HT_RSS_INTERVAL_MIN) {
		/* (1ns was taken, and said as "interval_us": 0) */
		ht_error(
		    "--rss-interval: at least 100us (a reading of the RSS takes microseconds)");
		goto cleanup;
	}
	/* where the results go, refused before the run, not after it (a
	 * workload may replay for minutes) */
	if (cfg.rss_csv && !getenv(CHILD_ENV) && ht_out__check(cfg.rss_csv, err, sizeof(err))) {
		ht_error("--rss-csv: %s", err);
		ret = HT_EXIT_DATA; /* (as an output refused at the end was, and compare's) */
		goto cleanup;
	}
	if (result_fd >= 0) {
		int fl = fcntl(result_fd, F_GETFL);
		if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY) {
			ht_error("--result-fd=%d: %s", result_fd,
				 fl < 0 ? strerror(errno) : "not open for writing");
			ret = HT_EXIT_DATA;
			goto cleanup;
		}
	}
	if (cfg.mallopts && apply_mallopts(cfg.mallopts, 1))
		goto cleanup;
	if (!cfg.allocator[0]) {
		/* as compare's empty --allocators: not a silent glibc */
		ht_error("--allocator '': give glibc, jemalloc, tcmalloc, mimalloc, or the path "
			 "of a preloadable allocator library");
		goto cleanup;
	}
	if (ht_allocator_lookup(cfg.allocator, lib, sizeof(lib), err, sizeof(err))) {
		ht_error("--allocator: %s", err); /* (2, before the workload is read) */
		goto cleanup;
	}
	if (cfg.mallopts && lib[0] && !getenv(CHILD_ENV))
		ht_warning("--mallopt %s: mallopt() is glibc's and sets glibc's allocator, which "
			   "does not serve this run's calls under %s: it does nothing here",
			   cfg.mallopts, cfg.allocator);
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
		if (strcmp(child, "glibc") && !same_file(owner, child)) {
			ht_error("replay: malloc comes from %s, not from %s: is it a preloadable "
				 "allocator that defines malloc?",
				 owner, child);
			goto cleanup;
		}
	}
	w = ht_workload__load(argv[0], err, sizeof(err));
	if (!w) {
		ht_error("%s", err);
		goto cleanup;
	}
	if (check_functions(w, cfg.allocator, child && strcmp(child, "glibc") ? child : NULL))
		goto cleanup;
	/* --rss-csv's file made before the run: root passes the check of its
	 * directory's access even in /proc, where no file can be made, and
	 * the run was lost at its end (probe Y) */
	if (cfg.rss_csv) {
		if (ht_out__open(&csv, cfg.rss_csv, HT_OUT_PUBLIC, 0, err, sizeof(err))) {
			ht_error("--rss-csv: %s", err);
			goto cleanup;
		}
		csv_open = 1;
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
	if (csv_open) {
		fprintf(csv.f, "ms,rss_kb\n");
		for (uint32_t i = 0; i < res.nrss; i++)
			fprintf(csv.f, "%u,%u\n", rss[i].ms, rss[i].kb);
		csv_open = 0;
		if (ht_out__commit(&csv, err, sizeof(err))) {
			ht_error("--rss-csv: %s", err);
			goto cleanup;
		}
	}
	fflush(stdout);
	ret = HT_EXIT_OK;
cleanup:
	if (csv_open)
		ht_out__abort(&csv);
	free(saved);
	free(rss);
	ht_workload__free(w);
	return ret;
}
