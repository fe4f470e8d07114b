/* The interposed functions.  malloc and free are written out by hand: they
 * are the hot path (one timestamp, a few varints, one release store).  The
 * rest go through the table-driven ht_record().
 *
 * Timestamps: taken after the call for everything that hands out memory
 * (malloc, mmap, ...), before the call for everything that gives it back
 * (free, munmap, shmdt), so that "free(p) in T1, then malloc returns p in
 * T2" is ordered correctly by timestamp (docs/FORMAT.md, "Ordering"). */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <spawn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/procstat.h"
#include "../common/sanitizers.h"
#include "preload.h"

/* glibc's own entry points, which the fast paths call (alloc.c forwards the
 * rest, to another allocator when the program runs on one). */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__curbrk;

/* Everything else is found with dlsym(RTLD_NEXT) once, at start-up. */
static struct {
	int (*malloc_trim)(size_t);
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	void *(*mmap64)(void *, size_t, int, int, int, off64_t);
	int (*munmap)(void *, size_t);
	void *(*mremap)(void *, size_t, size_t, int, ...);
	int (*brk)(void *);
	void *(*sbrk)(intptr_t);
	int (*shmget)(key_t, size_t, int);
	void *(*shmat)(int, const void *, int);
	int (*shmdt)(const void *);
	int (*shmctl)(int, int, struct shmid_ds *);
	int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	int (*pthread_setname_np)(pthread_t, const char *);
	pid_t (*fork)(void);
	pid_t (*_Fork)(void);
	int (*clone)(int (*)(void *), void *, int, void *, ...);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	int (*fexecve)(int, char *const[], char *const[]);
	int (*posix_spawn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			   const posix_spawnattr_t *, char *const[], char *const[]);
	int (*posix_spawnp)(pid_t *, const char *, const posix_spawn_file_actions_t *,
			    const posix_spawnattr_t *, char *const[], char *const[]);
	void (*_exit)(int) __attribute__((noreturn));
	void (*_Exit)(int) __attribute__((noreturn));
	void (*exit)(int) __attribute__((noreturn));
	int (*dlclose)(void *);
	void *(*dlmopen)(Lmid_t, const char *, int);
	pid_t (*waitpid)(pid_t, int *, int);
	pid_t (*wait3)(int *, int, struct rusage *);
	pid_t (*wait4)(pid_t, int *, int, struct rusage *);
	int (*waitid)(idtype_t, id_t, siginfo_t *, int);
	long (*ptrace)(enum __ptrace_request, ...);
	int (*close)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*close_range)(unsigned, unsigned, int);
	void (*closefrom)(int);
} real;

#define RESOLVE(name) real.name = (__typeof__(real.name))dlsym(RTLD_NEXT, #name)

void ht_hooks__resolve(void)
{
	ht_tls.guard += HT_GUARD_OWN;
	RESOLVE(malloc_trim);
	RESOLVE(mmap);
	RESOLVE(mmap64);
	RESOLVE(munmap);
	RESOLVE(mremap);
	RESOLVE(brk);
	RESOLVE(sbrk);
	RESOLVE(shmget);
	RESOLVE(shmat);
	RESOLVE(shmdt);
	RESOLVE(shmctl);
	RESOLVE(pthread_create);
	RESOLVE(pthread_setname_np);
	RESOLVE(fork);
	RESOLVE(_Fork);
	RESOLVE(clone);
	RESOLVE(execve);
	RESOLVE(execvpe);
	RESOLVE(fexecve);
	RESOLVE(posix_spawn);
	RESOLVE(posix_spawnp);
	RESOLVE(_exit);
	RESOLVE(_Exit);
	RESOLVE(exit);
	RESOLVE(dlclose);
	RESOLVE(dlmopen);
	RESOLVE(waitpid);
	RESOLVE(wait3);
	RESOLVE(wait4);
	RESOLVE(waitid);
	RESOLVE(ptrace);
	RESOLVE(close);
	RESOLVE(dup2);
	RESOLVE(dup3);
	RESOLVE(close_range);
	RESOLVE(closefrom);
	ht_tls.guard -= HT_GUARD_OWN;
}

static inline int tracing(const struct ht_tls *t)
{
	return HT_LIKELY(atomic_load_explicit(&ht_on, memory_order_relaxed)) && !t->guard;
}

/* A call that came in while the thread was writing a record: a signal
 * handler's (nested.c).  Asked of every call not recorded, which also
 * counts the calls that come while the process exits (ht_closing: the
 * exit stopped the recording to close the trace, and other threads go on
 * until the process ends): not in the trace, they are said with the calls
 * not recorded.  (A clean exit while three threads allocated lost 2.5 to
 * 4.5% of their calls and said nothing.)  While the process execs, the
 * other threads wait here (ht_exec_hold). */
static inline int nested(const struct ht_tls *t)
{
	if (HT_UNLIKELY(t->guard >= HT_GUARD_STRICT)) { /* (a memory write: all it may do) */
		atomic_fetch_add_explicit(ht_dropped_p, 1, memory_order_relaxed);
		return 0;
	}
	if (HT_UNLIKELY(atomic_load_explicit(&ht_closing, memory_order_relaxed)) && !t->guard)
		atomic_fetch_add_explicit(ht_dropped_p, 1, memory_order_relaxed);
	if (HT_UNLIKELY(atomic_load_explicit(&ht_exec_hold, memory_order_relaxed)) && !t->guard)
		ht_writer__exec_hold_wait();
	return HT_UNLIKELY(t->guard == HT_GUARD_REC);
}

static void keep_alloc(struct ht_tls *t, int kind, uint64_t a0, uint64_t a1, uint64_t a2,
		       uint64_t size, void *p);
static void keep_free(struct ht_tls *t, void *p);

/* tracing(), for the calls nested.c does not keep: such a call made by a
 * signal handler during a record is counted instead. */
static inline int tracing_else_drop(const struct ht_tls *t)
{
	if (tracing(t))
		return 1;
	if (nested(t))
		ht_nested__drop();
	return 0;
}

/* ---- the hot path ------------------------------------------------------ */

static _Atomic uintptr_t last_brk;

/* After a call that may have moved the program break: one HEAP_BREAK event
 * in the thread whose call moved it. */
static __attribute__((noinline)) void note_brk(uintptr_t now)
{
	uintptr_t old = atomic_load_explicit(&last_brk, memory_order_relaxed);
	if (old == now || !atomic_compare_exchange_strong(&last_brk, &old, now))
		return;
	uint64_t v[1] = {now};
	ht_record(HT_EV_HEAP_BREAK, 0, ht_now(), v, NULL);
}

static inline void check_brk(void)
{
	uintptr_t b = (uintptr_t)__curbrk;
	if (HT_UNLIKELY(b != atomic_load_explicit(&last_brk, memory_order_relaxed)))
		note_brk(b);
}

/* glibc's chunk header: size | IS_MMAPPED (2) | NON_MAIN_ARENA (4). */
static inline int chunk_flags(const void *p, uint64_t *usable)
{
	size_t h = ((const size_t *)p)[-1];
	int mm = (h & 2) != 0;
	*usable = (h & ~(size_t)7) - (mm ? 2 * sizeof(size_t) : sizeof(size_t));
	/* (never both: glibc marks no mmapped chunk as an arena's, and the
	 * pair of bits is a short record's in the format, format.h) */
	return mm ? HT_F_MMAPPED : (h & 4) ? HT_F_NONMAIN : 0;
}

/* chunk_flags() for any allocator: another one's blocks have no such
 * header, and their usable size is the allocator's answer (alloc.c). */
static inline int block_flags(const void *p, uint64_t size, uint64_t *usable)
{
	if (HT_UNLIKELY(ht_alloc_other)) {
		*usable = ht_alloc__usable((void *)p, size);
		return 0;
	}
	return chunk_flags(p, usable);
}

/* The 'U' field of a record (format.h): 0 whenever glibc's rounding
 * explains the usable size, so that it takes no bytes. */
static inline uint64_t ht_slack(const void *p, uint64_t size, uint64_t usable, int flags)
{
	if (!p)
		return 0;
	if (flags & HT_F_MMAPPED)
		return usable - size;
	return ht_zigzag((int64_t)(usable - ht_glibc_usable(size)));
}

static inline void commit(struct ht_tls *t)
{
	atomic_store_explicit(&t->buf->commit,
			      (t->nev << HT_COMMIT_SHIFT) | (uint64_t)(t->pos - t->buf->data),
			      memory_order_release);
}

/* The end of every hot-path record: the base of the next pointer delta,
 * the write position, the event count and the commit the writer reads. */
static inline __attribute__((always_inline)) void rec_done(struct ht_tls *t, uint8_t *o,
							    const void *p)
{
	t->last_ptr = (uintptr_t)p;
	t->pos = o;
	t->nev++;
	commit(t);
}

/* A malloc record without a stack, up to its timestamp field: kind and
 * flags, the tag's two bytes, size, pointer delta and slack. */
static inline __attribute__((always_inline)) uint8_t *
put_malloc(uint8_t *o, int flags, uint32_t tag, uint64_t f0, unsigned c0, uint64_t f1, unsigned c1,
	   uint64_t f2, unsigned c2)
{
	o[0] = (uint8_t)(HT_EV_MALLOC | flags);
	o[1] = (uint8_t)tag;
	o[2] = (uint8_t)(tag >> 8);
	o = ht_put_field(o + 3, f0, c0);
	o = ht_put_field(o, f1, c1);
	return ht_put_field(o, f2, c2);
}

/* Whether this malloc/free takes the clock: every ts_every-th call of the
 * thread, the first one after an epoch tick of the writer, and any call on
 * a block glibc mmapped (rare, and slow anyway).  The others store no
 * timestamp; readers date them by the thread's previous sample and order
 * them across threads by address causality (docs/FORMAT.md, "Timestamps").
 * RDTSC costs 8-13 ns here, as much as the rest of the record. */
static inline int ts_due(struct ht_tls *t, int flags)
{
	uint32_t e = atomic_load_explicit(ht_epoch_p, memory_order_relaxed);
	return (--t->ts_left == 0) | (e != t->epoch) | (flags & HT_F_MMAPPED);
}

/* ts_due() for a malloc/free on p, which also takes the clock whenever the
 * last event recorded on p was another thread's (order.c): what makes the
 * merged order of the threads exact.  Notes the event in the order table,
 * so it must be called once for every recorded malloc/free, before a free
 * releases its block. */
static inline int ts_due_on(struct ht_tls *t, int flags, const void *p)
{
	int other = HT_LIKELY(p != NULL) ? ht_order__note(t, (uintptr_t)p) : 0;
	return ts_due(t, flags) | other;
}

/* The timestamp field of a sampled hot-path record: delta + 1 (0 = none). */
static inline uint64_t ts_field(struct ht_tls *t, uint64_t ts)
{
	uint64_t f = ts - t->last_ts + 1;
	t->last_ts = ts;
	t->ts_left = (uint32_t)ht_opt.ts_every;
	t->epoch = atomic_load_explicit(ht_epoch_p, memory_order_relaxed);
	return f;
}

/* The slow half of hot_ready(): a thread that is not active yet (or any
 * more), or a full buffer. */
static __attribute__((noinline, cold)) int hot_ready_slow(struct ht_tls *t, int release,
							   int timed, uint64_t ts)
{
	if (t->state != 1) {
		uint64_t now = timed ? ts : ht_now();
		if (!ht_tls__prepare(t, &now))
			return 0;
	}
	if (ht_tls__drain_kept(t)) /* (a handler's calls, kept during the last record) */
		ht_tls__refill(t, timed ? ts : release ? ht_now_release() : ht_now());
	return 1;
}

/* Makes the thread ready to record a hot-path event; 0 if it cannot.  A
 * timed call (record --durations) passes its own timestamp, so that a new
 * buffer's SYNC record is not dated after the event that follows it.  One
 * compare: t->end is NULL whenever the thread is not active (state != 1),
 * so that pos >= end covers both cases. */
static inline int hot_ready(struct ht_tls *t, int release, int timed, uint64_t ts)
{
	if (HT_UNLIKELY(t->pos >= t->end))
		return hot_ready_slow(t, release, timed, ts);
	return 1;
}

/* record --durations: the DURATION pseudo-record of the event written
 * next.  hot_ready() left room for both records in the buffer. */
static inline void put_duration(struct ht_tls *t, uint64_t dur)
{
	ht_meta__write(t, HT_EV_DURATION, &dur, NULL, 0);
}

/* malloc: fields size, ptr, slack, then the timestamp, then (with
 * --stacks) the stack node; written with unconditional 8-byte stores and
 * branch-free lengths (format.h).  The clock, when due, is read after the
 * real malloc returned.  stack and timed are constant 0 on the fast path;
 * a timed call (--durations) brings its end time ts and its duration. */
static inline __attribute__((always_inline)) void
rec_malloc_with(struct ht_tls *t, size_t size, void *p, int stacked, int timed, uint64_t ts,
		uint64_t dur)
{
	t->guard = HT_GUARD_REC;
	if (!hot_ready(t, 0, timed, ts))
		goto out;
	uint64_t stack = stacked ? ht_stack__capture(t) : 0;
	if (stacked && HT_UNLIKELY(t->pos >= t->end)) /* the capture wrote frames */
		ht_tls__room(t, timed ? ts : ht_now());
	if (timed)
		put_duration(t, dur);
	uint64_t usable = size;
	int flags = HT_LIKELY(p != NULL) ? block_flags(p, size, &usable) : 0;
	uint64_t f0 = size;
	uint64_t f1 = ht_zigzag((int64_t)((uintptr_t)p - t->last_ptr));
	uint64_t f2 = ht_slack(p, size, usable, flags);
	if (timed && p)
		ht_order__note(t, (uintptr_t)p); /* dated anyway */
	uint64_t f3 = timed ? ts_field(t, ts)
		      : HT_UNLIKELY(ts_due_on(t, flags, p)) ? ts_field(t, ht_now()) : 0;
	unsigned c0 = ht_len_bytes(f0), c1 = ht_len_bytes(f1), c2 = ht_len_bytes(f2),
		 c3 = ht_len_bytes(f3);
	uint32_t tag = c0 | c1 << 4 | c2 << 8 | c3 << 12;
	uint8_t *o = t->pos;
	if (!(stacked && stack) && ht_short_malloc_ok((unsigned)flags, c0, c1, f2, f3)) {
		o = ht_put_short_malloc(o, (unsigned)flags, f0, c0, f1, c1);
	} else if (stacked && stack) {
		unsigned c4 = ht_len_bytes(stack);
		o[0] = (uint8_t)(HT_EV_MALLOC | flags | HT_F_STACK);
		o[1] = (uint8_t)tag;
		o[2] = (uint8_t)(tag >> 8);
		o[3] = (uint8_t)c4;
		o = ht_put_field(o + 4, f0, c0);
		o = ht_put_field(o, f1, c1);
		o = ht_put_field(o, f2, c2);
		o = ht_put_field(o, f3, c3);
		o = ht_put_field(o, stack, c4);
	} else {
		o = put_malloc(o, flags, tag, f0, c0, f1, c1, f2, c2);
		o = ht_put_field(o, f3, c3);
	}
	rec_done(t, o, p);
out:
	t->guard = 0;
	check_brk();
}

static inline void rec_malloc(struct ht_tls *t, size_t size, void *p)
{
	rec_malloc_with(t, size, p, 0, 0, 0, 0);
}

/* free: fields ptr, then the timestamp, read (when due) before the real
 * free releases the block.  A timed free (--durations) is recorded after
 * the real call, with the chunk flags read before it (the block may be
 * unmapped by then) and its start time ts. */
static inline __attribute__((always_inline)) void rec_free_with(struct ht_tls *t, void *p,
								int timed, int tflags,
								uint64_t ts, uint64_t dur)
{
	t->guard = HT_GUARD_REC;
	if (!hot_ready(t, 1, timed, ts))
		goto out;
	uint64_t usable;
	int flags = timed ? tflags : HT_LIKELY(p != NULL) ? block_flags(p, 0, &usable) : 0;
	if (timed)
		put_duration(t, dur);
	uint64_t f0 = ht_zigzag((int64_t)((uintptr_t)p - t->last_ptr));
	uint64_t f1 = timed ? ts_field(t, ts)
		      : HT_UNLIKELY(ts_due_on(t, flags, p)) ? ts_field(t, ht_now_release()) : 0;
	unsigned c0 = ht_len_bytes(f0), c1 = ht_len_bytes(f1);
	uint8_t *o = t->pos;
	if (ht_short_free_ok((unsigned)flags, c0, f1)) {
		o = ht_put_short_free(o, (unsigned)flags, f0, c0);
	} else {
		o[0] = (uint8_t)(HT_EV_FREE | flags);
		o[1] = (uint8_t)(c0 | c1 << 4);
		o = ht_put_field(o + 2, f0, c0);
		o = ht_put_field(o, f1, c1);
	}
	rec_done(t, o, p);
out:
	t->guard = 0;
}

static inline __attribute__((always_inline)) void rec_free(struct ht_tls *t, void *p)
{
	rec_free_with(t, p, 0, 0, 0, 0);
}

/* malloc with its stack (record --stacks), sampled (--sample-bytes) or
 * timed (--durations: t0 is when the call started, 0 if untimed). */
static __attribute__((noinline)) void rec_malloc_slow(struct ht_tls *t, size_t size, void *p,
						      uint64_t t0)
{
	if (HT_UNLIKELY(!ht_initialized)) {
		/* an allocation before our constructor (another library's):
		 * read the options first, they may ask for its stack */
		t->guard += HT_GUARD_OWN;
		ht_init();
		t->guard -= HT_GUARD_OWN;
		if (!tracing(t))
			return;
	}
	if (ht_opt.sample_bytes && !ht_sample__alloc(t, size, (uintptr_t)p)) {
		check_brk();
		return;
	}
	uint64_t t1 = t0 ? ht_now() : 0;
	if (ht_opt.stack_depth)
		rec_malloc_with(t, size, p, 1, t0 != 0, t1, t1 - t0);
	else if (t0)
		rec_malloc_with(t, size, p, 0, 1, t1, t1 - t0);
	else
		rec_malloc_with(t, size, p, 0, 0, 0, 0);
}

/* The clock before a timed call (record --durations), 0 when untimed. */
static inline uint64_t timed_start(void)
{
	return HT_UNLIKELY(ht_opt.durations) && tracing(&ht_tls) ? ht_now() : 0;
}

/* malloc out of the fast path: before the options are read, and with
 * stacks, sampling or durations (which take the clock before the call). */
static __attribute__((noinline)) void *malloc_slow(struct ht_tls *t, size_t size)
{
	uint64_t t0 = timed_start();
	void *p = ht_alloc__malloc(size);
	if (tracing(t))
		rec_malloc_slow(t, size, p, t0);
	else if (nested(t))
		keep_alloc(t, HT_EV_MALLOC, size, 0, 0, size, p);
	return p;
}

/* ht_len_bytes() for the fast paths, which run only where the CPU has
 * LZCNT (init.c sends malloc and free to their slow paths otherwise). */
static inline unsigned len_fast(uint64_t v)
{
#if defined(__x86_64__)
	uint64_t z;
	__asm__("lzcnt %1, %0" : "=r"(z) : "rm"(v) : "cc");
	return (unsigned)(71 - z) >> 3;
#else
	return ht_len_bytes(v);
#endif
}

/* Asks for the buffer's line 128 bytes ahead, for writing, so that the
 * record stores that reach it later hit the cache: a locked instruction
 * (glibc's arena locks once the program has threads) waits for every store
 * in flight, a missing one included.  0.8-1 ns a malloc/free pair, with
 * threads and without (bench/run.sh).  Only CPUs with PREFETCHW take the
 * fast paths (init.c). */
static inline void buf_prefetch(const uint8_t *o)
{
#if defined(__x86_64__)
	__asm__ volatile("prefetchw %0" : : "m"(o[128]));
#else
	__builtin_prefetch(o + 128, 1);
#endif
}

/* malloc's record when the fast path below cannot write it: a thread not
 * ready or out of room, a clock read due, a NULL or mmapped block. */
static __attribute__((noinline, cold)) void *malloc_rec_cold(size_t size, void *p)
{
	rec_malloc(&ht_tls, size, p);
	return p;
}

/* A program break that moved during the call: noted out of line. */
static __attribute__((noinline, cold)) void *brk_moved(void *p)
{
	note_brk((uintptr_t)__curbrk);
	return p;
}

/* Whether the hot paths can leave the clock alone for this call: not the
 * thread's ts_every-th, no epoch tick since its last sample, and no mmapped
 * block (ts_due() is the general form). */
static inline int ts_skip(const struct ht_tls *t, int flags)
{
	uint32_t e = atomic_load_explicit(ht_epoch_p, memory_order_relaxed);
	return HT_LIKELY(((t->ts_left != 1) & (e == t->epoch)) && !(flags & HT_F_MMAPPED));
}

/* The recording half of malloc in its common case, out of line so that
 * malloc itself keeps one value (size) across the real call and ends in a
 * tail call.  It calls nothing: every rare case leaves through a tail call
 * (malloc_rec_cold, brk_moved), so that it saves few registers and free
 * builds no stack frame (with free's fast path: 1-2.5 ns a pair less,
 * bench/run.sh).  HEAPTRAIL_FAST_PATH=0 (a test) checks that it writes
 * what rec_malloc() writes. */
static __attribute__((noinline)) void *malloc_rec(size_t size, void *p)
{
	struct ht_tls *t = &ht_tls;
	t->guard = HT_GUARD_REC;
	atomic_signal_fence(memory_order_seq_cst);
	uint8_t *o = t->pos;
	buf_prefetch(o);
	int flags = 0;
	uint64_t usable = 0;
	if (HT_LIKELY(p != NULL))
		flags = chunk_flags(p, &usable);
	if (HT_UNLIKELY(o >= t->end || !p) || !ts_skip(t, flags) ||
	    HT_UNLIKELY(ht_order__other(t, (uintptr_t)p))) {
		t->guard = 0;
		return malloc_rec_cold(size, p);
	}
	t->ts_left--;
	uint64_t f0 = size;
	uint64_t f1 = ht_zigzag((int64_t)((uintptr_t)p - t->last_ptr));
	uint64_t f2 = ht_zigzag((int64_t)(usable - ht_glibc_usable(size)));
	unsigned c0 = len_fast(f0), c1 = len_fast(f1), c2 = len_fast(f2);
	if (HT_LIKELY(ht_short_malloc_ok((unsigned)flags, c0, c1, f2, 0))) {
		o = ht_put_short_malloc(o, (unsigned)flags, f0, c0, f1, c1);
	} else {
		uint32_t tag = c0 | c1 << 4 | c2 << 8;
		o = put_malloc(o, flags, tag, f0, c0, f1, c1, f2, c2);
	}
	rec_done(t, o, p);
	atomic_signal_fence(memory_order_seq_cst);
	t->guard = 0;
	if (HT_UNLIKELY((uintptr_t)__curbrk != atomic_load_explicit(&last_brk, memory_order_relaxed)))
		return brk_moved(p);
	return p;
}

HT_EXPORT void *malloc(size_t size)
{
	struct ht_tls *t = &ht_tls;
	if (HT_UNLIKELY(ht_opt.slow_malloc))
		return malloc_slow(t, size);
	void *p = __libc_malloc(size);
	if (tracing(t))
		return malloc_rec(size, p);
	if (nested(t))
		keep_alloc(t, HT_EV_MALLOC, size, 0, 0, size, p);
	return p;
}

/* This library's own malloc, whatever the program's is (alloc.c). */
extern __typeof__(malloc) ht_self_malloc
	__attribute__((alias("malloc"), copy(malloc), visibility("hidden")));

/* Before a free (or another allocator's operator delete) gives p back:
 * its record written (or kept, or left out when sampled out).  With
 * --durations the record waits for ht_hooks__free_done, which *d
 * prepares. */
void ht_hooks__free_start(void *p, struct ht_free_timing *d)
{
	struct ht_tls *t = &ht_tls;
	d->timed = 0;
	if (!tracing(t)) {
		if (nested(t))
			keep_free(t, p);
		return;
	}
	if (ht_opt.sample_bytes && !ht_sample__free((uintptr_t)p))
		return;
	if (!ht_opt.durations) {
		rec_free(t, p);
		return;
	}
	uint64_t usable;
	d->flags = p ? block_flags(p, 0, &usable) : 0;
	if (p)
		ht_order__note(t, (uintptr_t)p);
	d->timed = 1;
	d->t0 = ht_now_release();
}

void ht_hooks__free_done(void *p, const struct ht_free_timing *d)
{
	if (d->timed)
		rec_free_with(&ht_tls, p, 1, d->flags, d->t0, ht_now() - d->t0);
}

/* free out of the fast path: sampled, or timed (--durations). */
static __attribute__((noinline)) void free_slow(void *p)
{
	struct ht_free_timing d;
	ht_hooks__free_start(p, &d);
	ht_alloc__free(p);
	ht_hooks__free_done(p, &d);
	check_brk();
}

/* free's record and call when the fast path below cannot write it. */
static __attribute__((noinline, cold)) void free_cold(void *p)
{
	rec_free(&ht_tls, p);
	ht_alloc__free(p);
	check_brk();
}

/* free in its common case: the record is written before the real free
 * (the block may be reused by another thread right after it) and calls
 * nothing; every rare case leaves through a tail call, so that p is the
 * only value kept and no register needs saving. */
HT_EXPORT void free(void *p)
{
	struct ht_tls *t = &ht_tls;
	if (!tracing(t)) {
		if (nested(t))
			keep_free(t, p);
		ht_alloc__free(p);
		return;
	}
	if (HT_UNLIKELY(ht_opt.slow_free)) {
		free_slow(p);
		return;
	}
	t->guard = HT_GUARD_REC;
	atomic_signal_fence(memory_order_seq_cst);
	uint8_t *o = t->pos;
	int flags = 0;
	if (HT_LIKELY(p != NULL)) {
		uint64_t usable;
		flags = chunk_flags(p, &usable);
	}
	if (HT_UNLIKELY(o >= t->end || !p) || !ts_skip(t, flags) ||
	    HT_UNLIKELY(ht_order__other(t, (uintptr_t)p))) {
		t->guard = 0;
		free_cold(p);
		return;
	}
	t->ts_left--;
	uint64_t f0 = ht_zigzag((int64_t)((uintptr_t)p - t->last_ptr));
	unsigned c0 = len_fast(f0);
	if (HT_LIKELY(c0 <= 7)) { /* (a user-space delta always) */
		o = ht_put_short_free(o, (unsigned)flags, f0, c0);
	} else {
		o[0] = (uint8_t)(HT_EV_FREE | flags);
		o[1] = (uint8_t)c0;
		o = ht_put_field(o + 2, f0, c0);
	}
	rec_done(t, o, p);
	atomic_signal_fence(memory_order_seq_cst);
	t->guard = 0;
	__libc_free(p);
	check_brk();
}

/* ---- the rest of the malloc API ---------------------------------------- */

static inline uint64_t slack(const void *p, uint64_t size, int *flags)
{
	uint64_t usable = 0;
	*flags = p ? block_flags(p, size, &usable) : 0;
	return ht_slack(p, size, usable, *flags);
}

/* The field values of an allocation-kind event (ht_record's vals) and its
 * chunk flags; the number of values, 0 for a kind not of this family. */
static unsigned alloc_vals(int kind, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t size,
			   void *p, uint64_t *v, int *flags)
{
	uint64_t s = slack(p, size, flags);
	switch (kind) {
	case HT_EV_MALLOC:
		v[0] = a0, v[1] = (uintptr_t)p, v[2] = s;
		return 3;
	case HT_EV_CALLOC:
	case HT_EV_MEMALIGN:
	case HT_EV_ALIGNED_ALLOC:
		v[0] = a0, v[1] = a1, v[2] = (uintptr_t)p, v[3] = s;
		return 4;
	case HT_EV_VALLOC:
	case HT_EV_PVALLOC:
		v[0] = a0, v[1] = (uintptr_t)p, v[2] = s;
		return 3;
	case HT_EV_POSIX_MEMALIGN:
		v[0] = a0, v[1] = a1, v[2] = (uintptr_t)p, v[3] = a2, v[4] = s;
		return 5;
	default:
		return 0;
	}
}

static void rec_alloc(int kind, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t size, void *p,
		      uint64_t t0)
{
	int flags;
	uint64_t v[5];
	uint64_t ts = ht_now();
	if (!alloc_vals(kind, a0, a1, a2, size, p, v, &flags))
		return;
	if (t0)
		ht_record_timed(kind, flags, ts, ts - t0, v);
	else
		ht_record(kind, flags, ts, v, NULL);
	check_brk();
}

/* An allocation a signal handler made while its thread was recording: kept
 * (nested.c), and the block's next event in another thread dated. */
static __attribute__((noinline, cold)) void keep_alloc(struct ht_tls *t, int kind, uint64_t a0,
							uint64_t a1, uint64_t a2, uint64_t size,
							void *p)
{
	int flags;
	uint64_t v[5];
	unsigned n = alloc_vals(kind, a0, a1, a2, size, p, v, &flags);
	if (p)
		ht_order__forget((uintptr_t)p);
	ht_nested__keep(t, kind, flags, ht_now(), v, n);
}

/* After an allocation call of kind returned p: recorded, or kept when a
 * signal handler made it during a record (a0..a2 as alloc_vals takes
 * them; t0 the start of a timed call). */
static inline void alloc_done(int kind, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t size,
			      void *p, uint64_t t0)
{
	struct ht_tls *t = &ht_tls;
	if (tracing(t))
		rec_alloc(kind, a0, a1, a2, size, p, t0);
	else if (nested(t))
		keep_alloc(t, kind, a0, a1, a2, size, p);
}

/* The same for a free, before the block is released. */
static __attribute__((noinline, cold)) void keep_free(struct ht_tls *t, void *p)
{
	uint64_t usable, v[1] = {(uintptr_t)p};
	int flags = p ? block_flags(p, 0, &usable) : 0;
	if (p)
		ht_order__forget((uintptr_t)p);
	ht_nested__keep(t, HT_EV_FREE, flags, ht_now_release(), v, 1);
}

/* The field values of a REALLOC event (old, size, ptr, usable, dur) or a
 * REALLOCARRAY one (old, nmemb, size, ptr, usable, dur; n x size = bytes)
 * and the block's flags; the number of values. */
static unsigned realloc_vals(int kind, void *old, size_t n, size_t size, size_t bytes, void *p,
			     uint64_t dur, uint64_t *v, int *flags)
{
	unsigned k = 0;
	v[k++] = (uintptr_t)old;
	if (kind == HT_EV_REALLOCARRAY)
		v[k++] = n;
	v[k++] = size;
	v[k++] = (uintptr_t)p;
	v[k++] = slack(p, bytes, flags);
	v[k++] = dur;
	return k;
}

/* The same for a realloc (REALLOC or REALLOCARRAY: n x size bytes). */
static __attribute__((noinline, cold)) void *keep_realloc(struct ht_tls *t, int kind, void *old,
							   size_t n, size_t size, size_t bytes)
{
	if (old)
		ht_order__forget((uintptr_t)old);
	uint64_t t0 = ht_now_release();
	void *p = ht_alloc__realloc(old, bytes);
	uint64_t ts = ht_now();
	int flags;
	uint64_t v[6];
	unsigned k = realloc_vals(kind, old, n, size, bytes, p, ts - t0, v, &flags);
	if (p)
		ht_order__forget((uintptr_t)p);
	ht_nested__keep(t, kind, flags, ts, v, k);
	return p;
}

HT_EXPORT void *calloc(size_t n, size_t size)
{
	uint64_t t0 = timed_start();
	void *p = ht_alloc__calloc(n, size);
	alloc_done(HT_EV_CALLOC, n, size, 0, (uint64_t)n * size, p, t0);
	return p;
}

/* Before a traced realloc calls glibc, which may release old to another
 * thread before the call returns: what depends on old is settled now (the
 * order table forgets it, the sampler decides whether it was sampled). */
static inline void realloc_start(struct ht_tls *t, void *old)
{
	if (!old)
		return;
	ht_order__forget((uintptr_t)old);
	if (HT_UNLIKELY(ht_opt.sample_bytes))
		ht_sample__realloc_start(t, (uintptr_t)old);
}

/* realloc and reallocarray (n x size = bytes), recorded or kept. */
static void *realloc_call(int kind, void *old, size_t n, size_t size, size_t bytes)
{
	struct ht_tls *t = &ht_tls;
	if (!tracing(t))
		return nested(t) ? keep_realloc(t, kind, old, n, size, bytes)
				 : ht_alloc__realloc(old, bytes);
	realloc_start(t, old);
	uint64_t t0 = ht_now_release();
	void *p = ht_alloc__realloc(old, bytes);
	uint64_t ts = ht_now();
	int flags;
	uint64_t v[6];
	realloc_vals(kind, old, n, size, bytes, p, ts - t0, v, &flags);
	ht_record(kind, flags, ts, v, NULL);
	check_brk();
	return p;
}

HT_EXPORT void *realloc(void *old, size_t size)
{
	return realloc_call(HT_EV_REALLOC, old, 1, size, size);
}

HT_EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
	size_t bytes;
	if (__builtin_mul_overflow(n, size, &bytes)) {
		errno = ENOMEM;
		if (tracing_else_drop(&ht_tls)) {
			uint64_t ts = ht_now();
			uint64_t v[6] = {(uintptr_t)old, n, size, 0, 0, 0};
			ht_record(HT_EV_REALLOCARRAY, 0, ts, v, NULL);
		}
		return NULL;
	}
	return realloc_call(HT_EV_REALLOCARRAY, old, n, size, bytes);
}

HT_EXPORT void *memalign(size_t align, size_t size)
{
	uint64_t t0 = timed_start();
	void *p = ht_alloc__memalign(align, size);
	alloc_done(HT_EV_MEMALIGN, align, size, 0, size, p, t0);
	return p;
}

HT_EXPORT void *aligned_alloc(size_t align, size_t size)
{
	uint64_t t0 = timed_start();
	void *p = ht_alloc__aligned_alloc(align, size);
	alloc_done(HT_EV_ALIGNED_ALLOC, align, size, 0, size, p, t0);
	return p;
}

HT_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	uint64_t t0 = timed_start();
	void *p = NULL;
	int ret = ht_alloc__posix_memalign(&p, align, size);
	if (ret == 0)
		*out = p;
	else
		p = NULL;
	alloc_done(HT_EV_POSIX_MEMALIGN, align, size, (uint64_t)(int64_t)ret, size, p, t0);
	return ret;
}

HT_EXPORT void *valloc(size_t size)
{
	uint64_t t0 = timed_start();
	void *p = ht_alloc__valloc(size);
	alloc_done(HT_EV_VALLOC, size, 0, 0, size, p, t0);
	return p;
}

HT_EXPORT void *pvalloc(size_t size)
{
	uint64_t t0 = timed_start();
	void *p = ht_alloc__pvalloc(size);
	alloc_done(HT_EV_PVALLOC, size, 0, 0, size, p, t0);
	return p;
}

HT_EXPORT int mallopt(int param, int value)
{
	uint64_t t0 = timed_start();
	int r = ht_alloc__mallopt(param, value);
	if (tracing_else_drop(&ht_tls)) {
		uint64_t v[3] = {(uint64_t)(int64_t)param, (uint64_t)(int64_t)value, (uint64_t)(int64_t)r};
		uint64_t ts = ht_now();
		if (t0)
			ht_record_timed(HT_EV_MALLOPT, 0, ts, ts - t0, v);
		else
			ht_record(HT_EV_MALLOPT, 0, ts, v, NULL);
	}
	return r;
}

HT_EXPORT int malloc_trim(size_t pad)
{
	if (!real.malloc_trim)
		ht_hooks__resolve();
	uint64_t t0 = timed_start();
	int r = real.malloc_trim ? real.malloc_trim(pad) : 0;
	if (tracing_else_drop(&ht_tls)) {
		uint64_t v[2] = {pad, (uint64_t)(int64_t)r};
		uint64_t ts = ht_now();
		if (t0)
			ht_record_timed(HT_EV_MALLOC_TRIM, 0, ts, ts - t0, v);
		else
			ht_record(HT_EV_MALLOC_TRIM, 0, ts, v, NULL);
		check_brk();
	}
	return r;
}

/* ---- for C++'s operators of another allocator (cxxops.c) --------------- */

uint64_t ht_hooks__timed_start(void)
{
	return timed_start();
}

/* After another allocator's operator new returned p for size bytes
 * (aligned to align, 0 for the plain forms). */
void ht_hooks__new_done(size_t size, size_t align, void *p, uint64_t t0)
{
	struct ht_tls *t = &ht_tls;
	if (align)
		alloc_done(HT_EV_ALIGNED_ALLOC, align, size, 0, size, p, t0);
	else if (tracing(t))
		rec_malloc_slow(t, size, p, t0);
	else if (nested(t))
		keep_alloc(t, HT_EV_MALLOC, size, 0, 0, size, p);
}

/* ---- the program's own mappings ---------------------------------------- */

static void *sys_mmap(void *a, size_t l, int pr, int fl, int fd, off_t off)
{
	long r = syscall(SYS_mmap, a, l, pr, fl, fd, off);
	return (void *)r;
}

static void rec_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off, void *r)
{
	uint64_t v[7] = {(uintptr_t)addr, len, (uint64_t)(int64_t)prot, (uint64_t)(int64_t)flags,
			 (uint64_t)(int64_t)fd, (uint64_t)(int64_t)off, (uintptr_t)r};
	ht_record(HT_EV_MMAP, 0, ht_now(), v, NULL);
}

HT_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *r = real.mmap ? real.mmap(addr, len, prot, flags, fd, off)
			    : sys_mmap(addr, len, prot, flags, fd, off);
	if (tracing_else_drop(&ht_tls))
		rec_mmap(addr, len, prot, flags, fd, off, r);
	return r;
}

HT_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	void *r = real.mmap64 ? real.mmap64(addr, len, prot, flags, fd, off)
			      : sys_mmap(addr, len, prot, flags, fd, off);
	if (tracing_else_drop(&ht_tls))
		rec_mmap(addr, len, prot, flags, fd, off, r);
	return r;
}

HT_EXPORT int munmap(void *addr, size_t len)
{
	if (tracing_else_drop(&ht_tls)) {
		/* Recorded before the call: the range is free from then on. */
		uint64_t ts = ht_now();
		int r = real.munmap ? real.munmap(addr, len) : (int)syscall(SYS_munmap, addr, len);
		uint64_t v[3] = {(uintptr_t)addr, len, (uint64_t)(int64_t)r};
		ht_record(HT_EV_MUNMAP, 0, ts, v, NULL);
		return r;
	}
	return real.munmap ? real.munmap(addr, len) : (int)syscall(SYS_munmap, addr, len);
}

HT_EXPORT void *mremap(void *old, size_t oldlen, size_t newlen, int flags, ...)
{
	void *newaddr = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		newaddr = va_arg(ap, void *);
		va_end(ap);
	}
	int on = tracing_else_drop(&ht_tls);
	uint64_t t0 = on ? ht_now() : 0;
	void *r = real.mremap ? real.mremap(old, oldlen, newlen, flags, newaddr)
			      : (void *)syscall(SYS_mremap, old, oldlen, newlen, flags, newaddr);
	if (on) {
		uint64_t ts = ht_now();
		uint64_t v[7] = {(uintptr_t)old, oldlen, newlen, (uint64_t)(int64_t)flags,
				 (uintptr_t)newaddr, (uintptr_t)r, ts - t0};
		ht_record(HT_EV_MREMAP, 0, ts, v, NULL);
	}
	return r;
}

HT_EXPORT int brk(void *addr)
{
	if (!real.brk)
		ht_hooks__resolve();
	int r = real.brk(addr);
	if (tracing_else_drop(&ht_tls)) {
		uint64_t v[2] = {(uintptr_t)addr, (uint64_t)(int64_t)r};
		ht_record(HT_EV_BRK, 0, ht_now(), v, NULL);
		check_brk();
	}
	return r;
}

HT_EXPORT void *sbrk(intptr_t incr)
{
	if (!real.sbrk)
		ht_hooks__resolve();
	void *r = real.sbrk(incr);
	if (tracing_else_drop(&ht_tls)) {
		uint64_t v[2] = {(uint64_t)(int64_t)incr, (uintptr_t)r};
		ht_record(HT_EV_SBRK, 0, ht_now(), v, NULL);
		check_brk();
	}
	return r;
}

/* ---- SysV shared memory ------------------------------------------------- */

HT_EXPORT int shmget(key_t key, size_t size, int flags)
{
	if (!real.shmget)
		ht_hooks__resolve();
	int r = real.shmget(key, size, flags);
	if (tracing_else_drop(&ht_tls)) {
		uint64_t v[4] = {(uint64_t)(int64_t)key, size, (uint64_t)(int64_t)flags,
				 (uint64_t)(int64_t)r};
		ht_record(HT_EV_SHMGET, 0, ht_now(), v, NULL);
	}
	return r;
}

HT_EXPORT void *shmat(int id, const void *addr, int flags)
{
	if (!real.shmat)
		ht_hooks__resolve();
	void *r = real.shmat(id, addr, flags);
	if (tracing_else_drop(&ht_tls)) {
		uint64_t v[4] = {(uint64_t)(int64_t)id, (uintptr_t)addr, (uint64_t)(int64_t)flags,
				 (uintptr_t)r};
		ht_record(HT_EV_SHMAT, 0, ht_now(), v, NULL);
	}
	return r;
}

HT_EXPORT int shmdt(const void *addr)
{
	if (!real.shmdt)
		ht_hooks__resolve();
	uint64_t ts = ht_now();
	int r = real.shmdt(addr);
	if (tracing_else_drop(&ht_tls)) {
		uint64_t v[2] = {(uintptr_t)addr, (uint64_t)(int64_t)r};
		ht_record(HT_EV_SHMDT, 0, ts, v, NULL);
	}
	return r;
}

HT_EXPORT int shmctl(int id, int cmd, struct shmid_ds *buf)
{
	if (!real.shmctl)
		ht_hooks__resolve();
	int r = real.shmctl(id, cmd, buf);
	if (tracing_else_drop(&ht_tls)) {
		uint64_t v[3] = {(uint64_t)(int64_t)id, (uint64_t)(int64_t)cmd, (uint64_t)(int64_t)r};
		ht_record(HT_EV_SHMCTL, 0, ht_now(), v, NULL);
	}
	return r;
}

/* ---- threads ------------------------------------------------------------ */

struct start_arg {
	void *(*fn)(void *); /* the program's start routine */
	void *arg;           /* its argument */
	uint32_t creator;    /* tid of the creating thread */
	_Atomic int used;    /* a slot of start_slots: taken */
};

/* The start arguments of threads created and not started yet, in slots of
 * their own: taken from the allocator, the new thread's free of one made
 * it set up its tcache (and, with glibc, an arena: four threads that never
 * allocate made four arenas of 64 MiB reserved) and left a block of the
 * creator's arena in it, which the thread's first small malloc then got,
 * as the untraced program never does.  Past START_SLOTS threads waiting to
 * start at once, the allocator it is. */
#define START_SLOTS 256
static struct start_arg start_slots[START_SLOTS];
static _Atomic unsigned start_next; /* where the search for a free slot begins */

static struct start_arg *start_arg_get(void)
{
	unsigned k = atomic_fetch_add_explicit(&start_next, 1, memory_order_relaxed);
	for (unsigned i = 0; i < START_SLOTS; i++) {
		struct start_arg *s = &start_slots[(k + i) % START_SLOTS];
		int expect = 0;
		if (!atomic_load_explicit(&s->used, memory_order_relaxed) &&
		    atomic_compare_exchange_strong_explicit(&s->used, &expect, 1,
							    memory_order_acquire,
							    memory_order_relaxed))
			return s;
	}
	return __libc_malloc(sizeof(struct start_arg));
}

static void start_arg_put(struct start_arg *s)
{
	if (s >= start_slots && s < start_slots + START_SLOTS)
		atomic_store_explicit(&s->used, 0, memory_order_release);
	else
		__libc_free(s);
}

static void *trampoline(void *a)
{
	struct start_arg *p = a;
	void *(*fn)(void *) = p->fn;
	void *arg = p->arg;
	uint32_t creator = p->creator;
	start_arg_put(p);
	struct ht_tls *t = &ht_tls;
	t->creator = creator;
	if (tracing(t)) {
		uint64_t ts = ht_now();
		t->guard = HT_GUARD_REC;
		ht_tls__prepare(t, &ts); /* records THREAD_START */
		t->guard = 0;
	}
	return fn(arg);
}

int ht_real_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
			   void *arg)
{
	if (!real.pthread_create)
		ht_hooks__resolve();
	return real.pthread_create(th, attr, fn, arg);
}

HT_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
			     void *arg)
{
	if (!real.pthread_create)
		ht_hooks__resolve();
	/* from now on a block may be freed by another thread than its
	 * allocator: releases take ordered timestamps (preload.h) */
	if (!atomic_load_explicit(&ht_multithreaded, memory_order_relaxed))
		atomic_store(&ht_multithreaded, 1);
	struct start_arg *s = start_arg_get();
	if (!s)
		return real.pthread_create(th, attr, fn, arg);
	s->fn = fn;
	s->arg = arg;
	s->creator = ht_tls.tid ? ht_tls.tid : ht_self_tid();
	int r = real.pthread_create(th, attr, trampoline, s);
	if (r != 0)
		start_arg_put(s);
	return r;
}

/* After a fork the program made without glibc's atfork handlers (_Fork,
 * or the system call through syscall()): the child gets fork's reset
 * (system calls only, no lock, no malloc: async-signal-safe), the parent
 * records the fork. */
static long forked(long r)
{
	if (r == 0) {
		int e = errno;
		ht_init__after_fork_child();
		errno = e;
	} else if (r > 0 && tracing(&ht_tls)) {
		uint64_t v[1] = {(uint64_t)r};
		ht_record(HT_EV_FORK, 0, ht_now(), v, NULL);
	}
	return r;
}

/* prctl and syscall: two requests take from the thread what the recorder
 * needs (probe T).  PR_SET_TSC with PR_TSC_SIGSEGV makes the timestamp
 * counter fault: the clock moves to the kernel's first (clock.c), else
 * the next timestamp killed the program with SIGSEGV.  Seccomp's strict
 * mode (prctl PR_SET_SECCOMP, or the seccomp system call through
 * syscall()) leaves the thread read, write, exit and sigreturn, and the
 * counter off: its stream ends first, as at its exit, and its later calls
 * are counted as not recorded; the recorder's next timestamp there killed
 * the thread, and the program went on without its work, in silence. */
static void before_tsc_off(int strict)
{
	ht_clock__tsc_off();
	struct ht_tls *t = &ht_tls;
	if (!strict || t->guard >= HT_GUARD_STRICT)
		return;
	if (ht_initialized && t->state == 1 && tracing(t)) {
		t->guard += HT_GUARD_OWN;
		ht_tls__exit(t);
		t->guard -= HT_GUARD_OWN;
	}
	t->guard += HT_GUARD_STRICT;
}

static long after_tsc_off(int strict, long r)
{
	if (r < 0 && strict && ht_tls.guard >= HT_GUARD_STRICT) /* (refused: as it was) */
		ht_tls.guard -= HT_GUARD_STRICT;
	return r;
}

/* prctl(PR_SET_NAME) names the calling thread, as pthread_setname_np does
 * (probe U: stats showed "-" for it): the name as the kernel keeps it, 15
 * bytes at most. */
static void named_by_prctl(long option, long name, long r)
{
	if (option != PR_SET_NAME || r != 0 || !name || !tracing(&ht_tls))
		return;
	char buf[16];
	size_t n = strnlen((const char *)(uintptr_t)name, 15); /* (no read past its NUL) */
	memcpy(buf, (const void *)(uintptr_t)name, n);
	buf[n] = 0;
	ht_record(HT_EV_THREAD_NAME, 0, ht_now(), NULL, buf);
}

/* The program's prctl, by prctl() or by syscall(SYS_prctl, ...). */
static long prctl_call(long option, long a2, long a3, long a4, long a5)
{
	int strict = option == PR_SET_SECCOMP && a2 == SECCOMP_MODE_STRICT;
	if ((option == PR_SET_TSC && a2 == PR_TSC_SIGSEGV) || strict)
		before_tsc_off(strict);
	long r = after_tsc_off(strict, ht_raw_syscall(SYS_prctl, option, a2, a3, a4, a5, 0));
	named_by_prctl(option, a2, r);
	return r;
}

HT_EXPORT int prctl(int option, ...)
{
	va_list ap;
	va_start(ap, option);
	long a2 = va_arg(ap, long), a3 = va_arg(ap, long);
	long a4 = va_arg(ap, long), a5 = va_arg(ap, long);
	va_end(ap);
	return (int)prctl_call(option, a2, a3, a4, a5);
}

#if defined(__x86_64__)
/* A new process made by the system call itself, as fork makes one: fork,
 * or clone and clone3 without CLONE_VM and without a stack of the child's
 * own (with one, the child could not return through this function, nor
 * through glibc's syscall()).  Such a child passed no hook: it wrote into
 * its parent's buffers, and its calls were lost or corrupted the parent's
 * trace (docs/record.md, "Known limitations"; probe U). */
static int forkish(long nr, const long *a)
{
	if (nr == SYS_fork)
		return 1;
	if (nr == SYS_clone)
		return !(a[0] & CLONE_VM) && !a[1];
	if (nr == SYS_clone3 && a[0] && (size_t)a[1] >= offsetof(struct clone_args, stack_size)) {
		const struct clone_args *ca = (const struct clone_args *)(uintptr_t)a[0];
		return !(ca->flags & CLONE_VM) && !ca->stack;
	}
	return 0;
}

HT_EXPORT long syscall(long nr, ...)
{
	va_list ap;
	va_start(ap, nr);
	long a[6];
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (HT_UNLIKELY(nr == SYS_prctl))
		return prctl_call(a[0], a[1], a[2], a[3], a[4]);
	int strict = nr == SYS_seccomp && a[0] == SECCOMP_SET_MODE_STRICT;
	if (HT_UNLIKELY(strict))
		before_tsc_off(strict);
	if (HT_UNLIKELY(forkish(nr, a)) && !ht_tls.guard)
		return forked(ht_raw_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]));
	return after_tsc_off(strict, ht_raw_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]));
}
#endif

HT_EXPORT int pthread_setname_np(pthread_t th, const char *name)
{
	if (!real.pthread_setname_np)
		ht_hooks__resolve();
	int r = real.pthread_setname_np(th, name);
	if (r == 0 && pthread_equal(th, pthread_self()) && tracing(&ht_tls))
		ht_record(HT_EV_THREAD_NAME, 0, ht_now(), NULL, name);
	return r;
}

/* ---- libraries --------------------------------------------------------- */

/* With --stacks, an unmapped library tells the stack tables that its
 * addresses may soon hold another library's code (stacks.c). */
HT_EXPORT int dlclose(void *handle)
{
	if (!real.dlclose)
		ht_hooks__resolve();
	int r = real.dlclose(handle);
	if (ht_opt.stack_depth) {
		int e = errno;
		ht_stack__after_dlclose();
		errno = e;
	}
	return r;
}

/* dlmopen into another link-map namespace than the program's loads the
 * library with a C library of its own, whose malloc, free and mmap the
 * library's calls go to: LD_PRELOAD reaches only the first namespace, so
 * none of them passes through the recorder (a library that made 111
 * allocations and 105 frees there was absent from the trace, without a
 * word).  The recorder cannot follow it there (a second copy of it in
 * that namespace would be a second recorder of the same process), so it
 * says so, once, in one line, as it does when malloc is not its own. */
static _Atomic int namespace_said;

HT_EXPORT void *dlmopen(Lmid_t lmid, const char *file, int flags)
{
	if (!real.dlmopen)
		ht_hooks__resolve();
	if (lmid != LM_ID_BASE && file && !ht_foreign_process()) {
		ht_writer__add_flag(HT_FILE_F_NAMESPACE); /* readers say it too */
		if (!atomic_exchange_explicit(&namespace_said, 1, memory_order_relaxed))
			ht_msg("dlmopen() loads %s in a link-map namespace of its own, with a C "
			       "library of its own: the calls made in it (malloc, free, mmap...) are "
			       "not recorded",
			       file);
	}
	/* (a tail call: the loader takes the caller's return address for
	 * $ORIGIN, which must be the program's) */
	return real.dlmopen(lmid, file, flags);
}

/* ---- processes ---------------------------------------------------------- */

HT_EXPORT pid_t fork(void)
{
	if (!real.fork)
		ht_hooks__resolve();
	pid_t r = real.fork();
	if (r > 0 && tracing(&ht_tls)) {
		uint64_t v[1] = {(uint64_t)(int64_t)r};
		ht_record(HT_EV_FORK, 0, ht_now(), v, NULL);
	}
	return r;
}

/* _Fork() (glibc 2.34, POSIX 2024) forks without the atfork handlers, so
 * that a signal handler may fork (crash reporters do): the child kept the
 * recorder's state as it was, its thread's buffer and the writer's shared
 * mapping, and wrote into the parent's trace (its calls lost, or mixed in
 * as the parent's, the trace corrupt).  The child gets fork's reset here,
 * with system calls only (no lock, no malloc: _Fork is async-signal-safe
 * and so is the reset), and the parent records the fork.  glibc's own
 * fork() calls its _Fork inside libc, past this hook.  A fork made with
 * the raw system call (syscall(SYS_fork), SYS_clone without CLONE_VM)
 * passes no hook at all (docs/record.md, "Known limitations"). */
HT_EXPORT pid_t _Fork(void)
{
	if (!real._Fork)
		ht_hooks__resolve();
	/* (not syscall(), which the library interposes and would take for a
	 * fork of the program's as well: the child reset twice) */
	return (pid_t)forked(real._Fork ? real._Fork() : ht_raw_syscall(SYS_fork, 0, 0, 0, 0, 0, 0));
}

/* clone() without CLONE_VM makes a new process, as fork() does, but glibc
 * runs no atfork handler for it: the child kept the recorder's state as it
 * was, its thread's buffer and the writer's shared mapping, and its calls
 * went into the parent's trace as the parent's (corrupting it, while the
 * parent's own later calls were lost).  The child now starts with the
 * reset fork's handler does (then it is followed as a fork child, or not
 * at all), and the parent records the fork.  CLONE_VM (a thread, vfork)
 * passes through as it is. */
struct clone_start {
	int (*fn)(void *);
	void *arg;
};

static int clone_child(void *p)
{
	/* the parent's frame below, in this process's copy of its memory */
	struct clone_start c = *(struct clone_start *)p;
	ht_init__after_fork_child();
	int r = c.fn(c.arg);
	/* glibc ends the child with the exit system call when fn returns, past
	 * every hook: the trace is closed first, as _exit does */
	ht_writer__shutdown(0);
	return r;
}

HT_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	/* glibc's clone takes these whether or not flags use them */
	va_list ap;
	va_start(ap, arg);
	pid_t *ptid = va_arg(ap, pid_t *);
	void *tls = va_arg(ap, void *);
	pid_t *ctid = va_arg(ap, pid_t *);
	va_end(ap);
	if (!real.clone)
		ht_hooks__resolve();
	if ((flags & CLONE_VM) || !fn)
		return real.clone(fn, stack, flags, arg, ptid, tls, ctid);
	struct clone_start c = {fn, arg};
	int r = real.clone(clone_child, stack, flags, &c, ptid, tls, ctid);
	if (r > 0 && tracing(&ht_tls)) {
		uint64_t v[1] = {(uint64_t)(int64_t)r};
		ht_record(HT_EV_FORK, 0, ht_now(), v, NULL);
	}
	return r;
}

/* glibc's daemon() forks and leaves the parent with its own internal calls,
 * which no hook sees: the parent's trace lost its fork event and was closed
 * by the writer as if the program had been killed.  The same steps through
 * the hooks: fork (recorded in the parent), the parent's _exit (the tracer
 * shut down first), then in the child a new session, "/" as its directory
 * unless nochdir, and stdin, stdout and stderr on /dev/null unless noclose
 * (-1 if /dev/null is not the null device), as glibc does. */
HT_EXPORT int daemon(int nochdir, int noclose)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0)
		_exit(0);
	if (setsid() < 0)
		return -1;
	if (!nochdir && chdir("/") < 0) {
		/* (glibc ignores a failed chdir too) */
	}
	if (noclose)
		return 0;
	int fd = ht_sys_open("/dev/null", O_RDWR); /* (kept across exec if it is 0, 1 or 2) */
	struct stat st;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode)) {
		ht_sys_close(fd);
		errno = ENODEV;
		return -1;
	}
	for (int i = 0; i < 3; i++)
		if (fd != i)
			dup2(fd, i);
	if (fd > 2)
		ht_sys_close(fd);
	return 0;
}

/* ---- the trace's descriptor ------------------------------------------- */

/* The calls that can take the number of the trace's descriptor from it in
 * the table the program's threads share (a number the program then reuses
 * or fills with its own file): the threads that write their own full
 * buffers (writer.c, self_drain) stop using it first, and the call waits
 * for a write under way.  (open, socket, dup and the like take the lowest
 * free number: never one in use.)  A raw syscall bypasses these; each
 * write still checks the descriptor's file first (fd_is_ours). */
HT_EXPORT int close(int fd)
{
	if (fd >= 0)
		ht_writer__fds_closing((unsigned)fd, (unsigned)fd);
	if (!real.close)
		ht_hooks__resolve();
	return real.close ? real.close(fd) : (int)syscall(SYS_close, fd);
}

HT_EXPORT int dup2(int oldfd, int newfd)
{
	if (newfd >= 0 && newfd != oldfd)
		ht_writer__fds_closing((unsigned)newfd, (unsigned)newfd);
	if (!real.dup2)
		ht_hooks__resolve();
	return real.dup2 ? real.dup2(oldfd, newfd) : (int)syscall(SYS_dup2, oldfd, newfd);
}

HT_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	if (newfd >= 0 && newfd != oldfd)
		ht_writer__fds_closing((unsigned)newfd, (unsigned)newfd);
	if (!real.dup3)
		ht_hooks__resolve();
	return real.dup3 ? real.dup3(oldfd, newfd, flags)
			 : (int)syscall(SYS_dup3, oldfd, newfd, flags);
}

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

HT_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	if (!((unsigned)flags & CLOSE_RANGE_CLOEXEC)) /* (that one only marks them) */
		ht_writer__fds_closing(first, last);
	if (!real.close_range)
		ht_hooks__resolve();
	return real.close_range ? real.close_range(first, last, flags)
				: (int)syscall(SYS_close_range, first, last, flags);
}

HT_EXPORT void closefrom(int lowfd)
{
	ht_writer__fds_closing(lowfd < 0 ? 0 : (unsigned)lowfd, ~0u);
	if (!real.closefrom)
		ht_hooks__resolve();
	if (real.closefrom)
		real.closefrom(lowfd);
	else
		syscall(SYS_close_range, lowfd < 0 ? 0u : (unsigned)lowfd, ~0u, 0);
}

/* ---- waiting for children ---------------------------------------------- */

/* The writer's helper process (writer.c) is a child of the program, made
 * without exit signal: wait(), waitpid(-1, ..., 0) and SIGCHLD never see
 * it, but a wait for any child with __WALL or __WCLONE (init systems,
 * shells and test harnesses that reap "everything", debuggers) does, and
 * would block on it forever once the program's own children are gone: the
 * helper ends only after the program.  Such a wait is kept off it here:
 * it fails with ECHILD when no other child could answer it, as it would
 * without heaptrail, and a state change of the helper that it reports
 * (the helper killed, or stopped with its process group) is taken from
 * it and the wait made again: the program never receives the helper's
 * pid or status.  Every other wait goes straight to glibc. */

/* The program traced a process (any ptrace request but TRACEME): its
 * tracees answer __WALL waits too, and are not among its children, so
 * the waits are no longer failed early, only kept off the helper. */
static _Atomic int ptracer;

HT_EXPORT long ptrace(enum __ptrace_request req, ...)
{
	if (!real.ptrace)
		ht_hooks__resolve();
	va_list ap;
	va_start(ap, req);
	pid_t pid = va_arg(ap, pid_t);
	void *addr = va_arg(ap, void *);
	void *data = va_arg(ap, void *);
	va_end(ap);
	if (req != PTRACE_TRACEME)
		atomic_store(&ptracer, 1);
	return real.ptrace(req, pid, addr, data);
}

/* The helper, if the wait (type, id, options) can report it; else 0. */
static pid_t helper_seen_by(idtype_t type, id_t id, int options)
{
	pid_t h = ht_writer__helper_pid();
	if (h <= 0 || ht_foreign_process())
		return 0;
	if (type == P_PID)
		return (pid_t)id == h ? h : 0;
	if (!(options & (__WALL | __WCLONE)))
		return 0;
	if (type == P_ALL)
		return h;
	if (type == P_PGID) {
		pid_t g = getpgid(h);
		return g >= 0 && g == (id ? (pid_t)id : getpgrp()) ? h : 0;
	}
	return 0;
}

/* Field 38 of /proc/PID/stat: the signal pid's parent gets when it ends
 * (SIGCHLD for a fork, often 0 for a raw clone); -1 if unknown. */
static int exit_signal(pid_t pid)
{
	char buf[1024];
	return (int)ht_procstat_field(ht_procstat_read(pid, buf, sizeof(buf)), 38);
}

/* Whether the child pid (not the helper h) can answer a wait for any
 * child in group (0: any group) with these options. */
static int answers(pid_t pid, pid_t h, pid_t group, int options)
{
	if (pid == h || (group && getpgid(pid) != group))
		return 0;
	if (options & __WALL)
		return 1;
	return exit_signal(pid) != SIGCHLD; /* __WCLONE: "clone" children only */
}

/* Whether a child of the program other than the helper h can answer the
 * wait (type, id, options), from /proc/self/task/TID/children; 1 too
 * when that cannot be read (a kernel without CONFIG_PROC_CHILDREN). */
static int other_child(idtype_t type, id_t id, int options, pid_t h)
{
	pid_t group = type == P_PGID ? (id ? (pid_t)id : getpgrp()) : 0;
	int dfd = ht_sys_open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return 1;
	int found = 0, tasks = 0;
	char dents[2048], buf[512], path[16 + sizeof(((struct dirent64 *)0)->d_name) + 16];
	long n;
	while (!found && (n = syscall(SYS_getdents64, dfd, dents, sizeof(dents))) > 0) {
		for (long off = 0; off < n && !found;) {
			const struct dirent64 *d = (const void *)(dents + off);
			off += d->d_reclen;
			if (d->d_name[0] < '0' || d->d_name[0] > '9')
				continue;
			snprintf(path, sizeof(path), "/proc/self/task/%s/children", d->d_name);
			int fd = ht_sys_open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				continue; /* the thread ended */
			tasks++;
			long pid = -1; /* the number being read, -1 between numbers */
			ssize_t k;
			while (!found && (k = ht_sys_read(fd, buf, sizeof(buf))) > 0) {
				for (ssize_t i = 0; i < k && !found; i++) {
					if (buf[i] >= '0' && buf[i] <= '9') {
						pid = (pid < 0 ? 0 : pid * 10) + (buf[i] - '0');
					} else if (pid >= 0) {
						found = answers((pid_t)pid, h, group, options);
						pid = -1;
					}
				}
			}
			if (pid >= 0 && !found) /* the last number */
				found = answers((pid_t)pid, h, group, options);
			ht_sys_close(fd);
		}
	}
	ht_sys_close(dfd);
	return found || !tasks;
}

/* Before a wait that can report the helper h: 1 if it must fail with
 * ECHILD instead (no other child can answer it). */
static int wait_only_helper(idtype_t type, id_t id, int options, pid_t h)
{
	if (type == P_PID)
		return 1; /* the helper's pid: no child of the program's */
	if (atomic_load(&ptracer))
		return 0;
	int e = errno, cancel;
	/* (no cancellation point inside: its descriptors would stay open) */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	int other = other_child(type, id, options, h);
	pthread_setcancelstate(cancel, NULL);
	errno = e;
	return !other;
}

/* A wait reported the helper h: whatever state change of it is pending
 * (reaped already if ended) is taken, so that the wait made again does not
 * see it; a helper that ended is gone. */
static void helper_reported(pid_t h, int reaped)
{
	int e = errno;
	for (int i = 0; !reaped && i < 4; i++) {
		siginfo_t si;
		memset(&si, 0, sizeof(si));
		if (syscall(SYS_waitid, P_PID, (id_t)h, &si,
			    WEXITED | WSTOPPED | WCONTINUED | __WALL | WNOHANG, NULL) < 0 ||
		    si.si_pid != h)
			break;
		reaped = si.si_code == CLD_EXITED || si.si_code == CLD_KILLED ||
			 si.si_code == CLD_DUMPED;
	}
	if (reaped)
		ht_writer__helper_gone();
	errno = e;
}

static void wait_target(pid_t pid, idtype_t *type, id_t *id)
{
	if (pid < -1) {
		*type = P_PGID;
		*id = (id_t)-pid;
	} else if (pid == -1) {
		*type = P_ALL;
		*id = 0;
	} else if (pid == 0) {
		*type = P_PGID;
		*id = 0;
	} else {
		*type = P_PID;
		*id = (id_t)pid;
	}
}

HT_EXPORT pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
	if (!real.wait4)
		ht_hooks__resolve();
	idtype_t type;
	id_t id;
	wait_target(pid, &type, &id);
	pid_t h;
	while ((h = helper_seen_by(type, id, options)) > 0) {
		if (wait_only_helper(type, id, options, h)) {
			errno = ECHILD;
			return -1;
		}
		int st = 0;
		pid_t r = real.wait4(pid, &st, options, ru);
		if (r != h) {
			if (r > 0 && status)
				*status = st;
			return r;
		}
		helper_reported(h, (WIFEXITED(st) || WIFSIGNALED(st)) && !(options & WNOWAIT));
	}
	return real.wait4(pid, status, options, ru);
}

HT_EXPORT pid_t waitpid(pid_t pid, int *status, int options)
{
	if (!real.waitpid)
		ht_hooks__resolve();
	idtype_t type;
	id_t id;
	wait_target(pid, &type, &id);
	if (helper_seen_by(type, id, options) > 0)
		return wait4(pid, status, options, NULL);
	return real.waitpid(pid, status, options);
}

HT_EXPORT pid_t wait3(int *status, int options, struct rusage *ru)
{
	if (!real.wait3)
		ht_hooks__resolve();
	if (helper_seen_by(P_ALL, 0, options) > 0)
		return wait4(-1, status, options, ru);
	return real.wait3(status, options, ru);
}

HT_EXPORT int waitid(idtype_t type, id_t id, siginfo_t *info, int options)
{
	if (!real.waitid)
		ht_hooks__resolve();
	pid_t h;
	while ((h = helper_seen_by(type, id, options)) > 0) {
		if (wait_only_helper(type, id, options, h)) {
			errno = ECHILD;
			return -1;
		}
		siginfo_t si;
		memset(&si, 0, sizeof(si));
		int r = real.waitid(type, id, &si, options);
		if (r != 0 || si.si_pid != h) {
			if (r == 0 && info)
				*info = si;
			return r;
		}
		helper_reported(h, (si.si_code == CLD_EXITED || si.si_code == CLD_KILLED ||
				    si.si_code == CLD_DUMPED) && !(options & WNOWAIT));
	}
	return real.waitid(type, id, info, options);
}

/* One trace per process image that records an event (docs/output-files.md).
 * A fork child that execs before any call of its own (the fork + exec of
 * shells, make, git) has recorded nothing in its forked image: when the
 * exec'd image is traced (HEAPTRAIL_FOLLOW_EXEC), the exec is not recorded
 * either, so that no file is created for it (it held only the thread's
 * start and the exec: 7 of the 14 files of a `git gc`), and the exec'd
 * image writes the process's first trace, NAME.PID, whose header names the
 * program exec'd.  Returns 1 when it deferred the exec event so: a failed
 * exec records it then (exec_failed). */
static int before_exec(const char *path)
{
	ht_rlimit__before_exec();
	if (ht_foreign_process())
		return 0;
	if (ht_opt.follow_exec && ht_writer__child_unstarted())
		return 1;
	if (tracing(&ht_tls))
		ht_record(HT_EV_EXEC, 0, ht_now(), NULL, path);
	ht_writer__before_exec();
	return 0;
}

/* Appends s to the line at *at (end of the buffer: end), cut if need be. */
static void put_str(char **at, char *end, const char *s)
{
	size_t n = strlen(s);
	if (n > (size_t)(end - *at))
		n = (size_t)(end - *at);
	memcpy(*at, s, n);
	*at += n;
}

/* glibc 2.32 and later: "ENOENT" for ENOENT (a static string, no
 * allocation); older ones have none, and the number is written. */
extern const char *strerrorname_np(int err) __attribute__((weak));

/* The exec event's outcome, after a failed exec: a second exec event
 * whose path is HT_EXEC_FAILED_PREFIX, the error's name and ")" (a path
 * in parentheses, as fexecve's "(fd)": docs/FORMAT.md).  Before, a failed
 * exec read as one that succeeded, the same image's events after it. */
static void rec_exec_result(int err)
{
	char s[64], num[16], *at = s, *end = s + sizeof(s) - 1;
	const char *name = strerrorname_np ? strerrorname_np(err) : NULL;
	if (!name) {
		unsigned v = err > 0 ? (unsigned)err : 0;
		char *n = num + sizeof(num);
		*--n = 0;
		do
			*--n = (char)('0' + v % 10);
		while (v /= 10);
		name = n;
		put_str(&at, end, HT_EXEC_FAILED_PREFIX "errno ");
	} else {
		put_str(&at, end, HT_EXEC_FAILED_PREFIX);
	}
	put_str(&at, end, name);
	put_str(&at, end, ")");
	*at = 0;
	ht_record(HT_EV_EXEC, 0, ht_now(), NULL, s);
}

/* After a failed exec (err: its errno): the image goes on, in the same
 * file, the exec event followed by its outcome. */
static void exec_failed(int deferred, const char *path, int err)
{
	ht_rlimit__exec_failed();
	if (deferred) {
		if (tracing(&ht_tls)) {
			ht_record(HT_EV_EXEC, 0, ht_now(), NULL, path);
			rec_exec_result(err);
		}
		return;
	}
	/* (a vfork child's failed exec: the parent's thread, buffer and
	 * file, which the child must not touch: its record, written there,
	 * wrote the parent's file beside its writer) */
	if (ht_foreign_process())
		return;
	ht_writer__exec_failed();
	if (tracing(&ht_tls))
		rec_exec_result(err);
}

/* An image built with a sanitizer runs without the tracer: its runtime
 * must be the first library loaded, and LD_PRELOAD of this one stops it
 * at start (ASan: "runtime does not come first", exit 1), which record
 * refuses for the program it starts and the exec of a traced process
 * must not do either.  Returns env as it goes to path (or fd): without
 * the library and HEAPTRAIL_OPTIONS for such an image, saying so in one
 * line on stderr; else env. */
static char *const *sanitized_env(char *const *env, const char *path, int fd, char **out,
				  size_t cap, char *entry, size_t elen)
{
	char lib[64];
	if (!path && fd < 0)
		return env; /* (execvpe found no file: it fails) */
	if (!path)
		path = "(fd)";
	char *const *u = ht_exec_env_untraced(env, out, cap, entry, elen);
	if (u == env || ht_exec_sanitizer(path, fd, lib, sizeof(lib)) < 0)
		return env;
	const char *san = ht_sanitizer_name(lib);
	char line[PATH_MAX + 256], *at = line, *end = line + sizeof(line) - 1;
	put_str(&at, end, "heaptrail: note: ");
	put_str(&at, end, path);
	put_str(&at, end, " is built with ");
	put_str(&at, end, san);
	put_str(&at, end, " (");
	put_str(&at, end, lib);
	put_str(&at, end, "), whose runtime must be the first library loaded: it runs without "
			  "the tracer\n");
	ssize_t w = ht_sys_write(2, line, (size_t)(at - line));
	(void)w;
	return u;
}

/* The file execvpe would run for file: file itself if it has a '/', else
 * the first executable of that name in PATH (in buf); NULL if none. */
static const char *exec_path(const char *file, char *buf, size_t cap)
{
	if (strchr(file, '/'))
		return file;
	const char *p = getenv("PATH");
	for (p = p ? p : "/bin:/usr/bin"; *p;) {
		size_t n = strcspn(p, ":"), fl = strlen(file);
		if (n && n + 1 + fl < cap) {
			memcpy(buf, p, n);
			buf[n] = '/';
			memcpy(buf + n + 1, file, fl + 1);
			if (access(buf, X_OK) == 0)
				return buf;
		}
		p += n + (p[n] == ':');
	}
	return NULL;
}

/* The environment an exec hands on (ht_exec_env, then sanitized_env for
 * the file path or fd), in env_, on the caller's stack. */
#define EXEC_ENV(envp, path, fd)                                                \
	size_t n_env_ = 0;                                                       \
	while ((envp) && (envp)[n_env_])                                         \
		n_env_++;                                                        \
	char *env_out_[n_env_ + 3], *env_out2_[n_env_ + 3];                      \
	char env_entry_[4200], env_entry2_[4200];                                \
	char *const *env_ = ht_foreign_process() ? (envp)                        \
			    : ht_exec_env(envp, env_out_, n_env_ + 3, env_entry_, sizeof(env_entry_)); \
	env_ = sanitized_env(env_, path, fd, env_out2_, n_env_ + 3, env_entry2_, sizeof(env_entry2_))

HT_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	if (!real.execve)
		ht_hooks__resolve();
	EXEC_ENV(envp, path, -1);
	int deferred_ = before_exec(path);
	int r = real.execve(path, argv, env_);
	int e = errno;
	exec_failed(deferred_, path, e);
	errno = e;
	return r;
}

HT_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	if (!real.execvpe)
		ht_hooks__resolve();
	char found_[PATH_MAX];
	const char *file_ = exec_path(file, found_, sizeof(found_));
	EXEC_ENV(envp, file_, -1);
	int deferred_ = before_exec(file);
	int r = real.execvpe(file, argv, env_);
	int e = errno;
	exec_failed(deferred_, file, e);
	errno = e;
	return r;
}

HT_EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

HT_EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

HT_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	if (!real.fexecve)
		ht_hooks__resolve();
	EXEC_ENV(envp, NULL, fd);
	int deferred_ = before_exec("(fd)");
	int r = real.fexecve(fd, argv, env_);
	int e = errno;
	exec_failed(deferred_, "(fd)", e);
	errno = e;
	return r;
}

/* posix_spawn and posix_spawnp exec inside glibc, past the hooks above: a
 * child that would carry the tracer into a sanitizer's build gets the
 * environment sanitized_env gives (the others are left as they are: a
 * spawned child is traced as a fork + exec one, with --follow-exec). */
#define SPAWN_ENV(envp, path)                                                   \
	size_t n_env_ = 0;                                                       \
	while ((envp) && (envp)[n_env_])                                         \
		n_env_++;                                                        \
	char *env_out_[n_env_ + 1];                                              \
	char env_entry_[4200];                                                   \
	char *const *env_ = sanitized_env(envp, path, -1, env_out_, n_env_ + 1, env_entry_, \
					  sizeof(env_entry_))

HT_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
			  const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	if (!real.posix_spawn)
		ht_hooks__resolve();
	const char *path_ = path;
	SPAWN_ENV(envp, path_);
	return real.posix_spawn(pid, path, fa, attr, argv, env_);
}

HT_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	if (!real.posix_spawnp)
		ht_hooks__resolve();
	char found_[PATH_MAX];
	const char *file_ = exec_path(file, found_, sizeof(found_));
	SPAWN_ENV(envp, file_);
	return real.posix_spawnp(pid, file, fa, attr, argv, env_);
}

/* execl*: collect the variadic list into an array on the stack. */
#define COLLECT_ARGS(first, envp_out)                                              \
	va_list ap;                                                                \
	size_t argc = 1;                                                           \
	va_start(ap, first);                                                       \
	while (va_arg(ap, const char *))                                           \
		argc++;                                                            \
	va_end(ap);                                                                \
	const char *argv[argc + 1];                                                \
	argv[0] = first;                                                           \
	va_start(ap, first);                                                       \
	for (size_t i = 1; i <= argc; i++)                                         \
		argv[i] = va_arg(ap, const char *);                                \
	envp_out;                                                                  \
	va_end(ap)

HT_EXPORT int execl(const char *path, const char *arg, ...)
{
	COLLECT_ARGS(arg, (void)0);
	return execve(path, (char *const *)argv, environ);
}

HT_EXPORT int execlp(const char *file, const char *arg, ...)
{
	COLLECT_ARGS(arg, (void)0);
	return execvpe(file, (char *const *)argv, environ);
}

HT_EXPORT int execle(const char *path, const char *arg, ...)
{
	char *const *envp;
	COLLECT_ARGS(arg, envp = va_arg(ap, char *const *));
	return execve(path, (char *const *)argv, envp);
}

HT_EXPORT void _exit(int status)
{
	if (!real._exit)
		ht_hooks__resolve();
	ht_writer__shutdown(0);
	real._exit(status);
}

/* exit() from several threads at once: the first runs the exit handlers,
 * the recorder's shutdown among them, and a second one, finding them
 * taken, ended the process with the exit system call while the first was
 * still closing the trace (inside glibc, past the _exit hook): with
 * --writer=thread most of the trace was lost, and it was left unclosed.
 * POSIX leaves concurrent exit() undefined; a second thread now waits here
 * for the first to end the process, as newer glibc's own exit does.  The
 * thread that is exiting may call exit() again (from an exit handler, a
 * signal handler), and a child forked meanwhile exits on its own. */
static _Atomic uint64_t exiting; /* pid << 32 | tid of the thread in exit(), 0 none */

HT_EXPORT void exit(int status)
{
	if (!real.exit)
		ht_hooks__resolve();
	uint64_t me = (uint64_t)(uint32_t)ht_self_pid() << 32 | ht_self_tid();
	uint64_t first = 0;
	if (!atomic_compare_exchange_strong(&exiting, &first, me) && first != me &&
	    first >> 32 == me >> 32) {
		for (;;)
			syscall(SYS_pause); /* (the first exit() ends this thread with the rest) */
	}
	real.exit(status);
}

HT_EXPORT void _Exit(int status)
{
	if (!real._Exit)
		ht_hooks__resolve();
	ht_writer__shutdown(0);
	real._Exit(status);
}
