/* A program that limits its own address space (setrlimit(RLIMIT_AS), as
 * sandboxes and test harnesses do) to 1 GiB, then allocates 800 MiB, which
 * fits (it checks that it has less than 200 MiB mapped before, by its own
 * count that leaves out the recorder's reservation): untraced it
 * succeeds, and it must traced too (src/preload/rlimit.c).  It reads the limit back with
 * getrlimit and prlimit, which must give what it set, then lowers only the
 * soft limit and reads again.
 *   malloc 1 (800 MiB, succeeds), free 1; exit 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tp.h"

/* Bytes of address space mapped now, the biggest mapping left out (the
 * recorder's reservation when traced), from /proc/self/maps read with
 * read(2): no stdio. */
static uint64_t mapped(void)
{
	static char buf[1 << 16];
	int fd = open("/proc/self/maps", O_RDONLY);
	TP_CHECK(fd >= 0);
	size_t n = 0;
	ssize_t got;
	while (n < sizeof(buf) - 1 && (got = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)got;
	close(fd);
	buf[n] = 0;
	uint64_t sum = 0, top = 0;
	for (char *p = buf; *p;) {
		char *end;
		uint64_t lo = strtoull(p, &end, 16), hi = strtoull(end + 1, NULL, 16);
		sum += hi - lo;
		top = hi - lo > top ? hi - lo : top;
		char *nl = strchr(p, '\n');
		if (!nl)
			break;
		p = nl + 1;
	}
	return sum - top;
}

int main(void)
{
	const uint64_t mib = 1 << 20;
	TP_CHECK(mapped() < 200 * mib);
	struct rlimit want = {1024 * mib, RLIM_INFINITY}, got;
	TP_CHECK(setrlimit(RLIMIT_AS, &want) == 0);
	TP_CHECK(getrlimit(RLIMIT_AS, &got) == 0);
	TP_CHECK(got.rlim_cur == want.rlim_cur && got.rlim_max == want.rlim_max);
	TP_CHECK(prlimit(0, RLIMIT_AS, NULL, &got) == 0);
	TP_CHECK(got.rlim_cur == want.rlim_cur && got.rlim_max == want.rlim_max);
	char *big = tp_keep(malloc(800 * mib));
	if (!big) {
		tp_write(2, "aslimit: malloc(800 MiB) failed under the program's own limit\n");
		return 1;
	}
	big[0] = big[800 * mib - 1] = 1;
	free(big);
	/* the soft limit lowered again, by prlimit: read back as set */
	struct rlimit lower = {want.rlim_cur - 64 * mib, RLIM_INFINITY};
	TP_CHECK(prlimit(getpid(), RLIMIT_AS, &lower, &got) == 0);
	TP_CHECK(got.rlim_cur == want.rlim_cur);
	TP_CHECK(getrlimit(RLIMIT_AS, &got) == 0);
	TP_CHECK(got.rlim_cur == lower.rlim_cur && got.rlim_max == RLIM_INFINITY);
	/* a soft limit above the hard one: EINVAL, as untraced */
	struct rlimit bad = {2048 * mib, 1024 * mib};
	TP_CHECK(setrlimit(RLIMIT_AS, &bad) == -1);
	tp_write(1, "aslimit: ok\n");
	return 0;
}
