/* heaptrail export --format pprof: a gzipped profile.proto heap profile
 * (github.com/google/pprof, proto/profile.proto) with the sample types of
 * Go's heap profiles, one sample per recorded stack, locations with their
 * inlined frames as several lines, and the trace's modules as mappings.
 *
 * Field numbers used (profile.proto):
 *   Profile   sample_type 1, sample 2, mapping 3, location 4, function 5,
 *             string_table 6, time_nanos 9, duration_nanos 10,
 *             period_type 11, period 12, comment 13, default_sample_type 14
 *   ValueType type 1, unit 2 (string indices)
 *   Sample    location_id 1 (packed, leaf first), value 2 (packed)
 *   Mapping   id 1, memory_start 2, memory_limit 3, file_offset 4,
 *             filename 5, build_id 6, has_functions 7, has_filenames 8,
 *             has_line_numbers 9, has_inline_frames 10
 *   Location  id 1, mapping_id 2, address 3, line 4 (innermost first)
 *   Line      function_id 1, line 2
 *   Function  id 1, name 2, system_name 3, filename 4, start_line 5 */
#define _GNU_SOURCE
#include "export.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "analyze/analyze.h"
#include "analyze/blocks.h"
#include "analyze/stackstats.h"
#include "common/util.h"

#define MAX_DEPTH 256 /* return addresses per stack */

/* An open-addressing map from a 64-bit key to a value (0 = absent). */
struct u64map {
	uint64_t *keys; /* cap entries */
	uint64_t *vals; /* cap entries, 0 = empty slot */
	size_t cap, n;  /* allocated / used */
};

static size_t slot_of(const struct u64map *m, uint64_t key)
{
	size_t k = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (m->cap - 1);
	while (m->vals[k] && m->keys[k] != key)
		k = (k + 1) & (m->cap - 1);
	return k;
}

static void map_grow(struct u64map *m)
{
	struct u64map o = *m;
	m->cap = o.cap ? o.cap * 2 : 1024;
	m->keys = ht_xzalloc(m->cap, sizeof(*m->keys));
	m->vals = ht_xzalloc(m->cap, sizeof(*m->vals));
	for (size_t i = 0; i < o.cap; i++)
		if (o.vals[i]) {
			size_t k = slot_of(m, o.keys[i]);
			m->keys[k] = o.keys[i];
			m->vals[k] = o.vals[i];
		}
	free(o.keys);
	free(o.vals);
}

static uint64_t map_get(const struct u64map *m, uint64_t key)
{
	return m->cap ? m->vals[slot_of(m, key)] : 0;
}

static void map_put(struct u64map *m, uint64_t key, uint64_t val)
{
	if ((m->n + 1) * 2 > m->cap)
		map_grow(m);
	size_t k = slot_of(m, key);
	if (!m->vals[k])
		m->n++;
	m->keys[k] = key;
	m->vals[k] = val;
}

static void map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
}

/* The profile being built: each repeated field of Profile in its own
 * buffer, concatenated at the end. */
struct profile {
	struct ht_pb strings, mappings, locations, functions, samples; /* fields */
	struct ht_pb sub, line;  /* scratch messages */
	char **strs;             /* the string table */
	size_t nstrs, capstrs;   /* count / allocated */
	struct u64map str_ix;    /* hash -> first index + 1 (chained through str_next) */
	uint64_t *str_next;      /* next index + 1 with the same hash, per string */
	struct u64map fn_ix;     /* name << 32 | file -> function id */
	struct u64map loc_ix;    /* ip -> location id, UINT64_MAX = the tracer's own */
	uint64_t nfunctions;     /* ids given */
	uint64_t nlocations;     /* ids given */
	char *name;              /* the last frame name (frame_name), grown as needed */
	size_t namecap;          /* its bytes */
	const struct ht_module *mods; /* the trace's modules */
	size_t nmods;            /* count */
};

static uint64_t str_hash(const char *s)
{
	uint64_t h = ht_hash_str(0xcbf29ce484222325ull, s);
	return h ? h : 1;
}

/* The index of s in the string table, added if new. */
static uint64_t str_of(struct profile *p, const char *s)
{
	uint64_t h = str_hash(s);
	for (uint64_t i = map_get(&p->str_ix, h); i; i = p->str_next[i - 1])
		if (!strcmp(p->strs[i - 1], s))
			return i - 1;
	if (p->nstrs == p->capstrs) {
		p->capstrs = p->capstrs ? p->capstrs * 2 : 1024;
		p->strs = ht_xrealloc(p->strs, p->capstrs * sizeof(*p->strs));
		p->str_next = ht_xrealloc(p->str_next, p->capstrs * sizeof(*p->str_next));
	}
	uint64_t ix = p->nstrs++;
	p->strs[ix] = ht_xstrdup(s);
	p->str_next[ix] = map_get(&p->str_ix, h);
	map_put(&p->str_ix, h, ix + 1);
	ht_pb__str(&p->strings, 6, s);
	return ix;
}

static uint64_t function_of(struct profile *p, const char *name, const char *file)
{
	uint64_t n = str_of(p, name), f = str_of(p, file ? file : "");
	uint64_t key = n << 32 | f, id = map_get(&p->fn_ix, key);
	if (id)
		return id;
	id = ++p->nfunctions;
	map_put(&p->fn_ix, key, id);
	ht_pb__reset(&p->sub);
	ht_pb__uint(&p->sub, 1, id, 1);
	ht_pb__uint(&p->sub, 2, n, 0);
	ht_pb__uint(&p->sub, 3, n, 0);
	ht_pb__uint(&p->sub, 4, f, 0);
	ht_pb__msg(&p->functions, 5, &p->sub);
	return id;
}

static uint64_t mapping_of(const struct profile *p, uint64_t ip)
{
	for (size_t i = 0; i < p->nmods; i++)
		if (ip >= p->mods[i].lo && ip < p->mods[i].hi)
			return i + 1;
	return 0;
}

/* Frame f's name as the other tools give it (ht_blocks__frame_name), and
 * whole: a cut at 1023 bytes made two C++ template functions whose names
 * differ past it one function.  (A function's name comes back as it is:
 * the buffer holds module+0xOFFSET only.) */
static const char *frame_name(struct profile *p, const struct ht_frame *f)
{
	size_t need = (f->module ? strlen(f->module) : 0) + 32; /* (module+0xOFFSET) */
	if (need > p->namecap) {
		p->namecap = need > 2 * p->namecap ? need : 2 * p->namecap;
		p->name = ht_xrealloc(p->name, p->namecap);
	}
	return ht_blocks__frame_name(p->name, p->namecap, f);
}

/* Writes a Location of lines (function ids, lines), innermost first. */
static uint64_t add_location(struct profile *p, uint64_t mapping, uint64_t ip,
			     const uint64_t *fns, const int *lines, size_t n)
{
	uint64_t id = ++p->nlocations;
	ht_pb__reset(&p->sub);
	ht_pb__uint(&p->sub, 1, id, 1);
	ht_pb__uint(&p->sub, 2, mapping, 0);
	ht_pb__uint(&p->sub, 3, ip, 0);
	for (size_t i = 0; i < n; i++) {
		ht_pb__reset(&p->line);
		ht_pb__uint(&p->line, 1, fns[i], 1);
		ht_pb__uint(&p->line, 2, (uint64_t)(int64_t)lines[i], 0);
		ht_pb__msg(&p->sub, 4, &p->line);
	}
	ht_pb__msg(&p->locations, 4, &p->sub);
	return id;
}

/* The location of return address ip of module mod (-1: by address; 0
 * for the tracer's own frames). */
static uint64_t location_of(struct profile *p, struct ht_symbolizer *sym, uint64_t ip, int mod)
{
	/* one location per address and module (user-space addresses are
	 * below 2^48) */
	uint64_t key = ip < ((uint64_t)1 << 48) && mod >= 0 && mod < 0xffff
			       ? ip | (uint64_t)(mod + 1) << 48
			       : ip;
	uint64_t id = map_get(&p->loc_ix, key);
	if (id)
		return id == UINT64_MAX ? 0 : id;
	const struct ht_frame *f;
	size_t nf = ht_symbolizer__resolve_in(sym, ip, mod, &f);
	if (nf && ht_symbols__is_recorder(f[0].module)) {
		map_put(&p->loc_ix, key, UINT64_MAX); /* the tracer's wrappers are noise */
		return 0;
	}
	uint64_t fns[64];
	int lines[64];
	size_t n = 0;
	for (size_t j = 0; j < nf && n < 64; j++, n++) {
		fns[n] = function_of(p, frame_name(p, &f[j]), f[j].file);
		lines[n] = f[j].line;
	}
	id = add_location(p, mod >= 0 ? (uint64_t)mod + 1 : mapping_of(p, ip), ip, fns, lines, n);
	map_put(&p->loc_ix, key, id);
	return id;
}

static void add_mappings(struct profile *p)
{
	for (size_t i = 0; i < p->nmods; i++) {
		const struct ht_module *m = &p->mods[i];
		char bid[2 * sizeof(m->build_id) + 1] = "";
		for (size_t k = 0; k < m->build_id_len && k < sizeof(m->build_id); k++)
			snprintf(bid + 2 * k, 3, "%02x", m->build_id[k]);
		ht_pb__reset(&p->sub);
		ht_pb__uint(&p->sub, 1, i + 1, 1);
		ht_pb__uint(&p->sub, 2, m->lo, 0);
		ht_pb__uint(&p->sub, 3, m->hi, 0);
		ht_pb__uint(&p->sub, 4, 0, 0); /* the first segment maps the file from 0 */
		ht_pb__uint(&p->sub, 5, str_of(p, m->path ? m->path : ""), 0);
		ht_pb__uint(&p->sub, 6, str_of(p, bid), 0);
		for (uint32_t fl = 7; fl <= 10; fl++) /* functions, files, lines, inlines */
			ht_pb__uint(&p->sub, fl, 1, 0);
		ht_pb__msg(&p->mappings, 3, &p->sub);
	}
}

static void value_type(struct profile *p, struct ht_pb *out, uint32_t field, const char *type,
		       const char *unit)
{
	ht_pb__reset(&p->sub);
	ht_pb__uint(&p->sub, 1, str_of(p, type), 0);
	ht_pb__uint(&p->sub, 2, str_of(p, unit), 0);
	ht_pb__msg(out, field, &p->sub);
}

static void profile_free(struct profile *p)
{
	struct ht_pb *bufs[] = {&p->strings, &p->mappings, &p->locations, &p->functions,
				&p->samples, &p->sub, &p->line};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		ht_pb__free(bufs[i]);
	for (size_t i = 0; i < p->nstrs; i++)
		free(p->strs[i]);
	free(p->strs);
	free(p->str_next);
	free(p->name);
	map_free(&p->str_ix);
	map_free(&p->fn_ix);
	map_free(&p->loc_ix);
}

/* Gzips data to f; 0 on success, -1 when zlib failed, -2 when writing
 * failed (f's error flag set, errno kept: the command says it, as it
 * does for the other formats, not as zlib's). */
static int gzip_to(FILE *f, const uint8_t *data, size_t len)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	uint8_t out[65536];
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)len; /* (a profile is far below 4 GiB) */
	int zr;
	do {
		z.next_out = out;
		z.avail_out = sizeof(out);
		zr = deflate(&z, Z_FINISH);
		size_t n = sizeof(out) - z.avail_out;
		if (zr == Z_STREAM_ERROR) {
			deflateEnd(&z);
			return -1;
		}
		if (fwrite(out, 1, n, f) != n) {
			int e = errno;
			deflateEnd(&z);
			errno = e;
			return -2;
		}
	} while (zr != Z_STREAM_END);
	deflateEnd(&z);
	return 0;
}

int ht_export__pprof(const struct ht_export_opts *o, FILE *f)
{
	struct profile p;
	memset(&p, 0, sizeof(p));
	struct ht_stackstats ss;
	struct ht_reader *r = NULL;
	struct ht_symbolizer *sym = NULL;
	struct ht_pb prof = {0};
	ht_blocks__symbols_ahead(o->sysroot, o->debug_dir);
	int ret = ht_stackstats__collect(o->trace, 0, &ss, &r);
	if (!r)
		goto cleanup;
	if (ret)
		ret = HT_EXPORT_DAMAGED; /* read up to the damage */
	if (!(sym = ht_blocks__symbolizer(r, o->sysroot, o->debug_dir))) {
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	const struct ht_trace_info *in = ht_reader__info(r);
	p.nmods = ht_reader__modules(r, &p.mods);
	str_of(&p, ""); /* string 0 is always "" */
	static const char *const types[4][2] = {{"alloc_objects", "count"},
						{"alloc_space", "bytes"},
						{"inuse_objects", "count"},
						{"inuse_space", "bytes"}};
	for (int i = 0; i < 4; i++)
		value_type(&p, &prof, 1, types[i][0], types[i][1]);
	add_mappings(&p);
	uint64_t locs[MAX_DEPTH], no_stack = 0, samples = 0, stackless = 0;
	for (size_t i = 0; i < ss.cap; i++) {
		const struct ht_stackstat *st = &ss.slots[i];
		uint64_t in_obj = o->at_peak ? st->peak_blocks : st->end_blocks;
		uint64_t in_sp = o->at_peak ? st->peak_bytes : st->end_bytes;
		if (!st->node || (!st->alloc_calls && !in_obj))
			continue;
		uint32_t node = st->node - 1;
		size_t nl = 0;
		for (uint32_t at = node; at && nl < MAX_DEPTH; at = ht_reader__node_parent(r, at)) {
			uint64_t id = location_of(&p, sym, ht_reader__node_ip(r, at),
						  ht_reader__node_module(r, at));
			if (id)
				locs[nl++] = id;
		}
		if (!nl) {
			if (!no_stack) {
				uint64_t fn = function_of(&p, ht_blocks__no_stack_frame(r), NULL);
				int line = 0;
				no_stack = add_location(&p, 0, 0, &fn, &line, 1);
			}
			locs[nl++] = no_stack;
			stackless++;
		}
		uint64_t vals[4] = {st->alloc_calls, st->alloc_bytes, in_obj, in_sp};
		ht_pb__reset(&p.sub);
		ht_pb__packed(&p.sub, 1, locs, nl);
		ht_pb__packed(&p.sub, 2, vals, 4);
		ht_pb__msg(&p.samples, 2, &p.sub);
		samples++;
	}
	if (samples && stackless == samples && !ht_quiet) /* (-q: export and flamegraph) */
		ht_warning("%s has no stacks: one sample at \"%s\" (record with --stacks to see "
			   "where memory is allocated)",
			   o->trace, ht_blocks__no_stack_frame(r));
	char comment[1024];
	snprintf(comment, sizeof(comment), "heaptrail export of %s: %s (pid %d); in-use at %s",
		 o->trace, in->cmdline ? in->cmdline : "", in->pid,
		 o->at_peak ? "the peak of the heap" : "the end");
	uint64_t comment_ix[2] = {str_of(&p, comment), 0};
	char note[256];
	size_t ncomments = *ht_analyze__order_note(r, note, sizeof(note)) ? 2 : 1;
	if (ncomments == 2)
		comment_ix[1] = str_of(&p, note);
	uint64_t space = str_of(&p, "space"), bytes = str_of(&p, "bytes");
	uint64_t inuse = str_of(&p, "inuse_space");
	/* Profile: the repeated fields, then the scalars */
	struct ht_pb *parts[] = {&p.samples, &p.mappings, &p.locations, &p.functions, &p.strings};
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		ht_pb__append(&prof, parts[i]); /* each holds whole fields */
	ht_pb__uint(&prof, 9, in->start_realtime_ns, 0);
	ht_pb__uint(&prof, 10, in->duration_ns, 0);
	ht_pb__reset(&p.sub);
	ht_pb__uint(&p.sub, 1, space, 0);
	ht_pb__uint(&p.sub, 2, bytes, 0);
	ht_pb__msg(&prof, 11, &p.sub);
	ht_pb__uint(&prof, 12, in->sample_bytes ? in->sample_bytes : 1, 0);
	ht_pb__packed(&prof, 13, comment_ix, ncomments);
	ht_pb__uint(&prof, 14, inuse, 0);
	/* a failed write is left to the command's commit of the output,
	 * which names the file and the reason ("No space left on device") */
	if (gzip_to(f, prof.buf, prof.len) == -1) {
		ht_error("cannot compress the profile (zlib)");
		ret = HT_EXIT_DATA;
	}
cleanup:
	ht_pb__free(&prof);
	profile_free(&p);
	ht_symbolizer__free(sym);
	ht_reader__close(r);
	ht_stackstats__free(&ss);
	return ret;
}
