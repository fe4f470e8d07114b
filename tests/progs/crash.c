/* Dies after known allocations: 20 x malloc(64), 5 of them freed, then
 * abort(), a write through NULL, or exit(N).
 * Usage: crash abort | segv | exit N. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "tp.h"

int main(int argc, char **argv)
{
	TP_CHECK(argc >= 2);
	void *p[20];
	for (int i = 0; i < 20; i++)
		TP_CHECK((p[i] = tp_keep(malloc(64))) != NULL);
	for (int i = 0; i < 5; i++)
		free(p[i]);
	if (!strcmp(argv[1], "abort"))
		abort();
	if (!strcmp(argv[1], "segv")) {
		volatile int *volatile bad = NULL;
		*bad = 1;
	}
	if (!strcmp(argv[1], "exit") && argc == 3)
		exit((int)tp_atoul(argv[2]));
	return TP_FAIL_STATUS;
}
