/* Writing a heaptrail trace from user space, outside the traced process
 * (heaptrail attach): the recorder's file layout and record encoding
 * (format.h, record.h), one stream per thread, one SYNC chunk per buffer,
 * CLOCK samples, the index and the closed header.  Timestamps are
 * CLOCK_MONOTONIC nanoseconds (no HT_FILE_F_TSC).
 *
 * The file is written under an unpredictable temporary beside PATH, mode
 * 0600 (common/outfile.h), and renamed to PATH on close, so a
 * failed or aborted run leaves no partial trace behind.  Memory: one
 * buffer per thread seen, the stack nodes written, the chunk index. */
#ifndef HEAPTRAIL_TRACE_WRITER_H
#define HEAPTRAIL_TRACE_WRITER_H

#include <stddef.h>
#include <stdint.h>

struct ht_writer; /* opaque */

/* What goes into the header. */
struct ht_writer_info {
	int32_t pid, ppid;        /* the traced process and its parent */
	const char *cmdline;      /* its argv, NUL-separated (as /proc/PID/cmdline) */
	size_t cmdline_len;       /* bytes of cmdline */
	const char *exe;          /* its executable path */
	uint64_t flags;           /* extra HT_FILE_F_* (SAMPLED, SAMPLE_EVERY) */
	uint32_t sample_every;    /* with HT_FILE_F_SAMPLE_EVERY: 1 in N allocations */
	uint64_t start_brk;       /* where its heap starts, 0 if unknown */
	uint64_t start_mono_ns;   /* CLOCK_MONOTONIC at the start of tracing */
};

/* Creates the temporary; NULL with a one-line message in err on failure. */
struct ht_writer *ht_writer__open(const char *path, const struct ht_writer_info *info,
				  char *err, size_t errlen);

/* A module record (and its build-id, if id_len): written in the first
 * thread's stream (modules of a process may come from any thread). */
void ht_writer__module(struct ht_writer *w, uint64_t base, uint64_t lo, uint64_t hi,
		       const char *path, const uint8_t *build_id, size_t id_len);

/* The stack node of return addresses ips[0..n) (innermost first) in thread
 * tid's stream, writing the frame records it needs; 0 if n is 0. */
uint32_t ht_writer__stack(struct ht_writer *w, uint32_t tid, const uint64_t *ips, size_t n);

/* One event of thread tid at ts (monotonic ns): its decoded values in
 * ht_kind_descs order (pointers as addresses, signed values as int64_t),
 * kind flags HT_F_MMAPPED / HT_F_NONMAIN, and a stack node (0: none). */
int ht_writer__event(struct ht_writer *w, uint32_t tid, unsigned kind, unsigned flags,
		     const uint64_t *vals, uint64_t ts, uint32_t stack);

/* A CLOCK sample (monotonic ns, RSS in KiB or 0). */
void ht_writer__clock(struct ht_writer *w, uint64_t mono_ns, uint64_t rss_kb);

/* Adds HT_FILE_F_* flags to the header close writes (DETACHED). */
void ht_writer__flags(struct ht_writer *w, uint64_t flags);

/* What the header close writes says of the calls not in the trace (its
 * dropped count: readers warn) and of the signal the program died of
 * (HT_FILE_F_SIGNALED and signal; 0: none known). */
void ht_writer__end_notes(struct ht_writer *w, uint64_t dropped, int signal);

/* Flushes everything, writes the index and the closed header, renames
 * the temporary to PATH.  Returns 0, or -1 with a message in err (the temp file
 * is removed).  Frees w either way. */
int ht_writer__close(struct ht_writer *w, uint64_t end_mono_ns, char *err, size_t errlen);

/* Removes the temporary and frees w. */
void ht_writer__abort(struct ht_writer *w);

#endif
