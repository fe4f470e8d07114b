/* Counting events by user stack in BPF (brkstack.bpf.c, faults.bpf.c):
 * the stack map, the counts map, and a note to user space for every new
 * process so that it reads the process's memory map in time.  BPF side. */
#ifndef HEAPTRAIL_PROBES_STACKS_BPF_H
#define HEAPTRAIL_PROBES_STACKS_BPF_H

#include "probe.bpf.h"
#include "stackhash.bpf.h"
#include "stacks.h"

/* hash of the addresses -> the addresses (HT_STACK_DEPTH, zero-filled) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HT_STACK_ENTRIES);
	__uint(key_size, sizeof(__u64));
	__uint(value_size, HT_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

/* Where a stack is taken before it is hashed (too big for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, HT_STACK_DEPTH * sizeof(__u64));
} stack_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HT_COUNT_ENTRIES);
	__type(key, struct ht_stack_key);
	__type(value, struct ht_stack_val);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} seen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 << 10);
} notes SEC(".maps");

/* Counts one event of process tgid at the current user stack (ctx: the
 * program's context), adding bytes. */
static __always_inline void ht_count_stack(void *ctx, __u32 tgid, __u64 bytes)
{
	struct ht_stack_key k = {.pid = tgid};
	long rc = ht_stack_keep(ctx, &stacks, &stack_scratch, HT_STACK_DEPTH, &k.stack);
	if (rc < 0) /* (the stack map full: -ENOMEM, as stackcount.c reads it) */
		k.error = rc == -ENOSPC ? -ENOMEM : (__s32)rc;
	struct ht_stack_val *v = bpf_map_lookup_elem(&counts, &k);
	if (!v) {
		struct ht_stack_val zero = {};
		bpf_get_current_comm(zero.comm, sizeof(zero.comm));
		bpf_map_update_elem(&counts, &k, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&counts, &k);
		if (!v) {
			__sync_fetch_and_add(&dropped, 1);
			return;
		}
	}
	__sync_fetch_and_add(&v->count, 1);
	if (bytes)
		__sync_fetch_and_add(&v->bytes, bytes);
	if (!bpf_map_lookup_elem(&seen, &tgid)) {
		__u8 one = 1;
		bpf_map_update_elem(&seen, &tgid, &one, BPF_ANY);
		struct ht_pid_note *n = bpf_ringbuf_reserve(&notes, sizeof(*n), 0);
		if (n) {
			n->pid = tgid;
			bpf_get_current_comm(n->comm, sizeof(n->comm));
			bpf_ringbuf_submit(n, 0);
		}
	}
}

#endif
