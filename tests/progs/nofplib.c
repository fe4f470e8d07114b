/* The library nofp links, built like Debian's libraries (-O2
 * -fomit-frame-pointer): allocations several calls deep through code
 * without frame pointers, through glibc (qsort's comparator, tsearch's own
 * nodes), through a function with a variable-length array (its CFA comes
 * from rbp), one that realigns its stack (a CFA expression) and a signal
 * handler (a signal frame), for cases_stacks.py's test that the walk gives
 * the stacks libunwind gives. */
#define _GNU_SOURCE
#include <search.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "tp.h"

#define API __attribute__((noinline, visibility("default")))

void *volatile nofp_sink;

static __attribute__((noinline)) void churn(size_t n)
{
	void *p = tp_keep(malloc(n));
	nofp_sink = p;
	free(p);
}

static __attribute__((noinline)) long chain(int depth, size_t n)
{
	if (depth <= 0) {
		churn(n);
		return 1;
	}
	long r = chain(depth - 1, n + (size_t)depth) + (depth & 1 ? chain(depth / 3, n) : 0);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
	return r;
}

static int by_value(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	if (((x ^ y) & 15) == 0)
		churn(24 + (size_t)(x & 63));
	return (x > y) - (x < y);
}

static __attribute__((noinline)) void vla(int n)
{
	char buf[n]; /* rbp becomes the CFA register here */
	memset(buf, n, (size_t)n);
	churn((size_t)n + (size_t)buf[n / 2]);
	__asm__ volatile("" : : "r"(buf) : "memory");
}

/* An aligned local, a variable-length array and variable arguments: gcc
 * realigns the stack through a register (DRAP), and the CFA becomes
 * DW_CFA_def_cfa_expression (*(rbp - 16)), rbp's rule an expression. */
static __attribute__((noinline)) void realigned(int n, ...)
{
	_Alignas(64) char buf[64];
	char v[n + 1];
	memset(buf, n, sizeof(buf));
	memset(v, n, (size_t)n + 1);
	__asm__ volatile("" : : "r"(buf), "r"(v) : "memory");
	churn((size_t)n + (size_t)buf[3] + (size_t)v[n / 2]);
	__asm__ volatile("" ::: "memory");
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static void on_signal(int sig)
{
	churn(100 + (size_t)sig);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}

API long nofp_work(int rounds)
{
	long r = 0;
	static int keys[64];
	for (int i = 0; i < 64; i++)
		keys[i] = i;
	for (int round = 0; round < rounds; round++) {
		r += chain(6 + round % 5, 32);
		int v[40];
		for (int i = 0; i < 40; i++)
			v[i] = (i * 7919 + round) % 101;
		qsort(v, 40, sizeof(v[0]), by_value);
		vla(16 + round % 48);
		realigned(1 + round % 7, round);
		void *root = NULL;
		for (int i = 0; i < 16; i++)
			tsearch(&keys[(i * 5 + round) % 64], &root, cmp_int);
		tdestroy(root, (void (*)(void *))(void (*)(void))tp_keep);
	}
	return r;
}

API void nofp_signal(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	raise(SIGUSR1);
}
