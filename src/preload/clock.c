/* The recorder's clocks: CLOCK_MONOTONIC, and timestamp-counter ticks
 * worked out from the kernel's clock for a program that turns the counter
 * off.
 *
 * prctl(PR_SET_TSC, PR_TSC_SIGSEGV), and seccomp's strict mode, make RDTSC
 * fault in the thread (and the vDSO's clock_gettime, which reads the
 * counter too): the recorder's next timestamp killed the program with
 * SIGSEGV (probe T).  Before the program's prctl goes through (hooks.c),
 * the recorder measures the counter's rate against the kernel's clock for
 * 2 ms, and from then on every thread takes its timestamps from the
 * clock_gettime system call, as ticks at that rate from the last counter
 * read: the trace's times go on in the unit its header and clock samples
 * give (the writer process, which still reads the counter, fits its
 * samples as before).  About 100 ns a timestamp instead of 8.5: the
 * program asked for it.  Every clock the recorder reads goes by system
 * call from then on, in the process and in its fork children (which
 * inherit the flag: a child's header read the vDSO's clock and died).  A
 * process that starts with the counter off (an exec after the prctl: the
 * flag is kept) times its trace in nanoseconds by system call.  And where
 * a seccomp filter refuses clock_gettime as well, there is no clock left:
 * the ticks then count the calls that take them, in order, and a line
 * says the times are not real. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

static uint64_t emu_tsc0, emu_ns0; /* a counter read and the clock then */
static double emu_ticks_per_ns;    /* 0: no clock at all (emu_calls) */
static _Atomic uint64_t emu_calls;  /* ticks handed out with no clock */
static _Atomic int by_syscall;      /* every clock read by system call */
static _Atomic int switching;       /* 0, 1 while one thread measures, 2 done */

/* Clock id by the system call (the vDSO reads the counter); 0, or -1. */
static int sys_clock(clockid_t id, struct timespec *ts)
{
	return ht_raw_syscall(SYS_clock_gettime, id, (long)ts, 0, 0, 0, 0) == 0 ? 0 : -1;
}

int ht_clock_gettime(clockid_t id, struct timespec *ts)
{
	if (HT_UNLIKELY(atomic_load_explicit(&by_syscall, memory_order_relaxed)))
		return sys_clock(id, ts);
	return clock_gettime(id, ts);
}

static void said_no_clock(void)
{
	static _Atomic int said;
	if (!atomic_exchange(&said, 1))
		ht_msg("the program turned the timestamp counter off and clock_gettime fails "
		       "(a seccomp filter?): the trace's times from now on count the calls, "
		       "they are not real times");
}

uint64_t ht_mono_ns(void)
{
	struct timespec ts;
	if (HT_UNLIKELY(ht_clock_gettime(CLOCK_MONOTONIC, &ts) != 0)) {
		said_no_clock();
		return emu_ns0 + atomic_fetch_add(&emu_calls, 1);
	}
	return ht_ts_ns(&ts);
}

uint64_t ht_tsc_emulated(void)
{
	struct timespec ts;
	if (HT_UNLIKELY(emu_ticks_per_ns == 0 || sys_clock(CLOCK_MONOTONIC, &ts) != 0)) {
		said_no_clock();
		return emu_tsc0 + atomic_fetch_add(&emu_calls, 1);
	}
	uint64_t ns = ht_ts_ns(&ts);
	return emu_tsc0 + (uint64_t)((double)(ns > emu_ns0 ? ns - emu_ns0 : 0) * emu_ticks_per_ns);
}

void ht_clock__tsc_off(void)
{
	int expect = 0;
	if (!atomic_compare_exchange_strong(&switching, &expect, 1)) {
		/* Another thread measures: its prctl comes after, and so must
		 * this one's, once every thread takes the new clock (two
		 * threads turning the counter off at once: the second went on
		 * with the counter and died of SIGSEGV, probe U). */
		while (atomic_load(&switching) != 2)
			ht_raw_syscall(SYS_sched_yield, 0, 0, 0, 0, 0, 0);
		return;
	}
	if (__atomic_load_n(&ht_opt.use_tsc, __ATOMIC_RELAXED) != 1) {
		/* the monotonic clock already: by system call from now on */
		atomic_store(&by_syscall, 1);
		atomic_store(&switching, 2);
		return;
	}
	/* (this thread can still read the counter: its prctl comes after) */
	struct timespec ts;
	uint64_t ns_a = 0, ns_b = 0, tsc_a = ht_rdtsc_fenced(), tsc_b = tsc_a;
	if (sys_clock(CLOCK_MONOTONIC, &ts) == 0) {
		ns_a = ns_b = ht_ts_ns(&ts);
		/* (bounded: a clock that does not move, a VM's, ends it too) */
		for (long i = 0; i < 10000000 && ns_b - ns_a < 2000000; i++) {
			tsc_b = ht_rdtsc_fenced();
			if (sys_clock(CLOCK_MONOTONIC, &ts) != 0)
				break;
			ns_b = ht_ts_ns(&ts);
		}
	}
	emu_ticks_per_ns = ns_b > ns_a ? (double)(tsc_b - tsc_a) / (double)(ns_b - ns_a) : 0;
	emu_tsc0 = tsc_b;
	emu_ns0 = ns_b;
	atomic_store(&by_syscall, 1);
	__atomic_store_n(&ht_opt.use_tsc, HT_TSC_EMULATED, __ATOMIC_RELEASE);
	atomic_store(&switching, 2);
}

void ht_clock__init(void)
{
	int state = 0;
	if (ht_raw_syscall(SYS_prctl, PR_GET_TSC, (long)&state, 0, 0, 0, 0) == 0 &&
	    state == PR_TSC_SIGSEGV) {
		/* an image exec'd after the prctl (the flag is kept): no counter */
		ht_opt.use_tsc = 0;
		atomic_store(&by_syscall, 1);
		atomic_store(&switching, 2);
	}
}
