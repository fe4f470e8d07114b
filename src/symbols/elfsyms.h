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
 * Returns 0 and sets *off (and *size, the function's bytes, 0 if unknown,
 * unless size is NULL), or -1 if the file does not define it. */
int ht_elf__func_offset(const char *path, const char *name, uint64_t *off, uint64_t *size);

/* Where a uprobe on the function at file offset off of path is cheapest:
 * the kernel emulates some instructions (push, jumps) and must single-step
 * the others out of line, which costs a second trap (about 16 us on a VM
 * against 0.5 us).  When the function starts with instructions that only
 * compare registers (test r,r; cmp r,imm; cmp r,r) followed by a
 * conditional jump that no branch of the function (size bytes) targets,
 * returns the offset of the jump (the arguments and the stack pointer are
 * still as at the entry there); else off. */
uint64_t ht_elf__probe_offset(const char *path, uint64_t off, uint64_t size);

/* The first library the ELF file path needs (DT_NEEDED) whose name starts
 * with one of prefixes (NULL-terminated), copied into out; 0 if found, -1
 * if none (or path is no dynamic ELF file). */
int ht_elf__needs(const char *path, const char *const *prefixes, char *out, size_t cap);

/* 1 if the ELF file path asks for a program interpreter (dynamically
 * linked), 0 if it does not (static), -1 if it is no ELF file. */
int ht_elf__interp(const char *path);

/* 0 if the file path is what LD_PRELOAD can load into this program: a
 * shared library (not a program, not an object file) of this program's
 * ELF class and machine, whose dynamic symbols define every function of
 * names (NULL-terminated); else -1, with why ("not an ELF file", "a
 * shared library that does not define malloc()", ...). */
int ht_elf__preloadable(const char *path, const char *const *names, char *why, size_t len);

#endif
