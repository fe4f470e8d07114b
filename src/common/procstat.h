/* /proc/PID/stat, read whole and its numeric fields taken by number.
 * Header-only and without malloc, so that the preload library, which links
 * none of src/common, reads it as record does. */
#ifndef HEAPTRAIL_COMMON_PROCSTAT_H
#define HEAPTRAIL_COMMON_PROCSTAT_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "readsmall.h"

/* Reads /proc/PID/stat into buf (cap bytes) and returns where its fields
 * after the command's name begin (the space before field 3), or NULL if it
 * cannot be read.  The name is found by the last ')': it may hold spaces
 * and parentheses. */
static inline const char *ht_procstat_read(long pid, char *buf, size_t cap)
{
	char path[40];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	size_t n = cap ? ht_read_small(path, buf, cap - 1) : 0;
	if (!n)
		return NULL;
	buf[n] = 0;
	return strrchr(buf, ')');
}

/* Field `field` (3 and up, as proc(5) numbers them) of what
 * ht_procstat_read returned, as a number: 14 utime, 22 starttime, 38
 * exit_signal...; -1 if the text has fewer fields. */
static inline long long ht_procstat_field(const char *after, int field)
{
	for (int f = 2; after && f < field; f++)
		after = strchr(after + 1, ' ');
	return after ? strtoll(after + 1, NULL, 10) : -1;
}

/* Whether process pid exists (another user's too: kill says EPERM). */
static inline int ht_proc_exists(long pid)
{
	return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* Whether process pid exists and has not ended: a zombie (dead, not yet
 * reaped: record reaps its orphans as a subreaper, when it gets to them)
 * exists for kill() but runs no more. */
static inline int ht_proc_alive(long pid)
{
	if (!ht_proc_exists(pid))
		return 0;
	char buf[512];
	const char *f = ht_procstat_read(pid, buf, sizeof(buf));
	return !f || (f[1] ? f[2] != 'Z' && f[2] != 'X' : 1);
}

#endif
