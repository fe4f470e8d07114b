/* The recorder's clocks: CLOCK_MONOTONIC, and timestamp-counter ticks
 * worked out from the kernel's clock for a program that turns the counter
 * off.
 *
 * prctl(PR_SET_TSC, PR_TSC_SIGSEGV), and seccomp's strict mode, make RDTSC
 * fault in the thread (and the vDSO's clock_gettime, which reads the
 * counter too): the recorder's next timestamp killed the program with
 * SIGSEGV (probe T).  Before the program's prctl goes through (hooks.c),
 * the recorder measures the counter's rate against the kernel's clock for
 * 2 ms and from then on every thread takes its timestamps from the
 * clock_gettime system call, as ticks at that rate from the last counter
 * read: the trace's times go on in the unit its header and clock samples
 * give (the writer process, which still reads the counter, fits its
 * samples as before).  About 100 ns a timestamp instead of 8.5: the
 * program asked for it. */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

static uint64_t emu_tsc0, emu_ns0; /* a counter read and the clock then */
static double emu_ticks_per_ns;

/* CLOCK_MONOTONIC by the system call (the vDSO reads the counter). */
static uint64_t sys_mono_ns(void)
{
	struct timespec ts;
	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t ht_mono_ns(void)
{
	if (HT_UNLIKELY(__atomic_load_n(&ht_opt.use_tsc, __ATOMIC_RELAXED) == HT_TSC_EMULATED))
		return sys_mono_ns();
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t ht_tsc_emulated(void)
{
	uint64_t ns = sys_mono_ns();
	return emu_tsc0 + (uint64_t)((double)(ns > emu_ns0 ? ns - emu_ns0 : 0) * emu_ticks_per_ns);
}

static inline uint64_t rdtsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
	uint32_t lo, hi;
	__asm__ volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi)::"memory");
	return ((uint64_t)hi << 32) | lo;
#else
	return 0;
#endif
}

void ht_clock__tsc_off(void)
{
	static _Atomic int done;
	if (__atomic_load_n(&ht_opt.use_tsc, __ATOMIC_RELAXED) != 1 || atomic_exchange(&done, 1))
		return;
	/* (this thread can still read the counter: its prctl comes after) */
	uint64_t ns_a = sys_mono_ns(), tsc_a = rdtsc(), ns_b, tsc_b;
	do {
		tsc_b = rdtsc();
		ns_b = sys_mono_ns();
	} while (ns_b - ns_a < 2000000);
	emu_ticks_per_ns = (double)(tsc_b - tsc_a) / (double)(ns_b - ns_a);
	emu_tsc0 = tsc_b;
	emu_ns0 = ns_b;
	__atomic_store_n(&ht_opt.use_tsc, HT_TSC_EMULATED, __ATOMIC_RELEASE);
}
