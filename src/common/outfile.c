/* Output files: a temporary of an unpredictable name, renamed into place
 * (outfile.h). */
#define _GNU_SOURCE
#include "common/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

/* ---- the registry of live temporaries ---- */

/* A handful: a command writes one or two files at a time.  A temporary
 * that finds no free slot is still written, only not removed on a
 * signal. */
#define SLOTS 16

static char *_Atomic live[SLOTS];
static atomic_int handlers_set;

void ht_out__unlink_live(void)
{
	int saved = errno;
	for (int i = 0; i < SLOTS; i++) {
		char *p = atomic_load(&live[i]);
		if (p)
			unlink(p);
	}
	errno = saved;
}

static void on_signal(int sig)
{
	ht_out__unlink_live();
	ht_progress_clear_sig();
	/* Then the default action, raised and unblocked: the process ends as
	 * it would have (status 128+sig in a shell).  Not SA_RESETHAND: a
	 * second signal (timeout(1) sends one to the process and one to its
	 * group) would find the default action at once and, delivered to
	 * another thread, end the process before the names are removed;
	 * here it runs this handler too, or waits (the three are blocked
	 * while it runs). */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
	raise(sig);
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, sig);
	sigprocmask(SIG_UNBLOCK, &s, NULL);
}

static void fatal_set(sigset_t *s)
{
	sigemptyset(s);
	sigaddset(s, SIGINT);
	sigaddset(s, SIGTERM);
	sigaddset(s, SIGHUP);
}

/* Catches the signals whose action is still the default one; a command
 * with its own handler (the probes stop on SIGINT and write their output)
 * or that ignores one keeps it. */
static void set_handlers(void)
{
	if (atomic_exchange(&handlers_set, 1))
		return;
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old, sa;
		if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
		    (old.sa_flags & SA_SIGINFO))
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_signal;
		fatal_set(&sa.sa_mask);
		sa.sa_flags = SA_RESTART;
		sigaction(sigs[i], &sa, NULL);
	}
}

void ht_out__catch_signals(void)
{
	set_handlers();
}

static int reg_add(char *tmp)
{
	for (int i = 0; i < SLOTS; i++) {
		char *expect = NULL;
		if (atomic_compare_exchange_strong(&live[i], &expect, tmp))
			return i;
	}
	return -1;
}

static void reg_del(int slot)
{
	if (slot >= 0)
		atomic_store(&live[slot], NULL);
}

/* ---- names ---- */

/* n random letters and digits (getrandom, else the clock and pid mixed). */
static void random_suffix(char *out, size_t n)
{
	static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	uint8_t b[16];
	if (n > sizeof(b))
		n = sizeof(b);
	if (getrandom(b, n, GRND_NONBLOCK) != (ssize_t)n) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		static _Atomic uint64_t counter;
		uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
			     ((uint64_t)getpid() << 20) ^
			     atomic_fetch_add(&counter, 0x9e3779b97f4a7c15u);
		for (size_t i = 0; i < n; i++) {
			x ^= x >> 33;
			x *= 0xff51afd7ed558ccdu;
			x ^= x >> 29;
			b[i] = (uint8_t)x;
		}
	}
	for (size_t i = 0; i < n; i++)
		out[i] = set[b[i] % (sizeof(set) - 1)];
}

#define SUFFIX ".tmp-"
#define RANDOM 8

/* The path in a message: the start and the end of a very long one. */
static const char *shown(const char *path, char *buf, size_t len)
{
	size_t n = strlen(path);
	if (n <= 120)
		return path;
	snprintf(buf, len, "%.50s...%s", path, path + n - 50);
	return buf;
}

/* What heaptrail's own data files begin with (trace/format.h HT_MAGIC,
 * replay/workload.h HT_WL_MAGIC; e2e.output_never_replaces_a_trace fails
 * if they change without this): "a trace", "a workload", or NULL. */
static const char *data_file_kind(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	char magic[8];
	const char *kind = NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && pread(fd, magic, 8, 0) == 8) {
		if (!memcmp(magic, "HEAPTRL\0", 8))
			kind = "a heaptrail trace";
		else if (!memcmp(magic, "HTWLOAD\n", 8))
			kind = "a heaptrail workload";
	}
	close(fd);
	return kind;
}

/* The checks of a destination before anything is written; data: the
 * output is a trace or workload itself (HT_OUT_DATA). */
static int check_dest(const char *path, int data, char *err, size_t errlen)
{
	char sbuf[128];
	struct stat st;
	if (path && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		snprintf(err, errlen,
			 "cannot write %s: it is a symbolic link (heaptrail neither writes through "
			 "one nor replaces it): remove it or choose another path",
			 shown(path, sbuf, sizeof(sbuf)));
		errno = ELOOP;
		return -1;
	}
	const char *kind = path && !data ? data_file_kind(path) : NULL;
	if (kind) {
		snprintf(err, errlen,
			 "cannot write %s: it is %s, which this output would replace (the input "
			 "named again by -o?): choose another path",
			 shown(path, sbuf, sizeof(sbuf)), kind);
		errno = EEXIST;
		return -1;
	}
	return 0;
}

static int check_path(const char *path, int data, char *err, size_t errlen)
{
	if (check_dest(path, data, err, errlen))
		return -1;
	/* what ht_out__open would find only at the end of a long run: a
	 * directory at the path, or one where the file cannot be made */
	char sbuf[128], dir[PATH_MAX];
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "cannot write %s: it is a directory: name a file",
			 shown(path, sbuf, sizeof(sbuf)));
		errno = EISDIR;
		return -1;
	}
	/* a character device or a FIFO is written to itself (ht_out__open):
	 * its directory need not be writable (/dev/null for a user) */
	if (stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))
		return 0;
	ht_split_path(path, dir, sizeof(dir));
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK) != 0) {
		int e = errno ? errno : ENOTDIR;
		if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
			e = ENOTDIR;
		snprintf(err, errlen, "cannot write %s: %s: %s", shown(path, sbuf, sizeof(sbuf)), dir,
			 strerror(e));
		errno = e;
		return -1;
	}
	return 0;
}

int ht_out__named(const char *path, const char *ext)
{
	size_t n = path ? strlen(path) : 0, e = strlen(ext);
	return n > e && !strcmp(path + n - e, ext);
}

int ht_out__check(const char *path, char *err, size_t errlen)
{
	return check_path(path, 0, err, errlen);
}

int ht_out__check_data(const char *path, char *err, size_t errlen)
{
	return check_path(path, 1, err, errlen);
}

/* Closes a destination written to itself (o->direct) and forgets it:
 * 0, or the errno of the close. */
static int close_direct(struct ht_out *o)
{
	int e = 0;
	if ((o->f ? fclose(o->f) : o->fd >= 0 ? close(o->fd) : 0) != 0)
		e = errno ? errno : EIO;
	o->f = NULL;
	o->fd = -1;
	o->direct = 0;
	free(o->path);
	o->path = NULL;
	return e;
}

int ht_out__open(struct ht_out *o, const char *path, mode_t mode, unsigned flags, char *err,
		 size_t errlen)
{
	memset(o, 0, sizeof(*o));
	o->fd = -1;
	o->slot = -1;
	o->flags = flags;
	if (((flags & HT_OUT_STDOUT) && !path) ||
	    ((flags & HT_OUT_DASH) && path && !strcmp(path, "-"))) {
		o->f = stdout;
		o->fd = STDOUT_FILENO;
		return 0;
	}
	char sbuf[128];
	if (!path || !*path) {
		snprintf(err, errlen, "cannot write an empty path");
		errno = ENOENT;
		return -1;
	}
	size_t n = strlen(path);
	/* DEST.tmp-XXXXXXXX must fit, and its last component too */
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t need = n + strlen(SUFFIX) + RANDOM;
	if (need >= PATH_MAX || strlen(base) + strlen(SUFFIX) + RANDOM > NAME_MAX) {
		int sfx = (int)strlen(SUFFIX) + RANDOM;
		snprintf(
		    err, errlen,
		    "cannot write %s: the path is too long (%zu bytes; at most %d, and %d in its "
		    "last component, leave room for the temporary's name)",
		    shown(path, sbuf, sizeof(sbuf)), n, PATH_MAX - 1 - sfx, NAME_MAX - sfx);
		errno = ENAMETOOLONG;
		return -1;
	}
	/* (a directory at path, one where the file cannot be made: said as
	 * ht_out__check says them, not as the rename's EBUSY at the end) */
	if (check_path(path, (flags & HT_OUT_DATA) != 0, err, errlen))
		return -1;
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
			snprintf(err, errlen,
				 "cannot write %s: it is a %s, not a file: choose another path",
				 shown(path, sbuf, sizeof(sbuf)),
				 S_ISBLK(st.st_mode) ? "block device" : "socket");
			errno = EINVAL;
			return -1;
		}
		/* written to itself (a rename would replace the node) */
		o->fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
		if (o->fd < 0) {
			int e = errno;
			snprintf(err, errlen, "cannot write %s: %s", shown(path, sbuf, sizeof(sbuf)),
				 strerror(e));
			errno = e;
			return -1;
		}
		o->direct = 1;
		o->path = strdup(path); /* (messages; NULL if out of memory) */
		if (!(flags & HT_OUT_FD) && !(o->f = fdopen(o->fd, "w"))) {
			int e = errno;
			close_direct(o);
			snprintf(err, errlen, "cannot write %s: %s", shown(path, sbuf, sizeof(sbuf)),
				 strerror(e));
			errno = e;
			return -1;
		}
		return 0;
	}
	o->path = strdup(path);
	o->tmp = malloc(need + 1);
	if (!o->path || !o->tmp) {
		snprintf(err, errlen, "cannot write %s: out of memory",
			 shown(path, sbuf, sizeof(sbuf)));
		goto fail_nomem;
	}
	memcpy(o->tmp, path, n);
	memcpy(o->tmp + n, SUFFIX, strlen(SUFFIX));
	o->tmp[need] = 0;
	char *rnd = o->tmp + n + strlen(SUFFIX);
	/* no signal between the creation and the registry's knowing it */
	set_handlers();
	sigset_t block, old;
	fatal_set(&block);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	for (int tries = 0; tries < 100; tries++) {
		random_suffix(rnd, RANDOM);
		o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (o->fd >= 0 || errno != EEXIST)
			break;
	}
	if (o->fd >= 0)
		o->slot = reg_add(o->tmp);
	int open_errno = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = open_errno;
	if (o->fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot write %s: %s", shown(path, sbuf, sizeof(sbuf)),
			 strerror(e));
		free(o->path);
		free(o->tmp);
		o->path = o->tmp = NULL;
		errno = e;
		return -1;
	}
	if (!(flags & HT_OUT_FD)) {
		o->f = fdopen(o->fd, "w");
		if (!o->f) {
			int e = errno;
			snprintf(err, errlen, "cannot write %s: %s",
				 shown(path, sbuf, sizeof(sbuf)), strerror(e));
			ht_out__abort(o);
			errno = e;
			return -1;
		}
	}
	return 0;
fail_nomem:
	free(o->path);
	free(o->tmp);
	o->path = o->tmp = NULL;
	errno = ENOMEM;
	return -1;
}

int ht_out__commit(struct ht_out *o, char *err, size_t errlen)
{
	char sbuf[128];
	if (o->direct) {
		char name[128]; /* (shown's is at most 120 bytes) */
		snprintf(name, sizeof(name), "%s", o->path ? shown(o->path, sbuf, sizeof(sbuf)) : "");
		int e = 0;
		if (o->f && (fflush(o->f) != 0 || ferror(o->f)))
			e = errno ? errno : EIO;
		int c = close_direct(o);
		if (!e)
			e = c;
		if (e)
			snprintf(err, errlen, "cannot write %s: %s", name, strerror(e));
		errno = e;
		return e ? -1 : 0;
	}
	if (!o->tmp) {
		if (o->f != stdout)
			return 0; /* committed or aborted already */
		int bad = fflush(stdout) != 0 || ferror(stdout);
		o->f = NULL;
		if (bad) {
			snprintf(err, errlen, "cannot write to standard output: %s",
				 strerror(errno ? errno : EIO));
			return -1;
		}
		return 0;
	}
	int e = 0;
	if (o->f) {
		if (fflush(o->f) != 0 || ferror(o->f))
			e = errno ? errno : EIO;
	}
	if (!e && (o->flags & HT_OUT_SYNC) && fsync(o->fd) != 0)
		e = errno;
	int c = o->f ? fclose(o->f) : close(o->fd);
	if (c != 0 && !e)
		e = errno ? errno : EIO;
	o->f = NULL;
	o->fd = -1;
	if (!e) {
		/* no signal between the rename and the registry's forgetting
		 * the name: a file of that name afterwards is not ours */
		sigset_t block, old;
		fatal_set(&block);
		pthread_sigmask(SIG_BLOCK, &block, &old);
		if (rename(o->tmp, o->path) != 0)
			e = errno;
		else
			reg_del(o->slot);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (!e) {
			o->slot = -1;
			free(o->tmp);
			o->tmp = NULL;
			free(o->path);
			o->path = NULL;
			return 0;
		}
	}
	snprintf(err, errlen, "cannot write %s: %s", shown(o->path, sbuf, sizeof(sbuf)),
		 strerror(e));
	ht_out__abort(o);
	errno = e;
	return -1;
}

void ht_out__abort(struct ht_out *o)
{
	if (o->direct) {
		close_direct(o);
		return;
	}
	if (o->f && o->f != stdout)
		fclose(o->f);
	else if (!o->f && o->fd >= 0 && o->tmp)
		close(o->fd);
	o->f = NULL;
	o->fd = -1;
	if (o->tmp) {
		unlink(o->tmp);
		reg_del(o->slot);
		o->slot = -1;
		free(o->tmp);
		o->tmp = NULL;
	}
	free(o->path);
	o->path = NULL;
}
