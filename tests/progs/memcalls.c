/* A known set of memory system calls for the probe tests (cases_probes.py):
 *
 *   mmap      anonymous 3 pages RW PRIVATE, then munmap
 *   mmap      a file (argv[1]) 2 pages R SHARED at offset 4096, then munmap
 *   mmap      anonymous 5 pages RW PRIVATE|POPULATE, mremap to 9 (MAYMOVE), munmap
 *   mmap      PROT_NONE 1 page NORESERVE; munmap of it
 *   brk       3 calls growing the break by 64, 128, 192 KiB, from grow_break_N
 *   shmget    key argv[2] (IPC_PRIVATE if not given or 0) 16 pages
 *             IPC_CREAT|0600; shmat; shmdt; shmctl IPC_RMID
 *
 * The calls are framed by two markers, munmap(0x48540000, 0) and
 * munmap(0x48550000, 0), which fail with EINVAL, so that the tests can tell
 * them from the loader's and libc's own.
 *
 * brk is issued by an inline syscall instruction in a function of its own,
 * so that the stack of each brk starts in that function (glibc's wrappers
 * have no frame pointers).  Prints "done SHMID" at the end.  With argv[3]
 * "wait" (for -p tests) it prints "ready PID" and waits for a line on stdin
 * before the calls, and for another before it exits. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE 4096

#define MARK_BEGIN 0x48540000ul
#define MARK_END 0x48550000ul

__attribute__((always_inline)) static inline long raw_brk(unsigned long addr)
{
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "0"(SYS_brk), "D"(addr) : "rcx", "r11", "memory");
	return ret;
}

__attribute__((noinline)) static unsigned long grow_break_1(unsigned long cur)
{
	return (unsigned long)raw_brk(cur + 64 * 1024);
}

__attribute__((noinline)) static unsigned long grow_break_2(unsigned long cur)
{
	return (unsigned long)raw_brk(cur + 128 * 1024);
}

__attribute__((noinline)) static unsigned long grow_break_3(unsigned long cur)
{
	return (unsigned long)raw_brk(cur + 192 * 1024);
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: memcalls FILE [SHMKEY [wait]]\n");
		return 2;
	}
	key_t key = argc > 2 ? (key_t)strtol(argv[2], NULL, 0) : IPC_PRIVATE;
	if (argc > 3 && !strcmp(argv[3], "wait")) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		char line[16];
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	munmap((void *)MARK_BEGIN, 0);
	char *a = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		die("mmap anon");
	a[0] = 1;
	munmap(a, 3 * PAGE);

	int fd = open(argv[1], O_RDONLY);
	if (fd < 0)
		die(argv[1]);
	char *f = mmap(NULL, 2 * PAGE, PROT_READ, MAP_SHARED, fd, PAGE);
	if (f == MAP_FAILED)
		die("mmap file");
	volatile char c = f[0];
	(void)c;
	munmap(f, 2 * PAGE);
	close(fd);

	char *b = mmap(NULL, 5 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		       -1, 0);
	if (b == MAP_FAILED)
		die("mmap populate");
	char *r = mremap(b, 5 * PAGE, 9 * PAGE, MREMAP_MAYMOVE);
	if (r == MAP_FAILED)
		die("mremap");
	munmap(r, 9 * PAGE);

	char *n = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (n == MAP_FAILED)
		die("mmap none");
	munmap(n, PAGE);

	unsigned long cur = (unsigned long)raw_brk(0);
	cur = grow_break_1(cur);
	cur = grow_break_2(cur);
	cur = grow_break_3(cur);

	int id = shmget(key, 16 * PAGE, IPC_CREAT | 0600);
	if (id < 0)
		die("shmget");
	void *s = shmat(id, NULL, 0);
	if (s == (void *)-1)
		die("shmat");
	shmdt(s);
	shmctl(id, IPC_RMID, NULL);
	munmap((void *)MARK_END, 0);
	printf("done %d\n", id);
	fflush(stdout);
	if (argc > 3 && !strcmp(argv[3], "wait")) {
		char line[16];
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	return 0;
}
