/* Offline symbolization: return addresses of recorded stacks to function,
 * source file and line (inlined calls as frames of their own), from the
 * module maps the recorder wrote and the modules' DWARF (elfutils libdwfl).
 * C++ names are demangled.  Results are cached per address. */
#ifndef HEAPTRAIL_SYMBOLS_SYMBOLIZE_H
#define HEAPTRAIL_SYMBOLS_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "trace/reader.h"

struct ht_symbolizer; /* opaque */

struct ht_symbol_opts {
	const char *sysroot;   /* prefix for module paths (another machine's files), or NULL */
	const char *debug_dir; /* extra directory of separate debug files, or NULL */
};

/* One frame of a resolved address. */
struct ht_frame {
	uint64_t ip;          /* the return address */
	const char *function; /* demangled name, NULL if unknown */
	const char *file;     /* source file, NULL if unknown */
	int line;             /* source line, 0 if unknown */
	const char *module;   /* module file name (no directory), NULL if no module */
	uint64_t offset;      /* ip in the module's file addresses (module+0xoffset) */
	int inlined;          /* inlined into the frame after it */
};

struct ht_symbolizer *ht_symbolizer__new(const struct ht_module *mods, size_t nmods,
					 const struct ht_symbol_opts *opts);
void ht_symbolizer__free(struct ht_symbolizer *s);
/* Adds the modules mods[k..nmods) to a symbolizer made from mods[0..k)
 * (the reader's list, which only grows: ht_reader__modules); 0, or -1 if
 * out of memory. */
int ht_symbolizer__extend(struct ht_symbolizer *s, const struct ht_module *mods, size_t nmods);
/* Does now what the first address of each module would do: loads its
 * DWARF (the debug file found, its sections decompressed, the address
 * ranges of its compilation units) and its ELF symbol index; only the
 * modules with want[i] set (all if want is NULL), never the recorder's.
 * The answers are the same with or without it: it lets another thread do
 * that work while the events are read (ht_blocks__symbols_ahead). */
void ht_symbolizer__prepare(struct ht_symbolizer *s, const uint8_t *want);

/* The frames of return address ip, innermost (most inlined) first; at
 * least one.  *frames stays valid until the next call. */
size_t ht_symbolizer__resolve(struct ht_symbolizer *s, uint64_t ip,
			      const struct ht_frame **frames);

/* The same for an address of module mod (an index in the mods given to
 * ht_symbolizer__new; -1: the module at ip, searched by address), so
 * that modules loaded one after the other at the same addresses resolve
 * each its own (ht_reader__node_module). */
size_t ht_symbolizer__resolve_in(struct ht_symbolizer *s, uint64_t ip, int mod,
				 const struct ht_frame **frames);

/* Names the frames in no module (a JIT's code) from m, a JIT's perf map
 * (perfmap.h), which the symbolizer then owns; NULL: none.  Their module
 * stays NULL, their offset the address. */
struct ht_perfmap;
void ht_symbolizer__set_perf_map(struct ht_symbolizer *s, struct ht_perfmap *m);

/* Whether module (a frame's module name, NULL if none) is the recorder's
 * own library: its frames (the malloc wrappers) are never shown, and its
 * file changing since the recording is no problem. */
static inline int ht_symbols__is_recorder(const char *module)
{
	return module && !strncmp(module, "libheaptrail.so", 15);
}

/* Modules whose file could not be opened or whose build-id differs from
 * the recorded one (the recorder's own library left out): a line each,
 * for a warning; NULL if none. */
const char *ht_symbolizer__problems(const struct ht_symbolizer *s);

#endif
