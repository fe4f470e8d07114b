/* heaptrail record: run a command under libheaptrail.so. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "cli/builtin.h"
#include "cli/live_quit.h"
#include "common/dirwatch.h"
#include "common/options.h"
#include "common/outfile.h"
#include "common/pidpath.h"
#include "common/procstat.h"
#include "common/sanitizers.h"
#include "common/shellword.h"
#include "common/util.h"
#include "symbols/elfsyms.h"
#include "trace/compact.h"
#include "trace/reader.h"

#ifndef HT_LIBDIR_REL
#define HT_LIBDIR_REL "../lib/heaptrail"
#endif

/* Defaults are labelled by their flag. */
struct record_config {
	const char *output;      /* -o: trace path (heaptrail.<pid>.ht) */
	int start_paused;        /* --start-paused */
	int follow_exec;         /* --follow-exec */
	int no_follow_fork;      /* --no-follow-fork */
	uint64_t flush_interval; /* --flush-interval (100ms) */
	uint64_t rss_interval;   /* --rss-interval (10ms) */
	uint64_t buffer_size;    /* --buffer-size (64K) */
	int toggle_signal;       /* --toggle-signal */
	int zstd_level;          /* --zstd-level (1; 0: raw) */
	const char *finish;      /* --finish (NULL: huffman) */
	const char *clock;       /* --clock (tsc) */
	const char *writer;      /* --writer (process) */
	int stacks;              /* --stacks[=DEPTH] (off; 64 when given without DEPTH) */
	const char *unwind;      /* --unwind (auto) */
	uint64_t sample_bytes;   /* --sample-bytes (0: every allocation) */
	int timestamp_every;     /* --timestamp-every (64) */
	int durations;           /* --durations (off) */
	int quiet;               /* -q */
	int live;                /* --live */
	int no_compact;          /* --no-compact */
	int compact;             /* --compact */
	int compact_level;       /* --compact-level (3; given: --compact) */
};

static const char usage_text[] =
	"usage: heaptrail record [options] [--] COMMAND [ARGS...]\n"
	"\n"
	"Runs COMMAND with the heaptrail recorder preloaded and writes every heap\n"
	"call it makes (malloc family, mmap/munmap/mremap, brk/sbrk, SysV shm,\n"
	"threads, forks) to a trace file.  The command's stdin, stdout and stderr\n"
	"pass through; heaptrail exits with the command's exit status (128+N if a\n"
	"signal N killed it), or 125 if a trace it reads back is damaged or was\n"
	"removed while the command ran.\n"
	"Forked children (fork, or clone without CLONE_VM) write OUTPUT.<pid>.\n"
	"A command on jemalloc, tcmalloc or mimalloc (env LD_PRELOAD=...) is recorded\n"
	"on that allocator; a build with ASan, TSan or LSan is refused (exit 2).\n"
	"A finished trace at OUTPUT is kept as OUTPUT.old; one being written by\n"
	"another recording is left alone, and this one writes OUTPUT.<pid>; any\n"
	"other file there is refused (exit 2), never moved nor replaced.\n"
	"The trace is compressed while the command runs when a CPU is free for it;\n"
	"what had to be written raw is compressed when the command ends.\n"
	"The command's environment stays its own: record passes the options in one\n"
	"variable, HEAPTRAIL_OPTIONS=name=value,...,out=PATH (only those not at their\n"
	"default), and the recorder takes it and itself (in LD_PRELOAD) out of the\n"
	"environment at start-up; with --follow-exec both stay, for the programs\n"
	"the command's children exec.\n"
	"\fEXAMPLES\n"
	"  heaptrail record -o app.ht -- ./app --its --args\n"
	"  heaptrail record --stacks -o app.ht -- ./app && heaptrail leaks app.ht\n"
	"  heaptrail record --compact -o app.ht -- ./app   # half the size, slower end\n"
	"  heaptrail record --stacks --sample-bytes 512K -o srv.ht -- ./server   # always-on\n"
	"  heaptrail record --durations -o app.ht -- ./app && heaptrail heap app.ht   # lock waits\n"
	"  heaptrail record --start-paused -o app.ht ./app   # app calls heaptrail_start()\n"
	"  heaptrail record --toggle-signal -o srv.ht ./server &  kill -USR2 $!\n"
	"  LD_PRELOAD=/path/to/libheaptrail.so HEAPTRAIL_OUT=app.ht ./app   # without record\n"
	"  LD_PRELOAD=/path/to/libheaptrail.so HEAPTRAIL_OPTIONS=stacks=64,out=app.ht ./app\n"
	"\n"
	"Then: heaptrail stats app.ht, heaptrail leaks app.ht, heaptrail dump app.ht | less\n";

static int find_preload(char *out, size_t len)
{
	const char *env = getenv("HEAPTRAIL_PRELOAD");
	if (env && *env) {
		if (access(env, R_OK) == 0) {
			snprintf(out, len, "%s", env);
			return 0;
		}
		char word[PATH_MAX + 64];
		ht_error("HEAPTRAIL_PRELOAD=%s: %s", ht_shell_word(word, sizeof(word), env),
			 strerror(errno));
		return -1;
	}
	char dir[PATH_MAX];
	if (ht_self_dir(dir, sizeof(dir)) < 0) {
		ht_error("cannot find where heaptrail runs from (/proc/self/exe unreadable)");
		return -1;
	}
	/* The build tree keeps the library next to the binary; an installed
	 * heaptrail finds it in <prefix>/lib/heaptrail. */
	const char *cands[] = {"/libheaptrail.so", "/" HT_LIBDIR_REL "/libheaptrail.so",
			       "/../lib/heaptrail/libheaptrail.so"};
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
		snprintf(out, len, "%s%s", dir, cands[i]);
		if (access(out, R_OK) == 0) {
			char real[PATH_MAX];
			if (realpath(out, real))
				snprintf(out, len, "%s", real);
			return 0;
		}
	}
	char word[PATH_MAX + 64];
	ht_shell_word(word, sizeof(word), dir);
	ht_error("cannot find libheaptrail.so next to %s or in %s/%s; reinstall heaptrail or set "
		 "HEAPTRAIL_PRELOAD to the library's path",
		 word, word, HT_LIBDIR_REL);
	return -1;
}

/* HEAPTRAIL_OPTIONS for the program: "name=value," for each option not at
 * its default (the recorder's defaults, src/preload/options.c), root=PID
 * (the program's pid: what its next images would be told, and what tells
 * this run's processes from another's, see unstarted_children), then
 * out=PATH, which takes the rest of the word.  HEAPTRAIL_QUIET,
 * HEAPTRAIL_FAST_PATH, HEAPTRAIL_SELF_WRITE and HEAPTRAIL_SCAN_DELAY_US
 * (the tests'), which have no flag, are taken from record's own
 * environment.  malloc'd; NULL without memory. */
static char *options_word(const struct record_config *cfg, pid_t pid, const char *out)
{
	char *w = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&w, &len);
	if (!f)
		return NULL;
	if (cfg->start_paused)
		fputs("start_paused=1,", f);
	if (cfg->follow_exec)
		fputs("follow_exec=1,", f);
	if (cfg->no_follow_fork)
		fputs("follow_fork=0,", f);
	if (cfg->flush_interval != 100000000ull)
		fprintf(f, "flush_interval=%llu,", (unsigned long long)(cfg->flush_interval / 1000000));
	if (cfg->rss_interval != 10000000ull)
		fprintf(f, "rss_interval=%llu,", (unsigned long long)(cfg->rss_interval / 1000000));
	if (cfg->buffer_size != 65536)
		fprintf(f, "buffer_size=%llu,", (unsigned long long)cfg->buffer_size);
	if (cfg->toggle_signal)
		fputs("toggle_signal=1,", f);
	if (cfg->zstd_level != 1)
		fprintf(f, "zstd_level=%d,", cfg->zstd_level);
	if (strcmp(cfg->clock, "tsc"))
		fprintf(f, "clock=%s,", cfg->clock);
	if (strcmp(cfg->writer, "process"))
		fprintf(f, "writer=%s,", cfg->writer);
	if (cfg->stacks)
		fprintf(f, "stacks=%d,", cfg->stacks);
	if (strcmp(cfg->unwind, "auto"))
		fprintf(f, "unwind=%s,", cfg->unwind);
	if (cfg->sample_bytes)
		fprintf(f, "sample_bytes=%llu,", (unsigned long long)cfg->sample_bytes);
	if (cfg->timestamp_every != 64)
		fprintf(f, "timestamp_every=%d,", cfg->timestamp_every);
	if (cfg->durations)
		fputs("durations=1,", f);
	const char *q = getenv("HEAPTRAIL_QUIET"), *fp = getenv("HEAPTRAIL_FAST_PATH");
	if (q && *q && !strchr(q, ','))
		fprintf(f, "quiet=%s,", q);
	if (fp && *fp && !strchr(fp, ','))
		fprintf(f, "fast_path=%s,", fp);
	const char *sw = getenv("HEAPTRAIL_SELF_WRITE");
	if (sw && *sw && !strchr(sw, ','))
		fprintf(f, "self_write=%s,", sw);
	const char *sd = getenv("HEAPTRAIL_SCAN_DELAY_US");
	if (sd && *sd && !strchr(sd, ','))
		fprintf(f, "scan_delay_us=%s,", sd);
	fprintf(f, "root=%d,out=%s", (int)pid, out);
	if (fclose(f) != 0) {
		free(w);
		return NULL;
	}
	return w;
}

/* The output template as an absolute path: the recorder runs in the
 * program, which may chdir (a daemon's chdir("/") before it forks, a
 * wrapper's cd before it execs) and must still write where the user asked.
 * The directory is resolved with realpath when it exists and holds no %p;
 * otherwise the path is taken relative to the current directory, and the
 * recorder says what is wrong with it.  Returns the length of the path
 * made; out holds it if that is less than cap. */
static size_t absolute_output(char *out, size_t cap, const char *tmpl)
{
	char dir[PATH_MAX], real[PATH_MAX], cwd[PATH_MAX];
	const char *base = ht_split_path(tmpl, dir, sizeof(dir));
	int n = -1;
	if (!strstr(dir, "%p") && *base && realpath(dir, real))
		n = snprintf(out, cap, "%s%s%s", real, real[1] ? "/" : "", base);
	else if (tmpl[0] != '/' && getcwd(cwd, sizeof(cwd)))
		n = snprintf(out, cap, "%s%s%s", cwd, cwd[1] ? "/" : "", tmpl);
	if (n < 0)
		n = snprintf(out, cap, "%s", tmpl);
	return (size_t)n;
}

/* Set when record could not open a trace or a directory for want of a
 * file descriptor (ulimit -n): said once at the end, for a trace left out
 * of the summary and of the end step must not go unsaid. */
static int fds_ran_out;

static void note_emfile(int err)
{
	if (err == EMFILE || err == ENFILE)
		fds_ran_out = 1;
}

/* Reads the header of the trace at path (a regular file, not followed
 * through a symlink); 0 on success. */
static int read_header(const char *path, struct ht_file_header *h)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		note_emfile(errno);
		return -1;
	}
	struct stat st;
	int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		 pread(fd, h, sizeof(*h), 0) == (ssize_t)sizeof(*h) &&
		 !memcmp(h->magic, HT_MAGIC, 8);
	close(fd);
	return ok ? 0 : -1;
}

/* The program name (argv[0]) of the image that wrote the trace at path,
 * as one shell word in buf; NULL if it cannot be read. */
static const char *trace_argv0(const char *path, char *buf, size_t len)
{
	struct ht_file_header h;
	if (read_header(path, &h) < 0 || !h.sec[HT_SEC_CMDLINE].size)
		return NULL;
	char arg[PATH_MAX];
	size_t n = h.sec[HT_SEC_CMDLINE].size < sizeof(arg) - 1 ? h.sec[HT_SEC_CMDLINE].size
								: sizeof(arg) - 1;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	ssize_t r = fd >= 0 ? pread(fd, arg, n, (off_t)h.sec[HT_SEC_CMDLINE].offset) : -1;
	if (fd >= 0)
		close(fd);
	if (r <= 0)
		return NULL;
	arg[r] = 0; /* (the first argument ends at its NUL) */
	if (!arg[0])
		return NULL;
	ht_shell_word(buf, len, arg);
	return buf;
}

/* Whether path is a trace of this run's program: written by pid (any of
 * its images) and begun after record started it (t0, CLOCK_MONOTONIC, the
 * clock of the header's start_mono_ns): not an older trace of the same
 * name, nor another recording's. */
static int trace_of(const char *path, pid_t pid, uint64_t t0)
{
	struct ht_file_header h;
	return read_header(path, &h) == 0 && h.pid == pid && h.start_mono_ns >= t0 &&
	       !(h.flags & HT_FILE_F_FORK_CHILD);
}

/* Whether a file can be created in dir, tried: access() says yes to root
 * everywhere, /proc and /sys included, where the recorder then failed to
 * create the trace and the program ran untraced (record exited with its
 * status, 0).  An unnamed file (O_TMPFILE, as the recorder makes), else,
 * where the file system has none, a named one removed at once.  0 with
 * errno set if not. */
static int can_create_in(const char *dir)
{
	int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (fd >= 0) {
		close(fd);
		return 1;
	}
	if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return 0;
	char probe[PATH_MAX];
	if (snprintf(probe, sizeof(probe), "%s/.heaptrail-probe-%d", dir, (int)getpid()) >=
	    (int)sizeof(probe)) {
		errno = ENAMETOOLONG;
		return 0;
	}
	fd = open(probe, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return 0;
	close(fd);
	unlink(probe);
	return 1;
}

/* What at path (the trace's, expanded) makes record refuse to run the
 * program, said in one line: the recorder would refuse it too, and trace
 * nothing.  A symlink is never followed, whatever it points to (the rule
 * of the recorder's open_output: O_NOFOLLOW); a directory is no file.
 * 0 if there is nothing of the kind. */
static int refuse_output(const char *path, const char *shown)
{
	struct stat st, to;
	/* The directory first: the recorder creates the trace there, and
	 * files next to it.  A directory that does not exist, that was
	 * removed (a deleted working directory), or that this user cannot
	 * write in used to run the program untraced, the recorder's one
	 * line, then record's guess "statically linked, or setuid". */
	char dir[PATH_MAX];
	ht_split_path(path, dir, sizeof(dir));
	const char *why = NULL;
	if (stat(dir, &to) < 0)
		why = strerror(errno);
	else if (!S_ISDIR(to.st_mode))
		why = "not a directory";
	else if (to.st_nlink == 0)
		why = "it has been removed";
	else if (access(dir, W_OK | X_OK) < 0)
		why = strerror(errno);
	else if (!can_create_in(dir)) {
		static char buf[160];
		snprintf(buf, sizeof(buf), "no file can be created in it (%s)", strerror(errno));
		why = buf;
	}
	if (why) {
		char word[PATH_MAX + 64];
		ht_error("cannot write %s: its directory %s: %s; choose another -o", shown,
			 strcmp(dir, ".") ? ht_shell_word(word, sizeof(word), dir)
					  : "(the current directory)",
			 why);
		return -1;
	}
	if (lstat(path, &st) < 0)
		return 0;
	/* (a device, a pipe, /dev/stdout: the recorder seeks, patches its
	 * header and appends an index, and renames files next to it) */
	if (!S_ISDIR(st.st_mode) &&
	    ((!S_ISLNK(st.st_mode) && !S_ISREG(st.st_mode)) ||
	     (S_ISLNK(st.st_mode) && stat(path, &to) == 0 && !S_ISREG(to.st_mode) &&
	      !S_ISDIR(to.st_mode)))) {
		ht_error("%s is not a regular file (a device, a pipe or a terminal): a trace is "
			 "written with seeks, an index and files next to it, so -o names a file "
			 "(to keep no trace, write it to a temporary file and remove it)",
			 shown);
		return -1;
	}
	if (S_ISLNK(st.st_mode)) {
		ht_error("%s is a symbolic link; heaptrail does not write through symlinks (remove "
			 "it or choose another -o)", shown);
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		ht_error("%s is a directory; -o names the trace file", shown);
		return -1;
	}
	/* another user's file is the recorder's to refuse, which it does in
	 * the program, leaving it to run untraced (record then guessed at a
	 * static program) */
	if (st.st_uid != geteuid()) {
		ht_error("%s belongs to another user (uid %u): heaptrail neither moves nor "
			 "replaces it; choose another -o, or remove it",
			 shown, (unsigned)st.st_uid);
		return -1;
	}
	/* A finished trace there is kept as OUTPUT.old; any other file is
	 * never moved nor replaced (the recorder refuses it too) */
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0) {
		int trace = ht_file_is_trace(fd, (uint64_t)st.st_size);
		close(fd);
		if (!trace) {
			ht_error("%s exists and is not a heaptrail trace; not moving nor overwriting "
				 "it: choose another -o, or remove it",
				 shown);
			return -1;
		}
	}
	return 0;
}

/* One run of record: its program and when record started it. */
struct run {
	pid_t pid;       /* the program (every image it execs keeps the pid) */
	uint64_t t0;     /* CLOCK_MONOTONIC before the fork */
	int follow_exec; /* --follow-exec: its children's exec'd programs are traced */
};

/* A file next to the output that may be the trace of a child. */
struct child_file {
	char name[NAME_MAX + 1];
	struct ht_file_header h;
	int named;   /* N of OUTPUT.N[.k]; -1 for OUTPUT.exec<k> and OUTPUT.old */
	int counted; /* found to be of this run */
};

/* Whether f is a trace of this run, given the files already found to be:
 * begun after record started its program, and written by the program (an
 * earlier image: OUTPUT.exec<k>), by a fork child of the run (the pid in
 * its name is its own: another recording diverted to OUTPUT.<pid> names its
 * children OUTPUT.<pid>.<child>), or by a program one of them exec'd
 * (--follow-exec: its parent is one of the run's). */
static int of_run(const struct child_file *f, const struct child_file *all, size_t n,
		  const struct run *run)
{
	if (f->h.start_mono_ns < run->t0)
		return 0; /* an earlier run's */
	if (f->named < 0)
		return f->h.pid == run->pid;
	if (f->h.pid != f->named)
		return 0;
	if (f->h.flags & HT_FILE_F_FORK_CHILD)
		return 1;
	if (f->h.ppid == run->pid)
		return 1;
	for (size_t i = 0; i < n; i++)
		if (all[i].counted && all[i].h.pid == f->h.ppid)
			return 1;
	return 0;
}

/* Visits the traces that the children and earlier images of this run
 * wrote next to output: OUTPUT.<pid>[.<n>] and OUTPUT.exec<n>, and only
 * those of this run (of_run: not those an earlier run left there, nor
 * another recording's); returns their count. */
static int for_each_child_trace(const char *output, const struct run *run,
				void (*fn)(const char *path, void *arg), void *arg)
{
	static char dir[PATH_MAX];
	const char *base = ht_split_path(output, dir, sizeof(dir));
	size_t blen = strlen(base);
	DIR *d = opendir(dir);
	if (!d) {
		note_emfile(errno);
		return 0;
	}
	struct child_file *files = NULL;
	size_t nfiles = 0, cap = 0;
	static char full[PATH_MAX + 256];
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, base, blen) || de->d_name[blen] != '.')
			continue;
		const char *p = de->d_name + blen + 1;
		/* OUTPUT.old of this run: an image's trace the recorder could not
		 * rename OUTPUT.exec<k> at its exec (no free name, a rename
		 * refused), which the next image then kept as OUTPUT.old */
		int old = !strcmp(p, "old");
		int exec = old || !strncmp(p, "exec", 4);
		if (exec && !old)
			p += 4;
		if (!old && !(*p >= '0' && *p <= '9' && strspn(p, "0123456789.") == strlen(p)))
			continue;
		if (nfiles == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct child_file *nf = realloc(files, ncap * sizeof(*files));
			if (!nf)
				break;
			files = nf;
			cap = ncap;
		}
		struct child_file *f = &files[nfiles];
		snprintf(full, sizeof(full), "%s/%s", dir, de->d_name);
		if (read_header(full, &f->h) < 0)
			continue;
		snprintf(f->name, sizeof(f->name), "%s", de->d_name);
		f->named = exec ? -1 : atoi(p);
		f->counted = 0;
		nfiles++;
	}
	closedir(d);
	int n = 0;
	for (int more = 1; more;) { /* until no file joins the run */
		more = 0;
		for (size_t i = 0; i < nfiles; i++) {
			if (!files[i].counted && of_run(&files[i], files, nfiles, run)) {
				files[i].counted = 1;
				more = 1;
				n++;
			}
		}
	}
	for (size_t i = 0; fn && i < nfiles; i++) {
		if (files[i].counted) {
			snprintf(full, sizeof(full), "%s/%s", dir, files[i].name);
			fn(full, arg);
		}
	}
	free(files);
	return n;
}

/* Events of a child's trace read to tell whether it ends by an exec: a
 * shell's fork child before its exec makes a handful. */
#define EXEC_STUB_EVENTS 10000

/* Whether the trace r (of a fork child) ends with an exec that did not
 * fail: the work after it is another program's, untraced without
 * --follow-exec.  Read only if it is short (a stub before an exec). */
static int ends_by_exec(struct ht_reader *r, const struct ht_trace_info *in, char *prog,
			size_t len)
{
	if (in->events_chunks > EXEC_STUB_EVENTS)
		return 0;
	const struct ht_event *ev;
	int exec = 0;
	while ((ev = ht_reader__next_event(r)) != NULL) {
		if (ev->kind == HT_EV_EXEC) {
			exec = !ht_event__exec_failed(ev);
			if (exec && prog) { /* the program's file name, without its
					     * directory (but /proc/self/exe) */
				const char *x = ev->str ? ev->str : "?", *sl = strrchr(x, '/');
				snprintf(prog, len, "%s", sl && strncmp(x, "/proc/", 6) ? sl + 1 : x);
			}
		} else if (ev->kind != HT_EV_THREAD_EXIT) {
			exec = 0;
		}
	}
	return exec;
}

/* The traces of a run's children and earlier images, for the summary:
 * each named with its command, so that the user can tell them apart (the
 * rule of their names: docs/output-files.md). */
struct trace_row {
	char *path;
	uint64_t start; /* wall clock at the trace's start: the list's order */
	char *cmd;
	char *execd;    /* the program a stub trace ends by exec'ing, else NULL */
	char fate[48];	/* how it ended, if not cleanly (trace_fate), else "" */
};

struct trace_rows {
	struct trace_row *v;
	size_t n, cap;
	const struct run *run;
};

/* How the process that wrote a child's trace ended, if not cleanly, as
 * far as its trace tells (its parent reaped it, not record): killed by a
 * signal the recorder's handler caught (HT_FILE_F_SIGNALED), or ended
 * without closing it (its writer process closed it, HT_FILE_F_ORPHANED:
 * killed by SIGKILL, a signal no handler caught, or the exit_group system
 * call; or nobody did).  "" for a trace closed, or still written. */
static void trace_fate(const struct ht_trace_info *in, char *fate, size_t len)
{
	char sig[16];
	fate[0] = 0;
	if (in->signal)
		snprintf(fate, len, "killed by %s", ht_signal_name(in->signal, sig));
	else if ((in->orphaned && !in->exit_syscall) ||
		 (!in->closed && !in->being_written && !in->disk_full))
		snprintf(fate, len, "ended without closing its trace (killed?)");
}

static void add_trace_row(const char *path, void *arg)
{
	struct trace_rows *rows = arg;
	char err[512];
	struct ht_reader *r = ht_reader__open_info(path, err, sizeof(err));
	if (!r) {
		note_emfile(errno);
		return;
	}
	const struct ht_trace_info *in = ht_reader__info(r);
	if (rows->n == rows->cap) {
		size_t ncap = rows->cap ? rows->cap * 2 : 16;
		struct trace_row *nv = realloc(rows->v, ncap * sizeof(*nv));
		if (!nv) {
			ht_reader__close(r);
			return;
		}
		rows->v = nv;
		rows->cap = ncap;
	}
	/* the command as run: argv[0] without its directory, then the
	 * arguments (shortened past 60 bytes) */
	const char *cmd = in->cmdline && *in->cmdline ? in->cmdline : in->exe ? in->exe : "?";
	const char *arg0_end = strchr(cmd, ' ');
	const char *slash = memrchr(cmd, '/', arg0_end ? (size_t)(arg0_end - cmd) : strlen(cmd));
	if (slash)
		cmd = slash + 1;
	struct trace_row *row = &rows->v[rows->n];
	row->path = strdup(path);
	row->cmd = strdup(cmd);
	row->start = in->start_realtime_ns;
	trace_fate(in, row->fate, sizeof(row->fate));
	/* a fork child's few calls before it exec'd a program (a shell's
	 * command): said so, and which, for it is not the program's work */
	char prog[64];
	row->execd = in->pid != rows->run->pid && ends_by_exec(r, in, prog, sizeof(prog))
			     ? strdup(prog)
			     : NULL;
	if (row->path && row->cmd) {
		/* one line: a newline or a tab of the arguments (python3 -c
		 * 'SCRIPT') is a space here */
		for (char *c = row->cmd; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = ' ';
		if (strlen(row->cmd) > 60)
			strcpy(row->cmd + 57, "...");
		for (char *c = row->execd; c && *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = ' ';
		rows->n++;
	} else {
		free(row->path);
		free(row->cmd);
		free(row->execd);
	}
	ht_reader__close(r);
}

static int by_start(const void *a, const void *b)
{
	const struct trace_row *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* "LEAD N traces of child processes and earlier exec images: OUTPUT.<pid>
 * (COMMAND), ..." (LEAD ", and" in the summary) in the order they began (at most 20 named, then how many
 * more); an empty string (malloc'd) if there are none; NULL without memory. */
static char *child_traces_msg(const char *path, const char *shown, const struct run *run,
			      const char *lead)
{
	struct trace_rows rows = {.run = run};
	for_each_child_trace(path, run, add_trace_row, &rows);
	if (rows.n > 1)
		qsort(rows.v, rows.n, sizeof(*rows.v), by_start);
	char *msg = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&msg, &len);
	if (f && rows.n)
		fprintf(f, "%s %zu trace%s of child processes and earlier exec images:", lead,
			rows.n, rows.n > 1 ? "s" : "");
	const char *base = strrchr(path, '/');
	size_t blen = strlen(base ? base + 1 : path), max = 20;
	for (size_t i = 0; i < rows.n; i++) {
		const char *name = strrchr(rows.v[i].path, '/');
		name = name ? name + 1 : rows.v[i].path;
		if (f && i < max && strlen(name) >= blen) { /* OUTPUT's name, then the suffix */
			fprintf(f, "%s %s%s (%s)", i ? "," : "", shown, name + blen, rows.v[i].cmd);
			if (rows.v[i].execd)
				fprintf(f, " [exec'd %s%s]", rows.v[i].execd,
					run->follow_exec ? "" : ", untraced");
			if (rows.v[i].fate[0])
				fprintf(f, " [%s]", rows.v[i].fate);
		}
		free(rows.v[i].path);
		free(rows.v[i].cmd);
		free(rows.v[i].execd);
	}
	if (f && rows.n > max)
		fprintf(f, " and %zu more in %s.*", rows.n - max, shown);
	free(rows.v);
	if (f && fclose(f) == 0)
		return msg;
	free(msg);
	return NULL;
}

/* record's exit status when a trace it reports is damaged: its own
 * failure, as env, nice and timeout say theirs with 125 (126 and 127: the
 * command could not be run). */
#define RECORD_EXIT_DAMAGED 125

/* The threads met in a trace's events: a set of tids (open addressing,
 * 0 free: the recorder's tids are never 0). */
struct tid_set {
	uint32_t *slot;
	size_t n, cap;
};

static void tid_set_add(struct tid_set *t, uint32_t tid)
{
	if (t->n * 2 >= t->cap) {
		struct tid_set g = {calloc(t->cap ? t->cap * 2 : 64, sizeof(uint32_t)), 0,
				    t->cap ? t->cap * 2 : 64};
		if (!g.slot)
			return; /* (undercounted, out of memory) */
		for (size_t i = 0; i < t->cap; i++)
			if (t->slot[i])
				tid_set_add(&g, t->slot[i]);
		free(t->slot);
		*t = g;
	}
	size_t i = (tid * 2654435761u) & (t->cap - 1);
	while (t->slot[i] && t->slot[i] != tid)
		i = (i + 1) & (t->cap - 1);
	if (!t->slot[i]) {
		t->slot[i] = tid;
		t->n++;
	}
}

/* Whether the trace at path, as it is on disk, is damaged: read back the
 * way every analyzer opens it (the header, the index and every chunk
 * header it lists, or the chunks in order when there is no index), with
 * the events counted from the chunks, not taken from a counter.  Damaged:
 * it cannot be opened; a closed trace whose index is unusable, which
 * cannot be read to its end, or whose chunks hold another number of
 * events than its header says were written; or a trace that was not
 * closed, cannot be read to its end, and whose program ended without
 * being killed (killed, it ends at its last flush: incomplete, not
 * damaged).  Returns TRACE_DAMAGED, TRACE_WHOLE, or TRACE_CUT when a
 * write failed (disk full: not damaged, said otherwise, and no room to
 * rewrite it).  what: what is damaged; events, threads: what can be read
 * of it (of a damaged one, the events a reader reads, decoded). */
enum { TRACE_WHOLE, TRACE_DAMAGED, TRACE_CUT };
static int damaged(const char *path, int ended_ok, char *what, size_t len, uint64_t *events,
		   uint32_t *threads)
{
	char err[512];
	*events = 0;
	*threads = 0;
	struct ht_reader *r = ht_reader__open_info(path, err, sizeof(err));
	if (!r) {
		snprintf(what, len, "%s", err);
		return TRACE_DAMAGED;
	}
	const struct ht_trace_info *in = ht_reader__info(r);
	const char *e = ht_reader__error(r);
	int bad = TRACE_DAMAGED;
	*events = in->events_chunks;
	*threads = in->nthreads;
	if (in->disk_full)
		bad = TRACE_CUT;
	else if (!(in->closed && !in->indexed && !in->unindexed) &&
		 !(e && (in->closed || ended_ok)) &&
		 !(in->closed && in->events_hdr != in->events_chunks))
		bad = TRACE_WHOLE;
	if (bad == TRACE_DAMAGED) {
		/* What can be read of it is what a reader reads, every chunk
		 * decoded, not what the chunks' headers count (a chunk before
		 * the damage may be damaged too: its events cannot be read),
		 * and the error is the reader's after that (it names such a
		 * chunk too). */
		struct tid_set seen = {0};
		const struct ht_event *ev;
		*events = 0;
		while ((ev = ht_reader__next_event(r)) != NULL) {
			++*events;
			tid_set_add(&seen, ev->tid);
		}
		*threads = (uint32_t)seen.n;
		free(seen.slot);
		e = ht_reader__error(r);
		if (in->closed && !in->indexed && !in->unindexed)
			snprintf(what, len, "its index is unusable, and the chunks read in order %s%s",
				 e ? "stop at " : "are whole", e ? e : "");
		else if (e)
			snprintf(what, len, "%s", e);
		else
			snprintf(what, len, "its chunks hold %llu events, its header says %llu were "
					    "written",
				 (unsigned long long)in->events_chunks,
				 (unsigned long long)in->events_hdr);
	}
	ht_reader__close(r);
	return bad;
}

/* "'heaptrail CMD WORD'" (CMD "stats", "compact --fast"...) for a message
 * to suggest, WORD a file name as ht_shell_word() makes it (suffix
 * appended to it: ".exec1" or ""); a word quoted itself ('a b.ht') goes
 * without the outer quotes, which would nest (see 'heaptrail stats 'a
 * b.ht'' pastes as two words). */
static const char *see_cmd(char *buf, size_t len, const char *cmd, const char *word,
			   const char *suffix)
{
	int quoted = word[0] == '\'' || word[0] == '$';
	snprintf(buf, len, quoted ? "heaptrail %s %s%s" : "'heaptrail %s %s%s'", cmd, word, suffix);
	return buf;
}

/* The line that says a trace is damaged, in place of its summary. */
static void say_damaged(const char *shown, const char *prefix, const char *what,
			uint64_t events, uint32_t threads)
{
	char see[PATH_MAX + 32];
	fprintf(stderr,
		"heaptrail: error: %sthe trace %s is damaged: %s; figures read from it may be "
		"incomplete (%llu events from %u thread%s can be read); inspect it with %s\n",
		prefix, shown, what, (unsigned long long)events, threads, threads == 1 ? "" : "s",
		see_cmd(see, sizeof(see), "stats", shown, ""));
}

/* The traces of the children and earlier images, checked (damaged). */
struct kids_check {
	const char *path;  /* the program's trace: theirs are named after it */
	const char *shown; /* its name as the user gave it */
	int bad;           /* damaged traces found */
};

static void check_kid(const char *path, void *arg)
{
	struct kids_check *k = arg;
	static char what[1024], shown[PATH_MAX + 300];
	uint64_t events;
	uint32_t threads;
	if (damaged(path, 0, what, sizeof(what), &events, &threads) != TRACE_DAMAGED)
		return;
	/* the shown name of the program's trace and this file's suffix */
	snprintf(shown, sizeof(shown), "%s%s", k->shown, path + strlen(k->path));
	say_damaged(shown, "", what, events, threads);
	k->bad++;
}

/* The CPU time (ns) the program spent itself and its child processes spent
 * (those it waited for, and theirs: the kernel's cutime and cstime), read
 * from /proc while the program is a zombie not yet reaped; 0 if unknown. */
static int cpu_of(pid_t pid, uint64_t *self_ns, uint64_t *kids_ns)
{
	char buf[1024];
	const char *q = ht_procstat_read(pid, buf, sizeof(buf));
	unsigned long long f[4]; /* fields 14 to 17 */
	if (!q || sscanf(q + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu",
			 &f[0], &f[1], &f[2], &f[3]) != 4)
		return 0;
	long hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0)
		return 0;
	*self_ns = (f[0] + f[1]) * (1000000000ull / (unsigned long long)hz);
	*kids_ns = (f[2] + f[3]) * (1000000000ull / (unsigned long long)hz);
	return 1;
}

/* What the traces of a run say of the program's children: how many
 * traces forked children wrote, and the CPU time of the writer processes
 * of the program's own images (the kernel counts them among its
 * children). */
struct kids_tally {
	pid_t pid;             /* the program */
	size_t forked;         /* traces of other processes that did their own work */
	size_t execd;          /* traces of other processes that end by exec'ing a
				* program, untraced (a shell's fork child) */
	uint64_t writers_ns;   /* writer_cpu_ns of the program's own images */
	int writer_unknown;    /* an image's writer_cpu_ns is 0: its writer process
				* died before it could note it (killed) */
};

static void tally_trace(const char *path, void *arg)
{
	struct kids_tally *k = arg;
	char err[512];
	struct ht_reader *r = ht_reader__open_info(path, err, sizeof(err));
	if (!r) {
		note_emfile(errno);
		return;
	}
	const struct ht_trace_info *in = ht_reader__info(r);
	if (in->pid == k->pid) {
		k->writers_ns += in->writer_cpu_ns;
		k->writer_unknown |= !in->writer_cpu_ns;
	} else if (ends_by_exec(r, in, NULL, 0)) {
		k->execd++;
	} else {
		k->forked++;
	}
	ht_reader__close(r);
}

/* A program whose child processes did real work (50 ms of CPU and a tenth
 * of its own, beyond what the recorder's writer processes used, which the
 * kernel counts among them) and left no trace: they ran other programs (a
 * shell's commands, make's, system(), posix_spawn), which are traced only
 * with --follow-exec.  Said once, after the summary, so that a trace of
 * `sh -c ...` holding only the shell's calls does not pass for the
 * program's. */
static void note_untraced_children(const char *path, const struct run *run, uint64_t self_ns,
				   uint64_t kids_ns, int no_follow_fork, int writer_process)
{
	if (kids_ns < 50000000ull || kids_ns * 10 < self_ns)
		return; /* (not enough even with no writer's time taken off) */
	struct kids_tally k = {run->pid, 0, 0, 0, 0};
	tally_trace(path, &k);
	for_each_child_trace(path, run, tally_trace, &k);
	/* a writer process killed before it closed its trace left its CPU
	 * time unknown, in the children's: the note would take it for
	 * untraced children's work (a program with none said 0.98 s) */
	if (writer_process && k.writer_unknown)
		return;
	uint64_t others = kids_ns > k.writers_ns ? kids_ns - k.writers_ns : 0;
	if (k.forked || others < 50000000ull || others * 10 < self_ns)
		return;
	if (k.execd)
		/* (their traces hold the calls before the exec: a few) */
		fprintf(stderr,
			"heaptrail: note: the program's child processes used %.2f s of CPU in "
			"programs that were not traced (%zu of them exec'd one): the programs they "
			"ran are traced only with --follow-exec\n",
			(double)others / 1e9, k.execd);
	else
		fprintf(stderr,
			"heaptrail: note: the program's child processes used %.2f s of CPU and none "
			"of them was traced: %s\n",
			(double)others / 1e9,
			no_follow_fork ? "--no-follow-fork leaves them out"
				       : "the programs they ran are traced only with --follow-exec");
}

/* The one line record adds to stderr: how the command ended, if by a
 * signal, and what the trace holds. */
static void summarize(const char *path, const char *shown, const char *prefix,
		      const struct run *run, const char *note, int writer_process)
{
	char err[512];
	/* (the children's traces first: the list opens two files at once, and
	 * the trace open beside them would be a third) */
	char *kidmsg = child_traces_msg(path, shown, run, ", and");
	struct ht_reader *r = ht_reader__open_info(path, err, sizeof(err));
	if (!r) {
		fprintf(stderr, "heaptrail: no usable trace: %s\n", err);
		free(kidmsg);
		return;
	}
	const struct ht_trace_info *in = ht_reader__info(r);
	struct stat st;
	char sz[32] = "?";
	if (stat(path, &st) == 0)
		ht_fmt_bytes(sz, (uint64_t)st.st_size);
	char lost[96] = ""; /* calls the recorder could not record (docs/FORMAT.md, dropped) */
	if (in->dropped)
		snprintf(lost, sizeof(lost), ", %llu calls not recorded (see 'heaptrail stats')",
			 (unsigned long long)in->dropped);
	char sampled[96] = "", b[32], see[PATH_MAX + 32];
	if ((in->flags & HT_FILE_F_SAMPLED) && in->sample_bytes)
		snprintf(sampled, sizeof(sampled), ", a sample of about one allocation per %s",
			 ht_fmt_bytes(b, in->sample_bytes));
	fprintf(stderr,
		"heaptrail: %swrote %llu events from %u thread%s to %s (%s)%s%s%s%s%s; see %s\n",
		prefix, (unsigned long long)in->events_chunks, in->nthreads,
		in->nthreads == 1 ? "" : "s", shown, sz, sampled,
		in->flags & HT_FILE_F_DISK_FULL ? ", until a write failed" : "", lost,
		kidmsg ? kidmsg : "", note, see_cmd(see, sizeof(see), "stats", shown, ""));
	free(kidmsg);
	/* (a write error: the recorder said so; the trace ends where it stopped) */
	if (ht_reader__error(r) && !(in->flags & HT_FILE_F_DISK_FULL))
		fprintf(stderr, "heaptrail: warning: %s: %s\n", shown, ht_reader__error(r));
	/* The writer process closes the trace whatever becomes of the program
	 * (HT_FILE_F_ORPHANED when it died): not closed, the writer died
	 * first, and the program died before it could write its buffers
	 * itself (killed with it, or soon after it: a program learns of its
	 * writer's death at its next full buffer, ht_writer__kick). */
	if (writer_process && !in->closed && !(in->flags & HT_FILE_F_DISK_FULL))
		fprintf(stderr,
			"heaptrail: warning: %s was not closed: its writer process died before the "
			"program ended (killed?), and the program did not end cleanly, so what it "
			"recorded since its buffers were last written is lost; the trace holds what "
			"came before\n",
			shown);
	/* With --writer=thread the program closes its trace as it ends: not
	 * closed, it ended past the recorder (a signal, or a way out no hook
	 * sees), and the events since the last flush are lost. */
	if (!writer_process && !in->closed && !(in->flags & HT_FILE_F_DISK_FULL))
		fprintf(stderr,
			"heaptrail: warning: %s was not closed: the program ended without shutting "
			"the recorder down (killed, or by a way out no hook sees), so what it "
			"recorded since the last flush is lost; the trace holds what came before\n",
			shown);
	ht_reader__close(r);
}

/* The first image's trace of this run (OUTPUT.exec1, or OUTPUT.exec1.2 ...
 * when an earlier run's are still there): the suffix of the one that
 * began first, in suffix (".exec1" if none is found). */
struct first_exec {
	const char *base;    /* OUTPUT's file name */
	uint64_t start;      /* of the one found */
	char suffix[NAME_MAX + 1];
};

static void find_first_exec(const char *path, void *arg)
{
	struct first_exec *fe = arg;
	const char *name = strrchr(path, '/');
	name = name ? name + 1 : path;
	size_t blen = strlen(fe->base);
	struct ht_file_header h;
	if (strncmp(name, fe->base, blen) ||
	    (strncmp(name + blen, ".exec", 5) && strcmp(name + blen, ".old")) ||
	    read_header(path, &h) < 0)
		return;
	if (!fe->suffix[0] || h.start_mono_ns < fe->start) {
		fe->start = h.start_mono_ns;
		snprintf(fe->suffix, sizeof(fe->suffix), "%s", name + blen);
	}
}

/* Whether the program's earlier images wrote traces of their own in this
 * run (when record follows its execs): the first one's suffix in *fe. */
static int earlier_image(const char *path, const struct run *run, struct first_exec *fe)
{
	const char *base = strrchr(path, '/');
	fe->base = base ? base + 1 : path;
	fe->start = 0;
	fe->suffix[0] = 0;
	for_each_child_trace(path, run, find_first_exec, fe);
	return fe->suffix[0] != 0;
}

/* The line in place of the summary when the program's last image wrote
 * no trace because it was not traced (it exec'd a static or setuid
 * program, a sanitizer's build): the traces of the run, which it wrote
 * before that exec and its children wrote, are named as the summary
 * names them, and they had their end step and their check. */
static void say_untraced_exec(const char *path, const char *shown, const char *how, const char *cmd,
			      const struct run *run, const struct first_exec *fe)
{
	char see[PATH_MAX + 32];
	char *kidmsg = child_traces_msg(path, shown, run, ", and the run wrote");
	fprintf(stderr,
		"heaptrail: %s%s exec'd a program that was not traced, so nothing was written to "
		"%s; the traces of its images before that exec are %s%s and on%s (see %s)\n",
		how, cmd, shown, shown, fe->suffix, kidmsg ? kidmsg : "",
		see_cmd(see, sizeof(see), "stats", shown, fe->suffix));
	free(kidmsg);
}

static const char *no_trace_reason(const char *cmd, const char *path);

/* The same when the program wrote no trace at all, but children of it
 * did (a trace of OUTPUT that was not there to be read). */
static void say_no_trace_but_kids(const char *path, const char *shown, const char *how,
				  const char *cmd, const struct run *run)
{
	char *kidmsg = child_traces_msg(path, shown, run, "; the run wrote");
	fprintf(stderr, "heaptrail: %s%s wrote no trace to %s (%s)%s\n", how, cmd, shown,
		no_trace_reason(cmd, path), kidmsg ? kidmsg : "");
	free(kidmsg);
}

/* What a second signal that comes while record finishes the traces says
 * (forward_signal), set before each end step. */
static char late_msg[2 * PATH_MAX + 512];

/* What a second signal says from now on (forward_signal): that the trace
 * at path stays as the recorder wrote it.  Set with the signals blocked,
 * so that the handler never reads it half written; the name quoted as a
 * shell word, for the command to be pasted. */
static void set_late_msg(const char *path, const struct record_config *cfg)
{
	static char word[PATH_MAX + 8], see[PATH_MAX + 64];
	ht_shell_word(word, sizeof(word), path);
	see_cmd(see, sizeof(see),
		cfg->compact || cfg->zstd_level == 0 ? "compact" : "compact --fast", word, "");
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	snprintf(late_msg, sizeof(late_msg),
		 "heaptrail: interrupted while finishing %s: it stays as the recorder wrote it, "
		 "readable (%s finishes it)\n",
		 word, see);
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/* The end step, on the trace of the program and on those of its children:
 * by default the chunks the recorder had to write raw are compressed
 * (ht_trace__finish; nothing to do when its writer kept up); with
 * --compact, or a recording made raw (--zstd-level=0), the whole trace is
 * compacted (column coding: smaller, slower); with --no-compact, nothing.
 * Either way the trace is final when record exits.  state: what damaged()
 * said of the trace, read back before (a damaged one is not touched). */
static int end_step_on(const char *path, const struct record_config *cfg, int state,
		       const struct run *run)
{
	char err[512];
	ht_progress_start(); /* (its progress counts from here, not from the program's start) */
	if (state == TRACE_DAMAGED)
		return 0; /* left as it is, to be inspected: record says so */
	if (cfg->no_compact) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		struct ht_file_header h;
		if (fd >= 0 && pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h))
			ht_trace__wait_writer(fd, h.pid, HT_WAIT_WRITER_MS);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	if (state == TRACE_CUT) /* no room to rewrite it; summarize() says why */
		return 0;
	set_late_msg(path, cfg);
	int compact = cfg->compact || cfg->zstd_level == 0;
	int level =
	    cfg->finish && !strcmp(cfg->finish, "zstd") ? cfg->zstd_level : HT_FINISH_HUFFMAN;
	if ((compact ? ht_trace__compact(path, cfg->compact_level, NULL, err, sizeof(err))
		     : ht_trace__finish(path, level, NULL, err, sizeof(err))) == 0)
		return 0;
	/* (taken away meanwhile: the caller says so in place of a warning
	 * about a rewrite and of a "damaged" for the file there now) */
	if (run && !trace_of(path, run->pid, run->t0))
		return 1;
	char word[PATH_MAX + 64], see[PATH_MAX + 96];
	ht_shell_word(word, sizeof(word), path);
	see_cmd(see, sizeof(see), compact ? "compact" : "compact --fast", word, "");
	/* (at a limit of descriptors of 5: the input, the rewrite, and its
	 * read-back need three; said with the limit, as record's other
	 * lines at the limit are: probe T) */
	char lim[96] = "";
	struct rlimit nf;
	if (strstr(err, strerror(EMFILE)) && getrlimit(RLIMIT_NOFILE, &nf) == 0)
		snprintf(lim, sizeof(lim), "; the limit of open files (ulimit -n) is %llu",
			 (unsigned long long)nf.rlim_cur);
	ht_warning("could not %s: %s%s (readable as it is, only larger: %s does it later)",
		   compact ? "compact the trace" : "compress the chunks recorded raw", err, lim, see);
	return 0;
}

/* How the program ended, as record saw it (status), noted in the header
 * of a trace its writer process closed for it (HT_FILE_F_ORPHANED), which
 * the library could not know, after the writer finished:
 * - exited with a status: it did not go through exit() or _exit(), whose
 *   hooks shut the tracer down, but made the exit_group system call
 *   itself, as Go's runtime ends every program.  Nothing was lost, and the
 *   readers' warning "killed, or ended by a signal" would be wrong: the
 *   header says so (HT_FILE_F_EXIT_SYSCALL).
 * - killed by a signal the recorder's handler never saw (SIGKILL, which no
 *   handler catches): the readers said "killed, or ended by a signal" and
 *   stats' killed_by was null; the header names it as the handler does
 *   for the signals it catches (HT_FILE_F_SIGNALED and `signal`).  What the
 *   handler wrote there itself is left as it is. */
static void note_program_end(const char *path, int status)
{
	struct ht_file_header h;
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    ht_trace__wait_writer(fd, h.pid, HT_WAIT_WRITER_MS) ||
	    pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h.magic, HT_MAGIC, sizeof(h.magic)) ||
	    (h.flags & (HT_FILE_F_CLOSED | HT_FILE_F_ORPHANED)) !=
		(HT_FILE_F_CLOSED | HT_FILE_F_ORPHANED)) {
		close(fd);
		return;
	}
	const char *what;
	int ok = 1;
	if (WIFEXITED(status)) {
		what = "the program ended by the exit_group system call";
		h.flags |= HT_FILE_F_EXIT_SYSCALL;
	} else if (WIFSIGNALED(status) && !(h.flags & HT_FILE_F_SIGNALED)) {
		what = "a signal killed the program";
		h.signal = (uint32_t)WTERMSIG(status);
		h.flags |= HT_FILE_F_SIGNALED;
		/* (the signal first: a reader that sees the flag finds it) */
		ok = pwrite(fd, &h.signal, sizeof(h.signal),
			    offsetof(struct ht_file_header, signal)) == (ssize_t)sizeof(h.signal);
	} else {
		close(fd);
		return;
	}
	char word[PATH_MAX + 64];
	if (!ok || pwrite(fd, &h.flags, sizeof(h.flags), offsetof(struct ht_file_header, flags)) !=
		       (ssize_t)sizeof(h.flags))
		ht_warning("%s: could not note in its header that %s: %s",
			   ht_shell_word(word, sizeof(word), path), what, strerror(errno));
	close(fd);
}

/* The pid of the program writing path if it still runs (its recorder
 * holds the file's lock), else 0. */
static pid_t still_written(const char *path)
{
	struct ht_file_header h;
	pid_t pid = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0;
	/* (a writer finishing for a program that has ended is waited for) */
	if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && h.pid > 0 &&
	    ht_trace__wait_writer(fd, h.pid, HT_WAIT_WRITER_MS) && ht_proc_alive(h.pid))
		pid = h.pid;
	close(fd);
	return pid;
}

/* The children's end step, and those still running (a daemon's). */
struct kids_end {
	const struct record_config *cfg;
	char first[PATH_MAX]; /* the first still written */
	pid_t first_pid;      /* its program */
	int running;          /* how many */
	pid_t unstarted[64];  /* unstarted_children, less those end_step met */
	int nunstarted;
	pid_t seen[256];      /* every one unstarted_children found */
	int nseen;
	const char *word;     /* the HEAPTRAIL_OPTIONS entry record gave the program */
	int grace_ms;         /* what is left of KIDS_GRACE_MS */
};

/* A child still running when the program has ended may only be on its
 * way out: a fork child between its last call and its exec (a shell's
 * `cmd &`, make's), which closes its trace at the exec, or its exit.  The
 * children are given this long in all to get there before they are said
 * to run on (a daemon's record ends this much later). */
#define KIDS_GRACE_MS 100

/* Whether done(k, arg) comes true within what is left of the grace,
 * looked at every 2 ms. */
static int grace(struct kids_end *k, int (*done)(struct kids_end *, const void *),
		 const void *arg)
{
	while (!done(k, arg)) {
		if (k->grace_ms <= 0)
			return 0;
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
		k->grace_ms -= 2;
	}
	return 1;
}

/* Whether the environment /proc/PID/environ shows holds entry. */
static int environ_has(const char *pid, const char *entry)
{
	char p[NAME_MAX + 16];
	snprintf(p, sizeof(p), "/proc/%s/environ", pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t want = strlen(entry) + 1, have = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	ssize_t n;
	int found = 0;
	while (buf && !found) {
		if (have == cap) { /* (an environment may be as long as ARG_MAX) */
			char *nb = cap < (64u << 20) ? realloc(buf, cap * 2) : NULL;
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + have, cap - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		for (size_t i = 0; i + want <= have; i += strlen(buf + i) + 1) {
			if (!memchr(buf + i, 0, have - i))
				break; /* (the rest of this entry is still to come) */
			if (!memcmp(buf + i, entry, want)) {
				found = 1;
				break;
			}
		}
	}
	free(buf);
	close(fd);
	return found;
}

/* Whether /proc/PID/stat, read into buf (ht_procstat_read), is that of a
 * recorder's writer process (it names itself: src/preload/writer.c). */
static int is_writer_process(const char *buf)
{
	const char *name = strchr(buf, '(');
	return name && !strncmp(name, "(heaptrail-write) ", 18);
}

/* A trace whose program has ended but whose recorder's writer process
 * still holds it after the one wait readers give it (its lock,
 * ht_trace__wait_writer): stopped (SIGSTOP, a debugger), or stuck.
 * Nothing is lost, but the file is not final: record neither rewrites nor
 * judges it, and says so (say_unfinished).  Returns 1 with the writer's
 * pid (0 if not found) and whether it is stopped, else 0. */
static int writer_unfinished(const char *path, pid_t *writer, int *stopped)
{
	struct ht_file_header h;
	struct stat want;
	*writer = 0;
	*stopped = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0;
	int held = fstat(fd, &want) == 0 && pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
		   ht_trace__wait_writer(fd, h.pid, HT_WAIT_WRITER_MS) &&
		   !ht_proc_exists(h.pid);
	close(fd);
	if (!held)
		return 0;
	/* the writer: a process named so with the file open */
	DIR *d = opendir("/proc");
	struct dirent *de;
	uid_t uid = getuid();
	while (d && !*writer && (de = readdir(d)) != NULL) {
		const char *name = de->d_name;
		char buf[1024], fds[NAME_MAX + 16], link[2 * NAME_MAX + 32];
		struct stat st;
		if (!(*name >= '1' && *name <= '9') || strspn(name, "0123456789") != strlen(name))
			continue;
		snprintf(fds, sizeof(fds), "/proc/%s/fd", name);
		const char *f = ht_procstat_read(atol(name), buf, sizeof(buf));
		if (!f || !is_writer_process(buf) || stat(fds, &st) < 0 || st.st_uid != uid)
			continue;
		DIR *fdd = opendir(fds);
		struct dirent *fe;
		while (fdd && (fe = readdir(fdd)) != NULL) {
			snprintf(link, sizeof(link), "%s/%s", fds, fe->d_name);
			if (fe->d_name[0] != '.' && stat(link, &st) == 0 && st.st_dev == want.st_dev &&
			    st.st_ino == want.st_ino) {
				*writer = (pid_t)atol(name);
				*stopped = f[2] == 'T' || f[2] == 't';
				break;
			}
		}
		if (fdd)
			closedir(fdd);
	}
	if (d)
		closedir(d);
	return 1;
}

/* The line that says a trace is not final yet (writer_unfinished), in
 * place of its summary: what it holds now, read from it. */
static void say_unfinished(const char *path, const char *shown, const char *prefix,
			   pid_t writer, int stopped)
{
	char err[512], why[160], see[PATH_MAX + 96];
	uint64_t events = 0;
	uint32_t threads = 0;
	struct ht_reader *r = ht_reader__open_info(path, err, sizeof(err));
	if (r) {
		events = ht_reader__info(r)->events_chunks;
		threads = ht_reader__info(r)->nthreads;
		ht_reader__close(r);
	}
	if (writer && stopped)
		snprintf(why, sizeof(why), "(pid %d) is stopped ('kill -CONT %d' lets it finish)",
			 (int)writer, (int)writer);
	else if (writer)
		snprintf(why, sizeof(why), "(pid %d) did not finish it in the time record waits for it",
			 (int)writer);
	else
		snprintf(why, sizeof(why), "did not finish it in the time record waits for it");
	see_cmd(see, sizeof(see), "compact --fast", shown, "");
	fprintf(stderr,
		"heaptrail: warning: %sthe trace %s is not finished: the program has ended, but "
		"the recorder's writer process %s; the file holds %llu events from %u thread%s so "
		"far, and the rest when that process has written them (nothing is lost; it is not "
		"compressed: %s does it then)\n",
		prefix, shown, why, (unsigned long long)events, threads, threads == 1 ? "" : "s",
		see);
}

/* A fork child makes its trace at its first call, so that children that
 * only exec leave no file; a child left running when the program ended (a
 * daemon, `cmd &`) that the scheduler had not run yet has none when record
 * looks for the traces still written.  Such children are found here,
 * before that look: the processes of this user, started after record,
 * but not a recorder's writer process,
 * whose environment (the memory /proc/PID/environ reads, which the
 * recorder leaves as it was when it takes its variables out of the
 * program's environ) holds the HEAPTRAIL_OPTIONS word record gave the
 * program, whose root=PID is this run's alone.  Followed exec'd images
 * carry a word of their own and write their traces at once. */
static void unstarted_children(struct kids_end *k, const char *word)
{
	char buf[1024];
	pid_t self = getpid();
	long long since = ht_procstat_field(ht_procstat_read(self, buf, sizeof(buf)), 22);
	DIR *d = opendir("/proc");
	if (!d || since < 0) {
		if (d)
			closedir(d);
		return;
	}
	uid_t uid = getuid();
	const int cap = (int)(sizeof(k->unstarted) / sizeof(k->unstarted[0]));
	struct dirent *de;
	while ((de = readdir(d)) != NULL && k->nunstarted < cap) {
		const char *name = de->d_name;
		if (!(*name >= '1' && *name <= '9') || strspn(name, "0123456789") != strlen(name))
			continue;
		pid_t pid = (pid_t)atoi(name);
		struct stat st;
		char dir[NAME_MAX + 16];
		snprintf(dir, sizeof(dir), "/proc/%s", name);
		if (pid == self || stat(dir, &st) < 0 || st.st_uid != uid)
			continue;
		/* (a recorder's writer process, cloned from its program,
		 * shares its environment: its exit signal is 0, a fork's
		 * SIGCHLD, until its program dies before it, when the kernel
		 * makes it SIGCHLD: its name tells it then) */
		const char *f = ht_procstat_read(pid, buf, sizeof(buf));
		if (ht_procstat_field(f, 22) < since || ht_procstat_field(f, 38) == 0 ||
		    is_writer_process(buf))
			continue;
		int known = 0;
		for (int i = 0; i < k->nseen && !known; i++)
			known = k->seen[i] == pid;
		if (known || !environ_has(name, word))
			continue;
		k->unstarted[k->nunstarted++] = pid;
		if (k->nseen < (int)(sizeof(k->seen) / sizeof(k->seen[0])))
			k->seen[k->nseen++] = pid;
	}
	closedir(d);
}

/* (grace: a trace no longer written) */
static int trace_done(struct kids_end *k, const void *path)
{
	(void)k;
	return still_written(path) == 0;
}

/* (grace: an unstarted child gone, or exec'd into a program that is not
 * recorded, or one that has written its trace and closed it) */
static int kid_done(struct kids_end *k, const void *arg)
{
	const pid_t *kid = arg;
	char name[24];
	snprintf(name, sizeof(name), "%d", (int)*kid);
	if (!ht_proc_alive(*kid))
		return 1;
	return !environ_has(name, k->word);
}

/* Notes a child still writing its trace, once. */
static void still_running(struct kids_end *k, const char *path, pid_t pid)
{
	for (int i = 0; i < k->nunstarted; i++)
		if (k->unstarted[i] == pid)
			k->unstarted[i] = k->unstarted[--k->nunstarted];
	if (!k->running++) {
		snprintf(k->first, sizeof(k->first), "%s", path);
		k->first_pid = pid;
	}
}

/* The end step of a trace not read back yet (the children's).  A child
 * that outlived the program (daemon(), a server's workers, `cmd &`) still
 * writes its trace: that one is left as it is. */
static void end_step(const char *path, void *arg)
{
	struct kids_end *k = arg;
	char what[1024];
	uint64_t events;
	uint32_t threads;
	pid_t pid = still_written(path);
	if (pid && !grace(k, trace_done, path)) {
		still_running(k, path, pid);
		return;
	}
	for (int i = 0; pid && i < k->nunstarted; i++) /* (it exec'd or ended) */
		if (k->unstarted[i] == pid)
			k->unstarted[i] = k->unstarted[--k->nunstarted];
	int state = k->cfg->no_compact ? TRACE_WHOLE
				       : damaged(path, 0, what, sizeof(what), &events, &threads);
	end_step_on(path, k->cfg, state, NULL);
}

/* The children unstarted_children found: those that made no trace yet,
 * or one after that look, given what is left of the grace to end or
 * finish it; the others still run. */
static void settle_unstarted(struct kids_end *k, const char *path)
{
	for (int i = k->nunstarted - 1; i >= 0; i--) {
		pid_t kid = k->unstarted[i];
		static char name[PATH_MAX + 16];
		snprintf(name, sizeof(name), "%s.%d", path, (int)kid);
		if (access(name, F_OK) == 0) { /* (made since: end_step says) */
			end_step(name, k);
			continue;
		}
		if (grace(k, kid_done, &kid)) {
			if (access(name, F_OK) == 0)
				end_step(name, k);
			continue;
		}
		if (ht_proc_alive(kid))
			still_running(k, name, kid);
	}
}

/* Said after the summary: the children that still run write on. */
static void note_running_children(const struct kids_end *k, const char *path, const char *shown)
{
	if (!k->running)
		return;
	const char *suffix = k->first + strlen(path); /* (named after the program's trace) */
	char see[PATH_MAX + 96];
	see_cmd(see, sizeof(see), "compact --fast", shown, suffix);
	if (k->running == 1)
		fprintf(stderr,
			"heaptrail: note: the program writing %s%s (pid %d) still runs after "
			"the traced program ended (a daemon, or a child left running): that trace "
			"grows until it ends, and is not compressed (%s does it then)\n",
			shown, suffix, (int)k->first_pid, see);
	else
		fprintf(stderr,
			"heaptrail: note: the programs writing %s%s (pid %d) and %d more child "
			"traces still run after the traced program ended (daemons, or children left "
			"running): those traces grow until they end, and are not compressed "
			"('heaptrail compact --fast' on each does it then)\n",
			shown, suffix, (int)k->first_pid, k->running - 1);
}

/* Signals that end a program, which record passes on to it: a `kill` of
 * record, a service manager's stop, `timeout`, a hang-up.  record then waits
 * for the program as after any end, so that the trace is finished. */
static const int forwarded_signals[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2};

static volatile sig_atomic_t fwd_pid;   /* the program while it runs; 0 after */
static volatile sig_atomic_t late_sigs; /* signals that came after it ended */

static void forward_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	int e = errno;
	pid_t pid = (pid_t)fwd_pid;
	if (pid > 0) {
		/* The terminal's signals (Ctrl-C, Ctrl-\, a hang-up: SI_KERNEL)
		 * go to the whole foreground group: the program has its own.
		 * So does one the program sends to its own group (kill(0,
		 * sig)), which record gets too: passed on, the program's
		 * handler ran twice, one time in three. */
		if (si->si_code != SI_KERNEL && !(si->si_code == SI_USER && si->si_pid == pid)) {
			kill(pid, sig);
			if (sig != SIGUSR1 && sig != SIGUSR2)
				ht_live_quit = sig; /* --live: the display ends, record waits */
		}
	} else if (late_sigs++) {
		/* The program has ended and the trace is being finished: a
		 * second signal ends record, without the temporary of the end
		 * step (the trace stays readable as the recorder wrote it). */
		ht_out__unlink_live();
		if (late_msg[0]) {
			ssize_t w = write(2, late_msg, strlen(late_msg));
			(void)w;
		}
		signal(sig, SIG_DFL);
		raise(sig);
	}
	errno = e;
}

/* Installs forward_signal for the signals that were not ignored when
 * record started (nohup's SIGHUP stays ignored, as in the program). */
static void forward_signals(pid_t pid)
{
	fwd_pid = pid;
	for (size_t i = 0; i < sizeof(forwarded_signals) / sizeof(forwarded_signals[0]); i++) {
		struct sigaction sa, old;
		if (sigaction(forwarded_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = forward_signal;
		sa.sa_flags = SA_SIGINFO | SA_RESTART;
		sigemptyset(&sa.sa_mask);
		sigaction(forwarded_signals[i], &sa, NULL);
	}
}

/* The file of the program cmd, found in PATH as execvp would (in buf);
 * NULL if not found. */
static const char *find_command(const char *cmd, char *buf, size_t cap)
{
	if (strchr(cmd, '/'))
		return cmd;
	const char *p = getenv("PATH");
	for (p = p ? p : "/usr/local/bin:/usr/bin:/bin"; *p;) {
		size_t n = strcspn(p, ":");
		if (n && (size_t)snprintf(buf, cap, "%.*s/%s", (int)n, p, cmd) < cap &&
		    access(buf, X_OK) == 0)
			return buf;
		p += n + (p[n] == ':');
	}
	return NULL;
}

/* Why the program cmd left no trace, as far as its file tells. */
static const char *no_trace_reason(const char *cmd, const char *out)
{
	char path[PATH_MAX];
	const char *f = find_command(cmd, path, sizeof(path));
	struct stat st;
	if (f && stat(f, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)))
		return "it is setuid or setgid, and the recorder never runs in such a process";
	/* file capabilities (setcap): the loader runs such a program in
	 * secure mode (AT_SECURE) for a user who is not root, as a setuid one,
	 * and ignores LD_PRELOAD */
	if (f && getuid() != 0 && getxattr(f, "security.capability", NULL, 0) > 0)
		return "it has file capabilities (setcap), and the loader ignores LD_PRELOAD in "
		       "such a program run by a user other than root, as in a setuid one";
	if (f && ht_elf__interp(f) == 0)
		return "it is statically linked, and LD_PRELOAD does not reach it: 'heaptrail "
		       "attach -c' probes such a program";
	/* the recorder could not write the trace's header: a full file system
	 * (it said so on the program's stderr, which may be elsewhere) */
	char dir[PATH_MAX];
	struct statvfs vfs;
	ht_split_path(out, dir, sizeof(dir));
	if (statvfs(dir, &vfs) == 0 && vfs.f_blocks && (uint64_t)vfs.f_bavail * vfs.f_frsize < 65536)
		return "the file system it was to be written to is full: free some space (df)";
	/* an address-space limit the program inherited: the recorder takes
	 * at most an eighth of it for its buffers, and needs some 12 MiB at
	 * the least (src/preload/buffer.c; it said so on the program's
	 * stderr).  Record's guess contradicted its line (probe T). */
	struct rlimit rl;
	static char as_why[160];
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur / 8 < (16ull << 20)) {
		snprintf(as_why, sizeof(as_why),
			 "the address-space limit of %llu MiB (ulimit -v) leaves the recorder no "
			 "room for its buffers, which take an eighth of it at most: raise it",
			 (unsigned long long)(rl.rlim_cur >> 20));
		return as_why;
	}
	return "statically linked, or setuid, or the path is not writable?";
}

/* The trace the recorder wrote at path was taken away while the program
 * ran (fate, from the watch of its directory), or after it, while record
 * finished it (fate HT_FATE_UNKNOWN): said in one line, in place of a
 * guess at why there is none or of "damaged" for what is there now.  Returns the exit status: the
 * program's (status) when the trace is only under another name (moved_to,
 * in the same directory), else RECORD_EXIT_DAMAGED (it is lost to this
 * run). */
static int trace_gone(enum ht_dirwatch_fate fate, const char *how, const char *cmd,
		      const char *shown, const char *path, const char *moved_to, int status)
{
	char dir[PATH_MAX];
	ht_split_path(path, dir, sizeof(dir));
	if (fate == HT_FATE_RENAMED) {
		static char now[PATH_MAX * 2], see[PATH_MAX * 2 + 32];
		snprintf(now, sizeof(now), "%s/%s", dir, moved_to);
		ht_shell_word_inplace(now, sizeof(now));
		fprintf(stderr,
			"heaptrail: %s%s wrote its trace to %s, which was renamed to %s while it "
			"ran; see %s\n",
			how, cmd, shown, now, see_cmd(see, sizeof(see), "stats", now, ""));
		return status;
	}
	if (fate == HT_FATE_UNKNOWN) {
		/* after the program ended: the watch is over then */
		fprintf(
		    stderr,
		    "heaptrail: %s%s wrote its trace to %s, which was moved, removed or replaced "
		    "while record finished it: nothing to report (a trace moved elsewhere is "
		    "whole; 'heaptrail compact --fast' on it compresses what is left raw)\n",
		    how, cmd, shown);
		return RECORD_EXIT_DAMAGED;
	}
	const char *what = fate == HT_FATE_REMOVED     ? "which was removed"
			   : fate == HT_FATE_REPLACED  ? "which was removed or moved and another "
							 "file put in its place"
			   : fate == HT_FATE_MOVED_OUT ? "which was moved out of its directory"
						       : "whose directory was removed or moved";
	/* (moved, it is whole where it went: record cannot follow it there,
	 * and said only "nothing to report", probe I) */
	int moved = fate != HT_FATE_REMOVED && fate != HT_FATE_REPLACED;
	fprintf(stderr,
		"heaptrail: %s%s wrote its trace to %s, %s while it ran: nothing to report%s\n",
		how, cmd, shown, what,
		moved ? " (if it was moved, the trace where it went is whole; 'heaptrail compact "
			"--fast' on it compresses what is left raw)"
		      : "");
	return RECORD_EXIT_DAMAGED;
}

/* The names the recorder tries for the program's trace when OUTPUT is
 * another recording's: OUTPUT.<pid>, then OUTPUT.<pid>.2 ... (its
 * open_output).  The suffix of the one that holds the trace of this run's
 * program in suffix, 1; 0 if none does. */
#define ALT_NAMES 100

static int alt_trace(const char *path, pid_t pid, uint64_t t0, char *suffix, size_t cap)
{
	char alt[PATH_MAX + 32];
	for (int k = 1; k <= ALT_NAMES; k++) {
		if (k == 1)
			snprintf(suffix, cap, ".%d", (int)pid);
		else
			snprintf(suffix, cap, ".%d.%d", (int)pid, k);
		snprintf(alt, sizeof(alt), "%s%s", path, suffix);
		if (strlen(alt) < PATH_MAX && trace_of(alt, pid, t0))
			return 1;
	}
	return 0;
}

/* The sanitizer the program cmd (found in PATH as execvp would) is built
 * with, if it loads one as a shared runtime: its name, and the library in
 * lib; NULL if none.  Those runtimes replace malloc and must be the first
 * library loaded (ASan and LSan stop with a CHECK failure or ask to come
 * first, TSan crashed), so that the recorder cannot run beside them. */
static const char *sanitizer_of(const char *cmd, char *lib, size_t cap)
{
	char path[PATH_MAX];
	const char *found = find_command(cmd, path, sizeof(path));
	if (!found || ht_elf__needs(found, ht_sanitizer_runtimes(), lib, cap) < 0)
		return NULL;
	return ht_sanitizer_name(lib);
}

/* record --live: the program's output goes to OUTPUT.out, its input is
 * not the terminal (the display reads the keys). */
static int live_output(const char *trace)
{
	char name[PATH_MAX + 8];
	snprintf(name, sizeof(name), "%s.out", trace);
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
	int in = open("/dev/null", O_RDONLY);
	if (fd < 0 || in < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0 || dup2(in, 0) < 0) {
		int e = errno;
		char word[PATH_MAX + 64];
		fprintf(stderr, "heaptrail: cannot write %s: %s\n",
			ht_shell_word(word, sizeof(word), name), strerror(e));
		return -1;
	}
	close(fd);
	close(in);
	return 0;
}

/* record --live: once the trace is there, the display in the foreground;
 * after it, record waits for the program as always. */
static void run_live(const char *out_tmpl, pid_t pid, uint64_t t0, const char *prog)
{
	char path[PATH_MAX], out[PATH_MAX + 8], suffix[32];
	ht_pidpath_expand(path, sizeof(path), out_tmpl, pid);
	snprintf(out, sizeof(out), "%s.out", path);
	/* (OUTPUT.<pid>, or .<pid>.2 ..., when another recording writes OUTPUT) */
	for (int i = 0; !trace_of(path, pid, t0); i++) {
		if (alt_trace(path, pid, t0, suffix, sizeof(suffix))) {
			size_t pl = strlen(path);
			snprintf(path + pl, sizeof(path) - pl, "%s", suffix); /* fits: checked */
			break;
		}
		siginfo_t si = {0};
		if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid)
			return; /* it ended before it wrote a trace: record says why */
		if (i == 3000) {
			char word[PATH_MAX + 64];
			fprintf(stderr, "heaptrail: no trace at %s after 30 s: no live display\n",
				ht_shell_word(word, sizeof(word), path));
			return;
		}
		usleep(10000);
	}
	char *av[] = {"live", "--program-output", out, path, NULL};
	cmd_live(4, av);
	siginfo_t si = {0};
	char word[PATH_MAX + 64], oword[PATH_MAX + 64];
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && !si.si_pid)
		fprintf(stderr,
			"heaptrail: %s (pid %d) goes on; its trace goes to %s, its output to "
			"%s; waiting for it to end (Ctrl-C goes to it)\n",
			prog, (int)pid, ht_shell_word(word, sizeof(word), path),
			ht_shell_word(oword, sizeof(oword), out));
}

int cmd_record(int argc, char **argv)
{
	struct record_config cfg = {
		.flush_interval = 100000000ull,
		.rss_interval = 10000000ull,
		.buffer_size = 65536,
		.zstd_level = 1,
		.clock = "tsc",
		.writer = "process",
		.unwind = "auto",
		.timestamp_every = 64,
		/* INT_MIN: not given (an explicit 0 is a value, and refused) */
		.stacks = INT_MIN,
		.compact_level = INT_MIN,
	};
	/* the output's directory, for a trace removed or renamed meanwhile */
	struct ht_dirwatch watch = {-1};
	const struct ht_option opts[] = {
		{'o', "output", HT_OPT_STRING, &cfg.output, "FILE", "trace file (heaptrail.<pid>.ht); %p is the pid"},
		{0, "start-paused", HT_OPT_FLAG, &cfg.start_paused, NULL, "record nothing until the program calls heaptrail_start()"},
		{0, "follow-exec", HT_OPT_FLAG, &cfg.follow_exec, NULL, "trace programs the command's children exec: one trace per process image, OUTPUT.<pid> (OUTPUT.<pid>.2 for a second image of a pid)"},
		{0, "no-follow-fork", HT_OPT_FLAG, &cfg.no_follow_fork, NULL, "do not trace forked children"},
		{0, "flush-interval", HT_OPT_DURATION, &cfg.flush_interval, "TIME", "write buffered events at least this often (100ms)"},
		{0, "rss-interval", HT_OPT_DURATION, &cfg.rss_interval, "TIME", "sample the program's RSS this often, for timeline (10ms; 0: at flushes only)"},
		{0, "buffer-size", HT_OPT_SIZE, &cfg.buffer_size, "SIZE", "per-thread buffer (64K; 4K..512K)"},
		{0, "toggle-signal", HT_OPT_FLAG, &cfg.toggle_signal, NULL, "SIGUSR2 pauses and resumes recording"},
		{0, "live", HT_OPT_FLAG, &cfg.live, NULL, "show the heap live on this terminal (heaptrail live; implies --toggle-signal); the program's output goes to OUTPUT.out"},
		{0, "zstd-level", HT_OPT_INT, &cfg.zstd_level, "N",
		 "zstd level of the compression while recording, and with --finish=zstd of the chunks the recorder wrote raw (1; -7..19; 0: raw, then compacted)"},
		{0, "finish", HT_OPT_STRING, &cfg.finish, "HOW",
		 "how the end step codes the chunks the recorder wrote raw: huffman (Huffman coding alone, ~1 GB/s a core) or zstd (at --zstd-level: ~5% smaller, ~3x slower) (huffman)"},
		{0, "compact", HT_OPT_FLAG, &cfg.compact, NULL,
		 "compact the trace after the run (column coding: ~2x smaller, ~20x slower than the default end step)"},
		{0, "no-compact", HT_OPT_FLAG, &cfg.no_compact, NULL, "leave the trace as the recorder wrote it (no end step)"},
		{0, "compact-level", HT_OPT_INT, &cfg.compact_level, "N", "zstd level of --compact (3); implies --compact"},
		{0, "clock", HT_OPT_STRING, &cfg.clock, "CLOCK", "tsc or monotonic (tsc)"},
		{0, "stacks", HT_OPT_OPT_INT, &cfg.stacks, "DEPTH",
		 "record the call stack of every allocation, up to DEPTH frames, 1..256 (64); see heaptrail leaks"},
		{0, "sample-bytes", HT_OPT_SIZE, &cfg.sample_bytes, "N",
		 "record one allocation every N bytes on average (Poisson; K/M/G), and their frees; analyzers scale the totals (0: all)"},
		{0, "unwind", HT_OPT_STRING, &cfg.unwind, "HOW",
		 "auto: each frame by the rule of its function's .eh_frame, libunwind for what the rule cannot say; "
		 "dwarf: libunwind only; check: both, libunwind's recorded, differences shown (auto)"},
		{0, "writer", HT_OPT_STRING, &cfg.writer, "KIND",
		 "process: a helper process writes the trace, and saves every event if the program is killed; thread: a thread of the program (process)"},
		{0, "timestamp-every", HT_OPT_INT, &cfg.timestamp_every, "N",
		 "malloc/free read the clock every Nth call of a thread, and after each 10ms tick; 1 = every call (64)"},
		{0, "durations", HT_OPT_FLAG, &cfg.durations, NULL,
		 "time every malloc-API call (the clock before and after it), for heaptrail heap's lock waits"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no summary line on stderr"},
		{0},
	};
	int ret = HT_EXIT_USAGE;
	int nargs = ht_parse_options(argc, argv, opts, usage_text, HT_OPT_STOP_AT_NONOPT);
	if (nargs < 1) {
		ht_error("no command to record; usage: heaptrail record [options] -- COMMAND [ARGS...]");
		goto cleanup;
	}
	if (cfg.output && !*cfg.output) {
		ht_error("-o: empty path");
		goto cleanup;
	}
	if (cfg.output && cfg.output[strlen(cfg.output) - 1] == '/') {
		char word[PATH_MAX + 64];
		ht_shell_word(word, sizeof(word), cfg.output);
		ht_error("-o %s ends in '/': -o names the trace file, not a directory (give a file "
			 "name in it, e.g. %sapp.ht)",
			 word, word);
		goto cleanup;
	}
	if (cfg.output && !strcmp(cfg.output, "-")) {
		ht_error("-o -: a trace cannot go to standard output (it is written with seeks, an "
			 "index and files next to it): give a file name (./- for a file named '-')");
		goto cleanup;
	}
	if (cfg.stacks == INT_MIN)
		cfg.stacks = 0; /* (off) */
	else if (cfg.stacks == -1)
		cfg.stacks = 64;
	else if (cfg.stacks < 1 || cfg.stacks > 256) {
		ht_error("--stacks=%d: the depth goes from 1 to 256", cfg.stacks);
		goto cleanup;
	}
	if (cfg.sample_bytes > (1u << 30)) {
		ht_error("--sample-bytes: at most 1G");
		goto cleanup;
	}
	if (strcmp(cfg.unwind, "auto") && strcmp(cfg.unwind, "dwarf") && strcmp(cfg.unwind, "check")) {
		ht_error("--unwind=%s: expected auto, dwarf or check", cfg.unwind);
		goto cleanup;
	}
	if (strcmp(cfg.writer, "process") && strcmp(cfg.writer, "thread")) {
		ht_error("--writer=%s: expected process or thread", cfg.writer);
		goto cleanup;
	}
	if (strcmp(cfg.clock, "tsc") && strcmp(cfg.clock, "monotonic")) {
		ht_error("--clock=%s: expected tsc or monotonic", cfg.clock);
		goto cleanup;
	}
	if (cfg.flush_interval < 1000000 || cfg.flush_interval > 60000000000ull) {
		ht_error("--flush-interval must be between 1ms and 60s");
		goto cleanup;
	}
	if (cfg.rss_interval > 60000000000ull ||
	    (cfg.rss_interval && cfg.rss_interval < 1000000)) {
		ht_error("--rss-interval must be 0 (at flushes only) or between 1ms and 60s");
		goto cleanup;
	}
	if (cfg.compact_level != INT_MIN)
		cfg.compact = 1;
	else
		cfg.compact_level = 3;
	if (cfg.compact_level < 1 || cfg.compact_level > 19 || cfg.zstd_level < -7 ||
	    cfg.zstd_level > 19) {
		ht_error("--zstd-level takes -7..19 (0: raw) and --compact-level 1..19");
		goto cleanup;
	}
	if (cfg.no_compact && cfg.compact) {
		ht_error("--no-compact and --compact (or --compact-level) contradict each other");
		goto cleanup;
	}
	if (cfg.finish && strcmp(cfg.finish, "huffman") && strcmp(cfg.finish, "zstd")) {
		ht_error("--finish takes huffman or zstd, not '%s'", cfg.finish);
		goto cleanup;
	}
	if (cfg.finish && (cfg.no_compact || cfg.compact || cfg.zstd_level == 0)) {
		ht_error("--finish and %s contradict each other (%s)",
			 cfg.no_compact ? "--no-compact" : cfg.compact ? "--compact" : "--zstd-level=0",
			 cfg.no_compact ? "no end step: the chunks written raw stay so"
					: "the end step compacts the whole trace");
		goto cleanup;
	}
	if (cfg.timestamp_every < 1 || cfg.timestamp_every > 65536) {
		ht_error("--timestamp-every takes 1..65536 (1 dates every call)");
		goto cleanup;
	}
	if (cfg.buffer_size < 4096 || cfg.buffer_size > 524288) {
		ht_error("--buffer-size must be between 4K and 512K");
		goto cleanup;
	}
	static char lib[PATH_MAX];
	if (cfg.live && (!isatty(0) || !isatty(1))) {
		ht_error("--live needs a terminal (heaptrail live --batch reads a trace without one)");
		goto cleanup;
	}
	if (find_preload(lib, sizeof(lib)) < 0) {
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	/* the command as record's lines name it: one shell word, as the
	 * paths are (a name with a space or a quote was printed bare) */
	static char cmdw[PATH_MAX * 2];
	ht_shell_word(cmdw, sizeof(cmdw), argv[0]);
	char san_lib[256];
	const char *san = sanitizer_of(argv[0], san_lib, sizeof(san_lib));
	if (san) {
		ht_error("%s is built with %s (it loads %s), whose runtime replaces malloc and must "
			 "be the first library loaded: it cannot run beside the recorder. Record a "
			 "build without -fsanitize",
			 cmdw, san, san_lib);
		goto cleanup;
	}
	static char out_abs[PATH_MAX], longest[PATH_MAX];
	/* The output path, absolute and with the longest pid there can be
	 * (pid_max is at most 2^22), must fit the recorder's bound: a longer
	 * one is an error here, never a name cut to another */
	size_t out_len =
	    absolute_output(out_abs, sizeof(out_abs), cfg.output ? cfg.output : "heaptrail.%p.ht");
	if (out_len >= sizeof(out_abs) ||
	    ht_pidpath_expand(longest, sizeof(longest), out_abs, 4194304) < 0) {
		ht_error("-o: the path is too long (%zu bytes; at most %d once it is made "
			 "absolute and %%p expanded, to leave room for the names derived from it)",
			 out_len, HT_PIDPATH_MAX);
		goto cleanup;
	}
	const char *last = strrchr(longest, '/');
	last = last ? last + 1 : longest;
	if (strlen(last) > NAME_MAX - HT_PIDPATH_ROOM) {
		ht_error("-o: the file name is too long (%zu bytes; at most %d, to leave room "
			 "for the names derived from it)",
			 strlen(last), NAME_MAX - HT_PIDPATH_ROOM);
		goto cleanup;
	}
	const char *out_tmpl = out_abs;

	/* What is at the output path is the recorder's to judge (open_output
	 * in src/preload/writer.c): record finds the trace of its program by
	 * its header afterwards (trace_of), and never takes an older file of
	 * the same name, or another recording's, for it. */
	uint64_t t0 = ht_clock_ns();
	/* A trace there now is kept by the recorder as OUTPUT.old: to say so. */
	struct stat prev;
	int had_prev =
	    !strstr(out_tmpl, "%p") && lstat(out_tmpl, &prev) == 0 && S_ISREG(prev.st_mode);
	/* The child expands %p itself (it knows its pid); we expand it the
	 * same way after fork to find the file.  The signals record passes on
	 * are blocked until it knows whom to pass them to. */
	sigset_t fwd_set, old_mask;
	sigemptyset(&fwd_set);
	for (size_t i = 0; i < sizeof(forwarded_signals) / sizeof(forwarded_signals[0]); i++)
		sigaddset(&fwd_set, forwarded_signals[i]);
	sigprocmask(SIG_BLOCK, &fwd_set, &old_mask);
	/* The child says on this pipe that it refused the output path (the
	 * path may hold %p: only the child knows it), 'r', or that it could
	 * not run the command, 'e' (it said why); exec closes it.  A program
	 * that ran and exited 126 or 127 (a shell whose command was not
	 * found) is not one that could not be run. */
	int refused[2];
	if (pipe2(refused, O_CLOEXEC) < 0) {
		int e = errno;
		struct rlimit nf;
		if (e == EMFILE && getrlimit(RLIMIT_NOFILE, &nf) == 0)
			ht_error("cannot start %s: record needs two descriptors more than the "
				 "limit of %llu leaves it (ulimit -n): raise it, and lower it in the "
				 "program if it must run with so few",
				 cmdw, (unsigned long long)nf.rlim_cur);
		else
			ht_error("cannot start %s: pipe: %s", cmdw, strerror(e));
		sigprocmask(SIG_SETMASK, &old_mask, NULL);
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	if (cfg.live)
		cfg.toggle_signal = 1; /* the display's r key */
	{
		static char wdir[PATH_MAX];
		ht_split_path(out_tmpl, wdir, sizeof(wdir));
		if (!strchr(wdir, '%'))
			ht_dirwatch__start(&watch, wdir);
	}
	pid_t pid = fork();
	if (pid < 0) {
		ht_error("fork: %s", strerror(errno));
		sigprocmask(SIG_SETMASK, &old_mask, NULL);
		close(refused[0]);
		close(refused[1]);
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &old_mask, NULL);
		close(refused[0]);
		static char out[PATH_MAX], out_shown[PATH_MAX];
		ht_pidpath_expand(out, sizeof(out), out_tmpl, getpid());
		if (ht_pidpath_expand(out_shown, sizeof(out_shown),
				      cfg.output ? cfg.output : "heaptrail.%p.ht", getpid()) < 0)
			memcpy(out_shown, out, sizeof(out)); /* the name as given is longer */
		ht_shell_word_inplace(out_shown, sizeof(out_shown));
		if (refuse_output(out, out_shown) < 0) {
			ssize_t wr = write(refused[1], "r", 1);
			(void)wr; /* no message to add if the pipe broke */
			_exit(HT_EXIT_USAGE);
		}
		/* record --live: record's own stderr kept for "cannot run"
		 * (in OUTPUT.out, the terminal showed nothing but the exit
		 * status) */
		int err_fd = cfg.live ? fcntl(2, F_DUPFD_CLOEXEC, 3) : 2;
		if (cfg.live && live_output(out) < 0) {
			ssize_t wr = write(refused[1], "e", 1);
			(void)wr;
			_exit(126);
		}
		/* The program's environment gets two words of ours, not one
		 * per option: the library in LD_PRELOAD, and HEAPTRAIL_OPTIONS
		 * with the options not at their default; the recorder takes
		 * both out of it at start-up (docs/record.md, "Environment").
		 * It alone is read: HEAPTRAIL_* variables of the user's stay as
		 * they are, for the program, and count for nothing. */
		char *word = options_word(&cfg, getpid(), out);
		if (!word) {
			fprintf(stderr, "heaptrail: out of memory\n");
			ssize_t wr = write(refused[1], "e", 1);
			(void)wr;
			_exit(126);
		}
		setenv("HEAPTRAIL_OPTIONS", word, 1);
		free(word);
		const char *pre = getenv("LD_PRELOAD");
		static char buf[PATH_MAX * 2];
		if (pre && *pre)
			snprintf(buf, sizeof(buf), "%s:%s", lib, pre);
		else
			snprintf(buf, sizeof(buf), "%s", lib);
		setenv("LD_PRELOAD", buf, 1);
		execvp(argv[0], argv);
		int e = errno;
		if (cfg.live) { /* (its OUTPUT.out would hold nothing else) */
			char name[PATH_MAX + 8];
			snprintf(name, sizeof(name), "%s.out", out);
			unlink(name);
		}
		/* (quoted as before when the name needs no quoting) */
		/* a number for a command: `--stacks 8 -- prog` gives --stacks
		 * its default and runs 8, as getopt reads an optional value
		 * (probe V): said, with the form that works */
		int number = e == ENOENT && argv[0][0] && strspn(argv[0], "0123456789") ==
								  strlen(argv[0]);
		dprintf(err_fd >= 0 ? err_fd : 2,
			strcmp(cmdw, argv[0]) ? "heaptrail: cannot run %s: %s%s\n"
					      : "heaptrail: cannot run '%s': %s%s\n",
			cmdw, strerror(e),
			number ? " (a value of --stacks goes with '=': --stacks=DEPTH; given apart, "
				 "it is taken for the command)"
			       : "");
		ssize_t wr = write(refused[1], "e", 1);
		(void)wr;
		_exit(e == ENOENT ? 127 : 126);
	}
	/* Like time(1): the terminal's ^C and ^\ go to the command, and we
	 * wait; SIGTERM, SIGHUP, SIGINT and SIGQUIT sent to record alone are
	 * passed on to it (forward_signal).  The program is reaped only once
	 * the handler no longer names it (its pid could be reused). */
	forward_signals(pid);
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	close(refused[1]);
	/* the child's word on the output path: EOF once it exec'ed the program */
	char why;
	ssize_t nref;
	while ((nref = read(refused[0], &why, 1)) < 0 && errno == EINTR)
		;
	close(refused[0]);
	if (cfg.live && nref != 1)
		run_live(out_tmpl, pid, t0, argv[0]);
	int status = 0;
	siginfo_t info;
	while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) < 0 && errno == EINTR)
		;
	uint64_t self_ns = 0, kids_ns = 0;
	int cpu_known = cpu_of(pid, &self_ns, &kids_ns); /* (the zombie, not reaped yet) */
	fwd_pid = 0;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			ht_error("waitpid: %s", strerror(errno));
			ret = HT_EXIT_DATA;
			goto cleanup;
		}
	}
	/* The program is done: what record writes now (the summary, notes)
	 * goes to a stderr that may be a pipe whose reader has gone (`2>&1 |
	 * head -1`): EPIPE, not death by SIGPIPE, so that the end step is
	 * made and record exits with the program's status (it exited 141) */
	signal(SIGPIPE, SIG_IGN);
	if (nref == 1) { /* the child said why, and ran nothing */
		ret = why == 'r' || !WIFEXITED(status) ? HT_EXIT_USAGE : WEXITSTATUS(status);
		goto cleanup;
	}
	/* path: the file; shown: its name as the user gave it, for messages */
	static char path[PATH_MAX], shown[PATH_MAX];
	ht_pidpath_expand(path, sizeof(path), out_tmpl, pid);
	if (ht_pidpath_expand(shown, sizeof(shown), cfg.output ? cfg.output : "heaptrail.%p.ht",
			      pid) < 0)
		memcpy(shown, path, sizeof(path)); /* the name as given is longer */
	ht_shell_word_inplace(shown, sizeof(shown)); /* one line, one word */
	struct run run = {pid, t0, cfg.follow_exec};
	/* the program's own variable, for unstarted_children */
	static char entry[PATH_MAX * 2] = "";
	char *word = cfg.quiet || cfg.no_follow_fork ? NULL : options_word(&cfg, pid, path);
	if (word)
		snprintf(entry, sizeof(entry), "HEAPTRAIL_OPTIONS=%s", word);
	free(word);
	static char note[PATH_MAX + 64] = "";
	int have = trace_of(path, pid, t0);
	if (have && had_prev) {
		static char old[PATH_MAX + 8];
		struct stat st;
		snprintf(old, sizeof(old), "%s.old", path);
		if (lstat(old, &st) == 0 && st.st_dev == prev.st_dev && st.st_ino == prev.st_ino)
			snprintf(note, sizeof(note), "; the previous trace is now %s.old", shown);
	}
	if (!have) {
		/* another recording was writing OUTPUT: the recorder wrote
		 * OUTPUT.<pid>, or OUTPUT.<pid>.2 ... where that was taken (and
		 * said so) */
		char suffix[32];
		if (alt_trace(path, pid, t0, suffix, sizeof(suffix))) {
			have = 1;
			size_t pl = strlen(path), sl = strlen(shown);
			snprintf(path + pl, sizeof(path) - pl, "%s", suffix); /* fits: checked */
			snprintf(shown + sl, sizeof(shown) - sl, "%s", suffix);
		}
	}
	/* (a second signal from now on says what it leaves: before, one
	 * that came before the end step ended record without a word) */
	set_late_msg(path, &cfg);
	enum ht_dirwatch_fate fate = HT_FATE_UNKNOWN;
	static char moved_to[NAME_MAX + 1] = "";
	if (!have) {
		static char wdir[PATH_MAX];
		const char *base = ht_split_path(path, wdir, sizeof(wdir));
		fate = ht_dirwatch__fate(&watch, base, moved_to, sizeof(moved_to));
		/* the recorder's own rename at an exec (OUTPUT.exec<n>, the
		 * images before it; earlier_image below) */
		size_t bl = strlen(base);
		if (fate == HT_FATE_RENAMED && !strncmp(moved_to, base, bl) &&
		    !strncmp(moved_to + bl, ".exec", 5) && moved_to[bl + 5] >= '1' &&
		    moved_to[bl + 5] <= '9')
			fate = HT_FATE_UNKNOWN;
	}
	ht_dirwatch__stop(&watch); /* (its descriptor is one the end needs, ulimit -n 6) */
	/* What record reports comes from the traces as they are on disk,
	 * read back before the end step (which would not repair a damaged
	 * one, or would hide the damage: compaction keeps what it can read)
	 * and after it: a damaged one is an error, whatever the program did. */
	static char what[1024];
	uint64_t events;
	uint32_t threads;
	int ended_ok = !WIFSIGNALED(status);
	/* (its writer waited for once: every look below reads it as it is) */
	pid_t writer = 0;
	int stopped = 0;
	int unfinished = have && writer_unfinished(path, &writer, &stopped);
	int state = have && !unfinished
			    ? damaged(path, ended_ok, what, sizeof(what), &events, &threads)
			    : TRACE_WHOLE;
	/* taken away while record finished it (read it back, rewrote it):
	 * not damaged, gone */
	int gone_late = state == TRACE_DAMAGED && !trace_of(path, pid, t0);
	if (gone_late)
		state = TRACE_WHOLE;
	int bad = state == TRACE_DAMAGED;
	struct kids_end kids_end = {.cfg = &cfg, .word = entry, .grace_ms = KIDS_GRACE_MS};
	/* The traces of the children and earlier images get the end step
	 * whether or not the program's last image wrote OUTPUT (it may have
	 * exec'd a program that is not traced: a static one, a setuid one). */
	{
		if (have && !unfinished && !gone_late)
			gone_late = end_step_on(path, &cfg, state, &run);
		if (have && state != TRACE_DAMAGED && !unfinished && !gone_late)
			note_program_end(path, status);
		if (entry[0])
			unstarted_children(&kids_end, entry);
		for_each_child_trace(path, &run, end_step, &kids_end);
		settle_unstarted(&kids_end, path);
		/* A daemon's next generation (fork, setsid, fork, and the first
		 * child exits): not there yet at the first look on a loaded
		 * machine, its trace was listed as finished and the note that it
		 * still runs missing (13 runs of 24, probe I).  Looked for
		 * again while new ones turn up. */
		for (int pass = 0; entry[0] && pass < 8; pass++) {
			kids_end.nunstarted = 0;
			unstarted_children(&kids_end, entry);
			if (!kids_end.nunstarted)
				break;
			settle_unstarted(&kids_end, path);
		}
		if (have && !bad && !unfinished && !gone_late && !trace_of(path, pid, t0))
			gone_late = 1;
		if (have && !bad && !unfinished && !gone_late)
			bad = damaged(path, ended_ok, what, sizeof(what), &events, &threads) ==
			      TRACE_DAMAGED;
	}
	static char how[PATH_MAX * 4 + 100] = "";
	if (WIFSIGNALED(status)) {
		/* the image that died: the command record started may have
		 * exec'd another (env, a wrapper script), whose trace says */
		static char died[PATH_MAX * 2];
		if (have && !gone_late && trace_argv0(path, died, sizeof(died)) &&
		    strcmp(died, cmdw))
			snprintf(how, sizeof(how),
				 "%s (which %s exec'd) was killed by signal %d (%s); ", died, cmdw,
				 WTERMSIG(status), strsignal(WTERMSIG(status)));
		else
			snprintf(how, sizeof(how), "%s was killed by signal %d (%s); ", cmdw,
				 WTERMSIG(status), strsignal(WTERMSIG(status)));
	}
	ret = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	struct kids_check kids = {path, shown, 0};
	static struct first_exec first_exec;
	int nkids = for_each_child_trace(path, &run, check_kid, &kids);
	if (bad || kids.bad)
		ret = RECORD_EXIT_DAMAGED;
	if (bad)
		say_damaged(shown, how, what, events, threads);
	else if (gone_late)
		ret = trace_gone(HT_FATE_UNKNOWN, how, cmdw, shown, path, NULL, ret);
	else if (unfinished)
		say_unfinished(path, shown, how, writer, stopped);
	else if (!cfg.quiet && have)
		summarize(path, shown, how, &run, note, !strcmp(cfg.writer, "process"));
	else if (fate != HT_FATE_UNKNOWN && fate != HT_FATE_THERE)
		ret = trace_gone(fate, how, cmdw, shown, path, moved_to, ret);
	else if (!cfg.quiet && earlier_image(path, &run, &first_exec))
		/* it exec'd a program that runs untraced (a sanitizer's build,
		 * a setuid or static one): its earlier images have their traces,
		 * and its children theirs */
		say_untraced_exec(path, shown, how, cmdw, &run, &first_exec);
	else if (!cfg.quiet && nkids)
		say_no_trace_but_kids(path, shown, how, cmdw, &run);
	else if (!cfg.quiet)
		fprintf(stderr, "heaptrail: %s%s wrote no trace to %s (%s)\n", how, cmdw, shown,
			no_trace_reason(argv[0], path));
	if (!cfg.quiet)
		note_running_children(&kids_end, path, shown);
	if (!cfg.quiet && have && !bad && cpu_known && !cfg.follow_exec)
		note_untraced_children(path, &run, self_ns, kids_ns, cfg.no_follow_fork,
				       !strcmp(cfg.writer, "process"));
	if (fds_ran_out) {
		struct rlimit nf;
		unsigned long long lim = getrlimit(RLIMIT_NOFILE, &nf) == 0 ? nf.rlim_cur : 0;
		ht_warning("record ran out of file descriptors (ulimit -n %llu) while it looked "
			   "for the traces of the program's children and earlier images: some may "
			   "be missing from the lines above, and left without their end step or "
			   "check; they are on disk as %s.*: raise the limit",
			   lim, shown);
	}
cleanup:
	ht_dirwatch__stop(&watch);
	return ret;
}
