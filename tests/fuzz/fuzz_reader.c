/* libFuzzer target for the trace reader (src/trace/reader.c).
 *
 * Each input is taken as a whole .ht file: it is written to a memfd, opened
 * through /proc/self/fd/N with ht_reader__open, read to the end with
 * ht_reader__next, and closed.  Every event goes through the accessors the
 * analyzers use (ht_event__size, __result_ptr, __old_ptr, __frees_old, the
 * part helpers), and the reader's promises that do not depend on the input
 * being valid are checked: a failed open fills err, events are well formed
 * (kind, value count, string), errors read "offset N: ...".  A broken
 * promise aborts, which libFuzzer reports like a crash.
 *
 * With HT_FUZZ_STRICT_COUNT=1 in the environment one more promise is
 * checked: a read that ends without an error and without a warning has
 * delivered every event the chunks announce (calls counted once, a split
 * realloc's RELEASE part not counted), i.e. no event was dropped silently
 * (tests/fuzz/regressions/logic-*).  fuzz.corpus sets it; run.sh too.
 *
 * Each input is read three times: by the serial reader (-j 1), with three
 * decoding threads (src/trace/reader_par.c), and serially without the fast
 * loops for row and column-coded chunks (ht_read_fast_path = 0,
 * HEAPTRAIL_READ_FAST_PATH=0);
 * the events (every field), the error and the warning must be the same.
 *
 * Build (clang): see tests/fuzz/run.sh or tests/fuzz/CMakeLists.txt.
 * Without clang, tests/fuzz/run_corpus.c runs the same function over the
 * corpus and the saved regressions. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_input.h"
#include "common/util.h"
#include "trace/reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Events read from one input at most: a 4 MiB chunk of 2-byte records
 * decodes to 2M events, and an index may list it many times.  Past this
 * the input is read no further (the rest is the same code again). */
#define FUZZ_MAX_EVENTS (4u << 20)

static void broken(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_reader: broken reader promise: %s%s%s\n", what,
		detail ? ": " : "", detail ? detail : "");
	abort();
}

static volatile uint64_t sink; /* keeps the accessor calls */
static int strict_count = -1;  /* HT_FUZZ_STRICT_COUNT, read once */

static void check_event(const struct ht_event *ev)
{
	if (!ht_kind_is_event(ev->kind))
		broken("event of a kind that is no event", ht_kind_name(ev->kind));
	if (ev->nv < 0 || ev->nv > HT_MAX_FIELDS)
		broken("value count out of range", NULL);
	if (ev->part > HT_PART_ACQUIRE)
		broken("unknown part", NULL);
	if (ev->str && strnlen(ev->str, HT_MAX_STR + 1) > HT_MAX_STR)
		broken("string field longer than HT_MAX_STR", NULL);
	const char *fields = ht_kind_descs[ev->kind].fields;
	int nvals = 0, has_str = 0;
	for (const char *c = fields; *c; c++)
		if (*c == 'S')
			has_str = 1;
		else
			nvals++;
	if (ev->nv != nvals)
		broken("value count differs from the kind's descriptor", ht_kind_name(ev->kind));
	if (has_str != (ev->str != NULL))
		broken("string present iff the kind has an 'S' field", ht_kind_name(ev->kind));
	if (!ht_kind_descs[ev->kind].is_alloc && ev->usable)
		broken("usable size on a kind that hands out no heap block", ht_kind_name(ev->kind));
	if (ht_kind_parse(ht_kind_name(ev->kind)) != ev->kind)
		broken("kind name does not parse back", ht_kind_name(ev->kind));

	uint64_t x = ht_event__size(ev);
	x ^= ht_event__result_ptr(ev);
	x ^= ht_event__old_ptr(ev);
	x ^= (uint64_t)ht_event__frees_old(ev);
	x ^= (uint64_t)ht_event__is_call(ev) << 1;
	x ^= (uint64_t)ht_event__release_now(ev) << 2;
	x ^= (uint64_t)ht_event__acquire_now(ev) << 3;
	x ^= ev->usable ^ ev->duration ^ ev->time_ns;
	if (ev->str)
		x ^= strlen(ev->str);
	sink ^= x;
}

static void check_message(const char *what, const char *msg, int want_offset)
{
	if (!msg)
		return;
	size_t n = strnlen(msg, 4096);
	if (n == 0 || n >= 4096)
		broken(what, "empty or unterminated message");
	if (want_offset && strncmp(msg, "offset ", 7) != 0)
		broken("error does not start with \"offset N:\"", msg);
}

/* A hash of every field of an event, its string and its stack's path. */
static uint64_t event_hash(uint64_t h, const struct ht_event *e, const struct ht_reader *r)
{
	uint64_t f[] = {e->kind, e->flags, e->tid, e->seq, e->ts, e->time_ns, (uint64_t)e->nv,
			e->usable, e->duration, e->part, e->ts_taken, e->stack, e->weight};
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		h = (h ^ f[i]) * 0x100000001b3ull;
	for (int i = 0; i < e->nv && i < HT_MAX_FIELDS; i++)
		h = (h ^ e->v[i]) * 0x100000001b3ull;
	for (const char *s = e->str; s && *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	for (uint32_t n = e->stack, k = 0; n && k < 64; n = ht_reader__node_parent(r, n), k++)
		h = (h ^ ht_reader__node_ip(r, n) ^ (uint64_t)ht_reader__node_module(r, n) << 48) *
		    0x100000001b3ull;
	return h;
}

static int one_read(uint64_t *hash, char *msgs, size_t msglen);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	put_input(data, size);
	uint64_t h1 = 0, h3 = 0, h0 = 0;
	char m1[1100], m3[1100], m0[1100];
	ht_threads = 1;
	ht_read_fast_path = 1;
	int opened = one_read(&h1, m1, sizeof(m1));
	ht_threads = 3;
	if (one_read(&h3, m3, sizeof(m3)) != opened || h1 != h3)
		broken("the decoding threads read other events than the serial reader", NULL);
	if (strcmp(m1, m3) != 0)
		broken("the decoding threads say other messages than the serial reader", m3);
	/* every record without the fast loops */
	ht_threads = 1;
	ht_read_fast_path = 0;
	if (one_read(&h0, m0, sizeof(m0)) != opened || h1 != h0)
		broken("the fast loops read other events than the general decoding", NULL);
	if (strcmp(m1, m0) != 0)
		broken("the fast loops say other messages than the general decoding", m0);
	return 0;
}

/* Reads the input to the end (or FUZZ_MAX_EVENTS): 1 if it opened; the
 * events' hash in *hash, the error and warning in msgs. */
static int one_read(uint64_t *hash, char *msgs, size_t msglen)
{
	char err[512];
	memset(err, 0x5a, sizeof(err));
	struct ht_reader *r = ht_reader__open(input_path, err, sizeof(err));
	if (!r) {
		if (!memchr(err, 0, sizeof(err)) || err[0] == 0)
			broken("open failed without a message", NULL);
		snprintf(msgs, msglen, "%s", err);
		return 0;
	}

	const struct ht_trace_info *in = ht_reader__info(r);
	if (!in->cmdline || !in->exe)
		broken("info strings are NULL", NULL);
	sink ^= strlen(in->cmdline) + strlen(in->exe) + in->duration_ns + in->nthreads;
	sink ^= ht_reader__ts_to_ns(r, 0);

	struct ht_event ev;
	uint64_t n = 0, calls = 0;
	while (n < FUZZ_MAX_EVENTS && ht_reader__next(r, &ev)) {
		check_event(&ev);
		*hash = event_hash(*hash, &ev, r);
		n++;
		calls += ht_event__is_call(&ev);
	}
	if (n < FUZZ_MAX_EVENTS && ht_reader__next(r, &ev))
		broken("next yields an event after it said the end", NULL);

	const char *error = ht_reader__error(r), *warning = ht_reader__warning(r);
	check_message("error", error, 1);
	check_message("warning", warning, 0);
	if (strict_count < 0) {
		const char *e = getenv("HT_FUZZ_STRICT_COUNT");
		strict_count = e && *e && strcmp(e, "0") != 0;
	}
	if (strict_count && !error && !warning && n < FUZZ_MAX_EVENTS &&
	    calls != in->events_chunks) {
		char msg[128];
		snprintf(msg, sizeof(msg), "%llu events delivered, the chunks announce %llu",
			 (unsigned long long)calls, (unsigned long long)in->events_chunks);
		broken("events dropped without an error or a warning", msg);
	}

	uint64_t done, total;
	ht_reader__progress(r, &done, &total);
	const uint64_t *t, *v;
	size_t ns = ht_reader__rss_samples(r, &t, &v);
	for (size_t i = 0; i < ns; i++)
		sink ^= t[i] ^ v[i];
	sink ^= done ^ total ^ n;
	snprintf(msgs, msglen, "%s|%s", error ? error : "", warning ? warning : "");

	ht_reader__close(r);
	return 1;
}
