/* A user stack kept by the hash of its addresses (attach.bpf.c and
 * stacks.bpf.h, for brkstack and faults): the kernel's stack-trace map
 * hashes with a fixed seed into as many buckets as it has entries and
 * refuses (EEXIST) a stack whose bucket holds another one, so that two of
 * a few dozen stacks colliding lost every event of one of them (attach:
 * 137 of 2048 distinct stacks).  BPF side. */
#ifndef HEAPTRAIL_PROBES_STACKHASH_BPF_H
#define HEAPTRAIL_PROBES_STACKHASH_BPF_H

/* (errno.h, which vmlinux.h does not have) */
#ifndef ENOMEM
#define ENOMEM 12
#endif
#ifndef EFAULT
#define EFAULT 14
#endif
#ifndef EEXIST
#define EEXIST 17
#endif
#ifndef ENOSPC
#define ENOSPC 28
#endif

/* Takes the user stack of ctx (depth addresses at most) into scratch (a
 * one-entry per-CPU array of as many addresses: too big for the BPF
 * stack), hashes it into *key and keeps it in map (hash -> addresses)
 * under that key.  1: a stack new to map; 0: one already there; -ENOSPC:
 * map is full (*key set); else why the kernel could not take the stack
 * (-errno, -EFAULT for an empty one; *key untouched). */
static __always_inline long ht_stack_keep(void *ctx, void *map, void *scratch, int depth,
					  __u64 *key)
{
	__u32 zero_index = 0;
	__u64 *ips = bpf_map_lookup_elem(scratch, &zero_index);
	long got = ips ? bpf_get_stack(ctx, ips, (__u32)depth * sizeof(__u64), BPF_F_USER_STACK)
		       : -ENOMEM;
	if (got <= 0)
		return got ? got : -EFAULT;
	/* FNV-1a over the addresses taken (got bytes; bpf_get_stack zeroes
	 * the rest of the buffer, which the map keeps too), the depth in the
	 * seed: two of 65536 stacks alike in 64 bits are one chance in 2^33 */
	__u64 h = 0xcbf29ce484222325ULL ^ (__u64)got;
	for (int i = 0; i < depth && i * 8 < got; i++) {
		h ^= ips[i];
		h *= 0x100000001b3ULL;
	}
	*key = h;
	long rc = bpf_map_update_elem(map, &h, ips, BPF_NOEXIST);
	if (rc == 0)
		return 1;
	return rc == -EEXIST ? 0 : -ENOSPC;
}

#endif
