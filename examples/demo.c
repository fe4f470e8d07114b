/* The bundled demo: a small multi-threaded program with the habits real
 * programs have (a growing buffer, a cache that is never freed, per-thread
 * scratch space, a leak) so that `heaptrail stats` has something to say. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heaptrail.h"

struct node {
	struct node *next; /* list link */
	char *word;        /* owned copy */
};

static struct node *cache; /* never freed: stays live at exit */
static void *volatile sink; /* keeps the compiler from deleting allocations */

static void *worker(void *arg)
{
	long id = (long)arg;
	size_t cap = 16, len = 0;
	char *buf = malloc(cap);
	for (int i = 0; i < 20000; i++) {
		char *scratch = malloc(64 + (size_t)(i % 512)); /* short-lived */
		snprintf(scratch, 64, "w%ld-%d", id, i);
		size_t n = strlen(scratch);
		if (len + n + 1 > cap) { /* a growing buffer: realloc */
			cap *= 2;
			buf = realloc(buf, cap);
		}
		memcpy(buf + len, scratch, n + 1);
		len += n;
		free(scratch);
	}
	free(buf);
	return NULL;
}

int main(void)
{
	HEAPTRAIL_MARK("start");
	pthread_t th[3];
	for (long i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (int i = 0; i < 1000; i++) {
		struct node *n = malloc(sizeof(*n));
		n->word = strdup(i % 2 ? "odd" : "even");
		n->next = cache;
		cache = n;
	}
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	HEAPTRAIL_MARK("threads done");
	sink = calloc(100, 1000); /* forgotten: a leak */
	printf("demo: done\n");
	return 0;
}
