/* A small streaming JSON writer: correct escaping and commas, no DOM. */
#ifndef HEAPTRAIL_COMMON_JSON_H
#define HEAPTRAIL_COMMON_JSON_H

#include <stdint.h>
#include <stdio.h>

/* The deepest nesting of objects and arrays (the writer's and the reader's,
 * jsonread.h) */
#define HT_JSON_MAX_DEPTH 64

struct ht_json {
	FILE *f;          /* output */
	int depth;        /* nesting level */
	int first[HT_JSON_MAX_DEPTH + 1]; /* no member written yet at this level */
	int pretty;       /* indent output */
};

void ht_json__init(struct ht_json *j, FILE *f, int pretty);
void ht_json__obj_begin(struct ht_json *j, const char *key); /* key NULL in arrays/top */
void ht_json__obj_end(struct ht_json *j);
void ht_json__arr_begin(struct ht_json *j, const char *key);
void ht_json__arr_end(struct ht_json *j);
void ht_json__u64(struct ht_json *j, const char *key, uint64_t v);
void ht_json__i64(struct ht_json *j, const char *key, int64_t v);
void ht_json__double(struct ht_json *j, const char *key, double v);
void ht_json__str(struct ht_json *j, const char *key, const char *v);
void ht_json__bool(struct ht_json *j, const char *key, int v);
void ht_json__null(struct ht_json *j, const char *key);
/* s as a JSON string, quotes included: valid UTF-8 as it is, control
 * characters escaped, and each byte that is not part of valid UTF-8 (C++
 * symbols and paths may hold such) as the Latin-1 character of that byte,
 * so that the output is valid JSON whatever the bytes.  The one escaper:
 * every JSON output of heaptrail goes through it. */
void ht_json__put_string(FILE *f, const char *s);
/* Ends the document with a newline. */
void ht_json__finish(struct ht_json *j);

#endif
