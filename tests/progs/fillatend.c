/* A program that fills the disk its trace is on just before it exits, so
 * that the recorder's last writes at the close (the index) find no room.
 *
 *   fillatend N SYNCS FILLER
 *
 * Makes N malloc/free pairs in SYNCS rounds, each written out by the
 * recorder as a chunk of its own (heaptrail_sync: an index of SYNCS
 * entries, more than the last page of the file holds), stops the
 * recording (heaptrail_stop: no event after it), then writes zeros to
 * FILLER (a file on the trace's file system) until the disk is full, and
 * exits 0 with the filler left in place.  Prints "pairs N" and "filled
 * BYTES".  Checked by tests/e2e/cases_reliability.py (index_disk_full). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heaptrail.h"
#include "tp.h"

static char zeros[1 << 16];

int main(int argc, char **argv)
{
	TP_CHECK(argc == 4);
	unsigned long n = tp_atoul(argv[1]), syncs = tp_atoul(argv[2]);
	TP_CHECK(heaptrail_sync && heaptrail_stop);
	TP_CHECK(syncs > 0);
	for (unsigned long r = 0, i = 0; r < syncs; r++) {
		for (; i < n / syncs * (r + 1) || (r == syncs - 1 && i < n); i++)
			free(tp_keep(malloc(16 + i % 512)));
		heaptrail_sync();
	}
	heaptrail_stop();
	printf("pairs %lu\n", n);
	fflush(stdout);
	int fd = open(argv[3], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	TP_CHECK(fd >= 0);
	unsigned long long filled = 0;
	size_t len = sizeof(zeros);
	for (;;) {
		ssize_t w = write(fd, zeros, len);
		if (w > 0) {
			filled += (unsigned long long)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		TP_CHECK(w == 0 || errno == ENOSPC);
		if (len == 1)
			break;
		len = len > 4096 ? 4096 : 1; /* the last pages, then the last bytes */
	}
	TP_CHECK(close(fd) == 0);
	printf("filled %llu\n", filled);
	fflush(stdout);
	return 0;
}
