/* heaptrail compare: one workload replayed under several allocators and
 * tunable sets, several times each, interleaved (run 1 of each, then run 2
 * of each, ...) so that a slow minute on a shared machine hits them all
 * alike.  Each run is a `heaptrail replay` child that hands its result
 * back through a pipe.  One table of medians and spreads, one SVG of RSS
 * over time (the median run of each), or JSON. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/builtin.h"
#include "common/json.h"
#include "common/markup.h"
#include "common/options.h"
#include "common/outfile.h"
#include "common/util.h"
#include "replay/replay.h"

struct compare_config {
	const char *allocators;  /* --allocators LIST (glibc) */
	const char *tunables;    /* --tunables SET[;SET...]: glibc with each set */
	int reps;                /* --reps N (5) */
	const char *out;         /* -o FILE: the SVG (WORKLOAD-compare.svg) */
	int json;                /* --json */
	const char *touch;       /* --touch (page) */
	int threads_as_one;      /* --threads-as-one */
	uint64_t trim_interval;  /* --trim-interval N */
	int repeat;              /* --repeat K */
	uint64_t rss_interval;   /* --rss-interval */
	int quiet;               /* -q: no progress line (the options parser's) */
	const char *inherited;   /* GLIBC_TUNABLES from the environment: every run has them */
};

/* compare keeps every run's results (and RSS samples) for its medians */
#define COMPARE_MAX_REPS 10000

/* One allocator/tunables combination and its runs. */
struct variant {
	char *label;                    /* as shown */
	char *allocator;                /* --allocator */
	char *tunables;                 /* --tunable, or NULL */
	struct ht_replay_result *res;   /* reps results */
	struct ht_rss_sample **rss;     /* their samples */
	int nres;                       /* runs done */
	char *failed;                   /* why a run failed (it runs no more); NULL if none */
	uint64_t slot_errors;           /* the most of any run: it did not make the trace's calls */
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Median, min and max of a field over a variant's runs. */
struct spread {
	double med, min, max;
};

static struct spread spread_of(double *v, int n)
{
	struct spread s = {0, 0, 0};
	if (!n)
		return s;
	qsort(v, (size_t)n, sizeof(double), cmp_dbl);
	s.min = v[0];
	s.max = v[n - 1];
	s.med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	return s;
}

#define FIELD_SPREAD(var, expr)                                  \
	({                                                       \
		double _v[var->nres ? var->nres : 1];            \
		for (int _i = 0; _i < var->nres; _i++) {         \
			const struct ht_replay_result *r = &var->res[_i]; \
			_v[_i] = (double)(expr);                 \
		}                                                \
		spread_of(_v, var->nres);                        \
	})

/* The run whose wall time is the median: its RSS curve is drawn. */
static int median_run(const struct variant *v)
{
	uint64_t w[v->nres ? v->nres : 1];
	for (int i = 0; i < v->nres; i++)
		w[i] = v->res[i].wall_usec;
	qsort(w, (size_t)v->nres, sizeof(uint64_t), cmp_u64);
	uint64_t med = w[v->nres / 2];
	for (int i = 0; i < v->nres; i++)
		if (v->res[i].wall_usec == med)
			return i;
	return 0;
}

/* s as one shell word: as it is if it holds only characters no shell
 * treats specially, else in single quotes. */
static void shell_word(FILE *f, const char *s)
{
	if (*s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
			    "@%+=:,./_-") == strlen(s)) {
		fputs(s, f);
		return;
	}
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	}
	fputc('\'', f);
}

/* Each replay child reads the workload by its path: one replaced or
 * rewritten meanwhile gave medians of two workloads, with no word, and the
 * calls and ideal of the first (probe Y).  Whether wl is no longer the
 * file first read (st), said as an error. */
static int workload_changed(const char *wl, const struct stat *st)
{
	struct stat now;
	if (stat(wl, &now) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino &&
	    now.st_size == st->st_size && now.st_mtim.tv_sec == st->st_mtim.tv_sec &&
	    now.st_mtim.tv_nsec == st->st_mtim.tv_nsec)
		return 0;
	ht_error("compare: %s was %s while compare ran: its runs would mix two workloads; run "
		 "compare again on a workload that stays as it is",
		 wl, stat(wl, &now) ? "removed" : "replaced or rewritten");
	return 1;
}

/* Runs one replay child; 0 with its result, or -1 with the error said and
 * v->failed set (the variant runs no more). */
static int run_one(const struct compare_config *cfg, struct variant *v, const char *workload,
		   struct ht_replay_result *res, struct ht_rss_sample **rss)
{
	*rss = NULL;
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC)) {
		ht_error("compare: pipe: %s", strerror(errno));
		v->failed = ht_xstrdup("no pipe for its result");
		return -1;
	}
	char touch[64], trim[64], rep[32], rssi[64];
	snprintf(touch, sizeof(touch), "--touch=%s", cfg->touch);
	snprintf(trim, sizeof(trim), "--trim-interval=%" PRIu64, cfg->trim_interval);
	snprintf(rep, sizeof(rep), "--repeat=%d", cfg->repeat);
	/* in the unit a person would type (it shows in the run-alone command) */
	uint64_t ri = cfg->rss_interval;
	const char *unit = "ns";
	if (ri % 1000000 == 0)
		ri /= 1000000, unit = "ms";
	else if (ri % 1000 == 0)
		ri /= 1000, unit = "us";
	snprintf(rssi, sizeof(rssi), "--rss-interval=%" PRIu64 "%s", ri, unit);
	char *av[20];
	int n = 0;
	av[n++] = "heaptrail";
	av[n++] = "replay";
	av[n++] = "--result-fd=3";
	av[n++] = "--allocator";
	av[n++] = v->allocator;
	if (v->tunables) {
		av[n++] = "--tunable";
		av[n++] = v->tunables;
	}
	av[n++] = touch;
	av[n++] = trim;
	av[n++] = rep;
	av[n++] = rssi;
	if (cfg->threads_as_one)
		av[n++] = "--threads-as-one";
	av[n++] = "--";
	av[n++] = (char *)workload;
	av[n] = NULL;
	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		ht_error("compare: fork: %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		v->failed = ht_xstrdup("fork failed");
		return -1;
	}
	if (pid == 0) {
		/* the replay dies with compare (killed, or ended by a signal),
		 * rather than running on for minutes under init; the check of
		 * the parent closes the race with a parent that died before
		 * the prctl.  The setting survives the exec (not of a set-user-ID
		 * program), the replay's own re-execution included. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
			_exit(127);
		if (dup2(pfd[1], 3) < 0)
			_exit(127);
		execv("/proc/self/exe", av);
		_exit(127);
	}
	close(pfd[1]);
	size_t got = 0;
	ssize_t k;
	while (got < sizeof(*res) && (k = read(pfd[0], (char *)res + got, sizeof(*res) - got)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			break;
		got += (size_t)k;
	}
	if (got == sizeof(*res) && res->nrss) {
		size_t want = res->nrss * sizeof(**rss), have = 0;
		*rss = malloc(want);
		while (*rss && have < want && (k = read(pfd[0], (char *)*rss + have, want - have)) != 0) {
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0)
				break;
			have += (size_t)k;
		}
		if (have != want)
			got = 0;
	}
	close(pfd[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (got == sizeof(*res) && WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	free(*rss);
	*rss = NULL;
	char why[128];
	if (WIFSIGNALED(st))
		snprintf(why, sizeof(why), "killed by signal %d (%s)", WTERMSIG(st),
			 strsignal(WTERMSIG(st)));
	else if (WEXITSTATUS(st))
		snprintf(why, sizeof(why), "exit status %d", WEXITSTATUS(st));
	else
		snprintf(why, sizeof(why), "no result");
	/* the command that reproduces it: the same replay, in a shell's words */
	char *cmd = NULL;
	size_t cmdlen = 0;
	FILE *m = open_memstream(&cmd, &cmdlen);
	if (!m)
		ht_oom();
	for (int i = 0; i < n; i++) {
		if (i == 2)
			continue; /* --result-fd */
		if (i)
			fputc(' ', m);
		shell_word(m, av[i]);
	}
	fclose(m);
	ht_error("compare: the replay under %s failed (%s); run it alone to see why: %s", v->label,
		 why, cmd);
	free(cmd);
	v->failed = ht_xstrdup(why);
	return -1;
}

/* ---- the chart ---- */

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
				     "#9467bd", "#8c564b", "#e377c2", "#17becf"};
#define NCOLORS 8

/* Variant i's stroke: its colour, and past the palette a dash of its own
 * (9 to 16 dashed 4 px, 17 to 24 8 px, ...), so that no two variants are
 * drawn alike however many there are (the colours repeated after 8). */
static void stroke_of(FILE *f, int i)
{
	fprintf(f, "stroke=\"%s\"", colors[i % NCOLORS]);
	if (i >= NCOLORS)
		fprintf(f, " stroke-dasharray=\"%d,3\"", i / NCOLORS * 4);
}

static double nice_step(double range, int ticks)
{
	double raw = range / ticks, p = 1;
	while (p * 10 <= raw)
		p *= 10;
	while (p > raw)
		p /= 10;
	double steps[] = {1, 2, 5, 10};
	for (int i = 0; i < 4; i++)
		if (p * steps[i] >= raw)
			return p * steps[i];
	return p * 10;
}

/* Draws the chart into out, opened before the runs, and renames it into
 * place; 0, or -1 said. */
static int write_svg(struct ht_out *out, struct variant *vs, int nv, const char *workload,
		     uint64_t ideal)
{
	char err[1024];
	FILE *f = out->f;
	/* the legend goes under the plot, a row per variant, as wide as its
	 * longest label (7 px a character at most): at the plot's right, 200
	 * px cut tunable sets to "glibc glibc.malloc.arena_ma..." */
	const int L = 80, R = 60, T = 50, B = 50, PH = 480, ROW = 18;
	int W = 900, nshown = 0;
	for (int i = 0; i < nv; i++) {
		if (!vs[i].nres || vs[i].failed)
			continue;
		nshown++;
		int need = L + 30 + 7 * (int)strlen(vs[i].label) + 20;
		if (need > W)
			W = need;
	}
	const int H = PH + (nshown ? 10 + ROW * nshown : 0);
	double xmax = 1, ymax = (double)ideal / 1024;
	for (int i = 0; i < nv; i++) {
		if (!vs[i].nres || vs[i].failed)
			continue;
		int m = median_run(&vs[i]);
		const struct ht_replay_result *r = &vs[i].res[m];
		for (uint32_t k = 0; k < r->nrss; k++) {
			if (vs[i].rss[m][k].ms > xmax)
				xmax = vs[i].rss[m][k].ms;
			if (vs[i].rss[m][k].kb > ymax)
				ymax = vs[i].rss[m][k].kb;
		}
	}
	double ymib = ymax / 1024, ystep = nice_step(ymib > 0 ? ymib : 1, 5), xstep = nice_step(xmax, 6);
	ymib = ystep * (double)(int)(ymib / ystep + 1);
	ymax = ymib * 1024;
	xmax = xstep * (double)(int)(xmax / xstep + (xmax / xstep == (int)(xmax / xstep) ? 0 : 1));
	double pw = W - L - R, ph = PH - T - B;
#define X(ms) (L + (double)(ms) / xmax * pw)
#define Y(kb) (T + ph - (double)(kb) / ymax * ph)
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		   "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
		W, H, W, H);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
	fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"16\">RSS over time: ", L);
	ht_markup__text(f, workload, HT_MARKUP_ALL);
	fprintf(f, "</text>\n");
	for (double y = 0; y <= ymib + 1e-9; y += ystep) {
		fprintf(f, "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L,
			L + pw, Y(y * 1024), Y(y * 1024));
		fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", L - 6,
			Y(y * 1024) + 4, y);
	}
	for (double x = 0; x <= xmax + 1e-9; x += xstep)
		fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", X(x), T + (int)ph + 18,
			x);
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time since the start of the replay (ms)</text>\n",
		L + (int)pw / 2, PH - 10);
	fprintf(f, "<text transform=\"translate(18,%d) rotate(-90)\" text-anchor=\"middle\">RSS (MiB)</text>\n",
		T + (int)ph / 2);
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n",
		L, T, pw, ph);
	if (ideal) {
		fprintf(f, "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" "
			   "stroke-dasharray=\"6,4\"><title>ideal: peak of live requested bytes</title></line>\n",
			L, L + pw, Y((double)ideal / 1024), Y((double)ideal / 1024));
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#666\">ideal</text>\n", L + pw + 6,
			Y((double)ideal / 1024) + 4);
	}
	for (int i = 0, row = 0; i < nv; i++) {
		if (!vs[i].nres || vs[i].failed)
			continue;
		int m = median_run(&vs[i]);
		const struct ht_replay_result *r = &vs[i].res[m];
		fprintf(f, "<polyline fill=\"none\" ");
		stroke_of(f, i);
		fprintf(f, " stroke-width=\"1.5\" points=\"");
		for (uint32_t k = 0; k < r->nrss; k++)
			fprintf(f, "%.1f,%.1f ", X(vs[i].rss[m][k].ms), Y(vs[i].rss[m][k].kb));
		fprintf(f, "\"><title>");
		ht_markup__text(f, vs[i].label, HT_MARKUP_ALL);
		fprintf(f, ": peak %" PRIu64 " KiB</title></polyline>\n", r->rss_peak_kb);
		int y = PH + 10 + ROW * row++;
		fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke-width=\"3\" ", L,
			L + 24, y + 9, y + 9);
		stroke_of(f, i);
		fprintf(f, "/>\n<text x=\"%d\" y=\"%d\">", L + 30, y + 13);
		ht_markup__text(f, vs[i].label, HT_MARKUP_ALL);
		fprintf(f, "</text>\n");
	}
#undef X
#undef Y
	fprintf(f, "</svg>\n");
	if (ht_out__commit(out, err, sizeof(err))) {
		ht_error("%s", err);
		return -1;
	}
	return 0;
}

/* ---- output ---- */

/* The label as the table shows it: a '*' after a variant whose replay
 * did not make the trace's calls. */
static void shown_label(char *buf, size_t len, const struct variant *v)
{
	snprintf(buf, len, "%s%s", v->label, v->slot_errors && !v->failed ? " *" : "");
}

/* A function's column: 8 wide, or its name's length (aligned_alloc,
 * malloc_trim, posix_memalign, reallocarray: before, only the last two
 * were widened and the others pushed their rows' columns out of line). */
static int fn_width(int f)
{
	int n = (int)strlen(ht_wl_fn_names[f]);
	return n > 8 ? n : 8;
}

static void print_table(const struct compare_config *cfg, struct variant *vs, int nv)
{
	uint64_t any[HT_FN_NR] = {0};
	for (int i = 0; i < nv; i++)
		for (int r = 0; r < vs[i].nres; r++)
			for (int f = 0; f < HT_FN_NR; f++)
				any[f] += vs[i].res[r].calls[f];
	int lw = 9, nfailed = 0, nslot = 0;
	char lab[PATH_MAX + 1024];
	for (int i = 0; i < nv; i++) {
		shown_label(lab, sizeof(lab), &vs[i]);
		if ((int)strlen(lab) > lw)
			lw = (int)strlen(lab);
		nfailed += vs[i].failed != NULL;
		nslot += vs[i].slot_errors && !vs[i].failed;
	}
	printf("%-*s %22s %12s %12s %9s", lw, "allocator", "wall ms (min..max)", "call Mcycles",
	       "Max RSS KiB", "RSS/ideal");
	for (int f = 0; f < HT_FN_NR; f++)
		if (any[f])
			printf(" %*s", fn_width(f), ht_wl_fn_names[f]);
	printf("\n");
	for (int i = 0; i < nv; i++) {
		struct variant *v = &vs[i];
		shown_label(lab, sizeof(lab), v);
		if (v->failed) {
			/* its earlier runs, if any, are left out: not all of them ran */
			printf("%-*s FAILED (%s, run %d of %d)\n", lw, lab, v->failed, v->nres + 1,
			       cfg->reps);
			continue;
		}
		struct spread wall = FIELD_SPREAD(v, r->wall_usec / 1000.0);
		struct spread cyc = FIELD_SPREAD(v, ht_replay__call_cycles(r) / 1e6);
		struct spread rss = FIELD_SPREAD(v, r->maxrss_end_kb);
		uint64_t ideal = v->nres ? v->res[0].ideal_bytes : 0;
		char wbuf[64];
		snprintf(wbuf, sizeof(wbuf), "%.1f (%.1f..%.1f)", wall.med, wall.min, wall.max);
		printf("%-*s %22s %12.2f %12.0f ", lw, lab, wbuf, cyc.med, rss.med);
		if (ideal)
			printf("%9.2f", rss.med * 1024 / (double)ideal);
		else
			printf("%9s", "-");
		for (int f = 0; f < HT_FN_NR; f++) {
			if (!any[f])
				continue;
			struct spread a = FIELD_SPREAD(v, ht_replay__avg(r, f));
			printf(" %*.1f", fn_width(f), a.med);
		}
		printf("\n");
	}
	printf("\nmedians of %d run%s each, interleaved; per-function columns: average cycles per "
	       "call; RSS/ideal: Max RSS over the peak of live requested bytes\n",
	       cfg->reps, cfg->reps == 1 ? "" : "s");
	if (cfg->inherited)
		printf("every run had GLIBC_TUNABLES=%s from the environment\n", cfg->inherited);
	for (int i = 0; nslot && i < nv; i++)
		if (vs[i].slot_errors && !vs[i].failed)
			printf("* %s did not replay the workload as traced: up to %llu ops per "
			       "run found their slot in the wrong state (an allocation failed that "
			       "succeeded in the trace); its figures are of other calls\n",
			       vs[i].label, (unsigned long long)vs[i].slot_errors);
	for (int i = 0; i < nv; i++) {
		if (vs[i].failed)
			continue;
		uint64_t most = 0, over = 0, ideal = 0;
		for (int r = 0; r < vs[i].nres; r++) {
			if (vs[i].res[r].live_peak_bytes > most)
				most = vs[i].res[r].live_peak_bytes;
			if (ht_replay__live_excess(&vs[i].res[r]) > over)
				over = ht_replay__live_excess(&vs[i].res[r]);
			ideal = vs[i].res[r].ideal_bytes;
		}
		if (over)
			printf("warning: the replays of %s held up to %llu live bytes where the "
			       "trace held at most %llu: Max RSS and RSS/ideal charge the "
			       "allocator for memory the replay's own order kept live (a workload "
			       "converted before heaptrail kept to the trace's peak? convert the "
			       "trace again)\n",
			       vs[i].label, (unsigned long long)most, (unsigned long long)ideal);
		/* Less live than the trace: the replay's threads, timed by this
		 * allocator, kept fewer blocks in flight (consumers that kept
		 * up): its Max RSS is that of a smaller heap, and RSS/ideal
		 * reads as an allocator that needs less than the data.  Not
		 * when it failed calls the trace made (the `*` line above says
		 * so: blamed on the timing, probe R) */
		else if (ideal && most < ideal - ideal / 10 && !vs[i].slot_errors)
			printf("warning: the replays of %s held at most %llu live bytes where the "
			       "trace held %llu: its threads' timing under this allocator kept "
			       "fewer blocks live, so its Max RSS and RSS/ideal are those of a "
			       "smaller heap than the trace's, not comparable with the other rows "
			       "(JSON rss_live_ratio: Max RSS over each run's own live peak; "
			       "--threads-as-one replays the trace's order)\n",
			       vs[i].label, (unsigned long long)most, (unsigned long long)ideal);
	}
	/* the replay process itself, with the workload's ops loaded and locked
	 * in memory, before the first op: part of Max RSS, not the allocator's */
	uint64_t base_kb = 0, ideal_all = 0;
	for (int i = 0; i < nv; i++)
		for (int r = 0; !vs[i].failed && r < vs[i].nres; r++) {
			if (vs[i].res[r].maxrss_start_kb > base_kb)
				base_kb = vs[i].res[r].maxrss_start_kb;
			ideal_all = vs[i].res[r].ideal_bytes;
		}
	if (ideal_all && base_kb * 1024 > ideal_all)
		printf("note: Max RSS counts the replay process and the workload it holds in memory, "
		       "up to %llu KiB before the first op, more than the ideal peak (%llu bytes): "
		       "RSS/ideal is mostly that; JSON max_rss_growth_kb is what each run added\n",
		       (unsigned long long)base_kb, (unsigned long long)ideal_all);
	if (nfailed)
		printf("%d of %d variants failed: the errors above say why\n", nfailed, nv);
}

/* Whole numbers as integers (every digit), the rest as doubles. */
static void json_num(struct ht_json *j, const char *key, double v)
{
	if (v >= 0 && v < 9007199254740992.0 && v == (double)(uint64_t)v)
		ht_json__u64(j, key, (uint64_t)v);
	else
		ht_json__double(j, key, v);
}

/* svg: the chart written, NULL if none. */
static void print_json(const struct compare_config *cfg, struct variant *vs, int nv,
		       const char *workload, const char *svg)
{
	struct ht_json j;
	ht_json__init(&j, stdout, 1);
	ht_json__obj_begin(&j, NULL);
	ht_json__str(&j, "workload", workload);
	if (svg)
		ht_json__str(&j, "chart", svg);
	else
		ht_json__null(&j, "chart");
	if (cfg->inherited)
		ht_json__str(&j, "inherited_tunables", cfg->inherited);
	else
		ht_json__null(&j, "inherited_tunables");
	ht_json__arr_begin(&j, "results");
	for (int i = 0; i < nv; i++) {
		struct variant *v = &vs[i];
		ht_json__obj_begin(&j, NULL);
		ht_json__str(&j, "allocator", v->allocator);
		ht_json__str(&j, "label", v->label);
		/* what GLIBC_TUNABLES was in its runs: the environment's, then
		 * its set (replay appends it) */
		if (cfg->inherited && v->tunables) {
			char *both = NULL;
			if (asprintf(&both, "%s:%s", cfg->inherited, v->tunables) < 0)
				ht_oom();
			ht_json__str(&j, "tunables", both);
			free(both);
		} else if (cfg->inherited || v->tunables) {
			ht_json__str(&j, "tunables", cfg->inherited ? cfg->inherited : v->tunables);
		} else {
			ht_json__null(&j, "tunables");
		}
		if (v->failed)
			ht_json__str(&j, "failed", v->failed);
		else
			ht_json__null(&j, "failed");
		ht_json__u64(&j, "runs", (uint64_t)v->nres);
		if (v->failed) {
			ht_json__obj_end(&j);
			continue;
		}
		ht_json__str(&j, "allocator_library", v->nres ? v->res[0].allocator : "");
		ht_json__u64(&j, "slot_errors", v->slot_errors);
		struct spread s;
#define MED(key, expr)                               \
	s = FIELD_SPREAD(v, expr);                   \
	json_num(&j, key, s.med);
		MED("wall_usec", r->wall_usec);
		json_num(&j, "wall_usec_min", s.min);
		json_num(&j, "wall_usec_max", s.max);
		MED("cycles", r->cycles);
		MED("cpu_usec", r->user_usec);
		MED("total_call_cycles", ht_replay__call_cycles(r));
		json_num(&j, "total_call_cycles_min", s.min);
		json_num(&j, "total_call_cycles_max", s.max);
		MED("max_rss_kb", r->maxrss_end_kb);
		json_num(&j, "max_rss_kb_min", s.min);
		json_num(&j, "max_rss_kb_max", s.max);
		MED("rss_peak_kb", r->rss_peak_kb);
		uint64_t ideal = v->nres ? v->res[0].ideal_bytes : 0;
		ht_json__u64(&j, "max_ideal_rss_bytes", ideal);
		if (ideal) {
			MED("rss_ideal_ratio", (double)r->maxrss_end_kb * 1024 / (double)ideal);
		} else { /* (a workload with nothing live: no ratio) */
			ht_json__null(&j, "rss_ideal_ratio");
		}
		MED("max_rss_start_kb", r->maxrss_start_kb);
		MED("max_rss_growth_kb", r->maxrss_end_kb - r->maxrss_start_kb);
		int any_live = 0;
		for (int k = 0; k < v->nres; k++)
			any_live |= v->res[k].live_peak_bytes != 0;
		if (any_live) {
			MED("rss_live_ratio", r->live_peak_bytes
						  ? (double)r->maxrss_end_kb * 1024 / (double)r->live_peak_bytes
						  : 0);
		} else {
			ht_json__null(&j, "rss_live_ratio");
		}
		MED("live_peak_bytes", r->live_peak_bytes);
		json_num(&j, "live_peak_bytes_max", s.max);
		MED("live_excess_bytes", ht_replay__live_excess(r));
		ht_json__obj_begin(&j, "calls");
		for (int f = 0; f < HT_FN_NR; f++)
			ht_json__u64(&j, ht_wl_fn_names[f], v->nres ? v->res[0].calls[f] : 0);
		ht_json__obj_end(&j);
		ht_json__obj_begin(&j, "avg_cycles");
		for (int f = 0; f < HT_FN_NR; f++) {
			MED(ht_wl_fn_names[f], ht_replay__avg(r, f));
		}
		ht_json__obj_end(&j);
		ht_json__obj_begin(&j, "p99_cycles");
		for (int f = 0; f < HT_FN_NR; f++)
			if (v->nres && v->res[0].calls[f]) {
				MED(ht_wl_fn_names[f], r->pct_cycles[f][1]);
			}
		ht_json__obj_end(&j);
#undef MED
		ht_json__obj_end(&j);
	}
	ht_json__arr_end(&j);
	ht_json__obj_end(&j);
	ht_json__finish(&j);
}

/* An empty item in LIST (split at sep: "glibc,,jemalloc", "glibc,"), said
 * as an error; they were dropped with no word (probe Y). */
static int empty_item(const char *list, char sep, const char *opt)
{
	const char *p = list;
	for (;;) {
		const char *e = strchr(p, sep);
		size_t n = e ? (size_t)(e - p) : strlen(p);
		size_t k = 0;
		while (k < n && p[k] == ' ')
			k++;
		if (k == n) {
			ht_error("%s '%s': an empty item; give names separated by '%c'", opt, list,
				 sep);
			return 1;
		}
		if (!e)
			return 0;
		p = e + 1;
	}
}

/* Splits LIST at sep into the variants.  inherited: GLIBC_TUNABLES from
 * the environment, which every run has; a glibc variant's label shows them
 * (before, "glibc" was shown for a run with the environment's tunables). */
static void add_variants(struct variant **vs, int *nv, const char *list, char sep, int tunables,
			 const char *inherited)
{
	char *copy = ht_xstrdup(list), *save = NULL;
	char seps[2] = {sep, 0};
	for (char *tok = strtok_r(copy, seps, &save); tok; tok = strtok_r(NULL, seps, &save)) {
		if (!tok[strspn(tok, " ")])
			continue; /* (empty items: refused by empty_item first) */
		*vs = ht_xrealloc(*vs, (size_t)(*nv + 1) * sizeof(**vs));
		struct variant *v = &(*vs)[(*nv)++];
		memset(v, 0, sizeof(*v));
		v->allocator = ht_xstrdup(tunables ? "glibc" : tok);
		v->tunables = tunables ? ht_xstrdup(tok) : NULL;
		int glibc = tunables || !strcmp(tok, "glibc") || !strcmp(tok, "libc");
		if (asprintf(&v->label, "%s%s%s%s%s", tunables ? "glibc" : tok,
			     glibc && (inherited || tunables) ? " " : "",
			     glibc && inherited ? inherited : "", inherited && tunables ? ":" : "",
			     tunables ? tok : "") < 0)
			ht_oom();
	}
	free(copy);
}

int cmd_compare(int argc, char **argv)
{
	struct compare_config cfg = {.allocators = "glibc", .reps = 5, .touch = "page", .repeat = 1,
				     .rss_interval = 10000000};
	const struct ht_option opts[] = {
		{'a', "allocators", HT_OPT_STRING, &cfg.allocators, "LIST",
		 "comma-separated: glibc, jemalloc, tcmalloc, mimalloc or .so paths (glibc)"},
		{'t', "tunables", HT_OPT_STRING, &cfg.tunables, "SET[;SET...]",
		 "also glibc with each set of tunables, e.g. glibc.malloc.arena_max=1 (none)"},
		{'n', "reps", HT_OPT_INT, &cfg.reps, "N", "runs of each, interleaved, 10000 at most (5)"},
		{'o', "output", HT_OPT_STRING, &cfg.out, "FILE",
		 "the SVG chart of RSS over time (NAME-compare.svg here, for NAME.wl)"},
		{0, "json", HT_OPT_FLAG, &cfg.json, NULL, "print JSON (for scripts)"},
		{0, "touch", HT_OPT_STRING, &cfg.touch, "none|page|all", "as for replay (page)"},
		{0, "threads-as-one", HT_OPT_FLAG, &cfg.threads_as_one, NULL, "as for replay"},
		{0, "trim-interval", HT_OPT_U64, &cfg.trim_interval, "N", "as for replay (0)"},
		{0, "repeat", HT_OPT_INT, &cfg.repeat, "K", "as for replay (1)"},
		{0, "rss-interval", HT_OPT_DURATION_POS, &cfg.rss_interval, "TIME",
		 "as for replay: 100us at least (10ms)"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no progress line"},
		{0},
	};
	static const char usage_text[] =
		"usage: heaptrail compare [options] WORKLOAD\n"
		"\n"
		"Replays one workload under several allocators (and glibc tunable sets),\n"
		"several runs each, interleaved.  Prints one table of medians and spreads:\n"
		"wall time, time in calls, Max RSS, RSS over ideal, average cycles per\n"
		"call; writes an SVG chart of RSS over time per allocator.\n"
		"\fEXAMPLES\n"
		"  heaptrail compare --allocators glibc,jemalloc,tcmalloc,mimalloc app.wl\n"
		"  heaptrail compare -t 'glibc.malloc.arena_max=1;glibc.malloc.mmap_threshold=65536' app.wl\n"
		"  heaptrail compare --json -a glibc,mimalloc app.wl | jq '.results[].wall_usec'\n";
	int ret = HT_EXIT_USAGE;
	struct variant *vs = NULL;
	int nv = 0;
	char *svg = NULL;
	struct ht_out chart;
	int chart_open = 0;
	struct ht_workload *w = NULL;
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs != 1) {
		ht_error("%s; usage: heaptrail compare [options] WORKLOAD",
			 nargs ? "one workload at a time" : "no workload given");
		goto cleanup;
	}
	if (cfg.reps < 1 || cfg.repeat < 1) {
		ht_error("%s %d: give a count of 1 or more", cfg.reps < 1 ? "--reps" : "--repeat",
			 cfg.reps < 1 ? cfg.reps : cfg.repeat);
		goto cleanup;
	}
	if (cfg.rss_interval < HT_RSS_INTERVAL_MIN) {
		ht_error(
		    "--rss-interval: at least 100us (a reading of the RSS takes microseconds)");
		goto cleanup;
	}
	if (cfg.reps > COMPARE_MAX_REPS) { /* (each run's results are kept, for the medians) */
		ht_error("--reps %d: at most %d runs of each", cfg.reps, COMPARE_MAX_REPS);
		goto cleanup;
	}
	if (strcmp(cfg.touch, "none") && strcmp(cfg.touch, "page") && strcmp(cfg.touch, "all")) {
		ht_error("--touch '%s': give none, page or all", cfg.touch);
		goto cleanup;
	}
	if (getenv("GLIBC_TUNABLES") && getenv("GLIBC_TUNABLES")[0])
		cfg.inherited = getenv("GLIBC_TUNABLES");
	if (empty_item(cfg.allocators, ',', "--allocators") ||
	    (cfg.tunables && empty_item(cfg.tunables, ';', "--tunables")))
		goto cleanup;
	if (cfg.out && !strcmp(cfg.out, "-")) {
		ht_error("-o -: compare writes its chart, an SVG, to a file: name one (the "
			 "figures go to stdout)");
		goto cleanup;
	}
	add_variants(&vs, &nv, cfg.allocators, ',', 0, cfg.inherited);
	if (cfg.tunables)
		add_variants(&vs, &nv, cfg.tunables, ';', 1, cfg.inherited);
	if (!nv) {
		ht_error("nothing to compare: --allocators is empty");
		goto cleanup;
	}
	/* a variant given again (the same allocator run twice, to see the
	 * spread between two series) is numbered: its rows and JSON labels
	 * read alike otherwise */
	for (int i = 0; i < nv; i++) {
		int same = 0;
		for (int k = 0; k < i; k++)
			same += !strcmp(vs[i].allocator, vs[k].allocator) &&
				!strcmp(vs[i].tunables ? vs[i].tunables : "",
					vs[k].tunables ? vs[k].tunables : "");
		if (same) {
			char *l = NULL;
			if (asprintf(&l, "%s #%d", vs[i].label, same + 1) < 0)
				ht_oom();
			free(vs[i].label);
			vs[i].label = l;
		}
	}
	/* everything a typing error can spoil, before the first run */
	char err[1024], lib[PATH_MAX];
	for (int i = 0; i < nv; i++) {
		if (ht_allocator_lookup(vs[i].allocator, lib, sizeof(lib), err, sizeof(err))) {
			ht_error("--allocators: %s", err);
			goto cleanup;
		}
		if (vs[i].tunables && ht_tunables_check(vs[i].tunables, "-t", err, sizeof(err))) {
			ht_error("%s", err);
			goto cleanup;
		}
	}
	ht_tunables_warn_inherited();
	ret = HT_EXIT_DATA;
	const char *wl = argv[0];
	struct stat wl_st;
	if (stat(wl, &wl_st))
		memset(&wl_st, 0, sizeof(wl_st)); /* (the loader says why) */
	w = ht_workload__load(wl, err, sizeof(err)); /* a clear error before any run */
	if (!w) {
		ht_error("%s", err);
		goto cleanup;
	}
	if (workload_changed(wl, &wl_st))
		goto cleanup;
	if (cfg.out) {
		svg = ht_xstrdup(cfg.out);
	} else {
		const char *base = strrchr(wl, '/') ? strrchr(wl, '/') + 1 : wl;
		size_t n = strlen(base);
		if (n > 3 && !strcmp(base + n - 3, ".wl"))
			n -= 3;
		if (asprintf(&svg, "%.*s-compare.svg", (int)n, base) < 0)
			ht_oom();
	}
	/* the chart's file is opened now (its temporary, renamed at the end):
	 * a symlink, a directory, a trace or workload, a directory where no
	 * file can be made (/proc as the current directory) is found before
	 * the runs, not after minutes of them */
	if (ht_out__check(svg, err, sizeof(err)) ||
	    ht_out__open(&chart, svg, HT_OUT_PUBLIC, 0, err, sizeof(err))) {
		ht_error("compare: %s%s", err,
			 cfg.out ? "" : " (the chart's default path: choose another with -o FILE)");
		goto cleanup;
	}
	chart_open = 1;
	for (int i = 0; i < nv; i++) {
		vs[i].res = ht_xcalloc((size_t)cfg.reps, sizeof(*vs[i].res));
		vs[i].rss = ht_xcalloc((size_t)cfg.reps, sizeof(*vs[i].rss));
	}
	int total = cfg.reps * nv, done = 0, failed = 0;
	for (int rep = 0; rep < cfg.reps; rep++) {
		for (int i = 0; i < nv; i++) {
			struct variant *v = &vs[i];
			if (v->failed)
				continue; /* (reported once; the others go on) */
			ht_progress("compare: runs", (uint64_t)done, (uint64_t)total, 0, NULL);
			if (run_one(&cfg, v, wl, &v->res[v->nres], &v->rss[v->nres])) {
				ht_progress_done();
				failed++;
				total -= cfg.reps - rep;
				continue;
			}
			/* (after each run, which may have read a new one: the
			 * check after the load covers the first) */
			if (workload_changed(wl, &wl_st)) {
				ht_progress_done();
				free(v->rss[v->nres]);
				goto cleanup;
			}
			if (v->res[v->nres].slot_errors > v->slot_errors)
				v->slot_errors = v->res[v->nres].slot_errors;
			v->nres++;
			done++;
		}
	}
	ht_progress_done();
	/* the chart, then the figures whatever became of it */
	int drawn = failed < nv && !write_svg(&chart, vs, nv, wl, w->ideal_peak_bytes);
	if (cfg.json) {
		print_json(&cfg, vs, nv, wl, drawn ? svg : NULL);
	} else {
		print_table(&cfg, vs, nv);
		if (drawn)
			printf("RSS over time: %s\n", svg);
	}
	fflush(stdout);
	ret = failed || !drawn ? HT_EXIT_DATA : HT_EXIT_OK;
cleanup:
	if (chart_open)
		ht_out__abort(&chart); /* (nothing after a commit) */
	for (int i = 0; i < nv; i++) {
		for (int r = 0; r < vs[i].nres; r++)
			free(vs[i].rss[r]);
		free(vs[i].rss);
		free(vs[i].res);
		free(vs[i].label);
		free(vs[i].allocator);
		free(vs[i].tunables);
		free(vs[i].failed);
	}
	free(vs);
	free(svg);
	ht_workload__free(w);
	return ret;
}
