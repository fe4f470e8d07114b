/* The library leaky dlopens, built without frame pointers (-O2
 * -fomit-frame-pointer): leaklib_leak(n) leaks malloc(n) two calls deep, so
 * that a complete stack needs DWARF unwinding through it. */
#include <stdlib.h>

#include "tp.h"

void *volatile leaklib_sink;

__attribute__((noinline)) static void leaklib_inner(size_t n)
{
	leaklib_sink = malloc(n); /* LEAK:lib */
	leaklib_sink = NULL;
}

__attribute__((noinline, visibility("default"))) void leaklib_leak(size_t n)
{
	leaklib_inner(n + 0 * (size_t)leaklib_sink);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}
