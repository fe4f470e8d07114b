// SPDX-License-Identifier: GPL-2.0
/* heaptrail attach: uprobes on the allocator functions of one process.
 *
 * An allocation function's entry saves its arguments per thread; its
 * return decides whether the call is traced (each allocation call with
 * probability 1/sample_every, drawn at random) and if so keeps the block
 * in `traced` and sends an event with the user stack.  A free sends an
 * event only for a block in `traced` (the frees of blocks that were not
 * traced, or allocated before the attach, are not seen).  A realloc of a
 * traced block stays traced.  Calls the allocator makes to its own
 * exported functions while one is running (glibc's realloc(NULL, n)
 * calling malloc, realloc(p, 0) calling free) are the outer call's, not
 * events of their own.
 *
 * Nothing is traced until attach.c sets `armed`, once every probe is in:
 * attached one by one (a few milliseconds each), an entry probe went in
 * before its return probe, a thread that entered malloc in between left a
 * call whose return was never seen, and every later call of that thread
 * counted as nested in it, untraced (0 calls traced in 3 runs of 8 on a
 * busy two-thread program); a free probed after malloc's return let a
 * traced block go unseen, and the reuse of its address counted as "more
 * than --max-blocks". */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "attach.bpf.h"
#include "stackhash.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* enum ht_kind (src/trace/format.h) */
#define K_MALLOC 1
#define K_FREE 2
#define K_CALLOC 3
#define K_REALLOC 4
#define K_MEMALIGN 6
#define K_POSIX_MEMALIGN 7
#define K_ALIGNED_ALLOC 8
#define K_VALLOC 9
#define K_PVALLOC 10
#define F_MMAPPED 0x20
#define F_NONMAIN 0x40
#define ENOENT 2 /* (errno.h, which vmlinux.h does not have; stackhash.bpf.h: the others) */

const volatile __u32 target_tgid = 0;  /* the traced process */
const volatile __u32 sample_every = 1; /* trace 1 in N allocation calls */
const volatile __u8 is_glibc = 0;      /* read glibc's chunk header of a block */

__u32 armed = 0; /* every probe is in: trace (set by attach.c) */

/* More calls nested in one call than any allocator makes of its own
 * exported functions (glibc: one, realloc's malloc or free): the call
 * returned unseen (stale). */
#define MAX_NESTED 8

/* A call in progress, per thread. */
struct pending {
	__u64 a0, a1, a2; /* arguments */
	__u64 sp;         /* the stack pointer at entry: where the return address is */
	__u64 ra;         /* that return address, as the caller pushed it */
	__u64 start;      /* realloc: bpf_ktime_get_ns() at the entry, before the
			   * allocator could release the old block */
	__u32 kind;       /* K_* */
	__u32 depth;      /* nested calls of the allocator's own functions in progress */
	__u32 nested;     /* nested calls (and frees) seen in this call */
	__u32 old_traced; /* realloc: its block was a traced one (taken out at entry) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* pid_tgid */
	__type(value, struct pending);
} pending SEC(".maps");

/* Traced blocks still live: address -> the image_gen it was traced in
 * (max_entries set by attach.c).  Not preallocated: a million entries
 * would take 84 MB of kernel memory up front; this way memory follows the
 * traced live set. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 20);
	__type(key, __u64);
	__type(value, __u32);
} traced SEC(".maps");

/* The execs of the process so far: an entry of `traced` from an earlier
 * image is a block that went with it (its address may be handed out
 * again by the new image's allocator). */
__u32 image_gen = 0;

/* The stacks: the hash of a stack's addresses -> the addresses
 * (HT_ATTACH_MAX_DEPTH, zero-filled; stackhash.bpf.h).  The kernel's
 * stack-trace map lost 137 of 2048 distinct stacks, 1786 of 8192, and
 * now and then one of the test program's dozen.  Not preallocated:
 * memory follows the stacks seen. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, HT_ATTACH_STACKS);
	__uint(key_size, sizeof(__u64));
	__uint(value_size, HT_ATTACH_MAX_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

/* Where a stack is taken before it is hashed (too big for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, HT_ATTACH_MAX_DEPTH * sizeof(__u64));
} stack_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HT_AS_NR);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &which);
	if (v)
		__sync_fetch_and_add(v, 1);
}

/* Takes the user stack of ctx into e (stack, or stack_error and a
 * count): the hash of its addresses, the addresses kept in `stacks` under
 * it (stackhash.bpf.h).  1 when the stack is new: its event wakes the reader at once, so
 * that it reads the process's map while the code of that stack is still
 * mapped (a library dlopened, used, then closed, or a process that exits
 * right after). */
static __always_inline int take_stack(void *ctx, struct ht_attach_event *e)
{
	/* (every field set: the ring's record is not zeroed, and kept a
	 * free's stack_error, so that once the ring had wrapped, half the
	 * stacks were dropped with no word; probe Z) */
	e->stack = 0;
	e->stack_error = 0;
	long rc = ht_stack_keep(ctx, &stacks, &stack_scratch, HT_ATTACH_MAX_DEPTH, &e->stack);
	if (rc < 0) {
		e->stack_error = (__s32)rc;
		count(rc == -ENOSPC ? HT_AS_STACKS_FULL : HT_AS_NOSTACK);
	}
	return rc == 1;
}

/* An event of thread tid in the ring, zeroed, dated now, without a stack;
 * NULL (counted lost) if the ring is full. */
static __always_inline struct ht_attach_event *new_event(__u32 tid, __u8 kind)
{
	struct ht_attach_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(HT_AS_LOST);
		return NULL;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts = bpf_ktime_get_ns();
	e->tid = tid;
	e->kind = kind;
	e->stack_error = -ENOENT;
	return e;
}

/* Submit without waking the reader (a wake-up per event costs the traced
 * thread an interrupt and the machine two context switches): it polls the
 * ring every few hundred milliseconds anyway; wake it only when the ring
 * is filling up. */
static __always_inline __u64 wake_flag(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > (4 << 20) ? BPF_RB_FORCE_WAKEUP
									  : BPF_RB_NO_WAKEUP;
}

static __always_inline int ours(void)
{
	return armed && (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

/* Whether p, the thread's call in progress, returned unseen, now that the
 * thread enters an allocator function with stack pointer sp.  A call the
 * allocator makes inside p comes from deeper in the stack, or from the
 * same frame (a tail call: realloc(NULL, n) jumping to malloc), while p's
 * return address has been replaced by the kernel's return trampoline.
 * So a call from a shallower frame, p's own return address still in its
 * slot, or more nested calls than an allocator makes in one call say that
 * p is over.  (Without this one missed return, for whatever reason, hid
 * every later call of the thread for the rest of the session.) */
static __always_inline int stale(const struct pending *p, __u64 sp)
{
	if (sp > p->sp || p->nested >= MAX_NESTED)
		return 1;
	__u64 w = 0;
	if (bpf_probe_read_user(&w, sizeof(w), (void *)p->sp))
		return 0; /* (not known: the count of nested calls decides) */
	return w == p->ra;
}

/* Takes addr out of the traced blocks; whether it was one of this image's. */
static __always_inline int take_traced(__u64 addr)
{
	__u32 *g = bpf_map_lookup_elem(&traced, &addr);
	if (!g)
		return 0;
	int mine = *g == image_gen;
	return bpf_map_delete_elem(&traced, &addr) == 0 && mine;
}

/* Puts addr in the traced blocks; 0, or < 0 if the table is full.  An
 * entry already there is an earlier image's block, or a traced block
 * whose free was not seen (freed by a function that is not probed:
 * jemalloc's sdallocx, a sized or aligned operator delete...): the
 * allocator handed its address out again, so it was freed; the new block
 * replaces it (*reused = 1, and counted: before, the new block was
 * dropped and counted as "more than --max-blocks live"). */
static __always_inline long put_traced(__u64 addr, __u64 flags, __u8 *reused)
{
	__u32 gen = image_gen;
	long rc = bpf_map_update_elem(&traced, &addr, &gen, flags);
	if (rc == -EEXIST) {
		__u32 *g = bpf_map_lookup_elem(&traced, &addr);
		if (g && *g == gen) {
			count(HT_AS_REUSED);
			*reused = 1;
		}
		rc = bpf_map_update_elem(&traced, &addr, &gen, BPF_ANY);
	}
	return rc;
}

static __always_inline int enter(struct pt_regs *ctx, __u32 kind, __u64 a0, __u64 a1, __u64 a2)
{
	if (!ours())
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u64 sp = PT_REGS_SP(ctx);
	struct pending *p = bpf_map_lookup_elem(&pending, &id);
	if (p && !stale(p, sp)) {
		p->depth++;
		p->nested++;
		return 0;
	}
	struct pending n = {.a0 = a0, .a1 = a1, .a2 = a2, .sp = sp, .kind = kind};
	bpf_probe_read_user(&n.ra, sizeof(n.ra), (void *)sp);
	/* realloc's block leaves the live table as the call starts, as a
	 * free's does: realloc may free it inside, and another thread's
	 * malloc may get its address and return before this call does (its
	 * insert then failed, the block was dropped and counted as "more
	 * than --max-blocks") */
	if (kind == K_REALLOC && a0 && take_traced(a0)) {
		n.old_traced = 1;
		n.start = bpf_ktime_get_ns();
	}
	bpf_map_update_elem(&pending, &id, &n, BPF_ANY);
	return 0;
}

/* Whether this allocation call is one of the sampled ones: each call on
 * its own, with probability 1/sample_every (a traced block then stands for
 * sample_every on average).  Not every sample_every-th call: a program
 * whose calls repeat with a period sharing a factor with sample_every
 * (six malloc/free pairs and one leak, sampled 1 in 7) had its leak always
 * or never traced, and the estimate was off by the whole leak. */
static __always_inline int sampled(void)
{
	count(HT_AS_CALLS);
	return sample_every <= 1 || bpf_get_prandom_u32() % sample_every == 0;
}

static __always_inline void glibc_chunk(struct ht_attach_event *e)
{
	__u64 sz = 0;
	if (!is_glibc || !e->ptr || bpf_probe_read_user(&sz, sizeof(sz), (void *)(e->ptr - 8)))
		return;
	int mm = (sz & 2) != 0;
	e->flags = (mm ? F_MMAPPED : 0) | ((sz & 4) ? F_NONMAIN : 0);
	e->usable = (sz & ~7ull) - (mm ? 16 : 8);
}

static __always_inline int leave(struct pt_regs *ctx, __u64 ret)
{
	if (!ours())
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	struct pending *pp = bpf_map_lookup_elem(&pending, &id);
	if (!pp)
		return 0;
	/* the return pops the return address: a stack pointer above that is
	 * a return from a shallower frame, so pp returned unseen */
	if (PT_REGS_SP(ctx) > pp->sp + 8) {
		bpf_map_delete_elem(&pending, &id);
		return 0;
	}
	if (pp->depth) {
		pp->depth--;
		return 0;
	}
	struct pending p = *pp;
	bpf_map_delete_elem(&pending, &id);

	__u64 ptr = ret, old = 0;
	__u8 old_traced = 0, reused = 0;
	if (p.kind == K_POSIX_MEMALIGN) {
		ptr = 0;
		if ((int)ret == 0)
			bpf_probe_read_user(&ptr, sizeof(ptr), (void *)p.a0);
	}
	if (p.kind == K_REALLOC) {
		old = p.a0;
		old_traced = p.old_traced != 0; /* (taken out of the table at entry) */
		/* failed: the old block is still there, still traced */
		if (!ret && p.a1 && old_traced)
			put_traced(old, BPF_ANY, &reused);
	}
	if (old_traced) {
		count(HT_AS_CALLS); /* counted, outside the sampling */
	} else if (p.kind == K_REALLOC && old && sample_every > 1) {
		/* A block not drawn when it was made is not drawn again when
		 * it is reallocated: that gave every reallocated block a second
		 * chance, and the estimate of live blocks grew with the
		 * reallocs (+11% on a program that reallocates 1 block in 10,
		 * at --sample 10).  (A block from before the attach is then
		 * never traced under sampling: it is not one of the attach's.) */
		count(HT_AS_CALLS);
		return 0;
	} else if (!sampled() || !ptr) {
		return 0; /* not traced (a failed call is not a block either) */
	}
	if (ptr && put_traced(ptr, BPF_NOEXIST, &reused) != 0 && !old_traced) {
		count(HT_AS_FULL);
		return 0;
	}
	struct ht_attach_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(HT_AS_LOST);
		return 0;
	}
	e->ts = bpf_ktime_get_ns();
	e->start = p.start ? p.start : e->ts;
	e->ptr = ptr;
	e->old = old;
	e->a0 = p.a0;
	e->a1 = p.a1;
	e->usable = 0;
	e->ret = p.kind == K_POSIX_MEMALIGN ? (__s64)(int)ret : 0;
	if (p.kind == K_POSIX_MEMALIGN) {
		e->a0 = p.a1; /* align, size */
		e->a1 = p.a2;
	}
	e->tid = (__u32)id;
	e->kind = (__u8)p.kind;
	e->flags = 0;
	e->old_traced = old_traced;
	e->reused = reused;
	glibc_chunk(e);
	__u64 wake = wake_flag();
	if (take_stack(ctx, e))
		wake = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(e, wake);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(free_enter, void *ptr)
{
	if (!ours() || !ptr)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	struct pending *pp = bpf_map_lookup_elem(&pending, &id);
	if (pp) {
		if (!stale(pp, PT_REGS_SP(ctx))) {
			pp->nested++;
			return 0; /* the allocator's own free, inside realloc */
		}
		bpf_map_delete_elem(&pending, &id);
	}
	__u64 p = (__u64)ptr;
	if (!take_traced(p))
		return 0; /* not a traced block (or one of an image before an exec) */
	struct ht_attach_event *e = new_event((__u32)id, K_FREE);
	if (!e)
		return 0;
	e->ptr = p;
	if (is_glibc) {
		__u64 sz = 0;
		if (!bpf_probe_read_user(&sz, sizeof(sz), (void *)(p - 8)))
			e->flags = ((sz & 2) ? F_MMAPPED : 0) | ((sz & 4) ? F_NONMAIN : 0);
	}
	bpf_ringbuf_submit(e, wake_flag());
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(malloc_enter, __u64 size)
{
	return enter(ctx, K_MALLOC, size, 0, 0);
}

SEC("uprobe")
int BPF_KPROBE(calloc_enter, __u64 nmemb, __u64 size)
{
	return enter(ctx, K_CALLOC, nmemb, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(realloc_enter, void *ptr, __u64 size)
{
	return enter(ctx, K_REALLOC, (__u64)ptr, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(memalign_enter, __u64 align, __u64 size)
{
	return enter(ctx, K_MEMALIGN, align, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(posix_memalign_enter, void *memptr, __u64 align, __u64 size)
{
	return enter(ctx, K_POSIX_MEMALIGN, (__u64)memptr, align, size);
}

SEC("uprobe")
int BPF_KPROBE(aligned_alloc_enter, __u64 align, __u64 size)
{
	return enter(ctx, K_ALIGNED_ALLOC, align, size, 0);
}

SEC("uprobe")
int BPF_KPROBE(valloc_enter, __u64 size)
{
	return enter(ctx, K_VALLOC, size, 0, 0);
}

SEC("uprobe")
int BPF_KPROBE(pvalloc_enter, __u64 size)
{
	return enter(ctx, K_PVALLOC, size, 0, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(alloc_exit, __u64 ret)
{
	return leave(ctx, ret);
}

/* The process execs: its blocks go with its old image.  An event tells
 * the reader, in order with the calls (the other threads are gone by
 * then). */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	if (!ours())
		return 0;
	__sync_fetch_and_add(&image_gen, 1);
	struct ht_attach_event *e =
		new_event((__u32)bpf_get_current_pid_tgid(), HT_ATTACH_EXEC);
	if (!e)
		return 0;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}
