/* heaptrail export --format csv: one row per event (RFC 4180), streamed.
 * A realloc the reader splits in two (docs/FORMAT.md, "Ordering") is one
 * row, at its end, like every other call.  Each kind's arguments and
 * results go to the named columns below; the rest of a row is empty. */
#define _GNU_SOURCE
#include "export.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "common/util.h"

/* The columns after time_ns, tid, seq, kind, in order. */
static const char *const columns[] = {
	"ptr", "size", "nmemb", "align", "old_ptr", "result", "usable", "ret", "addr", "len",
	"prot", "flags", "fd", "offset", "oldlen", "newlen", "newaddr", "incr", "key", "id",
	"cmd", "param", "value", "pad", "brk", "creator", "op", "child", "string",
	"duration_ns", "mmapped", "nonmain", "weight", "stack",
};
#define NCOLS (sizeof(columns) / sizeof(columns[0]))

static int column(const char *name)
{
	for (size_t i = 0; i < NCOLS; i++)
		if (!strcmp(columns[i], name))
			return (int)i;
	return -1;
}

/* The column of each field of each kind (descriptor order, 'S' included),
 * -1 for none. */
static int col_of[HT_EV_NR][HT_MAX_FIELDS + 1];
static int c_mmapped, c_nonmain, c_weight, c_stack, c_string; /* fixed columns */

static void map_fields(void)
{
	c_mmapped = column("mmapped");
	c_nonmain = column("nonmain");
	c_weight = column("weight");
	c_stack = column("stack");
	c_string = column("string");
	for (int k = 0; k < HT_EV_NR; k++) {
		const struct ht_kind_desc *d = &ht_kind_descs[k];
		char names[128];
		snprintf(names, sizeof(names), "%s", d->names ? d->names : "");
		int i = 0;
		for (char *save = NULL, *n = strtok_r(names, ",", &save);
		     n && i <= HT_MAX_FIELDS; n = strtok_r(NULL, ",", &save), i++) {
			const char *c = n;
			if (!strcmp(n, "ptr") && i == d->result)
				c = "result";
			else if (!strcmp(n, "old"))
				c = "old_ptr";
			else if (!strcmp(n, "name") || !strcmp(n, "label") || !strcmp(n, "path"))
				c = "string";
			else if (!strcmp(n, "duration"))
				c = "duration_ns";
			col_of[k][i] = column(c);
		}
		for (; i <= HT_MAX_FIELDS; i++)
			col_of[k][i] = -1;
	}
}

static void csv_str(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

int ht_export__csv(const struct ht_export_opts *o, FILE *f)
{
	map_fields();
	struct ht_reader *r = ht_analyze__open(o->trace);
	if (!r)
		return HT_EXIT_DATA;
	double ts_per_ns = ht_reader__info(r)->ts_per_ns;
	fputs("time_ns,tid,seq,kind", f);
	for (size_t i = 0; i < NCOLS; i++)
		fprintf(f, ",%s", columns[i]);
	fputc('\n', f);
	struct ht_event e;
	char cell[NCOLS][40];
	const char *str;
	while (ht_analyze__next(r, &e)) {
		if (!ht_event__is_call(&e))
			continue; /* the release half of a split realloc: its row comes at the end */
		const struct ht_kind_desc *d = &ht_kind_descs[e.kind];
		for (size_t i = 0; i < NCOLS; i++)
			cell[i][0] = 0;
		str = NULL;
		int v = 0;
		for (int i = 0; d->fields[i] && i <= HT_MAX_FIELDS; i++) {
			char code = d->fields[i];
			int c = col_of[e.kind][i];
			uint64_t x = code == 'S' || v >= e.nv ? 0 : e.v[v];
			if (code != 'S')
				v++;
			if (c < 0)
				continue;
			char *o2 = cell[c];
			switch (code) {
			case 'S':
				str = e.str ? e.str : "";
				break;
			case 'p':
				snprintf(o2, 40, "0x%llx", (unsigned long long)x);
				break;
			case 's':
				snprintf(o2, 40, "%lld", (long long)(int64_t)x);
				break;
			case 'U':
				snprintf(o2, 40, "%llu", (unsigned long long)e.usable);
				break;
			case 'd':
				snprintf(o2, 40, "%llu",
					 (unsigned long long)(ts_per_ns > 0 ? (double)e.duration / ts_per_ns + 0.5
									    : (double)e.duration));
				break;
			default:
				snprintf(o2, 40, "%llu", (unsigned long long)x);
			}
		}
		if (d->is_alloc) {
			snprintf(cell[c_mmapped], 40, "%d", !!(e.flags & HT_F_MMAPPED));
			snprintf(cell[c_nonmain], 40, "%d", !!(e.flags & HT_F_NONMAIN));
			snprintf(cell[c_weight], 40, "%u", e.weight);
		}
		if (e.stack)
			snprintf(cell[c_stack], 40, "%u", e.stack);
		fprintf(f, "%llu,%u,%llu,%s", (unsigned long long)e.time_ns, e.tid,
			(unsigned long long)e.seq, ht_kind_name(e.kind));
		for (size_t i = 0; i < NCOLS; i++) {
			fputc(',', f);
			if (str && (int)i == c_string)
				csv_str(f, str);
			else
				fputs(cell[i], f);
		}
		fputc('\n', f);
	}
	int ret = ht_analyze__finish(r, o->trace, 0);
	ht_reader__close(r);
	return ret;
}
