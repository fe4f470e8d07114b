// SPDX-License-Identifier: GPL-2.0
/* Memory system calls as events (mmapsnoop, shmsnoop): the arguments at
 * entry kept per thread, an event at the return with the result and, for
 * a call that maps something, the name of the file mapped there.  Raw
 * tracepoints (tp_btf/sys_enter, sys_exit): no tracefs needed. */
#include "probe.bpf.h"

#include "memsys.h"

char LICENSE[] SEC("license") = "GPL";

#define ENOENT 2
#define MAP_SHARED_TYPE 0x03
#define MAP_ANONYMOUS 0x20
#define LOOKUP_TRIES 4 /* bpf_find_vma calls before the file is left unknown */

/* Bit nr set: report system call nr (nr < 128); set before loading. */
const volatile __u64 syscall_mask[2] = {0, 0};

struct entry {
	__u64 args[6];                 /* at sys_enter */
	__u32 nr;                      /* which call */
	char file[HT_MEMSYS_FILE_LEN]; /* mmap: the regular file of its fd, "" if none */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); /* tid */
	__type(value, struct entry);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

SEC("tp_btf/sys_enter")
int BPF_PROG(memsys_enter, struct pt_regs *regs, long id)
{
	__u32 tgid, tid;
	if (id < 0 || id >= 128 || !((syscall_mask[(id >> 6) & 1] >> (id & 63)) & 1) ||
	    !ht_traced(&tgid, &tid))
		return 0;
	struct entry e = {.nr = (__u32)id};
	e.args[0] = BPF_CORE_READ(regs, di);
	e.args[1] = BPF_CORE_READ(regs, si);
	e.args[2] = BPF_CORE_READ(regs, dx);
	e.args[3] = BPF_CORE_READ(regs, r10);
	e.args[4] = BPF_CORE_READ(regs, r8);
	e.args[5] = BPF_CORE_READ(regs, r9);
	/* the file as the call names it: what is mapped if the look-up at the
	 * return fails (bpf_find_vma cannot take the mmap lock while another
	 * thread of the process holds it) */
	if (id == HT_NR_MMAP && !(e.args[3] & MAP_ANONYMOUS))
		ht_file_name(ht_fd_file(e.args[4]), e.file, HT_MEMSYS_FILE_LEN);
	bpf_map_update_elem(&inflight, &tid, &e, BPF_ANY);
	return 0;
}

static long vma_name(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	ht_vma_file(vma, data, HT_MEMSYS_FILE_LEN);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(memsys_exit, struct pt_regs *regs, long ret)
{
	__u32 tgid, tid;
	if (!ht_traced(&tgid, &tid))
		return 0;
	struct entry *e = bpf_map_lookup_elem(&inflight, &tid);
	if (!e)
		return 0;
	struct ht_memsys_event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		__sync_fetch_and_add(&dropped, 1);
		bpf_map_delete_elem(&inflight, &tid);
		return 0;
	}
	ev->ts_ns = bpf_ktime_get_ns();
	for (int i = 0; i < 6; i++)
		ev->args[i] = e->args[i];
	ev->ret = ret;
	ev->pid = tgid;
	ev->tid = tid;
	ev->nr = e->nr;
	ev->file_state = HT_MEMSYS_NO_FILE;
	bpf_get_current_comm(ev->comm, sizeof(ev->comm));
	char file[HT_MEMSYS_FILE_LEN] = "";
	if ((e->nr == HT_NR_MMAP || e->nr == HT_NR_MREMAP || e->nr == HT_NR_SHMAT) &&
	    (__u64)ret < (__u64)-4095) {
		struct task_struct *task = bpf_get_current_task_btf();
		long rc = -1;
		for (int i = 0; i < LOOKUP_TRIES && rc && rc != -ENOENT; i++)
			rc = bpf_find_vma(task, (__u64)ret, vma_name, file, 0);
		if (!rc)
			ev->file_state = file[0] ? HT_MEMSYS_FILE : HT_MEMSYS_NO_FILE;
		else if (e->file[0])
			ev->file_state = HT_MEMSYS_FILE; /* (e->file, below) */
		else if (e->nr != HT_NR_MMAP || !(e->args[3] & MAP_ANONYMOUS) ||
			 (e->args[3] & MAP_SHARED_TYPE) != 0x02)
			ev->file_state = HT_MEMSYS_FILE_UNKNOWN; /* all but private anonymous memory */
		if (rc && e->file[0])
			__builtin_memcpy(file, e->file, sizeof(file));
	}
	__builtin_memcpy(ev->file, file, sizeof(file));
	bpf_map_delete_elem(&inflight, &tid);
	bpf_ringbuf_submit(ev, 0);
	return 0;
}
