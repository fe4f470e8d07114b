/* Helpers shared by the test programs (tests/progs).
 *
 * The programs must make exactly the heap calls the tests expect, so they
 * avoid stdio until they are done (a FILE buffer is itself a malloc):
 * messages go out with write(2), numbers are formatted by hand, and a
 * failed check ends the program with exit status 99.
 *
 * They are built with -fno-builtin so that the compiler keeps every
 * malloc/free pair, and pass pointers through tp_keep() for good measure. */
#ifndef TP_H
#define TP_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Status a test program exits with when one of its own checks fails. */
#define TP_FAIL_STATUS 99

/* Makes a pointer escape, so that no allocation can be optimised away. */
static inline void *tp_keep(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

static inline void tp_write(int fd, const char *s)
{
	size_t n = strlen(s);
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* Formats v in decimal into buf (at least 24 bytes); returns buf. */
static inline char *tp_utoa(char *buf, unsigned long long v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (int i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	buf[n] = 0;
	return buf;
}

/* Parses a decimal argument; exits with TP_FAIL_STATUS if it is not one. */
static inline unsigned long tp_atoul(const char *s)
{
	unsigned long v = 0;
	if (!s || !*s)
		goto bad;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			goto bad;
		v = v * 10 + (unsigned long)(*s - '0');
	}
	return v;
bad:
	tp_write(2, "tp: bad number argument\n");
	_exit(TP_FAIL_STATUS);
}

/* "name: value\n" on stdout. */
static inline void tp_say_num(const char *name, unsigned long long v)
{
	char buf[24];
	tp_write(1, name);
	tp_write(1, ": ");
	tp_write(1, tp_utoa(buf, v));
	tp_write(1, "\n");
}

#define TP_STR2(x) #x
#define TP_STR(x) TP_STR2(x)

/* A check that does not allocate: on failure, says which line and exits. */
#define TP_CHECK(cond)                                                             \
	do {                                                                       \
		if (!(cond)) {                                                     \
			tp_write(2, __FILE__ ":" TP_STR(__LINE__) ": check failed: " \
				    #cond "\n");                                   \
			_exit(TP_FAIL_STATUS);                                     \
		}                                                                  \
	} while (0)

/* n malloc(size)/free pairs, each block freed at once. */
static inline void tp_pairs(int n, size_t size)
{
	for (int i = 0; i < n; i++) {
		void *p = tp_keep(malloc(size));
		TP_CHECK(p);
		free(p);
	}
}

/* n malloc/free pairs of sizes uniform in 16..4096 from a fixed-seed
 * xorshift64 generator (the benchmark's loop, small), each block written
 * once and freed at once. */
/* n malloc/free pairs of 1 to 4096 bytes, in turn (a thread's body in
 * the programs that count pairs per thread). */
static inline void tp_turn_pairs(long n)
{
	for (long i = 0; i < n; i++)
		free(tp_keep(malloc((size_t)(i % 4096 + 1))));
}

static inline void tp_rand_pairs(unsigned long n)
{
	uint64_t x = 88172645463325252ull;
	for (unsigned long i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		char *p = (char *)tp_keep(malloc(16 + (size_t)(x % 4081)));
		TP_CHECK(p);
		p[0] = (char)i;
		free(p);
	}
}

#endif
