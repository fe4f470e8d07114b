/* A library finiprog dlopens and never closes: it frees at exit, in its
 * ELF destructor, the 2222 bytes it allocated at load (cases_api.py). */
#include <stdlib.h>

static void *block;

__attribute__((constructor)) static void finidl_load(void)
{
	block = malloc(2222);
}

__attribute__((destructor)) static void finidl_unload(void)
{
	free(block);
}
