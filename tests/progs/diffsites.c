/* Allocation sites whose amounts change from run to run, for `heaptrail
 * diff` (tests/e2e/cases_diff.py, which finds the lines by their DIFF:
 * markers).  Usage: diffsites 1|2|phases.
 *   site_a  leaks 100-byte blocks: 10 in run 1, 50 in run 2
 *   site_b  leaks 2 x 300 bytes in both runs
 *   site_c  leaks 3 x 256 bytes, in run 2 only
 *   site_d  leaks 1 x 2000 bytes, in run 1 only
 *   site_e  128-byte blocks freed at once: 10 in run 1, 30 in run 2
 * phases: site_d's 2000 bytes and site_a 10 x 100; mark "t1"; site_a 40 x
 * 100 more, site_c 3 x 256, site_d's block freed, site_e 20 x 128; mark
 * "t2"; site_b 2 x 300.
 * Runs 1 and 2 take the same path through run(), with other counts, so
 * that their stacks have the same return addresses (tests without
 * symbols).  Nothing else allocates (no stdio). */
#include <stdlib.h>
#include <string.h>

#include <heaptrail.h>

#include "tp.h"

void *volatile diff_sink;
static volatile int two = 2, three = 3; /* loop counts the compiler cannot unroll */

__attribute__((noinline)) static void site_a(int n)
{
	for (int i = 0; i < n; i++)
		diff_sink = malloc(100); /* DIFF:a */
}

__attribute__((noinline)) static void site_b(void)
{
	for (int i = 0; i < two; i++)
		diff_sink = malloc(300); /* DIFF:b */
}

__attribute__((noinline)) static void site_c(void)
{
	for (int i = 0; i < three; i++)
		diff_sink = malloc(256); /* DIFF:c */
}

__attribute__((noinline)) static void *site_d(void)
{
	void *p = malloc(2000); /* DIFF:d */
	TP_CHECK(p);
	diff_sink = p;
	return p;
}

__attribute__((noinline)) static void site_e(int n)
{
	for (int i = 0; i < n; i++)
		free(tp_keep(malloc(128))); /* DIFF:e */
}

__attribute__((noinline)) static void run(int a, int c, int d, int e)
{
	site_a(a);
	site_b();
	if (c)
		site_c();
	if (d)
		site_d();
	site_e(e);
	diff_sink = NULL; /* (not a tail call: run stays on the stack) */
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	int one = !strcmp(argv[1], "1");
	if (one || !strcmp(argv[1], "2")) {
		run(one ? 10 : 50, !one, one, one ? 10 : 30); /* one call site for both */
	} else if (!strcmp(argv[1], "phases")) {
		void *d = site_d();
		site_a(10);
		HEAPTRAIL_MARK("t1");
		site_a(40);
		site_c();
		free(d);
		site_e(20);
		HEAPTRAIL_MARK("t2");
		site_b();
	} else {
		return TP_FAIL_STATUS;
	}
	diff_sink = NULL;
	return 0;
}
