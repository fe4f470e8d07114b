/* Writing the self-contained HTML page of `heaptrail report`: the output
 * file (written to a temporary name, renamed when complete), the page's
 * frame with its style and self-check, escaping, and the small charts the
 * sections share.  Every chart is an inline <svg class="chart">. */
#ifndef HEAPTRAIL_ANALYZE_HTMLOUT_H
#define HEAPTRAIL_ANALYZE_HTMLOUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/outfile.h"

struct ht_html_file {
	FILE *f;           /* open while writing */
	struct ht_out out; /* the temporary, renamed into place by commit */
};

/* Opens a temporary file next to path (common/outfile.h), or standard
 * output for "-"; -1 after a one-line error. */
int ht_html__open(struct ht_html_file *h, const char *path);
/* Closes and renames it into place; -1 after an error (nothing left behind). */
int ht_html__commit(struct ht_html_file *h);
/* Removes the temporary file if it is still there (after an error). */
void ht_html__abort(struct ht_html_file *h);

/* <!DOCTYPE html> ... <body>, with the page's style. */
void ht_html__begin(FILE *f, const char *title);
/* The self-check script (it lists every chart and what it drew in
 * <pre id="selfcheck">, for tests and curious readers), </body></html>. */
void ht_html__end(FILE *f);
/* s with & < > " ' escaped. */
void ht_html__text(FILE *f, const char *s);
/* A figure: label, big value, a line of detail (printf format). */
void ht_html__card(FILE *f, const char *label, const char *value, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* n with thousands separators; buf needs 32 bytes.  Returns buf. */
const char *ht_html__count(char *buf, uint64_t n);
/* A horizontal bar chart: one bar per label, lengths by value. */
void ht_html__bars(FILE *f, const char *id, const char *title, const char *const *labels,
		   const uint64_t *values, int n, const char *unit);

#endif
