/* Writing an output file, the one way every command does it
 * (docs/output-files.md).
 *
 * ht_out__open creates a temporary beside the destination, named
 * DEST.tmp-XXXXXX with a random suffix, by open(O_CREAT|O_EXCL|O_NOFOLLOW)
 * with the mode asked for: nothing planted at a predictable name (a
 * symlink, a file) is followed, truncated or in the way.  ht_out__commit
 * renames it to DEST, which replaces whatever DEST was; readers of DEST
 * see the old file or the whole new one, never a part.  ht_out__abort
 * removes it.  A symlink at DEST is refused (ht_out__check); one planted
 * after that is replaced by the rename, not followed.
 *
 * Live temporaries are listed in a small signal-safe registry: on SIGINT,
 * SIGTERM or SIGHUP (when the signal's action was the default one) they
 * are removed and the process dies of the signal as it would have.
 *
 * A destination that is a character device or a FIFO (`-o /dev/null`, a
 * named pipe) is written to itself: a rename would replace the device node
 * with a file (as root, /dev/null itself).  A block device or a socket is
 * refused.
 *
 * A destination or temporary longer than PATH_MAX is an error, never a
 * truncated name. */
#ifndef HEAPTRAIL_COMMON_OUTFILE_H
#define HEAPTRAIL_COMMON_OUTFILE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Modes: what the file holds decides who may read it. */
#define HT_OUT_PRIVATE 0600 /* traces, workloads, exports: addresses, command lines */
#define HT_OUT_PUBLIC  0666 /* reports and pictures (less the umask: 0644 usually) */

/* Flags of ht_out__open. */
#define HT_OUT_STDOUT 1u /* a NULL path is standard output */
#define HT_OUT_DASH   2u /* "-" is standard output */
#define HT_OUT_FD     4u /* no FILE: the caller writes to fd (write, pwrite) */
#define HT_OUT_SYNC   8u /* fsync before the rename */
#define HT_OUT_DATA   16u /* a trace or a workload: may replace one (other outputs
			   * refuse to: an export or a page written over the trace
			   * it was made from, -o naming the input) */

struct ht_out {
	FILE *f;    /* the stream (stdout for standard output; NULL with HT_OUT_FD) */
	int fd;	    /* its descriptor */
	char *path; /* the destination; NULL for standard output */
	char *tmp;  /* the temporary, until commit or abort */
	unsigned flags;
	int slot;   /* in the registry, -1 if none */
	int direct; /* path is a character device or a FIFO (/dev/null): written
		     * to itself, no temporary (a rename would replace the node) */
};

/* Opens the temporary for path (see above).  0, or -1 with a one-line
 * message in err ("cannot write PATH: why") and errno set. */
int ht_out__open(struct ht_out *o, const char *path, mode_t mode, unsigned flags, char *err,
		 size_t errlen);
/* Whether path may be written: -1 (with the message and errno ELOOP) if
 * it is a symbolic link, which ht_out__open refuses too, or if it is a
 * directory, or one where no file can be made (a character device or a
 * FIFO needs neither: it is written to itself); for commands that open
 * their output only at the end, to refuse at the start. */
int ht_out__check(const char *path, char *err, size_t errlen);
/* Whether the output path (NULL: none) names a file NAME.ext (ext with its
 * dot): the commands that write several formats take the one the name
 * says when no flag chose (diff -o NAME.svg, timeline -o NAME.csv...). */
int ht_out__named(const char *path, const char *ext);
/* ht_out__check for a command that writes a trace or a workload
 * (HT_OUT_DATA), which may replace one (attach -o). */
int ht_out__check_data(const char *path, char *err, size_t errlen);
/* Flushes (and with HT_OUT_SYNC fsyncs), closes and renames the temporary
 * into place.  0, or -1 with a message in err and the temporary removed.
 * For standard output: flushes it and checks for errors. */
int ht_out__commit(struct ht_out *o, char *err, size_t errlen);
/* Closes and removes the temporary, if any; safe after commit and twice. */
void ht_out__abort(struct ht_out *o);
/* Removes every temporary being written now, from a signal handler of
 * the command's own (async-signal-safe): the registry's handler does it
 * for commands that have none. */
void ht_out__unlink_live(void);
/* Catches SIGINT, SIGTERM and SIGHUP where their action is still the
 * default: the handler removes the temporaries, clears a progress line
 * (ht_progress_clear_sig) and ends the process with the signal. */
void ht_out__catch_signals(void);
/* Whether o writes to standard output. */
static inline int ht_out__is_stdout(const struct ht_out *o)
{
	return o->f == stdout && !o->tmp;
}

#endif
