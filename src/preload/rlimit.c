/* The program's own address-space and data limits (setrlimit(RLIMIT_AS),
 * RLIMIT_DATA, and prlimit on itself): the recorder's reservation and
 * mappings are added to them, and the program reads back what it set.
 *
 * The recorder reserves its buffers at start-up (buffer.c: some 340 MiB
 * of address space with the defaults, MAP_NORESERVE).  A limit set before
 * the program starts (ulimit -v) is known then, and the recorder takes at
 * most an eighth of it.  A limit the program sets itself comes later, and
 * the kernel counts the reservation in it: a program that limits itself
 * to 1 GiB and then allocates 800 MiB would fail traced only.  So the
 * limit the kernel gets is the program's plus the recorder's mappings
 * (the reservation and HT_RLIMIT_SLACK for its stack tables), within the
 * hard limit the process has; getrlimit and prlimit give the program's
 * own figures back while the kernel's are the ones set here.
 *
 * System calls only (prlimit64): no allocation, signal-safe.  Calls that
 * bypass these functions (syscall(SYS_setrlimit, ...)) get the kernel's
 * figures, unadjusted.  An exec gets the program's own limit back just
 * before it (the new image's recorder reserves within it, as under
 * ulimit -v); a child of posix_spawn, which execs inside glibc, starts
 * with the adjusted one: a little more than the program asked for, never
 * less (docs/record.md, "Address space"). */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

#define HT_RLIMIT_SLACK (32ull << 20) /* the recorder's mappings besides its buffers */
/* RLIMIT_DATA counts private writable mappings (Linux 4.7 on): the
 * recorder's own are its stack tables, the order table, libunwind's
 * caches and, with the writer thread, zstd's context (about 2 MiB, 2.6
 * with --stacks, measured): a program that set a data limit of 16 MiB and
 * allocated 14.5 MiB failed traced only.  The shared buffers do not
 * count. */
#define HT_RLIMIT_DATA_SLACK (32ull << 20)

/* The program's latest own limit and what the kernel got for it, for
 * RLIMIT_AS (0) and RLIMIT_DATA (1); valid while set is 1 (a plain flag:
 * two threads setting the limit at once race in the kernel as well). */
static struct lim {
	_Atomic int set;
	struct rlimit prog; /* what the program asked for */
	struct rlimit kern; /* what the kernel was given */
} lims[2];

static const int lim_res[2] = {RLIMIT_AS, RLIMIT_DATA};

static int sys_prlimit(pid_t pid, int res, const struct rlimit *nl, struct rlimit *ol)
{
	return (int)syscall(SYS_prlimit64, pid, res, nl, ol);
}

static rlim_t plus(rlim_t v, uint64_t add)
{
	if (v == RLIM_INFINITY || v + add < v || v + add >= RLIM_INFINITY)
		return RLIM_INFINITY;
	return v + add;
}

/* Sets limit i (lim_res) of this process to the program's *want plus the
 * recorder's mappings; the old limit, as the program knows it, in *old. */
static int set_lim(int i, const struct rlimit *want, struct rlimit *old)
{
	struct lim *l = &lims[i];
	struct rlimit now;
	if (sys_prlimit(0, lim_res[i], NULL, &now) != 0)
		return -1;
	int ours = atomic_load(&l->set) && now.rlim_cur == l->kern.rlim_cur &&
		   now.rlim_max == l->kern.rlim_max;
	if (old)
		*old = ours ? l->prog : now;
	if (!want)
		return 0;
	uint64_t add = ht_buf__reserved();
	if (add)
		add = i == 0 ? add + HT_RLIMIT_SLACK : HT_RLIMIT_DATA_SLACK;
	struct rlimit k = {plus(want->rlim_cur, add), plus(want->rlim_max, add)};
	/* within the hard limit the process has, when the program's fits in
	 * it (raising it is the kernel's to allow or refuse, as untraced) */
	if (want->rlim_max <= now.rlim_max && k.rlim_max > now.rlim_max)
		k.rlim_max = now.rlim_max;
	if (want->rlim_cur <= k.rlim_max && k.rlim_cur > k.rlim_max)
		k.rlim_cur = k.rlim_max;
	if (want->rlim_cur > want->rlim_max)
		k = *want; /* EINVAL, as untraced */
	if (sys_prlimit(0, lim_res[i], &k, NULL) != 0)
		return -1;
	atomic_store(&l->set, 0);
	l->prog = *want;
	l->kern = k;
	atomic_store(&l->set, add != 0);
	return 0;
}

/* The index in lims of resource res, -1 if it is not adjusted. */
static int lim_of(int res)
{
	return res == RLIMIT_AS ? 0 : res == RLIMIT_DATA ? 1 : -1;
}

static int is_self(pid_t pid)
{
	return pid == 0 || pid == getpid();
}

HT_EXPORT int setrlimit(__rlimit_resource_t res, const struct rlimit *rl)
{
	int i = lim_of((int)res);
	if (i >= 0) /* (NULL: a no-op, as the kernel makes it) */
		return set_lim(i, rl, NULL);
	return sys_prlimit(0, (int)res, rl, NULL);
}

HT_EXPORT int setrlimit64(__rlimit_resource_t res, const struct rlimit64 *rl)
{
	return setrlimit(res, (const struct rlimit *)rl);
}

HT_EXPORT int getrlimit(__rlimit_resource_t res, struct rlimit *rl)
{
	int i = lim_of((int)res);
	if (i >= 0) /* (NULL: a no-op, as the kernel makes it) */
		return set_lim(i, NULL, rl);
	return sys_prlimit(0, (int)res, NULL, rl);
}

HT_EXPORT int getrlimit64(__rlimit_resource_t res, struct rlimit64 *rl)
{
	return getrlimit(res, (struct rlimit *)rl);
}

HT_EXPORT int prlimit(pid_t pid, __rlimit_resource_t res, const struct rlimit *nl,
		      struct rlimit *ol)
{
	if (lim_of((int)res) >= 0 && is_self(pid))
		return set_lim(lim_of((int)res), nl, ol);
	return sys_prlimit(pid, (int)res, nl, ol);
}

HT_EXPORT int prlimit64(pid_t pid, __rlimit_resource_t res, const struct rlimit64 *nl,
			struct rlimit64 *ol)
{
	return prlimit(pid, res, (const struct rlimit *)nl, (struct rlimit *)ol);
}

static int exec_restored[2]; /* before_exec put the program's limit back */

void ht_rlimit__before_exec(void)
{
	for (int i = 0; i < 2; i++) {
		struct lim *l = &lims[i];
		struct rlimit now;
		exec_restored[i] = 0;
		if (!atomic_load(&l->set) || sys_prlimit(0, lim_res[i], NULL, &now) != 0 ||
		    now.rlim_cur != l->kern.rlim_cur || now.rlim_max != l->kern.rlim_max)
			continue;
		exec_restored[i] = sys_prlimit(0, lim_res[i], &l->prog, NULL) == 0;
	}
}

void ht_rlimit__exec_failed(void)
{
	for (int i = 0; i < 2; i++) {
		if (exec_restored[i])
			sys_prlimit(0, lim_res[i], &lims[i].kern, NULL);
		exec_restored[i] = 0;
	}
}
