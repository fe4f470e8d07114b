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
		l->k.anon = 1;
	l->start = BPF_CORE_READ(vma, vm_start);
	l->end = BPF_CORE_READ(vma, vm_end);
	return 0;
}

/* The last mappings looked up in a process, so that bpf_find_vma (costly
 * from the perf event) runs once per mapping and not once per fault;
 * forgotten whenever the process changes its mappings (vma_forget). */
#define VMA_CACHE 4
struct vma_cache {
	__u64 start[VMA_CACHE], end[VMA_CACHE]; /* extents, end 0 = empty */
	__u32 anon[VMA_CACHE];                  /* no file */
	char name[VMA_CACHE][HT_FILE_LEN];      /* the file's name */
	__u32 next;                             /* the slot to fill next */
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

/* The system calls that change a process's mappings (x86_64): mmap,
 * munmap, brk, mremap, shmat, shmdt, execve, remap_file_pages, execveat;
 * the cache of the process is dropped as each starts. */
SEC("tp_btf/sys_enter")
int BPF_PROG(vma_forget, struct pt_regs *regs, long id)
{
	if (id != 9 && id != 11 && id != 12 && id != 25 && id != 30 && id != 67 && id != 59 &&
	    id != 216 && id != 322)
		return 0;
	__u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	bpf_map_delete_elem(&vmas, &tgid);
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

/* Counts a fault on the file of key k. */
static __always_inline void count_file(struct ht_file_key *k)
{
	if (k->anon)
		__builtin_memset(k->name, 0, sizeof(k->name));
	struct ht_file_val *v = bpf_map_lookup_elem(&file_counts, k);
	if (!v) {
		struct ht_file_val zero = {};
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
		k.anon = 1;
	count_file(&k);
	return 0;
}

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
				k.anon = c->anon[i];
				__builtin_memcpy(k.name, c->name[i], HT_FILE_LEN);
				count_file(&k);
				return 0;
			}
		}
	}
	struct lookup l = {};
	struct task_struct *task = bpf_get_current_task_btf();
	if (bpf_find_vma(task, addr, vma_file, &l, 0) || addr < l.start) {
		k.anon = 1; /* no mapping there: a bad access, counted as anonymous */
		count_file(&k);
		return 0;
	}
	k.anon = l.k.anon;
	__builtin_memcpy(k.name, l.k.name, HT_FILE_LEN);
	if (!c) {
		bpf_map_update_elem(&vmas, &tgid, &empty_cache, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&vmas, &tgid);
	}
	if (c) {
		__u32 i = c->next++ % VMA_CACHE;
		c->start[i] = l.start;
		c->end[i] = l.end;
		c->anon[i] = l.k.anon;
		__builtin_memcpy(c->name[i], l.k.name, HT_FILE_LEN);
	}
	count_file(&k);
	return 0;
}
