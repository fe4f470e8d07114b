/* What a process's memory is made of, from its smaps (live or saved): the
 * mappings classified by kind, as one reads pmap output when a server
 * leaks: the main heap, glibc's arena heaps, each thread's stack, other
 * anonymous memory, each library, the executable, other files, the
 * kernel's pages.  Mappings that make up one thing are one region: a
 * library's segments, an arena heap and its reserve, a
 * thread stack and its guard page.  The rules are in docs/maps.md.
 *
 * Collect into a struct ht_mapkinds, then render it as text or JSON
 * (`heaptrail maps`, and the HTML report). */
#ifndef HEAPTRAIL_ANALYZE_MAPKINDS_H
#define HEAPTRAIL_ANALYZE_MAPKINDS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "analyze/smaps.h"
#include "common/json.h"

enum ht_map_kind {
	HT_MK_HEAP,    /* [heap]: the main arena's brk heap */
	HT_MK_ARENA,   /* the heaps of glibc's other arenas */
	HT_MK_STACK,   /* [stack] and the threads' stacks */
	HT_MK_ANON,    /* other anonymous memory, [anon:NAME] */
	HT_MK_LIBRARY, /* shared objects, one region per path */
	HT_MK_EXE,     /* the executable */
	HT_MK_FILE,    /* other mapped files */
	HT_MK_KERNEL,  /* [vdso], [vvar], [vsyscall], other [names] */
	HT_MK_N
};

/* "heap", "arena", "stack", "anon", "library", "executable", "file",
 * "kernel": the JSON keys. */
const char *ht_map_kind__key(enum ht_map_kind k);
/* "main heap", "arena heaps", ...: the text headings. */
const char *ht_map_kind__title(enum ht_map_kind k);

/* Sizes in kB, as smaps and pmap give them. */
struct ht_map_amount {
	uint64_t size_kb;  /* Size */
	uint64_t rss_kb;   /* Rss */
	uint64_t pss_kb;   /* Pss */
	uint64_t swap_kb;  /* Swap */
	uint64_t dirty_kb; /* Shared_Dirty + Private_Dirty */
};

struct ht_map_region {
	enum ht_map_kind kind;   /* its group */
	const char *name;        /* a path, [name], or a description; owned by the object */
	uint64_t start, end;     /* lowest start and highest end of its mappings */
	uint32_t nmaps;          /* mappings in it */
	uint32_t tid;            /* stacks: the thread, 0 if not known */
	uint8_t main_stack;      /* [stack]: the main thread's */
	uint8_t deleted;         /* its file was deleted */
	uint64_t reserve_kb;     /* Size of its ---p mappings (guard, arena reserve) */
	struct ht_map_amount a;  /* the sum of its mappings */
};

struct ht_map_group {
	struct ht_map_amount a;    /* the sum of its regions */
	size_t n;                  /* regions */
	struct ht_map_region *r;   /* sorted by RSS, biggest first */
};

struct ht_mapkinds {
	char source[64];             /* what was read: /proc/PID/smaps, or "" */
	const char *path;            /* the file given, for a saved copy */
	int pid;                     /* the live process, 0 for a saved copy */
	char exe[HT_SMAPS_NAME_MAX + 1]; /* the executable's path, "" if not known */
	uint32_t threads;            /* live: threads, 0 for a saved copy */
	uint32_t stacks_by_sp;       /* thread stacks found by the thread's stack pointer */
	uint32_t stacks_by_layout;   /* thread stacks found by glibc's layout */
	uint32_t threads_elsewhere;  /* threads whose stack pointer is in no anonymous mapping */
	uint32_t threads_unknown;    /* threads whose stack pointer could not be read (running) */
	struct ht_smaps sm;          /* the mappings */
	struct ht_map_group g[HT_MK_N]; /* by kind */
	struct ht_map_amount total;  /* every mapping: what pmap -X totals */
	char **names;                /* region names made here (stacks) */
	size_t nnames;               /* entries of names */
};

/* Reads /proc/PID/smaps (and the threads' stack pointers), or a saved
 * copy (path "-" for stdin), and classifies.  Returns 0, or an exit code
 * (HT_EXIT_DATA) after printing a one-line error.  *m is zeroed first;
 * free it with ht_mapkinds__free either way. */
int ht_mapkinds__from_pid(struct ht_mapkinds *m, int pid);
int ht_mapkinds__from_file(struct ht_mapkinds *m, const char *path);
/* Classifies mappings already parsed into m->sm (m->pid and m->exe set
 * or not): what both of the above end with.  Returns 0 or -1 (out of
 * memory). */
int ht_mapkinds__classify(struct ht_mapkinds *m);

/* Text: a line per kind sorted by RSS, then each kind's regions (at most
 * top, 0 for all), then the total. */
void ht_mapkinds__print(const struct ht_mapkinds *m, FILE *f, size_t top);
/* JSON members (in an open object): source, pid, executable, mappings,
 * threads, total{size_kb,rss_kb,pss_kb,swap_kb,dirty_kb}, regions{KIND:
 * {title, count, totals, regions[...]}}. */
void ht_mapkinds__json(const struct ht_mapkinds *m, struct ht_json *j);
void ht_mapkinds__free(struct ht_mapkinds *m);

#endif
