/* dlopen/dlclose of the test library (libtpdl.so).  Usage: dl_main PATH.
 * Marks split the trace: "dlopen" [dlopen + dlsym] "opened" [tpdl_work(5),
 * tpdl_release] "dlclose" [dlclose] "closed".  Between "opened" and
 * "dlclose" the trace holds exactly malloc 5 (777 bytes), calloc 1 (3x111)
 * and free 6. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

#include <heaptrail.h>

#include "tp.h"

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	HEAPTRAIL_MARK("dlopen");
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	TP_CHECK(h);
	void *(*work)(int) = (void *(*)(int))dlsym(h, "tpdl_work");
	void (*release)(void *) = (void (*)(void *))dlsym(h, "tpdl_release");
	TP_CHECK(work && release);
	HEAPTRAIL_MARK("opened");
	void *q = work(5);
	TP_CHECK(q);
	release(q);
	HEAPTRAIL_MARK("dlclose");
	TP_CHECK(dlclose(h) == 0);
	HEAPTRAIL_MARK("closed");
	return 0;
}
