/* The small shared library that dl_main dlopens.  Its constructor keeps two
 * blocks of 555 bytes that its destructor frees (so they appear inside the
 * dlopen and dlclose calls); tpdl_work(n) does n malloc(777)/free pairs and
 * returns a calloc(3, 111) block that tpdl_release frees. */
#include <stdlib.h>

#include "tp.h"

static void *ctor_blocks[2];

__attribute__((constructor)) static void tpdl_init(void)
{
	ctor_blocks[0] = tp_keep(malloc(555));
	ctor_blocks[1] = tp_keep(malloc(555));
}

__attribute__((destructor)) static void tpdl_fini(void)
{
	free(ctor_blocks[0]);
	free(ctor_blocks[1]);
}

__attribute__((visibility("default"))) void *tpdl_work(int n)
{
	for (int i = 0; i < n; i++)
		free(tp_keep(malloc(777)));
	return calloc(3, 111);
}

__attribute__((visibility("default"))) void tpdl_release(void *p)
{
	free(p);
}
