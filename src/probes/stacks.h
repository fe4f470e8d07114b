/* Counted user stacks (brkstack, faults): the keys and values of the
 * counts map and the "new process" notification, shared by the BPF
 * programs (stacks.bpf.h) and user space (stackcount.h). */
#ifndef HEAPTRAIL_PROBES_STACKS_H
#define HEAPTRAIL_PROBES_STACKS_H

#define HT_STACK_DEPTH 127     /* frames kept per stack (the kernel's limit) */
#define HT_STACK_ENTRIES 16384 /* distinct stacks kept */
#define HT_COUNT_ENTRIES 32768 /* distinct (process, stack) pairs counted */

struct ht_stack_key {
	__u32 pid;     /* process (tgid) */
	__s32 stackid; /* in the stack map; < 0: bpf_get_stackid's error */
};

struct ht_stack_val {
	__u64 count;   /* events */
	__u64 bytes;   /* bytes (brk: the growth asked for), 0 if none */
	char comm[16]; /* the thread name of the last event */
};

/* Sent once per process, at its first event: user space reads its map
 * while it runs. */
struct ht_pid_note {
	__u32 pid;     /* process (tgid) */
	char comm[16]; /* thread name */
};

/* Page faults by file (ffaults). */
#define HT_FILE_LEN 64 /* bytes of a file name kept */

struct ht_file_key {
	__u32 pid;              /* process (tgid), 0 when summed over processes */
	__u32 anon;             /* 1: no file (anonymous memory, heap, stack) */
	char name[HT_FILE_LEN]; /* the file's name (its dentry), "" if anon */
};

struct ht_file_val {
	__u64 count;   /* faults */
	char comm[16]; /* the thread name of the last one */
};

#endif
