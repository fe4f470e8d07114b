/* The functions an ELF file defines, as file offsets (where a uprobe
 * goes), and the path under which a process's mapped file is opened. */
#ifndef HEAPTRAIL_SYMBOLS_ELFSYMS_H
#define HEAPTRAIL_SYMBOLS_ELFSYMS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The file to open for a module path of process pid: the path itself, or
 * under /proc/PID/root when the process sees another file system.  Returns
 * buf. */
const char *ht_proc__file(pid_t pid, const char *path, char *buf, size_t len);

/* The file offset of the function called name that the ELF file path
 * defines (dynamic symbols first, then the symbol table), for a uprobe.
 * Returns 0 and sets *off, or -1 if the file does not define it. */
int ht_elf__func_offset(const char *path, const char *name, uint64_t *off);

#endif
