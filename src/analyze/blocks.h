/* What analyzers share about heap blocks and their stacks: the callbacks a
 * collector gives the pass (pass.h, the one live-block model), and turning
 * a recorded stack into symbolized frames. */
#ifndef HEAPTRAIL_ANALYZE_BLOCKS_H
#define HEAPTRAIL_ANALYZE_BLOCKS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/livemap.h"
#include "symbols/symbolize.h"
#include "trace/reader.h"

/* Called for each block an event releases (b as it was allocated) and
 * each it hands out; either may be NULL (ht_blockop__callbacks, pass.h). */
struct ht_block_cbs {
	void (*release)(void *ctx, const struct ht_event *e, const struct ht_block *b);
	void (*acquire)(void *ctx, const struct ht_event *e, const struct ht_block *b);
	void *ctx; /* passed to both */
};

/* A symbolizer for the trace's modules, with a warning on stderr for the
 * modules that cannot be read; NULL (after an error message) on failure. */
struct ht_symbolizer *ht_blocks__symbolizer(struct ht_reader *r, const char *sysroot,
					    const char *debug_dir);

/* Symbols made ready on another CPU while a trace is read: asked before
 * the trace is opened, with the options ht_blocks__symbolizer will get.
 * At the first progress tick (65,536 events: a shorter trace does
 * without) of the reader, the modules of the stacks read so far are
 * loaded by a thread while the rest is read, and ht_blocks__symbolizer
 * takes them, adding the modules recorded since.  The same answers as
 * without; off with -j 1 or one CPU.  For commands that read one trace. */
void ht_blocks__symbols_ahead(const char *sysroot, const char *debug_dir);

/* The frames of a stack node, inlined calls expanded, innermost first,
 * without the tracer's own frames; returns how many (at most max). */
size_t ht_blocks__frames(struct ht_reader *r, struct ht_symbolizer *sym, uint32_t node,
			 struct ht_frame *out, size_t max);

/* Why blocks show without a stack, to follow "no stack: ": the trace has
 * no stacks ("record with --stacks"), or it has, and these blocks' was not
 * taken when they were recorded (attach's kernel walk that could not read
 * a page of the stack, an unwind that failed): advising --stacks there
 * sent users to record again what they had recorded. */
const char *ht_blocks__no_stack_why(const struct ht_reader *r);
/* The frame such blocks go under in a tree or a profile (export): "[no
 * stacks: record with --stacks]", or "[no stack: not taken when they were
 * recorded]" in a trace with stacks. */
const char *ht_blocks__no_stack_frame(const struct ht_reader *r);

/* A key of what a reader sees of node's stack (function, file, line,
 * module, and the offset where there is neither function nor file, of
 * every frame ht_blocks__frames gives), folded from the outermost one in
 * (so that how they group into nodes, inlined calls, does not matter),
 * memoized per node in memo
 * (ht_reader__nnodes(r) entries, zero at first): stacks that read alike
 * get the same key, each node resolved and folded once however many
 * stacks pass through it.  0 for node 0 (no stack). */
uint64_t ht_blocks__stack_key(struct ht_reader *r, struct ht_symbolizer *sym, uint32_t node,
			      uint64_t *memo);

/* The name a report gives a frame: its function, whole (the symbolizer's
 * string, not copied: a name cut to fit buf made two C++ template
 * functions that differ past its end one), else module+0xOFFSET (the
 * offset in the module's file), else 0xADDRESS, written in buf (cut to
 * len).  Returns the one it is. */
const char *ht_blocks__frame_name(char *buf, size_t len, const struct ht_frame *f);

/* Prints the first depth of frames f[0..n) on one line, innermost first:
 * "function (file:line) <- caller (file:line) ...", no newline. */
void ht_blocks__print_frames(FILE *out, const struct ht_frame *f, size_t n, size_t depth);
/* For a row that sums the stacks of one function (or of one list of
 * function names): keeps in *into only the place every stack summed has,
 * its line 0 ("function (file)") where their lines differ, no file where
 * their files do, so that the row never shows one stack's line as all. */
void ht_blocks__merge_site(struct ht_frame *into, const struct ht_frame *f);

/* A frame as JSON: function, file, line, module, offset, address (the
 * address itself, "0x..."), inlined. */
struct ht_json;
void ht_blocks__json_frame(struct ht_json *j, const struct ht_frame *f);

#endif
