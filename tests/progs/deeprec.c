/* Stacks of known depths for the flame graphs (tests/e2e/cases_report.py,
 * test_report_flame_same).  Usage: deeprec [N].
 *   N times (default 200): one malloc(100) at the end of a recursion of
 *   depth 40, one malloc(200) at depth 120 and one malloc(300) at depth
 *   300 (deeper than the 256 stack nodes an analysis reads), through two
 *   alternating functions so that the frames differ by name; then
 *   leaf(): malloc(50) called from main.
 * Every second block is freed; the others are left at exit. */
#include <stdlib.h>

static void *volatile sink;
static void *keep[4096];
static size_t nkeep;

static void *down_b(int d, size_t size);

static __attribute__((noinline)) void *down_a(int d, size_t size)
{
	void *p = d ? down_b(d - 1, size) : malloc(size);
	sink = p; /* (not a tail call: the frame stays) */
	return p;
}

static __attribute__((noinline)) void *down_b(int d, size_t size)
{
	void *p = d ? down_a(d - 1, size) : malloc(size);
	sink = p;
	return p;
}

static __attribute__((noinline)) void leaf(void)
{
	void *p = malloc(50);
	sink = p;
	if (nkeep < sizeof(keep) / sizeof(*keep))
		keep[nkeep++] = p;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200;
	for (int i = 0; i < n; i++) {
		void *p[3] = {down_a(40, 100), down_a(120, 200), down_a(300, 300)};
		for (int k = 0; k < 3; k++) {
			if ((i + k) % 2)
				free(p[k]);
			else if (nkeep < sizeof(keep) / sizeof(*keep))
				keep[nkeep++] = p[k];
		}
		leaf();
	}
	return 0;
}
