/* The reader's modules (internal to src/trace): which module each recorded
 * return address belongs to, when a library unloaded by dlclose and another
 * loaded at the same place afterwards share addresses.
 *
 * A module is kept once per identity (path, load bias, extent, build-id):
 * a library loaded 100 times at the same place is one module, and its
 * frames are the same stack nodes every time.  Each thread's stream has a
 * view, the modules its own MODULE records announced and its MODULE_GONE
 * records have not taken away; the recorder writes them there before the
 * frames that need them (docs/FORMAT.md, "Stacks"), so that a frame is
 * bound to the right module whatever the order in which the reader takes
 * the threads.  An address outside the thread's view (traces of threads
 * that announced nothing themselves, older recorders) is looked up in the
 * modules mapped at that point of the reading, as before. */
#ifndef HEAPTRAIL_TRACE_MODMAP_H
#define HEAPTRAIL_TRACE_MODMAP_H

#include <stddef.h>
#include <stdint.h>

#include "trace/reader.h"

/* Every module identity of a trace. */
struct ht_modmap {
	struct ht_module *mods; /* identities, in order of appearance (indexes are stable) */
	uint64_t *stamp;        /* per identity: when it was last announced (a counter) */
	size_t n, cap;          /* count / allocated */
	size_t capstamp;        /* stamp's allocated */
	uint64_t clock;         /* announcements so far */
	uint32_t *live;         /* identities mapped now, by lo, without overlaps */
	size_t nlive, caplive;  /* count / allocated */
	int dirty;              /* live must be made again */
};

/* One thread's modules: identities (index + 1) its records announced. */
struct ht_modview {
	uint32_t *ids;     /* mapped now, as this thread told */
	size_t n, cap;     /* count / allocated */
	uint32_t last;     /* identity of its last MODULE record (for BUILD_ID), 0 none */
	uint32_t hit;      /* the identity of its last lookup, 0 none */
};

/* MODULE (base, lo, hi, path of len bytes), BUILD_ID, MODULE_GONE records
 * of thread v. */
void ht_modmap__module(struct ht_modmap *mm, struct ht_modview *v, uint64_t base, uint64_t lo,
		       uint64_t hi, const char *path, size_t len);
void ht_modmap__build_id(struct ht_modmap *mm, struct ht_modview *v, uint64_t base,
			 const uint8_t *id, size_t len);
void ht_modmap__gone(struct ht_modmap *mm, struct ht_modview *v, uint64_t base);

/* The identity (index + 1) that holds ip for thread v now, 0 if none. */
uint32_t ht_modmap__find(struct ht_modmap *mm, struct ht_modview *v, uint64_t ip);

void ht_modview__free(struct ht_modview *v);
void ht_modmap__free(struct ht_modmap *mm);

#endif
