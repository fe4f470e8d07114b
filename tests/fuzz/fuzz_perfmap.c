/* libFuzzer target for the perf map parser (src/symbols/perfmap.c: the
 * /tmp/perf-PID.map a JIT writes, which names frames in no module).
 *
 * Each input is taken as a map file.  It is parsed from memory and, when
 * it fits in a temporary file, loaded from that file too.  Beyond "no
 * crash, no hang, no leak", it checks what holds for any input:
 *
 *   - both parses take the same entries and answer every lookup alike;
 *   - no more entries than lines;
 *   - a name found is non-empty, holds no newline, and ends with no
 *     space or carriage return (at every line's first word as an
 *     address, around it, at 0 and at the top of the address space).
 *
 * A broken promise aborts, which libFuzzer reports like a crash.  Without
 * clang, tests/fuzz/run_corpus.c runs the same function over the corpus
 * and the saved regressions (ctest fuzz.perfmap_corpus). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols/perfmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what, uint64_t addr)
{
	fprintf(stderr, "fuzz_perfmap: broken promise: %s (address %#llx)\n", what,
		(unsigned long long)addr);
	abort();
}

static void check_name(const char *n, uint64_t addr)
{
	if (!n)
		return;
	size_t l = strlen(n);
	if (!l || strchr(n, '\n') || n[l - 1] == ' ' || n[l - 1] == '\r')
		broken("a name empty, with a newline, or ending in a space", addr);
}

/* Every start address as the input writes it: the first word of a line. */
static void each_start(const char *buf, size_t len, const struct ht_perfmap *a,
		       const struct ht_perfmap *b)
{
	for (const char *p = buf, *end = buf + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		char word[40];
		size_t n = 0;
		while (p + n < eol && p[n] != ' ' && n < sizeof(word) - 1)
			n++;
		memcpy(word, p, n);
		word[n] = 0;
		char *e;
		uint64_t addr = strtoull(word, &e, 16);
		const char *x = ht_perfmap__lookup(a, addr), *y = b ? ht_perfmap__lookup(b, addr) : x;
		check_name(x, addr);
		if ((x == NULL) != (y == NULL) || (x && strcmp(x, y)))
			broken("the parse from memory and the load from a file disagree", addr);
		for (uint64_t d = 1; d < 4; d++) { /* (around it, too) */
			const char *u = ht_perfmap__lookup(a, addr + d);
			check_name(u, addr + d);
			check_name(ht_perfmap__lookup(a, addr - d), addr - d);
		}
		p = nl ? nl + 1 : end;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct ht_perfmap *a = ht_perfmap__parse(buf, size);
	if (!a)
		return 0;
	size_t lines = 1;
	for (size_t i = 0; i < size; i++)
		lines += buf[i] == '\n';
	if (ht_perfmap__count(a) > lines)
		broken("more entries than lines", 0);
	struct ht_perfmap *b = NULL;
	char path[] = "/tmp/fuzz-perfmap-XXXXXX";
	int fd = mkstemp(path);
	if (fd >= 0) {
		if (write(fd, data, size) == (ssize_t)size) {
			char err[256];
			b = ht_perfmap__load(path, err, sizeof(err));
			if (!b)
				broken("a file written whole does not load", 0);
			if (ht_perfmap__count(b) != ht_perfmap__count(a))
				broken("the parse from memory and the load from a file take different entries", 0);
		}
		close(fd);
		unlink(path);
	}
	each_start(buf, size, a, b);
	check_name(ht_perfmap__lookup(a, 0), 0);
	check_name(ht_perfmap__lookup(a, UINT64_MAX), UINT64_MAX);
	ht_perfmap__free(b);
	ht_perfmap__free(a);
	return 0;
}
