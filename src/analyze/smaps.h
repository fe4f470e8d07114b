/* A parser of /proc/PID/smaps, live or a saved copy: one record per
 * mapping with its header (addresses, permissions, offset, device, inode,
 * name) and the kB fields that pmap -X sums.  Tolerant of what kernels
 * vary: fields in any order, unknown fields (ignored), fields missing in
 * old kernels (0, and noted in `seen`), VmFlags, names with spaces,
 * " (deleted)", [anon:NAME].  Memory is bounded per mapping: lines longer
 * than HT_SMAPS_LINE_MAX are cut, names longer than HT_SMAPS_NAME_MAX too.
 * It takes a buffer or a FILE, so that the fuzz target (tests/fuzz/
 * fuzz_smaps.c) calls exactly what `heaptrail maps` calls. */
#ifndef HEAPTRAIL_ANALYZE_SMAPS_H
#define HEAPTRAIL_ANALYZE_SMAPS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HT_SMAPS_LINE_MAX 8192 /* longer lines are cut there */
#define HT_SMAPS_NAME_MAX 4352 /* PATH_MAX and " (deleted)", with room */

/* The fields kept, in kB (THPeligible and VmFlags are not sizes). */
enum ht_smaps_field {
	HT_SM_SIZE,          /* Size */
	HT_SM_RSS,           /* Rss */
	HT_SM_PSS,           /* Pss */
	HT_SM_PSS_DIRTY,     /* Pss_Dirty (kernels >= 6.0) */
	HT_SM_SHARED_CLEAN,  /* Shared_Clean */
	HT_SM_SHARED_DIRTY,  /* Shared_Dirty */
	HT_SM_PRIVATE_CLEAN, /* Private_Clean */
	HT_SM_PRIVATE_DIRTY, /* Private_Dirty */
	HT_SM_REFERENCED,    /* Referenced */
	HT_SM_ANONYMOUS,     /* Anonymous */
	HT_SM_LAZYFREE,      /* LazyFree */
	HT_SM_ANON_HUGE,     /* AnonHugePages */
	HT_SM_SWAP,          /* Swap */
	HT_SM_SWAP_PSS,      /* SwapPss */
	HT_SM_LOCKED,        /* Locked */
	HT_SM_NFIELDS
};

struct ht_smaps_map {
	uint64_t start, end;   /* [start, end) */
	uint64_t offset;       /* file offset of start */
	uint64_t inode;        /* 0 for anonymous memory */
	uint32_t dev_major;    /* device of the file */
	uint32_t dev_minor;
	char perms[5];         /* "rw-p", NUL-terminated */
	uint8_t deleted;       /* the name ended in " (deleted)" (removed from it) */
	uint8_t cut;           /* the name was longer than HT_SMAPS_NAME_MAX */
	uint32_t seen;         /* bit f: field f was present */
	uint64_t kb[HT_SM_NFIELDS]; /* the fields, 0 when absent */
	char *name;            /* "" for none; owned */
};

struct ht_smaps {
	struct ht_smaps_map *maps; /* in the order of the input */
	size_t n, cap;             /* used / allocated */
	uint64_t lines;            /* lines read */
	uint64_t unknown_lines;    /* lines that were neither a header nor a field */
	uint64_t fields;           /* field lines attributed to a mapping */
	uint32_t seen;             /* union of the maps' seen */
	int unsorted;              /* a mapping starts before the previous one ends */
	int truncated;             /* the last line ends without a newline (a partial copy) */
};

/* Parses a whole smaps text.  Returns 0 with *s filled (possibly with no
 * mapping: the caller decides whether that is an error), or -1 with a
 * one-line reason in err (out of memory, a read error).  *s must be
 * zeroed first, and is freed with ht_smaps__free either way. */
int ht_smaps__parse_mem(struct ht_smaps *s, const char *buf, size_t len, char *err,
			size_t errlen);
int ht_smaps__parse_file(struct ht_smaps *s, FILE *f, char *err, size_t errlen);
void ht_smaps__free(struct ht_smaps *s);

/* Why a parsed text is not an smaps file, or NULL if it is one: no
 * mapping at all, mappings without a single Size/Rss field (a
 * /proc/PID/maps copy), or a last line without its newline (truncated). */
const char *ht_smaps__not_smaps(const struct ht_smaps *s, uint64_t input_bytes);

#endif
