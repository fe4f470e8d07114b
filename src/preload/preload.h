/* Internal interfaces of libheaptrail.so, grouped by the file that defines
 * them.  Nothing here is exported: the library is built with
 * -fvisibility=hidden and only the interposed functions and the public API
 * of include/heaptrail.h are visible. */
#ifndef HEAPTRAIL_PRELOAD_H
#define HEAPTRAIL_PRELOAD_H

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "../trace/format.h"

/* The recorder's own file and sleep calls, made as system calls: glibc's
 * wrappers of these are cancellation points, and a program thread with a
 * cancellation pending must not be cancelled inside malloc or free, where
 * the recorder makes them (a wait for a buffer, its own writes once the
 * writer process is gone, the modules' paths): it unwound holding a
 * buffer, which other threads then waited for forever.  syscall() is no
 * cancellation point; errno is set as by the wrappers. */
static inline ssize_t ht_sys_write(int fd, const void *p, size_t n)
{
	return syscall(SYS_write, fd, p, n);
}
static inline ssize_t ht_sys_read(int fd, void *p, size_t n)
{
	return syscall(SYS_read, fd, p, n);
}
static inline ssize_t ht_sys_pread(int fd, void *p, size_t n, off_t off)
{
	return syscall(SYS_pread64, fd, p, n, off);
}
static inline ssize_t ht_sys_pwrite(int fd, const void *p, size_t n, off_t off)
{
	return syscall(SYS_pwrite64, fd, p, n, off);
}
static inline int ht_sys_open(const char *path, int flags, ...)
{
	unsigned mode = 0;
	if ((flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE) {
		va_list ap;
		va_start(ap, flags);
		mode = va_arg(ap, unsigned);
		va_end(ap);
	}
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}
static inline int ht_sys_close(int fd)
{
	return (int)syscall(SYS_close, fd);
}
static inline int ht_sys_nanosleep(const struct timespec *ts, struct timespec *left)
{
	return (int)syscall(SYS_nanosleep, ts, left);
}
static inline int ht_sys_poll(struct pollfd *fds, nfds_t n, int ms)
{
	return (int)syscall(SYS_poll, fds, n, ms);
}

#define HT_EXPORT __attribute__((visibility("default")))
#define HT_HIDDEN __attribute__((visibility("hidden")))
#define HT_LIKELY(x) __builtin_expect(!!(x), 1)
#define HT_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- options.c ---------------------------------------------------------- */
struct ht_options {
	char out[4096];        /* HEAPTRAIL_OUT (or MTRACE_CTL_FILE): output path, %p = pid */
	int start_paused;      /* HEAPTRAIL_START_PAUSED: record nothing until heaptrail_start() */
	int follow_exec;       /* HEAPTRAIL_FOLLOW_EXEC: keep the tracer in exec'ed programs */
	int follow_fork;       /* HEAPTRAIL_FOLLOW_FORK: forked children write NAME.PID */
	long flush_interval_ms; /* HEAPTRAIL_FLUSH_INTERVAL: writer flush period */
	long rss_interval_ms;  /* HEAPTRAIL_RSS_INTERVAL: RSS sample period, 0 = at flushes only */
	long buffer_size;      /* HEAPTRAIL_BUFFER_SIZE: per-thread buffer bytes */
	int toggle_signal;     /* HEAPTRAIL_TOGGLE_SIGNAL: SIGUSR2 pauses/resumes */
	int zstd_level;        /* HEAPTRAIL_ZSTD_LEVEL: compress while recording (0 = raw) */
	int use_tsc;	       /* HEAPTRAIL_CLOCK: 1 = tsc, 0 = monotonic; HT_TSC_EMULATED
				* once the program turned the counter off (clock.c) */
	int ts_every;          /* HEAPTRAIL_TIMESTAMP_EVERY: malloc/free take the clock every Nth call */
	int quiet;             /* HEAPTRAIL_QUIET: no messages on stderr */
	int writer_process;    /* HEAPTRAIL_WRITER: 1 = helper process, 0 = thread */
	int stack_depth;       /* HEAPTRAIL_STACKS: frames per allocation stack, 0 = none */
	int unwind_fp;         /* HEAPTRAIL_UNWIND: 1 = the walk from .eh_frame (auto), 0 = libunwind only
				* (dwarf), 2 = both, libunwind's recorded, differences counted (check) */
	long sample_bytes;     /* HEAPTRAIL_SAMPLE_BYTES: record allocations every ~N bytes, 0 = all */
	int durations;         /* HEAPTRAIL_DURATIONS: time every malloc-API call */
	int fast_path;         /* HEAPTRAIL_FAST_PATH: 0 = malloc/free always take the general record */
	int self_write;        /* HEAPTRAIL_SELF_WRITE: the threads write full buffers themselves
				* when no CPU is free for the helper (1, the default),
				* never (0), always (2) */
	int scan_delay_us;     /* HEAPTRAIL_SCAN_DELAY_US (tests): the first read of the
				* modules for stacks takes this much longer, so that
				* other threads' first stacks come during it */
	int slow_malloc;       /* malloc leaves the fast path: stacks, sampling, durations,
				* HEAPTRAIL_FAST_PATH=0, no LZCNT or PREFETCHW (derived) */
	int slow_free;         /* free leaves the fast path: sampling, durations,
				* HEAPTRAIL_FAST_PATH=0, no LZCNT or PREFETCHW (derived) */
	int root_pid;          /* HEAPTRAIL_OPTIONS root=: the traced process, when an image
				* of it or of its children execs (0: this one is it) */
	int image;             /* HEAPTRAIL_OPTIONS image=: execs of the traced process before */
};

extern struct ht_options ht_opt;

/* The environment variable that carries the options in one word, as
 * `record` passes them: "name=value,...,out=PATH" (docs/record.md). */
#define HT_OPTIONS_ENV "HEAPTRAIL_OPTIONS"

void ht_options__load(void);
/* "HEAPTRAIL_OPTIONS=..." with every option that differs from its default,
 * the given root= and image=, and out= last, into buf; no allocation.
 * Returns -1 if it does not fit. */
int ht_options__entry(char *buf, size_t cap, int root_pid, int image);
void ht_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- buffer.c: per-thread buffers, the hand-off queue, thread records --- */

/* A recorder buffer: written by one thread, read and recycled by the writer. */
struct ht_buf {
	_Atomic(struct ht_buf *) qnext; /* link in the hand-off queue */
	uint32_t index;                 /* position in the buffer pool */
	uint32_t free_next;             /* pool free list link (index + 1, 0 = end) */
	uint32_t tid;                   /* owning thread */
	uint32_t cap;                   /* usable bytes in data[] */
	uint64_t first_seq;             /* sequence number of the first event */
	_Atomic uint64_t commit;        /* (events << 20) | bytes, published by the owner */
	uint32_t taken;                 /* writer: bytes already written out */
	uint32_t taken_events;          /* writer: events already written out */
	uint32_t last;                  /* set on the thread's final buffer */
	_Atomic uint32_t queued;        /* 1 from its push until the writer pops it */
	uint32_t pad[4];                /* keep data[] 64-byte aligned */
	uint8_t data[];                 /* the records */
};

#define HT_COMMIT_SHIFT 20
#define HT_COMMIT_MASK ((1u << HT_COMMIT_SHIFT) - 1)

/* A thread as the writer sees it; lives in the shared pool, not in TLS, so
 * that it outlives the thread until the writer has drained it. */
struct ht_thread {
	_Atomic(struct ht_buf *) cur; /* buffer the thread writes now, or NULL */
	_Atomic int state;            /* HT_THR_* */
	uint32_t tid;                 /* kernel thread id */
	struct ht_thread *next;       /* all records ever handed out */
	_Atomic int late;             /* taken by a thread after its exit destructor ran
				       * (glibc's tcache freed after the key destructors):
				       * no destructor hands its buffer over, so the writer
				       * looks for its end every round, not every 16th */
};

/* CLAIMING: taken by a thread that is still filling it in (its tid): the
 * writer leaves it alone, as a FREE one. */
enum { HT_THR_FREE = 0, HT_THR_LIVE = 1, HT_THR_EXITED = 2, HT_THR_CLAIMING = 3 };

/* ht_tls.guard: HT_GUARD_REC while the thread records an event, so that a
 * heap call that comes in then can only be a signal handler's (nested.c
 * keeps it and records it right after); HT_GUARD_OWN more for each piece
 * of the tracer's own work, whose calls are never recorded. */
#define HT_GUARD_REC 1
#define HT_GUARD_OWN 2
/* A thread in seccomp's strict mode (read, write, exit, sigreturn): it
 * records nothing more, its calls counted as not recorded (hooks.c). */
#define HT_GUARD_STRICT 0x100000

/* A heap call a signal handler made while its thread was recording
 * (nested.c): the event's values as ht_record() takes them. */
#define HT_NESTED_MAX 16
struct ht_nested_call {
	uint8_t kind, flags;
	uint64_t ts;   /* taken in the handler */
	uint64_t v[6]; /* the kind's field values */
};

/* The hot per-thread state, in initial-exec TLS. */
struct ht_tls {
	uint8_t *pos;           /* next byte to write in buf->data */
	uint8_t *end;           /* last position where a full record still fits; NULL unless state is 1 */
	uint64_t last_ts;       /* timestamp of the previous record */
	uint64_t last_ptr;      /* pointer base for 'p' fields */
	uint64_t nev;           /* events in the current buffer */
	struct ht_buf *buf;     /* current buffer, NULL before the first event */
	struct ht_thread *rec;  /* shared record of this thread */
	uint32_t tid;           /* cached gettid() (ht_self_tid) */
	int guard;              /* >0 while inside the tracer: do not record */
	int state;              /* 0 new, 1 active, 2 exited (key destructor ran) */
	int exit_said;          /* its THREAD_EXIT is recorded (once, even if it calls
				 * malloc after its destructor and is run again) */
	uint32_t creator;       /* tid of the pthread_create caller, 0 unknown */
	uint64_t next_seq;      /* sequence number after the last buffer (exit) */
	uint32_t ts_left;       /* malloc/free calls until the next clock sample */
	uint32_t epoch;         /* ht_epoch when this thread last took the clock */
	struct ht_stacks *stacks; /* the thread's call-path tables (stacks.c), or NULL */
	int64_t sample_left;    /* bytes until the next sampled allocation (sample.c) */
	int sample_old;         /* the block of the realloc under way was sampled (sample.c) */
	uint64_t rng;           /* the sampler's random state */
	uint64_t oidx;          /* the thread's index in the order table's keys (order.c) */
	int nobuf;              /* no buffer was to be had (state 3): 2 if its start is
				 * still to be recorded, else 1; 0 normally */
	uint32_t nobuf_freed;   /* ht_buf__freed() when it last tried */
	/* nested.c: calls signal handlers made while the thread recorded, in
	 * a ring (indexes that wrap) */
	volatile uint32_t nested_head;     /* calls kept */
	volatile uint32_t nested_tail;     /* of them, those taken to be recorded */
	volatile uint8_t nested_keeping;   /* a handler keeps one now */
	volatile uint8_t nested_draining;  /* they are being recorded */
	struct ht_nested_call nested[HT_NESTED_MAX];
};

extern __thread struct ht_tls ht_tls __attribute__((tls_model("initial-exec")));

/* 1 while events are recorded: started, not paused, not closed. */
extern _Atomic int ht_on;
/* Set while the process exits (ht_writer__shutdown): the calls that come
 * with recording off then are counted in *ht_dropped_p (hooks.c). */
extern _Atomic int ht_closing;
/* The thread id of the thread whose exec is under way (0: none): the
 * process's other threads wait in their next heap call
 * (ht_writer__exec_hold_wait) until the exec fails, or the exec ends them,
 * so that none makes a call the finalized trace misses (writer.c,
 * ht_writer__before_exec). */
extern _Atomic int ht_exec_hold;
void ht_writer__exec_hold_wait(void);
/* Set for good by the first pthread_create(): releases need ordered
 * timestamps from then on (ht_now_release). */
extern _Atomic int ht_multithreaded;
/* Bumped by the writer thread every HT_EPOCH_MS: the first malloc/free of a
 * thread after a bump takes the clock, so that sampled timestamps are never
 * older than one epoch (docs/FORMAT.md, "Timestamps"). */
extern _Atomic uint32_t *ht_epoch_p;
/* Calls that could not be recorded (nested.c), in the mapping the writer
 * shares once it exists: its header's `dropped`. */
extern _Atomic uint64_t *ht_dropped_p;

/* ---- nested.c: heap calls made by signal handlers while recording ------ */
/* Keeps the call (kind, flags, values as for ht_record, its time) that a
 * signal handler made while t was recording another, to be recorded right
 * after it; counts it dropped if there is no room.  Async-signal-safe. */
void ht_nested__keep(struct ht_tls *t, int kind, int flags, uint64_t ts, const uint64_t *v,
		     unsigned nv);
/* Counts one call that is not recorded (a kind nested.c does not keep). */
void ht_nested__drop(void);
/* Records what was kept; t is inside the tracer (HT_GUARD_REC) and
 * active. */
void ht_nested__drain(struct ht_tls *t);
static inline int ht_nested__pending(const struct ht_tls *t)
{
	return t->nested_head != t->nested_tail;
}
/* A record found no room below t->end (an active thread): the kept calls
 * are recorded (t->end was NULL for them), and a new buffer taken if the
 * record does not fit, its SYNC dated ts. */
void ht_tls__room(struct ht_tls *t, uint64_t ts);
/* ht_tls__room's first half: t->end set again, the kept calls recorded;
 * whether the record still needs a new buffer (for a caller that dates
 * its SYNC only then). */
int ht_tls__drain_kept(struct ht_tls *t);
/* Writes one kept call (buffer.c's encoder, as ht_record would have). */
void ht_nested__write(struct ht_tls *t, int kind, int flags, uint64_t ts, const uint64_t *vals);
/* t->end as the buffer allows (buffer.c), for a thread with a buffer. */
uint8_t *ht_tls__end(const struct ht_tls *t);

int ht_buf__pool_init(void);
void ht_buf__pool_reset_after_fork(void);
#define HT_WRITER_AREA (64u << 10) /* the writer's state (writer.c) */
#define HT_INDEX_AREA (64u << 20)  /* the writer's chunk index: 2M chunks */
/* The writer's part of the shared mapping: HT_WRITER_AREA bytes for its
 * state, then *index_bytes (HT_INDEX_AREA) for its chunk index; NULL
 * before the mapping exists. */
void *ht_buf__writer_area(size_t *index_bytes);
/* Bytes of address space the shared mapping reserves, 0 before it exists
 * (rlimit.c adds them to a limit the program sets). */
size_t ht_buf__reserved(void);
/* Around an exec: the program's own address-space limit back in the kernel
 * (the new image reserves its own within it), and the recorder's share
 * added again if the exec failed (rlimit.c). */
void ht_rlimit__before_exec(void);
void ht_rlimit__exec_failed(void);
/* A free buffer; waits for the writer to put one back when there is none,
 * for good or wait_ms (then NULL). */
struct ht_buf *ht_buf__get(uint32_t tid, uint64_t first_seq, unsigned wait_ms);
/* Buffers put back so far (a count that wraps). */
uint32_t ht_buf__freed(void);
void ht_buf__put(struct ht_buf *b);
void ht_queue__push(struct ht_buf *b);
struct ht_buf *ht_queue__pop(void);
struct ht_thread *ht_thread__first(void);
struct ht_thread *ht_thread__get(uint32_t tid);
/* This thread's id: gettid(), or where a seccomp filter fails gettid, a
 * number of the recorder's own from HT_SYNTH_TID up (above any pid_max),
 * the thread's for its life (said once on stderr). */
#define HT_SYNTH_TID 0x40000000u
uint32_t ht_self_tid(void);
/* 1 in a fork child of the traced process (writer.c). */
int ht_writer__forked_child(void);
/* This process's id: getpid(), or where a seccomp filter fails it, the
 * one /proc/self names; -1 if neither can be had. */
pid_t ht_self_pid(void);

/* Starts a fresh buffer for the calling thread (first event, or full);
 * 0 if a thread without one found none (then t->buf and t->end are NULL). */
int ht_tls__refill(struct ht_tls *t, uint64_t ts);
/* Called when the thread exits: final record, hand the buffer over. */
void ht_tls__exit(struct ht_tls *t);
/* Makes the thread's state fit for recording; 0 if it cannot record.
 * Retakes *ts when it had to run ht_init() first (the clock may change). */
int ht_tls__prepare(struct ht_tls *t, uint64_t *ts);
/* Records a generic event from its field values (format.h field codes);
 * with --stacks, allocations carry their stack. */
void ht_record(int kind, int flags, uint64_t ts, const uint64_t *vals,
	       const char *str);
/* The same for a call that took dur ticks (record --durations): a
 * DURATION pseudo-record goes right before the event, in the same buffer. */
void ht_record_timed(int kind, int flags, uint64_t ts, uint64_t dur, const uint64_t *vals);
/* Writes a pseudo-record (FRAME, MODULE, ...): not an event, no time. */
void ht_meta__write(struct ht_tls *t, int kind, const uint64_t *vals, const void *str,
		    size_t slen);

/* ---- sample.c: record --sample-bytes ----------------------------------- */
int ht_sample__init(void);
/* Whether to record an allocation of size bytes that returned p. */
int ht_sample__alloc(struct ht_tls *t, uint64_t size, uint64_t p);
/* Whether to record the free of p (it was sampled). */
int ht_sample__free(uint64_t p);
/* Before realloc(old, ...) calls glibc, which may release old to other
 * threads: takes old out of the sampled set and remembers whether it was
 * in it.  The decision cannot wait for the call's end: by then another
 * thread may have been handed old and sampled it. */
void ht_sample__realloc_start(struct ht_tls *t, uint64_t old);
/* Whether to record realloc(old, size) that returned p (after
 * ht_sample__realloc_start). */
int ht_sample__realloc(struct ht_tls *t, uint64_t old, uint64_t size, uint64_t p);

/* ---- ehframe.c: call-frame rules from .eh_frame, for the stack walk ------ */
/* How to find the caller's frame from a return address, on x86-64: the
 * CFA (the caller's stack pointer) from rsp or rbp, the return address
 * just below it, rbp saved at an offset from it or left alone. */
enum {
	HT_CFI_NONE = 0,  /* not in this form (or unknown): libunwind steps this frame */
	HT_CFI_RSP,       /* CFA = rsp + cfa_off */
	HT_CFI_RBP,       /* CFA = rbp + cfa_off */
	HT_CFI_RBP_DEREF, /* CFA = *(rbp + cfa_off) (a function that realigned its stack) */
	HT_CFI_END,       /* the return address is undefined: the outermost frame */
	HT_CFI_GUESS,     /* code no unwind information covers (a JIT's, or in a module
			   * outside every FDE): libunwind's frame-chain guess */
	HT_CFI_NOFDE,     /* (ht_cfi__find only) no FDE covers pc */
};
struct ht_cfi {
	int32_t cfa_off; /* see HT_CFI_* */
	int16_t rbp_off; /* rbp saved at CFA + rbp_off; 0: rbp unchanged */
	uint8_t kind;    /* HT_CFI_* */
	uint8_t pad;     /* zero */
};
/* The rule at return address pc in the module whose .eh_frame_hdr is hdr
 * (nfde entries in its search table), reading only inside [lo, hi). */
struct ht_cfi ht_cfi__find(const uint8_t *hdr, uint32_t nfde, uintptr_t lo, uintptr_t hi,
			   uint64_t pc);

/* ---- stacks.c: stacks for record --stacks ------------------------------- */
struct ht_stacks;
/* Unwinds the caller of the traced function and returns its stack node,
 * writing FRAME (and MODULE) records for what the thread has not seen. */
uint32_t ht_stack__capture(struct ht_tls *t);
void ht_stack__thread_exit(struct ht_tls *t);
void ht_stack__after_fork_child(struct ht_tls *t);
/* After the program's dlclose returned: if a library was unmapped, every
 * thread's tables start over at its next stack (stacks.c, stacks_sync). */
void ht_stack__after_dlclose(void);

/* ---- clock (inline: hot path) ------------------------------------------- */
/* A timespec in nanoseconds. */
static inline uint64_t ht_ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

#if defined(__x86_64__) || defined(__i386__)
/* The timestamp counter, read only after every earlier load completed. */
static inline uint64_t ht_rdtsc_fenced(void)
{
	uint32_t lo, hi;
	__asm__ volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi)::"memory");
	return ((uint64_t)hi << 32) | lo;
}
#else
static inline uint64_t ht_rdtsc_fenced(void)
{
	return 0; /* (no counter: the monotonic clock, ht_opt.use_tsc 0) */
}
#endif

/* ht_opt.use_tsc once the program made RDTSC fault (prctl PR_SET_TSC, or
 * seccomp's strict mode): timestamp-counter ticks worked out from the
 * kernel's monotonic clock (clock.c), so the trace's times go on in one
 * unit. */
#define HT_TSC_EMULATED 2
uint64_t ht_tsc_emulated(void);
/* Before the program's prctl(PR_SET_TSC, PR_TSC_SIGSEGV): every thread
 * takes its timestamps from the kernel's clock from now on (clock.c). */
void ht_clock__tsc_off(void);
/* At start, after the options: a process whose counter is off already (an
 * exec after the prctl) takes its times from the kernel's clock. */
void ht_clock__init(void);
/* clock_gettime, by system call once the counter is off (clock.c). */
int ht_clock_gettime(clockid_t id, struct timespec *ts);

/* A system call as glibc's syscall() makes it (-1 and errno on failure),
 * for the interposed syscall() and prctl() (hooks.c). */
static inline long ht_raw_syscall(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = a4;
	register long r8 __asm__("r8") = a5;
	register long r9 __asm__("r9") = a6;
	long r;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	if ((unsigned long)r > -4096ul) {
		errno = (int)-r;
		return -1;
	}
	return r;
#else
	extern long syscall(long, ...);
	return syscall(nr, a1, a2, a3, a4, a5, a6);
#endif
}

static inline uint64_t ht_now(void)
{
#ifdef HT_FAKE_CLOCK
	static __thread uint64_t fake;
	return fake += 100;
#endif
#if defined(__x86_64__) || defined(__i386__)
	int tsc = __atomic_load_n(&ht_opt.use_tsc, __ATOMIC_RELAXED);
	if (HT_LIKELY(tsc == 1)) {
		uint32_t lo, hi;
#if defined(HT_CLOCK_RDTSCP)
		uint32_t aux;
		__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
#elif defined(HT_CLOCK_LFENCE)
		__asm__ volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi));
#elif defined(HT_CLOCK_NV)
		__asm__("rdtsc" : "=a"(lo), "=d"(hi));
#else
		__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
#endif
		return ((uint64_t)hi << 32) | lo;
	}
	if (tsc == HT_TSC_EMULATED)
		return ht_tsc_emulated();
#endif
	extern uint64_t ht_mono_ns(void);
	return ht_mono_ns();
}
uint64_t ht_mono_ns(void);

/* A timestamp taken only after every earlier load has completed: for the
 * start of a call that releases a block.  Plain RDTSC may execute before
 * the load that brought the pointer from another thread, which would put
 * free(p) before the malloc that returned p (docs/FORMAT.md, "Ordering").
 * The LFENCE costs ~14 ns in a tight loop, so a process that never
 * created a thread (no other thread can hand it a pointer) goes without. */
static inline uint64_t ht_now_release(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && !defined(HT_NO_RELEASE_FENCE)
	if (HT_LIKELY(__atomic_load_n(&ht_opt.use_tsc, __ATOMIC_RELAXED) == 1) &&
	    atomic_load_explicit(&ht_multithreaded, memory_order_relaxed))
		return ht_rdtsc_fenced();
#endif
	return ht_now();
}

/* ---- the recorder's own memory ------------------------------------------ */
/* Raw system calls, never the interposed mmap/munmap: the recorder's own
 * tables and buffers are not the program's memory and must not show up in
 * its trace (a thread's exit unmaps its stack tables while it still
 * records).  flags: MAP_PRIVATE or MAP_SHARED, with MAP_NORESERVE if
 * wanted (MAP_ANONYMOUS is added).  NULL on failure. */
static inline void *ht_own_map(size_t bytes, int flags)
{
	long r = syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);
	return r < 0 && r > -4096 ? NULL : (void *)r;
}

static inline void ht_own_unmap(void *p, size_t bytes)
{
	syscall(SYS_munmap, p, bytes);
}

/* ---- order.c: which thread recorded the last event on an address ------- */
#define HT_ORDER_BITS 18      /* 2^18 slots of 8 bytes: 2 MiB, touched once threads exist */
#define HT_ORDER_TID_BITS 39  /* the low bits of a key: the thread's index */
#define HT_ORDER_TID_MASK ((1ull << HT_ORDER_TID_BITS) - 1)
extern HT_HIDDEN _Atomic uint64_t ht_order_tab[1u << HT_ORDER_BITS];
/* Gives a thread that starts recording its index (never 0). */
void ht_order__thread(struct ht_tls *t);

/* An address's slot and key.  The slot's index is the address's bits 4..21
 * XORed with its bits 22..39, so that the key needs to hold only the bits
 * from 22 up (25 of them: addresses below 2^47, which is all of user space
 * with 4-level page tables) and 39 bits are left for the thread: given the
 * slot and the key, the address is known.  Neighbouring blocks share a
 * cache line of the table, as they share the heap's; arenas 64 MiB apart
 * land in other slots.  Five instructions for the index, three for the
 * key: no multiply (the hot paths run this twice a malloc/free pair). */
static inline _Atomic uint64_t *ht_order__slot(uint64_t p)
{
	return &ht_order_tab[((p ^ (p >> HT_ORDER_BITS)) >> 4) & ((1u << HT_ORDER_BITS) - 1)];
}

static inline uint64_t ht_order__key(const struct ht_tls *t, uint64_t p)
{
	return (p >> (4 + HT_ORDER_BITS)) << HT_ORDER_TID_BITS | t->oidx;
}

/* Whether a recorded malloc/free on p needs to leave the fast path: a
 * second thread exists and the last event recorded on p (in the table) is
 * not this thread's. */
static inline int ht_order__other(const struct ht_tls *t, uint64_t p)
{
	/* laid out for the threaded case: a program with one thread pays a
	 * taken branch, one with threads no jump out and back */
	if (HT_LIKELY(atomic_load_explicit(&ht_multithreaded, memory_order_relaxed)))
		return atomic_load_explicit(ht_order__slot(p), memory_order_relaxed) !=
		       ht_order__key(t, p);
	return 0;
}

/* Notes an event on p that is being recorded, before the call releases p
 * or after the call handed p out.  Returns 1 if it must be dated: the last
 * event recorded on p was another thread's, or is not known. */
static inline int ht_order__note(const struct ht_tls *t, uint64_t p)
{
	if (!atomic_load_explicit(&ht_multithreaded, memory_order_relaxed))
		return 0;
	_Atomic uint64_t *s = ht_order__slot(p);
	uint64_t k = ht_order__key(t, p);
	if (atomic_load_explicit(s, memory_order_relaxed) == k)
		return 0;
	atomic_store_explicit(s, k, memory_order_relaxed);
	return 1;
}

/* Forgets the last event on p: the next one, in any thread, is dated.  For
 * a call that may release p before its record is written (realloc). */
static inline void ht_order__forget(uint64_t p)
{
	if (atomic_load_explicit(&ht_multithreaded, memory_order_relaxed))
		atomic_store_explicit(ht_order__slot(p), 0, memory_order_relaxed);
}

/* ---- writer.c: the background writer thread and the output file -------- */
int ht_writer__start(void);
/* Sets a header flag of the trace (HT_FILE_F_NAMESPACE), now or when the
 * header is made. */
void ht_writer__add_flag(uint64_t flag);
/* Flushes everything committed so far; waits up to timeout_ms. */
void ht_writer__sync(int timeout_ms);
/* Final flush, index, header patch; recording stops for good.  sig: the
 * fatal signal the program dies of (in its handler), else 0. */
void ht_writer__shutdown(int sig);
/* In the child after fork: new file, new writer thread. */
void ht_writer__after_fork_child(void);
/* init.c: the recorder's state in a new process made from this one (fork's
 * atfork handler, and the child of a clone() without CLONE_VM, hooks.c). */
void ht_init__after_fork_child(void);
/* A full buffer was queued: wake the writer if it sleeps. */
void ht_writer__kick(void);
/* The program is about to close or replace (dup2, dup3, close_range,
 * closefrom) the descriptors lo..hi of its table: if the trace's is among
 * them, its threads stop writing through it for good (self_drain), once
 * no thread of the program is in the middle of a write. */
void ht_writer__fds_closing(unsigned lo, unsigned hi);
/* Every buffer is taken: wakes the writer, whatever the count (buffer.c). */
void ht_writer__wake(void);
/* First event of a fork child: start its writer thread. */
void ht_writer__ensure_started(void);
/* 1 in a followed fork child that has recorded nothing since the fork:
 * it has no file yet (its writer starts with its first event). */
int ht_writer__child_unstarted(void);
/* Before exec: write everything and close the file as complete. */
void ht_writer__before_exec(void);
/* After a failed exec: go on recording into the same file. */
void ht_writer__exec_failed(void);
/* Every buffer waits for the writer: if its helper process died, write
 * them out from this thread (and say so, once). */
void ht_writer__rescue(void);
/* The helper process while it writes the trace (a child of this process
 * without exit signal), else 0; and: it is gone (reaped by the program's
 * wait, which hooks.c hid from the program). */
pid_t ht_writer__helper_pid(void);
void ht_writer__helper_gone(void);
/* If a write failed and nobody said so yet: stop recording, say so once. */
void ht_writer__report_failure(void);

/* ---- init.c: start-up, fork, exit, signals ----------------------------- */
extern _Atomic int ht_initialized; /* 1 once the constructor has run */
void ht_init(void);
int ht_is_root_image(void);
int ht_image_index(void);
char *const *ht_exec_env(char *const envp[], char **out, size_t cap, char *entry, size_t elen);
/* envp as it goes to an image that must run without the tracer (a
 * sanitizer's build): LD_PRELOAD without this library's word (dropped if
 * nothing else is left in it) and no HEAPTRAIL_OPTIONS; envp itself when
 * it holds neither.  out has room for as many entries as envp and a NULL. */
char *const *ht_exec_env_untraced(char *const envp[], char **out, size_t cap, char *entry,
				  size_t elen);
/* execcheck.c: the sanitizer runtime (libasan.so.8, ...) the ELF file path
 * (or fd, when not -1) needs, in lib; 0 if it needs one, else -1.  Opens,
 * reads and closes the file: no allocation (between fork and exec). */
int ht_exec_sanitizer(const char *path, int fd, char *lib, size_t cap);
/* Arms the per-thread destructor that records THREAD_EXIT. */
void ht_register_thread_exit(void);
/* 1 if this is a vfork child sharing the traced process's memory. */
int ht_foreign_process(void);
/* 1 if the effective user or group differs from the one the tracer started
 * with (a fork child that dropped privileges before it exec'ed). */
int ht_identity_changed(void);

/* ---- alloc.c: the allocator the malloc API is forwarded to -------------- */
extern int ht_alloc_other; /* 1: another allocator than glibc's serves malloc */
extern _Atomic int ht_alloc_state; /* 2 once looked up */
/* Looks the allocator up, once (every forwarder below does it first). */
void ht_alloc__resolve(void);
/* Whether another allocator than glibc's serves malloc, looked up first if
 * not yet. */
static inline int ht_alloc__is_other(void)
{
	if (HT_UNLIKELY(atomic_load_explicit(&ht_alloc_state, memory_order_acquire) != 2))
		ht_alloc__resolve();
	return HT_UNLIKELY(ht_alloc_other);
}
/* Says so when the program's malloc is not this library's (a library before
 * it in LD_PRELOAD, an executable with its own malloc): nothing recorded. */
void ht_alloc__check_first(void);
extern void *ht_self_malloc(size_t size);
/* The other allocator's library, or NULL with glibc's. */
const char *ht_alloc__path(void);
void *ht_alloc__malloc(size_t size);
void ht_alloc__free(void *p);
void *ht_alloc__calloc(size_t n, size_t size);
void *ht_alloc__realloc(void *old, size_t size);
void *ht_alloc__memalign(size_t align, size_t size);
void *ht_alloc__aligned_alloc(size_t align, size_t size);
/* posix_memalign's return value; *out set only when it is 0. */
int ht_alloc__posix_memalign(void **out, size_t align, size_t size);
void *ht_alloc__valloc(size_t size);
void *ht_alloc__pvalloc(size_t size);
int ht_alloc__mallopt(int param, int value);
/* The other allocator's usable size of p (size if it has no answer). */
uint64_t ht_alloc__usable(void *p, uint64_t size);

/* ---- hooks.c: free's record around the call, and what cxxops.c records
 * of another allocator's operators ---------------------------------------- */
struct ht_free_timing {
	int timed;  /* --durations: the record waits for free_done */
	int flags;  /* (then) the block's flags */
	uint64_t t0; /* (then) when the call started */
};
/* The clock before a timed call (record --durations), 0 when untimed. */
uint64_t ht_hooks__timed_start(void);
void ht_hooks__new_done(size_t size, size_t align, void *p, uint64_t t0);
void ht_hooks__free_start(void *p, struct ht_free_timing *d);
void ht_hooks__free_done(void *p, const struct ht_free_timing *d);

/* ---- hooks.c: forwarding targets resolved with dlsym(RTLD_NEXT) -------- */
void ht_hooks__resolve(void);
int ht_real_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
			   void *arg);

#endif
