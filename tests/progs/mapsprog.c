/* A process with a known memory map, for `heaptrail maps` (cases_maps.py):
 *
 *   mapsprog FILE LIBRARY
 *
 * - three threads with stacks of 256, 320 and 384 KiB
 *   (pthread_attr_setstacksize) and the default one-page guard, each
 *   allocating from the heap, so that glibc gives each its own arena (a
 *   thread's first malloc creates a new arena while there are fewer than
 *   8 per core), all three alive and allocating at the same time;
 * - the main heap grown by 1 MiB of small blocks;
 * - an anonymous private mapping of 3076 KiB (769 pages) of which the
 *   first 100 pages are written, marked MADV_DONTDUMP so that the kernel
 *   does not merge it with a neighbouring anonymous mapping;
 * - an anonymous mapping of 64 KiB named "ht-test" with prctl(PR_SET_VMA)
 *   (when the kernel has CONFIG_ANON_VMA_NAME), MADV_DONTFORK for the same
 *   reason;
 * - FILE mapped whole, read-only, every page read;
 * - LIBRARY opened with dlopen.
 *
 * Then it prints one line on stdout:
 *   ready PID TID1 TID2 TID3 ANON_ADDR NAMED_ADDR NAMED(0|1)
 * and waits for stdin to close, every thread blocked in a system call (so
 * that /proc/PID/task/TID/syscall shows its stack pointer). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

#define NTHREADS 3
#define ANON_PAGES 769
#define ANON_TOUCHED 100
#define NAMED_SIZE (64 * 1024)

static const size_t stack_kib[NTHREADS] = {256, 320, 384};
static pthread_barrier_t allocated;
static int stop_pipe[2];
static pid_t tids[NTHREADS];

static void *worker(void *arg)
{
	int i = (int)(long)arg;
	tids[i] = (pid_t)syscall(SYS_gettid);
	/* allocations that stay, from this thread's arena */
	void *volatile keep[64];
	for (int k = 0; k < 64; k++) {
		keep[k] = malloc(1000 + 100 * (size_t)i);
		memset(keep[k], 1, 1000);
	}
	pthread_barrier_wait(&allocated);
	char c;
	while (read(stop_pipe[0], &c, 1) < 0)
		;
	for (int k = 0; k < 64; k++)
		free(keep[k]);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: mapsprog FILE LIBRARY\n");
		return 2;
	}
	if (pipe(stop_pipe))
		return 1;
	/* the main heap: 1 MiB of small blocks */
	for (int k = 0; k < 1024; k++) {
		char *p = malloc(1000);
		memset(p, 2, 1000);
	}
	long page = sysconf(_SC_PAGESIZE);
	char *anon = mmap(NULL, (size_t)ANON_PAGES * (size_t)page, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (anon == MAP_FAILED || madvise(anon, (size_t)ANON_PAGES * (size_t)page, MADV_DONTDUMP))
		return 1;
	for (int k = 0; k < ANON_TOUCHED; k++)
		anon[(size_t)k * (size_t)page] = 1;
	char *named = mmap(NULL, NAMED_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			   -1, 0);
	if (named == MAP_FAILED || madvise(named, NAMED_SIZE, MADV_DONTFORK))
		return 1;
	memset(named, 3, NAMED_SIZE);
	int is_named = prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)named,
			     (unsigned long)NAMED_SIZE, (unsigned long)"ht-test") == 0;

	int fd = open(argv[1], O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) || st.st_size == 0) {
		perror(argv[1]);
		return 1;
	}
	volatile char *file = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (file == MAP_FAILED)
		return 1;
	close(fd);
	unsigned sum = 0;
	for (off_t o = 0; o < st.st_size; o += page)
		sum += (unsigned char)file[o];
	(void)sum;

	void *lib = dlopen(argv[2], RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}

	pthread_barrier_init(&allocated, NULL, NTHREADS + 1);
	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, stack_kib[i] * 1024);
		if (pthread_create(&th[i], &a, worker, (void *)(long)i))
			return 1;
		pthread_attr_destroy(&a);
	}
	pthread_barrier_wait(&allocated);
	printf("ready %d %d %d %d %p %p %d\n", (int)getpid(), (int)tids[0], (int)tids[1],
	       (int)tids[2], (void *)anon, (void *)named, is_named);
	fflush(stdout);

	char buf[256];
	while (read(0, buf, sizeof(buf)) > 0)
		;
	if (write(stop_pipe[1], "xxx", NTHREADS) != NTHREADS)
		return 1;
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	dlclose(lib);
	return 0;
}
