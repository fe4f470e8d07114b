/* Counted user stacks (brkstack, faults): the keys and values of the
 * counts map and the "new process" notification, shared by the BPF
 * programs (stacks.bpf.h) and user space (stackcount.h). */
#ifndef HEAPTRAIL_PROBES_STACKS_H
#define HEAPTRAIL_PROBES_STACKS_H

#define HT_STACK_DEPTH 127     /* frames kept per stack (the kernel's limit) */
#define HT_STACK_ENTRIES 16384 /* distinct stacks kept */
#define HT_COUNT_ENTRIES 32768 /* distinct (process, stack) pairs counted */

/* A stack is named by a 64-bit hash of its addresses, computed by the BPF
 * program, not by the kernel's stack-trace map: that map hashes with a
 * fixed seed into as many buckets as it has entries and refuses (EEXIST)
 * a stack whose bucket holds another, so two of a few dozen stacks
 * colliding in 16384 buckets lost every event of one of them. */
struct ht_stack_key {
	__u32 pid;   /* process (tgid) */
	__s32 error; /* 0, or why the stack was not taken (-errno) */
	__u64 stack; /* key of the stack map (the hash of its addresses) */
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

/* What a fault's address was found to be (struct ht_file_key, kind). */
enum {
	HT_FILE_NAMED = 0, /* a file's mapping: name says which */
	HT_FILE_ANON = 1,  /* no file (anonymous memory, heap, stack), or no mapping there */
	HT_FILE_UNKNOWN = 2, /* not known: the look-up of the mapping failed (bpf_find_vma
			      * cannot take the mmap lock while another thread of the
			      * process holds it to map or unmap) */
};

struct ht_file_key {
	__u32 pid;              /* process (tgid), 0 when summed over processes */
	__u32 kind;             /* HT_FILE_* */
	__u32 image;            /* per process: execs the process made since the
				 * probe started (its image: a row each), else 0 */
	char name[HT_FILE_LEN]; /* the file's name (its dentry), "" unless HT_FILE_NAMED */
};

struct ht_file_val {
	__u64 count;   /* faults */
	char comm[16]; /* the process's name (its main thread's) at the first one */
};

#endif
