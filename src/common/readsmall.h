/* A small file, most often one of /proc, read whole without stdio or
 * malloc, and whole preads.  Header-only, so that the preload library, which links none of
 * src/common (its helper process may have been cloned while the program
 * held a libc lock), reads its /proc files as record does. */
#ifndef HEAPTRAIL_COMMON_READSMALL_H
#define HEAPTRAIL_COMMON_READSMALL_H

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

/* Up to n bytes of fd at off into buf, through short reads and EINTR;
 * returns the bytes read (fewer at the end of the file or on an error). */
static inline size_t ht_pread_most(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* The same, all n bytes or -1; else 0. */
static inline int ht_pread_full(int fd, void *buf, size_t n, uint64_t off)
{
	return ht_pread_most(fd, buf, n, off) == n ? 0 : -1;
}

/* Reads path into buf, up to cap bytes (no NUL added: a caller that
 * wants a string passes one byte less and ends it); returns the bytes
 * read, 0 if it cannot be opened or read. */
static inline size_t ht_read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t n = 0;
	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	return n;
}

#endif
