/* The writer's judgement of whether a CPU is free for compressing
 * (writer.c, cpu_free), apart from the clocks it reads so that a test can
 * ask it (tests/tools/cpujudge.c).  Nothing here allocates or calls. */
#ifndef HEAPTRAIL_PRELOAD_CPUJUDGE_H
#define HEAPTRAIL_PRELOAD_CPUJUDGE_H

#include <stdint.h>

/* How often the writer judges (ns), and the slack given to the program's
 * CPU time.  Another process's CPU clock moves in scheduler ticks (4 ms
 * here, at HZ=250) while its thread runs: over 10 ms a busy thread read
 * anywhere from 6 to 12 ms, and above 11 said "no CPU free" for a program
 * of one thread a third of the time, which left a third of its chunks raw
 * for the end step (40 of the 160 ms of the whole record on the loop).
 * So the window is 20 ms and the program is given 8 ms more than it used
 * (two ticks at HZ=250): one busy thread (20 +- 4 ms) leaves a CPU free,
 * two (40 +- 4 ms) do not. */
#define HT_CPU_WINDOW_NS 20000000u
#define HT_CPU_TICK_SLACK 8000000u

/* Over dt ns: the program's threads used `used` ns of CPU on ncpus CPUs,
 * and (timed: the writer's schedstat was read) the writer ran run ns and
 * waited wait ns for a CPU.  1 if a CPU is free: the program left 0.9 of
 * one (less the slack), and the writer did not wait for a CPU more than a
 * tenth of the time and a third of the time it ran (someone else holds
 * the CPU the program leaves). */
static inline int cpu_judge(int ncpus, uint64_t dt, uint64_t used, int timed, uint64_t run,
			    uint64_t wait)
{
	int ok = (uint64_t)ncpus * dt + HT_CPU_TICK_SLACK >= used + dt / 10 * 9;
	if (ok && timed)
		ok = wait < dt / 10 || wait * 3 <= run;
	return ok;
}

#endif
