/* The perf map of a JIT (perfmap.h): its entries sorted by start address,
 * each with its line number; a lookup takes the entries that start at or
 * below the address, back as far as the longest entry reaches (4096 at
 * most), and keeps the latest line that covers it. */
#define _GNU_SOURCE
#include "symbols/perfmap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct pm_entry {
	uint64_t start, end; /* [start, end) */
	uint32_t line;       /* its line: the later wins */
	uint32_t name;       /* offset in names */
};

struct ht_perfmap {
	struct pm_entry *e;
	size_t n;
	uint64_t longest; /* the largest end - start */
	char *names;      /* NUL-terminated names, one after the other */
};

/* A hex number at *p (an optional 0x first): 1 and p moved past it, or 0. */
static int hex(const char **p, const char *end, uint64_t *v)
{
	const char *q = *p;
	if (end - q >= 2 && q[0] == '0' && (q[1] == 'x' || q[1] == 'X'))
		q += 2;
	uint64_t x = 0;
	int digits = 0;
	for (; q < end; q++) {
		int d;
		if (*q >= '0' && *q <= '9')
			d = *q - '0';
		else if (*q >= 'a' && *q <= 'f')
			d = *q - 'a' + 10;
		else if (*q >= 'A' && *q <= 'F')
			d = *q - 'A' + 10;
		else
			break;
		if (++digits > 16)
			return 0;
		x = x << 4 | (uint64_t)d;
	}
	if (!digits)
		return 0;
	*p = q;
	*v = x;
	return 1;
}

static int by_start(const void *a, const void *b)
{
	const struct pm_entry *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

struct ht_perfmap *ht_perfmap__parse(const char *buf, size_t len)
{
	struct ht_perfmap *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	/* at most one entry per line, and the names are no longer than the text */
	size_t lines = 1;
	for (size_t i = 0; i < len; i++)
		lines += buf[i] == '\n';
	m->e = malloc(lines * sizeof(*m->e));
	m->names = malloc(len + 1);
	if (!m->e || !m->names) {
		ht_perfmap__free(m);
		return NULL;
	}
	size_t used = 0;
	uint32_t line = 0;
	for (const char *p = buf, *end = buf + len; p < end; line++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end, *q = p;
		p = nl ? nl + 1 : end;
		uint64_t start, size;
		if (!hex(&q, eol, &start) || q >= eol || *q != ' ')
			continue;
		while (q < eol && *q == ' ')
			q++;
		if (!hex(&q, eol, &size) || q >= eol || *q != ' ' || !size ||
		    size > UINT64_MAX - start)
			continue;
		q++;
		const char *ne = eol;
		while (ne > q && (ne[-1] == '\r' || ne[-1] == ' '))
			ne--;
		if (ne == q || memchr(q, 0, (size_t)(ne - q)))
			continue; /* no name, or one with a NUL */
		struct pm_entry *e = &m->e[m->n++];
		e->start = start;
		e->end = start + size;
		e->line = line;
		e->name = (uint32_t)used;
		memcpy(m->names + used, q, (size_t)(ne - q));
		used += (size_t)(ne - q);
		m->names[used++] = 0;
		if (size > m->longest)
			m->longest = size;
	}
	qsort(m->e, m->n, sizeof(*m->e), by_start);
	return m;
}

struct ht_perfmap *ht_perfmap__load(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > (off_t)1 << 30) {
		snprintf(err, errlen, "%s", S_ISREG(st.st_mode) ? "larger than 1 GiB"
								  : "not a regular file");
		close(fd);
		return NULL;
	}
	size_t len = (size_t)st.st_size, got = 0;
	char *buf = malloc(len ? len : 1);
	while (buf && got < len) {
		ssize_t r = read(fd, buf + got, len - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (!buf) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	/* (a JIT still writing it: what is there) */
	struct ht_perfmap *m = ht_perfmap__parse(buf, got);
	free(buf);
	if (!m)
		snprintf(err, errlen, "out of memory");
	return m;
}

void ht_perfmap__free(struct ht_perfmap *m)
{
	if (!m)
		return;
	free(m->e);
	free(m->names);
	free(m);
}

size_t ht_perfmap__count(const struct ht_perfmap *m)
{
	return m ? m->n : 0;
}

const char *ht_perfmap__lookup(const struct ht_perfmap *m, uint64_t addr)
{
	if (!m || !m->n)
		return NULL;
	/* the last entry that starts at or below addr */
	size_t a = 0, b = m->n;
	while (a < b) {
		size_t mid = a + (b - a) / 2;
		if (m->e[mid].start <= addr)
			a = mid + 1;
		else
			b = mid;
	}
	const struct pm_entry *best = NULL;
	/* (at most 4096 entries back: a map of huge entries that overlap
	 * others answers from the nearest) */
	for (size_t i = a, k = 0; i-- > 0 && k < 4096; k++) {
		const struct pm_entry *e = &m->e[i];
		if (addr - e->start >= m->longest)
			break; /* (no entry this far down reaches addr) */
		if (addr < e->end && (!best || e->line > best->line))
			best = e;
	}
	return best ? m->names + best->name : NULL;
}
