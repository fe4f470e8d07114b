/* The program's own address-space limit (setrlimit(RLIMIT_AS) and
 * prlimit on itself): the recorder's reservation is added to it, and the
 * program reads back what it set.
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

/* The program's latest own limit and what the kernel got for it; valid
 * while set is 1 (a plain flag: two threads setting the limit at once
 * race in the kernel as well). */
static struct {
	_Atomic int set;
	struct rlimit prog; /* what the program asked for */
	struct rlimit kern; /* what the kernel was given */
} as_lim;

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

/* Sets RLIMIT_AS of this process to the program's *want plus the
 * recorder's mappings; the old limit, as the program knows it, in *old. */
static int set_as(const struct rlimit *want, struct rlimit *old)
{
	struct rlimit now;
	if (sys_prlimit(0, RLIMIT_AS, NULL, &now) != 0)
		return -1;
	int ours = atomic_load(&as_lim.set) && now.rlim_cur == as_lim.kern.rlim_cur &&
		   now.rlim_max == as_lim.kern.rlim_max;
	if (old)
		*old = ours ? as_lim.prog : now;
	if (!want)
		return 0;
	uint64_t add = ht_buf__reserved();
	if (add)
		add += HT_RLIMIT_SLACK;
	struct rlimit k = {plus(want->rlim_cur, add), plus(want->rlim_max, add)};
	/* within the hard limit the process has, when the program's fits in
	 * it (raising it is the kernel's to allow or refuse, as untraced) */
	if (want->rlim_max <= now.rlim_max && k.rlim_max > now.rlim_max)
		k.rlim_max = now.rlim_max;
	if (want->rlim_cur <= k.rlim_max && k.rlim_cur > k.rlim_max)
		k.rlim_cur = k.rlim_max;
	if (want->rlim_cur > want->rlim_max)
		k = *want; /* EINVAL, as untraced */
	if (sys_prlimit(0, RLIMIT_AS, &k, NULL) != 0)
		return -1;
	atomic_store(&as_lim.set, 0);
	as_lim.prog = *want;
	as_lim.kern = k;
	atomic_store(&as_lim.set, add != 0);
	return 0;
}

static int is_self(pid_t pid)
{
	return pid == 0 || pid == getpid();
}

HT_EXPORT int setrlimit(__rlimit_resource_t res, const struct rlimit *rl)
{
	if (res == RLIMIT_AS) /* (NULL: a no-op, as the kernel makes it) */
		return set_as(rl, NULL);
	return sys_prlimit(0, (int)res, rl, NULL);
}

HT_EXPORT int setrlimit64(__rlimit_resource_t res, const struct rlimit64 *rl)
{
	return setrlimit(res, (const struct rlimit *)rl);
}

HT_EXPORT int getrlimit(__rlimit_resource_t res, struct rlimit *rl)
{
	if (res == RLIMIT_AS) /* (NULL: a no-op, as the kernel makes it) */
		return set_as(NULL, rl);
	return sys_prlimit(0, (int)res, NULL, rl);
}

HT_EXPORT int getrlimit64(__rlimit_resource_t res, struct rlimit64 *rl)
{
	return getrlimit(res, (struct rlimit *)rl);
}

HT_EXPORT int prlimit(pid_t pid, __rlimit_resource_t res, const struct rlimit *nl,
		      struct rlimit *ol)
{
	if (res == RLIMIT_AS && is_self(pid))
		return set_as(nl, ol);
	return sys_prlimit(pid, (int)res, nl, ol);
}

HT_EXPORT int prlimit64(pid_t pid, __rlimit_resource_t res, const struct rlimit64 *nl,
			struct rlimit64 *ol)
{
	return prlimit(pid, res, (const struct rlimit *)nl, (struct rlimit *)ol);
}

static int exec_restored; /* before_exec put the program's limit back */

void ht_rlimit__before_exec(void)
{
	struct rlimit now;
	exec_restored = 0;
	if (!atomic_load(&as_lim.set) || sys_prlimit(0, RLIMIT_AS, NULL, &now) != 0 ||
	    now.rlim_cur != as_lim.kern.rlim_cur || now.rlim_max != as_lim.kern.rlim_max)
		return;
	exec_restored = sys_prlimit(0, RLIMIT_AS, &as_lim.prog, NULL) == 0;
}

void ht_rlimit__exec_failed(void)
{
	if (exec_restored)
		sys_prlimit(0, RLIMIT_AS, &as_lim.kern, NULL);
	exec_restored = 0;
}
