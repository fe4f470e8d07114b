/* Two call paths that share their three innermost frames (an allocator
 * wrapper of three levels, like sqlite3Malloc's), for `top`: its rows must
 * show enough frames to tell the paths apart.  Usage: wrappers.
 * path_a allocates 10 blocks of 1000 bytes, path_b 20 of 500; all are
 * freed at the end. */
#define _GNU_SOURCE
#include <stdlib.h>

#include "tp.h"

static void *blocks[30];

__attribute__((noinline)) static void *wrap1(size_t n)
{
	return tp_keep(malloc(n));
}

__attribute__((noinline)) static void *wrap2(size_t n)
{
	void *p = wrap1(n);
	__asm__ volatile("" ::: "memory"); /* no tail call */
	return p;
}

__attribute__((noinline)) static void *wrap3(size_t n)
{
	void *p = wrap2(n);
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) static void path_a(void)
{
	for (int i = 0; i < 10; i++)
		blocks[i] = wrap3(1000);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void path_b(void)
{
	for (int i = 0; i < 20; i++)
		blocks[10 + i] = wrap3(500);
	__asm__ volatile("" ::: "memory");
}

int main(void)
{
	path_a();
	path_b();
	for (int i = 0; i < 30; i++)
		free(blocks[i]);
	return 0;
}
