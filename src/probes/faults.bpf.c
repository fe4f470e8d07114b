// SPDX-License-Identifier: GPL-2.0
/* Page faults (the software perf event, one sample per fault) counted by
 * user stack (faults), or by the file backing the faulting address
 * (ffaults): at the entry of handle_mm_fault, which is given the mapping
 * (fentry, a BPF trampoline: no kprobes, no tracefs), or where trampolines
 * are missing from the perf event's sampled address through bpf_find_vma
 * (which costs about 14 us a call on the project's VM, from the perf
 * event's handler: measured, docs/probes.md). */
#include "stacks.bpf.h"

char LICENSE[] SEC("license") = "GPL";


SEC("perf_event")
int fault_stack(struct bpf_perf_event_data *ctx)
{
	__u32 tgid, tid;
	if (!ht_traced(&tgid, &tid) || !tgid)
		return 0;
	ht_count_stack(ctx, tgid, 0);
	return 0;
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HT_COUNT_ENTRIES);
	__type(key, struct ht_file_key);
	__type(value, struct ht_file_val);
} file_counts SEC(".maps");

/* Summed over processes (ffaults without -p/--per-process), else per process. */
const volatile __u32 per_process = 0;

/* What bpf_find_vma's callback fills: the file and the mapping's extent. */
struct lookup {
	struct ht_file_key k; /* the file */
	__u64 start, end;     /* the mapping */
};

static long vma_file(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct lookup *l = data;
	if (ht_vma_file(vma, l->k.name, HT_FILE_LEN) <= 0)
		l->k.kind = HT_FILE_ANON;
	l->start = BPF_CORE_READ(vma, vm_start);
	l->end = BPF_CORE_READ(vma, vm_end);
	return 0;
}

/* The mappings of a process seen lately, so that bpf_find_vma (costly from
 * the perf event, and failing while another thread holds the mmap lock to
 * map or unmap) runs once per mapping and not once per fault.  A call that
 * changes the mappings forgets only the entries of the range it changes
 * (vma_forget, vma_changed): dropping the whole cache at every mmap made a
 * process with one thread mapping and unmapping in a loop look every fault
 * of the others up again, and most look-ups then failed.  An mmap of a
 * regular file or of private anonymous memory is entered as it returns,
 * with the file taken from its fd (no look-up at all). */
#define VMA_CACHE 8
struct vma_cache {
	__u64 start[VMA_CACHE], end[VMA_CACHE]; /* extents, end 0 = empty */
	__u32 kind[VMA_CACHE];                  /* HT_FILE_NAMED or HT_FILE_ANON */
	char name[VMA_CACHE][HT_FILE_LEN];      /* the file's name */
	__u32 next;                             /* the slot to fill next when none is empty */
};

/* All empty, never written: what a process's cache starts as (too big for
 * the BPF stack). */
static struct vma_cache empty_cache;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, struct vma_cache);
} vmas SEC(".maps");

#define PAGE_UP(n) (((n) + 4095) & ~4095ull)
#define MAP_SHARED_TYPE 0x03
#define MAP_FIXED 0x10
#define MAP_ANONYMOUS 0x20
#define MAP_FIXED_NOREPLACE 0x100000

/* Empties the entries of c that overlap [start, end). */
static __always_inline void cache_forget(struct vma_cache *c, __u64 start, __u64 end)
{
	for (int i = 0; i < VMA_CACHE; i++)
		if (c->start[i] < end && start < c->end[i])
			c->end[i] = 0;
}

/* Enters a mapping in c, in an empty slot if there is one (a thread that
 * maps and unmaps in a loop then does not push the others' out). */
static __always_inline void cache_put(struct vma_cache *c, __u64 start, __u64 end, __u32 kind,
				      const char *name)
{
	__u32 slot = VMA_CACHE;
	for (int i = 0; i < VMA_CACHE; i++) {
		if (!c->end[i]) {
			slot = i;
			break;
		}
	}
	if (slot >= VMA_CACHE)
		slot = c->next++ % VMA_CACHE;
	if (slot >= VMA_CACHE)
		return;
	c->end[slot] = 0; /* (empty while it is written) */
	c->start[slot] = start;
	c->kind[slot] = kind;
	__builtin_memcpy(c->name[slot], name, HT_FILE_LEN);
	c->end[slot] = end;
}

/* Before the system calls that change a process's mappings where the range
 * is known at entry only (x86_64): brk (between the break and the one
 * asked for); execve, execveat, shmat at an address, shmdt (the extent is
 * not in the arguments) forget the whole cache. */
SEC("tp_btf/sys_enter")
int BPF_PROG(vma_forget, struct pt_regs *regs, long id)
{
	if (id != 12 && id != 30 && id != 67 && id != 59 && id != 322)
		return 0;
	__u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	struct vma_cache *c = bpf_map_lookup_elem(&vmas, &tgid);
	if (!c)
		return 0;
	__u64 a0 = BPF_CORE_READ(regs, di);
	if (id == 12) {
		struct task_struct *task = bpf_get_current_task_btf();
		__u64 cur = BPF_CORE_READ(task, mm, brk);
		cache_forget(c, a0 < cur ? a0 : cur, PAGE_UP(a0 > cur ? a0 : cur));
	} else if (id != 30 || a0) {
		bpf_map_delete_elem(&vmas, &tgid);
	}
	return 0;
}

/* As the calls that map, unmap or move a range return: the range is
 * forgotten (again: a fault during the call may have looked the old
 * mapping up), and a new mapping of a regular file (named from the call's
 * fd) or of private anonymous memory is entered.  mmap 9, munmap 11,
 * mremap 25, remap_file_pages 216. */
SEC("tp_btf/sys_exit")
int BPF_PROG(vma_changed, struct pt_regs *regs, long ret)
{
	__u32 tgid, tid;
	long id = BPF_CORE_READ(regs, orig_ax);
	if ((id != 9 && id != 11 && id != 25 && id != 216) || !ht_traced(&tgid, &tid) || !tgid)
		return 0;
	__u64 a0 = BPF_CORE_READ(regs, di), a1 = BPF_CORE_READ(regs, si);
	__u64 a2 = BPF_CORE_READ(regs, dx), a3 = BPF_CORE_READ(regs, r10);
	int ok = (__u64)ret < (__u64)-4095;
	struct vma_cache *c = bpf_map_lookup_elem(&vmas, &tgid);
	if (c) {
		if (id != 9 || (a3 & (MAP_FIXED | MAP_FIXED_NOREPLACE)))
			cache_forget(c, a0, a0 + PAGE_UP(a1));
		if (id == 9 && ok)
			cache_forget(c, (__u64)ret, (__u64)ret + PAGE_UP(a1));
		if (id == 25 && ok)
			cache_forget(c, (__u64)ret, (__u64)ret + PAGE_UP(a2));
	}
	if (id != 9 || !ok)
		return 0;
	struct ht_file_key k = {};
	if (a3 & MAP_ANONYMOUS) {
		if ((a3 & MAP_SHARED_TYPE) != 0x02)
			return 0; /* shared: a shmem file of the kernel's, looked up at a fault */
		k.kind = HT_FILE_ANON;
	} else {
		struct file *f = ht_fd_file(BPF_CORE_READ(regs, r8));
		if (!f || ht_file_name(f, k.name, HT_FILE_LEN) <= 0)
			return 0;
	}
	if (!c) {
		bpf_map_update_elem(&vmas, &tgid, &empty_cache, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&vmas, &tgid);
		if (!c)
			return 0;
	}
	cache_put(c, (__u64)ret, (__u64)ret + PAGE_UP(a1), k.kind, k.name);
	return 0;
}

/* And when one of its threads exits (its tgid may name another process
 * later). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(vma_exit, struct task_struct *p)
{
	__u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	bpf_map_delete_elem(&vmas, &tgid);
	return 0;
}

/* Per process (--per-process, -p, -c): the execs each process made since
 * the probe started, so that the faults of a program a shell exec'd are
 * rows of their own, named after it (they were added to the shell's rows
 * of the same files, under the shell's name). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);   /* tgid */
	__type(value, __u32); /* execs */
} images SEC(".maps");

SEC("tp_btf/sched_process_exec")
int BPF_PROG(image_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	if (!per_process)
		return 0;
	__u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32), one = 1;
	__u32 *n = bpf_map_lookup_elem(&images, &tgid);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&images, &tgid, &one, BPF_NOEXIST);
	return 0;
}

/* Counts a fault on the file of key k. */
static __always_inline void count_file(struct ht_file_key *k)
{
	if (k->kind != HT_FILE_NAMED)
		__builtin_memset(k->name, 0, sizeof(k->name));
	if (k->pid) {
		__u32 *n = bpf_map_lookup_elem(&images, &k->pid);
		k->image = n ? *n : 0;
	}
	struct ht_file_val *v = bpf_map_lookup_elem(&file_counts, k);
	if (!v) {
		struct ht_file_val zero = {};
		/* the process's name, not the faulting thread's own */
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();
		if (BPF_CORE_READ_STR_INTO(&zero.comm, task, group_leader, comm) <= 0)
			bpf_get_current_comm(zero.comm, sizeof(zero.comm));
		bpf_map_update_elem(&file_counts, k, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&file_counts, k);
		if (!v) {
			__sync_fetch_and_add(&dropped, 1);
			return;
		}
	}
	__sync_fetch_and_add(&v->count, 1);
}

SEC("fentry/handle_mm_fault")
int BPF_PROG(fault_vma, struct vm_area_struct *vma, unsigned long address, unsigned int flags,
	     struct pt_regs *regs)
{
	__u32 tgid, tid;
	if (!ht_traced(&tgid, &tid) || !tgid)
		return 0;
	struct ht_file_key k = {};
	k.pid = per_process ? tgid : 0;
	if (ht_vma_file(vma, k.name, HT_FILE_LEN) <= 0)
		k.kind = HT_FILE_ANON;
	count_file(&k);
	return 0;
}

#define ENOENT 2
#define LOOKUP_TRIES 4 /* bpf_find_vma calls before a fault is left unknown */

SEC("perf_event")
int fault_file(struct bpf_perf_event_data *ctx)
{
	__u32 tgid, tid;
	if (!ht_traced(&tgid, &tid) || !tgid)
		return 0;
	struct ht_file_key k = {};
	k.pid = per_process ? tgid : 0;
	__u64 addr = ctx->addr;
	struct vma_cache *c = bpf_map_lookup_elem(&vmas, &tgid);
	if (c) {
		for (int i = 0; i < VMA_CACHE; i++) {
			if (addr >= c->start[i] && addr < c->end[i]) {
				k.kind = c->kind[i];
				__builtin_memcpy(k.name, c->name[i], HT_FILE_LEN);
				count_file(&k);
				return 0;
			}
		}
	}
	struct lookup l = {};
	struct task_struct *task = bpf_get_current_task_btf();
	long rc = -1;
	/* -EBUSY while another thread holds the mmap lock (or waits for it):
	 * it is held for a few microseconds at a time */
	for (int i = 0; i < LOOKUP_TRIES && rc && rc != -ENOENT; i++)
		rc = bpf_find_vma(task, addr, vma_file, &l, 0);
	if (rc == -ENOENT || (!rc && addr < l.start)) {
		k.kind = HT_FILE_ANON; /* no mapping there: a bad access, counted as anonymous */
		count_file(&k);
		return 0;
	}
	if (rc) {
		k.kind = HT_FILE_UNKNOWN; /* counted apart, never as anonymous */
		count_file(&k);
		return 0;
	}
	k.kind = l.k.kind;
	__builtin_memcpy(k.name, l.k.name, HT_FILE_LEN);
	if (!c) {
		bpf_map_update_elem(&vmas, &tgid, &empty_cache, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&vmas, &tgid);
	}
	if (c)
		cache_put(c, l.start, l.end, l.k.kind, l.k.name);
	count_file(&k);
	return 0;
}
