/*
 * stack_tree — many distinct stacks, for timing the analyzers'
 * symbolization (bench/run_stacks.sh).
 *
 *   stack_tree LEVELS [REPEAT]
 *
 * Walks every path of a binary call tree LEVELS deep (2^LEVELS distinct
 * stacks, each through LEVELS of 2 * LEVELS distinct functions) REPEAT
 * times (default 4); at each leaf it allocates 32 bytes, keeps one block
 * per path (a leak) and frees the others.
 */
#include <stdio.h>
#include <stdlib.h>

#define MAXL 20

typedef void (*fn_t)(int level, int levels, unsigned path, int keep);
static fn_t table[MAXL][2];
static void *volatile sink;

static void leaf(int keep)
{
	void *p = malloc(32);
	sink = p;
	if (!keep)
		free(p);
}

#define LEVEL(n)                                                                      \
	__attribute__((noinline)) static void f##n##a(int l, int ls, unsigned path, int keep) \
	{                                                                             \
		if (l + 1 == ls)                                                      \
			leaf(keep);                                                   \
		else                                                                  \
			table[l + 1][(path >> (l + 1)) & 1](l + 1, ls, path, keep);   \
		__asm__ volatile("" ::: "memory");                                   \
	}                                                                             \
	__attribute__((noinline)) static void f##n##b(int l, int ls, unsigned path, int keep) \
	{                                                                             \
		if (l + 1 == ls)                                                      \
			leaf(keep);                                                   \
		else                                                                  \
			table[l + 1][(path >> (l + 1)) & 1](l + 1, ls, path, keep);   \
		__asm__ volatile("" ::: "memory");                                   \
	}
LEVEL(0) LEVEL(1) LEVEL(2) LEVEL(3) LEVEL(4) LEVEL(5) LEVEL(6) LEVEL(7) LEVEL(8) LEVEL(9)
LEVEL(10) LEVEL(11) LEVEL(12) LEVEL(13) LEVEL(14) LEVEL(15) LEVEL(16) LEVEL(17) LEVEL(18)
LEVEL(19)

int main(int argc, char **argv)
{
	int levels = argc > 1 ? atoi(argv[1]) : 16;
	int repeat = argc > 2 ? atoi(argv[2]) : 4;
	if (levels < 1 || levels > MAXL || repeat < 1) {
		fprintf(stderr, "usage: stack_tree LEVELS(1..%d) [REPEAT]\n", MAXL);
		return 2;
	}
#define SET(n) table[n][0] = f##n##a, table[n][1] = f##n##b;
	SET(0) SET(1) SET(2) SET(3) SET(4) SET(5) SET(6) SET(7) SET(8) SET(9)
	SET(10) SET(11) SET(12) SET(13) SET(14) SET(15) SET(16) SET(17) SET(18) SET(19)
	for (int r = 0; r < repeat; r++)
		for (unsigned path = 0; path < (1u << levels); path++)
			table[0][path & 1](0, levels, path, r == 0);
	printf("stacks=%u allocations=%u\n", 1u << levels, (1u << levels) * (unsigned)repeat);
	return 0;
}
