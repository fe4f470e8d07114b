/* Copies stdin to stdout byte for byte, says "passthru: N bytes" on
 * stderr, then ends as told.  Usage: passthru STATUS | passthru -SIGNAL. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "tp.h"

int main(int argc, char **argv)
{
	TP_CHECK(argc == 2);
	char buf[65536];
	unsigned long long total = 0;
	for (;;) {
		ssize_t n = read(0, buf, sizeof(buf));
		if (n == 0)
			break;
		TP_CHECK(n > 0);
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(1, buf + off, (size_t)(n - off));
			TP_CHECK(w > 0);
			off += w;
		}
		total += (unsigned long long)n;
	}
	char num[24];
	tp_write(2, "passthru: ");
	tp_write(2, tp_utoa(num, total));
	tp_write(2, " bytes\n");
	if (argv[1][0] == '-') {
		int sig = (int)tp_atoul(argv[1] + 1);
		signal(sig, SIG_DFL);
		raise(sig);
		return TP_FAIL_STATUS;
	}
	return (int)tp_atoul(argv[1]);
}
