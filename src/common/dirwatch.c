/* What became of one name in a directory while a program ran (dirwatch.h). */
#define _GNU_SOURCE
#include "dirwatch.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

void ht_dirwatch__start(struct ht_dirwatch *w, const char *dir)
{
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0)
		return;
	if (inotify_add_watch(w->fd, dir,
			      IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF |
				  IN_MOVE_SELF | IN_ONLYDIR) < 0) {
		close(w->fd);
		w->fd = -1;
	}
}

void ht_dirwatch__stop(struct ht_dirwatch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

enum ht_dirwatch_fate ht_dirwatch__fate(struct ht_dirwatch *w, const char *name, char *newname,
					size_t cap)
{
	if (w->fd < 0)
		return HT_FATE_UNKNOWN;
	int appeared = 0, present = 0;
	enum ht_dirwatch_fate how = HT_FATE_UNKNOWN;
	uint32_t cookie = 0; /* of the rename that took name away */
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	for (;;) {
		ssize_t n = read(w->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *e = (const struct inotify_event *)p;
			p += sizeof(*e) + e->len;
			if (e->mask & IN_Q_OVERFLOW)
				return HT_FATE_UNKNOWN; /* events were lost */
			if (e->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
				if (present) {
					present = 0;
					how = HT_FATE_DIR_GONE;
				}
				continue;
			}
			if (!e->len)
				continue;
			if (how == HT_FATE_MOVED_OUT && cookie && (e->mask & IN_MOVED_TO) &&
			    e->cookie == cookie) {
				how = HT_FATE_RENAMED;
				snprintf(newname, cap, "%s", e->name);
				if (!strcmp(e->name, name))
					present = 1; /* (renamed onto itself) */
				continue;
			}
			if (strcmp(e->name, name))
				continue;
			if (e->mask & (IN_CREATE | IN_MOVED_TO)) {
				appeared = present = 1;
				how = HT_FATE_THERE;
			} else if (present && (e->mask & IN_DELETE)) {
				present = 0;
				how = HT_FATE_REMOVED;
			} else if (present && (e->mask & IN_MOVED_FROM)) {
				present = 0;
				how = HT_FATE_MOVED_OUT; /* until its IN_MOVED_TO comes */
				cookie = e->cookie;
			}
		}
	}
	if (!appeared)
		return HT_FATE_UNKNOWN;
	return present ? HT_FATE_THERE : how;
}
