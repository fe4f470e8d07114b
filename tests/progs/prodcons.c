/* Producer/consumer hand-offs for convert and replay (cases_replay.py).
 * Usage: prodcons N.  Two producers each make N blocks with every
 * allocation function in turn and queue them; one consumer takes them,
 * grows every third one with realloc (a realloc of another thread's
 * block), and frees them all.  Each producer also keeps a block of its own
 * that it reallocs and frees every 16 items.  The queue is a mutex and a
 * condvar, which allocate nothing.  Prints its calls per function. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>

#include "tp.h"

#define QCAP 64

static void *queue[QCAP];
static unsigned qhead, qlen, producers_left;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER, not_full = PTHREAD_COND_INITIALIZER;
static unsigned long n_items;

/* calls made by the program, by function */
static unsigned long c_malloc, c_calloc, c_realloc, c_free, c_memalign, c_posix_memalign,
	c_aligned_alloc, c_valloc;

static void push(void *p)
{
	pthread_mutex_lock(&lock);
	while (qlen == QCAP)
		pthread_cond_wait(&not_full, &lock);
	queue[(qhead + qlen++) % QCAP] = p;
	pthread_cond_signal(&not_empty);
	pthread_mutex_unlock(&lock);
}

static void *pop(void)
{
	pthread_mutex_lock(&lock);
	while (qlen == 0 && producers_left)
		pthread_cond_wait(&not_empty, &lock);
	void *p = NULL;
	if (qlen) {
		p = queue[qhead];
		qhead = (qhead + 1) % QCAP;
		qlen--;
		pthread_cond_signal(&not_full);
	}
	pthread_mutex_unlock(&lock);
	return p;
}

static void *make(unsigned long k, unsigned seed)
{
	size_t size = 16 + ((k * 2654435761u + seed) % 3000);
	void *p = NULL;
	switch (k % 7) {
	case 0:
		p = malloc(size);
		__atomic_add_fetch(&c_malloc, 1, __ATOMIC_RELAXED);
		break;
	case 1:
		p = calloc(size / 16 + 1, 16);
		__atomic_add_fetch(&c_calloc, 1, __ATOMIC_RELAXED);
		break;
	case 2:
		p = memalign(64, size);
		__atomic_add_fetch(&c_memalign, 1, __ATOMIC_RELAXED);
		break;
	case 3:
		TP_CHECK(posix_memalign(&p, 32, size) == 0);
		__atomic_add_fetch(&c_posix_memalign, 1, __ATOMIC_RELAXED);
		break;
	case 4:
		p = aligned_alloc(64, (size + 63) & ~(size_t)63);
		__atomic_add_fetch(&c_aligned_alloc, 1, __ATOMIC_RELAXED);
		break;
	case 5:
		p = valloc(size);
		__atomic_add_fetch(&c_valloc, 1, __ATOMIC_RELAXED);
		break;
	default:
		p = malloc(size / 2 + 1);
		p = realloc(p, size * 3); /* grows: usually moves */
		__atomic_add_fetch(&c_malloc, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&c_realloc, 1, __ATOMIC_RELAXED);
		break;
	}
	TP_CHECK(p);
	*(volatile unsigned long *)p = k;
	return tp_keep(p);
}

static void *producer(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	void *own = NULL;
	for (unsigned long k = 0; k < n_items; k++) {
		push(make(k, seed));
		own = realloc(own, 100 + k % 500);
		__atomic_add_fetch(&c_realloc, 1, __ATOMIC_RELAXED);
		TP_CHECK(own);
		if (k % 16 == 15) {
			free(own);
			__atomic_add_fetch(&c_free, 1, __ATOMIC_RELAXED);
			own = NULL;
		}
	}
	free(own);
	__atomic_add_fetch(&c_free, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&lock);
	producers_left--;
	pthread_cond_broadcast(&not_empty);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void *consumer(void *arg)
{
	(void)arg;
	unsigned long k = 0;
	void *p;
	while ((p = pop()) != NULL) {
		if (k++ % 3 == 0) {
			p = realloc(p, 5000);
			__atomic_add_fetch(&c_realloc, 1, __ATOMIC_RELAXED);
			TP_CHECK(p);
		}
		free(p);
		__atomic_add_fetch(&c_free, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	n_items = tp_atoul(argv[1]);
	producers_left = 2;
	pthread_t t[3];
	TP_CHECK(pthread_create(&t[0], NULL, consumer, NULL) == 0);
	TP_CHECK(pthread_create(&t[1], NULL, producer, (void *)1) == 0);
	TP_CHECK(pthread_create(&t[2], NULL, producer, (void *)2) == 0);
	for (int i = 0; i < 3; i++)
		TP_CHECK(pthread_join(t[i], NULL) == 0);
	tp_say_num("malloc", c_malloc);
	tp_say_num("calloc", c_calloc);
	tp_say_num("realloc", c_realloc);
	tp_say_num("free", c_free);
	tp_say_num("memalign", c_memalign);
	tp_say_num("posix_memalign", c_posix_memalign);
	tp_say_num("aligned_alloc", c_aligned_alloc);
	tp_say_num("valloc", c_valloc);
	return 0;
}
