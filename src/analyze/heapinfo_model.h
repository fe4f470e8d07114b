/* The model heaptrail heap builds (heapinfo.c) and its renderers read
 * (heapinfo_render.c): glibc's constants and the collector's state.
 * Private to those two files. */
#ifndef HEAPTRAIL_ANALYZE_HEAPINFO_MODEL_H
#define HEAPTRAIL_ANALYZE_HEAPINFO_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/heapinfo.h"
#include "common/keyindex.h"

/* ---- glibc 2.36 on 64-bit Linux (docs/heap.md cites each) ---------------- */
#define G_HEAP_MAX (64ull << 20)        /* HEAP_MAX_SIZE = 2 * DEFAULT_MMAP_THRESHOLD_MAX */
#define G_MMAP_THRESHOLD_MAX (32ull << 20) /* DEFAULT_MMAP_THRESHOLD_MAX */
#define G_MMAP_THRESHOLD UINT64_C(131072)     /* DEFAULT_MMAP_THRESHOLD(_MIN) */
#define G_TRIM_THRESHOLD UINT64_C(131072)     /* DEFAULT_TRIM_THRESHOLD */
#define G_HEAP_INFO 48u                 /* sizeof (heap_info) */
#define G_ARENA_FIRST 2256u             /* first chunk of an arena's first heap:
					 * heap_info + malloc_state, aligned */
#define G_MMAPPED_OVERHEAD 16u          /* mmapped chunk size - usable size */
#define G_CHUNK_OVERHEAD 8u             /* chunk size - usable size, in a heap */
#define G_TCACHE_BINS 64                /* TCACHE_MAX_BINS */
#define G_TCACHE_COUNT 7                /* TCACHE_FILL_COUNT */
#define M_TRIM_THRESHOLD (-1)
#define M_TOP_PAD (-2)
#define M_MMAP_THRESHOLD (-3)
#define M_MMAP_MAX (-4)
#define M_ARENA_TEST (-7)
#define M_ARENA_MAX (-8)

/* ---- lock waits --------------------------------------------------------- */
#define NCLASS 48      /* size classes: bit length of the size */
#define NBIN 256       /* duration bins: a quarter octave each */
#define MIN_PEERS 100  /* calls of a function and class before judging */
#define SLOW_FACTOR 10 /* and slower than this many times the median */
#define WORST_KEEP 16  /* slowest calls kept per function and class */
#define WORST_SHOW 10  /* shown in the text report */
#define WORST_JSON 100 /* listed in JSON */
#define MAX_CHANGES 100000 /* threshold changes kept */

struct series {
	uint64_t *t, *v; /* time ns, value */
	size_t n, cap;   /* points / room */
	uint64_t step;   /* keep one point per this many offered (thinning) */
	uint64_t offered;
};

struct use {
	uint32_t tid;       /* thread */
	uint64_t first_ns;  /* its first allocation in the arena */
	uint64_t last_ns;   /* its last */
	uint64_t calls;     /* allocations it made there */
};

struct arena {
	uint64_t first_heap;  /* base of its first heap; 0 = the main arena */
	uint32_t nheaps;      /* heaps seen */
	uint64_t created_ns;  /* first block seen in it */
	uint32_t creator;     /* thread of that block */
	struct use *uses;     /* threads that allocated in it */
	size_t nuses, capuses;
	uint64_t live, live_req, peak; /* usable bytes in use, requested, peak usable */
	uint64_t peak_ns;     /* when */
	uint64_t blocks;      /* blocks in use */
	uint64_t allocs;      /* allocations */
	uint64_t slow;        /* calls slower than their peers (finish) */
	uint64_t slow_worst;  /* the slowest of them, ticks */
};

struct heap {
	uint64_t base;        /* aligned to G_HEAP_MAX */
	int arena;            /* index in arenas */
	int first;            /* 1: the arena's first heap (holds the arena) */
	uint64_t min_off;     /* lowest block offset seen */
	uint64_t first_ns;    /* first block seen */
	uint64_t size;        /* highest block end - base, so far */
	uint64_t size_ns;     /* when it got there */
	uint64_t live;        /* usable bytes in use */
	struct series s;      /* size over time */
};

struct thr {
	uint32_t tid;         /* kernel thread id */
	int arena;            /* arena of its allocations, -1 before the first */
	int last_arena;       /* cache: arena of uses[last_use] */
	size_t last_use;
	uint64_t first_ns, last_ns; /* first and last event */
	uint64_t start_ns, exit_ns; /* thread_start / thread_exit, 0 if none */
	int started, exited;  /* seen */
	char name[HT_MAX_STR + 1];
	uint64_t *tc;         /* freed blocks that may sit in its tcache:
			       * G_TCACHE_BINS x G_TCACHE_COUNT, newest last */
	uint8_t *tcn;         /* entries per bin */
	uint64_t timed;       /* calls with a duration */
	uint64_t slow, slow_worst; /* slow calls (finish), the slowest in ticks */
	size_t heap_hint;     /* cache: the heap of its last block (index + 1, 0 none) */
	int split_mmapped;    /* the RELEASE part of its realloc under way released an
			       * mmapped chunk (for the ACQUIRE part) */
	int split_arena;      /* and the arena of the block it released (-1 none):
			       * the ACQUIRE part no longer finds that block */
};

struct change {
	uint64_t time_ns;
	uint32_t tid;
	uint64_t mmap, trim;  /* the thresholds after it */
	int cause;            /* 0 free of an mmapped chunk, else the mallopt param */
	uint64_t arg;         /* the chunk size, or mallopt's value */
	int pins;             /* this mallopt turned the dynamic threshold off */
};

struct worst {
	uint64_t dur;         /* ticks */
	uint64_t time_ns;
	uint32_t tid;
	int arena;            /* -1 mmapped / unknown */
	uint64_t size;        /* requested (free: the block's) */
	uint8_t kind;
};

struct dist {
	uint32_t bins[NBIN];
	uint64_t n;
	struct worst w[WORST_KEEP]; /* slowest first */
	uint64_t thr;         /* finish: slower than this (ticks) is slow; 0 = not judged */
	uint64_t median;      /* finish: ticks */
	uint64_t slow;        /* finish: calls slower than thr */
};

/* (owner, dist, bin) -> calls; owner: thread index * 2, arena index * 2 + 1 */
struct cell {
	uint64_t key;         /* 0 = empty */
	uint64_t n;
};

struct ht_heapinfo {
	const struct ht_reader *r; /* its RSS samples (clock chunks, read at open) */
	int sampled;          /* a sampled trace: blocks and calls count by their weights */
	uint64_t from, to;    /* window */
	int seeded;           /* peaks started at the window */
	uint64_t gate;        /* events from this time on take window_checks (set_gate) */
	uint64_t start_brk;   /* from the header */
	double ts_per_ns;     /* clock */
	int durations_flag;   /* HT_FILE_F_DURATIONS in the header */
	const char *cmdline;
	int32_t pid;
	uint64_t last_ns;     /* last event's time */

	struct arena *arenas;
	size_t narenas, caparenas;
	struct heap *heaps;
	size_t nheaps, capheaps;
	struct ht_keyindex heap_idx;  /* base -> heap */
	size_t last_heap;     /* index + 1 of the last heap found, 0 none (heaps are only added) */
	struct thr *thrs;
	size_t nthrs, capthrs;
	struct ht_keyindex thr_idx;  /* tid -> thread */
	/* event_fast's thread: the pass's index of a thread seen before whose
	 * arena is the main one (UINT32_MAX none), its record and, in the
	 * window, its use of the main arena; any other event drops it, and
	 * sets it again after */
	uint32_t fast_ix;
	struct thr *fast_thr;
	struct use *fast_use;

	/* thresholds */
	uint64_t mmap_thr, trim_thr;
	int no_dyn;           /* a mallopt turned the dynamic threshold off */
	uint64_t mmap_thr_start, trim_thr_start; /* at the window's start (--from) */
	int no_dyn_start;     /* no_dyn then */
	struct change *changes;
	size_t nchanges, capchanges;
	uint64_t changes_lost;
	uint64_t arena_max;   /* mallopt(M_ARENA_MAX), 0 none */
	uint64_t mallopts, trims;
	uint64_t mmapped_free_unknown; /* frees of mmapped blocks not seen allocated */
	uint64_t below_thr;   /* malloc/calloc mmapped below the modelled threshold */

	/* main heap */
	uint64_t brk;         /* current break, 0 = not seen */
	uint64_t brk_first;   /* where growth is counted from */
	uint64_t grown, shrunk; /* sbrk total raised / lowered */
	uint64_t grow_steps, shrink_steps;
	uint64_t brk_peak, brk_peak_ns;
	int brk_peak_carried; /* brk_peak was reached before the window (--from) */
	struct series brk_s;
	uint64_t own_brk;     /* the program's own brk/sbrk calls */

	/* whole heap */
	uint64_t calls[HT_EV_NR];
	uint64_t live_req, live_use; /* in use: requested, usable */
	uint64_t peak_req, peak_use, peak_ns; /* at the peak of requested bytes */
	int peak_carried;     /* that peak was reached before the window (--from) */
	uint64_t mm_live, mm_peak, mm_count, mm_bytes; /* mmapped chunks */
	uint64_t mm_resized;  /* of mm_count, reallocs of an mmapped chunk (mremap) */
	uint64_t unknown_frees;
	uint64_t rss_peak_kb, rss_peak_ns; /* the RSS peak in the window */
	int rss_taken;
	uint64_t rss_live_req, rss_live_use; /* in use then */

	/* lock waits */
	struct dist *dists[32 * NCLASS]; /* by kind and size class, lazily */
	struct cell *cells;
	size_t ncells, capcells;
	uint64_t timed;       /* calls with a duration */
	uint64_t timed_hot;   /* of them malloc/free/calloc/memalign: needs --durations */
	uint64_t slow;        /* finish */
	struct worst worst[WORST_JSON];
	size_t nworst;
	struct dist *worst_dist[WORST_JSON];
};

#endif
