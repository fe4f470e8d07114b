/* Small helpers shared by the tools: messages, numbers, progress. */
#ifndef HEAPTRAIL_COMMON_UTIL_H
#define HEAPTRAIL_COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes of every command. */
enum { HT_EXIT_OK = 0, HT_EXIT_DATA = 1, HT_EXIT_USAGE = 2 };
/* A command's exit status rc, once its standard output is flushed: a
 * command that succeeded but whose output did not all reach stdout (a
 * full disk, a closed descriptor) says so and fails with HT_EXIT_DATA, as
 * coreutils do; `stats --json > out.json` on a full disk left half an
 * object and exit status 0.  A failed command (rc != 0) has had its say. */
int ht_stdout_done(int rc);

void ht_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ht_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* realloc that exits with HT_EXIT_DATA after "out of memory" on failure
 * (n 0 counts as 1). */
/* Out of memory is the one error library code does not return: the
 * allocators below, and every other allocation failure, end the process
 * here, with one message and HT_EXIT_DATA (docs/ARCHITECTURE.md). */
__attribute__((noreturn)) void ht_oom(void);
void *ht_xrealloc(void *p, size_t n);
void *ht_xmalloc(size_t n);
void *ht_xcalloc(size_t n, size_t size);
/* ht_xcalloc for a hash table: zeroed by writing every byte now.  calloc
 * leaves fresh pages as the shared zero page until they are written, and a
 * table's probes read a page before anything is put in it: each page then
 * faults twice, the second time a copy-on-write that flushes the TLB of
 * every CPU running another thread of the process (report's symbols-ahead
 * thread).  A quarter of report's page faults on gcc's cc1 trace went
 * (13.2k to 10.0k), and the 3% of its time those flushes took. */
void *ht_xzalloc(size_t n, size_t size);
char *ht_xstrdup(const char *s);
/* Array p of *cap elements of elem bytes, made room for need of them
 * (capacity doubled from 16; *cap updated); exits on out of memory, as
 * ht_xrealloc. */
void *ht_grow(void *p, size_t *cap, size_t need, size_t elem);
/* CLOCK_MONOTONIC, in nanoseconds. */
uint64_t ht_clock_ns(void);

/* "12.3 MiB" style; buf needs 32 bytes. */
const char *ht_fmt_bytes(char *buf, uint64_t bytes);
/* "s" after a count of n but one ("%llu block%s"). */
static inline const char *ht_s(uint64_t n)
{
	return n == 1 ? "" : "s";
}
/* "1.234 s", "56.7 ms"; buf needs 32 bytes. */
const char *ht_fmt_ns(char *buf, uint64_t ns);
/* printf's "%.<prec>f" of v (prec 0..6), the same bytes at a fraction of
 * the cost for values below 1e12; returns the end (NUL-terminated), buf
 * needs 32 bytes.  Returns NULL, with nothing written, for the rest (NaN,
 * infinities, larger values, other precisions): printf them. */
char *ht_fmt_fixed(char *buf, double v, int prec);
/* fprintf for the drawing code's many coordinates: the same output, for
 * formats made only of %.Nf (N 0..6, by ht_fmt_fixed), %d, %u, %llu, %c,
 * %s and %%. */
void ht_fputf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses "1.5s", "200ms", "30us", "100ns", "2m", "1h"; plain numbers are seconds.
 * Returns 0 on success. */
int ht_parse_duration(const char *s, uint64_t *ns);
/* FNV-1a of a string (NULL counts as empty) on top of h, its end mixed in. */
uint64_t ht_hash_str(uint64_t h, const char *s);
/* For a "did you mean" hint: the one of names[0..n) (NULLs skipped) that
 * word[0..len) mistypes: within one edit (insert, delete, change, swap of
 * two neighbours), two in a word of 5 letters or more, and nearer than
 * any other; else the only name word begins (2 letters or more); NULL if
 * none or several. */
const char *ht_nearest_name(const char *word, size_t len, const char *const *names, size_t n);
/* A file name as one shell word, in place, for messages that name it (and
 * suggest a command with it, which must paste as one argument): quoted as
 * common/shellword.h says (the preload library's messages quote so too).
 * Cut to cap (the word unusable then, the line still one). */
void ht_shell_word_inplace(char *s, size_t cap);
/* "SIGSEGV" for 11 (into buf, 16 bytes), "signal N" if it has no name. */
const char *ht_signal_name(int sig, char *buf);
/* The message for a file that could not be opened (errno e): "PATH: cannot
 * open: REASON", except for a "-" that does not exist, which users give
 * for standard input (`cat app.ht | heaptrail stats -`): WHAT ("trace",
 * "workload") files are read from regular files, said so. */
void ht_open_error(char *err, size_t errlen, const char *path, int e, const char *what);
/* Parses "4096", "64K", "1M", "2G". Returns 0 on success. */
int ht_parse_size(const char *s, uint64_t *out);

/* A progress line on stderr for work that lasts: shown only when stderr
 * is a terminal, once the work has run for a second (HEAPTRAIL_PROGRESS_AFTER
 * milliseconds, 1000 by default), at most ten times a second, and never
 * after -q (ht_progress_off, set by the option parser).  done and total
 * are bytes (the percent of the file and the size), items what was read
 * (events: the count and the rate), 0 if not counted.  The second and the
 * rate count from the latest ht_progress_start() (the command's start, or
 * the start of a step that follows other work: record's end step), or
 * else from the first call.  ht_progress_done() clears the line. */
extern int ht_progress_off;
/* -q was given: warnings about a trace's state are left out. */
extern int ht_quiet;
/* -j N of the commands that read a trace: threads the reader uses (the
 * caller's and N - 1 that decode), 0 one per CPU the process may run on;
 * -1 (not given): HEAPTRAIL_THREADS, else 1 (trace/reader_par.c). */
extern int ht_threads;
#define HT_THREADS_MAX 1024
/* Parses a thread count for -j and HEAPTRAIL_THREADS: 0 (one per CPU) to
 * HT_THREADS_MAX; 0 on success, -1 if s is anything else. */
int ht_parse_threads(const char *s, int *out);
void ht_progress_start(void);
void ht_progress(const char *what, uint64_t done, uint64_t total, uint64_t items,
		 const char *unit);
void ht_progress_done(void);
/* From a signal handler that ends the process: clears the progress line
 * if one is shown (async-signal-safe), so that the shell's next output
 * does not run on after it. */
void ht_progress_clear_sig(void);

/* Reads a whole file of at most max bytes, NUL-terminated (*len without
 * the NUL); NULL after a one-line error naming the file. */
char *ht_read_file(const char *path, size_t max, size_t *len);
/* The same, NULL with that line in err instead of printed. */
char *ht_read_file_err(const char *path, size_t max, size_t *len, char *err, size_t errlen);

/* Directory of the running executable (for finding libheaptrail.so). */
int ht_self_dir(char *buf, size_t len);
/* The directory of path into dir ("/" for a file at the root, "." for a
 * bare name); returns where its last component begins in path. */
const char *ht_split_path(const char *path, char *dir, size_t cap);

#endif
