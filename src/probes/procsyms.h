/* Symbols of live processes for the probe commands: the modules a process
 * has mapped (its executable and shared objects, from /proc/PID/maps, with
 * their load bias and build-id), cached per process; each module file
 * (path and build-id) is handed once to the same symbolizer as the offline
 * traces (src/symbols/symbolize.h) and resolves the file addresses of
 * every process that maps it (system-wide, libc is read once, not once per
 * process).
 *
 * A process's map is read the first time one of its addresses is resolved
 * or when ht_procsyms__load is called (do that while it still runs: the
 * probe commands do it when they first see a process, and when -c's command
 * is about to exit); an address outside every module known triggers one
 * reread while the process lives (a library dlopened since).
 *
 * A module file deleted or replaced (another file at its path, an upgrade)
 * since the process mapped it is read through /proc/PID/map_files/LO-HI,
 * the descriptor kept open so that it can still be read after the process
 * exits (ht_procsyms__stale lists them). */
#ifndef HEAPTRAIL_PROBES_PROCSYMS_H
#define HEAPTRAIL_PROBES_PROCSYMS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "symbols/symbolize.h"
#include "trace/reader.h"

struct ht_procsyms; /* opaque */

struct ht_procsyms *ht_procsyms__new(const struct ht_symbol_opts *opts);
void ht_procsyms__free(struct ht_procsyms *ps);

/* (Re)reads pid's memory map.  Returns 0, or -1 if it cannot be read (the
 * process is gone: what was read before is kept).  The modules and code
 * read before that are no longer mapped (a library dlclosed) are kept,
 * marked gone, for the addresses taken while they were. */
int ht_procsyms__load(struct ht_procsyms *ps, pid_t pid);
/* Forgets what was read of pid (it exec'd: its old image's modules would
 * name the new one's addresses). */
void ht_procsyms__forget(struct ht_procsyms *ps, pid_t pid);

/* The frames of return address ip in process pid, innermost first; at
 * least one (unknown ones are named by address).  For the first frame of
 * a stack (an instruction pointer, not a return address) pass is_ip 1.
 * *frames stays valid until the next call. */
size_t ht_procsyms__resolve(struct ht_procsyms *ps, pid_t pid, uint64_t ip, int is_ip,
			    const struct ht_frame **frames);

/* The modules of pid as read (NULL, 0 if never read), for writing them
 * into a trace. */
const struct ht_module *ht_procsyms__modules(struct ht_procsyms *ps, pid_t pid, size_t *n);

/* Whether ip lies in an executable mapping of pid (a file's, anonymous
 * code, the vdso): 1 yes; 0 no (in a mapping that is not code, or where
 * nothing can be mapped); -1 cannot tell (in no mapping: maybe code
 * unmapped since, or the map cannot be read).  An address outside the code
 * known makes the map be read again (code mapped since: a dlopened
 * library), and the modules with it when the code mappings changed, so
 * that they are known while the process still runs.  A stack taken by
 * frame pointers through code built without them goes on with data taken
 * for return addresses: this tells them apart. */
int ht_procsyms__is_code(struct ht_procsyms *ps, pid_t pid, uint64_t ip);

/* The module files found deleted or replaced (another inode at the path)
 * since a process mapped them, read through /proc/PID/map_files while it
 * lived: entry i's path, whether it was deleted (else replaced), whether
 * it could be opened; returns the count (call with i = 0 first). */
size_t ht_procsyms__stale(struct ht_procsyms *ps, size_t i, const char **path, int *deleted,
			  int *readable);

/* Reads a module list from a maps text (as /proc/PID/maps): the file
 * mappings grouped by path, each with its load bias from the ELF program
 * headers and its build-id.  Returns the count; *out is malloc'd, paths
 * too (ht_procsyms__free_modules). */
size_t ht_procsyms__parse_maps(const char *text, struct ht_module **out);
void ht_procsyms__free_modules(struct ht_module *m, size_t n);

#endif
