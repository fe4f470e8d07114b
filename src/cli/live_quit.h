/* What `record --live` tells the display it runs in its own process
 * (cmd_live.c): a signal that record passed on to the program (SIGTERM
 * from kill, a service manager, timeout) ends the display, so that record
 * goes on to wait for the program and exits as it did (128+N), as without
 * --live.  The terminal's own signals (Ctrl-C) are not passed on and leave
 * the display up: the program got its own, and the finished trace stays
 * on the screen until q. */
#ifndef HEAPTRAIL_CLI_LIVE_QUIT_H
#define HEAPTRAIL_CLI_LIVE_QUIT_H

#include <signal.h>

/* The signal passed on, 0 if none: set by record's handler, read by the
 * display's loop (at least every 100 ms). */
extern volatile sig_atomic_t ht_live_quit;

#endif
