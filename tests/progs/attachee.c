/* A target for heaptrail attach (tests/e2e/cases_attach.py): leaks known
 * blocks at known sites while a tracer is attached, and prints its own
 * accounting of them.
 *
 *   prints "ready"                  then waits for a line on stdin
 *   "go"    phase 1: frees a block from before the attach, leaks at five
 *           sites, churns (everything else freed); prints one line per
 *           site "site NAME bytes B blocks N", then "phase1 done"
 *   "next"  phase 2 (the tracer is gone by then): more leaks and churn;
 *           prints "phase2 blocks N bytes B", exits 3
 *
 * Before "go" it leaks 555 bytes and keeps 777 that phase 1 frees: an
 * attach made before "go" must count neither.  Built with frame pointers
 * (the tracer's stacks) and without stdio (no hidden allocations). */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tp.h"

#define NSITES 5

static const char *const site_name[NSITES] = {"leak_small", "leak_calloc", "leak_big",
					       "leak_realloc", "leak_aligned"};
static unsigned long long site_bytes[NSITES], site_blocks[NSITES];
static void *kept[64];
static int nkept;

static void keep(int site, void *p, unsigned long long bytes)
{
	TP_CHECK(p != NULL && nkept < 64);
	kept[nkept++] = tp_keep(p);
	site_bytes[site] += bytes;
	site_blocks[site]++;
}

__attribute__((noinline)) static void leak_small(void)
{
	for (int i = 0; i < 10; i++)
		keep(0, malloc(100), 100);
}

__attribute__((noinline)) static void leak_calloc(void)
{
	for (int i = 0; i < 5; i++)
		keep(1, calloc(4, 250), 1000);
}

__attribute__((noinline)) static void leak_big(void)
{
	for (int i = 0; i < 5; i++)
		keep(2, malloc(200000), 200000); /* mmapped by glibc */
}

__attribute__((noinline)) static void leak_realloc(void)
{
	for (int i = 0; i < 4; i++) {
		void *p = tp_keep(malloc(16));
		keep(3, realloc(p, 3000), 3000);
	}
}

__attribute__((noinline)) static void leak_aligned(void)
{
	for (int i = 0; i < 2; i++) {
		void *p = NULL;
		TP_CHECK(posix_memalign(&p, 64, 512) == 0);
		keep(4, p, 512);
	}
	for (int i = 0; i < 2; i++)
		keep(4, memalign(4096, 1000), 1000);
	keep(4, aligned_alloc(256, 768), 768);
}

__attribute__((noinline)) static void churn(int n)
{
	for (int i = 0; i < n; i++)
		free(tp_keep(malloc((size_t)(i % 500) + 1)));
	for (int i = 0; i < n / 20; i++) {
		void *p = tp_keep(malloc(10));
		p = tp_keep(realloc(p, 100));
		p = tp_keep(realloc(p, 1000));
		free(p);
		free(tp_keep(calloc(3, 33)));
	}
}

/* Reads a line from stdin into buf (without the newline); 0 at EOF. */
static int read_line(char *buf, size_t len)
{
	size_t n = 0;
	for (;;) {
		char c;
		ssize_t r = read(0, &c, 1);
		if (r <= 0)
			return 0;
		if (c == '\n')
			break;
		if (n + 1 < len)
			buf[n++] = c;
	}
	buf[n] = 0;
	return 1;
}

int main(void)
{
	char line[64], num[24];
	void *before = tp_keep(malloc(777));
	tp_keep(malloc(555)); /* leaked before any attach */
	tp_write(1, "ready\n");
	TP_CHECK(read_line(line, sizeof(line)) && !strcmp(line, "go"));

	free(before);
	leak_small();
	leak_calloc();
	leak_big();
	leak_realloc();
	leak_aligned();
	churn(1000);
	for (int s = 0; s < NSITES; s++) {
		tp_write(1, "site ");
		tp_write(1, site_name[s]);
		tp_write(1, " bytes ");
		tp_write(1, tp_utoa(num, site_bytes[s]));
		tp_write(1, " blocks ");
		tp_write(1, tp_utoa(num, site_blocks[s]));
		tp_write(1, "\n");
	}
	tp_write(1, "phase1 done\n");

	TP_CHECK(read_line(line, sizeof(line)) && !strcmp(line, "next"));
	leak_small();
	churn(2000);
	unsigned long long bytes = 0, blocks = 0;
	for (int s = 0; s < NSITES; s++) {
		bytes += site_bytes[s];
		blocks += site_blocks[s];
	}
	tp_write(1, "phase2 blocks ");
	tp_write(1, tp_utoa(num, blocks));
	tp_write(1, " bytes ");
	tp_write(1, tp_utoa(num, bytes));
	tp_write(1, "\n");
	return 3;
}
