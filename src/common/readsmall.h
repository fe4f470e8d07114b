/* A small file, most often one of /proc, read whole without stdio or
 * malloc.  Header-only, so that the preload library, which links none of
 * src/common (its helper process may have been cloned while the program
 * held a libc lock), reads its /proc files as record does. */
#ifndef HEAPTRAIL_COMMON_READSMALL_H
#define HEAPTRAIL_COMMON_READSMALL_H

#include <fcntl.h>
#include <stddef.h>
#include <unistd.h>

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
