/* Flame graphs as self-contained interactive SVG (click to zoom, search,
 * tooltips), drawn from folded stacks: shared by `heaptrail flamegraph`
 * (one value per stack) and `heaptrail diff` (a differential graph: two
 * values per stack, coloured by their change).  The caller chooses each
 * frame's colour and tooltip through callbacks. */
#ifndef HEAPTRAIL_ANALYZE_FLAMESVG_H
#define HEAPTRAIL_ANALYZE_FLAMESVG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "symbols/symbolize.h"

/* One stack of a flame graph. */
struct ht_flame_stack {
	char *stack;    /* frame labels joined by ';', outermost first */
	uint64_t value; /* its width: the metric */
	uint64_t count; /* allocations behind it */
	uint64_t base;  /* the value it is compared with (differential graph), else 0 */
};

/* A frame of the drawn tree, as the callbacks see it: sums over the
 * stacks through it. */
struct ht_flame_frame {
	const char *name; /* label (not NUL-terminated) */
	size_t namelen;   /* its length */
	uint64_t value;   /* inclusive value */
	uint64_t count;   /* inclusive count */
	uint64_t base;    /* inclusive base value */
};

struct ht_flame_style {
	const char *title;  /* at the top */
	const char *unit;   /* of the values: "bytes", "allocations" */
	uint64_t width;     /* pixels */
	/* a frame's fill colour; max_change is the largest |value - base| of
	 * any frame; NULL: the memory palette (greens and blues by name) */
	void (*fill)(void *ctx, const struct ht_flame_frame *fr, uint64_t max_change,
		     int rgb[3]);
	/* what its tooltip says after the name, starting " (" (XML text, see
	 * ht_markup__text); NULL: value, count and share of the total */
	void (*details)(void *ctx, FILE *f, const struct ht_flame_frame *fr, uint64_t total);
	void *ctx;          /* passed to both */
	const char *id;     /* NULL: a standalone SVG file; else an inline <svg
			     * class="chart flame"> with this id, for HTML pages */
};

/* A stack's label: the frames' names (ht_blocks__frame_name, with the
 * folded format's separators ';' and newline replaced), outermost first
 * (frames are innermost first), or innermost first if reverse; "[no
 * stack]" if n is 0.  Returns a malloc'd string. */
char *ht_flame__join(const struct ht_frame *frames, size_t n, int reverse);
/* One frame's label in such a string: its whole name, never cut (a cut
 * made two C++ template functions whose names differ past 511 bytes one
 * frame), in *buf, grown as needed (*cap bytes; NULL and 0 at first, the
 * caller frees it); returns its length. */
size_t ht_flame__label(char **buf, size_t *cap, const struct ht_frame *fr);

/* Writes the SVG of n stacks (in any order; equal stacks are summed);
 * returns the number of frames drawn. */
int ht_flame__svg(FILE *f, const struct ht_flame_stack *st, size_t n,
		  const struct ht_flame_style *style);

/* The tree ht_flame__svg draws, for callers that build it without folded
 * stacks (ht_flamegraph__svg): node 0 is the root ("all"); a node's
 * children are kept sorted by name, so the same stacks make the same tree
 * in any order.  Exits if out of memory. */
struct ht_flame_tree;
struct ht_flame_tree *ht_flame_tree__new(void);
/* The child of parent labelled name[0..len) (copied), added if new. */
int ht_flame_tree__child(struct ht_flame_tree *t, int parent, const char *name, size_t len);
/* Adds to node id and to each of its ancestors, the root included. */
void ht_flame_tree__add(struct ht_flame_tree *t, int id, uint64_t value, uint64_t count,
			uint64_t base);
/* Writes its SVG; returns the number of frames drawn. */
int ht_flame_tree__svg(FILE *f, struct ht_flame_tree *t, const struct ht_flame_style *style);
void ht_flame_tree__free(struct ht_flame_tree *t);


#endif
