/* heaptrail trace format (.ht): on-disk structures shared by the recorder
 * (src/preload) and the reader (src/trace/reader.c).  docs/FORMAT.md is the
 * prose version of this file; keep the two in step.
 *
 * File = header (struct ht_file_header, then cmdline/exe strings)
 *      + a stream of chunks (struct ht_chunk_header + zstd frame)
 *      + on a clean close: an index chunk and a patched header.
 *
 * Events live in per-thread byte streams.  A stream is cut into chunks by
 * the recorder; every recorder buffer starts with an HT_EV_SYNC record that
 * resets the delta state, so a reader can start decoding at any chunk whose
 * HT_CHUNK_F_SYNC flag is set.  All integers are little endian.
 */
#ifndef HEAPTRAIL_TRACE_FORMAT_H
#define HEAPTRAIL_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../common/readsmall.h"

#define HT_MAGIC "HEAPTRL\0"       /* 8 bytes at offset 0 */

/* Whether the regular file open on fd, of size bytes, may be taken for a
 * trace's place (kept as OUTPUT.old by a new recording): it starts with
 * HT_MAGIC, or is empty (a recorder killed before its header).  Anything
 * else, the user's own file named by a mistyped -o, is never moved nor
 * replaced (record's refuse_output, the recorder's open_output). */
static inline int ht_file_is_trace(int fd, uint64_t size)
{
	char magic[8];
	return size == 0 || (ht_pread_full(fd, magic, sizeof(magic), 0) == 0 &&
			     memcmp(magic, HT_MAGIC, sizeof(magic)) == 0);
}
#define HT_VERSION 6               /* bumped on any incompatible change */
#define HT_VERSION_MIN 1           /* oldest version readers still decode */

/* The recorder's writer thread ticks an epoch this often; a thread's first
 * malloc/free after a tick takes the clock (see "timestamp" below). */
#define HT_EPOCH_MS 10
#define HT_CHUNK_MAGIC 0x4b435448u /* "HTCK" little endian */

/* Sections of the file header, perf-style {offset,size} pairs.  CHUNKS and
 * INDEX are zero-sized until a clean close patches them in. */
enum ht_section {
	HT_SEC_CMDLINE = 0, /* NUL-separated argv of the traced program */
	HT_SEC_EXE,         /* path of the executable (readlink /proc/self/exe) */
	HT_SEC_CHUNKS,      /* the chunk stream (size patched on close) */
	HT_SEC_INDEX,       /* index chunk (patched on close; 0 = scan chunks) */
	HT_SEC_ALLOCATOR,   /* with HT_FILE_F_OTHER_ALLOCATOR: the path of the library
			     * that served the malloc API, between EXE and CHUNKS */
	HT_SEC_NR = 8,      /* room for later sections; readers ignore unknown */
};

struct ht_section_ref {
	uint64_t offset; /* byte offset in the file */
	uint64_t size;   /* size in bytes; 0 = absent */
};

/* File flags. */
#define HT_FILE_F_CLOSED 0x1     /* set when the recorder closed cleanly */
#define HT_FILE_F_SAMPLED 0x2    /* events are a sample (counts scaled) */
#define HT_FILE_F_TSC 0x4        /* timestamps are TSC ticks, else ns */
#define HT_FILE_F_DISK_FULL 0x8  /* recording stopped on a write error */
#define HT_FILE_F_ORPHANED 0x10  /* closed by the writer process after the traced
				  * process ended without closing (killed, crashed) */
#define HT_FILE_F_DURATIONS 0x20 /* (version 5) record --durations: every malloc-API
				  * call is timed (a DURATION record before it) */
#define HT_FILE_F_SAMPLE_EVERY 0x40 /* with SAMPLED: 1 in sample_every allocation
				     * calls was traced (heaptrail attach --sample) */
#define HT_FILE_F_ORDERED 0x80   /* every malloc-API event whose previous event on the
				  * same address was recorded by another thread took
				  * its own timestamp: merging the threads by
				  * (timestamp, tid, seq) is exact, no causal holds
				  * (docs/FORMAT.md, "Ordering guarantee") */
#define HT_FILE_F_FORK_CHILD 0x100 /* the trace of a fork child: it may free blocks its
				    * parent allocated before the fork */
#define HT_FILE_F_OTHER_ALLOCATOR 0x200 /* the malloc API was served by another allocator
					 * than glibc's (section ALLOCATOR names it):
					 * usable sizes are its malloc_usable_size(), and
					 * no block has glibc's chunk flags */
#define HT_FILE_F_EXIT_SYSCALL 0x400 /* with ORPHANED: the program exited with a status,
				      * not by a signal (record saw it), without exit()
				      * or _exit(): the exit_group system call itself, as
				      * Go's runtime does.  Nothing was lost */
#define HT_FILE_F_DETACHED 0x1000 /* with CLOSED: written by heaptrail attach, which
				   * stopped tracing while the process still ran: what
				   * is live at the end was live then, not at exit */
#define HT_FILE_F_SIGNALED 0x800 /* with CLOSED: the recorder closed the trace in its
				  * handler of a fatal signal the program left to its
				  * default action (the header's `signal`), and the
				  * program died of it: a crash, an abort, a SIGTERM or
				  * SIGINT.  What was live then was never freed, but not
				  * "at exit" */
#define HT_FILE_F_NAMESPACE 0x2000 /* the program loaded a library with dlmopen()
				    * into a link-map namespace of its own, whose C
				    * library served the calls made there: they are
				    * not in the trace.  Readers warn */
/* written by heaptrail attach (uprobes): its dropped calls are the ones it
 * did not trace (--max-blocks, its ring buffer full) */
#define HT_FILE_F_PROBED 0x4000

struct ht_file_header {
	char magic[8];            /* HT_MAGIC */
	uint32_t version;         /* HT_VERSION */
	uint32_t header_size;     /* sizeof(struct ht_file_header) */
	uint64_t flags;           /* HT_FILE_F_* */
	int32_t pid;              /* traced process */
	int32_t ppid;             /* its parent (fork children: the tracer's parent) */
	uint64_t start_realtime_ns; /* CLOCK_REALTIME at start */
	uint64_t start_mono_ns;   /* CLOCK_MONOTONIC at start */
	uint64_t start_ts;        /* timestamp counter at start */
	uint64_t ts_hz;           /* estimated timestamp ticks per second */
	uint64_t end_ts;          /* timestamp at close (0 if not closed) */
	uint64_t end_mono_ns;     /* CLOCK_MONOTONIC at close */
	uint64_t events;          /* events written (0 if not closed) */
	uint64_t dropped;         /* events lost (tracer disabled, disk full) */
	uint32_t nthreads;        /* threads seen (0 if not closed) */
	uint32_t sample_bytes;    /* mean bytes between samples, 0 = all */
	uint64_t start_brk;       /* where the heap starts (kernel's start_brk) */
	uint32_t sample_every;    /* HT_FILE_F_SAMPLE_EVERY: 1 in N allocations, else 0 */
	uint32_t signal;          /* HT_FILE_F_SIGNALED: the signal, else zero (reserved, zero,
				   * before) */
	uint64_t writer_cpu_ns;   /* CPU time of the writer process that wrote the file
				   * (the recorder's helper, a child of the program),
				   * 0 if not one or not known (format 5; zero before) */
	uint32_t stack_depth;     /* record --stacks: the most frames a stack keeps, 0 without
				   * stacks or not known (format 5; zero before) */
	uint32_t reserved32;      /* zero */
	uint64_t reserved[2];     /* zero */
	struct ht_section_ref sec[HT_SEC_NR];
};

/* The layout every writer of a trace gives its header (the recorder's
 * writer.c and attach's trace/writer.c): magic, version, size, flags,
 * process, and the sections: the command line (cmdline_len bytes) and
 * the executable's path (exe_len bytes, its NUL included) right after the
 * header, the chunks after them.  The times and counters are the
 * writer's to fill. */
static inline void ht_file_header__init(struct ht_file_header *h, uint64_t flags, int32_t pid,
					int32_t ppid, uint64_t cmdline_len, uint64_t exe_len)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, HT_MAGIC, 8);
	h->version = HT_VERSION;
	h->header_size = sizeof(*h);
	h->flags = flags;
	h->pid = pid;
	h->ppid = ppid;
	h->sec[HT_SEC_CMDLINE].offset = sizeof(*h);
	h->sec[HT_SEC_CMDLINE].size = cmdline_len;
	h->sec[HT_SEC_EXE].offset = sizeof(*h) + cmdline_len;
	h->sec[HT_SEC_EXE].size = exe_len;
	h->sec[HT_SEC_CHUNKS].offset = sizeof(*h) + cmdline_len + exe_len;
}

/* Puts a section of len bytes right before the chunks (after those
 * ht_file_header__init placed). */
static inline void ht_file_header__add(struct ht_file_header *h, int sec, uint64_t len)
{
	h->sec[sec].offset = h->sec[HT_SEC_CHUNKS].offset;
	h->sec[sec].size = len;
	h->sec[HT_SEC_CHUNKS].offset += len;
}

/* Chunk types. */
enum ht_chunk_type {
	HT_CHUNK_EVENTS = 1, /* one thread's events */
	HT_CHUNK_CLOCK = 2,  /* raw payload: struct ht_clock_sample */
	HT_CHUNK_INDEX = 3,  /* raw payload: struct ht_index_entry[] */
};

#define HT_CHUNK_F_SYNC 0x1  /* payload starts with an HT_EV_SYNC record */
#define HT_CHUNK_F_ZSTD 0x2  /* payload is one zstd frame (else raw) */
#define HT_CHUNK_F_COLUMNS 0x4 /* (version 3) the (decompressed) payload is
				* column-coded records: struct ht_col_header,
				* then the columns (docs/FORMAT.md, "Column
				* coding"); raw_size is the size of that */
#define HT_CHUNK_F_STORED 0x8 /* with HT_CHUNK_F_ZSTD: the frame is stored
			       * (raw blocks and the content checksum, no
			       * compression: common/zstored.h), written so by
			       * a writer that had no CPU to compress; `record`'s
			       * end step and compact compress it.  Readers
			       * that know nothing of it decompress it as any
			       * frame */

struct ht_chunk_header {
	uint32_t magic;      /* HT_CHUNK_MAGIC */
	uint16_t type;       /* enum ht_chunk_type */
	uint16_t flags;      /* HT_CHUNK_F_* */
	uint32_t tid;        /* thread of an EVENTS chunk, 0 otherwise */
	uint32_t nevents;    /* events in the payload */
	uint32_t comp_size;  /* payload bytes in the file */
	uint32_t raw_size;   /* payload bytes once decompressed */
	uint64_t first_seq;  /* per-thread sequence number of the first event */
};

/* A (ts, monotonic ns) pair taken by the recorder's writer thread at every
 * flush, and RSS samples in between (HEAPTRAIL_RSS_INTERVAL); readers fit
 * ts -> ns from the first and last of them.  A CLOCK chunk holds one, or
 * up to HT_MAX_CLOCK_SAMPLES in time order (the samples taken between two
 * flushes). */
#define HT_MAX_CLOCK_SAMPLES 4096
struct ht_clock_sample {
	uint64_t ts;      /* timestamp counter */
	uint64_t mono_ns; /* CLOCK_MONOTONIC */
	uint64_t rss_kb;  /* resident set size of the process then */
};

struct ht_index_entry {
	uint64_t offset;    /* of the chunk header */
	uint32_t tid;       /* as in the chunk header */
	uint32_t nevents;   /* as in the chunk header */
	uint64_t first_seq; /* as in the chunk header */
	uint16_t type;      /* as in the chunk header */
	uint16_t flags;     /* as in the chunk header */
	uint32_t reserved;  /* zero */
};

/* Columns of a column-coded chunk, in the order they follow the header. */
enum ht_col {
	HT_COL_KIND = 0, /* the kind byte of every record (and an escape's byte) */
	HT_COL_UINT,     /* 'u' fields, LEB128 */
	HT_COL_PTR,      /* 'p' fields as pointer codes, LEB128 */
	HT_COL_TIME,     /* the timestamp field, LEB128 */
	HT_COL_SLACK,    /* 'U' fields, LEB128 */
	HT_COL_OTHER,    /* 's', 'd' fields, string lengths, stack ids, LEB128 */
	HT_COL_STR,      /* string bytes */
	HT_COL_NR,
};

#define HT_COL_MAGIC 0x4c4f4348u /* "HCOL" little endian */
#define HT_COL_MRU 4             /* recent allocations a pointer code can name */

struct ht_col_header {
	uint32_t magic;          /* HT_COL_MAGIC */
	uint32_t rec_bytes;      /* bytes of the records the columns decode to */
	uint32_t nrec;           /* records, SYNC and TICK included */
	uint32_t len[HT_COL_NR]; /* bytes of each column */
};

/* Largest chunk payload a reader accepts (a recorder buffer is 64 KiB). */
#define HT_MAX_CHUNK_RAW (4u << 20)

/* ---- Event records -------------------------------------------------------
 * A record is laid out so that the recorder can write it without a single
 * data-dependent branch:
 *   kind byte   low 5 bits kind, high 3 bits flags; kind 31 (version 4)
 *               is an escape: the kind is 32 + the next byte
 *   tag         4 bits per value: its length in bytes, 0..8 (a zero value
 *               takes no bytes at all); fields in descriptor order, then
 *               the timestamp field, then with HT_F_STACK the stack node
 *               id, packed low nibble first into ceil(nvalues / 2) bytes
 *   fields      each as that many little-endian bytes, in that order
 *   string      for an 'S' field: its value is the length, the bytes follow
 *               the fields
 * Field codes (ht_kind_desc.fields):
 *   'u' unsigned value           's' signed value, zigzag encoded
 *   'p' pointer: zigzag of (value - previous pointer of the thread); the
 *       thread's previous pointer becomes value
 *   'U' usable-size slack (version 2): for a block glibc did not mmap,
 *       zigzag(usable - ht_glibc_usable(requested)), 0 in the common case
 *       where glibc's rounding alone explains the usable size; for an
 *       mmapped block usable - requested; 0 when there is no block.
 *       (version 1: usable - requested, or 0 when not larger)
 *   'S' string of at most HT_MAX_STR bytes (value = length)
 *   'd' duration: timestamp ticks the call took (the record's timestamp is
 *       its end; end - d is when it started)
 * timestamp   (version 2) 0 = not taken: the event is dated by the thread's
 *             previous timestamp; else the delta from it, plus 1.  The
 *             recorder takes the clock on every event but malloc and free,
 *             and on those every HEAPTRAIL_TIMESTAMP_EVERY-th call, on the
 *             first call after an epoch tick and on mmapped blocks.
 *             (version 1: always the delta.)
 * HT_EV_SYNC carries an absolute timestamp instead of a delta and resets the
 * previous pointer to 0; its field is the sequence number of the next event.
 * HT_EV_TICK only moves the thread's timestamp on (reserved for recorders
 * that keep the delta field narrow).  Neither SYNC nor TICK is an event.
 */
enum ht_kind {
	HT_EV_SYNC = 0,           /* seq(u) ; ts is absolute */
	HT_EV_MALLOC = 1,         /* size(u) -> ptr(p) usable(U) */
	HT_EV_FREE = 2,           /* ptr(p) */
	HT_EV_CALLOC = 3,         /* nmemb(u) size(u) -> ptr(p) usable(U) */
	HT_EV_REALLOC = 4,        /* old(p) size(u) -> ptr(p) usable(U) dur(d) */
	HT_EV_REALLOCARRAY = 5,   /* old(p) nmemb(u) size(u) -> ptr(p) usable(U) dur(d) */
	HT_EV_MEMALIGN = 6,       /* align(u) size(u) -> ptr(p) usable(U) */
	HT_EV_POSIX_MEMALIGN = 7, /* align(u) size(u) -> ptr(p) ret(s) usable(U) */
	HT_EV_ALIGNED_ALLOC = 8,  /* align(u) size(u) -> ptr(p) usable(U) */
	HT_EV_VALLOC = 9,         /* size(u) -> ptr(p) usable(U) */
	HT_EV_PVALLOC = 10,       /* size(u) -> ptr(p) usable(U) */
	HT_EV_MALLOPT = 11,       /* param(s) value(s) -> ret(s) */
	HT_EV_MALLOC_TRIM = 12,   /* pad(u) -> ret(s) */
	HT_EV_MMAP = 13,          /* addr(p) len(u) prot(s) flags(s) fd(s) off(s) -> ptr(p) */
	HT_EV_MUNMAP = 14,        /* addr(p) len(u) -> ret(s) */
	HT_EV_MREMAP = 15,        /* old(p) oldlen(u) newlen(u) flags(s) newaddr(p) -> ptr(p) dur(d) */
	HT_EV_BRK = 16,           /* addr(p) -> ret(s) */
	HT_EV_SBRK = 17,          /* incr(s) -> ptr(p) */
	HT_EV_SHMGET = 18,        /* key(s) size(u) flags(s) -> id(s) */
	HT_EV_SHMAT = 19,         /* id(s) addr(p) flags(s) -> ptr(p) */
	HT_EV_SHMDT = 20,         /* addr(p) -> ret(s) */
	HT_EV_SHMCTL = 21,        /* id(s) cmd(s) -> ret(s) */
	HT_EV_HEAP_BREAK = 22,    /* new program break after the thread's last call (p) */
	HT_EV_THREAD_START = 23,  /* creator tid(u) (0 = unknown / main) */
	HT_EV_THREAD_EXIT = 24,   /* (none) */
	HT_EV_THREAD_NAME = 25,   /* name(S) */
	HT_EV_MARK = 26,          /* label(S) from heaptrail_mark() */
	HT_EV_CONTROL = 27,       /* op(u): enum ht_control_op */
	HT_EV_FORK = 28,          /* child pid(s), in the parent after fork() */
	HT_EV_EXEC = 29,          /* path(S), just before an exec call; after one that
				   * failed, a second exec whose path is
				   * HT_EXEC_FAILED_PREFIX "ENOENT)" (the outcome) */
	HT_EV_TICK = 30,          /* ticks(u): advances the thread's timestamp; not an event */
	HT_EV_EXT = 31,           /* escape (version 4): the kind is 32 + the next byte */
	/* Extended kinds (version 4), written as HT_EV_EXT and a byte.  None of
	 * them is an event (no sequence number): they describe stacks and the
	 * modules their addresses belong to. */
	HT_EV_FRAME = 32,         /* id(u) parent(u) ip(u): stack node id of this thread =
				   * the return address ip called from node parent (0 = root) */
	HT_EV_MODULE = 33,        /* base(u) lo(u) hi(u) path(S): an object mapped at load
				   * bias base, its segments spanning [lo, hi) */
	HT_EV_BUILD_ID = 34,      /* base(u) id(S): the GNU build-id of the module at base */
	HT_EV_MODULE_GONE = 35,   /* base(u): the module at base was unmapped (dlclose) */
	HT_EV_DURATION = 36,      /* (version 5) ticks(u): how long the call of the thread's
				   * next event took, from before the real call to after it
				   * (record --durations); readers set ht_event.duration */
	HT_EV_NR = 37,
};

/* The path of the exec event that says the exec before it in the thread
 * failed: this, the errno's name (or "errno N") and ")".  An exec event,
 * not a kind of its own, so that readers that do not know it show it as
 * the exec of a path in parentheses, like fexecve's "(fd)", and read on
 * (a new kind stops them: "unknown event kind"). */
#define HT_EXEC_FAILED_PREFIX "(failed: "

/* Whether a kind is an event (has a sequence number), not a pseudo-record. */
static inline int ht_kind_is_event(unsigned kind)
{
	return kind != 0 && kind != 30 && kind < 31;
}

/* Flags in the high bits of the kind byte. */
#define HT_KIND_MASK 0x1f
#define HT_F_MMAPPED 0x20  /* glibc chunk header: block was mmapped */
#define HT_F_NONMAIN 0x40  /* glibc chunk header: block is in a non-main arena */
#define HT_F_STACK 0x80    /* (version 4) a stack node id follows the timestamp field */

/* Short records (version 6): a kind byte with both HT_F_MMAPPED and
 * HT_F_NONMAIN set, which no recorder writes for a record of its own (an
 * mmapped block is in no arena), is a malloc or free record of the
 * commonest shape in one byte, without tag or timestamp field: no stack,
 * not mmapped, no clock read, and for malloc a slack of 0 (docs/FORMAT.md,
 * "Short records").
 *   malloc: 0x60 | N << 3 | (size bytes - 1) << 2 | ptr bytes (0..3),
 *           then size (1..2 bytes) and the pointer delta;
 *   free:   0x70 | N << 3 | ptr bytes (0..7), then the pointer delta;
 * N is HT_F_NONMAIN.  0xe0..0xff (HT_F_STACK with both) are invalid. */
#define HT_SHORT 0x60           /* kb & HT_SHORT == HT_SHORT: a short record */
#define HT_SHORT_FREE 0x10      /* free, else malloc */
#define HT_SHORT_NONMAIN 0x08   /* HT_F_NONMAIN of the long form */
#define HT_VERSION_SHORT 6      /* first version with short records */

/* Whether a malloc record of these stored values is written short:
 * flags (HT_F_*), size and pointer-delta lengths, slack and timestamp
 * fields.  The recorder and ht_rec__encode both follow this one rule, so
 * that a record decoded and encoded again is the same bytes. */
static inline int ht_short_malloc_ok(unsigned flags, unsigned csize, unsigned cptr, uint64_t slack,
				     uint64_t tsf)
{
	return !(flags & (HT_F_MMAPPED | HT_F_STACK)) && csize - 1u < 2u && cptr <= 3 &&
	       (slack | tsf) == 0;
}

static inline int ht_short_free_ok(unsigned flags, unsigned cptr, uint64_t tsf)
{
	return !(flags & (HT_F_MMAPPED | HT_F_STACK)) && cptr <= 7 && tsf == 0;
}

/* The one byte of a short record, its values after it (8-byte stores:
 * the caller's buffer has the slack of HT_MAX_RECORD); returns the end. */
static inline uint8_t *ht_put_short_malloc(uint8_t *o, unsigned flags, uint64_t size,
					   unsigned csize, uint64_t pd, unsigned cptr)
{
	o[0] = (uint8_t)(HT_SHORT | (flags & HT_F_NONMAIN) >> 3 | (csize - 1) << 2 | cptr);
	memcpy(o + 1, &size, 8);
	o += 1 + csize;
	memcpy(o, &pd, 8);
	return o + cptr;
}

static inline uint8_t *ht_put_short_free(uint8_t *o, unsigned flags, uint64_t pd, unsigned cptr)
{
	o[0] = (uint8_t)(HT_SHORT | HT_SHORT_FREE | (flags & HT_F_NONMAIN) >> 3 | cptr);
	memcpy(o + 1, &pd, 8);
	return o + 1 + cptr;
}

enum ht_control_op {
	HT_CTL_START = 1,  /* heaptrail_start() */
	HT_CTL_STOP = 2,   /* heaptrail_stop() */
	HT_CTL_PAUSE = 3,  /* heaptrail_pause() or SIGUSR2 */
	HT_CTL_RESUME = 4, /* heaptrail_resume() or SIGUSR2 */
	HT_CTL_RESET = 5,  /* heaptrail_reset(): analyzers forget earlier blocks */
	HT_CTL_SYNC = 6,   /* heaptrail_sync(): a flush point */
};

#define HT_MAX_STR 255 /* longest string field */
#define HT_MAX_FIELDS 7

struct ht_kind_desc {
	const char *name;   /* as printed by dump and used by --kind */
	const char *fields; /* field codes, see above */
	const char *names;  /* field names, comma separated (dump, JSON) */
	int result;         /* index of the result field in fields, -1 none */
	int is_alloc;       /* returns a heap block (has a usable-size slack) */
};

/* Defined in src/trace/kinds.c (linked into both the recorder and tools). */
extern const struct ht_kind_desc ht_kind_descs[HT_EV_NR];

/* Worst-case encoded size of one record, strings included, plus the 8
 * bytes of slack the unconditional 8-byte field stores need. */
#define HT_MAX_RECORD (2 + 5 + (HT_MAX_FIELDS + 2) * 8 + HT_MAX_STR + 8)

/* Bytes needed for v (0..8), without a data-dependent branch.  LZCNT
 * makes it three instructions; ht_lzcnt says whether the CPU has it (set
 * once at start-up by the recorder; LZCNT decodes as BSR on CPUs without
 * it, which would give wrong lengths). */
extern int ht_lzcnt;
static inline unsigned ht_len_bytes(uint64_t v)
{
#if defined(__x86_64__)
	if (__builtin_expect(ht_lzcnt, 1)) {
		uint64_t z;
		__asm__("lzcnt %1, %0" : "=r"(z) : "rm"(v) : "cc");
		return (unsigned)(71 - z) >> 3;
	}
#endif
	unsigned n = (unsigned)(64 - __builtin_clzll(v | 1) + 7) >> 3;
	return n - (v == 0);
}

/* Stores all 8 bytes of v (little endian host) and advances by len. */
static inline uint8_t *ht_put_field(uint8_t *p, uint64_t v, unsigned len)
{
	memcpy(p, &v, 8);
	return p + len;
}

static inline uint64_t ht_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* The usable size glibc gives a request of n bytes from an arena chunk:
 * n plus the 8-byte size field, rounded up to 16, at least 32 bytes, less
 * the size field (mod 2^64 for absurd n, the same on both sides). */
static inline uint64_t ht_glibc_usable(uint64_t n)
{
	uint64_t c = (n + 8 + 15) & ~(uint64_t)15;
	return (c < 32 ? 32 : c) - 8;
}

static inline int64_t ht_unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Unsigned LEB128 (column chunks, workloads): 7 bits a byte, the low ones
 * first, the high bit set on every byte but the last; at most 10 bytes.
 * Returns the byte after the last one written. */
static inline uint8_t *ht_leb128_put(uint8_t *o, uint64_t v)
{
	while (v >= 0x80) {
		*o++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*o++ = (uint8_t)v;
	return o;
}

/* The usable size of a block from its request and its 'U' field. */
static inline uint64_t ht_usable_of(uint32_t version, unsigned kind_flags, uint64_t req,
				    uint64_t slack)
{
	if (version < 2 || (kind_flags & HT_F_MMAPPED))
		return req + slack;
	return ht_glibc_usable(req) + (uint64_t)ht_unzigzag(slack);
}

/* Bytes of the tag for a record of nfields descriptor fields. */
static inline unsigned ht_tag_bytes(unsigned nfields)
{
	return (nfields + 2) / 2;
}

#endif
