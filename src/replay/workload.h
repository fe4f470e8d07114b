/* Workloads (.wl): per-thread streams of heap operations over dense pointer
 * slots, written by `convert` and run by `replay` (docs/WORKLOAD.md).
 *
 * The file: a fixed header with a table of {offset,size} sections, then the
 * op blocks (each thread's stream cut into blocks, in any interleaving, as
 * the converter streams the trace), the thread table and the call counts.
 * ht_workload__load() reads it all into memory (mmap, not the allocator
 * under test), checks every op and simulates the run once, so that replay
 * can trust it: a slot is never freed while empty nor filled while live,
 * every wait can be met, every thread is started once. */
#ifndef HEAPTRAIL_REPLAY_WORKLOAD_H
#define HEAPTRAIL_REPLAY_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HT_WL_MAGIC "HTWLOAD\n"
#define HT_WL_VERSION 1
#define HT_WL_HEADER_SIZE 128

/* Sections of the header's table. */
enum ht_wl_section {
	HT_WL_SEC_OPS = 0,     /* op blocks */
	HT_WL_SEC_THREADS = 1, /* thread table */
	HT_WL_SEC_CALLS = 2,   /* u64 per function: the traced calls the workload makes */
	HT_WL_SEC_SOURCE = 3,  /* text: the trace it came from, key=value lines */
	HT_WL_SEC_NR = 4,
};

/* Ops.  Arguments are LEB128 numbers; "slot" arguments are slot + 1, with 0
 * for NULL (a failed allocation's result, free(NULL), realloc(NULL, n)). */
enum ht_wl_op {
	HT_WL_MALLOC = 1,         /* slot size */
	HT_WL_CALLOC = 2,         /* slot nmemb size */
	HT_WL_REALLOC = 3,        /* new old size: new may equal old (in place, or failed) */
	HT_WL_REALLOCARRAY = 4,   /* new old nmemb size */
	HT_WL_FREE = 5,           /* slot */
	HT_WL_MEMALIGN = 6,       /* slot align size */
	HT_WL_POSIX_MEMALIGN = 7, /* slot align size */
	HT_WL_ALIGNED_ALLOC = 8,  /* slot align size */
	HT_WL_VALLOC = 9,         /* slot size */
	HT_WL_PVALLOC = 10,       /* slot size */
	HT_WL_MALLOPT = 11,       /* param value (zigzag) */
	HT_WL_MALLOC_TRIM = 12,   /* pad */
	HT_WL_MMAP = 13,          /* slot len prot flags: an anonymous private map */
	HT_WL_MUNMAP = 14,        /* slot offset len last: last = 1 empties the slot */
	HT_WL_MREMAP = 15,        /* new old oldlen newlen flags */
	HT_WL_WAIT = 16,          /* thread count: until that thread has done count ops */
	HT_WL_SPAWN = 17,         /* thread: start it */
	HT_WL_OP_NR = 18,
};

/* What replay times and counts: the functions, in the stats order. */
enum ht_wl_fn {
	HT_FN_MALLOC, HT_FN_CALLOC, HT_FN_REALLOC, HT_FN_REALLOCARRAY, HT_FN_FREE,
	HT_FN_MEMALIGN, HT_FN_POSIX_MEMALIGN, HT_FN_ALIGNED_ALLOC, HT_FN_VALLOC,
	HT_FN_PVALLOC, HT_FN_MALLOPT, HT_FN_MALLOC_TRIM, HT_FN_MMAP, HT_FN_MUNMAP,
	HT_FN_MREMAP, HT_FN_NR,
};
extern const char *const ht_wl_fn_names[HT_FN_NR];
/* The function an op calls, -1 for WAIT and SPAWN. */
int ht_wl_op_fn(int op);
/* Arguments an op takes (0 for an unknown op). */
int ht_wl_op_nargs(int op);
/* The op's name, for messages. */
const char *ht_wl_op_name(int op);

#define HT_WL_MAX_ARGS 5

/* One thread of a workload. */
struct ht_wl_thread {
	uint32_t tid;      /* traced thread id */
	uint32_t creator;  /* index of the thread that starts it; 0 for thread 0 */
	uint64_t nops;     /* ops in its stream */
	uint64_t nbytes;   /* bytes of its stream */
	const uint8_t *ops; /* the stream (loaded workloads) */
};

/* A loaded workload. */
struct ht_workload {
	uint32_t nthreads;         /* thread 0 runs first; the others are spawned */
	uint64_t nslots;           /* pointer slots: the peak of live blocks */
	uint64_t nops;             /* ops of all threads */
	uint64_t ideal_peak_bytes; /* peak of live requested bytes, in the trace's order */
	uint64_t flags;            /* HT_WL_F_* */
	uint64_t calls[HT_FN_NR];  /* calls per function, as the CALLS section says */
	uint64_t fn_ops[HT_FN_NR]; /* ops per function in the streams, counted by the loader */
	struct ht_wl_thread *threads; /* nthreads */
	char *source;              /* the SOURCE section, NUL-terminated */
	void *map;                 /* the mapping holding the streams */
	size_t map_len;            /* its length */
};

enum { HT_WL_F_MMAP = 1 }; /* the program's own mmaps are in it (convert --mmap) */

/* Reads path; on failure returns NULL with a one-line message naming the
 * file in err. */
struct ht_workload *ht_workload__load(const char *path, char *err, size_t errlen);
/* The same from memory (the fuzz target); name is used in messages. */
struct ht_workload *ht_workload__load_mem(const uint8_t *data, size_t len, const char *name,
					  char *err, size_t errlen);
void ht_workload__free(struct ht_workload *w);

/* Decodes one op at *p (< end): returns the op and its arguments, moves *p;
 * 0 at a malformed op.  The engine uses the unchecked twin in replay.c. */
int ht_wl_decode(const uint8_t **p, const uint8_t *end, uint64_t *args);

/* ---- writing (convert) ---- */

struct ht_wl_writer; /* opaque */

/* Creates path (a temporary next to it until ht_wl_writer__close). */
struct ht_wl_writer *ht_wl_writer__open(const char *path, char *err, size_t errlen);
/* Adds a thread; returns its index. */
uint32_t ht_wl_writer__thread(struct ht_wl_writer *w, uint32_t tid, uint32_t creator);
/* Ops done by thread so far (the count a WAIT on it names). */
uint64_t ht_wl_writer__nops(const struct ht_wl_writer *w, uint32_t thread);
/* Appends an op to the thread's stream. */
void ht_wl_writer__op(struct ht_wl_writer *w, uint32_t thread, int op, const uint64_t *args, int nargs);
/* The thread has ended: its pending ops become a block and its buffer is
 * freed (another op gets a new one), so that memory follows the threads
 * alive, not all that ever ran. */
void ht_wl_writer__idle(struct ht_wl_writer *w, uint32_t thread);
/* Finishes the file: flushes the streams, writes the tables, renames it into
 * place.  Returns 0, or -1 with err set (the file is removed). */
int ht_wl_writer__close(struct ht_wl_writer *w, uint64_t nslots, uint64_t ideal_peak,
			uint64_t flags, const uint64_t *calls, const char *source, char *err,
			size_t errlen);
/* Drops everything written (error paths). */
void ht_wl_writer__abort(struct ht_wl_writer *w);

#endif
