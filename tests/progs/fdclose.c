/* Closes every descriptor above stderr, as daemons and many spawning
 * libraries do, then opens a data file of its own (it gets the lowest free
 * descriptor, maybe the one the tracer wrote to) and writes "hello\n".
 * Usage: fdclose DATAFILE.
 * 10 x malloc(100)/free; sync; close fds >= 3; open DATAFILE; write;
 * 10 x malloc(200)/free; sync; close; exit 0.
 * The data file must hold exactly "hello\n" afterwards. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <heaptrail.h>

#include "tp.h"

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	for (int i = 0; i < 10; i++)
		free(tp_keep(malloc(100)));
	HEAPTRAIL_SYNC(); /* the trace file is open and written to now */
#ifdef SYS_close_range
	if (syscall(SYS_close_range, 3u, ~0u, 0) != 0)
#endif
	{
		struct rlimit rl;
		TP_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
		for (int fd = 3; fd < (int)rl.rlim_cur && fd < 65536; fd++)
			close(fd);
	}
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	TP_CHECK(fd >= 0);
	TP_CHECK(write(fd, "hello\n", 6) == 6);
	for (int i = 0; i < 10; i++)
		free(tp_keep(malloc(200)));
	HEAPTRAIL_SYNC(); /* a tracer that lost its file must not write to ours */
	TP_CHECK(close(fd) == 0);
	return 0;
}
