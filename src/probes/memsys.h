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
	__u32 file_state;  /* HT_MEMSYS_*: what file is mapped */
	char comm[16];     /* thread name */
	char file[HT_MEMSYS_FILE_LEN]; /* the mapped file (mmap, mremap, shmat), "" if none */
};

/* What an event says of the file mapped (file_state). */
enum {
	HT_MEMSYS_NO_FILE = 0,      /* none (anonymous memory, or not a call that maps) */
	HT_MEMSYS_FILE = 1,         /* file names it */
	HT_MEMSYS_FILE_UNKNOWN = 2, /* not known: the mapping could not be looked up
				     * (another thread held the mmap lock) and the
				     * call's fd did not name a regular file */
};

#endif
