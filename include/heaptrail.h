/* heaptrail: control a recording from inside the traced program.
 *
 * The functions are defined by libheaptrail.so, which is loaded with
 * LD_PRELOAD (heaptrail record does that).  They are declared weak, so a
 * program that calls them still links and runs without the tracer: test the
 * symbol first, or use the HEAPTRAIL_* macros below, which do it for you.
 *
 *     #include <heaptrail.h>
 *     HEAPTRAIL_MARK("warm-up done");
 *     if (heaptrail_pause) heaptrail_pause();
 */
#ifndef HEAPTRAIL_H
#define HEAPTRAIL_H

#ifdef __cplusplus
extern "C" {
#endif

/* Resume recording after heaptrail_stop()/pause(), or start it when the
 * program runs with HEAPTRAIL_START_PAUSED=1. */
void heaptrail_start(void) __attribute__((weak));
/* Stop recording and write everything recorded so far to the trace. */
void heaptrail_stop(void) __attribute__((weak));
/* Stop recording (cheaply); heaptrail_resume() goes on. */
void heaptrail_pause(void) __attribute__((weak));
/* Go on recording after heaptrail_pause(). */
void heaptrail_resume(void) __attribute__((weak));
/* Write everything recorded so far to the trace file before returning. */
void heaptrail_sync(void) __attribute__((weak));
/* Mark a reset point: analyzers forget the blocks allocated before it. */
void heaptrail_reset(void) __attribute__((weak));
/* Put a labelled marker in the trace (shown by dump, timeline, report). */
void heaptrail_mark(const char *label) __attribute__((weak));
/* 1 while events are being recorded, else 0. */
int heaptrail_active(void) __attribute__((weak));

#define HEAPTRAIL_CALL_(fn, ...) \
	do { \
		if (fn) \
			fn(__VA_ARGS__); \
	} while (0)
#define HEAPTRAIL_START() HEAPTRAIL_CALL_(heaptrail_start)
#define HEAPTRAIL_STOP() HEAPTRAIL_CALL_(heaptrail_stop)
#define HEAPTRAIL_PAUSE() HEAPTRAIL_CALL_(heaptrail_pause)
#define HEAPTRAIL_RESUME() HEAPTRAIL_CALL_(heaptrail_resume)
#define HEAPTRAIL_SYNC() HEAPTRAIL_CALL_(heaptrail_sync)
#define HEAPTRAIL_RESET() HEAPTRAIL_CALL_(heaptrail_reset)
#define HEAPTRAIL_MARK(label) HEAPTRAIL_CALL_(heaptrail_mark, label)

#ifdef __cplusplus
}
#endif
#endif
