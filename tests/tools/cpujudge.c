/* unit.cpu_judge: the writer's judgement of a free CPU (src/preload/
 * cpujudge.h) on the readings the scheduler really gives: a busy thread's
 * CPU time read by another process moves in ticks (4 ms at HZ=250), so
 * over the 20 ms window one busy thread reads 16..24 ms and two 36..44.
 * Exit 0 if every case gives what it should, 1 (saying which) if not. */
#include <stdint.h>
#include <stdio.h>

#include "preload/cpujudge.h"

#define MS 1000000ull

static int fails;

static void expect(const char *what, int want, int ncpus, uint64_t dt, uint64_t used, int timed,
		   uint64_t run, uint64_t wait)
{
	int got = cpu_judge(ncpus, dt, used, timed, run, wait);
	if (got != want) {
		printf("FAIL %s: cpu_judge(%d CPUs, %llu ms, used %llu ms, run %llu, wait %llu) = %d, "
		       "want %d\n",
		       what, ncpus, (unsigned long long)(dt / MS), (unsigned long long)(used / MS),
		       (unsigned long long)(run / MS), (unsigned long long)(wait / MS), got, want);
		fails++;
	}
}

int main(void)
{
	uint64_t dt = HT_CPU_WINDOW_NS;
	if (dt != 20 * MS) {
		printf("FAIL the window is %llu ns: the cases below are for 20 ms\n",
		       (unsigned long long)dt);
		return 1;
	}
	/* one busy thread on two CPUs, read a tick high or low: free */
	for (uint64_t used = 16 * MS; used <= 24 * MS; used += 4 * MS)
		expect("one busy thread, 2 CPUs", 1, 2, dt, used, 0, 0, 0);
	/* two busy threads on two CPUs, read a tick high or low: not free */
	for (uint64_t used = 36 * MS; used <= 44 * MS; used += 4 * MS)
		expect("two busy threads, 2 CPUs", 0, 2, dt, used, 0, 0, 0);
	/* one CPU: never free for a busy program, free for an idle one */
	expect("one busy thread, 1 CPU", 0, 1, dt, 20 * MS, 0, 0, 0);
	expect("an idle program, 1 CPU", 1, 1, dt, 0, 0, 0, 0);
	/* four CPUs: three busy threads leave one, four do not */
	expect("three busy threads, 4 CPUs", 1, 4, dt, 64 * MS, 0, 0, 0);
	expect("four busy threads, 4 CPUs", 0, 4, dt, 76 * MS, 0, 0, 0);
	/* the writer's own waits: another program holds the free CPU */
	expect("writer waited half as long as it ran", 1, 2, dt, 20 * MS, 1, 12 * MS, 4 * MS);
	expect("writer waited as long as it ran", 0, 2, dt, 20 * MS, 1, 6 * MS, 6 * MS);
	expect("writer waited little", 1, 2, dt, 20 * MS, 1, 1 * MS, 1 * MS);
	/* a longer window (the writer slept): the same fractions */
	expect("one busy thread over 100 ms", 1, 2, 100 * MS, 104 * MS, 0, 0, 0);
	expect("two busy threads over 100 ms", 0, 2, 100 * MS, 196 * MS, 0, 0, 0);
	if (!fails)
		printf("cpu_judge: every case as it should be\n");
	return fails != 0;
}
