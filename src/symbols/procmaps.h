/* The modules of a running process, from /proc/PID/maps and the mapped
 * files' program headers: load bias, span and build-id, as the recorder
 * writes them in MODULE records, so that live addresses are symbolized by
 * the same code as a trace's (symbolize.h).  And the functions an ELF file
 * defines, as file offsets (where a uprobe goes). */
#ifndef HEAPTRAIL_SYMBOLS_PROCMAPS_H
#define HEAPTRAIL_SYMBOLS_PROCMAPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "trace/reader.h"

/* The modules of a process. */
struct ht_proc_modules {
	struct ht_module *mods; /* path strings owned by this object */
	size_t n;               /* how many */
};

/* Reads /proc/PID/maps and every ELF file mapped from it.  Returns 0, or -1
 * with a one-line message in err (no such process, not allowed). */
int ht_proc_modules__read(pid_t pid, struct ht_proc_modules *pm, char *err, size_t errlen);
void ht_proc_modules__free(struct ht_proc_modules *pm);

/* The file to open for a module path of process pid: the path itself, or
 * under /proc/PID/root when the process sees another file system.  Returns
 * buf. */
const char *ht_proc__file(pid_t pid, const char *path, char *buf, size_t len);

/* The file offset of the function called name that the ELF file path
 * defines (dynamic symbols first, then the symbol table), for a uprobe.
 * Returns 0 and sets *off, or -1 if the file does not define it. */
int ht_elf__func_offset(const char *path, const char *name, uint64_t *off);

#endif
