/* The heaptrail_mark() labels of a trace, in order: kept by stats and by
 * timeline (so by report twice) with the same rules and the same JSON. */
#ifndef HEAPTRAIL_ANALYZE_MARKS_H
#define HEAPTRAIL_ANALYZE_MARKS_H

#include <stddef.h>
#include <stdint.h>

#include "common/json.h"
#include "trace/reader.h"

/* Marks kept by default (stats, timeline): a program that marks in a loop
 * must not make the analyzers' memory grow with the trace. */
#define HT_MARKS_MAX 10000

struct ht_mark {
	uint64_t time_ns; /* when it was set */
	uint32_t tid;     /* the thread that set it */
	char *label;      /* heaptrail_mark()'s text */
};

struct ht_marks {
	struct ht_mark *v; /* kept, in reading (time) order */
	size_t n, cap;     /* kept / allocated */
	size_t max;        /* keep at most this many, 0: all */
	uint64_t dropped;  /* marks beyond max */
};

/* Keeps the MARK event e (or counts it as dropped past max). */
void ht_marks__add(struct ht_marks *m, const struct ht_event *e);
/* Keeps the marks of from after those of m (time slices added in order),
 * counting those past max and those from dropped as dropped. */
void ht_marks__append(struct ht_marks *m, const struct ht_marks *from);
/* The "marks" array: time_ns, tid and label of each kept mark. */
void ht_marks__json(const struct ht_marks *m, struct ht_json *j);
void ht_marks__free(struct ht_marks *m);

#endif
