/* A small JSON reader: parses a document into a tree, for the files other
 * heaptrail commands wrote (report reads `compare --json` results). */
#ifndef HEAPTRAIL_COMMON_JSONREAD_H
#define HEAPTRAIL_COMMON_JSONREAD_H

#include <stddef.h>

enum ht_jtype { HT_JNULL, HT_JBOOL, HT_JNUM, HT_JSTR, HT_JARR, HT_JOBJ };

struct ht_jvalue {
	enum ht_jtype type;       /* what it is */
	double num;               /* HT_JNUM; HT_JBOOL: 0 or 1 */
	char *str;                /* HT_JSTR: the decoded string (UTF-8, NUL-terminated) */
	struct ht_jvalue *items;  /* HT_JARR, HT_JOBJ: the elements / member values */
	char **keys;              /* HT_JOBJ: the member names */
	size_t n;                 /* elements or members */
};

/* Parses text[0..len) (no NUL needed after it): a JSON text (RFC 8259)
 * with at most HT_JSON_MAX_DEPTH (json.h) nested objects and arrays, no
 * \u0000 and no number beyond the range of a double.  Strings come out
 * valid UTF-8: a valid sequence as it is, any other byte as its Latin-1
 * character (the writer's policy, json.h), a lone surrogate escape as
 * U+FFFD.  NULL on error with "line L, column C: what" in err (C counts
 * bytes from 1). */
struct ht_jvalue *ht_jvalue__parse(const char *text, size_t len, char *err, size_t errlen);
/* The member key of an object, or NULL (also when obj is not an object). */
const struct ht_jvalue *ht_jvalue__get(const struct ht_jvalue *obj, const char *key);
/* A member's string, or NULL if absent or not a string. */
const char *ht_jvalue__str(const struct ht_jvalue *obj, const char *key);
/* A member's number, or dflt if absent or not a number. */
double ht_jvalue__num(const struct ht_jvalue *obj, const char *key, double dflt);
void ht_jvalue__free(struct ht_jvalue *v);

#endif
