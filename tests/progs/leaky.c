/* Leaks at known call sites, for `heaptrail leaks` (tests/e2e/cases_stacks.py,
 * which finds the lines by their LEAK: markers).  Usage: leaky [LIBLEAKLIB].
 *   leak_direct   3 x malloc(100), in a loop
 *   leak_helper   malloc(250) through the helper xalloc()
 *   outer         calloc(4, 16) in leak_inline(), inlined into outer()
 *   a thread      malloc(77) in leak_thread()
 *   the library   leaklib_leak(123): malloc in a library built without frame
 *                 pointers, called through it (its stack must still reach main)
 * Every block is dropped (valgrind: "definitely lost"); one malloc(10) is
 * freed and must not be reported. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tp.h"

void *volatile leaky_sink;

__attribute__((noinline)) static void *xalloc(size_t n)
{
	void *p = malloc(n); /* LEAK:helper_alloc */
	TP_CHECK(p);
	memset(p, 1, n);
	return p;
}

__attribute__((noinline)) static void leak_direct(void)
{
	for (int i = 0; i < 3; i++)
		leaky_sink = malloc(100); /* LEAK:direct */
}

__attribute__((noinline)) static void leak_helper(void)
{
	leaky_sink = xalloc(250); /* LEAK:helper_call */
}

static inline __attribute__((always_inline)) void leak_inline(void)
{
	leaky_sink = calloc(4, 16); /* LEAK:inline */
}

__attribute__((noinline)) static void outer(void)
{
	leak_inline(); /* LEAK:outer_call */
}

static void *leak_thread(void *arg)
{
	(void)arg;
	leaky_sink = malloc(77); /* LEAK:thread */
	return NULL;
}

int main(int argc, char **argv)
{
	leak_direct();
	leak_helper();
	outer();
	pthread_t t;
	TP_CHECK(pthread_create(&t, NULL, leak_thread, NULL) == 0);
	TP_CHECK(pthread_join(t, NULL) == 0);
	if (argc > 1) {
		void *h = dlopen(argv[1], RTLD_NOW);
		TP_CHECK(h);
		void (*fn)(size_t) = (void (*)(size_t))dlsym(h, "leaklib_leak");
		TP_CHECK(fn);
		fn(123); /* LEAK:lib_call */
	}
	free(tp_keep(malloc(10)));
	leaky_sink = NULL;
	return 0;
}
