/* libFuzzer target for the converter (src/replay/converter.c, behind
 * `heaptrail convert`): a trace becomes a workload.
 *
 * Each input is taken as a whole .ht file: it is written to a memfd and
 * opened through /proc/self/fd/N with ht_reader__open, as fuzz_reader.c
 * does; whatever the reader delivers is converted with ht_convert__run
 * into a workload in a private directory of /dev/shm (or $TMPDIR), once
 * without and once with --mmap.  Beyond "no crash, no hang, no
 * leak", it checks what holds for any input:
 *
 *   - a failed conversion leaves one line in err and no file at all in
 *     the output directory (neither the workload nor its temporary);
 *   - a conversion that succeeds writes a workload that the loader
 *     (ht_workload__load: every op checked, the run simulated once)
 *     accepts: whatever the trace says, the converter never writes a
 *     workload that replay would refuse or could not run safely;
 *   - the loaded workload has the threads, ops, slots, ideal peak, calls
 *     and mmap flag the converter's summary announced.
 *
 * A broken promise aborts, which libFuzzer reports like a crash.  At most
 * FUZZ_MAX_EVENTS events of one input are converted (a prefix converts to
 * a workload as well), so that every input runs in bounded time.
 *
 * Build (clang): see tests/fuzz/run.sh (`run.sh convert`) or
 * tests/fuzz/CMakeLists.txt.  Without clang, tests/fuzz/run_corpus.c runs
 * the same function over the corpus and the saved regressions (ctest
 * fuzz.convert_corpus). */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_input.h"
#include "replay/converter.h"
#include "replay/workload.h"
#include "trace/format.h"
#include "trace/reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_EVENTS (1u << 20)

static void broken(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_convert: broken converter promise: %s%s%s\n", what,
		detail ? ": " : "", detail ? detail : "");
	abort();
}

static char out_dir[256];
static char out_path[300];

static void setup(void)
{
	input_open("ht-fuzz-convert");
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
	snprintf(out_dir, sizeof(out_dir), "%s/ht-fuzz-convert-XXXXXX", base ? base : "/tmp");
	if (!mkdtemp(out_dir)) {
		perror("fuzz_convert: mkdtemp");
		exit(2);
	}
	snprintf(out_path, sizeof(out_path), "%s/out.wl", out_dir);
}

/* Files in the output directory (the workload, or a temporary). */
static int files_left(char *name, size_t len)
{
	DIR *d = opendir(out_dir);
	if (!d)
		broken("the output directory vanished", out_dir);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' && (!de->d_name[1] || !strcmp(de->d_name, "..")))
			continue;
		if (!n)
			snprintf(name, len, "%s", de->d_name);
		n++;
	}
	closedir(d);
	return n;
}

static void one_line(const char *err, size_t cap, const char *what)
{
	if (!memchr(err, 0, cap) || !err[0] || strchr(err, '\n'))
		broken(what, err);
}

static void check_workload(const struct ht_convert_summary *s, int mmap)
{
	char err[1024];
	memset(err, 0x5a, sizeof(err));
	struct ht_workload *w = ht_workload__load(out_path, err, sizeof(err));
	if (!w) {
		one_line(err, sizeof(err), "the loader's message");
		broken("the loader refuses the converter's workload", err);
	}
	if (w->nthreads != s->threads || w->nops != s->ops || w->nslots != s->slots ||
	    w->ideal_peak_bytes != s->peak || memcmp(w->calls, s->calls, sizeof(w->calls)) ||
	    !!(w->flags & HT_WL_F_MMAP) != !!mmap)
		broken("the workload differs from the summary", NULL);
	uint64_t sum = 0;
	for (uint32_t i = 0; i < w->nthreads; i++)
		sum += w->threads[i].nops;
	if (sum != s->ops || s->ops != s->ncalls + s->waits + s->spawns ||
	    s->spawns != s->threads - 1u)
		broken("op counts do not add up", NULL);
	ht_workload__free(w);
}

static void convert(int mmap)
{
	char err[1024], name[256];
	memset(err, 0x5a, sizeof(err));
	struct ht_reader *r = ht_reader__open(input_path, err, sizeof(err));
	if (!r) {
		one_line(err, sizeof(err), "a failed open without a one-line message");
		return;
	}
	struct ht_convert_opts o = {.mmap = mmap, .max_events = FUZZ_MAX_EVENTS};
	struct ht_convert_summary s;
	memset(err, 0x5a, sizeof(err));
	int rc = ht_convert__run(r, input_path, out_path, &o, &s, err, sizeof(err));
	if (rc) {
		one_line(err, sizeof(err), "a failed conversion without a one-line message");
		if (!strstr(err, input_path) && !strstr(err, out_path))
			broken("the message names neither the trace nor the workload", err);
		if (files_left(name, sizeof(name)))
			broken("a failed conversion left a file behind", name);
	} else {
		if (s.events > FUZZ_MAX_EVENTS || (s.stopped && s.events != FUZZ_MAX_EVENTS))
			broken("read past max_events", NULL);
		check_workload(&s, o.mmap);
		if (unlink(out_path))
			broken("no workload where the conversion wrote it", out_path);
		if (files_left(name, sizeof(name)))
			broken("a temporary is left next to the workload", name);
	}
	ht_reader__close(r);
}

/* ---- made-up event sequences ----
 *
 * Byte mutations of a trace rarely survive the reader's checks and zstd,
 * so an input that does not start with the trace magic is read as a
 * script of events fed straight to the converter (ht_converter__event):
 * the sequences the reader would deliver from a trace that says odd
 * things, and worse.  Per event: a byte for the kind, a byte for the
 * thread (low 3 bits: main or one of 7 others) and the realloc/mremap
 * part, then a byte per field of the kind.  Addresses come from small
 * pools (16 heap blocks, 16 pages of maps, NULL, -1), so that blocks are
 * freed twice, reused while live, freed by threads that never started,
 * unmapped in pieces and remapped over each other. */

#define MAIN_TID 1000u

static const uint8_t script_kinds[] = {
	HT_EV_MALLOC, HT_EV_FREE, HT_EV_CALLOC, HT_EV_REALLOC, HT_EV_REALLOCARRAY,
	HT_EV_MEMALIGN, HT_EV_POSIX_MEMALIGN, HT_EV_ALIGNED_ALLOC, HT_EV_VALLOC, HT_EV_PVALLOC,
	HT_EV_MALLOPT, HT_EV_MALLOC_TRIM, HT_EV_MMAP, HT_EV_MUNMAP, HT_EV_MREMAP,
	HT_EV_THREAD_START, HT_EV_THREAD_EXIT, HT_EV_SBRK, HT_EV_MARK,
};

static uint32_t script_tid(uint8_t b)
{
	return (b & 7) ? 2000u + (b & 7) : MAIN_TID;
}

static uint64_t script_field(int kind, char code, uint8_t b)
{
	int map = kind == HT_EV_MMAP || kind == HT_EV_MUNMAP || kind == HT_EV_MREMAP;
	if (kind == HT_EV_THREAD_START)
		return (b & 8) ? 0 : script_tid(b);
	switch (code) {
	case 'p':
		if (!(b & 15))
			return (b & 16) ? UINT64_MAX : 0;
		return (map ? 0x7f0000000000ull : 0x10000ull) + (uint64_t)(b & 15) * 0x1000;
	case 'u':
		if (map)
			return (uint64_t)(b & 7) * 4096 + ((b & 8) ? 100 : 0);
		return (b & 0x80) ? (uint64_t)(b & 0x7f) << 20 : b;
	case 's':
		return (b & 0x80) ? (uint64_t) - (int64_t)(b & 3) : b;
	default:
		return b;
	}
}

static void convert_script(const uint8_t *data, size_t size, int mmap)
{
	char err[1024], name[256];
	struct ht_convert_summary s;
	memset(err, 0x5a, sizeof(err));
	struct ht_converter *cv = ht_converter__open(out_path, mmap, MAIN_TID, err, sizeof(err));
	if (!cv)
		broken("cannot open the workload", err);
	const uint8_t *p = data, *end = data + size;
	uint64_t seq = 0;
	while (end - p >= 2) {
		struct ht_event e;
		memset(&e, 0, sizeof(e));
		e.kind = script_kinds[p[0] % sizeof(script_kinds)];
		e.tid = script_tid(p[1]);
		if (e.kind == HT_EV_REALLOC || e.kind == HT_EV_REALLOCARRAY || e.kind == HT_EV_MREMAP)
			e.part = (uint8_t)((p[1] >> 3) % 3);
		e.seq = seq;
		e.time_ns = seq++;
		e.weight = 1;
		p += 2;
		for (const char *f = ht_kind_descs[e.kind].fields; *f && p < end; f++) {
			if (*f == 'S') {
				e.str = "mark";
				continue;
			}
			e.v[e.nv++] = script_field(e.kind, *f, *p++);
		}
		ht_converter__event(cv, &e);
	}
	struct ht_trace_info info;
	memset(&info, 0, sizeof(info));
	info.pid = (int32_t)MAIN_TID;
	memset(err, 0x5a, sizeof(err));
	if (ht_converter__close(cv, "script", &info, &s, err, sizeof(err))) {
		one_line(err, sizeof(err), "a failed close without a one-line message");
		if (files_left(name, sizeof(name)))
			broken("a failed conversion left a file behind", name);
		return;
	}
	check_workload(&s, mmap);
	if (unlink(out_path) || files_left(name, sizeof(name)))
		broken("no workload, or a temporary next to it", out_path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (input_fd < 0)
		setup();
	if (size < 8 || memcmp(data, HT_MAGIC, 8)) {
		convert_script(data, size, 0);
		convert_script(data, size, 1);
		return 0;
	}
	put_input(data, size);
	convert(0);
	convert(1);
	return 0;
}
