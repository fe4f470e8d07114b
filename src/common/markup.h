/* The one HTML/XML text escaper: every HTML page and SVG heaptrail writes
 * (report, timeline, flamegraph, compare) puts its strings through it. */
#ifndef HEAPTRAIL_COMMON_MARKUP_H
#define HEAPTRAIL_COMMON_MARKUP_H

#include <stddef.h>
#include <stdio.h>

/* Writes at most n bytes of s (up to its NUL; n = HT_MARKUP_ALL for the
 * whole string) as text or attribute value: & < > " ' as entities, valid
 * UTF-8 as it is, control characters other than tab, newline and carriage
 * return left out (XML 1.0 forbids them), and each byte that is not part
 * of valid UTF-8 as the character reference of its Latin-1 character, so
 * that the document stays well-formed whatever the bytes of a symbol. */
#define HT_MARKUP_ALL ((size_t)-1)
void ht_markup__text(FILE *f, const char *s, size_t n);

/* Length of the valid UTF-8 sequence at p (1..4; at most avail bytes
 * looked at), 0 if the bytes there are not one: overlong forms,
 * surrogates and code points past U+10FFFF are not.  Shared with the JSON
 * writer. */
int ht_utf8_len(const unsigned char *p, size_t avail);

#endif
