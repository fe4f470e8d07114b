/* The output path template of the recorder (HEAPTRAIL_OUT, record -o):
 * %p stands for the process id.  Header-only, so that the preload library,
 * which links none of src/common, expands it as `record` does. */
#ifndef HEAPTRAIL_COMMON_PIDPATH_H
#define HEAPTRAIL_COMMON_PIDPATH_H

#include <stddef.h>
#include <stdio.h>

/* The longest output path the recorder takes, %p expanded: PATH_MAX less
 * its NUL and 24 bytes for the names it derives from it (OUTPUT.<pid>.<n>
 * of a fork child, OUTPUT.old, OUTPUT.exec<n>).  A longer one is refused,
 * never cut to another name (record -o: an error before the program
 * starts; HEAPTRAIL_OUT: a warning). */
#define HT_PIDPATH_ROOM 24
#define HT_PIDPATH_MAX (4096 - 1 - HT_PIDPATH_ROOM)

/* Writes tmpl into out (cap bytes) with each %p replaced by pid; returns
 * 1 if tmpl had a %p, 0 if not, and -1 (out empty) if the result is
 * longer than HT_PIDPATH_MAX or than cap less HT_PIDPATH_ROOM and its NUL.
 * No allocation. */
static inline int ht_pidpath_expand(char *out, size_t cap, const char *tmpl, long pid)
{
	size_t n = 0, max = cap > HT_PIDPATH_ROOM ? cap - 1 - HT_PIDPATH_ROOM : 0;
	if (max > HT_PIDPATH_MAX)
		max = HT_PIDPATH_MAX;
	int had_pid = 0;
	for (const char *p = tmpl; *p; p++) {
		char num[24];
		const char *add = p;
		size_t len = 1;
		if (p[0] == '%' && p[1] == 'p') {
			len = (size_t)snprintf(num, sizeof(num), "%ld", pid);
			add = num;
			had_pid = 1;
			p++;
		}
		if (n + len > max) {
			if (cap)
				out[0] = 0;
			return -1;
		}
		for (size_t i = 0; i < len; i++)
			out[n++] = add[i];
	}
	if (cap)
		out[n] = 0;
	return had_pid;
}

#endif
