/* Known phases for heaptrail timeline and events (tests/e2e/cases_timeline.py):
 * markers between them, a glibc-mmapped block held while the program
 * sleeps (RSS samples see it), a malloc that moves the program break from
 * a known line, and the program's own mmap/mremap/munmap, brk/sbrk and
 * SysV shm calls with exact arguments.  It prints what the test cannot
 * know in advance (addresses, ids, the fd) as NAME=VALUE lines.
 * Usage: phases [hold]: with hold, the block is held not for 80 ms but
 * until a line comes on stdin, after "held" on stdout (the test then
 * waits for RSS samples in the trace, not for the scheduler). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include "heaptrail.h"

static void *blocks[100];

/* The malloc that has to grow the heap: 100 blocks of 1000 bytes used
 * most of the first 132 KiB the main arena took. */
static __attribute__((noinline)) void *grow_heap(void)
{
	void *p = malloc(100000); /* BRK:grow */
	__asm__ volatile("" : : "r"(p) : "memory"); /* not a tail call: a frame of its own */
	return p;
}

/* Waits for a line (or the end) on stdin, without stdio. */
static void wait_line(void)
{
	char c;
	while (read(0, &c, 1) == 1 && c != '\n')
		;
}

int main(int argc, char **argv)
{
	int hold = argc > 1 && !strcmp(argv[1], "hold");
	setvbuf(stdout, NULL, _IONBF, 0); /* no stdio buffer in the heap */
	heaptrail_mark("start");
	for (int i = 0; i < 100; i++)
		blocks[i] = malloc(1000);
	heaptrail_mark("phase1");
	char *big = malloc(8 << 20); /* above the mmap threshold: glibc mmaps it */
	memset(big, 1, 8 << 20);
	heaptrail_mark("touched");
	if (hold) { /* RSS samples see the 8 MiB */
		if (write(1, "held\n", 5) != 5)
			return 1;
		wait_line();
	} else {
		usleep(80000);
	}
	heaptrail_mark("big");
	free(big);
	printf("brk_before=%p\n", sbrk(0));
	void *g = grow_heap();
	printf("brk_after=%p\n", sbrk(0));
	for (int i = 0; i < 100; i++)
		free(blocks[i]);
	free(g);
	heaptrail_mark("freed");

	void *m = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *m2 = mremap(m, 65536, 131072, MREMAP_MAYMOVE);
	int r1 = munmap(m2, 131072);
	printf("mmap=%p\nmremap=%p\nmunmap=%d\n", m, m2, r1);
	int fd = memfd_create("phases", 0);
	if (fd < 0 || ftruncate(fd, 3 * 4096) < 0)
		return 1;
	void *fm = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 8192);
	munmap(fm, 4096);
	printf("fd=%d\nfilemap=%p\n", fd, fm);
	void *bad = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, 999, 0); /* EBADF */
	printf("badmap=%p\n", bad);

	void *b0 = sbrk(65536);
	int rb = brk(b0);
	printf("sbrk_old=%p\nbrk_ret=%d\n", b0, rb);

	int id = shmget(IPC_PRIVATE, 65536, IPC_CREAT | 0600);
	void *a = shmat(id, NULL, 0);
	int rd = shmdt(a);
	int rc = shmctl(id, IPC_RMID, NULL);
	printf("shmid=%d\nshmat=%p\nshmdt=%d\nshmctl=%d\n", id, a, rd, rc);
	printf("brk_end=%p\n", sbrk(0));
	heaptrail_mark("end");
	return 0;
}
