/* A program that damages its own trace while it is recorded, the way a
 * stray write, a bad disk or a second writer would: the trace record
 * reports must be read back from the disk, not taken from the recorder's
 * counters.
 *
 *   scribble N TRACE [child]
 *
 * Makes N malloc/free pairs, has the recorder write them out
 * (heaptrail_sync), overwrites the magic number of the last event chunk in
 * its trace (TRACE, the -o given to record) with "SCRB", makes N more pairs and exits 0.
 * Prints "damaged: OFFSET" (that chunk's offset in the file).  With
 * "child", a fork child does all that to its own trace
 * (TRACE.PID), and the program waits for it.
 * Checked by tests/e2e/cases_reliability.py (record_damaged_trace). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heaptrail.h"
#include "tp.h"
#include "../../src/trace/format.h"

static void pairs(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		free(tp_keep(malloc(16 + i % 512)));
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 3 || (argc == 4 && !strcmp(argv[3], "child")));
	unsigned long n = tp_atoul(argv[1]);
	const char *path = argv[2];
	TP_CHECK(heaptrail_sync);
	char own[4096];
	snprintf(own, sizeof(own), "%s", path);
	if (argc == 4) {
		free(tp_keep(malloc(10)));
		pid_t pid = fork();
		TP_CHECK(pid >= 0);
		if (pid > 0) {
			int st;
			TP_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
			return WEXITSTATUS(st);
		}
		snprintf(own, sizeof(own), "%s.%d", path, (int)getpid());
	}
	pairs(n);
	heaptrail_sync();
	int fd = open(own, O_RDWR | O_CLOEXEC);
	TP_CHECK(fd >= 0);
	struct ht_file_header h;
	TP_CHECK(pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h));
	uint64_t off = h.sec[HT_SEC_CHUNKS].offset, last = 0;
	struct ht_chunk_header c;
	while (pread(fd, &c, sizeof(c), (off_t)off) == (ssize_t)sizeof(c) &&
	       c.magic == HT_CHUNK_MAGIC) {
		if (c.type == HT_CHUNK_EVENTS)
			last = off;
		off += sizeof(c) + c.comp_size;
	}
	TP_CHECK(last != 0);
	TP_CHECK(pwrite(fd, "SCRB", 4, (off_t)last) == 4);
	close(fd);
	pairs(n);
	tp_say_num("damaged", last);
	return 0;
}
