/* The control API of include/heaptrail.h.  Usage: api_marks MODE.
 *   marks:  mark "phase1"; 3 x malloc(10)/free; pause; 100 x malloc(20)/free
 *           (not recorded); resume; mark "phase2"; 2 x malloc(30)/free;
 *           sync; stop; 50 x malloc(40)/free (not recorded); start;
 *           1 x malloc(50)/free.  Recorded: malloc 6, free 6, marks 2.
 *   paused: (run with HEAPTRAIL_START_PAUSED=1) 5 x malloc(10)/free (not
 *           recorded); start; 2 x malloc(20)/free.  Recorded: malloc 2.
 *   toggle: (run with HEAPTRAIL_TOGGLE_SIGNAL=1) 1 x malloc(10)/free;
 *           raise(SIGUSR2); 50 x malloc(20)/free (not recorded);
 *           raise(SIGUSR2); 2 x malloc(30)/free.  Recorded: malloc 3.
 *   reset:  a = malloc(1000), b = malloc(2000), big = malloc(1 MiB) (glibc
 *           mmaps it); heaptrail_reset(); c = malloc(300); free(b);
 *           free(big); d = malloc(400); free(c).  a and d stay live: the
 *           analyzers forget a, b and big at the reset, so only d (400
 *           bytes) is live at exit and the frees of b and big are of
 *           forgotten blocks.
 *   pausefree: a = malloc(1000), b = malloc(2000); pause; free(a) and
 *           c = malloc(3000), not recorded; resume; free(c); free(b).  The
 *           trace has a live at exit (freed while paused) and an unknown
 *           free (c's).
 *   many:   12000 marks "m0" .. "m11999", one malloc(16)/free after each:
 *           the analyzers keep the first 10000 (HT_MARKS_MAX) and count
 *           the rest.
 * Without the tracer every mode runs the same and says "untraced" on
 * stdout at the end; with it, "traced". */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <heaptrail.h>

#include "tp.h"

static int active(void)
{
	return heaptrail_active ? heaptrail_active() : 0;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	const char *m = argv[1];
	int traced = heaptrail_active != NULL;
	if (!strcmp(m, "marks")) {
		TP_CHECK(active() == traced);
		HEAPTRAIL_MARK("phase1");
		tp_pairs(3, 10);
		HEAPTRAIL_PAUSE();
		TP_CHECK(active() == 0);
		tp_pairs(100, 20);
		HEAPTRAIL_RESUME();
		TP_CHECK(active() == traced);
		HEAPTRAIL_MARK("phase2");
		tp_pairs(2, 30);
		HEAPTRAIL_SYNC();
		HEAPTRAIL_STOP();
		TP_CHECK(active() == 0);
		tp_pairs(50, 40);
		HEAPTRAIL_START();
		TP_CHECK(active() == traced);
		tp_pairs(1, 50);
	} else if (!strcmp(m, "paused")) {
		TP_CHECK(active() == 0);
		tp_pairs(5, 10);
		HEAPTRAIL_START();
		TP_CHECK(active() == traced);
		tp_pairs(2, 20);
	} else if (!strcmp(m, "toggle")) {
		TP_CHECK(traced); /* without the tracer SIGUSR2 would kill us */
		tp_pairs(1, 10);
		raise(SIGUSR2);
		TP_CHECK(active() == 0);
		tp_pairs(50, 20);
		raise(SIGUSR2);
		TP_CHECK(active() == 1);
		tp_pairs(2, 30);
	} else if (!strcmp(m, "reset")) {
		char *a = tp_keep(malloc(1000)), *b = tp_keep(malloc(2000));
		char *big = tp_keep(malloc(1 << 20));
		TP_CHECK(a && b && big);
		HEAPTRAIL_RESET();
		char *c = tp_keep(malloc(300));
		TP_CHECK(c);
		free(b);
		free(big);
		TP_CHECK(tp_keep(malloc(400)));
		free(c);
	} else if (!strcmp(m, "pausefree")) {
		char *a = tp_keep(malloc(1000)), *b = tp_keep(malloc(2000));
		TP_CHECK(a && b);
		HEAPTRAIL_PAUSE();
		free(a);
		char *c = tp_keep(malloc(3000));
		TP_CHECK(c);
		HEAPTRAIL_RESUME();
		free(c);
		free(b);
	} else if (!strcmp(m, "many")) {
		for (int i = 0; i < 12000; i++) {
			char label[16];
			snprintf(label, sizeof(label), "m%d", i);
			HEAPTRAIL_MARK(label);
			tp_pairs(1, 16);
		}
	} else {
		return TP_FAIL_STATUS;
	}
	tp_write(1, traced ? "traced\n" : "untraced\n");
	return 0;
}
