/* The fuzz targets that read a file by name (the trace reader, the
 * converter) get each input through one memfd for the whole run,
 * rewritten for every input and opened as /proc/self/fd/N. */
#ifndef HEAPTRAIL_FUZZ_INPUT_H
#define HEAPTRAIL_FUZZ_INPUT_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static int input_fd = -1;     /* the memfd, once made */
static char input_path[64];   /* its name to open */

/* Makes the memfd (name: what perror messages and /proc show). */
static void input_open(const char *name)
{
	input_fd = memfd_create(name, MFD_CLOEXEC);
	if (input_fd < 0) {
		perror("memfd_create");
		exit(2);
	}
	snprintf(input_path, sizeof(input_path), "/proc/self/fd/%d", input_fd);
}

/* The memfd's content becomes data (opened first if need be). */
static void put_input(const uint8_t *data, size_t size)
{
	if (input_fd < 0)
		input_open("ht-fuzz-input");
	if (ftruncate(input_fd, 0) < 0) {
		perror("fuzz input: ftruncate");
		exit(2);
	}
	for (size_t done = 0; done < size;) {
		ssize_t k = pwrite(input_fd, data + done, size - done, (off_t)done);
		if (k <= 0) {
			perror("fuzz input: pwrite");
			exit(2);
		}
		done += (size_t)k;
	}
}
#endif
