/* What became of one name in a directory while a program ran: `record`
 * watches the output's directory (inotify) so that a trace removed or
 * renamed by someone else during the run is said as such, not guessed at
 * ("statically linked, or setuid?").  The events stay queued in the
 * kernel until the end, where they are read once. */
#ifndef HEAPTRAIL_COMMON_DIRWATCH_H
#define HEAPTRAIL_COMMON_DIRWATCH_H

#include <stddef.h>

struct ht_dirwatch {
	int fd; /* the inotify descriptor (close-on-exec), -1 if not watching */
};

enum ht_dirwatch_fate {
	HT_FATE_UNKNOWN = 0, /* never appeared, or not known (no watch, the queue overflowed) */
	HT_FATE_THERE,	     /* appeared and is there at the end */
	HT_FATE_REMOVED,     /* appeared, then was removed */
	HT_FATE_RENAMED,     /* appeared, then was renamed within the directory (newname) */
	HT_FATE_MOVED_OUT,   /* appeared, then was moved out of the directory */
	HT_FATE_DIR_GONE,    /* appeared, then the directory was removed or moved */
	HT_FATE_REPLACED,    /* appeared, was removed or moved out, and another file came
			      * under the name, or another file was renamed onto it */
};

/* Starts watching dir; on failure (no inotify, too many watches) w->fd is
 * -1 and every fate is unknown. */
void ht_dirwatch__start(struct ht_dirwatch *w, const char *dir);
/* What became of name since the start; newname gets the new name for
 * HT_FATE_RENAMED.  Reads the queued events: call once. */
enum ht_dirwatch_fate ht_dirwatch__fate(struct ht_dirwatch *w, const char *name, char *newname,
					size_t cap);
void ht_dirwatch__stop(struct ht_dirwatch *w);

#endif
