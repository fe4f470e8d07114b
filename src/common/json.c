/* Streaming JSON writer. */
#include "json.h"

#include <math.h>

#include "markup.h"

void ht_json__init(struct ht_json *j, FILE *f, int pretty)
{
	j->f = f;
	j->depth = 0;
	j->first[0] = 1;
	j->pretty = pretty;
}

static void indent(struct ht_json *j)
{
	if (!j->pretty)
		return;
	fputc('\n', j->f);
	for (int i = 0; i < j->depth; i++)
		fputs("  ", j->f);
}

void ht_json__put_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		int n;
		switch (*p) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			if (*p < 0x20 || *p == 0x7f) {
				fprintf(f, "\\u%04x", *p);
			} else if ((n = ht_utf8_len(p, 4)) > 0) {
				fwrite(p, 1, (size_t)n, f);
				p += n;
				continue;
			} else {
				/* a byte that is not UTF-8: as the Latin-1 character */
				fprintf(f, "\\u%04x", *p);
			}
		}
		p++;
	}
	fputc('"', f);
}

static void member(struct ht_json *j, const char *key)
{
	if (j->depth > 0) {
		if (!j->first[j->depth])
			fputc(',', j->f);
		indent(j);
	}
	j->first[j->depth] = 0;
	if (key) {
		ht_json__put_string(j->f, key);
		fputs(j->pretty ? ": " : ":", j->f);
	}
}

static void open_(struct ht_json *j, const char *key, char c)
{
	member(j, key);
	fputc(c, j->f);
	if (j->depth < HT_JSON_MAX_DEPTH)
		j->depth++;
	j->first[j->depth] = 1;
}

static void close_(struct ht_json *j, char c)
{
	int empty = j->first[j->depth];
	if (j->depth > 0)
		j->depth--;
	if (!empty)
		indent(j);
	fputc(c, j->f);
}

void ht_json__obj_begin(struct ht_json *j, const char *key) { open_(j, key, '{'); }
void ht_json__obj_end(struct ht_json *j) { close_(j, '}'); }
void ht_json__arr_begin(struct ht_json *j, const char *key) { open_(j, key, '['); }
void ht_json__arr_end(struct ht_json *j) { close_(j, ']'); }

void ht_json__u64(struct ht_json *j, const char *key, uint64_t v)
{
	member(j, key);
	fprintf(j->f, "%llu", (unsigned long long)v);
}

void ht_json__i64(struct ht_json *j, const char *key, int64_t v)
{
	member(j, key);
	fprintf(j->f, "%lld", (long long)v);
}

void ht_json__double(struct ht_json *j, const char *key, double v)
{
	member(j, key);
	if (isfinite(v))
		fprintf(j->f, "%.6g", v);
	else
		fputs("null", j->f);
}

void ht_json__str(struct ht_json *j, const char *key, const char *v)
{
	member(j, key);
	if (v)
		ht_json__put_string(j->f, v);
	else
		fputs("null", j->f);
}

void ht_json__bool(struct ht_json *j, const char *key, int v)
{
	member(j, key);
	fputs(v ? "true" : "false", j->f);
}

void ht_json__null(struct ht_json *j, const char *key)
{
	member(j, key);
	fputs("null", j->f);
}

void ht_json__finish(struct ht_json *j)
{
	fputc('\n', j->f);
	fflush(j->f);
}
