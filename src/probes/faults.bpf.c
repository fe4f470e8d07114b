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

static long vma_file(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct ht_file_key *k = data;
	if (ht_vma_file(vma, k->name, HT_FILE_LEN) <= 0)
		k->anon = 1;
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
	struct task_struct *task = bpf_get_current_task_btf();
	if (bpf_find_vma(task, ctx->addr, vma_file, &k, 0))
		k.anon = 1; /* no mapping there: a bad access, counted as anonymous */
	count_file(&k);
	return 0;
}
