/* The leak suppressions of `heaptrail leaks`, which `heaptrail report`
 * applies to its leaks table too, so that both list the same leaks: the
 * built-in patterns for what glibc and ld.so keep to the process's end,
 * and patterns from LeakSanitizer-style files (docs/leaks.md,
 * "Suppressions"). */
#ifndef HEAPTRAIL_ANALYZE_SUPPRESSIONS_H
#define HEAPTRAIL_ANALYZE_SUPPRESSIONS_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/blocks.h"

struct ht_suppressions {
	char **patterns; /* "*PATTERN*" each: LSan matches anywhere in a name */
	size_t n, cap;   /* count / allocated */
	uint8_t *memo;   /* per stack node of the one trace asked about: matched? */
	size_t nmemo;
};

/* Adds the built-in patterns: the dynamic thread vector of each thread
 * (allocate_dtv, _dl_allocate_tls) and its growth for dlopen'ed TLS
 * (_dl_resize_dtv, _dl_update_slotinfo). */
void ht_suppressions__add_defaults(struct ht_suppressions *s);
/* The largest suppressions file read (a file of patterns is small). */
#define HT_SUPPRESSIONS_MAX (16u << 20)

/* Adds the patterns of text (len bytes; name, the file's, in the
 * messages): one a line, optionally after "leak:" (and blanks), '#'
 * starting a comment, blank lines skipped, CRLF taken; a line is read
 * whole, whatever its length.  A file that is not text (a
 * NUL byte or another control character than tab), or a line of another
 * sanitizer's type ("race:f", "interceptor_via_fun:f": a word and one
 * colon), is refused: -1 with "NAME, line N: what" in err, and no
 * pattern of it added.  0 otherwise. */
int ht_suppressions__parse(struct ht_suppressions *s, const char *text, size_t len,
			   const char *name, char *err, size_t errlen);
/* The same for the file at path (HT_SUPPRESSIONS_MAX bytes at most);
 * -1 with err also for a file that cannot be read. */
int ht_suppressions__load(struct ht_suppressions *s, const char *path, char *err, size_t errlen);
/* Whether a pattern matches the frame's function, source file or module. */
int ht_suppressions__frame(const struct ht_suppressions *s, const struct ht_frame *f);
/* Whether a pattern matches a frame of the stack node (0: no stack, never
 * suppressed).  Every call must be about the same trace r (the answers
 * are kept per node). */
int ht_suppressions__stack(struct ht_suppressions *s, struct ht_reader *r,
			   struct ht_symbolizer *sym, uint32_t node);
void ht_suppressions__free(struct ht_suppressions *s);

#endif
