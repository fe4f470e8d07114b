/* Per-thread buffers, the lock-free hand-off queue to the writer, and the
 * shared thread records.  Nothing here takes a lock or calls malloc: the
 * buffer pool is one reserved mapping, the queue is an intrusive MPSC queue
 * (one atomic exchange per push), the free list is a tagged Treiber stack. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

#define HT_POOL_BUFS 4096u   /* buffers in flight at most */
#define HT_POOL_MIN 128u     /* ... when the address space is short */
#define HT_THREAD_RECS 65536u /* thread records at most */

__thread struct ht_tls ht_tls __attribute__((tls_model("initial-exec")));
/* Starts at 1 so that calls made before our constructor (other libraries'
 * constructors, such as libstdc++'s emergency pool) are recorded: the first
 * of them runs ht_init(), which sets the real state. */
_Atomic int ht_on = 1;
_Atomic int ht_closing;
_Atomic int ht_exec_hold;
_Atomic int ht_multithreaded;
static _Atomic uint32_t epoch_before_pool;
_Atomic uint32_t *ht_epoch_p = &epoch_before_pool;
static _Atomic uint64_t dropped_before_pool;
_Atomic uint64_t *ht_dropped_p = &dropped_before_pool;

/* Everything the writer shares with the traced threads lives in one
 * MAP_SHARED mapping, so that the writer can be a helper process as well as
 * a thread (writer.c): this header, the queue stub, the thread records, the
 * writer's state and index, then the buffers.  Addresses are the same in
 * the helper, a fork of the traced process. */
struct ht_shm {
	_Atomic uint32_t epoch;               /* ht_epoch: bumped by the writer */
	_Atomic uint32_t pool_used;           /* buffers handed out by the bump allocator */
	_Atomic uint64_t free_head;           /* free list: (tag << 32) | (index + 1) */
	_Atomic(struct ht_buf *) q_head;      /* hand-off queue: producers push here */
	struct ht_buf *q_tail;                /* hand-off queue: consumer (writer) side */
	_Atomic uint32_t threads_used;        /* thread records handed out */
	_Atomic(struct ht_thread *) thread_list; /* all thread records, newest first */
	_Atomic uint64_t dropped;             /* calls not recorded (nested.c, no buffer) */
	_Atomic uint32_t freed;               /* buffers put back so far */
};

static uint8_t *region;            /* the shared mapping */
static size_t region_bytes;        /* its size */
static struct ht_shm *shm;         /* at its start */
static struct ht_buf *q_stub;      /* queue stub node, after the header */
static struct ht_thread *threads;  /* HT_THREAD_RECS records */
static uint8_t *writer_area;       /* HT_WRITER_AREA + index_area bytes */
static uint8_t *pool;              /* pool_bufs * buf_bytes bytes */
static uint32_t pool_bufs;         /* HT_POOL_BUFS, fewer if they did not fit */
static size_t index_area;          /* HT_INDEX_AREA, less with fewer buffers */
static size_t buf_bytes;           /* header + data of one buffer */

static struct ht_buf *buf_at(uint32_t i)
{
	return (struct ht_buf *)(pool + (size_t)i * buf_bytes);
}

int ht_buf__pool_init(void)
{
	if (region)
		return 0;
	buf_bytes = sizeof(struct ht_buf) + (size_t)ht_opt.buffer_size;
	buf_bytes = (buf_bytes + 4095) & ~(size_t)4095;
	size_t head = 4096; /* struct ht_shm, then the queue stub */
	size_t thr = ((size_t)HT_THREAD_RECS * sizeof(struct ht_thread) + 4095) & ~(size_t)4095;
	/* Reserved, not used (MAP_NORESERVE): ~340 MiB of address space with
	 * 64 KiB buffers.  Under an address-space limit (ulimit -v, a
	 * container's) it would be taken from the program's share: then at
	 * most an eighth of the limit, with fewer buffers and a smaller index
	 * (down to 1/32: a thread waits for the writer sooner, and a trace of
	 * more chunks than the index holds is read by a scan; docs/record.md,
	 * "Address space"). */
	struct rlimit rl;
	size_t cap = SIZE_MAX;
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		cap = (size_t)(rl.rlim_cur / 8);
	void *p = NULL;
	size_t bytes = 0;
	for (unsigned shift = 0; !p && (HT_POOL_BUFS >> shift) >= HT_POOL_MIN; shift++) {
		pool_bufs = HT_POOL_BUFS >> shift;
		index_area = HT_INDEX_AREA >> shift;
		bytes = head + thr + HT_WRITER_AREA + index_area + (size_t)pool_bufs * buf_bytes;
		if (bytes <= cap)
			p = ht_own_map(bytes, MAP_SHARED | MAP_NORESERVE);
	}
	if (!p) {
		static int said;
		if (said++)
			return -1;
		/* (in a fork child: that child alone, its parent's trace goes
		 * on; "the program" read as the whole run, probe U) */
		int kid = ht_writer__forked_child();
		int pid = kid ? (int)ht_self_pid() : 0;
		if (cap != SIZE_MAX)
			ht_msg("the address-space limit of %llu MiB (ulimit -v) leaves no room for the "
			       "recorder's buffers (%zu MiB at the least, an eighth of the limit at "
			       "the most): %s",
			       (unsigned long long)(rl.rlim_cur >> 20), bytes >> 20,
			       kid ? "a fork child runs untraced, its parent's trace goes on"
				   : "the program runs untraced");
		else if (kid)
			ht_msg("cannot map the recorder's buffers (%zu MiB of address space): this "
			       "fork child (pid %d) runs untraced, its parent's trace goes on",
			       bytes >> 20, pid);
		else
			ht_msg("cannot map the recorder's buffers (%zu MiB of address space): the "
			       "program runs untraced", bytes >> 20);
		return -1;
	}
	region = p;
	region_bytes = bytes;
	shm = p;
	q_stub = (struct ht_buf *)(region + 2048);
	threads = (struct ht_thread *)(region + head);
	writer_area = region + head + thr;
	pool = writer_area + HT_WRITER_AREA + index_area;
	atomic_store(&shm->q_head, q_stub);
	shm->q_tail = q_stub;
	atomic_store(&shm->epoch, atomic_load(ht_epoch_p));
	ht_epoch_p = &shm->epoch;
	atomic_store(&shm->dropped, atomic_load(ht_dropped_p));
	ht_dropped_p = &shm->dropped;
	return 0;
}

size_t ht_buf__reserved(void)
{
	return region ? region_bytes : 0;
}

void *ht_buf__writer_area(size_t *index_bytes)
{
	*index_bytes = index_area;
	return region ? writer_area : NULL;
}

/* In a forked child only the forking thread exists, and the mapping is
 * still shared with the parent: leave it to the parent (and its writer)
 * and start afresh with a mapping of the child's own. */
void ht_buf__pool_reset_after_fork(void)
{
	if (!region)
		return;
	uint32_t e = atomic_load(ht_epoch_p);
	ht_own_unmap(region, region_bytes);
	region = NULL;
	shm = NULL;
	atomic_store(&epoch_before_pool, e);
	ht_epoch_p = &epoch_before_pool;
	atomic_store(&dropped_before_pool, 0); /* (the child's own count) */
	ht_dropped_p = &dropped_before_pool;
}

static void pause_briefly(void)
{
	struct timespec ts = {0, 200000};
	ht_sys_nanosleep(&ts, NULL);
}

struct ht_buf *ht_buf__get(uint32_t tid, uint64_t first_seq, unsigned wait_ms)
{
	struct ht_buf *b = NULL;
	unsigned waits = 0;
	for (;;) {
		uint64_t head = atomic_load_explicit(&shm->free_head, memory_order_acquire);
		uint32_t idx = (uint32_t)head;
		if (idx) {
			struct ht_buf *cand = buf_at(idx - 1);
			uint64_t next = ((head >> 32) + 1) << 32 | cand->free_next;
			if (atomic_compare_exchange_weak(&shm->free_head, &head, next)) {
				b = cand;
				break;
			}
			continue;
		}
		uint32_t n = atomic_load(&shm->pool_used);
		if (n < pool_bufs) {
			if (atomic_compare_exchange_weak(&shm->pool_used, &n, n + 1)) {
				b = buf_at(n);
				b->index = n;
				break;
			}
			continue;
		}
		/* Every buffer is waiting for the writer: wait for it rather
		 * than lose events, unless it is dead (then this thread
		 * writes them out).  A thread that has none yet gives up after
		 * wait_ms: with more threads recording at once than buffers,
		 * every one is some thread's current buffer and none may come
		 * back until a thread ends. */
		if (waits++ >= wait_ms * 5)
			return NULL;
		ht_writer__rescue();
		ht_writer__wake();
		pause_briefly();
	}
	atomic_store_explicit(&b->qnext, NULL, memory_order_relaxed);
	b->tid = tid;
	b->cap = (uint32_t)ht_opt.buffer_size;
	b->first_seq = first_seq;
	b->taken = 0;
	b->taken_events = 0;
	b->last = 0;
	atomic_store_explicit(&b->commit, 0, memory_order_release);
	return b;
}

void ht_buf__put(struct ht_buf *b)
{
	for (;;) {
		uint64_t head = atomic_load(&shm->free_head);
		b->free_next = (uint32_t)head;
		uint64_t next = ((head >> 32) + 1) << 32 | (b->index + 1);
		if (atomic_compare_exchange_weak(&shm->free_head, &head, next)) {
			atomic_fetch_add_explicit(&shm->freed, 1, memory_order_release);
			return;
		}
	}
}

uint32_t ht_buf__freed(void)
{
	return shm ? atomic_load_explicit(&shm->freed, memory_order_acquire) : 0;
}

/* Vyukov's intrusive MPSC queue: wait-free push, single consumer.
 * A buffer pushed again before the writer popped it would link the queue
 * into a ring that the writer drains forever (a thread cancelled
 * asynchronously between handing its buffer over and taking the next,
 * whose exit then handed the same one over: ht_tls__refill keeps that
 * from happening, this from harming). */
void ht_queue__push(struct ht_buf *b)
{
	if (b != q_stub && atomic_exchange_explicit(&b->queued, 1, memory_order_relaxed))
		return;
	atomic_store_explicit(&b->qnext, NULL, memory_order_relaxed);
	struct ht_buf *prev = atomic_exchange_explicit(&shm->q_head, b, memory_order_acq_rel);
	atomic_store_explicit(&prev->qnext, b, memory_order_release);
}

struct ht_buf *ht_queue__pop(void)
{
	struct ht_buf *tail = shm->q_tail;
	struct ht_buf *next = atomic_load_explicit(&tail->qnext, memory_order_acquire);
	if (tail == q_stub) {
		if (!next)
			return NULL;
		shm->q_tail = next;
		tail = next;
		next = atomic_load_explicit(&next->qnext, memory_order_acquire);
	}
	if (next) {
		shm->q_tail = next;
		atomic_store_explicit(&tail->queued, 0, memory_order_relaxed);
		return tail;
	}
	if (tail != atomic_load_explicit(&shm->q_head, memory_order_acquire))
		return NULL; /* a push is half-way; next round gets it */
	ht_queue__push(q_stub);
	next = atomic_load_explicit(&tail->qnext, memory_order_acquire);
	if (next) {
		shm->q_tail = next;
		atomic_store_explicit(&tail->queued, 0, memory_order_relaxed);
		return tail;
	}
	return NULL;
}

struct ht_thread *ht_thread__first(void)
{
	return shm ? atomic_load_explicit(&shm->thread_list, memory_order_acquire) : NULL;
}

/* A record for a new thread: reuse one the writer has freed, else take a
 * new one from the reserved array. */
struct ht_thread *ht_thread__get(uint32_t tid)
{
	for (struct ht_thread *r = ht_thread__first(); r; r = r->next) {
		int expect = HT_THR_FREE;
		if (atomic_load_explicit(&r->state, memory_order_relaxed) == HT_THR_FREE &&
		    atomic_compare_exchange_strong(&r->state, &expect, HT_THR_CLAIMING)) {
			/* the writer must never see it LIVE with the tid of the
			 * thread it belonged to before (that thread is gone: the
			 * writer would take this thread's buffer) */
			r->tid = tid;
			atomic_store(&r->cur, NULL);
			atomic_store(&r->late, 0);
			atomic_store_explicit(&r->state, HT_THR_LIVE, memory_order_release);
			return r;
		}
	}
	uint32_t n = atomic_fetch_add(&shm->threads_used, 1);
	if (n >= HT_THREAD_RECS)
		return NULL;
	struct ht_thread *r = &threads[n];
	r->tid = tid;
	atomic_store(&r->cur, NULL);
	atomic_store(&r->late, 0);
	atomic_store(&r->state, HT_THR_LIVE);
	struct ht_thread *head = atomic_load(&shm->thread_list);
	do
		r->next = head;
	while (!atomic_compare_exchange_weak(&shm->thread_list, &head, r));
	return r;
}

static inline void commit(struct ht_tls *t)
{
	uint64_t bytes = (uint64_t)(t->pos - t->buf->data);
	atomic_store_explicit(&t->buf->commit, (t->nev << HT_COMMIT_SHIFT) | bytes,
			      memory_order_release);
}

/* Writes one record from its field values (already delta/zigzag coded),
 * the timestamp field last. */
static uint8_t *put_record(uint8_t *o, int kind, int flags, const uint64_t *f, unsigned nf,
			   const void *str, size_t slen)
{
	uint64_t tag = 0; /* up to 9 nibbles (7 fields, timestamp, stack) */
	unsigned lens[HT_MAX_FIELDS + 2];
	for (unsigned i = 0; i < nf; i++) {
		lens[i] = ht_len_bytes(f[i]);
		tag |= (uint64_t)lens[i] << (4 * i);
	}
	if (kind >= 32) {
		*o++ = (uint8_t)(HT_EV_EXT | flags);
		*o++ = (uint8_t)(kind - 32);
	} else {
		*o++ = (uint8_t)(kind | flags);
	}
	unsigned tb = (nf + 1) / 2; /* a nibble per value */
	for (unsigned i = 0; i < tb; i++)
		*o++ = (uint8_t)(tag >> (8 * i));
	for (unsigned i = 0; i < nf; i++)
		o = ht_put_field(o, f[i], lens[i]);
	if (slen) {
		memcpy(o, str, slen);
		o += slen;
	}
	return o;
}

static void write_sync(struct ht_tls *t, uint64_t ts)
{
	uint64_t f[2] = {t->buf->first_seq, ts};
	t->pos = put_record(t->pos, HT_EV_SYNC, 0, f, 2, NULL, 0);
	t->last_ts = ts;
	t->last_ptr = 0;
	t->nev = 0; /* SYNC is not counted as an event */
	commit(t);
}

/* Asynchronous cancellation held back over a stretch: returns the type to
 * give back to cancel_release. */
static int cancel_hold(void)
{
	int type;
	pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &type);
	return type;
}

static void cancel_release(int type)
{
	if (type == PTHREAD_CANCEL_ASYNCHRONOUS)
		pthread_setcanceltype(type, NULL); /* (a cancellation that came acts here) */
}

/* The hand-over below is several steps (the buffer pushed, the next one
 * taken, the thread's record and TLS told), and a thread that the program
 * cancels asynchronously (PTHREAD_CANCEL_ASYNCHRONOUS: undefined inside
 * malloc, but done) can die between any two: its exit then handed over
 * the buffer it had pushed already, which linked the writer's queue into
 * a ring it drained at 100% CPU forever, after the program had ended.  So
 * the cancellation waits until the hand-over is done (no system call:
 * glibc's flag in the thread's own descriptor). */
static int refill(struct ht_tls *t, uint64_t ts);

int ht_tls__refill(struct ht_tls *t, uint64_t ts)
{
	int type = cancel_hold();
	int r = refill(t, ts);
	cancel_release(type);
	return r;
}

static int refill(struct ht_tls *t, uint64_t ts)
{
	struct ht_buf *old = t->buf;
	uint64_t seq = old ? old->first_seq + t->nev : t->next_seq;
	if (old) {
		/* Handed over before the next is taken: with every buffer some
		 * thread's, the writer can free this one for it. */
		if (t->rec)
			atomic_store_explicit(&t->rec->cur, NULL, memory_order_release);
		ht_queue__push(old);
		ht_writer__kick();
		ht_writer__report_failure();
	}
	/* (a thread with none yet waits 20 ms, then goes without: ht_tls__prepare) */
	struct ht_buf *b = ht_buf__get(t->tid, seq, old ? UINT32_MAX / 5 : t->nobuf ? 0 : 20);
	if (!b) {
		t->buf = NULL;
		t->end = NULL;
		return 0;
	}
	t->buf = b;
	t->pos = b->data;
	t->end = ht_tls__end(t);
	t->ts_left = (uint32_t)ht_opt.ts_every;
	if (t->rec)
		atomic_store_explicit(&t->rec->cur, b, memory_order_release);
	write_sync(t, ts);
	if (HT_UNLIKELY(ht_nested__pending(t)))
		t->end = NULL; /* (kept while t->end was being set: the next record drains) */
	return 1;
}

uint8_t *ht_tls__end(const struct ht_tls *t)
{
	return t->buf->data + t->buf->cap - HT_MAX_RECORD - HT_MAX_STR - 16;
}

int ht_tls__drain_kept(struct ht_tls *t)
{
	t->end = ht_tls__end(t); /* (NULL only to bring the record here) */
	if (ht_nested__pending(t) && !t->nested_draining)
		ht_nested__drain(t);
	return t->pos >= t->end;
}

void ht_tls__room(struct ht_tls *t, uint64_t ts)
{
	if (ht_tls__drain_kept(t))
		ht_tls__refill(t, ts);
}

static void encode(struct ht_tls *t, int kind, int flags, uint64_t ts, const uint64_t *vals,
		   const char *str, uint32_t stack, const uint64_t *dur);

static _Atomic uint32_t synth_tid_next; /* ids handed out where gettid() failed */

pid_t ht_self_pid(void)
{
	long r = syscall(SYS_getpid);
	if (HT_LIKELY(r > 0))
		return (pid_t)r;
	/* refused (probe U: a fork child's trace was named OUTPUT.-1, its
	 * header said pid -1, and record's summary left it out) */
	char link[32];
	ssize_t n = ht_raw_syscall(SYS_readlinkat, AT_FDCWD, (long)"/proc/self", (long)link,
				   sizeof(link) - 1, 0, 0);
	if (n <= 0)
		return -1;
	link[n] = 0;
	long v = 0;
	for (ssize_t i = 0; i < n; i++) {
		if (link[i] < '0' || link[i] > '9')
			return -1;
		v = v * 10 + (link[i] - '0');
	}
	return v > 0 ? (pid_t)v : -1;
}

uint32_t ht_self_tid(void)
{
	long r = syscall(SYS_gettid);
	if (HT_LIKELY(r > 0))
		return (uint32_t)r;
	/* a seccomp filter that fails gettid(): every thread would be
	 * (uint32_t)-1, their streams one, and their events lost in it
	 * (probe T): a number of the recorder's own, kept for the thread's
	 * life in its ht_tls.tid */
	if (ht_tls.tid >= HT_SYNTH_TID)
		return ht_tls.tid;
	uint32_t n = HT_SYNTH_TID + atomic_fetch_add(&synth_tid_next, 1);
	if (n == HT_SYNTH_TID)
		ht_msg("gettid() fails in this process (a seccomp filter?): its threads are "
		       "numbered from %u in the trace, not by their thread ids", HT_SYNTH_TID);
	ht_tls.tid = n;
	return n;
}


/* prepare()'s work, the tracer's own: what glibc allocates in there
 * (pthread_create's stack cache, pthread_setspecific's key pages) is
 * not the program's (HT_GUARD_OWN). */
static int prepare_own(struct ht_tls *t, uint64_t *ts)
{
	if (!ht_initialized) {
		ht_init();
		/* the options may have changed the clock, or paused recording */
		if (!atomic_load_explicit(&ht_on, memory_order_relaxed))
			return 0;
		*ts = ht_now();
	}
	if (!region && ht_buf__pool_init() < 0)
		return 0;
	int fresh = t->state == 0;
	t->tid = ht_self_tid();
	if (fresh) {
		ht_order__thread(t);
		/* a thread the program made without pthread_create (clone) */
		if (t->tid != (uint32_t)getpid() &&
		    !atomic_load_explicit(&ht_multithreaded, memory_order_relaxed))
			atomic_store(&ht_multithreaded, 1);
	}
	t->rec = ht_thread__get(t->tid);
	if (!t->rec)
		return 0;
	if (t->state == 2) /* after its exit destructor: nothing hands its buffer over */
		atomic_store(&t->rec->late, 1);
	t->buf = NULL;
	t->nev = 0;
	t->state = 1;
	ht_register_thread_exit();
	ht_writer__ensure_started();
	return fresh ? 2 : 1;
}

int ht_tls__prepare(struct ht_tls *t, uint64_t *ts)
{
	if (t->state == 1)
		return 1;
	int r;
	if (t->nobuf) {
		/* No buffer was to be had: this call is counted, and another
		 * try made once the writer has put one back. */
		uint32_t freed = ht_buf__freed();
		if (freed == t->nobuf_freed) {
			ht_nested__drop();
			return 0;
		}
		t->nobuf_freed = freed;
		r = t->nobuf; /* (1, or 2 if the thread's start is still to be said) */
	} else {
		/* (a thread record claimed and not yet live stays claimed for
		 * good: no asynchronous cancellation half-way, as in
		 * ht_tls__refill) */
		int type = cancel_hold();
		t->guard += HT_GUARD_OWN;
		r = prepare_own(t, ts);
		t->guard -= HT_GUARD_OWN;
		cancel_release(type);
		if (!r)
			return 0;
	}
	t->state = 1;
	if (!ht_tls__refill(t, *ts)) {
		/* More threads recording at once than buffers (docs/record.md,
		 * "Address space"): this one goes without, its calls counted. */
		if (!t->nobuf)
			t->nobuf_freed = ht_buf__freed();
		t->nobuf = r;
		t->state = 3;
		ht_nested__drop();
		return 0;
	}
	t->nobuf = 0;
	if (r == 2) {
		uint64_t v[1] = {t->creator};
		encode(t, HT_EV_THREAD_START, 0, *ts, v, NULL, 0, NULL);
	}
	return 1;
}

void ht_tls__exit(struct ht_tls *t)
{
	if (t->state != 1)
		return;
	/* (the thread ends: no asynchronous cancellation half-way, as in
	 * ht_tls__refill, and none after: not released) */
	cancel_hold();
	/* (run again when the program's own key destructors, run after
	 * ours, allocated: the exit was said already) */
	if (!t->exit_said && atomic_load_explicit(&ht_on, memory_order_relaxed))
		ht_record(HT_EV_THREAD_EXIT, 0, ht_now(), NULL, NULL);
	t->exit_said = 1;
	ht_stack__thread_exit(t);
	struct ht_buf *b = t->buf;
	struct ht_thread *r = t->rec;
	t->state = 2;
	t->end = NULL; /* hot_ready() takes the slow path */
	t->next_seq = b->first_seq + t->nev;
	t->buf = NULL;
	b->last = 1;
	atomic_store_explicit(&r->cur, NULL, memory_order_release);
	atomic_store_explicit(&r->state, HT_THR_EXITED, memory_order_release);
	ht_queue__push(b);
	/* counted as a full buffer is, and waking the writer every 16 of
	 * them: a program that makes a thread per task hands a buffer over at
	 * each thread's end */
	ht_writer__kick();
}

/* Events after which every thread's next malloc/free takes the clock: they
 * mark points that other threads synchronize with (pthread_join, a mark the
 * program sets between phases), so that events after them in other
 * threads are not dated before them. */
#define EPOCH_KINDS                                                                      \
	(1u << HT_EV_THREAD_START | 1u << HT_EV_THREAD_EXIT | 1u << HT_EV_THREAD_NAME |  \
	 1u << HT_EV_MARK | 1u << HT_EV_CONTROL | 1u << HT_EV_FORK | 1u << HT_EV_EXEC)

/* Events that carry a stack with --stacks: whatever hands out memory. */
#define STACK_KINDS                                                                      \
	(1u << HT_EV_MALLOC | 1u << HT_EV_CALLOC | 1u << HT_EV_REALLOC |                  \
	 1u << HT_EV_REALLOCARRAY | 1u << HT_EV_MEMALIGN | 1u << HT_EV_POSIX_MEMALIGN |  \
	 1u << HT_EV_ALIGNED_ALLOC | 1u << HT_EV_VALLOC | 1u << HT_EV_PVALLOC |           \
	 1u << HT_EV_MMAP | 1u << HT_EV_MREMAP | 1u << HT_EV_BRK | 1u << HT_EV_SBRK |      \
	 1u << HT_EV_SHMAT)

/* The generic, table-driven encoder used for every kind but the hot
 * malloc/free pair (see hooks.c).  The thread must be prepared.  With dur,
 * a DURATION pseudo-record goes first, in the same buffer (the margin
 * below t->end holds both records). */
static void encode(struct ht_tls *t, int kind, int flags, uint64_t ts, const uint64_t *vals,
		   const char *str, uint32_t stack, const uint64_t *dur)
{
	if (kind < 32 && ((1u << kind) & EPOCH_KINDS))
		atomic_fetch_add_explicit(ht_epoch_p, 1, memory_order_relaxed);
	if (HT_UNLIKELY(t->pos >= t->end))
		ht_tls__room(t, ts);
	if (HT_UNLIKELY((int64_t)(ts - t->last_ts) < 0))
		ts = t->last_ts; /* (after a handler's call, dated in the handler) */
	if (dur) {
		uint64_t f[2] = {*dur, 0}; /* undated, like every pseudo-record */
		t->pos = put_record(t->pos, HT_EV_DURATION, 0, f, 2, NULL, 0);
	}
	const struct ht_kind_desc *d = &ht_kind_descs[kind];
	uint64_t f[HT_MAX_FIELDS + 2]; /* fields, timestamp, stack */
	unsigned nf = 0;
	size_t slen = 0;
	int vi = 0;
	for (const char *c = d->fields; *c; c++) {
		switch (*c) {
		case 's':
			f[nf++] = ht_zigzag((int64_t)vals[vi++]);
			break;
		case 'p': {
			uint64_t v = vals[vi++];
			f[nf++] = ht_zigzag((int64_t)(v - t->last_ptr));
			t->last_ptr = v;
			break;
		}
		case 'S':
			slen = str ? strnlen(str, HT_MAX_STR) : 0;
			f[nf++] = slen;
			break;
		default: /* 'u', 'U', 'd' */
			f[nf++] = vals[vi++];
		}
	}
	f[nf++] = ts - t->last_ts + 1; /* 0 would mean "no timestamp" */
	t->last_ts = ts;
	if (stack) {
		f[nf++] = stack;
		flags |= HT_F_STACK;
	}
	t->pos = put_record(t->pos, kind, flags, f, nf, str, slen);
	t->nev++;
	commit(t);
}

/* With --sample-bytes: whether to record this allocation-kind event. */
static int sampled(struct ht_tls *t, int kind, const uint64_t *vals)
{
	const struct ht_kind_desc *d = &ht_kind_descs[kind];
	uint64_t p = vals[d->result];
	switch (kind) {
	case HT_EV_REALLOC:
		return ht_sample__realloc(t, vals[0], vals[1], p);
	case HT_EV_REALLOCARRAY:
		return ht_sample__realloc(t, vals[0], vals[1] * vals[2], p);
	case HT_EV_CALLOC:
		return ht_sample__alloc(t, vals[0] * vals[1], p);
	case HT_EV_MALLOC:
	case HT_EV_VALLOC:
	case HT_EV_PVALLOC:
		return ht_sample__alloc(t, vals[0], p);
	default: /* the memalign family: align, size */
		return ht_sample__alloc(t, vals[1], p);
	}
}

/* Records one event for the calling thread, unless it is inside the
 * tracer already (a signal handler, or the tracer's own allocations). */
static void record(int kind, int flags, uint64_t ts, const uint64_t *vals, const char *str,
		   const uint64_t *dur)
{
	struct ht_tls *t = &ht_tls;
	if (t->guard)
		return;
	t->guard = HT_GUARD_REC;
	if (HT_LIKELY(t->state == 1) || ht_tls__prepare(t, &ts)) {
		if (HT_UNLIKELY(ht_opt.sample_bytes) && kind < 32 && ht_kind_descs[kind].is_alloc &&
		    !sampled(t, kind, vals)) {
			t->guard = 0;
			return;
		}
		/* a block handed out: the next event on it, in another thread,
		 * takes the clock (order.c); this one is dated already */
		if (kind < 32 && ht_kind_descs[kind].is_alloc && vals[ht_kind_descs[kind].result])
			ht_order__note(t, vals[ht_kind_descs[kind].result]);
		uint32_t stack = 0;
		if (HT_UNLIKELY(ht_opt.stack_depth) && kind < 32 && ((1u << kind) & STACK_KINDS))
			stack = ht_stack__capture(t);
		encode(t, kind, flags, ts, vals, str, stack, dur);
	}
	t->guard = 0;
}

void ht_nested__write(struct ht_tls *t, int kind, int flags, uint64_t ts, const uint64_t *vals)
{
	if (kind < 32 && ht_kind_descs[kind].is_alloc && vals[ht_kind_descs[kind].result])
		ht_order__note(t, vals[ht_kind_descs[kind].result]);
	encode(t, kind, flags, ts, vals, NULL, 0, NULL);
}

void ht_record(int kind, int flags, uint64_t ts, const uint64_t *vals, const char *str)
{
	record(kind, flags, ts, vals, str, NULL);
}

void ht_record_timed(int kind, int flags, uint64_t ts, uint64_t dur, const uint64_t *vals)
{
	record(kind, flags, ts, vals, NULL, &dur);
}

/* A pseudo-record (FRAME, MODULE, ...): not an event, no timestamp.  The
 * thread must be prepared and inside the tracer. */
void ht_meta__write(struct ht_tls *t, int kind, const uint64_t *vals, const void *str,
		    size_t slen)
{
	if (HT_UNLIKELY(t->pos >= t->end))
		ht_tls__room(t, ht_now());
	unsigned nf = (unsigned)strlen(ht_kind_descs[kind].fields);
	uint64_t f[HT_MAX_FIELDS + 1];
	for (unsigned i = 0; i < nf; i++)
		f[i] = vals[i];
	f[nf++] = 0; /* undated */
	if (slen > HT_MAX_STR)
		slen = HT_MAX_STR;
	t->pos = put_record(t->pos, kind, 0, f, nf, str, slen);
	commit(t);
}
