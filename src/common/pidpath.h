/* The output path template of the recorder (HEAPTRAIL_OUT, record -o):
 * %p stands for the process id.  Header-only, so that the preload library,
 * which links none of src/common, expands it as `record` does. */
#ifndef HEAPTRAIL_COMMON_PIDPATH_H
#define HEAPTRAIL_COMMON_PIDPATH_H

#include <stddef.h>
#include <stdio.h>

/* Writes tmpl into out (cap bytes) with each %p replaced by pid; returns
 * 1 if tmpl had a %p.  No allocation. */
static inline int ht_pidpath_expand(char *out, size_t cap, const char *tmpl, long pid)
{
	size_t n = 0;
	int had_pid = 0;
	for (const char *p = tmpl; *p && n + 24 < cap; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			n += (size_t)snprintf(out + n, cap - n, "%ld", pid);
			had_pid = 1;
			p++;
		} else {
			out[n++] = *p;
		}
	}
	out[n] = 0;
	return had_pid;
}

#endif
