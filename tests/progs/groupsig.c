/* A program that signals its own process group (cases_reliability.py,
 * record_group_signals): kill(0, SIGTERM) and kill(0, SIGUSR1), each
 * caught and counted, with a wait after each for a second delivery, then
 * a malloc/free and "term=N usr1=N" on stdout.  Untraced: 1 and 1. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tp.h"

static volatile sig_atomic_t term, usr1;

static void on_signal(int sig)
{
	if (sig == SIGTERM)
		term++;
	else
		usr1++;
}

static void pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

int main(void)
{
	struct sigaction sa = {0};
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	TP_CHECK(sigaction(SIGTERM, &sa, NULL) == 0 && sigaction(SIGUSR1, &sa, NULL) == 0);
	TP_CHECK(kill(0, SIGTERM) == 0);
	pause_ms(200);
	TP_CHECK(kill(0, SIGUSR1) == 0);
	pause_ms(200);
	free(tp_keep(malloc(100)));
	printf("term=%d usr1=%d\n", (int)term, (int)usr1);
	return 0;
}
