/* A program with its own malloc, free, calloc and realloc (a bump
 * allocator in a static arena), as programs that link an allocator
 * statically have: they come before the recorder's in the lookup order,
 * and the recorder must say that it sees none of their calls. */
#include <stddef.h>
#include <string.h>

#include "tp.h"

static _Alignas(16) unsigned char arena[1 << 20];
static size_t used;

void *malloc(size_t n);
void free(void *p);
void *calloc(size_t n, size_t size);
void *realloc(void *p, size_t n);

void *malloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (n > sizeof(arena) - used)
		return NULL;
	void *p = arena + used;
	used += n;
	return p;
}

void free(void *p)
{
	(void)p;
}

void *calloc(size_t n, size_t size)
{
	void *p = malloc(n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

void *realloc(void *p, size_t n)
{
	void *q = malloc(n);
	if (q && p)
		memcpy(q, p, n); /* (the arena is large enough to read past) */
	return q;
}

int main(void)
{
	for (int i = 0; i < 100; i++)
		free(tp_keep(malloc(32)));
	return 0;
}
