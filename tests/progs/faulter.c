/* Page faults at known places for the probe tests (cases_probes.py):
 * touch_buffer writes the first byte of each of N pages (argv[1], default
 * 2560) of a fresh anonymous mapping (huge pages off, so one fault per
 * page), and read_file maps each file argv[2], argv[3]... in turn and
 * reads a byte of each of its pages, then unmaps it (files of one size get
 * the same address one after the other).  Prints "touched N", then "read
 * SUM at ADDR" per file. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096

__attribute__((noinline)) static void touch_buffer(volatile char *buf, long pages)
{
	for (long i = 0; i < pages; i++)
		buf[i * PAGE] = (char)i;
}

__attribute__((noinline)) static long read_file(const char *path, void **where)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		perror(path);
		exit(1);
	}
	volatile const char *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	long sum = 0;
	*where = (void *)p;
	for (off_t o = 0; o < st.st_size; o += PAGE)
		sum += p[o];
	munmap((void *)p, (size_t)st.st_size);
	close(fd);
	return sum;
}

int main(int argc, char **argv)
{
	long pages = argc > 1 ? atol(argv[1]) : 2560;
	char *buf = mmap(NULL, (size_t)pages * PAGE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	madvise(buf, (size_t)pages * PAGE, MADV_NOHUGEPAGE);
	touch_buffer(buf, pages);
	printf("touched %ld\n", pages);
	for (int i = 2; i < argc; i++) {
		void *at;
		long sum = read_file(argv[i], &at);
		printf("read %ld at %p\n", sum, at);
	}
	return 0;
}
