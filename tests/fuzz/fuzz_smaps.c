/* libFuzzer target for the smaps parser (src/analyze/smaps.c) and the
 * classification behind `heaptrail maps` (src/analyze/mapkinds.c).
 *
 * Each input is taken as a saved /proc/PID/smaps.  It is parsed from
 * memory with ht_smaps__parse_mem and, through fmemopen, with
 * ht_smaps__parse_file (the path `heaptrail maps FILE` takes); then
 * classified as a saved copy (no /proc access) and rendered as text and
 * as JSON into memory.  Beyond "no crash, no hang, no leak", it checks
 * what holds for any input:
 *
 *   - both parses agree, mapping by mapping (addresses, permissions,
 *     name, fields);
 *   - every mapping has end >= start, a name of at most
 *     HT_SMAPS_NAME_MAX bytes, permissions from [r-][w-][x-][ps-];
 *   - every mapping lands in exactly one region, every group is the sum
 *     of its regions and the total the sum of the groups (what `maps`
 *     promises against pmap -X), regions are sorted by RSS;
 *   - the JSON output is one balanced document.
 *
 * A broken promise aborts, which libFuzzer reports like a crash.
 *
 * Build (clang): see tests/fuzz/run.sh or tests/fuzz/CMakeLists.txt.
 * Without clang, tests/fuzz/run_corpus.c runs the same function over the
 * corpus and the saved regressions (ctest fuzz.smaps_corpus). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/mapkinds.h"
#include "analyze/smaps.h"
#include "common/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what, size_t i)
{
	fprintf(stderr, "fuzz_smaps: broken promise: %s (mapping/region %zu)\n", what, i);
	abort();
}

static void same_maps(const struct ht_smaps *a, const struct ht_smaps *b)
{
	if (a->n != b->n || a->lines != b->lines || a->unknown_lines != b->unknown_lines)
		broken("parse_mem and parse_file disagree on the counts", a->n);
	for (size_t i = 0; i < a->n; i++) {
		const struct ht_smaps_map *x = &a->maps[i], *y = &b->maps[i];
		if (x->start != y->start || x->end != y->end || x->offset != y->offset ||
		    x->inode != y->inode || strcmp(x->perms, y->perms) || strcmp(x->name, y->name) ||
		    x->seen != y->seen || memcmp(x->kb, y->kb, sizeof(x->kb)) ||
		    x->deleted != y->deleted)
			broken("parse_mem and parse_file disagree on a mapping", i);
		if (x->end < x->start)
			broken("end < start", i);
		if (strlen(x->name) > HT_SMAPS_NAME_MAX)
			broken("name longer than HT_SMAPS_NAME_MAX", i);
		if (strlen(x->perms) != 4 || !strchr("r-", x->perms[0]) ||
		    !strchr("w-", x->perms[1]) || !strchr("x-", x->perms[2]) ||
		    !strchr("ps-", x->perms[3]))
			broken("permissions", i);
	}
}

static void add(struct ht_map_amount *a, const struct ht_map_amount *b)
{
	a->size_kb += b->size_kb;
	a->rss_kb += b->rss_kb;
	a->pss_kb += b->pss_kb;
	a->swap_kb += b->swap_kb;
	a->dirty_kb += b->dirty_kb;
}

static int same_amount(const struct ht_map_amount *a, const struct ht_map_amount *b)
{
	return a->size_kb == b->size_kb && a->rss_kb == b->rss_kb && a->pss_kb == b->pss_kb &&
	       a->swap_kb == b->swap_kb && a->dirty_kb == b->dirty_kb;
}

static void check_sums(const struct ht_mapkinds *m)
{
	struct ht_map_amount total = {0}, maps_total = {0};
	uint64_t nmaps = 0;
	for (size_t i = 0; i < m->sm.n; i++) {
		const struct ht_smaps_map *s = &m->sm.maps[i];
		struct ht_map_amount a = {
			.size_kb = s->seen & (1u << HT_SM_SIZE) ? s->kb[HT_SM_SIZE]
								: (s->end - s->start) >> 10,
			.rss_kb = s->kb[HT_SM_RSS],
			.pss_kb = s->kb[HT_SM_PSS],
			.swap_kb = s->kb[HT_SM_SWAP],
			.dirty_kb = s->kb[HT_SM_SHARED_DIRTY] + s->kb[HT_SM_PRIVATE_DIRTY],
		};
		add(&maps_total, &a);
	}
	for (int k = 0; k < HT_MK_N; k++) {
		const struct ht_map_group *g = &m->g[k];
		struct ht_map_amount sum = {0};
		for (size_t i = 0; i < g->n; i++) {
			const struct ht_map_region *r = &g->r[i];
			if (r->kind != (enum ht_map_kind)k)
				broken("a region in another kind's group", i);
			if (!r->nmaps || !r->name)
				broken("an empty region", i);
			if (i && r->a.rss_kb > g->r[i - 1].a.rss_kb)
				broken("regions not sorted by RSS", i);
			if (r->end < r->start)
				broken("region end < start", i);
			add(&sum, &r->a);
			nmaps += r->nmaps;
		}
		if (!same_amount(&sum, &g->a))
			broken("a group is not the sum of its regions", (size_t)k);
		add(&total, &g->a);
	}
	if (!same_amount(&total, &m->total) || !same_amount(&total, &maps_total))
		broken("the total is not the sum of the groups and of the mappings", 0);
	if (nmaps != m->sm.n)
		broken("mappings in no region or in two", (size_t)nmaps);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	struct ht_mapkinds m;
	struct ht_smaps other;
	memset(&m, 0, sizeof(m));
	memset(&other, 0, sizeof(other));
	m.path = "fuzz.smaps";
	if (ht_smaps__parse_mem(&m.sm, (const char *)data, size, err, sizeof(err)))
		goto done;
	FILE *f = size ? fmemopen((void *)data, size, "r") : NULL;
	if (f) {
		if (!ht_smaps__parse_file(&other, f, err, sizeof(err)))
			same_maps(&m.sm, &other);
		fclose(f);
	}
	if (ht_smaps__not_smaps(&m.sm, size))
		goto done;
	if (ht_mapkinds__classify(&m))
		goto done;
	check_sums(&m);
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	if (!out)
		goto done;
	ht_mapkinds__print(&m, out, 3);
	ht_mapkinds__print(&m, out, 0);
	struct ht_json j;
	long json_at = ftell(out);
	ht_json__init(&j, out, 0);
	ht_json__obj_begin(&j, NULL);
	ht_mapkinds__json(&m, &j);
	ht_json__obj_end(&j);
	ht_json__finish(&j);
	fclose(out);
	if (j.depth != 0 || json_at < 0 || (size_t)json_at >= len || text[json_at] != '{' ||
	    text[len - 2] != '}')
		broken("unbalanced JSON", (size_t)j.depth);
	free(text);
done:
	ht_smaps__free(&other);
	ht_mapkinds__free(&m);
	return 0;
}
