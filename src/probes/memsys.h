/* The events of memsys.bpf.c (mmapsnoop, shmsnoop): one per memory system
 * call, at its return.  Shared by the BPF program and user space. */
#ifndef HEAPTRAIL_PROBES_MEMSYS_H
#define HEAPTRAIL_PROBES_MEMSYS_H

/* x86_64 system call numbers */
#define HT_NR_MMAP 9
#define HT_NR_MUNMAP 11
#define HT_NR_BRK 12
#define HT_NR_MREMAP 25
#define HT_NR_SHMGET 29
#define HT_NR_SHMAT 30
#define HT_NR_SHMCTL 31
#define HT_NR_SHMDT 67

/* Sets system call nr's bit in a mask of two 64-bit words. */
#define HT_MEMSYS_SET(mask, nr) ((mask)[(nr) >> 6] |= 1ull << ((nr) & 63))

#define HT_MEMSYS_FILE_LEN 64 /* bytes of a file name kept */

struct ht_memsys_event {
	__u64 ts_ns;       /* at the return, bpf_ktime_get_ns */
	__u64 args[6];     /* the call's arguments */
	__s64 ret;         /* its result (-errno on failure) */
	__u32 pid;         /* process (tgid) */
	__u32 tid;         /* thread */
	__u32 nr;          /* system call number (HT_NR_*) */
	__u32 pad;         /* (alignment) */
	char comm[16];     /* thread name */
	char file[HT_MEMSYS_FILE_LEN]; /* the mapped file (mmap, mremap, shmat), "" if none */
};

#endif
