// SPDX-License-Identifier: GPL-2.0
/* brk calls counted by user stack, with the growth of the break each
 * asked for (brkstack).  Raw tracepoint sys_enter: no tracefs needed. */
#include "stacks.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define NR_BRK 12

SEC("tp_btf/sys_enter")
int BPF_PROG(brk_enter, struct pt_regs *regs, long id)
{
	__u32 tgid, tid;
	if (id != NR_BRK || !ht_traced(&tgid, &tid))
		return 0;
	__u64 want = BPF_CORE_READ(regs, di);
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 cur = BPF_CORE_READ(task, mm, brk);
	ht_count_stack(ctx, tgid, want > cur ? want - cur : 0);
	return 0;
}
