/* heaptrail export: a trace in the formats other tools read (pprof,
 * Chrome/Perfetto trace JSON, massif, CSV).  Each format is a renderer in
 * its own file (export_<format>.c) over collectors that stream the trace
 * with memory bounded by the live set; the collectors (the downsampled
 * counter series, the allocation-site tree of the live heap, the protobuf
 * writer) are here so that `heaptrail report` can reuse them. */
#ifndef HEAPTRAIL_ANALYZE_EXPORT_H
#define HEAPTRAIL_ANALYZE_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/livemap.h"
#include "symbols/symbolize.h"
#include "trace/reader.h"

/* ---- export_pb.c: a protobuf wire-format writer ---------------------------
 * A growable byte buffer; a message is written into its own buffer, then
 * appended to its parent as a length-delimited field.  Out of memory
 * exits (HT_EXIT_DATA). */
struct ht_pb {
	uint8_t *buf; /* bytes written */
	size_t len;   /* used */
	size_t cap;   /* allocated */
};

enum { HT_PB_VARINT = 0, HT_PB_LEN = 2 }; /* the wire types used */

void ht_pb__reset(struct ht_pb *b);                  /* empties, keeps the memory */
void ht_pb__free(struct ht_pb *b);
void ht_pb__varint(struct ht_pb *b, uint64_t v);     /* a bare varint */
void ht_pb__key(struct ht_pb *b, uint32_t field, int wire_type);
/* A varint field (uint64, int64 as two's complement, bool); 0 is left
 * out, as proto3 does, unless always is set. */
void ht_pb__uint(struct ht_pb *b, uint32_t field, uint64_t v, int always);
void ht_pb__bytes(struct ht_pb *b, uint32_t field, const void *data, size_t len);
void ht_pb__str(struct ht_pb *b, uint32_t field, const char *s);
void ht_pb__msg(struct ht_pb *b, uint32_t field, const struct ht_pb *sub);
/* Appends fields already encoded (a message's body written elsewhere). */
void ht_pb__append(struct ht_pb *b, const struct ht_pb *fields);
/* A packed repeated varint field (nothing if n is 0). */
void ht_pb__packed(struct ht_pb *b, uint32_t field, const uint64_t *v, size_t n);

/* ---- export_series.c: a counter over time, downsampled --------------------
 * Keeps at most nbuckets time buckets; when time runs past the last one,
 * the bucket width doubles and neighbours merge.  Each bucket keeps its
 * first, lowest, highest and last value, so the extremes survive exactly
 * and the value held between buckets stays right. */
struct ht_series_bucket {
	uint64_t t[4]; /* times of first, min, max, last */
	uint64_t v[4]; /* their values */
	int used;      /* anything fell in it */
};

struct ht_series {
	struct ht_series_bucket *b; /* nbuckets, by time / width */
	size_t nbuckets;            /* the bound */
	uint64_t width;             /* ns per bucket, a power of two */
	uint64_t max;               /* the highest value added */
	uint64_t npoints;           /* values added */
};

struct ht_point {
	uint64_t t; /* time (ns since the start) */
	uint64_t v; /* value */
};

/* max_points: the most points ht_series__points returns (at least 4). */
void ht_series__init(struct ht_series *s, size_t max_points);
void ht_series__add(struct ht_series *s, uint64_t t, uint64_t v);
/* The kept points in time order (a time repeats when several values fell
 * on one nanosecond); out holds 4 * nbuckets.  Returns how many. */
size_t ht_series__points(const struct ht_series *s, struct ht_point *out);
void ht_series__free(struct ht_series *s);

/* ---- export_tree.c: the live heap as a tree of allocation sites -----------
 * massif's view: the root is every live byte; its children the innermost
 * frames (where the allocator was called), theirs the callers, and so on. */
struct ht_site {
	uint64_t ip;          /* the frame's return address */
	char *label;          /* "function (file:line)" or "??? (in module)" */
	uint64_t bytes;       /* live bytes below this site */
	uint64_t blocks;      /* live blocks below it */
	struct ht_site *kids; /* children, after ht_sitetree__sort biggest first */
	size_t nkids, capkids; /* count / allocated */
};

struct ht_sitetree {
	struct ht_site root; /* label NULL: all of the heap */
	size_t max_depth;    /* frames followed below the root */
	size_t nsites;       /* nodes below the root */
};

/* Groups the live blocks of live by their stack (aux) and builds the tree
 * through sym, at most max_depth frames deep. */
void ht_sitetree__build(struct ht_sitetree *t, const struct ht_livemap *live,
			struct ht_reader *r, struct ht_symbolizer *sym, size_t max_depth);
void ht_sitetree__free(struct ht_sitetree *t);

/* ---- export.c: what the renderers share ----------------------------------- */
struct ht_export_opts {
	const char *trace;       /* the trace's path */
	const char *sysroot;     /* --sysroot */
	const char *debug_dir;   /* --debug-dir */
	int at_peak;             /* pprof --at-peak: in-use at the heap's peak, not the end */
	uint64_t max_points;     /* perfetto --max-points (2000): per counter */
	uint64_t big;            /* perfetto --big (1M): instants for allocations this big */
	int all_events;          /* perfetto --all-events */
	uint64_t snapshots;      /* massif --snapshots (50) */
	const char *time_unit;   /* massif --time-unit (B): i, ms or B */
	double threshold;        /* massif --threshold (1.0): percent */
	uint64_t depth;          /* massif --depth (30): frames per tree */
	uint64_t detailed_freq;  /* massif --detailed-freq (10) */
};

/* Each renderer streams the trace at opts->trace to f and returns the exit
 * status: 0; HT_EXIT_DATA after a one-line error, the output unusable; or
 * HT_EXPORT_DAMAGED when the trace stopped at an error (said on stderr)
 * and the output is whole for the events before it. */
enum { HT_EXPORT_DAMAGED = 3 };
int ht_export__pprof(const struct ht_export_opts *o, FILE *f);
int ht_export__perfetto(const struct ht_export_opts *o, FILE *f);
int ht_export__massif(const struct ht_export_opts *o, FILE *f);
int ht_export__csv(const struct ht_export_opts *o, FILE *f);

/* ---- export_csv.c: the one CSV field writer --------------------------------
 * s as one CSV field (RFC 4180) at o: quoted when it holds a comma, a
 * quote or a line break, its quotes doubled; valid UTF-8 as it is and each
 * other byte as the UTF-8 of its Latin-1 character (the JSON writer's
 * rule, common/json.h), so that the file is valid UTF-8 whatever the
 * bytes of a label, a thread name or a path.  Writes at most
 * 2 * strlen(s) + 2 bytes; returns the end.  Every CSV heaptrail writes
 * (export -f csv, timeline --csv) puts its strings through it. */
char *ht_export__csv_field(char *o, const char *s);

/* The frame label massif and the tree use: "function (file:line)",
 * "function (in module)", "??? (in module)" or "???", whole (never cut),
 * in *buf, grown as needed (*cap bytes; NULL and 0 at first, the caller
 * frees it).  Returns *buf. */
const char *ht_export__frame_label(char **buf, size_t *cap, const struct ht_frame *f);

#endif
