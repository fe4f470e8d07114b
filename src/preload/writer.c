/* The background writer: every flush interval (or on request) it drains the
 * hand-off queue and the committed part of every live thread's buffer,
 * compresses each piece into a chunk and appends it to the trace.
 *
 * By default the writer is a helper process (HEAPTRAIL_WRITER=process): a
 * fork of the traced process made with a raw clone() that sends no SIGCHLD
 * (wait() in the program never sees it), sharing the buffers through the
 * MAP_SHARED mapping of buffer.c.  The traced process then keeps a single
 * thread if it had one, so glibc's malloc keeps its single-thread fast
 * path, and when the process dies (kill -9, _exit, a crash) the helper
 * still writes every event it committed and closes the file.  The helper
 * uses no libc lock and no malloc: it may have been cloned while another
 * thread held one.  HEAPTRAIL_WRITER=thread (or a failed clone) runs the
 * same loop in a thread instead.  Where no writer runs (a fork child before
 * its first event, or the helper died) the same round runs inline in the
 * calling thread.
 *
 * The trace file is flock()ed (exclusive) from creation until the writer
 * has closed it, so that a reader can wait for a helper that is still
 * writing after the program ended (ht_trace__wait_writer). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_createCCtx_advanced: no malloc */
#include <zstd.h>

#include "../common/pidpath.h"
#include "../common/procstat.h"
#include "../common/readsmall.h"
#include "../common/shellword.h"
#include "../common/zstored.h"
#include "cpujudge.h"
#include "preload.h"

/* RSS samples taken between flush rounds (HEAPTRAIL_RSS_INTERVAL) wait in
 * the writer's state and go out as one CLOCK chunk at the next round, or
 * when this many have gathered. */
#define HT_RSS_BATCH 256
_Static_assert(HT_RSS_BATCH <= HT_MAX_CLOCK_SAMPLES, "readers take at most this many");

enum { RB_WRITER = 1, RB_PROGRAM = 2 };

enum {
	REQ_SYNC = 1,       /* flush now */
	REQ_CLOSE = 2,      /* final flush, index, header; then exit */
	REQ_FINALIZE = 4,   /* index and header, but go on (before exec) */
	REQ_REOPEN = 8,     /* exec failed: mark the file open again */
	REQ_DATA = 16,      /* a full buffer is waiting */
	REQ_EXIT = 32,      /* the helper ends after this round (exec) */
	REQ_ORPHAN = 64,    /* with REQ_CLOSE: the traced process is gone */
};

/* The writer's state, in the shared mapping (ht_buf__writer_area): the
 * helper, an inline round in the process and a later helper all see it. */
struct wstate {
	int inited;              /* set up (the mapping starts zeroed) */
	int fd;                  /* trace file, -1 before open / after error */
	char path[4200];         /* its name */
	uint64_t off;            /* bytes written */
	struct ht_file_header hdr; /* as written at offset 0 */
	size_t nindex;           /* chunks in the index */
	int index_full;          /* more chunks than the index holds: no index */
	uint64_t events;         /* events written */
	uint32_t tids[4096];     /* distinct thread ids seen (for nthreads) */
	uint32_t ntids;          /* entries in tids (saturates) */
	uint64_t rounds;         /* flush rounds done */
	dev_t dev;               /* identity of the trace file, to notice */
	ino_t ino;               /* that the program closed or reused w.fd */
	int failed;              /* a write failed: recording stopped (2: and said so) */
	int fail_errno;          /* errno of that write */
	const char *fail_what;   /* what was being written (a literal) */
	int closed;              /* REQ_CLOSE done */
	int lingering;           /* the helper stays after the close until the
				  * program is gone (count_to_the_end) */
	_Atomic uint32_t req_word;    /* pending REQ_* bits; futex word */
	_Atomic uint32_t req_ticket;  /* requests made */
	_Atomic uint32_t done_ticket; /* requests served; futex word */
	_Atomic int writer_waiting;   /* the writer sleeps on req_word */
	_Atomic int running;          /* a writer (helper or thread) is alive */
	_Atomic int round_busy;       /* a round is being done: RB_WRITER by the writer
				       * (helper or thread), RB_PROGRAM by a thread of
				       * the program (self_drain, inline_round) */
	_Atomic uint32_t queued;      /* buffers handed over so far */
	uint32_t drained;             /* of them, taken off the queue (wraps with queued) */
	_Atomic int cpu_busy;         /* the helper judged that no CPU is free for it
				       * (cpu_free): the threads write the full
				       * buffers themselves, raw (self_drain) */
	_Atomic uint64_t cpu_judged_at; /* when the helper last judged (ht_mono_ns): the
					 * threads act on a fresh judgement only */
	_Atomic uint64_t self_off_until; /* ... but not before this (ht_mono_ns): a
					  * thread's write stalled */
	struct ht_clock_sample rss[HT_RSS_BATCH]; /* interval samples not written yet */
	uint32_t nrss;           /* entries in rss */
	/* The chunk being written, for a writer that takes over from a
	 * helper killed in the middle of it (tx_recover): */
	_Atomic int tx;          /* 0: none; TX_WRITING: begun; TX_WRITTEN: in
				  * the file and the index, its buffer's
				  * taken not yet moved on */
	uint64_t tx_off;         /* where it begins: the file's end before it */
	size_t tx_nindex;        /* nindex before it */
	uint64_t tx_events;      /* events before it */
	struct ht_buf *tx_buf;   /* the buffer it drains (NULL: not events) */
	uint32_t tx_taken;       /* that buffer's taken once it is written */
	uint32_t tx_taken_events; /* and its taken_events */
	struct ht_buf *_Atomic inflight; /* a handed-over buffer taken off the
					  * queue and not yet given back */
};
_Static_assert(sizeof(struct wstate) <= HT_WRITER_AREA, "writer state too large");

static struct wstate *ws;              /* in the shared mapping; NULL before it */
static struct ht_index_entry *windex;  /* the chunk index, after the state */
static size_t index_cap;               /* entries it holds */
#define w (*ws)

/* Per process (and per helper, which has its own copies). */
static ZSTD_CCtx *zc;             /* compression context (writer only) */
static uint8_t *zbuf;             /* compression output */
static size_t zcap;               /* its size */
static int child_needs_writer;    /* fork child: start a writer on first event */
static int child_disabled;        /* fork child that is not followed */
static pthread_t writer_thread;   /* the writer thread, if that is the writer */
static pid_t helper_pid;          /* the helper process, if that is the writer */
static int helper_lost;           /* the helper died on its own: threads write inline */
static int helper_lost_said;      /* ... and the program said so */
static pid_t parent_pid;          /* in the helper: the traced process */
static int linger_fd = -1;        /* in the helper: the trace, kept after the close
				   * for the count at the program's end */
static int proc_fd = -1;          /* the traced process's descriptor of the file */
static int statm_fd = -1;         /* /proc/PID/statm of the traced process, kept open */
static pid_t statm_pid;           /* the PID it belongs to */
static dev_t statm_dev;           /* its identity, to notice that the program */
static ino_t statm_ino;           /* closed it and reused the number */

/* Maps the writer's state; 0 when it is there. */
static int attach(void)
{
	if (ws)
		return 0;
	size_t ib;
	void *a = ht_buf__writer_area(&ib);
	if (!a) {
		if (ht_buf__pool_init() < 0)
			return -1;
		a = ht_buf__writer_area(&ib);
	}
	ws = a;
	windex = (struct ht_index_entry *)((uint8_t *)a + HT_WRITER_AREA);
	index_cap = ib / sizeof(*windex);
	if (!w.inited) {
		w.fd = -1;
		w.inited = 1;
	}
	return 0;
}

/* zstd's memory, from mmap: the helper must not call malloc. */
static void *z_alloc(void *opaque, size_t n)
{
	(void)opaque;
	size_t total = n + 16;
	uint8_t *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	memcpy(p, &total, sizeof(total));
	return p + 16;
}

static void z_free(void *opaque, void *q)
{
	(void)opaque;
	if (!q)
		return;
	uint8_t *p = (uint8_t *)q - 16;
	size_t total;
	memcpy(&total, p, sizeof(total));
	munmap(p, total);
}

static const char *errstr(int e)
{
	const char *d = strerrordesc_np(e); /* no locale, no lock */
	return d ? d : "unknown error";
}

/* Shared (not _PRIVATE) futexes: the waiter may be another process. */
static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

/* ---- the file ------------------------------------------------------------ */

static __thread int draining_in_program; /* self_drain: check the descriptor per buffer */

/* The program closed or replaced (through close, dup2, dup3, close_range,
 * closefrom: hooks.c) the number of the trace's descriptor in the table
 * its threads share: they no longer write through it (self_drain), the
 * helper, whose table is its own, writes everything.  Set before the
 * program's call is made, and that call waits for a write under way
 * (round_busy held by RB_PROGRAM): with fd_is_ours alone, checked before
 * each buffer, a dup2() between the check and the write put trace bytes
 * into the program's file.  Process-local: each process its own table. */
static _Atomic int fd_taken;

/* A thread of the program found the trace's number taken from it behind
 * the wrapped calls (a raw system call: syscall(SYS_dup2, ...)) after or
 * in a write of its own: the chunk it was writing is left half-done, with
 * its buffer in flight, for the helper to cut off the file and write again
 * from the buffer (tx_recover), as after a helper killed in a write; the
 * thread writes nothing more, not even to cut it (the number is not the
 * trace's: a cut there truncates the program's file). */
static __thread int self_abandoned;

static int fd_is_ours(int fd);

/* In self_drain: the trace's number is still the trace's, else the
 * program replaced it behind the wrapped calls, and its threads stop
 * writing through it for good. */
static int self_fd_ours(void)
{
	if (fd_is_ours(w.fd))
		return 1;
	atomic_store(&fd_taken, 1);
	return 0;
}

/* pwrite, but a write at or past RLIMIT_FSIZE fails with EFBIG as the
 * kernel's would, without the SIGXFSZ the kernel sends the writing thread:
 * that may be the program's (self_drain, the close at its exit), and its
 * own SIGXFSZ handler ran for the trace's file (probe T).  (A write that
 * crosses the limit is cut short there by the kernel, with no signal.) */
static ssize_t pwrite_at(int fd, const void *p, size_t n, off_t off)
{
	struct rlimit rl;
	if (ht_raw_syscall(SYS_prlimit64, 0, RLIMIT_FSIZE, 0, (long)&rl, 0, 0) == 0 &&
	    rl.rlim_cur != RLIM_INFINITY && (uint64_t)off >= rl.rlim_cur) {
		errno = EFBIG;
		return -1;
	}
	return ht_sys_pwrite(fd, p, n, off);
}

static int write_all(const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n) {
		/* at w.off, not the descriptor's offset: the helper and the
		 * program's threads both write (self_drain), and the helper
		 * may have reopened the file for itself (check_fd) */
		ssize_t r = pwrite_at(w.fd, p, n, (off_t)w.off);
		if (r < 0 && errno == EINTR)
			continue;
		/* (checked after each write too: it may have gone to the file
		 * put there meanwhile, and then the trace lacks it) */
		if (draining_in_program && (r <= 0 || !fd_is_ours(w.fd))) {
			atomic_store(&fd_taken, 1);
			self_abandoned = 1;
			errno = EBADF;
			return -1;
		}
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
		w.off += (uint64_t)r;
	}
	return 0;
}

static int in_helper; /* this is the helper process: it has no stderr */
static __thread int in_writer_thread; /* the writer thread: its descriptor table is its own,
				       * without stderr (own_fd_table) */

static void fail(const char *what)
{
	if (w.failed)
		return;
	w.fail_errno = errno;
	w.fail_what = what;
	w.failed = 1;
	atomic_store(&ht_on, 0);
	w.hdr.flags |= HT_FILE_F_DISK_FULL;
	if (w.fd >= 0) {
		ssize_t r = pwrite_at(w.fd, &w.hdr, sizeof(w.hdr), 0); /* best effort */
		(void)r;
	}
	if (!in_helper && !in_writer_thread)
		ht_writer__report_failure();
	/* (else a program thread says it, at its next buffer or at the end:
	 * the writer thread wrote the line into a table without stderr) */
}

/* A file name for a message: one shell word (common/shellword.h), as
 * record names it, so that it pastes as one argument (a name with a space
 * or a quote was shown bare).  ht_msg keeps 512 bytes of a line: as many
 * of the word. */
#define MSG_WORD 512
static const char *msg_word(char buf[MSG_WORD], const char *path)
{
	return ht_shell_word(buf, MSG_WORD, path);
}

/* The one warning about a failed write, from the traced process (the
 * helper process that failed has no stderr): at the next buffer hand-over
 * or at close.  Recording stops in the traced process too. */
void ht_writer__report_failure(void)
{
	int one = 1;
	if (!ws || w.failed != 1 || !__atomic_compare_exchange_n(&w.failed, &one, 2, 0,
								  __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		return;
	atomic_store(&ht_on, 0);
	char word[MSG_WORD];
	ht_msg("cannot write %s (%s: %s); recording stopped, the program goes on",
	       msg_word(word, w.path), w.fail_what, errstr(w.fail_errno));
}

/* What is at path, which exists (its creation failed with EEXIST):
 *  0: a finished trace of ours, a regular file of this user that no writer
 *     holds; *fdp is open on it with its lock taken (no other recorder
 *     starting now can take it too) and path still names it;
 *  1: a trace being written: its writer holds the flock (below), the
 *     recording is alive; never touched;
 *  3: a finished trace another heaptrail command holds the lock of
 *     (compact rewriting it, a record finishing it): never touched;
 *  2: gone meanwhile: create it again;
 * -1: not a file of ours (a symlink, another user's, not a regular file);
 * -2: a regular file of ours that is not a trace. */
static int probe_existing(const char *path, int *fdp)
{
	*fdp = -1;
	for (int tries = 0; tries < 100; tries++) {
		struct stat st, fst;
		if (lstat(path, &st) < 0)
			return errno == ENOENT ? 2 : -1;
		if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
			return -1;
		int fd = ht_sys_open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			return errno == ENOENT ? 2 : -1;
		if (fstat(fd, &fst) < 0 || fst.st_dev != st.st_dev || fst.st_ino != st.st_ino) {
			ht_sys_close(fd);
			continue; /* replaced meanwhile: look again */
		}
		if (!ht_file_is_trace(fd, (uint64_t)fst.st_size)) {
			ht_sys_close(fd);
			return -2;
		}
		/* A writer holds LOCK_EX; readers (stats, a record waiting for
		 * its trace) take LOCK_SH for a moment only.  A file system
		 * without locks (some network ones) tells nothing: finished. */
		if (flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
			uint64_t flags = 0;
			int closed = ht_sys_pread(fd, &flags, sizeof(flags),
						  offsetof(struct ht_file_header, flags)) ==
					     (ssize_t)sizeof(flags) &&
				     (flags & HT_FILE_F_CLOSED);
			ht_sys_close(fd);
			return closed ? 3 : 1;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK) {
			*fdp = fd;
			return 0;
		}
		ht_sys_close(fd);
		struct timespec ts = {0, 1000000};
		ht_sys_nanosleep(&ts, NULL);
	}
	return 1;
}

/* What is at path.old, which keep_as_old would not replace, for a
 * message: "a symbolic link", "a directory", ... */
static const char *old_what(const char *path)
{
	char old[sizeof(w.path) + 8];
	snprintf(old, sizeof(old), "%s.old", path);
	struct stat st;
	if (lstat(old, &st) < 0)
		return "a file that could not be replaced";
	if (S_ISLNK(st.st_mode))
		return "a symbolic link";
	if (S_ISDIR(st.st_mode))
		return "a directory";
	if (!S_ISREG(st.st_mode))
		return "not a regular file";
	if (st.st_uid != geteuid())
		return "another user's file";
	return "a trace in use by another recording or heaptrail command";
}

/* Renames the finished trace at path (open on fd, locked) to path.old,
 * like perf's perf.data.old: replacing an older .old only if that is a
 * finished trace of ours too (never a symlink, another user's file, a file
 * that is not a trace, nor a trace being written).  0 when path is free,
 * -2 if path.old is a file of ours that is not a trace, else -1. */
static int keep_as_old(const char *path, int fd)
{
	char old[sizeof(w.path) + 8];
	snprintf(old, sizeof(old), "%s.old", path);
	int ofd = -1, r = probe_existing(old, &ofd);
	if (r != 0 && r != 2) /* 2: there is none */
		return r == -2 ? -2 : -1;
	/* path must still be the file fd holds: not replaced meanwhile */
	struct stat a, b;
	int ok = fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev &&
		 a.st_ino == b.st_ino && rename(path, old) == 0;
	if (ofd >= 0)
		ht_sys_close(ofd);
	return ok ? 0 : -1;
}

/* Creates the file without following a planted symlink (O_EXCL|O_NOFOLLOW),
 * mode 0600, and takes its lock.  The first image of the traced program
 * takes the name itself; if a finished trace of ours is there, it is kept
 * as NAME.old (keep_as_old); if another recording is writing it (its
 * writer holds the lock), that file is never touched: this one writes
 * NAME.PID (NAME.PID.2, ...) and says so.  Every other process (fork children, exec'ed images) gets
 * NAME.PID, NAME.PID.2, ... */
/* An unnamed file in the directory of path (O_TMPFILE), to be given its
 * name once its header is in it, so that no trace is ever seen without
 * one (a program killed between the two left an empty file); -1 where
 * the file system has no unnamed files. */
static int open_unnamed(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	return ht_sys_open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
}

/* Creates path as open(O_CREAT | O_EXCL | O_NOFOLLOW) does (EEXIST if
 * anything, a symlink included, is there): by naming the unnamed file
 * unnamed when there is one, else by creating an empty file. */
static int create_named(const char *path, int unnamed)
{
	if (unnamed >= 0) {
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", unnamed);
		if (linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0)
			return unnamed;
		if (errno == EEXIST)
			return -1;
		/* no /proc, or the link refused: an empty file, as before */
	}
	return ht_sys_open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* The trace file, with its header when unnamed >= 0 holds one (then the
 * descriptor returned is unnamed's if it got the name). */
static int open_output(int unnamed)
{
	pid_t pid = ht_self_pid();
	char base[4096], word[MSG_WORD];
	int had_pid = ht_pidpath_expand(base, sizeof(base), ht_opt.out, pid);
	if (had_pid < 0) {
		/* never cut to another name */
		ht_msg("the output path %.40s... is too long (at most %d bytes once %%p is "
		       "expanded); recording nothing: choose a shorter one",
		       ht_opt.out, HT_PIDPATH_MAX);
		errno = ENAMETOOLONG;
		return -1;
	}
	int own_name = ht_is_root_image() || had_pid;
	int diverted = 0, refused = 0, looks = 0, held = -1, kept;
	for (int attempt = 0; attempt < 100; attempt++) {
		if (own_name)
			snprintf(w.path, sizeof(w.path), attempt ? "%s.%d" : "%s", base, attempt + 1);
		else
			snprintf(w.path, sizeof(w.path), attempt ? "%s.%d.%d" : "%s.%d", base,
				 (int)pid, attempt + 1);
		int fd = create_named(w.path, unnamed);
		if (fd >= 0) {
			/* Held (through every copy of the descriptor) until the
			 * writer has closed the file: readers wait on it
			 * (ht_trace__wait_writer), recorders keep off it.  The
			 * old trace's lock is let go only now. */
			flock(fd, LOCK_EX | LOCK_NB);
			if (held >= 0)
				ht_sys_close(held);
			if (diverted) {
				char was[MSG_WORD], now[MSG_WORD];
				msg_word(was, base);
				msg_word(now, w.path);
				if (diverted == 1)
					ht_msg("%s is being written by another recording; this one "
					       "writes %s",
					       was, now);
				else if (diverted == 4)
					ht_msg("%s is a finished trace that another heaptrail "
					       "command is using (compact rewriting it, or a record "
					       "finishing it); this recording writes %s",
					       was, now);
				else if (diverted == 3)
					ht_msg("%s.old is not a trace (a file of yours heaptrail "
					       "does not replace): %s stays as it is and this "
					       "recording writes %s",
					       was, was, now);
				else
					ht_msg("%s.old is %s, which heaptrail does not replace: %s "
					       "stays as it is and this recording writes %s",
					       was, old_what(base), was, now);
				/* its children and later images name theirs after it */
				size_t len = strlen(w.path);
				if (len < sizeof(ht_opt.out))
					memcpy(ht_opt.out, w.path, len + 1);
			}
			return fd;
		}
		if (errno != EEXIST)
			break;
		if (!own_name || attempt > 0)
			continue; /* a sibling's file: take the next suffix */
		int old, probed = probe_existing(w.path, &old);
		switch (probed) {
		case 0: /* a finished trace of ours: kept as NAME.old */
			if ((kept = keep_as_old(w.path, old)) < 0) {
				ht_sys_close(old);
				own_name = 0;
				diverted = kept == -2 ? 3 : 2;
				attempt = -1;
				continue;
			}
			if (held >= 0)
				ht_sys_close(held);
			held = old;
			/* fallthrough */
		case 2:
			if (++looks < 10)
				attempt--;
			continue;
		case 1: /* a live recording's: NAME.PID, as a child would */
		case 3: /* held by compact, or a record's end step: the same */
			own_name = 0;
			diverted = probed == 3 ? 4 : 1;
			attempt = -1;
			continue;
		case -2:
			ht_msg("%s exists and is not a heaptrail trace; not moving nor "
			       "overwriting it: choose another output path, or remove it",
			       msg_word(word, w.path));
			refused = 1;
			break;
		}
		if (refused)
			break;
		struct stat lst;
		if (lstat(w.path, &lst) == 0 && S_ISLNK(lst.st_mode))
			ht_msg("%s is a symbolic link; heaptrail does not write through symlinks "
			       "(remove it or choose another output path)",
			       msg_word(word, w.path));
		else if (S_ISREG(lst.st_mode) && lst.st_uid != geteuid() && ht_image_index() > 0)
			/* (the traced process changed user, then exec'd: the
			 * trace its earlier image wrote is not this user's) */
			ht_msg("%s belongs to uid %u, and this process now runs as uid %u (it "
			       "changed user, then exec'd %s): this image runs untraced",
			       msg_word(word, w.path), (unsigned)lst.st_uid, (unsigned)geteuid(),
			       program_invocation_name);
		else
			ht_msg("%s exists and is not a file of ours (a directory, or another "
			       "user's); not overwriting it: choose another output path",
			       msg_word(word, w.path));
		refused = 1;
		break;
	}
	int e = errno;
	if (held >= 0)
		ht_sys_close(held);
	if (!refused)
		ht_msg("cannot create the trace file %s: %s", msg_word(word, w.path), errstr(e));
	return -1;
}

/* Field 47 of /proc/self/stat: the address where the heap begins. */
static uint64_t start_brk(void)
{
	char buf[1024];
	size_t n = ht_read_small("/proc/self/stat", buf, sizeof(buf) - 1);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	int field = 2;
	for (; *p && field < 47; p++)
		if (*p == ' ')
			field++;
	return strtoull(p, NULL, 10);
}

/* This process is a fork child of the traced program (its trace says so). */
static int forked_child;

int ht_writer__forked_child(void)
{
	return forked_child;
}

/* Header flags noted before the file's header was made (and for a fork
 * child's file, what the parent noted): ht_writer__add_flag. */
static _Atomic uint64_t noted_flags;

void ht_writer__add_flag(uint64_t flag)
{
	atomic_fetch_or(&noted_flags, flag);
	if (ws) /* (the state is shared with the writer process: an atomic or) */
		__atomic_fetch_or(&w.hdr.flags, flag, __ATOMIC_SEQ_CST);
}

static int write_header(void)
{
	static char cmdline[8192];
	static size_t ncmd_before; /* what the process's first header read */
	static char exe[PATH_MAX];
	/* (a fork child at its limit of descriptors cannot open it: the
	 * parent's, read before the fork, is its own command too; its trace
	 * named none, probe T) */
	size_t ncmd = ht_read_small("/proc/self/cmdline", cmdline, sizeof(cmdline));
	if (!ncmd)
		ncmd = ncmd_before;
	ncmd_before = ncmd;
	ssize_t nexe = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (nexe < 0)
		nexe = 0;
	exe[nexe] = 0;
	struct ht_file_header *h = &w.hdr;
	uint64_t flags = HT_FILE_F_ORDERED | (ht_opt.use_tsc ? HT_FILE_F_TSC : 0) |
			 (ht_opt.sample_bytes ? HT_FILE_F_SAMPLED : 0) |
			 (ht_opt.durations ? HT_FILE_F_DURATIONS : 0) |
			 (forked_child ? HT_FILE_F_FORK_CHILD : 0) | atomic_load(&noted_flags);
	const char *alloc = ht_alloc__path(); /* (another allocator than glibc's) */
	size_t nalloc = alloc ? strlen(alloc) + 1 : 0;
	if (alloc)
		flags |= HT_FILE_F_OTHER_ALLOCATOR;
	ht_file_header__init(h, flags, (int32_t)ht_self_pid(), (int32_t)getppid(), ncmd,
			     (uint64_t)nexe + 1);
	if (alloc)
		ht_file_header__add(h, HT_SEC_ALLOCATOR, nalloc);
	h->sample_bytes = (uint32_t)ht_opt.sample_bytes;
	struct timespec rt;
	ht_clock_gettime(CLOCK_REALTIME, &rt);
	h->start_realtime_ns = ht_ts_ns(&rt);
	h->start_mono_ns = ht_mono_ns();
	h->start_ts = ht_now();
	h->ts_hz = ht_opt.use_tsc ? 0 : 1000000000u; /* TSC: fitted by readers */
	h->start_brk = start_brk();
	h->stack_depth = (uint32_t)ht_opt.stack_depth; /* (capped by the options' table) */
	w.off = 0;
	if (write_all(h, sizeof(*h)) < 0 || write_all(cmdline, ncmd) < 0 ||
	    write_all(exe, (size_t)nexe + 1) < 0 || (alloc && write_all(alloc, nalloc) < 0))
		return -1;
	return 0;
}

/* The lowest descriptor the trace file is moved to: programs take low
 * numbers for themselves (dup2(x, 3) in shells and spawners). */
#define HT_FD_MIN 1000

/* Moves fd out of the way of the program if the limit allows it. */
static int fd_move_high(int fd)
{
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, HT_FD_MIN);
	if (hi < 0)
		return fd;
	ht_sys_close(fd);
	return hi;
}

static int fd_is_ours(int fd)
{
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == w.dev && st.st_ino == w.ino;
}

/* The program may close every descriptor it does not know (daemons,
 * close_range() before exec) and open its own files, which then get the
 * number of ours.  Checked before each round writes: if w.fd is no longer
 * our file, reopen it by name (the same file, or recording stops) and never
 * write to what the program has put in its place. */
static int check_fd(void)
{
	if (w.fd < 0 || w.failed || fd_is_ours(w.fd))
		return w.fd >= 0 && !w.failed ? 0 : -1;
	w.fd = -1; /* not ours any more: never touch it */
	int fd = ht_sys_open(w.path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && fd_is_ours(fd) && lseek(fd, (off_t)w.off, SEEK_SET) == (off_t)w.off) {
		w.fd = fd_move_high(fd);
		static int said; /* once: a program may close it in a loop */
		char word[MSG_WORD];
		if (!said++)
			ht_msg("the program closed the trace file's descriptor; reopened %s",
			       msg_word(word, w.path));
		return 0;
	}
	if (fd >= 0)
		ht_sys_close(fd);
	errno = EBADF;
	fail("the program closed its descriptor and the file could not be reopened");
	return -1;
}

static int open_file(void)
{
	/* the header first, in an unnamed file of the trace's directory */
	char base[4096];
	int unnamed = -1; /* (a path too long: open_output says so) */
	if (ht_pidpath_expand(base, sizeof(base), ht_opt.out, ht_self_pid()) >= 0)
		unnamed = open_unnamed(base);
	if (unnamed >= 0) {
		/* locked before it has a name: a reader that finds the name
		 * (record --live polls for it) must never see a trace with a
		 * header and no writer, which reads as one whose writer died */
		flock(unnamed, LOCK_EX | LOCK_NB);
		w.fd = unnamed;
		if (write_header() < 0) {
			int e = errno;
			ht_sys_close(unnamed);
			unnamed = -1;
			/* no room for the header: a named file would get no more
			 * (it was left there, empty, which readers take for no
			 * trace at all) */
			if (e == ENOSPC || e == EDQUOT || e == EFBIG) {
				w.fd = -1;
				snprintf(w.path, sizeof(w.path), "%s", base); /* (for the message) */
				errno = e;
				fail("header");
				return -1;
			}
		}
	}
	int fd = open_output(unnamed);
	if (unnamed >= 0 && fd != unnamed)
		ht_sys_close(unnamed);
	if (fd < 0)
		return -1;
	int has_header = fd == unnamed;
	w.fd = fd_move_high(fd);
	proc_fd = w.fd;
	struct stat st;
	if (fstat(w.fd, &st) == 0) {
		w.dev = st.st_dev;
		w.ino = st.st_ino;
	}
	if (!has_header && write_header() < 0) {
		fail("header");
		return -1;
	}
	return 0;
}

/* ---- chunks -------------------------------------------------------------- */

static void add_index(const struct ht_chunk_header *c, uint64_t offset)
{
	if (w.nindex == index_cap) {
		w.index_full = 1; /* readers scan the chunks instead */
		return;
	}
	struct ht_index_entry *e = &windex[w.nindex++];
	memset(e, 0, sizeof(*e));
	e->offset = offset;
	e->tid = c->tid;
	e->nevents = c->nevents;
	e->first_seq = c->first_seq;
	e->type = c->type;
	e->flags = c->flags;
}

/* A chunk is written as one step that a writer taking over from a killed
 * helper can undo or finish (tx_recover): begun (the file's end, the index
 * and the event count noted), written (chunk and index entry in; for
 * events, the buffer's new taken noted), ended (the buffer's taken moved
 * on).  The helper can be killed at any instruction: before, a chunk cut
 * in the middle stayed in the file, and the next one written after it made
 * the rest of the trace unreadable. */
enum { TX_WRITING = 1, TX_WRITTEN = 2 };

static void tx_begin(struct ht_buf *b, uint32_t taken, uint32_t taken_events)
{
	w.tx_off = w.off;
	w.tx_nindex = w.nindex;
	w.tx_events = w.events;
	w.tx_buf = b;
	w.tx_taken = taken;
	w.tx_taken_events = taken_events;
	atomic_store_explicit(&w.tx, TX_WRITING, memory_order_release);
}

static void tx_set(int state)
{
	atomic_store_explicit(&w.tx, state, memory_order_release);
}

static void drain_buf(struct ht_buf *b, int compress);

/* Cuts the file back to off, a chunk begun there and not written whole,
 * and goes on writing from there: 0, or -1 (errno set). */
static int cut_back(uint64_t off)
{
	if (ftruncate(w.fd, (off_t)off) < 0 || lseek(w.fd, (off_t)off, SEEK_SET) != (off_t)off)
		return -1;
	w.off = off;
	return 0;
}

/* At the start of a round: the writer before this one (a helper, killed)
 * left a chunk half-written or a buffer half-handled.  A chunk begun and
 * not written whole is cut off the file (its events are written again
 * from their buffer); one written whole moves its buffer's taken on; a
 * buffer taken off the queue is drained and given back. */
static void tx_recover(void)
{
	int st = atomic_load_explicit(&w.tx, memory_order_acquire);
	if (st == TX_WRITING && w.fd >= 0 && !w.failed) {
		if (cut_back(w.tx_off) < 0)
			fail("write");
		w.off = w.tx_off;
		w.nindex = w.tx_nindex;
		w.events = w.tx_events;
	} else if (st == TX_WRITTEN && w.tx_buf) {
		w.tx_buf->taken = w.tx_taken;
		w.tx_buf->taken_events = w.tx_taken_events;
	}
	tx_set(0);
	struct ht_buf *b = atomic_exchange(&w.inflight, NULL);
	if (b) {
		drain_buf(b, 0);
		ht_buf__put(b);
	}
}

/* zbuf holding at least n bytes (its contents not kept); 0 out of memory. */
static int zbuf_reserve(size_t n)
{
	if (n > zcap) {
		z_free(NULL, zbuf);
		zbuf = z_alloc(NULL, n);
		zcap = zbuf ? n : 0;
	}
	return zbuf != NULL;
}

static void write_chunk(struct ht_chunk_header *c, const void *payload, size_t n, int compress)
{
	if (w.fd < 0 || w.failed)
		return;
#ifdef HT_DISCARD
	if (c->type == HT_CHUNK_EVENTS)
		return;
#endif
	int own_tx = atomic_load_explicit(&w.tx, memory_order_relaxed) == 0;
	if (own_tx)
		tx_begin(NULL, 0, 0);
	c->magic = HT_CHUNK_MAGIC;
	c->raw_size = (uint32_t)n;
	const void *data = payload;
	size_t len = n;
	if (compress && zc) {
		if (zbuf_reserve(ZSTD_compressBound(n))) {
			size_t r = ZSTD_compress2(zc, zbuf, zcap, payload, n);
			if (!ZSTD_isError(r) && r < n) {
				data = zbuf;
				len = r;
				c->flags |= HT_CHUNK_F_ZSTD;
			}
		}
	}
	if (data == payload && c->type == HT_CHUNK_EVENTS && ht_zstored_size(n) <= HT_MAX_CHUNK_RAW) {
		/* Not compressed (no CPU for it, or --zstd-level=0): a stored
		 * frame, whose checksum a damaged byte fails, where the bare
		 * records let it change the figures silently (zstored.h). */
		if (zbuf_reserve(ht_zstored_size(n))) {
			len = ht_zstored_write(zbuf, payload, n);
			data = zbuf;
			c->flags |= HT_CHUNK_F_ZSTD | HT_CHUNK_F_STORED;
		}
	}
	c->comp_size = (uint32_t)len;
	uint64_t at = w.off;
	if (write_all(c, sizeof(*c)) < 0 || write_all(data, len) < 0) {
		if (self_abandoned)
			return; /* (the helper cuts it: tx_recover) */
		/* the chunk begun is cut off the file (shrinking it works on a
		 * full disk): the trace ends at its last whole chunk, and reads
		 * as stopped, not as cut short */
		int e = errno;
		cut_back(at);
		errno = e;
		fail("write");
		if (own_tx)
			tx_set(0);
		return;
	}
	add_index(c, at);
	if (own_tx)
		tx_set(0);
}

static void note_tid(uint32_t tid)
{
	for (uint32_t i = 0; i < w.ntids; i++)
		if (w.tids[i] == tid)
			return;
	if (w.ntids < sizeof(w.tids) / sizeof(w.tids[0]))
		w.tids[w.ntids++] = tid;
}

/* Writes what the owner has committed to b and not been written yet,
 * compressed if compress (and a level is set). */
static void drain_buf(struct ht_buf *b, int compress)
{
	uint64_t c = atomic_load_explicit(&b->commit, memory_order_acquire);
	uint32_t bytes = (uint32_t)(c & HT_COMMIT_MASK);
	uint32_t nev = (uint32_t)(c >> HT_COMMIT_SHIFT);
	if (bytes <= b->taken)
		return;
	struct ht_chunk_header h;
	memset(&h, 0, sizeof(h));
	h.type = HT_CHUNK_EVENTS;
	h.flags = b->taken == 0 ? HT_CHUNK_F_SYNC : 0;
	h.tid = b->tid;
	h.first_seq = b->first_seq + b->taken_events;
	h.nevents = nev - b->taken_events;
	int tx = w.fd >= 0 && !w.failed;
	if (tx)
		tx_begin(b, bytes, nev);
	write_chunk(&h, b->data + b->taken, bytes - b->taken, compress);
	if (self_abandoned)
		return; /* (tx left begun, b in flight: the helper's) */
	w.events += h.nevents;
	note_tid(b->tid);
	if (tx)
		tx_set(TX_WRITTEN);
	b->taken = bytes;
	b->taken_events = nev;
	if (tx)
		tx_set(0);
}

/* The descriptor of /proc/PID/statm, opened once per traced process (a
 * fork child opens its own, the helper its own after closing the
 * program's descriptors); -1 if it cannot be opened.  Reading it again
 * from offset 0 gives the figures of that moment. */
static int statm_open(void)
{
	struct stat st;
	if (statm_fd >= 0 && statm_pid == (pid_t)w.hdr.pid && fstat(statm_fd, &st) == 0 &&
	    st.st_dev == statm_dev && st.st_ino == statm_ino)
		return statm_fd;
	/* Not ours any more (the program closed it, or a fork child holds
	 * its parent's): forget it without closing what may be the
	 * program's descriptor now. */
	statm_fd = -1;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/statm", (int)w.hdr.pid);
	int fd = ht_sys_open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	fd = fd_move_high(fd);
	if (fstat(fd, &st) < 0) {
		ht_sys_close(fd);
		return -1;
	}
	statm_fd = fd;
	statm_pid = (pid_t)w.hdr.pid;
	statm_dev = st.st_dev;
	statm_ino = st.st_ino;
	return fd;
}

/* Resident set size of the traced process in KiB, 0 if unknown.  No
 * stdio and no malloc: the helper may have been cloned while the
 * program held a libc lock. */
static uint64_t rss_kb(void)
{
	static uint64_t page_kb;
	int fd = statm_open();
	if (fd < 0)
		return 0;
	char buf[128];
	ssize_t n = ht_sys_pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* "size resident shared text lib data dt", in pages */
	const char *p = buf;
	while (*p >= '0' && *p <= '9')
		p++;
	if (*p++ != ' ' || *p < '0' || *p > '9')
		return 0;
	uint64_t res = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		res = res * 10 + (uint64_t)(*p - '0');
	if (!page_kb)
		page_kb = (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
	return res * page_kb;
}

static void take_sample(struct ht_clock_sample *s)
{
	s->ts = ht_now();
	s->mono_ns = ht_mono_ns();
	s->rss_kb = rss_kb();
}

/* Writes the interval samples gathered since the last round. */
static void write_rss_batch(void)
{
	if (!w.nrss)
		return;
	struct ht_chunk_header h;
	memset(&h, 0, sizeof(h));
	h.type = HT_CHUNK_CLOCK;
	write_chunk(&h, w.rss, w.nrss * sizeof(w.rss[0]), 0);
	w.nrss = 0;
}

/* An interval sample between rounds (the caller holds round_busy). */
static void rss_sample(void)
{
	if (w.fd < 0 || w.failed || w.closed)
		return;
	take_sample(&w.rss[w.nrss++]);
	if (w.nrss == HT_RSS_BATCH && check_fd() == 0)
		write_rss_batch();
	w.nrss %= HT_RSS_BATCH; /* (a batch that could not be written is dropped) */
}

/* The round's own sample, after those gathered since the last round. */
static void clock_chunk(void)
{
	write_rss_batch();
	struct ht_clock_sample s;
	take_sample(&s);
	struct ht_chunk_header h;
	memset(&h, 0, sizeof(h));
	h.type = HT_CHUNK_CLOCK;
	write_chunk(&h, &s, sizeof(s), 0);
}

static int thread_gone(uint32_t tid)
{
	/* (a number of the recorder's own, where gettid() failed, names no
	 * thread of the kernel: ESRCH would take a live thread's buffer; such
	 * a thread's record ends with its exit destructor, or the process) */
	if (tid >= HT_SYNTH_TID)
		return 0;
	return syscall(SYS_tgkill, (pid_t)w.hdr.pid, (pid_t)tid, 0) < 0 && errno == ESRCH;
}

static void finalize(int orphan)
{
	if (w.fd < 0 || w.failed)
		return;
	w.hdr.sec[HT_SEC_CHUNKS].size = w.off - w.hdr.sec[HT_SEC_CHUNKS].offset;
	struct ht_chunk_header h;
	memset(&h, 0, sizeof(h));
	h.type = HT_CHUNK_INDEX;
	h.magic = HT_CHUNK_MAGIC;
	h.raw_size = h.comp_size = (uint32_t)(w.nindex * sizeof(*windex));
	uint64_t at = w.off;
	tx_begin(NULL, 0, 0); /* (the index and the header: written again if cut) */
	if (!w.index_full) {
		if (write_all(&h, sizeof(h)) < 0 || write_all(windex, h.raw_size) < 0) {
			/* No room for the index (a full disk): every event is
			 * in the file, so it is closed without one, as when
			 * the index overflows (readers go through the chunks
			 * in file order), the half-written index cut off the
			 * file.  Left there, the readers took it for a chunk
			 * cut short and the whole trace for a truncated one. */
			int e = errno;
			if (cut_back(at) < 0) {
				errno = e;
				fail("index");
				tx_set(0);
				return;
			}
		} else {
			w.hdr.sec[HT_SEC_INDEX].offset = at;
			w.hdr.sec[HT_SEC_INDEX].size = sizeof(h) + h.raw_size;
		}
	}
	w.hdr.flags |= HT_FILE_F_CLOSED | (orphan ? HT_FILE_F_ORPHANED : 0);
	w.hdr.end_ts = ht_now();
	w.hdr.end_mono_ns = ht_mono_ns();
	w.hdr.events = w.events;
	w.hdr.dropped = atomic_load(ht_dropped_p);
	w.hdr.nthreads = w.ntids;
	/* The helper's own CPU time: it is the program's child, so the kernel
	 * counts it among the program's children's (record tells the two
	 * apart: cmd_record.c, note_untraced_children). */
	struct timespec cpu;
	if (in_helper && clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu) == 0)
		w.hdr.writer_cpu_ns = (uint64_t)cpu.tv_sec * 1000000000u + (uint64_t)cpu.tv_nsec;
	if (pwrite_at(w.fd, &w.hdr, sizeof(w.hdr), 0) != (ssize_t)sizeof(w.hdr))
		fail("header");
	tx_set(0);
}

/* Reopens a finalized file for appending (exec failed): the index chunk
 * stays where it is and a later close writes a new one after it. */
static void unfinalize(void)
{
	if (w.fd < 0 || w.failed)
		return;
	w.hdr.flags &= ~(uint64_t)HT_FILE_F_CLOSED;
	w.hdr.sec[HT_SEC_INDEX].size = 0;
	w.hdr.sec[HT_SEC_INDEX].offset = 0;
	w.hdr.sec[HT_SEC_CHUNKS].size = 0;
	if (pwrite_at(w.fd, &w.hdr, sizeof(w.hdr), 0) != (ssize_t)sizeof(w.hdr))
		fail("header");
}

/* Compression while recording.  The writer compresses each chunk (zstd at
 * HEAPTRAIL_ZSTD_LEVEL, 1 by default) while it keeps up with the program,
 * and writes raw what it cannot: when more than HT_BACKLOG_BYTES of full
 * buffers wait, the oldest go out raw until the rest fits under it.  So
 * the program never waits on compression: its buffers come back at the
 * speed of a raw write, as before compression existed.  `heaptrail record`
 * compresses the raw chunks left when the program has ended
 * (ht_trace__finish).  Measured on bench/malloc_loop.c here: level 1 costs
 * the writer ~15 ns an event for 1.65 bytes an event (raw: ~4); a
 * one-thread loop makes an event every ~16 ns, so with a core of its own
 * the writer keeps up, nearly; with two program threads on two cores it
 * cannot, and does not take their CPU for long (bench/RESULTS.md). */
#define HT_BACKLOG_BYTES (4u << 20)
static int ncpus;                            /* CPUs the writer may run on */

/* CPU time the traced process's threads have used (ns; the writer
 * thread's own left out), 0 if unknown. */
static uint64_t program_cpu_ns(void)
{
	clockid_t clk;
	struct timespec ts;
	if (clock_getcpuclockid((pid_t)w.hdr.pid, &clk) != 0 || clock_gettime(clk, &ts) != 0)
		return 0;
	uint64_t ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (!in_helper && clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
		ns -= (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	return ns ? ns : 1;
}

/* The writer's own time on a CPU and waiting for one (ns, from
 * /proc/thread-self/schedstat): 1, or 0 if unknown. */
static int writer_sched(uint64_t *run, uint64_t *wait)
{
	char buf[96];
	size_t n = ht_read_small("/proc/thread-self/schedstat", buf, sizeof(buf) - 1);
	if (!n)
		return 0;
	buf[n] = 0;
	char *end;
	*run = strtoull(buf, &end, 10);
	if (*end != ' ')
		return 0;
	*wait = strtoull(end + 1, &end, 10);
	return *end == ' ' || *end == '\n';
}

/* Before the first 20 ms have passed (the program's CPU clock moves in
 * ticks: too coarse for less), the program is taken to fill the CPUs
 * when as many of its threads as there are CPUs each filled a buffer in
 * the last 2 ms (16,000 events of a malloc/free loop a thread: a thread
 * that makes them that fast is busy).  Without it the first 20 ms of a
 * two-thread loop were compressed beside it, on the CPU of one of its
 * threads: that thread ended several ms after the other.  The threads
 * whose buffers the helper wrote last, and when: */
#define HT_RECENT_TIDS 8
#define HT_RECENT_NS 2000000u
static struct {
	uint32_t tid;
	uint64_t at;
} recent[HT_RECENT_TIDS];

static void note_recent(uint32_t tid, uint64_t now)
{
	unsigned oldest = 0;
	for (unsigned i = 0; i < HT_RECENT_TIDS; i++) {
		if (recent[i].tid == tid) {
			recent[i].at = now;
			return;
		}
		if (recent[i].at < recent[oldest].at)
			oldest = i;
	}
	recent[oldest].tid = tid;
	recent[oldest].at = now;
}

static int busy_threads(uint64_t now)
{
	int n = 0;
	for (unsigned i = 0; i < HT_RECENT_TIDS; i++)
		n += recent[i].at && now - recent[i].at < HT_RECENT_NS;
	return n;
}

/* The helper's judgement, for the program's threads (self_write_now). */
static void publish_judgement(int ok, uint64_t now)
{
	if (!in_helper)
		return;
	atomic_store_explicit(&w.cpu_busy, !ok, memory_order_relaxed);
	atomic_store_explicit(&w.cpu_judged_at, now, memory_order_relaxed);
}

/* Whether a CPU is free for compressing, judged over the last 20 ms or
 * more: the program's threads used less than all CPUs but 0.9 of one (its
 * CPU-time clock, clock_getcpuclockid, readable from the helper), and the
 * writer did not wait for a CPU for more than a third of the time it ran
 * and a tenth of the time (someone else, another program, holds the CPU
 * the program leaves: a writer that compresses gets two thirds of a CPU
 * then, and waits half as long as it runs).
 * Compressing otherwise would take CPU from the program: with two busy
 * threads on two CPUs it made the loop 1.3-1.5 times slower than writing
 * raw; with one, and another program on the other CPU, the three would
 * share two CPUs.  The writer writes raw then, which costs it little, and
 * record's end step compresses those chunks on every CPU after the
 * program (measured on the loop with one thread and some load: 228 ms
 * for the whole record, against 275 ms with every chunk left to the end
 * step).
 * The judgement itself is cpu_judge() (cpujudge.h, where a test asks it). */
static int cpu_free(void)
{
	static int ok = 1, have_sched, judged;
	static uint64_t cpu0, wall0, run0, wait0;
	if (ncpus <= 0)
		return 1;
	uint64_t now = ht_mono_ns();
	if (wall0 && now - wall0 < HT_CPU_WINDOW_NS) {
		/* the first window, not judged yet: the threads that write */
		if (!judged) {
			ok = busy_threads(now) < ncpus;
			publish_judgement(ok, now);
		}
		return ok;
	}
	uint64_t cpu = program_cpu_ns(), run = 0, wait = 0;
	if (!cpu)
		return 1;
	int sched = writer_sched(&run, &wait);
	if (wall0 && cpu >= cpu0) {
		int timed = sched && have_sched && run >= run0 && wait >= wait0;
		ok = cpu_judge(ncpus, now - wall0, cpu - cpu0, timed, timed ? run - run0 : 0,
			       timed ? wait - wait0 : 0);
		judged = 1;
	} else if (!judged) {
		ok = busy_threads(now) < ncpus;
	}
	cpu0 = cpu;
	wall0 = now;
	run0 = run;
	wait0 = wait;
	have_sched = sched;
	publish_judgement(ok, now);
	return ok;
}

/* Writes the full buffers handed over, oldest first, each given back as
 * soon as it is written.  How many wait is the count of hand-overs
 * (w.queued) less the buffers this writer has written. */
static void drain_queue(void)
{
	int64_t limit = HT_BACKLOG_BYTES / (ht_opt.buffer_size ? ht_opt.buffer_size : 65536);
	struct ht_buf *b;
	/* (a thread of the program checks the descriptor before each buffer,
	 * and write_all after each write: a raw dup2() of the program's onto
	 * the number, which fd_taken's wrappers do not see, and what was
	 * checked once went into that file, for the whole queue) */
	while ((!draining_in_program || (!atomic_load(&fd_taken) && self_fd_ours())) &&
	       (b = ht_queue__pop()) != NULL) {
		w.drained++;
		if (in_helper && ncpus > 0)
			note_recent(b->tid, ht_mono_ns());
		/* (a thread's last buffer is handed over uncounted: never below 1) */
		int32_t behind = (int32_t)(atomic_load_explicit(&w.queued, memory_order_relaxed) - w.drained);
		int64_t waiting = behind > 0 ? (int64_t)behind + 1 : 1;
		atomic_store(&w.inflight, b);
		drain_buf(b, waiting <= limit && zc && cpu_free());
		if (self_abandoned)
			break; /* (b stays in flight, for the helper) */
		atomic_store(&w.inflight, NULL); /* (killed here: b is lost to the pool only) */
		ht_buf__put(b);
	}
}

/* What every round does first: the file open and still the trace's, and
 * what a killed writer before this one left half-done put right.  0 if
 * the round can go on. */
static int round_start(void)
{
	if (w.closed)
		return -1;
	if (w.fd < 0 && !w.failed && open_file() < 0) {
		w.failed = 2; /* open_output said why */
		atomic_store(&ht_on, 0);
	}
	check_fd();
	/* (after check_fd: w.fd is the trace's, whatever the program did) */
	if (atomic_load(&w.tx) || atomic_load(&w.inflight))
		tx_recover(); /* the writer before was killed in a round */
	return 0;
}


/* In the helper: the traced process's threads (/proc/PID/stat), 0 if
 * unknown.  One at the close is the one closing: nothing can come after
 * it but its own few calls on the way out. */
static long program_threads(void)
{
	char buf[1024];
	long long n = ht_procstat_field(ht_procstat_read(parent_pid, buf, sizeof(buf)), 20);
	return n > 0 ? (long)n : 0;
}
/* The threads handed over full buffers (REQ_DATA, every HT_KICK_BUFFERS
 * of them) between two flushes: those are written, and nothing else.  A
 * whole round drained every thread's current buffer as well, cutting it
 * into two chunks, each piece compressed whatever cpu_free() said, and
 * ticked the epoch (a clock read more in every thread): with two busy
 * threads on two CPUs, a round every 3 ms, a tenth of the chunks of the
 * loop compressed beside the program.  The flushes (flush interval, sync,
 * close) still drain everything. */
static void data_round(void)
{
	if (round_start() == 0)
		drain_queue();
}

static void do_round(uint32_t req)
{
	if (round_start() < 0)
		return;
	if (req & REQ_REOPEN)
		unfinalize();
	if (w.fd >= 0 && !w.failed)
		clock_chunk();
	drain_queue();
	int check_dead = (w.rounds++ % 16) == 0 || (req & REQ_CLOSE);
	for (struct ht_thread *r = ht_thread__first(); r; r = r->next) {
		int st = atomic_load_explicit(&r->state, memory_order_acquire);
		if (st == HT_THR_FREE || st == HT_THR_CLAIMING)
			continue;
		uint32_t tid = r->tid;
		struct ht_buf *cur = atomic_load_explicit(&r->cur, memory_order_acquire);
		if (cur) {
			/* A buffer the thread handed over since the queue was
			 * drained above is in the queue by now (it is pushed
			 * before cur is set): written first, so that a thread's
			 * chunks follow each other in the file.  Its new
			 * buffer's head went before it (2 to 15 chunks out of
			 * ~1150 of a two-thread run), which `live` following the
			 * trace took for lost chunks. */
			drain_queue();
			drain_buf(cur, 1);
		}
		if (st == HT_THR_EXITED && !cur) {
			atomic_store(&r->state, HT_THR_FREE);
		} else if (st == HT_THR_LIVE && (check_dead || atomic_load(&r->late)) &&
			   !(req & REQ_CLOSE) && thread_gone(tid)) {
			/* A thread that recorded after its exit destructor ran.
			 * What was read above may be stale by now: the thread
			 * may have ended through its exit destructor meanwhile
			 * (EXITED, its buffer handed over in the queue: putting
			 * it back here as well lost its tail, and gave one
			 * buffer to two threads).  So only a record still LIVE,
			 * of the same thread, with the same buffer; and that
			 * buffer is drained again, since the thread may have
			 * written to it before it died. */
			struct ht_buf *expect = cur;
			if (atomic_load_explicit(&r->state, memory_order_acquire) == HT_THR_LIVE &&
			    r->tid == tid && atomic_compare_exchange_strong(&r->cur, &expect, NULL)) {
				if (cur) {
					drain_buf(cur, 0);
					ht_buf__put(cur);
				}
				atomic_store(&r->state, HT_THR_FREE);
			}
		}
	}
	if (req & (REQ_CLOSE | REQ_FINALIZE))
		finalize(!!(req & REQ_ORPHAN));
	if (req & REQ_CLOSE) {
		w.closed = 1;
		/* (the helper keeps it for the calls made until the program
		 * is gone: count_to_the_end) */
		if (in_helper && !(req & REQ_ORPHAN) && !w.failed && w.fd >= 0 &&
		    program_threads() > 1) {
			linger_fd = w.fd;
			w.lingering = 1;
		} else if (fd_is_ours(w.fd))
			ht_sys_close(w.fd);
		w.fd = -1;
	}
}

/* Runs one round in the caller's thread if no round is under way. */
static int inline_round(uint32_t req)
{
	int expect = 0;
	if (!atomic_compare_exchange_strong(&w.round_busy, &expect, RB_PROGRAM))
		return -1;
	ht_tls.guard += HT_GUARD_OWN;
	do_round(req);
	ht_tls.guard -= HT_GUARD_OWN;
	atomic_store(&w.round_busy, 0);
	return 0;
}

/* glibc's count of the process's threads (for libthread_db), this one
 * included; NULL on a libc without it. */
static volatile unsigned int *nptl_nthreads;

/* When the program's last thread ends with pthread_exit() (main too),
 * glibc ends the process with exit(0) -- but a writer thread counts, so
 * the process would live on.  The writer does what glibc would have done.
 * (A helper process is not a thread of the program: nothing to do.) */
static void exit_if_alone(void)
{
	if (!nptl_nthreads || *nptl_nthreads != 1)
		return;
	do_round(REQ_CLOSE);
	exit(0);
}


static void compressor_init(void)
{
	if (ht_opt.zstd_level == 0)
		return;
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		ncpus = CPU_COUNT(&set);
	ZSTD_customMem mem = {z_alloc, z_free, NULL};
	zc = ZSTD_createCCtx_advanced(mem);
	if (zc) {
		ZSTD_CCtx_setParameter(zc, ZSTD_c_compressionLevel, ht_opt.zstd_level);
		ZSTD_CCtx_setParameter(zc, ZSTD_c_checksumFlag, 1);
	}
}

/* Takes round_busy for the writer's round.  A thread of the program may
 * hold it for the few chunks it writes itself (self_drain); if the
 * program is gone meanwhile (killed in the middle of them), the helper
 * takes it over, and round_start() undoes or completes the chunk that
 * was being written (tx_recover), as for a writer killed in a round.  A
 * program stopped with the lock held (SIGSTOP) is waited for without
 * spinning. */
static void lock_round(int helper)
{
	long nap = 50000; /* ns, doubled up to 2 ms: a stopped program may stay so */
	for (unsigned i = 0;; i++) {
		/* (compare and swap: an exchange would mark a thread's lock
		 * as the writer's while it waits) */
		int expect = 0;
		if (atomic_compare_exchange_strong(&w.round_busy, &expect, RB_WRITER))
			return;
		if (helper && getppid() != parent_pid)
			return; /* (the holder went with the program) */
		if (i < 64) {
			sched_yield();
		} else {
			struct timespec ts = {0, nap};
			ht_sys_nanosleep(&ts, NULL);
			if (nap < 2000000)
				nap *= 2;
		}
	}
}

/* The writer's loop, in the helper process or in the writer thread.  It
 * wakes every epoch (or flush interval, if shorter) to move ht_epoch on,
 * and does a flush round once a flush interval has passed or when asked.
 * The helper also ends the recording when the traced process is gone. */
static void writer_loop(int helper)
{
	uint64_t period_ns = (uint64_t)(ht_opt.flush_interval_ms < HT_EPOCH_MS
						? ht_opt.flush_interval_ms
						: HT_EPOCH_MS) * 1000000u;
	uint64_t flush_ns = (uint64_t)ht_opt.flush_interval_ms * 1000000u;
	uint64_t rss_ns = (uint64_t)ht_opt.rss_interval_ms * 1000000u;
	int first = 1;
	uint64_t last_round = ht_mono_ns(), last_tick = last_round;
	uint64_t next_rss = last_round + rss_ns;
	for (;;) {
		/* A second clock sample soon after the first gives readers a
		 * rate even for a run that dies young. */
		uint64_t wait_ns = first ? 2000000u : period_ns;
		uint64_t now = ht_mono_ns();
		if (!first && now - last_tick < period_ns)
			wait_ns = period_ns - (now - last_tick);
		if (rss_ns && !first) {
			uint64_t to_rss = next_rss > now ? next_rss - now : 0;
			if (to_rss < wait_ns)
				wait_ns = to_rss;
		}
		struct timespec iv = {(time_t)(wait_ns / 1000000000u), (long)(wait_ns % 1000000000u)};
		atomic_store(&w.writer_waiting, 1);
		if (!atomic_load(&w.req_word) && wait_ns)
			futex(&w.req_word, FUTEX_WAIT, 0, &iv);
		atomic_store(&w.writer_waiting, 0);
		now = ht_mono_ns();
		if (helper && zc && ht_opt.self_write)
			cpu_free(); /* (judged again, for self_drain, when the threads write) */
		uint32_t ticket = atomic_load(&w.req_ticket);
		uint32_t req = atomic_exchange(&w.req_word, 0);
		/* The program gone: killed, _exit, crashed, so write it all; but
		 * not an orphan if it asked for the close itself before it went
		 * (it gave up waiting for a writer that was stopped: the trace
		 * is whole, and readers must not say it ended without shutting
		 * the tracer down) */
		if (helper && getppid() != parent_pid)
			req |= REQ_CLOSE | (req & REQ_CLOSE ? 0 : REQ_ORPHAN);
		if ((req & ~(uint32_t)REQ_DATA) || first || now - last_tick >= period_ns - 500000) {
			atomic_fetch_add_explicit(ht_epoch_p, 1, memory_order_relaxed);
			last_tick = now;
		}
		int sample = rss_ns && now >= next_rss;
		if (sample) /* on the grid; after a stall, from now on */
			next_rss = now - next_rss < rss_ns ? next_rss + rss_ns : now + rss_ns;
		if (!(req & ~(uint32_t)REQ_DATA) && !first && now - last_round < flush_ns - 500000) {
			if (req || sample) {
				lock_round(helper);
				if (req) /* full buffers only: data_round */
					data_round();
				if (sample) /* between rounds: into the batch */
					rss_sample();
				atomic_store(&w.round_busy, 0);
			}
			if (req) { /* (a request made before ticket had its bits
				    * taken by an earlier round: served) */
				atomic_store(&w.done_ticket, ticket);
				futex(&w.done_ticket, FUTEX_WAKE, INT_MAX, NULL);
			}
			continue;
		}
		first = 0;
		last_round = now;
		lock_round(helper);
		do_round(req);
		if (!helper && !(req & REQ_CLOSE))
			exit_if_alone(); /* keeps round_busy: no other round again */
		atomic_store(&w.round_busy, 0);
		atomic_store(&w.done_ticket, ticket);
		futex(&w.done_ticket, FUTEX_WAKE, INT_MAX, NULL);
		if (req & (REQ_CLOSE | REQ_EXIT))
			break;
	}
}

/* Closes every descriptor of this (unshared) table but keep: the
 * program's copies, which must not outlive the program's own (a pipe its
 * reader waits to see closed, a socket). */
static void close_all_but(int keep)
{
	unsigned k = (unsigned)keep;
	if ((k == 0 || syscall(SYS_close_range, 0u, k - 1, 0u) == 0) &&
	    syscall(SYS_close_range, k + 1, ~0u, 0u) == 0)
		return;
	struct rlimit rl; /* no close_range (before Linux 5.9) */
	unsigned max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (unsigned)rl.rlim_cur
										 : 65536;
	for (unsigned fd = 0; fd < max; fd++)
		if (fd != k)
			ht_sys_close((int)fd);
}

/* The writer thread takes a descriptor table of its own: the program can
 * then close, dup2() onto or reuse any number without touching the trace
 * (checking the descriptor and then writing, in a table shared with the
 * program, races with a program thread that dup2()s its own file onto the
 * number between the two).  The copies of the program's descriptors that
 * come with the table are closed, so that none of them outlives the
 * program's own (a pipe's reader must see its end when the program closes
 * it).  Without unshare the table stays shared and check_fd() guards each
 * round as before. */
static void own_fd_table(void)
{
	if (w.fd >= 0 && syscall(SYS_unshare, CLONE_FILES) == 0)
		close_all_but(w.fd);
}

static void *writer_main(void *arg)
{
	(void)arg;
	ht_tls.guard = HT_GUARD_OWN; /* nothing this thread allocates is traced */
	in_writer_thread = 1;
	own_fd_table();
	nptl_nthreads = dlsym(RTLD_DEFAULT, "__nptl_nthreads");
	/* (every signal blocked from its start: ht_writer__start) */
	compressor_init();
	writer_loop(0);
	atomic_store(&w.running, 0);
	return NULL;
}

/* The program closed its trace (exit, a fatal signal) and goes on to its
 * end, its other threads with it: their calls meanwhile are counted as
 * not recorded (ht_closing), and the program put the count as of its
 * close in the header.  The helper, which closed the file for it, waits
 * here until the program is gone (its pidfd, which is readable once every
 * thread has ended) and puts the final count in the header, its
 * descriptor still holding the lock readers wait on; so the trace's
 * calls plus those counted are every call the program made.  A program
 * that takes longer than HT_LINGER_MS to end after its close is not
 * waited for longer: what its threads call after that stays uncounted
 * (the program does not wait for the helper: it would wait for itself). */
#define HT_LINGER_MS 100

/* Events of b its thread committed and the writer did not write. */
static uint64_t unwritten(const struct ht_buf *b)
{
	uint64_t c = atomic_load_explicit(&b->commit, memory_order_acquire);
	uint32_t nev = (uint32_t)(c >> HT_COMMIT_SHIFT);
	return (c & HT_COMMIT_MASK) > b->taken && nev > b->taken_events ? nev - b->taken_events : 0;
}

/* Calls recorded after the close wrote the threads' buffers: a thread
 * that found the recording on just before the exit turned it off wrote
 * its record after the writer's last look (one call in 10 to 20 runs of
 * tests/progs/exitbusy, missing from the trace and from the count).  Not
 * in the trace, they are counted with the calls not recorded.  The
 * program is gone: nothing moves in its buffers any more. */
static uint64_t committed_late(void)
{
	uint64_t n = 0;
	for (struct ht_thread *r = ht_thread__first(); r; r = r->next) {
		int st = atomic_load_explicit(&r->state, memory_order_acquire);
		struct ht_buf *cur = atomic_load_explicit(&r->cur, memory_order_acquire);
		if (st != HT_THR_FREE && st != HT_THR_CLAIMING && cur)
			n += unwritten(cur);
	}
	for (struct ht_buf *b; (b = ht_queue__pop());) /* (full ones handed over meanwhile) */
		n += unwritten(b);
	return n;
}

static void count_to_the_end(int fd)
{
	uint64_t deadline = ht_mono_ns() + (uint64_t)HT_LINGER_MS * 1000000u;
	int pfd = -1;
#ifdef SYS_pidfd_open
	pfd = (int)syscall(SYS_pidfd_open, parent_pid, 0);
#endif
	while (getppid() == parent_pid) {
		uint64_t now = ht_mono_ns();
		if (now >= deadline)
			break;
		if (pfd >= 0) {
			struct pollfd p = {pfd, POLLIN, 0};
			if (ht_sys_poll(&p, 1, (int)((deadline - now + 999999) / 1000000)) > 0)
				break;
		} else {
			struct timespec ts = {0, 200000};
			ht_sys_nanosleep(&ts, NULL);
		}
	}
	if (pfd >= 0)
		ht_sys_close(pfd);
	/* (w.hdr.dropped: what the header says, the program's own update
	 * included; the descriptor is write-only) */
	uint64_t d = atomic_load(ht_dropped_p) + committed_late();
	if (d > w.hdr.dropped &&
	    pwrite_at(fd, &d, sizeof(d), (off_t)offsetof(struct ht_file_header, dropped)) ==
		    (ssize_t)sizeof(d))
		w.hdr.dropped = d; /* (else nothing to say it with: no stderr here) */
	ht_sys_close(fd);
}

/* The helper process: a copy of the traced process that only runs the
 * writer's loop.  Every signal is blocked (a Ctrl-C for the program's
 * process group must not end it before the program's trace is written);
 * it ends when the program closes the trace or is gone. */
static __attribute__((noreturn)) void helper_main(void)
{
	ht_tls.guard = HT_GUARD_OWN; /* (every signal is blocked: see start_helper) */
	in_helper = 1;
	prctl(PR_SET_NAME, "heaptrail-write", 0, 0, 0);
	/* Only the trace's descriptor is ours (so the helper has no stderr
	 * for messages). */
	close_all_but(w.fd);
	statm_fd = -1; /* closed above: the helper opens its own */
	compressor_init();
	writer_loop(1);
	if (linger_fd >= 0)
		count_to_the_end(linger_fd);
	atomic_store(&w.running, 0);
	syscall(SYS_exit_group, 0);
	__builtin_unreachable();
}

/* clone() without CLONE_VM is fork() without glibc's fork: no atfork
 * handlers of the program run, and an exit signal of 0 keeps the helper
 * out of the program's wait() and SIGCHLD. */
static int start_helper(void)
{
	parent_pid = ht_self_pid();
	/* Blocked before the clone, so that the helper never runs a moment
	 * with signals open (a signal for the process group right after
	 * start would end it). */
	sigset_t all, old;
	sigfillset(&all);
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, sizeof(long));
	/* (not syscall(), which the library interposes: a program's clone
	 * without CLONE_VM through it is a fork, hooks.c) */
	long pid = ht_raw_syscall(SYS_clone, 0, 0, 0, 0, 0, 0);
	if (pid == 0)
		helper_main();
	int e = errno;
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof(long));
	errno = e;
	if (pid < 0)
		return -1;
	helper_pid = (pid_t)pid;
	return 0;
}

int ht_writer__start(void)
{
	if (attach() < 0)
		return -1;
	if (atomic_load(&w.running))
		return 0;
	if (w.fd < 0 && open_file() < 0) {
		w.failed = 2; /* open_output said why: not again at every round */
		atomic_store(&ht_on, 0);
		return -1;
	}
	atomic_store(&w.running, 1);
	/* The buffer a thread of the program writes a raw chunk from (a
	 * stored frame: self_drain, or all writes once the helper died; a
	 * writer thread's chunks), mapped now and not at its first such
	 * write, in the middle of the program's run: a program that unmaps
	 * a range of its own around a hole it made (munmap(p + 1M, 1M), then
	 * munmap(p, 3M)) unmapped it when it had landed in the hole, and the
	 * next write faulted (e2e.mmap_ranges_in_slices, once). */
	{
		size_t bs = ht_opt.buffer_size ? (size_t)ht_opt.buffer_size : 65536;
		size_t zb = ZSTD_compressBound(bs), st = ht_zstored_size(bs);
		zbuf_reserve(zb > st ? zb : st); /* (a writer thread compresses in it) */
	}
	if (ht_opt.writer_process && start_helper() == 0)
		return 0;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	/* The thread is born with every signal blocked (it inherits this
	 * mask), as the helper is: a signal for the process taken by the
	 * writer thread before it ran its first line (a busy machine may not
	 * run it for a while) ran on_fatal there, which waited for the
	 * writer, itself, and the program died 2 s later with its trace
	 * unwritten (a SIGTERM to a program of four threads right after it
	 * started: 1 run in 5 on a machine with six busy loops on 2 CPUs). */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int r = ht_real_pthread_create(&writer_thread, &attr, writer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (r != 0) {
		atomic_store(&w.running, 0);
		return 0; /* rounds run inline */
	}
	return 0;
}

/* waitpid for the helper, as a system call: the program's waitpid is
 * interposed (hooks.c), and keeps every wait off the helper. */
static pid_t wait_helper(int *st, int options)
{
	return (pid_t)syscall(SYS_wait4, helper_pid, st, options, NULL);
}

pid_t ht_writer__helper_pid(void)
{
	return helper_pid;
}

/* The process whose exec is under way (before_exec asked the helper to
 * end: REQ_EXIT), 0 if none: a helper gone meanwhile ended on purpose.
 * A pid, not a flag: a vfork child's exec writes its parent's memory. */
static pid_t exec_pid;

static int exec_under_way(void)
{
	return exec_pid && exec_pid == ht_self_pid();
}

/* The helper is gone (reaped here, or by a wait of the program's that
 * hooks.c hid from it): rounds go on inline.  Not during an exec, which
 * asked it to end: another thread that reaped it then said "the trace
 * writer process died" (a probe: every exec while a thread allocated),
 * and if the exec fails, exec_failed starts a new one. */
void ht_writer__helper_gone(void)
{
	helper_pid = 0;
	if (exec_under_way())
		return;
	if (atomic_load(&w.running)) {
		/* died without saying so: mid-round, perhaps (its lock is
		 * let go; not a thread's of the program, in self_drain: a
		 * round of another thread's beside it wrote over its chunks) */
		atomic_store(&w.running, 0);
		int held = RB_WRITER;
		atomic_compare_exchange_strong(&w.round_busy, &held, 0);
		helper_lost = 1;
		/* said whoever noticed it: the buffers running out, the
		 * program's end, a wait of the program's that reaped it */
		char word[MSG_WORD];
		if (__atomic_exchange_n(&helper_lost_said, 1, __ATOMIC_SEQ_CST) == 0)
			ht_msg("the trace writer process died; the program's threads write %s "
			       "themselves from now on (no periodic flush: a crash of the "
			       "program now loses what its buffers hold)",
			       msg_word(word, w.path));
	}
}

/* Whether the writer is alive; notices a helper that died (killed on its
 * own) so that rounds go on inline. */
static int writer_alive(void)
{
	if (!atomic_load(&w.running))
		return 0;
	if (helper_pid > 0) {
		int st;
		pid_t r = wait_helper(&st, WNOHANG | __WCLONE);
		if (r == helper_pid || (r < 0 && errno == ECHILD)) {
			ht_writer__helper_gone();
			return 0;
		}
	}
	return 1;
}

/* A thread found every buffer full and waiting for the writer.  If the
 * helper process died on its own (killed by an administrator or the OOM
 * killer), nobody will empty them: say so once, and write them out here,
 * in the thread that waits (a round, as at exit without a writer), so the
 * program never waits forever and nothing is lost.  From then on the
 * program's threads write the trace themselves whenever the buffers run
 * out, and at exit. */
void ht_writer__rescue(void)
{
	if (!ws || w.closed || (helper_pid <= 0 && !helper_lost) || exec_under_way())
		return;
	if (!helper_lost && writer_alive())
		return;
	helper_lost = 1;
	char word[MSG_WORD];
	if (__atomic_exchange_n(&helper_lost_said, 1, __ATOMIC_SEQ_CST) == 0)
		ht_msg("the trace writer process died; the program's threads write %s "
		       "themselves from now on (no periodic flush: a crash of the "
		       "program now loses what its buffers hold)",
		       msg_word(word, w.path));
	inline_round(REQ_DATA);
}

/* Reaps an ended helper (it has no exit signal: only we wait for it).  A
 * pidfd says the moment it ends; without one (before Linux 5.3, no fd
 * left) it is looked for every millisecond, which cost every traced
 * program's exit about a millisecond of waiting after the helper had
 * ended. */
static void reap_helper(int timeout_ms)
{
#ifdef SYS_pidfd_open
	int pfd = helper_pid > 0 ? (int)syscall(SYS_pidfd_open, helper_pid, 0) : -1;
	if (pfd >= 0) {
		uint64_t deadline = ht_mono_ns() + (uint64_t)timeout_ms * 1000000u;
		for (;;) {
			pid_t r = wait_helper(NULL, WNOHANG | __WCLONE);
			if (r == helper_pid || (r < 0 && errno == ECHILD)) {
				helper_pid = 0;
				break;
			}
			uint64_t now = ht_mono_ns();
			if (now >= deadline)
				break;
			struct pollfd p = {pfd, POLLIN, 0};
			ht_sys_poll(&p, 1, (int)((deadline - now + 999999) / 1000000));
		}
		ht_sys_close(pfd);
		return;
	}
#endif
	for (int i = 0; helper_pid > 0 && i < timeout_ms; i++) {
		pid_t r = wait_helper(NULL, WNOHANG | __WCLONE);
		if (r == helper_pid || (r < 0 && errno == ECHILD)) {
			helper_pid = 0;
			break;
		}
		struct timespec ts = {0, 1000000};
		ht_sys_nanosleep(&ts, NULL);
	}
}

/* Asks the writer for a round with req and waits for it to finish;
 * without a writer, does the round here. */
static void request(uint32_t req, int timeout_ms)
{
	if (!ws || w.closed || child_needs_writer)
		return; /* closed, or a fork child that recorded nothing */
	int saved = errno;
	if (!writer_alive()) {
		/* Wait for a round in progress elsewhere (bounded). */
		for (int i = 0; i < timeout_ms * 10 && inline_round(req) < 0; i++) {
			struct timespec ts = {0, 100000};
			ht_sys_nanosleep(&ts, NULL);
		}
		errno = saved;
		return;
	}
	atomic_fetch_or(&w.req_word, req);
	uint32_t mine = atomic_fetch_add(&w.req_ticket, 1) + 1;
	futex(&w.req_word, FUTEX_WAKE, 1, NULL);
	uint64_t deadline = ht_mono_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		uint32_t done = atomic_load(&w.done_ticket);
		if ((int32_t)(done - mine) >= 0)
			break;
		if (!writer_alive()) {
			inline_round(req & ~(uint32_t)REQ_EXIT);
			break;
		}
		if (ht_mono_ns() >= deadline)
			break;
		struct timespec ts = {0, 10000000};
		futex(&w.done_ticket, FUTEX_WAIT, done, &ts);
	}
	errno = saved;
}

/* A thread handed over a full buffer: every HT_KICK_BUFFERS buffers, wake
 * the writer if it sleeps, so that buffers come back while they are still
 * in cache (1 MiB in flight) without a wake-up per buffer: waking the
 * writer for every 64 KiB cost the traced thread ~10 ns per malloc/free
 * pair on a 2-CPU machine, every 16th about 1 ns (bench/RESULTS.md). */
#define HT_KICK_BUFFERS 16

/* A thread that hands over a full buffer while the helper judges that
 * no CPU is free for it (cpu_free: the program's threads fill the CPUs)
 * writes the full buffers itself, raw, as the helper would then, unless a
 * round is under way elsewhere: two busy threads on two CPUs each wrote
 * their own share, where the helper took a fifth of one CPU, always the
 * same one, and the thread that shared it ended some 40 ms after the
 * other (docs/record.md, "Compression").  Signals are blocked meanwhile
 * (a handler that allocated could wait for a buffer that only a round
 * gives back), errno is kept, and nothing is written once the file is
 * finalized (an exec) or if the descriptor is not the trace's in this
 * process.  0 if it wrote (or found nothing to write). */
#define HT_SELF_STALL_NS 2000000u

static int self_drain(void)
{
	int expect = 0;
	if (!atomic_compare_exchange_strong(&w.round_busy, &expect, RB_PROGRAM))
		return -1;
	int saved = errno, rc = -1;
	sigset_t all, old;
	sigfillset(&all);
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, sizeof(long));
	/* (fd_taken after round_busy, both sequentially consistent, as
	 * ht_writer__fds_closing does the reverse: one of the two sees the
	 * other) */
	if (!atomic_load(&fd_taken) && !w.closed && !w.failed &&
	    !(w.hdr.flags & HT_FILE_F_CLOSED) && !atomic_load(&w.tx) && !atomic_load(&w.inflight) &&
	    self_fd_ours()) {
		uint64_t t0 = ht_mono_ns();
		ht_tls.guard += HT_GUARD_OWN;
		draining_in_program = 1;
		drain_queue();
		draining_in_program = 0;
		if (self_abandoned) {
			self_abandoned = 0;
			ht_writer__wake(); /* (its round puts the chunk right) */
		}
		ht_tls.guard -= HT_GUARD_OWN;
		uint64_t t1 = ht_mono_ns();
		/* a write that waited (the kernel throttling dirty pages, a
		 * slow or remote disk): the helper waits for the disk, not the
		 * program, for the next second */
		if (t1 - t0 > HT_SELF_STALL_NS)
			atomic_store(&w.self_off_until, t1 + 1000000000u);
		rc = 0;
	}
	atomic_store(&w.round_busy, 0);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof(long));
	errno = saved;
	return rc;
}

void ht_writer__fds_closing(unsigned lo, unsigned hi)
{
	if (!ws) /* (before the writer's state, and in a fork child until its own) */
		return;
	int fd = w.fd;
	if (fd < 0 || (unsigned)fd < lo || (unsigned)fd > hi || atomic_load(&fd_taken))
		return;
	atomic_store(&fd_taken, 1);
	/* a thread of the program writing through it finishes first; not
	 * when that may be this thread (a signal handler's call on top of
	 * an inline round, which does not block signals as self_drain
	 * does): its write goes on after the handler, as before */
	while (atomic_load(&w.round_busy) == RB_PROGRAM && !in_helper &&
	       ht_tls.guard < HT_GUARD_OWN) {
		struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
	}
}

/* HEAPTRAIL_SELF_WRITE=1: whether the helper judged, and not long ago,
 * that no CPU is free for it, and no write of a thread stalled lately.
 * Only a fresh judgement counts: the helper judges as it takes buffers,
 * and once the threads wrote every buffer themselves it had none to take
 * and its "busy" stood for the rest of the run (a one-thread program on a
 * loaded machine wrote raw from its first busy moment on, and the end
 * step compressed it all: the whole record 137-158 ms against 123-129 in
 * 5 runs of 9).  A stale one leaves the buffer to the helper, which
 * judges again. */
static int self_write_now(void)
{
	if (!atomic_load_explicit(&w.cpu_busy, memory_order_relaxed))
		return 0;
	uint64_t now = ht_mono_ns();
	return atomic_load_explicit(&w.self_off_until, memory_order_relaxed) < now &&
	       now - atomic_load_explicit(&w.cpu_judged_at, memory_order_relaxed) <
		   2 * (uint64_t)HT_CPU_WINDOW_NS;
}

void ht_writer__kick(void)
{
	if (!ws)
		return;
	/* A helper process that died on its own is noticed here, at the next
	 * full buffer of any thread (a wait4 that does not wait, per 64 KiB
	 * of records), not only once every buffer is full: its buffers are
	 * written out at once, and from then on each full buffer as it comes,
	 * so that a crash of the program afterwards loses at most the
	 * buffers its threads are filling. */
	if (helper_pid > 0 || helper_lost)
		ht_writer__rescue();
	uint32_t q = atomic_fetch_add_explicit(&w.queued, 1, memory_order_relaxed);
	if (ht_opt.self_write && helper_pid > 0 && !helper_lost &&
	    (ht_opt.self_write == 2 || self_write_now()) && self_drain() == 0)
		return;
	if (q % HT_KICK_BUFFERS)
		return;
	if (atomic_load_explicit(&w.writer_waiting, memory_order_relaxed) &&
	    !(atomic_fetch_or(&w.req_word, REQ_DATA) & REQ_DATA))
		futex(&w.req_word, FUTEX_WAKE, 1, NULL);
}

/* Every buffer is taken: wake the writer now for a whole round, whatever
 * the count of hand-overs since it last woke (it takes back the buffers
 * of threads that ended without handing theirs over, as well). */
void ht_writer__wake(void)
{
	if (ws && atomic_load_explicit(&w.writer_waiting, memory_order_relaxed) &&
	    !(atomic_fetch_or(&w.req_word, REQ_SYNC) & REQ_SYNC))
		futex(&w.req_word, FUTEX_WAKE, 1, NULL);
}

void ht_writer__sync(int timeout_ms)
{
	if (ht_foreign_process())
		return;
	request(REQ_SYNC, timeout_ms);
}

/* Our copy of the trace's descriptor, once the writer is done with the
 * file: the last copy closed releases the readers' lock. */
static void close_proc_fd(void)
{
	if (proc_fd >= 0 && fd_is_ours(proc_fd))
		ht_sys_close(proc_fd);
	proc_fd = -1;
}

void ht_writer__shutdown(int sig)
{
	int from_signal = sig != 0;
	if (ht_foreign_process() || !ws || w.closed)
		return;
	ht_tls.guard += HT_GUARD_OWN;
	atomic_store(&ht_closing, 1);
	atomic_store(&ht_on, 0);
	if (sig) {
		/* the header the writer finalizes says what the program died of
		 * (the state is shared with the writer process: set before the
		 * request, the flag by an atomic or) */
		w.hdr.signal = (uint32_t)sig;
		__atomic_fetch_or(&w.hdr.flags, (uint64_t)HT_FILE_F_SIGNALED, __ATOMIC_SEQ_CST);
	}
	request(REQ_CLOSE, from_signal ? 2000 : 10000);
	ht_writer__report_failure();
	if (!from_signal && atomic_load(&w.running) == 0 && writer_thread) {
		int cs; /* (pthread_join is a cancellation point: not ours to act on) */
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
		pthread_join(writer_thread, NULL), writer_thread = 0;
		pthread_setcancelstate(cs, NULL);
	}
	/* (a helper that closed the trace stays until this process is gone:
	 * count_to_the_end; waiting for it here would wait for ourselves) */
	if (!w.closed || !w.lingering)
		reap_helper(from_signal ? 100 : 1000);
	if (w.closed) {
		/* The calls other threads made meanwhile (ht_closing) go on
		 * being counted after the writer wrote the header: the count
		 * to now put in it, while this descriptor still holds the lock
		 * readers wait for (those made after, until the process ends,
		 * are a few microseconds' worth). */
		uint64_t d = atomic_load(ht_dropped_p);
		if (d != w.hdr.dropped && proc_fd >= 0 && fd_is_ours(proc_fd) &&
		    pwrite_at(proc_fd, &d, sizeof(d), offsetof(struct ht_file_header, dropped)) ==
			    (ssize_t)sizeof(d))
			w.hdr.dropped = d;
		close_proc_fd();
	}
	ht_tls.guard -= HT_GUARD_OWN;
}

/* The traced process execs: its trace becomes OUT.exec<N> and the new
 * image (traced too) writes OUT, so that OUT is the program a wrapper or a
 * shim finally runs. */
static char exec_path[4200 + 32];

/* Renames the trace OUTPUT.exec<N> (N: the image's index + 1) without
 * replacing a file there: an earlier run's OUTPUT.exec<N> (a second
 * record of the same exec chain replaced its first images' traces, a mix
 * of both runs left) makes it OUTPUT.exec<N>.2, .3 ..., names record's
 * summary finds as well.  1 if it was moved (the name in exec_path). */
static int move_aside_for_exec(void)
{
	for (int k = 1; k < 1000; k++) {
		if (k == 1)
			snprintf(exec_path, sizeof(exec_path), "%s.exec%d", w.path,
				 ht_image_index() + 1);
		else
			snprintf(exec_path, sizeof(exec_path), "%s.exec%d.%d", w.path,
				 ht_image_index() + 1, k);
		if (syscall(SYS_renameat2, AT_FDCWD, w.path, AT_FDCWD, exec_path,
			    RENAME_NOREPLACE) == 0)
			return 1;
		if (errno == EEXIST)
			continue;
		if (errno != EINVAL && errno != ENOSYS)
			return 0;
		/* a file system without RENAME_NOREPLACE: a hard link
		 * refuses an existing name too */
		if (link(w.path, exec_path) == 0)
			return unlink(w.path) == 0 || (unlink(exec_path), 0);
		if (errno != EEXIST)
			return 0;
	}
	return 0;
}

/* ht_on before an exec held the other threads (restored if it fails). */
static int exec_saved_on;

void ht_writer__exec_hold_wait(void)
{
	int tid = (int)ht_self_tid(), h;
	while ((h = atomic_load(&ht_exec_hold)) != 0 && h != tid)
		syscall(SYS_futex, &ht_exec_hold, FUTEX_WAIT_PRIVATE, h, NULL, NULL, 0);
}

void ht_writer__before_exec(void)
{
	if (ht_foreign_process() || !ws)
		return;
	/* The other threads stop making calls until the exec is through:
	 * they went on while the trace was finalized, and their calls from
	 * then until the exec ended them were neither in the trace nor
	 * counted (a chain of execs with two threads allocating: 4 to 8% of
	 * the calls, every trace "complete", probe I).  Recording stops here
	 * for all (the exec event is in); a thread already in a record ends
	 * it.  A failed exec lets them go (ht_writer__exec_failed); a
	 * successful one ends them where they wait, in a heap call whose
	 * return the program never saw. */
	exec_saved_on = atomic_load(&ht_on);
	atomic_store(&ht_exec_hold, (int)ht_self_tid());
	atomic_store(&ht_on, 0);
	ht_tls.guard += HT_GUARD_OWN;
	/* A helper ends after finalizing: the new image has a writer of its
	 * own, and if the exec fails a new helper takes over. */
	if (helper_pid > 0)
		exec_pid = ht_self_pid();
	request(REQ_FINALIZE | (helper_pid > 0 ? REQ_EXIT : 0), 5000);
	reap_helper(1000);
	exec_path[0] = 0;
	if (ht_is_root_image() && w.fd >= 0 && !w.failed && !move_aside_for_exec())
		exec_path[0] = 0;
	ht_tls.guard -= HT_GUARD_OWN;
}

void ht_writer__exec_failed(void)
{
	if (ht_foreign_process() || !ws)
		return;
	ht_tls.guard += HT_GUARD_OWN;
	if (exec_path[0] && rename(exec_path, w.path) == 0)
		exec_path[0] = 0;
	if (!writer_alive() && !w.closed && !w.failed)
		ht_writer__start();
	exec_pid = 0;
	request(REQ_REOPEN, 5000);
	ht_tls.guard -= HT_GUARD_OWN;
	if (atomic_load(&ht_exec_hold) == (int)ht_self_tid()) {
		if (!w.closed && !w.failed)
			atomic_store(&ht_on, exec_saved_on);
		atomic_store(&ht_exec_hold, 0);
		syscall(SYS_futex, &ht_exec_hold, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
	}
}

/* In the forked child (atfork handler, before buffer.c drops the shared
 * mapping): the writer and the file are the parent's.  The child's file
 * is created by its first round, in a mapping of its own. */
void ht_writer__after_fork_child(void)
{
	if (proc_fd >= 0 && ws && fd_is_ours(proc_fd))
		ht_sys_close(proc_fd); /* the parent's lock must not live on in the child */
	proc_fd = -1;
	/* The parent's statm: the child's writer opens /proc/CHILD/statm. */
	struct stat st;
	if (statm_fd >= 0 && fstat(statm_fd, &st) == 0 && st.st_dev == statm_dev &&
	    st.st_ino == statm_ino)
		ht_sys_close(statm_fd);
	statm_fd = -1;
	ws = NULL;
	atomic_store(&fd_taken, 0); /* (the child's trace gets a descriptor of its own) */
	windex = NULL;
	zc = NULL; /* the parent's context may be mid-use; leave it */
	zbuf = NULL;
	zcap = 0;
	helper_pid = 0;
	helper_lost = helper_lost_said = 0; /* (the parent's; the child's own comes) */
	writer_thread = 0;
	child_needs_writer = 1;
	forked_child = 1;
	if (!atomic_load(&ht_on)) {
		child_disabled = 1; /* not followed: never write */
		child_needs_writer = 0;
	}
}

int ht_writer__child_unstarted(void)
{
	return child_needs_writer && !child_disabled;
}

/* The child's writer starts with its first event (see ht_tls__prepare). */
void ht_writer__ensure_started(void)
{
	if (!child_needs_writer || child_disabled)
		return;
	child_needs_writer = 0;
	if (ht_identity_changed()) {
		/* A child that switched user or group (to exec a program as
		 * another user: subprocess's user=, su, daemons dropping root)
		 * could not create its file where its parent writes, and must
		 * not write as the parent: it goes untraced, silently. */
		child_disabled = 1;
		atomic_store(&ht_on, 0);
		if (attach() == 0) /* the buffers the calls under way write to */
			w.failed = 2;
		return;
	}
	ht_writer__start();
}
