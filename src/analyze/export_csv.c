/* heaptrail export --format csv: one row per event (RFC 4180, valid UTF-8:
 * ht_export__csv_field), streamed.
 * A realloc the reader splits in two (docs/FORMAT.md, "Ordering") is one
 * row, at its end, like every other call.  Each kind's arguments and
 * results go to the named columns below; the rest of a row is empty. */
#define _GNU_SOURCE
#include "export.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "common/markup.h"
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
static int c_mmapped, c_nonmain, c_weight, c_stack; /* fixed columns */

static void map_fields(void)
{
	c_mmapped = column("mmapped");
	c_nonmain = column("nonmain");
	c_weight = column("weight");
	c_stack = column("stack");
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

/* How a cell is written. */
enum { CELL_EMPTY, CELL_DEC, CELL_SIGNED, CELL_HEX, CELL_STR };

struct cell {
	int type;   /* CELL_* */
	uint64_t v; /* the value */
};

static char *put_dec(char *o, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*o++ = tmp[--n];
	return o;
}

static char *put_hex(char *o, uint64_t v)
{
	char tmp[16];
	int n = 0;
	*o++ = '0';
	*o++ = 'x';
	do {
		tmp[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	while (n)
		*o++ = tmp[--n];
	return o;
}

char *ht_export__csv_field(char *o, const char *s)
{
	int quote = strpbrk(s, ",\"\r\n") != NULL;
	if (quote)
		*o++ = '"';
	const unsigned char *p = (const unsigned char *)s;
	size_t avail = strlen(s);
	while (*p) {
		int n = ht_utf8_len(p, avail);
		if (n > 0) {
			if (*p == '"')
				*o++ = '"';
			memcpy(o, p, (size_t)n);
			o += n;
		} else { /* not UTF-8: the Latin-1 character, as the JSON writer does */
			*o++ = (char)(0xc0 | *p >> 6);
			*o++ = (char)(0x80 | (*p & 0x3f));
			n = 1;
		}
		p += n;
		avail -= (size_t)n;
	}
	if (quote)
		*o++ = '"';
	return o;
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
	struct cell cell[NCOLS];
	/* a row: numbers of at most 20 digits, a string of HT_MAX_STR bytes, each at most
	 * two (a quote doubled, a byte that is not UTF-8), quoted */
	static char row[64 + NCOLS * 24 + 2 * HT_MAX_STR + 8];
	while (ht_analyze__next(r, &e)) {
		if (!ht_event__is_call(&e))
			continue; /* the release half of a split realloc: its row comes at the end */
		const struct ht_kind_desc *d = &ht_kind_descs[e.kind];
		memset(cell, 0, sizeof(cell));
		int v = 0;
		for (int i = 0; d->fields[i] && i <= HT_MAX_FIELDS; i++) {
			char code = d->fields[i];
			int c = col_of[e.kind][i];
			uint64_t x = code == 'S' || v >= e.nv ? 0 : e.v[v];
			if (code != 'S')
				v++;
			if (c < 0)
				continue;
			switch (code) {
			case 'S':
				cell[c].type = CELL_STR;
				break;
			case 'p':
				cell[c] = (struct cell){CELL_HEX, x};
				break;
			case 's':
				cell[c] = (struct cell){CELL_SIGNED, x};
				break;
			case 'U':
				cell[c] = (struct cell){CELL_DEC, e.usable};
				break;
			case 'd': /* ticks to ns */
				cell[c] = (struct cell){CELL_DEC, ts_per_ns > 0
					? (uint64_t)((double)e.duration / ts_per_ns + 0.5) : e.duration};
				break;
			default:
				cell[c] = (struct cell){CELL_DEC, x};
			}
		}
		if (d->is_alloc) {
			cell[c_mmapped] = (struct cell){CELL_DEC, !!(e.flags & HT_F_MMAPPED)};
			cell[c_nonmain] = (struct cell){CELL_DEC, !!(e.flags & HT_F_NONMAIN)};
			cell[c_weight] = (struct cell){CELL_DEC, e.weight};
		}
		if (e.stack)
			cell[c_stack] = (struct cell){CELL_DEC, e.stack};
		char *o2 = put_dec(row, e.time_ns);
		*o2++ = ',';
		o2 = put_dec(o2, e.tid);
		*o2++ = ',';
		o2 = put_dec(o2, e.seq);
		*o2++ = ',';
		o2 = ht_export__csv_field(o2, ht_kind_name(e.kind));
		for (size_t i = 0; i < NCOLS; i++) {
			*o2++ = ',';
			switch (cell[i].type) {
			case CELL_DEC:
				o2 = put_dec(o2, cell[i].v);
				break;
			case CELL_SIGNED:
				if ((int64_t)cell[i].v < 0) {
					*o2++ = '-';
					o2 = put_dec(o2, -cell[i].v);
				} else {
					o2 = put_dec(o2, cell[i].v);
				}
				break;
			case CELL_HEX:
				o2 = put_hex(o2, cell[i].v);
				break;
			case CELL_STR:
				o2 = ht_export__csv_field(o2, e.str ? e.str : "");
				break;
			default:
				break;
			}
		}
		*o2++ = '\n';
		fwrite(row, 1, (size_t)(o2 - row), f);
	}
	int ret = ht_analyze__finish(r, o->trace, 0) ? HT_EXPORT_DAMAGED : HT_EXIT_OK;
	ht_reader__close(r);
	return ret;
}
