/* What the BPF programs share (src/probes/NAME.bpf.c): the kernel's types,
 * libbpf's helpers and the process filter.  BPF side only. */
#ifndef HEAPTRAIL_PROBES_PROBE_BPF_H
#define HEAPTRAIL_PROBES_PROBE_BPF_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* The process traced (its tgid), 0 for all; set before loading. */
const volatile __u32 target_tgid = 0;

/* heaptrail's own process, never traced (system-wide, its own page faults
 * and system calls would feed on themselves); set before loading. */
const volatile __u32 self_tgid = 0;

/* Events the ring buffer had no room for (user space reports them). */
__u64 dropped = 0;

/* Whether the current task is to be traced; *tgid and *tid get its ids. */
static __always_inline int ht_traced(__u32 *tgid, __u32 *tid)
{
	__u64 id = bpf_get_current_pid_tgid();
	*tgid = (__u32)(id >> 32);
	*tid = (__u32)id;
	return target_tgid ? *tgid == target_tgid : *tgid != self_tgid;
}

/* Reads the name (dentry name, no directory) of file f into buf (len
 * bytes, a constant); returns its length with the NUL, 0 if f is NULL.  A
 * name longer than buf holds keeps its head and its tail around "..." (a
 * name cut at its first len - 1 bytes left no mark of the cut, and
 * ffaults merged the files that differed past them: names of a series
 * differ at their end). */
static __always_inline long ht_file_name(struct file *f, char *buf, __u32 len)
{
	if (!f)
		return 0;
	struct dentry *d = BPF_CORE_READ(f, f_path.dentry);
	const unsigned char *name = BPF_CORE_READ(d, d_name.name);
	__u32 n = BPF_CORE_READ(d, d_name.len);
	if (n < len)
		return bpf_probe_read_kernel_str(buf, len, name);
	__u32 head = (len - 4) / 2, tail = len - 4 - head;
	if (bpf_probe_read_kernel(buf, head, name) ||
	    bpf_probe_read_kernel(buf + head + 3, tail, name + n - tail))
		return bpf_probe_read_kernel_str(buf, len, name);
	buf[head] = buf[head + 1] = buf[head + 2] = '.';
	buf[len - 1] = 0;
	return len;
}

/* Reads the name of the file a mapping maps into buf; returns its length,
 * 0 for anonymous memory.  Shared anonymous memory (MAP_SHARED |
 * MAP_ANONYMOUS) has a file too: the kernel's shmem file "dev/zero"
 * (shmem_zero_setup), a name no real file has (a '/' in a dentry's name):
 * anonymous, as `maps` says (ffaults counted PostgreSQL-style shared
 * buffers as faults on a file "dev/zero"). */
static __always_inline long ht_vma_file(struct vm_area_struct *vma, char *buf, __u32 len)
{
	long n = ht_file_name(BPF_CORE_READ(vma, vm_file), buf, len);
	if (n == 9 && len >= 9 && buf[0] == 'd' && buf[1] == 'e' && buf[2] == 'v' &&
	    buf[3] == '/' && buf[4] == 'z' && buf[5] == 'e' && buf[6] == 'r' && buf[7] == 'o' &&
	    buf[8] == 0) {
		for (int i = 0; i < 9; i++)
			buf[i] = 0;
		return 0;
	}
	return n;
}

#define HT_S_IFMT 0170000
#define HT_S_IFREG 0100000

/* The regular file open as fd in the current task, NULL if fd is not open
 * or is something else (a device, whose mmap may map another file or
 * none): read from the task's file table, without the mmap lock that
 * bpf_find_vma needs (and cannot take while another thread of the process
 * holds it to map or unmap). */
static __always_inline struct file *ht_fd_file(__u64 fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return NULL;
	umode_t mode = BPF_CORE_READ(f, f_inode, i_mode);
	return (mode & HT_S_IFMT) == HT_S_IFREG ? f : NULL;
}

#endif
