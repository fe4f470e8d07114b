/* heaptrail live: a program's heap by stack, on a terminal, as it runs.
 * Follows a trace that a recorder is writing (ht_reader__open_follow),
 * feeds the pass and the live model (analyze/livetop.h) and redraws about
 * twice a second (--interval) with ncurses; on a finished trace, the same screens with a
 * cursor to move through time.  The screen is drawn into lines of text
 * first (struct screen), which --batch prints instead: what the tests and
 * the benchmark read. */
#define _GNU_SOURCE
#include <curses.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "analyze/livetop.h"
#include "analyze/pass.h"
#include "cli/builtin.h"
#include "cli/live_quit.h"
#include "common/options.h"
#include "common/outfile.h"
#include "common/util.h"
#include "symbols/symbolize.h"
#include "trace/reader.h"

/* One configuration per run; each default is labelled by its flag. */
struct live_config {
	int batch;                /* --batch */
	uint64_t width, height;   /* --width, --height (120 x 40) for --batch */
	const char *keys;         /* --keys: applied before the --batch screen */
	uint64_t at_ns;           /* --at: the moment shown (--batch, finished trace) */
	int at_given;
	uint64_t interval_ns;     /* --interval (500ms) */
	const char *program_output; /* --program-output: shown in the header */
	const char *snapshot_dir; /* --snapshot-dir (.) */
	const char *sysroot;      /* --sysroot */
	const char *debug_dir;    /* --debug-dir */
	int no_symbols;           /* --no-symbols */
};

static const char usage_text[] =
	"usage: heaptrail live [options] TRACE\n"
	"\n"
	"Shows the heap of a traced program on the terminal, refreshed twice a\n"
	"second: a header (heap now, peak, RSS, rates), the heap over time, and the\n"
	"allocating functions by live bytes (record --stacks; else size classes by\n"
	"thread), or the threads.  A trace that a record is still writing is\n"
	"followed as it grows; leaving (q) does not stop the program or the\n"
	"recording.  On a finished trace, < and > move through time.  ? lists the keys.\n"
	"\fEXAMPLES\n"
	"  heaptrail record --stacks -o srv.ht -- ./server &   heaptrail live srv.ht\n"
	"  heaptrail record --live --stacks -- ./server\n"
	"  heaptrail live --batch --width 100 old.ht\n";

enum view { V_TABLE, V_THREADS, V_HELP };

#define MAX_OPEN 256

/* A screen of text: what ncurses shows, or --batch prints. */
struct screen {
	int w, h;
	char **line;     /* h lines of w characters + NUL */
	unsigned char *attr; /* per line: 0, A_BOLD 1, A_REVERSE 2 */
};

struct live {
	struct live_config cfg;
	const char *path;
	struct ht_reader *r;
	struct ht_pass *p;
	struct ht_livetop *lt;
	struct ht_symbolizer *sym;
	size_t sym_nmods;
	struct ht_event pend;    /* read, beyond the cursor: applied when it moves on */
	int has_pend;
	int finished;            /* the writer is gone and every event was read */
	uint64_t finished_ns;    /* since when (CLOCK_MONOTONIC) */
	int followed;            /* the writer was alive when the trace was opened */
	int exec_seen;           /* the program exec'd (its trace then ends) */
	dev_t dev;               /* the file read, as its name found it */
	ino_t ino;
	uint64_t cursor_ns;      /* moment shown on a finished trace (UINT64_MAX: the end) */
	uint64_t shown_ns;       /* the time of the model */
	enum view view;
	enum ht_lt_mode mode;
	enum ht_lt_col sort;
	int by_class;
	char search[128];
	uint64_t open[MAX_OPEN];
	size_t nopen;
	size_t sel, top;         /* selected row, first row shown */
	uint64_t sel_path;       /* keeps the selection across refreshes */
	int paused;
	char msg[4200];          /* status message */
	const struct ht_lt_row *rows;
	size_t nrows;
	uint64_t events;         /* fed (all models since start) */
	uint64_t feed_ns;        /* time spent feeding */
	uint64_t feed_cpu_ns;    /* CPU time of it */
	struct screen scr;
	int table_y, table_h;    /* where the rows are drawn */
	int snap_failed;         /* a snapshot (w) could not be written (--batch's exit status) */
};

/* ---- the screen ---------------------------------------------------------- */

static void screen_init(struct screen *s, int w, int h)
{
	s->w = w < 40 ? 40 : w;
	s->h = h < 12 ? 12 : h;
	s->line = ht_xcalloc((size_t)s->h, sizeof(*s->line));
	for (int i = 0; i < s->h; i++)
		s->line[i] = ht_xcalloc((size_t)s->w + 1, 1);
	s->attr = ht_xcalloc((size_t)s->h, 1);
}

static void screen_free(struct screen *s)
{
	for (int i = 0; s->line && i < s->h; i++)
		free(s->line[i]);
	free(s->line);
	free(s->attr);
	s->line = NULL;
}

static void screen_clear(struct screen *s)
{
	for (int i = 0; i < s->h; i++) {
		memset(s->line[i], ' ', (size_t)s->w);
		s->line[i][s->w] = 0;
		s->attr[i] = 0;
	}
}

/* Writes at (y, x), cut at the right edge. */
__attribute__((format(printf, 4, 5))) static void screen_put(struct screen *s, int y, int x,
							    const char *fmt, ...)
{
	if (y < 0 || y >= s->h || x >= s->w)
		return;
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	for (int i = 0; buf[i] && x + i < s->w; i++)
		s->line[y][x + i] = (buf[i] == '\n' || buf[i] == '\t') ? ' ' : buf[i];
}

/* ---- reading ------------------------------------------------------------- */

/* Reads the trace again from its start; on failure, what was shown stays. */
static int reopen(struct live *L, char *err, size_t errlen)
{
	struct ht_reader *r = ht_reader__open_follow(L->path, err, errlen);
	if (!r && L->r)
		return -1;
	ht_livetop__delete(L->lt);
	ht_pass__delete(L->p);
	ht_reader__close(L->r);
	if (L->sym)
		ht_symbolizer__free(L->sym);
	L->sym = NULL;
	L->sym_nmods = 0;
	L->lt = NULL;
	L->p = NULL;
	L->rows = NULL; /* (the model's) */
	L->nrows = 0;
	L->has_pend = 0;
	L->finished = 0;
	L->shown_ns = 0;
	L->exec_seen = 0;
	L->r = r;
	if (!L->r)
		return -1;
	struct stat st;
	if (stat(L->path, &st) == 0) {
		L->dev = st.st_dev;
		L->ino = st.st_ino;
	}
	L->followed = ht_reader__following(L->r);
	L->p = ht_pass__new();
	L->lt = ht_livetop__new(L->r, NULL);
	return 0;
}

/* The name the trace followed until now got at the exec (OUTPUT.exec<N>,
 * OUTPUT.exec<N>.k where an earlier run's was there): the file of inode
 * dev/ino beside path, its name without the directory in name
 * (OUTPUT.exec<N> if it is not found). */
static void exec_name(const char *path, dev_t dev, ino_t ino, char *name, size_t len)
{
	char dir[PATH_MAX];
	const char *base = ht_split_path(path, dir, sizeof(dir));
	snprintf(name, len, "%s.exec<N>", base);
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t bl = strlen(base);
	while (d && (e = readdir(d)) != NULL) {
		struct stat st;
		char full[PATH_MAX + NAME_MAX + 2];
		if (strncmp(e->d_name, base, bl) || strncmp(e->d_name + bl, ".exec", 5))
			continue;
		snprintf(full, sizeof(full), "%s/%s", dir, e->d_name);
		if (lstat(full, &st) == 0 && st.st_dev == dev && st.st_ino == ino) {
			snprintf(name, len, "%s", e->d_name);
			break;
		}
	}
	if (d)
		closedir(d);
}

/* The program exec'd while it was followed: the trace of the image before
 * is closed and renamed OUTPUT.exec<N>, and the new image writes the name
 * again (docs/record.md, "Processes": a wrapper script, env, a pyenv
 * shim).  Once the name holds a trace of the same process, the display
 * follows that one, from its start.  Returns 1 if it did. */
static int follow_exec(struct live *L)
{
	if (!L->finished || !L->exec_seen || !L->followed || L->cursor_ns != UINT64_MAX)
		return 0;
	struct stat st;
	if (stat(L->path, &st) < 0 || (st.st_dev == L->dev && st.st_ino == L->ino))
		return 0; /* not there yet */
	char err[512];
	struct ht_reader *r = ht_reader__open_follow(L->path, err, sizeof(err));
	if (!r)
		return 0;
	int pid = ht_reader__info(L->r)->pid, same = ht_reader__info(r)->pid == pid;
	ht_reader__close(r);
	if (!same) { /* another recording's: stay */
		L->exec_seen = 0;
		return 0;
	}
	dev_t odev = L->dev;
	ino_t oino = L->ino;
	if (reopen(L, err, sizeof(err)) < 0) {
		snprintf(L->msg, sizeof(L->msg), "%s", err);
		return 0;
	}
	char before[NAME_MAX + 16];
	exec_name(L->path, odev, oino, before, sizeof(before));
	/* (what it says first: the line is cut at the screen's width) */
	snprintf(L->msg, sizeof(L->msg), "pid %d exec'd (the trace before is %s): following %s",
		 pid, before, ht_reader__info(L->r)->cmdline);
	return 1;
}

/* New modules were announced: symbols from a symbolizer that knows them. */
static void update_symbols(struct live *L)
{
	if (L->cfg.no_symbols)
		return;
	const struct ht_module *mods;
	size_t n = ht_reader__modules(L->r, &mods);
	if (n == L->sym_nmods)
		return;
	struct ht_symbol_opts so = {L->cfg.sysroot, L->cfg.debug_dir};
	struct ht_symbolizer *s = ht_symbolizer__new(mods, n, &so);
	if (!s)
		return;
	if (L->sym)
		ht_symbolizer__free(L->sym);
	L->sym = s;
	L->sym_nmods = n;
	ht_livetop__set_symbolizer(L->lt, s);
}

static inline void apply(struct live *L, const struct ht_event *e)
{
	if (__builtin_expect(e->kind == HT_EV_EXEC, 0))
		L->exec_seen = !ht_event__exec_failed(e); /* (a failed one's outcome: runs on) */
	const struct ht_blockop *op = ht_pass__event(L->p, e);
	ht_livetop__event(L->lt, e, op);
}

/* Where a finished trace's events end: its duration, or as far as it
 * could be read when it is cut short or damaged (the heap shown is the
 * heap then: it read "[finished]" at the file's duration, with the heap
 * of seconds before, and said why only on leaving). */
static uint64_t read_end(const struct live *L)
{
	struct ht_damage d;
	if (ht_reader__damage(L->r, &d))
		return d.last_ns;
	return ht_reader__info(L->r)->duration_ns;
}

/* Feeds events up to the cursor, for at most budget_ns of wall time (0:
 * no limit).  Returns 1 if it stopped because the budget ran out. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int feed(struct live *L, uint64_t budget_ns)
{
	uint64_t t0 = ht_clock_ns(), c0 = cpu_ns(), n = 0;
	int out = 0;
	if (L->has_pend) {
		if (L->pend.time_ns > L->cursor_ns) {
			/* the cursor moved, but not past the next event: nothing
			 * to apply, the time shown is the cursor's still */
			L->shown_ns = L->cursor_ns;
			return 0;
		}
		apply(L, &L->pend);
		L->has_pend = 0;
		n++;
	}
	for (;;) {
		const struct ht_event *e = ht_reader__next_event(L->r);
		if (!e) {
			if (ht_reader__following(L->r)) {
				if (!ht_reader__poll(L->r))
					break;
				continue;
			}
			if (!L->finished)
				L->finished_ns = ht_clock_ns();
			L->finished = 1;
			break;
		}
		if (e->time_ns > L->cursor_ns) {
			L->pend = *e;
			L->pend.str = NULL;
			L->has_pend = 1;
			break;
		}
		apply(L, e);
		if ((++n & 0xffff) == 0 && budget_ns && ht_clock_ns() - t0 > budget_ns) {
			out = 1;
			break;
		}
	}
	L->events += n;
	L->feed_ns += ht_clock_ns() - t0;
	L->feed_cpu_ns += cpu_ns() - c0;
	const struct ht_lt_totals *tot = ht_livetop__totals(L->lt);
	L->shown_ns = L->cursor_ns != UINT64_MAX && (L->has_pend || L->finished)
			      ? L->cursor_ns : tot->time_ns;
	if (L->cursor_ns == UINT64_MAX && !L->has_pend && !out) {
		/* read to the end, or to where the writer is: the time shown
		 * is that, not the last event's (a program that allocates
		 * nothing for a while still has time passing, at no rate) */
		uint64_t end = L->finished ? read_end(L) : ht_reader__follow_ns(L->r);
		if (end > L->shown_ns) {
			ht_livetop__advance(L->lt, end);
			L->shown_ns = end;
		}
	}
	return out;
}

/* Moves the cursor of a finished trace; back means reading again. */
static void seek(struct live *L, uint64_t t)
{
	const struct ht_trace_info *in = ht_reader__info(L->r);
	if (t >= in->duration_ns)
		t = UINT64_MAX;
	if (t < ht_livetop__totals(L->lt)->time_ns) {
		char err[512];
		if (reopen(L, err, sizeof(err)) < 0) {
			snprintf(L->msg, sizeof(L->msg), "%s", err);
			return;
		}
	}
	L->cursor_ns = t;
	feed(L, 0);
}

/* ---- drawing ------------------------------------------------------------- */

static const char *count(char *buf, size_t len, double v)
{
	if (v < 10000)
		snprintf(buf, len, "%.0f", v);
	else if (v < 10e6)
		snprintf(buf, len, "%.1fK", v / 1e3);
	else if (v < 10e9)
		snprintf(buf, len, "%.1fM", v / 1e6);
	else
		snprintf(buf, len, "%.1fG", v / 1e9);
	return buf;
}

static const char *secs(char *buf, size_t len, uint64_t ns)
{
	double s = (double)ns / 1e9;
	if (s < 60)
		snprintf(buf, len, "%.1fs", s);
	else if (s < 3600)
		snprintf(buf, len, "%dm%02ds", (int)s / 60, (int)s % 60);
	else
		snprintf(buf, len, "%dh%02dm", (int)s / 3600, (int)s / 60 % 60);
	return buf;
}

static uint64_t rss_at(struct live *L, uint64_t t, uint64_t *max_kb)
{
	const uint64_t *tn, *kb;
	size_t n = ht_reader__rss_samples(L->r, &tn, &kb);
	uint64_t v = 0;
	if (max_kb)
		*max_kb = 0;
	for (size_t i = 0; i < n && tn[i] <= t; i++) {
		v = kb[i];
		if (max_kb && kb[i] > *max_kb)
			*max_kb = kb[i];
	}
	return v;
}

static int draw_header(struct live *L, struct screen *s)
{
	/* (record notes a SIGKILL once the writer has closed the trace: the
	 * header is read again while it says no more than "killed?", for 5 s:
	 * with LD_PRELOAD alone nothing ever notes it) */
	if (L->finished && ht_clock_ns() - L->finished_ns < 5000000000ull)
		ht_reader__recheck_end(L->r);
	const struct ht_trace_info *in = ht_reader__info(L->r);
	const struct ht_lt_totals *t = ht_livetop__totals(L->lt);
	char a[32], b[32], c[32], d[32], e[32], f[32];
	/* a program killed (its writer closed the trace for it: orphaned)
	 * is said as stats says it, not as one that finished; the signal
	 * when the trace names it (the recorder's handler, or record for a
	 * SIGKILL): a crash read "finished" */
	char died[64], sig[32], cut[64], at[32];
	snprintf(died, sizeof(died), "ended: died of %s",
		 ht_signal_name(in->signal, sig));
	struct ht_damage dmg;
	int damaged = L->finished && !ht_reader__following(L->r) && ht_reader__damage(L->r, &dmg);
	if (damaged)
		snprintf(cut, sizeof(cut), "cut short or damaged: read to %s",
			 secs(at, sizeof(at), dmg.last_ns));
	const char *state = ht_reader__following(L->r) ? "running, still being written"
			    : damaged				? cut
			    : in->signal			? died
			    : in->closed && in->orphaned && !(in->flags & HT_FILE_F_EXIT_SYSCALL)
				    ? "ended, killed?"
			    : in->closed ? "finished"
					 : "finished, not closed cleanly";
	/* the command cut short rather than the state */
	int room = s->w - (int)strlen(state) - 40, len = (int)strlen(in->cmdline);
	if (room < 10)
		room = 10;
	screen_put(s, 0, 0, "heaptrail live  pid %d  %.*s%s  [%s]", (int)in->pid,
		   len > room ? room - 3 : len, in->cmdline, len > room ? "..." : "", state);
	s->attr[0] = 1;
	uint64_t now = L->shown_ns;
	uint32_t nthr = 0;
	const struct ht_lt_thread *th;
	size_t n = ht_livetop__threads(L->lt, &th);
	for (size_t i = 0; i < n; i++)
		nthr += th[i].live_blocks > 0 || th[i].allocs > 0;
	char lag[64] = "";
	if (ht_reader__following(L->r) && in->duration_ns > now)
		snprintf(lag, sizeof(lag), " (program at %s)", secs(f, sizeof(f), in->duration_ns));
	screen_put(s, 1, 0, "time %s%s%s  threads %u  events %s  recording %s%s",
		   secs(a, sizeof(a), now), L->cursor_ns != UINT64_MAX ? " (cursor)" : "", lag, nthr,
		   count(b, sizeof(b), (double)t->events), t->recording ? "on" : "paused",
		   L->paused ? "  DISPLAY PAUSED" : "");
	uint64_t rss = rss_at(L, now, NULL);
	screen_put(s, 2, 0, "heap now %s requested, %s usable, %s blocks   peak %s at %s   RSS %s",
		ht_lt_bytes(a, sizeof(a), (double)t->live_bytes),
		ht_lt_bytes(b, sizeof(b), (double)t->live_usable),
		count(c, sizeof(c), (double)t->live_blocks),
		ht_lt_bytes(d, sizeof(d), (double)t->peak_bytes), secs(e, sizeof(e), t->peak_ns),
		rss ? ht_lt_bytes(f, sizeof(f), (double)rss * 1024) : "-");
	screen_put(s, 3, 0, "allocations %s/s  frees %s/s   allocated %s in %s calls",
		   count(a, sizeof(a), t->alloc_rate), count(b, sizeof(b), t->free_rate),
		   ht_lt_bytes(c, sizeof(c), (double)t->alloc_bytes),
		   count(d, sizeof(d), (double)t->allocs));
	if (!L->cfg.program_output)
		return 4;
	screen_put(s, 4, 0, "program output: %s   (q leaves the display; the program and its "
		   "recording go on)", L->cfg.program_output);
	return 5;
}

/* The heap over time: live bytes as columns of '#', RSS as '-' above them. */
static int draw_strip(struct live *L, struct screen *s, int y)
{
	const int H = 4, X = 10;
	int W = s->w - X - 1;
	const int64_t *pts;
	uint64_t width;
	size_t n = ht_livetop__strip(L->lt, &pts, &width);
	uint64_t end = L->shown_ns ? L->shown_ns : 1;
	uint64_t rss_max_kb;
	rss_at(L, end, &rss_max_kb);
	double top = (double)ht_livetop__totals(L->lt)->peak_bytes;
	if ((double)rss_max_kb * 1024 > top)
		top = (double)rss_max_kb * 1024;
	if (top < 1)
		top = 1;
	char a[32], b[32];
	screen_put(s, y, 0, "%9s", ht_lt_bytes(a, sizeof(a), top));
	screen_put(s, y + H - 1, 0, "%9s", "0");
	const uint64_t *tn, *kb;
	size_t nr = ht_reader__rss_samples(L->r, &tn, &kb);
	size_t ri = 0;
	uint64_t rss = 0;
	for (int x = 0; x < W; x++) {
		uint64_t t0 = end * (uint64_t)x / (uint64_t)W, t1 = end * (uint64_t)(x + 1) / (uint64_t)W;
		int64_t v = 0;
		for (uint64_t i = t0 / width; i < n && i * width <= t1; i++)
			if (pts[i] > v)
				v = pts[i];
		while (ri < nr && tn[ri] <= t1)
			rss = kb[ri++];
		int lv = (int)((double)v / top * H * 2 + 0.5); /* half rows */
		int lr = (int)((double)rss * 1024 / top * H + 0.5);
		for (int row = 0; row < H; row++) {
			int fromb = H - 1 - row; /* 0 = bottom */
			char ch = ' ';
			if (lv >= 2 * fromb + 2)
				ch = '#';
			else if (lv == 2 * fromb + 1)
				ch = '.';
			else if (rss && lr == fromb + 1)
				ch = '-';
			if (t0 <= end && (v || rss))
				s->line[y + row][X + x] = ch;
		}
	}
	screen_put(s, y + H, X, "0s");
	secs(b, sizeof(b), end);
	screen_put(s, y + H, s->w - 1 - (int)strlen(b), "%s", b);
	screen_put(s, y + H, X + 6, "heap over time: # live bytes (max per column), - RSS");
	return H + 1;
}

static const char *const mode_name[HT_LT_NMODES] = {"live now", "at the peak", "allocated since start"};
static const char *const col_name[HT_LT_NCOLS] = {"own", "total", "blocks", "allocs", "bytes alloc"};

static int is_open(void *ctx, uint64_t path)
{
	struct live *L = ctx;
	for (size_t i = 0; i < L->nopen; i++)
		if (L->open[i] == path)
			return 1;
	return 0;
}

static void build_rows(struct live *L)
{
	update_symbols(L);
	struct ht_lt_query q = {
		.mode = L->mode,
		.sort = L->sort,
		.by_class = L->by_class,
		.search = L->search[0] ? L->search : NULL,
		.is_open = is_open,
		.ctx = L,
		.max_rows = 5000,
	};
	L->rows = ht_livetop__rows(L->lt, &q, &L->nrows);
	/* the selection follows its row */
	for (size_t i = 0; i < L->nrows; i++)
		if (L->rows[i].path == L->sel_path) {
			L->sel = i;
			break;
		}
	if (L->sel >= L->nrows)
		L->sel = L->nrows ? L->nrows - 1 : 0;
	if (L->nrows)
		L->sel_path = L->rows[L->sel].path;
}

static void draw_table(struct live *L, struct screen *s, int y, int h)
{
	const struct ht_lt_totals *t = ht_livetop__totals(L->lt);
	int classes = L->by_class || !t->stacks;
	screen_put(s, y, 0, "%s, by %s%s%s   sort: %s", mode_name[L->mode],
		   classes ? "size class and thread" : "allocating function",
		   L->search[0] ? "   search: " : "", L->search, col_name[L->sort]);
	y++;
	h--;
	int lw = s->w - 5 * 12;
	if (lw < 20)
		lw = 20;
	char hdr[HT_LT_NCOLS][16];
	for (int c = 0; c < HT_LT_NCOLS; c++)
		snprintf(hdr[c], sizeof(hdr[c]), "%s%s", L->sort == (enum ht_lt_col)c ? "*" : "",
			 col_name[c]);
	const char *first = L->mode == HT_LT_ALLOCATED ? "allocs" : "blocks";
	if (L->sort == HT_LT_BLOCKS)
		snprintf(hdr[HT_LT_BLOCKS], sizeof(hdr[0]), "*%s", first);
	else
		snprintf(hdr[HT_LT_BLOCKS], sizeof(hdr[0]), "%s", first);
	screen_put(s, y, 0, "%-*.*s%12s%12s%12s%12s%12s", lw, lw,
		classes ? "size class / thread" : "function / callers", hdr[0], hdr[1], hdr[2], hdr[3],
		hdr[4]);
	s->attr[y] = 1;
	y++;
	h--;
	L->table_y = y;
	L->table_h = h;
	if (L->sel < L->top)
		L->top = L->sel;
	if (h > 0 && L->sel >= L->top + (size_t)h)
		L->top = L->sel - (size_t)h + 1;
	if (!L->nrows)
		screen_put(s, y, 2, "%s", L->search[0] ? "(no stack holds the function searched)"
					: "(nothing to show at this moment)");
	for (int i = 0; i < h && L->top + (size_t)i < L->nrows; i++) {
		const struct ht_lt_row *row = &L->rows[L->top + (size_t)i];
		char lab[512], v[HT_LT_NCOLS][32];
		snprintf(lab, sizeof(lab), "%*s%s%s", row->depth * 2, "",
			 row->has_children ? (row->open ? "- " : "+ ") : "  ", row->label);
		for (int c = 0; c < HT_LT_NCOLS; c++) {
			int bytes = c == HT_LT_OWN || c == HT_LT_TOTAL || c == HT_LT_BYTES;
			if (row->v[c] < 0 && c == HT_LT_OWN)
				v[c][0] = 0;
			else if (bytes)
				ht_lt_bytes(v[c], sizeof(v[c]), (double)row->v[c]);
			else
				count(v[c], sizeof(v[c]), (double)row->v[c]);
		}
		screen_put(s, y + i, 0, "%-*.*s%12s%12s%12s%12s%12s", lw, lw, lab, v[0], v[1], v[2], v[3],
			v[4]);
		if (L->top + (size_t)i == L->sel)
			s->attr[y + i] = 2;
	}
}

static void draw_threads(struct live *L, struct screen *s, int y, int h)
{
	const struct ht_lt_thread *t;
	size_t n = ht_livetop__threads(L->lt, &t);
	screen_put(s, y++, 0, "threads%18s%12s%12s%12s%12s%12s%14s", "live", "blocks", "allocs/s",
		"frees/s", "allocs", "frees", "cross frees");
	s->attr[y - 1] = 1;
	for (size_t i = 0; i < n && (int)i < h - 1; i++) {
		char a[32], b[32], c[32], d[32], e[32], f[32], g[32];
		screen_put(s, y + (int)i, 0, "%-7u%18s%12s%12s%12s%12s%12s%14s", t[i].tid,
			ht_lt_bytes(a, sizeof(a), (double)t[i].live_bytes),
			count(b, sizeof(b), (double)t[i].live_blocks), count(c, sizeof(c), t[i].alloc_rate),
			count(d, sizeof(d), t[i].free_rate), count(e, sizeof(e), (double)t[i].allocs),
			count(f, sizeof(f), (double)t[i].frees),
			count(g, sizeof(g), (double)t[i].cross_frees));
	}
}

static const char *const help_lines[] = {
	"keys",
	"  q            quit (the program and its recording go on)",
	"  up/down j/k  select a row; PgUp/PgDn a page",
	"  Enter space  open or close the selected row (its callers; with size classes, threads)",
	"  s / S        sort by the next / previous column",
	"  m            count: live now, at the peak, allocated since start",
	"  t            threads view (per thread: live bytes, rates, frees of others' blocks)",
	"  c            by size class and thread, even with stacks",
	"  /            search: keep the functions whose stacks hold the text (empty: all)",
	"  p            pause the display (the trace keeps being read later)",
	"  w            write a snapshot of this moment (leaks-style text) to a file",
	"  W            write the HTML report (heaptrail report) of the trace so far",
	"  r            toggle recording: SIGUSR2 to the program (record --toggle-signal)",
	"  < > (arrows) move through time on a finished trace; Home/End: start/end",
	"  ?            this help; any key leaves it",
	"",
	"The table: own = what the function allocated itself, total = with what it",
	"allocated through the functions it called; blocks, allocations, bytes allocated",
	"(of its own; of its total for a function that only calls others, such as main).",
	"A followed trace is shown up to the last complete flush of the recorder",
	"(every event of every thread up to then: 0.2 to 0.3 s behind the program).",
};

static void draw(struct live *L)
{
	struct screen *s = &L->scr;
	screen_clear(s);
	ht_livetop__tick(L->lt, L->shown_ns); /* the rates of the second before the moment shown */
	int y = draw_header(L, s);
	y += draw_strip(L, s, y);
	int h = s->h - y - 1;
	if (L->view == V_HELP) {
		for (size_t i = 0; i < sizeof(help_lines) / sizeof(help_lines[0]) && (int)i < h; i++)
			screen_put(s, y + (int)i, 0, "%s", help_lines[i]);
	} else if (L->view == V_THREADS) {
		draw_threads(L, s, y, h);
	} else {
		build_rows(L);
		draw_table(L, s, y, h);
	}
	screen_put(s, s->h - 1, 0, "%s", L->msg[0] ? L->msg :
		"q quit  Enter open  s sort  m mode  t threads  c classes  / search  p pause  "
		"w/W snapshot  r rec on/off  <> time  ? help");
	s->attr[s->h - 1] = 2;
}

/* ---- keys ---------------------------------------------------------------- */

static void toggle_open(struct live *L)
{
	if (L->sel >= L->nrows || !L->rows[L->sel].has_children)
		return;
	uint64_t p = L->rows[L->sel].path;
	for (size_t i = 0; i < L->nopen; i++)
		if (L->open[i] == p) {
			L->open[i] = L->open[--L->nopen];
			return;
		}
	if (L->nopen < MAX_OPEN)
		L->open[L->nopen++] = p;
}

static void snapshot(struct live *L)
{
	const struct ht_trace_info *in = ht_reader__info(L->r);
	char path[4096], err[512];
	snprintf(path, sizeof(path), "%s/heaptrail-live-%d-%llu.txt",
		 L->cfg.snapshot_dir ? L->cfg.snapshot_dir : ".", (int)in->pid,
		 (unsigned long long)(L->shown_ns / 1000000));
	struct ht_out o;
	if (ht_out__open(&o, path, HT_OUT_PUBLIC, 0, err, sizeof(err)) < 0) {
		snprintf(L->msg, sizeof(L->msg), "%s", err);
		L->snap_failed = 1;
		return;
	}
	const struct ht_lt_totals *t = ht_livetop__totals(L->lt);
	char a[32], when[64];
	/* what "live" means at the moment shown: the program's now only while
	 * it runs; a finished trace's end, or the cursor's moment */
	const char *what = mode_name[L->mode];
	if (L->mode == HT_LT_LIVE && !ht_reader__following(L->r)) {
		if (L->cursor_ns == UINT64_MAX)
			snprintf(when, sizeof(when), "live at the end of the trace");
		else
			snprintf(when, sizeof(when), "live at %s", secs(a, sizeof(a), L->shown_ns));
		what = when;
	}
	fprintf(o.f, "heaptrail live snapshot of %s (pid %d, %s) at %s: %lld bytes in %lld blocks "
		"live, peak %lld bytes; %s\n\n", L->path, (int)in->pid, in->cmdline,
		secs(a, sizeof(a), L->shown_ns), (long long)t->live_bytes, (long long)t->live_blocks,
		(long long)t->peak_bytes, what);
	ht_livetop__write_text(L->lt, L->mode, 1000, o.f);
	if (ht_out__commit(&o, err, sizeof(err)) < 0) {
		snprintf(L->msg, sizeof(L->msg), "%s", err);
		L->snap_failed = 1;
	} else
		snprintf(L->msg, sizeof(L->msg), "snapshot written to %s", path);
}

/* W: the HTML report (heaptrail report) of the trace up to now, written
 * by a process of its own in the background (reading the trace takes a
 * while; the display goes on).  It is of the whole trace so far, so the
 * moment shown must be the trace's latest: not with the time cursor. */
static void snapshot_html(struct live *L)
{
	if (L->cursor_ns != UINT64_MAX) {
		snprintf(L->msg, sizeof(L->msg), "W reports the whole trace so far: End first (w "
			 "writes the text of the moment at the cursor)");
		return;
	}
	const struct ht_trace_info *in = ht_reader__info(L->r);
	char path[4096];
	snprintf(path, sizeof(path), "%s/heaptrail-live-%d-%llu.html",
		 L->cfg.snapshot_dir ? L->cfg.snapshot_dir : ".", (int)in->pid,
		 (unsigned long long)(L->shown_ns / 1000000));
	/* twice forked: the report's process is nobody's child here (record
	 * --live waits for its program only; no zombie is left) */
	pid_t p = fork();
	if (p == 0) {
		if (fork() == 0) {
			int fd = open("/dev/null", O_RDWR);
			if (fd >= 0 && (dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0))
				_exit(127);
			char *av[12];
			int n = 0;
			av[n++] = "heaptrail";
			av[n++] = "report";
			av[n++] = "-q";
			av[n++] = "-o";
			av[n++] = path;
			if (L->cfg.sysroot) {
				av[n++] = "--sysroot";
				av[n++] = (char *)L->cfg.sysroot;
			}
			if (L->cfg.debug_dir) {
				av[n++] = "--debug-dir";
				av[n++] = (char *)L->cfg.debug_dir;
			}
			av[n++] = "--";
			av[n++] = (char *)L->path;
			av[n] = NULL;
			execv("/proc/self/exe", av);
			_exit(127);
		}
		_exit(0);
	}
	if (p < 0) {
		snprintf(L->msg, sizeof(L->msg), "cannot start heaptrail report: %s",
			 strerror(errno));
		return;
	}
	while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
		;
	snprintf(L->msg, sizeof(L->msg), "report of the trace so far being written to %s", path);
}

/* Whether the recorder in pid switches on SIGUSR2 (record --toggle-signal
 * puts toggle_signal=1 in HEAPTRAIL_OPTIONS, a user of plain LD_PRELOAD
 * sets HEAPTRAIL_TOGGLE_SIGNAL=1: the process's initial environment, as
 * /proc shows it, says which); else the signal's default action would end
 * the program. */
static int toggle_on(int pid)
{
	char name[64];
	snprintf(name, sizeof(name), "/proc/%d/environ", pid);
	FILE *f = fopen(name, "r");
	if (!f)
		return 0;
	char *line = NULL;
	size_t cap = 0;
	int on = 0;
	while (getdelim(&line, &cap, 0, f) > 0) {
		if (!strcmp(line, "HEAPTRAIL_TOGGLE_SIGNAL=1"))
			on = 1;
		if (strncmp(line, "HEAPTRAIL_OPTIONS=", 18))
			continue;
		/* name=value words, out= last (it takes the rest) */
		for (char *w = line + 18, *end; *w && strncmp(w, "out=", 4); w = end + 1) {
			end = strchrnul(w, ',');
			if ((size_t)(end - w) == 15 && !strncmp(w, "toggle_signal=1", 15))
				on = 1;
			if (!*end)
				break;
		}
	}
	free(line);
	fclose(f);
	return on;
}

static void toggle_recording(struct live *L)
{
	const struct ht_trace_info *in = ht_reader__info(L->r);
	if (!ht_reader__following(L->r)) {
		snprintf(L->msg, sizeof(L->msg), "the recording is over: nothing to switch");
		return;
	}
	if (!toggle_on(in->pid)) {
		snprintf(L->msg, sizeof(L->msg), "pid %d was not recorded with --toggle-signal (or "
			 "--live): SIGUSR2 would end it, not sent", (int)in->pid);
		return;
	}
	if (kill(in->pid, SIGUSR2) < 0)
		snprintf(L->msg, sizeof(L->msg), "cannot signal pid %d: %s", (int)in->pid,
			 strerror(errno));
	else
		snprintf(L->msg, sizeof(L->msg), "sent SIGUSR2 to pid %d: recording %s", (int)in->pid,
			 ht_livetop__totals(L->lt)->recording ? "pauses" : "resumes");
}

/* Returns 1 to quit. */
static int key(struct live *L, int ch)
{
	L->msg[0] = 0;
	if (L->view == V_HELP && ch != 'q') {
		L->view = V_TABLE;
		return 0;
	}
	int page = L->table_h > 1 ? L->table_h - 1 : 10;
	uint64_t dur = ht_reader__info(L->r)->duration_ns, step = dur / 40 ? dur / 40 : 1;
	switch (ch) {
	case 'q':
	case 'Q':
		return 1;
	case KEY_UP:
	case 'k':
		if (L->sel)
			L->sel--;
		break;
	case KEY_DOWN:
	case 'j':
		if (L->sel + 1 < L->nrows)
			L->sel++;
		break;
	case KEY_PPAGE:
		L->sel = L->sel > (size_t)page ? L->sel - (size_t)page : 0;
		break;
	case KEY_NPAGE:
		L->sel += (size_t)page;
		if (L->sel >= L->nrows)
			L->sel = L->nrows ? L->nrows - 1 : 0;
		break;
	case '\n':
	case '\r':
	case KEY_ENTER:
	case ' ':
	case '+':
	case '-':
		toggle_open(L);
		break;
	case 's':
		L->sort = (L->sort + 1) % HT_LT_NCOLS;
		break;
	case 'S':
		L->sort = (L->sort + HT_LT_NCOLS - 1) % HT_LT_NCOLS;
		break;
	case 'm':
		L->mode = (L->mode + 1) % HT_LT_NMODES;
		break;
	case 't':
		L->view = L->view == V_THREADS ? V_TABLE : V_THREADS;
		break;
	case 'c':
		L->by_class = !L->by_class;
		break;
	case 'p':
		L->paused = !L->paused;
		snprintf(L->msg, sizeof(L->msg), L->paused ? "display paused (p resumes)"
							   : "display resumed");
		break;
	case 'w':
		snapshot(L);
		break;
	case 'W':
		snapshot_html(L);
		break;
	case 'r':
		toggle_recording(L);
		break;
	case '?':
	case 'h':
		L->view = V_HELP;
		break;
	case '<':
	case ',':
	case KEY_LEFT:
	case '>':
	case '.':
	case KEY_RIGHT:
	case KEY_HOME:
	case KEY_END:
		if (ht_reader__following(L->r)) {
			snprintf(L->msg, sizeof(L->msg), "moving through time works once the trace is "
				 "finished");
			break;
		}
		{
			uint64_t now = L->cursor_ns == UINT64_MAX ? dur : L->cursor_ns;
			uint64_t t = ch == KEY_HOME ? 0 : ch == KEY_END ? UINT64_MAX
				     : (ch == '<' || ch == ',' || ch == KEY_LEFT) ? (now > step ? now - step : 0)
				     : now + step;
			seek(L, t);
		}
		break;
	default:
		break;
	}
	if (L->sel < L->nrows)
		L->sel_path = L->rows[L->sel].path;
	return 0;
}

/* The terminal is gone (hung up, its window closed, its tmux session
 * killed): curses' reads then fail at once, and the loop must end rather
 * than spin. */
static int terminal_gone(void)
{
	struct pollfd p = {.fd = 0, .events = POLLIN};
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

/* The search prompt, on the status line; returns when Enter or Esc is
 * pressed. */
static void prompt_search(struct live *L)
{
	char buf[sizeof(L->search)] = "";
	size_t n = 0;
	timeout(-1);
	curs_set(1);
	for (;;) {
		move(LINES - 1, 0);
		clrtoeol();
		attron(A_REVERSE);
		mvprintw(LINES - 1, 0, "search function (Enter: apply, empty: all, Esc: cancel): %s", buf);
		attroff(A_REVERSE);
		refresh();
		int ch = getch();
		if (ch == ERR && terminal_gone())
			break;
		if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
			memcpy(L->search, buf, n + 1);
			L->sel = 0;
			L->sel_path = 0;
			break;
		}
		if (ch == 27)
			break;
		if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && n)
			buf[--n] = 0;
		else if (ch >= 32 && ch < 127 && n + 1 < sizeof(buf)) {
			buf[n++] = (char)ch;
			buf[n] = 0;
		}
	}
	curs_set(0);
	timeout(100);
}

/* ---- the loops ----------------------------------------------------------- */

static void show(struct live *L)
{
	struct screen *s = &L->scr;
	for (int y = 0; y < s->h && y < LINES; y++) {
		int a = s->attr[y] == 1 ? A_BOLD : s->attr[y] == 2 ? A_REVERSE : 0;
		if (a)
			attron(a);
		mvaddnstr(y, 0, s->line[y], COLS < s->w ? COLS : s->w);
		if (a)
			attroff(a);
	}
	refresh();
}

static int run_batch(struct live *L)
{
	screen_init(&L->scr, (int)L->cfg.width, (int)L->cfg.height);
	if (L->cfg.at_given)
		L->cursor_ns = L->cfg.at_ns;
	for (;;) {
		while (!L->finished && !(L->has_pend)) {
			feed(L, 0);
			if (!L->finished && !L->has_pend)
				usleep(20000);
		}
		if (!L->finished) /* at the cursor */
			break;
		/* an exec: the new image's trace, once it is there (2 s) */
		int k = 0, switched = 0;
		while (L->exec_seen && L->followed && k++ < 100 && !(switched = follow_exec(L)))
			usleep(20000);
		if (!switched)
			break;
	}
	/* A program that died without shutting the tracer down: record notes
	 * how (SIGKILL) once the writer is done, which a follower reaches
	 * first.  Waited for, 1 s at most (with LD_PRELOAD alone nothing
	 * notes it). */
	const struct ht_trace_info *fin = ht_reader__info(L->r);
	for (int k = 0;
	     L->followed && L->finished && fin->closed && fin->orphaned && !fin->signal &&
	     !fin->exit_syscall && !ht_reader__recheck_end(L->r) && k < 50;
	     k++)
		usleep(20000);
	uint64_t end = ht_reader__info(L->r)->duration_ns;
	if (L->cfg.at_given && L->finished && L->cfg.at_ns > end) {
		/* nothing happens after the trace: say when it ends, and show
		 * that (as leaks --at does), not a cursor past it */
		char b1[32], b2[32];
		if (!ht_quiet)
			fprintf(stderr, "heaptrail: note: --at %s is after the end of %s (%s): the "
				"screen at its end\n",
				ht_fmt_ns(b1, L->cfg.at_ns), L->path, ht_fmt_ns(b2, end));
		L->cursor_ns = UINT64_MAX;
		ht_livetop__advance(L->lt, end);
		L->shown_ns = end;
	}
	double s = (double)L->feed_ns / 1e9, cpu = (double)L->feed_cpu_ns / 1e9;
	draw(L);
	for (const char *k = L->cfg.keys; k && *k; k++) {
		key(L, *k);
		draw(L);
	}
	for (int y = 0; y < L->scr.h; y++) {
		char *e = L->scr.line[y] + L->scr.w;
		while (e > L->scr.line[y] && e[-1] == ' ')
			e--;
		printf("%.*s\n", (int)(e - L->scr.line[y]), L->scr.line[y]);
	}
	if (L->snap_failed) {
		ht_error("live: the snapshot (w) was not written: %s", L->msg);
		return HT_EXIT_DATA;
	}
	const uint64_t *tn, *kb;
	/* (the trace's events, as stats counts them: L->events also counts
	 * the release half of each moving realloc, which the reader splits) */
	uint64_t events = ht_livetop__totals(L->lt)->events;
	fprintf(stderr, "heaptrail: live: %llu events read in %.3f s, %.3f s of CPU (%.1f M events/s "
		"per core); %zu RSS samples kept\n", (unsigned long long)events, s, cpu,
		cpu > 0 ? (double)events / cpu / 1e6 : 0.0,
		ht_reader__rss_samples(L->r, &tn, &kb));
	return HT_EXIT_OK;
}

volatile sig_atomic_t ht_live_quit;

/* SIGINT or SIGTERM received by the display run on its own. */
static volatile sig_atomic_t quit_signal;

static void on_quit_signal(int sig)
{
	quit_signal = sig;
}

/* SIGINT and SIGTERM end the display, then the command dies of the signal
 * (130, 143), as every command does, with the terminal restored.  Left at
 * their default actions, ncurses caught them, restored the terminal and
 * exited 1.  Not under record --live, whose handlers are in place
 * (ht_live_quit); returns whether they were set. */
static int catch_quit_signals(void)
{
	static const int sigs[] = {SIGINT, SIGTERM};
	int set = 0;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old, sa;
		if (sigaction(sigs[i], NULL, &old) < 0 || old.sa_handler != SIG_DFL ||
		    (old.sa_flags & SA_SIGINFO))
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_quit_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, NULL);
		set = 1;
	}
	return set;
}

static int run_ui(struct live *L)
{
	int own_signals = catch_quit_signals();
	initscr();
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	curs_set(0);
	timeout(100);
	screen_init(&L->scr, COLS, LINES);
	uint64_t last = 0;
	int dirty = 1;
	for (;;) {
		/* record --live passed a signal on to the program
		 * (ht_live_quit), or one came to the display run on its own */
		if (ht_live_quit || quit_signal)
			break;
		uint64_t now = ht_clock_ns();
		int behind = 0;
		if (!L->paused)
			behind = feed(L, 150000000); /* keys stay answered while catching up */
		if (L->finished && follow_exec(L))
			dirty = 1;
		if (now - last >= L->cfg.interval_ns || dirty) {
			if (L->scr.w != COLS || L->scr.h != LINES) {
				screen_free(&L->scr);
				screen_init(&L->scr, COLS, LINES);
				clear();
			}
			draw(L);
			show(L);
			last = now;
			dirty = 0;
		}
		timeout(behind ? 0 : 100); /* catching up: read on at once */
		int ch = getch();
		if (ch == ERR) {
			if (terminal_gone())
				break;
			continue;
		}
		if (ch == KEY_RESIZE) {
			dirty = 1;
			continue;
		}
		if (ch == '/') {
			prompt_search(L);
			dirty = 1;
			continue;
		}
		if (key(L, ch))
			break;
		dirty = 1;
	}
	endwin();
	if (own_signals && quit_signal) {
		fflush(stdout);
		signal(quit_signal, SIG_DFL);
		raise(quit_signal);
	}
	return HT_EXIT_OK;
}

int cmd_live(int argc, char **argv)
{
	struct live L;
	memset(&L, 0, sizeof(L));
	struct live_config *cfg = &L.cfg;
	cfg->width = 120;
	cfg->height = 40;
	cfg->interval_ns = 500000000ull;
	const char *at = NULL;
	const struct ht_option opts[] = {
		{0, "batch", HT_OPT_FLAG, &cfg->batch, NULL, "no terminal UI: read the trace (to its end, following it while it is written), print one screen"},
		{0, "width", HT_OPT_U64, &cfg->width, "N", "--batch: columns, 40 to 10000 (120)"},
		{0, "height", HT_OPT_U64, &cfg->height, "N", "--batch: lines, 10 to 10000 (40)"},
		{0, "keys", HT_OPT_STRING, &cfg->keys, "KEYS", "--batch: press these keys before printing"},
		{0, "at", HT_OPT_STRING, &at, "TIME", "--batch: show this moment of the trace, e.g. 1.5s (the end)"},
		{0, "interval", HT_OPT_DURATION, &cfg->interval_ns, "TIME", "redraw every TIME (500ms; rates are per second)"},
		{0, "program-output", HT_OPT_STRING, &cfg->program_output, "FILE", "say in the header where the program's output goes"},
		{0, "snapshot-dir", HT_OPT_STRING, &cfg->snapshot_dir, "DIR", "where w and W write snapshots (.)"},
		{0, "no-symbols", HT_OPT_FLAG, &cfg->no_symbols, NULL, "show addresses, not functions"},
		{0, "sysroot", HT_OPT_STRING, &cfg->sysroot, "DIR", "find the traced modules under DIR"},
		{0, "debug-dir", HT_OPT_STRING, &cfg->debug_dir, "DIR", "also look for separate debug files in DIR"},
		{0},
	};
	int ret = HT_EXIT_USAGE;
	int n = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (n != 1) {
		ht_error("live takes one trace (see --help)");
		goto cleanup;
	}
	if (at) {
		if (ht_parse_duration(at, &cfg->at_ns)) { /* (nan, inf, 1e400s too) */
			ht_error("--at %s: a time like 1.5s or 200ms is expected", at);
			goto cleanup;
		}
		cfg->at_given = 1;
	}
	if (cfg->width < 40 || cfg->width > 10000 || cfg->height < 10 || cfg->height > 10000) {
		ht_error("--width %llu --height %llu: give 40 to 10000 columns and 10 to 10000 lines",
			 (unsigned long long)cfg->width, (unsigned long long)cfg->height);
		goto cleanup;
	}
	if (cfg->snapshot_dir) {
		/* w and W write there: a directory that cannot take them is
		 * said now, not at the first key (--batch exited 0 after it) */
		char probe[4200], serr[512];
		struct stat sst;
		snprintf(probe, sizeof(probe), "%s/heaptrail-live-snapshot", cfg->snapshot_dir);
		int src = stat(cfg->snapshot_dir, &sst);
		if (src < 0 || !S_ISDIR(sst.st_mode)) {
			ht_error("live: --snapshot-dir %s: %s", cfg->snapshot_dir,
				 src < 0 ? strerror(errno) : "not a directory");
			goto cleanup;
		}
		if (ht_out__check(probe, serr, sizeof(serr))) {
			ht_error("live: --snapshot-dir: %s", serr);
			goto cleanup;
		}
	}
	if (!cfg->interval_ns)
		cfg->interval_ns = 500000000ull;
	L.path = argv[0];
	L.cursor_ns = UINT64_MAX;
	L.sort = HT_LT_OWN;
	char err[512];
	if (reopen(&L, err, sizeof(err)) < 0) {
		ht_error("%s", err);
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	if (!cfg->batch && (!isatty(0) || !isatty(1))) {
		ht_error("live needs a terminal (or --batch)");
		goto cleanup;
	}
	ret = cfg->batch ? run_batch(&L) : run_ui(&L);
	/* the reader's warnings and error, naming the file (only the error
	 * after the display: "still being written" is what it showed) */
	if (ht_analyze__finish(L.r, L.path, !cfg->batch))
		ret = HT_EXIT_DATA;
cleanup:
	screen_free(&L.scr);
	ht_livetop__delete(L.lt);
	ht_pass__delete(L.p);
	if (L.sym)
		ht_symbolizer__free(L.sym);
	ht_reader__close(L.r);
	return ret;
}
