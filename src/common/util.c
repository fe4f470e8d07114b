/* Messages, number formatting and parsing, progress. */
#define _GNU_SOURCE
#include "util.h"
#include "shellword.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* outfile.c's, where it is linked (not in the fuzz targets): a Ctrl-C
 * that ends the command clears the progress line too */
void ht_out__catch_signals(void) __attribute__((weak));

void ht_error(const char *fmt, ...)
{
	va_list ap;
	fputs("heaptrail: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void ht_warning(const char *fmt, ...)
{
	va_list ap;
	fputs("heaptrail: warning: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* The decimal digits of q, at p; returns their end. */
static char *put_u64(char *p, uint64_t q)
{
	char tmp[24];
	int n = 0;
	do
		tmp[n++] = (char)('0' + q % 10);
	while (q /= 10);
	while (n)
		*p++ = tmp[--n];
	return p;
}

char *ht_fmt_fixed(char *buf, double v, int prec)
{
	static const uint64_t pow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000};
	if (prec < 0 || prec > 6 || !(fabs(v) < 1e12)) /* (NaN fails too) */
		return NULL;
	char *p = buf;
	if (signbit(v)) { /* printf keeps the sign of -0.0 and of what rounds to it */
		*p++ = '-';
		v = -v;
	}
	/* v = m * 2^e exactly; v * 10^prec rounded to the nearest, ties to
	 * even, as glibc does on the exact value */
	int e;
	double fr = frexp(v, &e);
	uint64_t m = (uint64_t)ldexp(fr, 53);
	e -= 53;
	unsigned __int128 x = (unsigned __int128)m * pow10[prec];
	uint64_t q;
	if (e >= 0) {
		q = (uint64_t)(x << e);
	} else if (-e >= 127) {
		q = 0; /* below 2^-50: rounds to zero */
	} else {
		int sh = -e;
		unsigned __int128 one = 1;
		unsigned __int128 rem = x & ((one << sh) - 1), half = one << (sh - 1);
		q = (uint64_t)(x >> sh);
		if (rem > half || (rem == half && (q & 1)))
			q++;
	}
	uint64_t ip = q / pow10[prec], fp = q % pow10[prec];
	p = put_u64(p, ip);
	if (prec) {
		*p++ = '.';
		for (int i = prec - 1; i >= 0; i--, fp /= 10)
			p[i] = (char)('0' + fp % 10);
		p += prec;
	}
	*p = 0;
	return p;
}

void ht_fputf(FILE *f, const char *fmt, ...)
{
	va_list ap;
	char buf[32];
	va_start(ap, fmt);
	for (const char *s = fmt; *s;) {
		const char *pct = strchr(s, '%');
		if (!pct) {
			fputs(s, f);
			break;
		}
		fwrite(s, 1, (size_t)(pct - s), f);
		s = pct + 1;
		if (*s == '.') {
			int prec = s[1] - '0';
			s += 3; /* ".Nf" */
			double v = va_arg(ap, double);
			char *end = ht_fmt_fixed(buf, v, prec);
			if (end)
				fwrite(buf, 1, (size_t)(end - buf), f);
			else
				fprintf(f, "%.*f", prec, v);
		} else if (*s == 'd') {
			s++;
			int v = va_arg(ap, int);
			unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
			char *p = buf;
			if (v < 0)
				*p++ = '-';
			p = put_u64(p, u);
			fwrite(buf, 1, (size_t)(p - buf), f);
		} else if (*s == 'u') {
			s++;
			char *p = put_u64(buf, va_arg(ap, unsigned));
			fwrite(buf, 1, (size_t)(p - buf), f);
		} else if (s[0] == 'l' && s[1] == 'l' && s[2] == 'u') {
			s += 3;
			char *p = put_u64(buf, va_arg(ap, unsigned long long));
			fwrite(buf, 1, (size_t)(p - buf), f);
		} else if (*s == 'c') {
			s++;
			fputc(va_arg(ap, int), f);
		} else if (*s == 's') {
			s++;
			fputs(va_arg(ap, const char *), f);
		} else if (*s == '%') {
			s++;
			fputc('%', f);
		} else {
			break; /* not one of ours: a caller's mistake */
		}
	}
	va_end(ap);
}

const char *ht_fmt_bytes(char *buf, uint64_t b)
{
	static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)b;
	int u = 0;
	while (v >= 1024 && u < 4)
		v /= 1024, u++;
	char *end;
	if (u == 0) {
		end = put_u64(buf, b);
		memcpy(end, " B", 3);
	} else if ((end = ht_fmt_fixed(buf, v, 1))) {
		*end++ = ' ';
		strcpy(end, units[u]);
	} else {
		snprintf(buf, 32, "%.1f %s", v, units[u]);
	}
	return buf;
}

const char *ht_fmt_ns(char *buf, uint64_t ns)
{
	if (ns >= 1000000000ull)
		snprintf(buf, 32, "%.3f s", (double)ns / 1e9);
	else if (ns >= 1000000)
		snprintf(buf, 32, "%.3f ms", (double)ns / 1e6);
	else if (ns >= 1000)
		snprintf(buf, 32, "%.3f us", (double)ns / 1e3);
	else
		snprintf(buf, 32, "%llu ns", (unsigned long long)ns);
	return buf;
}

int ht_parse_duration(const char *s, uint64_t *ns)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || !(v >= 0)) /* (NaN too) */
		return -1;
	double mul = 1e9;
	if (!*end || !strcmp(end, "s"))
		mul = 1e9;
	else if (!strcmp(end, "ms"))
		mul = 1e6;
	else if (!strcmp(end, "us"))
		mul = 1e3;
	else if (!strcmp(end, "ns"))
		mul = 1;
	else if (!strcmp(end, "m") || !strcmp(end, "min"))
		mul = 60e9;
	else if (!strcmp(end, "h"))
		mul = 3600e9;
	else
		return -1;
	if (!(v * mul < 0x1p63)) /* 292 years; inf, 1e400s: no uint64_t holds them */
		return -1;
	*ns = (uint64_t)(v * mul + 0.5);
	return 0;
}

/* Edits from a[0..alen) to b, counted up to 3 (more is 3). */
static unsigned edit_distance(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b);
	if (alen > 62 || blen > 62)
		return 3;
	if ((alen > blen ? alen - blen : blen - alen) >= 3)
		return 3;
	unsigned d[64][64];
	for (size_t i = 0; i <= alen; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= blen; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= alen; i++) {
		for (size_t j = 1; j <= blen; j++) {
			unsigned c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < c)
				c = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < c)
				c = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < c)
				c = d[i - 2][j - 2] + 1;
			d[i][j] = c;
		}
	}
	return d[alen][blen] < 3 ? d[alen][blen] : 3;
}

const char *ht_nearest_name(const char *word, size_t len, const char *const *names, size_t n)
{
	const char *best = NULL;
	unsigned bestd = len >= 5 ? 3 : 2; /* (two edits only in a long word) */
	int ties = 0;
	for (size_t i = 0; i < n; i++) {
		if (!names[i])
			continue;
		unsigned d = edit_distance(word, len, names[i]);
		if (d < bestd) {
			bestd = d;
			best = names[i];
			ties = 0;
		} else if (d == bestd) {
			ties++;
		}
	}
	if (!best || ties) { /* else the only one it begins */
		int k = 0;
		for (size_t i = 0; len >= 2 && i < n; i++)
			if (names[i] && !strncmp(word, names[i], len))
				k++, best = names[i];
		ties = k != 1;
		bestd = 0;
	}
	return best && !ties && bestd < len ? best : NULL;
}

uint64_t ht_hash_str(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001B3ull;
	return (h ^ 0xff) * 0x100000001B3ull;
}

int ht_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s || *s == '-')
		return -1;
	uint64_t mul = 1;
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end)
		return -1;
	*out = v * mul;
	return 0;
}

uint64_t ht_clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ht_progress_off;
int ht_quiet;
int ht_threads = -1;

int ht_parse_threads(const char *s, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < 0 || v > HT_THREADS_MAX)
		return -1;
	*out = (int)v;
	return 0;
}
static volatile sig_atomic_t progress_shown;
static struct timespec progress_start, progress_last;
static long progress_after_ms = -1;

/* 12345678 -> "12.3 M" (buf of 32) */
static const char *fmt_count(char *buf, uint64_t v)
{
	if (v >= 1000000000ull)
		snprintf(buf, 32, "%.1f G", (double)v / 1e9);
	else if (v >= 1000000)
		snprintf(buf, 32, "%.1f M", (double)v / 1e6);
	else if (v >= 1000)
		snprintf(buf, 32, "%.1f k", (double)v / 1e3);
	else
		snprintf(buf, 32, "%llu", (unsigned long long)v);
	return buf;
}

static long ms_between(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1000 + (b->tv_nsec - a->tv_nsec) / 1000000;
}

void ht_progress_start(void)
{
	if (progress_after_ms < 0) {
		const char *e = getenv("HEAPTRAIL_PROGRESS_AFTER");
		progress_after_ms = e && *e ? atol(e) : 1000;
	}
	clock_gettime(CLOCK_MONOTONIC, &progress_start);
}

void ht_progress(const char *what, uint64_t done, uint64_t total, uint64_t items,
		 const char *unit)
{
	static int tty = -1; /* (asked once: the callers come often) */
	if (tty < 0)
		tty = isatty(2);
	if (ht_progress_off || !tty)
		return;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (progress_after_ms < 0)
		ht_progress_start();
	if (ms_between(&progress_start, &now) < progress_after_ms)
		return;
	if (progress_shown && ms_between(&progress_last, &now) < 100)
		return;
	progress_last = now;
	if (!progress_shown && ht_out__catch_signals)
		ht_out__catch_signals(); /* (a Ctrl-C clears the line too) */
	progress_shown = 1;
	/* (to the nanosecond: with no delay the first line comes within a
	 * millisecond of the start, and its rate said 0.0) */
	double secs = (double)(now.tv_sec - progress_start.tv_sec) +
		      (double)(now.tv_nsec - progress_start.tv_nsec) / 1e9;
	char size[32], n[32];
	double pct = total ? 100.0 * (double)done / (double)total : 0;
	fprintf(stderr, "\r\033[K%s: %5.1f%%", what, pct);
	if (unit)
		fprintf(stderr, " of %s", ht_fmt_bytes(size, total));
	if (items && unit)
		fprintf(stderr, ", %s %s, %.1f M/s", fmt_count(n, items), unit,
			secs > 0 ? (double)items / secs / 1e6 : 0.0);
	fflush(stderr);
}

void ht_progress_clear_sig(void)
{
	if (progress_shown) {
		ssize_t r = write(2, "\r\033[K", 4);
		(void)r;
		progress_shown = 0;
	}
}

void ht_progress_done(void)
{
	if (progress_shown && isatty(2))
		fprintf(stderr, "\r\033[K");
	progress_shown = 0;
}

const char *ht_split_path(const char *path, char *dir, size_t cap)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, cap, ".");
	else
		snprintf(dir, cap, "%.*s", slash == path ? 1 : (int)(slash - path), path);
	return slash ? slash + 1 : path;
}

int ht_self_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *slash = strrchr(buf, '/');
	if (!slash)
		return -1;
	*slash = 0;
	return 0;
}

char *ht_read_file_err(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);
	while (buf) {
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (n < cap)
			break;
		if (cap >= max) {
			snprintf(err, errlen, "%s: larger than %zu bytes", path, max);
			goto fail;
		}
		cap = cap * 2 < max ? cap * 2 : max;
		char *nb = realloc(buf, cap + 1);
		if (!nb) {
			snprintf(err, errlen, "cannot read %s: out of memory", path);
			goto fail;
		}
		buf = nb;
	}
	if (!buf || ferror(f)) {
		snprintf(err, errlen, "cannot read %s: %s", path,
			 buf ? strerror(errno) : "out of memory");
		goto fail;
	}
	fclose(f);
	buf[n] = 0;
	*len = n;
	return buf;
fail:
	free(buf);
	fclose(f);
	return NULL;
}

char *ht_read_file(const char *path, size_t max, size_t *len)
{
	char err[1024];
	char *buf = ht_read_file_err(path, max, len, err, sizeof(err));
	if (!buf)
		ht_error("%s", err);
	return buf;
}

void ht_oom(void)
{
	ht_error("out of memory");
	exit(HT_EXIT_DATA);
}

void *ht_xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		ht_oom();
	return p;
}

void *ht_xmalloc(size_t n)
{
	return ht_xrealloc(NULL, n);
}

void *ht_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		ht_oom();
	return p;
}

/* memset, called so that the compiler cannot make malloc + memset a
 * calloc again (gcc -O2 does). */
static void *(*volatile zero_fill)(void *, int, size_t) = memset;

void *ht_xzalloc(size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		ht_oom();
	size_t bytes = n * size;
	if (!bytes)
		bytes = 1;
	void *p = ht_xmalloc(bytes);
	zero_fill(p, 0, bytes);
	return p;
}

char *ht_xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		ht_oom();
	return p;
}

void *ht_grow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return p;
	size_t c = *cap ? *cap : 16;
	while (c < need)
		c *= 2;
	if (c > SIZE_MAX / elem)
		ht_oom();
	p = ht_xrealloc(p, c * elem);
	*cap = c;
	return p;
}

void ht_open_error(char *err, size_t errlen, const char *path, int e, const char *what)
{
	if (!strcmp(path, "-") && e == ENOENT)
		snprintf(err, errlen,
			 "-: no such file; %ss are read from regular files, not from standard "
			 "input: give the %s's file name (./- for a file named '-')",
			 what, what);
	else
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
}

void ht_shell_word_inplace(char *s, size_t cap)
{
	char *copy = strdup(s);
	if (copy)
		ht_shell_word(s, cap, copy);
	free(copy);
}

/* Why writes to standard output failed, when errno is gone: 0 if unknown. */
static int stdout_guess_errno(void)
{
	struct statvfs vfs;
	struct stat st;
	if (fcntl(1, F_GETFD) < 0)
		return EBADF;
	if (fstat(1, &st) < 0)
		return 0;
	/* a full file system, for a file only: a pipe's or a socket's
	 * (pipefs, sockfs) always says no space free */
	if (S_ISREG(st.st_mode) && fstatvfs(1, &vfs) == 0 && vfs.f_bavail == 0)
		return ENOSPC;
	/* /dev/full (character device 1,7) fails every write so */
	if (S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 7)
		return ENOSPC;
	return 0;
}

int ht_stdout_done(int rc)
{
	errno = 0;
	int flushed = fflush(stdout) == 0;
	if (rc != 0 || (flushed && !ferror(stdout)))
		return rc;
	int e = errno;
	if (flushed || !e) /* (failed earlier: the likely why) */
		e = stdout_guess_errno();
	if (e)
		ht_error("cannot write to standard output: %s", strerror(e));
	else
		ht_error("cannot write to standard output: a write failed");
	clearerr(stdout);
	return HT_EXIT_DATA;
}

const char *ht_signal_name(int sig, char *buf)
{
	const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;
	if (abbrev)
		snprintf(buf, 16, "SIG%.12s", abbrev);
	else
		snprintf(buf, 16, "signal %d", sig);
	return buf;
}
