/* What attach.bpf.c and attach.c share: the event the BPF side sends for
 * each traced allocation and free of the target, and the counters it
 * keeps.  Kinds are the trace's (src/trace/format.h, enum ht_kind). */
#ifndef HEAPTRAIL_PROBES_ATTACH_BPF_H
#define HEAPTRAIL_PROBES_ATTACH_BPF_H

#define HT_ATTACH_MAX_DEPTH 127     /* frames kept per stack (the stack map's value) */
#define HT_ATTACH_STACKS (1u << 16) /* distinct stacks the stack map holds */

/* The kind of the event that says the process exec'd (not a trace kind). */
#define HT_ATTACH_EXEC 0xfe

/* One traced call, in the ring buffer (or an exec: kind HT_ATTACH_EXEC). */
struct ht_attach_event {
	__u64 ts;      /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) at the return (a free: the entry) */
	__u64 start;   /* realloc of a traced block: the same clock at the entry, when the
			* old block could first be released; else ts */
	__u64 ptr;     /* the block handed out (0: failed), or freed */
	__u64 old;     /* realloc's input block */
	__u64 a0, a1;  /* the call's size arguments (see attach.c, vals_of) */
	__u64 usable;  /* glibc: the usable size from the chunk header, else 0 */
	__s64 ret;     /* posix_memalign's return value */
	__u64 stack;   /* key of the stack map: the hash of the stack's addresses */
	__u32 tid;     /* thread */
	__s32 stack_error; /* 0, or why the stack was not taken (-errno; -ENOSPC: the
			    * stack map is full) */
	__u8 kind;     /* enum ht_kind: malloc .. pvalloc, free */
	__u8 flags;    /* HT_F_MMAPPED / HT_F_NONMAIN from glibc's chunk header */
	__u8 old_traced; /* realloc: the input block was a traced one */
	__u8 reused;   /* ptr was a traced block whose free was not seen */
	__u8 pad[4];
};

/* Counters (an array map, index = enum ht_attach_stat). */
enum ht_attach_stat {
	HT_AS_CALLS = 0,  /* allocation calls seen (reallocs of traced blocks are counted
			   * but not sampled: they stay traced) */
	HT_AS_LOST,       /* events the ring buffer had no room for */
	HT_AS_FULL,       /* traced blocks not kept: the table of live blocks was full */
	HT_AS_NOSTACK,    /* allocations whose stack the kernel could not take (a page
			   * of the stack not in memory) */
	HT_AS_STACKS_FULL, /* allocations whose stack was not kept: the map was full */
	HT_AS_REUSED,     /* traced blocks freed unseen: their address was handed out again */
	HT_AS_NR,
};

#endif
