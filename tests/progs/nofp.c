/* nofp [THREADS [ROUNDS]]: built without frame pointers (-O2
 * -fomit-frame-pointer, as Debian builds), calls libnofplib.so's
 * allocations through several levels from main and from THREADS threads
 * that then exit, and takes one signal whose handler allocates
 * (cases_stacks.py: the walk's stacks equal libunwind's). */
#include <pthread.h>
#include <stdlib.h>

#include "tp.h"

long nofp_work(int rounds);
void nofp_signal(void);

static int rounds = 40;

static __attribute__((noinline)) void *worker(void *arg)
{
	long r = nofp_work(rounds + (int)(intptr_t)arg);
	__asm__ volatile("" ::: "memory");
	return (void *)(intptr_t)r;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 3;
	if (argc > 2)
		rounds = atoi(argv[2]);
	pthread_t th[16];
	if (threads > 16)
		threads = 16;
	for (int i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) != 0)
			return TP_FAIL_STATUS;
	nofp_work(rounds);
	nofp_signal();
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	return 0;
}
