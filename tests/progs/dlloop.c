/* dlopen and dlclose two libraries, again and again.  Usage: dlloop
 * LIBTPDL LIBTPDL2 ROUNDS [alternate].  Each round: dlopen libtpdl (its
 * constructor: 2 x malloc(555)) and libtpdl2, tpdl_work(3) (3 x
 * malloc(777)/free and a calloc(3, 111) that tpdl_release frees),
 * tpdl2_work(4) (4 x malloc(1234)/free, 1 x malloc(99) leaked), dlclose
 * both (libtpdl's destructor frees the 555s).  With "alternate", libtpdl
 * is closed before libtpdl2 is opened, so that libtpdl2 is mapped where
 * libtpdl was.  Prints "rounds N" at the end. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

#include "tp.h"

int main(int argc, char **argv)
{
	TP_CHECK(argc == 4 || argc == 5);
	unsigned long rounds = tp_atoul(argv[3]);
	int alternate = argc == 5;
	for (unsigned long r = 0; r < rounds; r++) {
		void *a = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
		TP_CHECK(a);
		void *(*work)(int) = (void *(*)(int))dlsym(a, "tpdl_work");
		void (*release)(void *) = (void (*)(void *))dlsym(a, "tpdl_release");
		TP_CHECK(work && release);
		release(work(3));
		if (alternate)
			TP_CHECK(dlclose(a) == 0);
		void *b = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
		TP_CHECK(b);
		int (*work2)(int) = (int (*)(int))dlsym(b, "tpdl2_work");
		TP_CHECK(work2 && work2(4) == 5);
		TP_CHECK(dlclose(b) == 0);
		if (!alternate)
			TP_CHECK(dlclose(a) == 0);
	}
	char buf[24];
	tp_write(1, "rounds ");
	tp_write(1, tp_utoa(buf, rounds));
	tp_write(1, "\n");
	return 0;
}
