/* One address over and over (cases_stacks.py, sampling_reused_address):
 * sameaddr N: N x malloc(4096) then free, which glibc serves from the
 * same address every time. */
#include <stdlib.h>

#include "tp.h"

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	long n = atol(argv[1]);
	TP_CHECK(n > 0);
	for (long i = 0; i < n; i++)
		free(tp_keep(malloc(4096)));
	return 0;
}
