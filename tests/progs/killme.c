/* Waits to be killed: 1000 x malloc(40), 400 of them freed, then
 * "ready PID" on stdout, then sleeps until a signal ends it. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "tp.h"

int main(void)
{
	static void *p[1000];
	for (int i = 0; i < 1000; i++)
		TP_CHECK((p[i] = tp_keep(malloc(40))) != NULL);
	for (int i = 0; i < 400; i++)
		free(p[i]);
	char buf[24];
	tp_write(1, "ready ");
	tp_write(1, tp_utoa(buf, (unsigned long long)getpid()));
	tp_write(1, "\n");
	for (int i = 0; i < 600; i++) /* 10 minutes at most */
		sleep(1);
	return TP_FAIL_STATUS;
}
