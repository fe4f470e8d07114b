/* hider: heap calls hidden from the tracer (glibc's __libc_malloc and
 * __libc_free, which an LD_PRELOAD library does not see), around control
 * events, in a program of two threads: the addresses out of step that the
 * readers' checks must count, and those they must not (docs/FORMAT.md,
 * "Ordering guarantee"; ht_order_info in src/trace/reader.h).
 *
 * A second thread makes a few calls first, so that the trace has two
 * streams (one thread's order is never judged).  Then the main thread:
 *   1. p = malloc(100); p freed hidden; q = malloc(100): q is p again
 *      (glibc's tcache), handed out while live in the trace: counted;
 *   2. u = hidden malloc(50); free(u): released while not live: counted
 *      (before the first control event);
 *   3. r = malloc(200); stop; start; r freed hidden; s = malloc(200),
 *      r again: not counted (recording was off in between: the checks
 *      forget the blocks allocated before it went back on); and a hidden
 *      malloc freed (not counted after a control event);
 *   4. t = malloc(300); pause; resume; t freed hidden; v = malloc(300),
 *      t again: not counted (the same, at the resume);
 *   5. w = malloc(400); pause; w freed hidden; x = malloc(400), w again
 *      (not recorded); resume; x freed at the end: not counted either way
 *      (the trace has w live; the checks forgot it at the resume);
 *   6. z = malloc(500); z freed hidden; z2 = malloc(500), z again:
 *      counted (z came after the latest control event).
 * It prints "expected N": the events counted, as the program saw them
 * (an address that did not come back is not counted), and frees what it
 * holds at the end. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include <heaptrail.h>

#include "tp.h"

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

static void *side(void *arg)
{
	(void)arg;
	tp_pairs(3, 64);
	return NULL;
}

/* a = malloc(size); a freed hidden; b = malloc(size): b (1 if it is a). */
static void *again(char **a, size_t size)
{
	*a = tp_keep(malloc(size));
	TP_CHECK(*a);
	__libc_free(*a);
	void *b = tp_keep(malloc(size));
	TP_CHECK(b);
	return b;
}

int main(void)
{
	pthread_t th;
	TP_CHECK(pthread_create(&th, NULL, side, NULL) == 0);
	TP_CHECK(pthread_join(th, NULL) == 0);
	unsigned long expected = 0;
	char *p, *r, *t, *w, *z;

	void *q = again(&p, 100); /* 1 */
	expected += q == p;
	char *u = tp_keep(__libc_malloc(50)); /* 2 */
	TP_CHECK(u);
	free(u);
	expected++;

	r = tp_keep(malloc(200)); /* 3 */
	TP_CHECK(r);
	HEAPTRAIL_STOP();
	HEAPTRAIL_START();
	__libc_free(r);
	void *s = tp_keep(malloc(200));
	TP_CHECK(s);
	char *h = tp_keep(__libc_malloc(60));
	TP_CHECK(h);
	free(h);

	t = tp_keep(malloc(300)); /* 4 */
	TP_CHECK(t);
	HEAPTRAIL_PAUSE();
	HEAPTRAIL_RESUME();
	__libc_free(t);
	void *v = tp_keep(malloc(300));
	TP_CHECK(v);

	w = tp_keep(malloc(400)); /* 5 */
	TP_CHECK(w);
	HEAPTRAIL_PAUSE();
	__libc_free(w);
	void *x = tp_keep(malloc(400));
	TP_CHECK(x);
	HEAPTRAIL_RESUME();

	void *z2 = again(&z, 500); /* 6 */
	expected += z2 == z;

	free(q);
	free(s);
	free(v);
	free(x);
	free(z2);
	tp_say_num("expected", expected);
	return 0;
}
