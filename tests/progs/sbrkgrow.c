/* The main heap grows by the break and shrinks when glibc trims its top:
 * 64 blocks of 60 KiB (under the mmap threshold), then freed newest first.
 * The program watches the break after every call (sbrk(0)) and says what
 * it saw: start_brk (from /proc/self/stat), the bytes the break was
 * raised and lowered by, and where it ended.  Usage: sbrkgrow.
 * Checked by tests/e2e/cases_heap.py. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "tp.h"

#define N 64

static unsigned long long start_brk(void)
{
	static char buf[4096];
	int fd = open("/proc/self/stat", O_RDONLY);
	TP_CHECK(fd >= 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	TP_CHECK(n > 0);
	buf[n] = 0;
	char *s = strrchr(buf, ')'); /* after "pid (comm", whatever comm holds */
	TP_CHECK(s && s[1] == ' ');
	s += 2; /* field 3 */
	for (int field = 3; *s && field < 47; s++)
		if (*s == ' ')
			field++;
	return strtoull(s, NULL, 10);
}

static unsigned long long raised, lowered;
static uintptr_t last;

static void watch(void)
{
	uintptr_t b = (uintptr_t)sbrk(0);
	if (b > last)
		raised += b - last;
	else
		lowered += last - b;
	last = b;
}

int main(void)
{
	unsigned long long sb = start_brk();
	last = (uintptr_t)sb;
	watch(); /* whatever moved it before main */
	char *p[N];
	for (int i = 0; i < N; i++) {
		p[i] = tp_keep(malloc(60 * 1024));
		TP_CHECK(p[i]);
		p[i][0] = 1;
		watch();
	}
	for (int i = N - 1; i >= 0; i--) {
		free(p[i]);
		watch();
	}
	tp_say_num("start_brk", sb);
	tp_say_num("raised", raised);
	tp_say_num("lowered", lowered);
	tp_say_num("end", (unsigned long long)last - sb);
	return 0;
}
