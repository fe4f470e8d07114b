/* What became of one name in a directory while a program ran (dirwatch.h). */
#define _GNU_SOURCE
#include "dirwatch.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
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

/* Closing the last descriptor of an inotify instance waits in the kernel
 * for the watch's teardown (an SRCU grace period): 0.1 ms mostly, but 11
 * to 15 ms about one time in ten here (and in two `record` runs of five
 * on a short program), which was then the user's wait at the end of every
 * `record`.  A child takes the last reference: it keeps only the
 * descriptor and a pipe, waits for the end of the pipe (our copy of the
 * descriptor is closed by then), and closes it after we have gone on.
 * The fork costs some 0.2 ms; if it fails we close it ourselves. */
void ht_dirwatch__stop(struct ht_dirwatch *w)
{
	if (w->fd < 0)
		return;
	int p[2];
	if (pipe2(p, O_CLOEXEC) == 0) {
		pid_t pid = fork();
		if (pid == 0) {
			char c;
			if (dup2(w->fd, 0) < 0 || dup2(p[0], 1) < 0)
				_exit(0);
			syscall(SYS_close_range, 2u, ~0u, 0u);
			while (read(1, &c, 1) < 0 && errno == EINTR)
				;
			close(0);
			_exit(0);
		}
		close(p[0]);
		close(w->fd); /* not the last reference if the child runs */
		close(p[1]);  /* the child goes on */
	} else {
		close(w->fd);
	}
	w->fd = -1;
}

enum ht_dirwatch_fate ht_dirwatch__fate(struct ht_dirwatch *w, const char *name, char *newname,
					size_t cap)
{
	if (w->fd < 0)
		return HT_FATE_UNKNOWN;
	int appeared = 0, present = 0, taken = 0; /* taken: gone once */
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
				if (!strcmp(e->name, name)) { /* (renamed onto itself) */
					present = 1;
					taken = 0;
					how = HT_FATE_THERE;
				}
				continue;
			}
			if (strcmp(e->name, name))
				continue;
			if (e->mask & (IN_CREATE | IN_MOVED_TO)) {
				/* (another file renamed onto it: the first is gone,
				 * with no event of its own) */
				if (present && (e->mask & IN_MOVED_TO))
					taken = 1;
				appeared = present = 1;
				/* (the first file is the one said: renamed within
				 * the directory, it is found under its new name) */
				if (how != HT_FATE_RENAMED)
					how = HT_FATE_THERE;
			} else if (present && (e->mask & IN_DELETE)) {
				present = 0;
				taken = 1;
				if (how != HT_FATE_RENAMED)
					how = HT_FATE_REMOVED;
			} else if (present && (e->mask & IN_MOVED_FROM)) {
				present = 0;
				taken = 1;
				if (how != HT_FATE_RENAMED) {
					how = HT_FATE_MOVED_OUT; /* until its IN_MOVED_TO comes */
					cookie = e->cookie;
				}
			}
		}
	}
	if (!appeared)
		return HT_FATE_UNKNOWN;
	if (how == HT_FATE_RENAMED)
		return how;
	if (present)
		return taken ? HT_FATE_REPLACED : HT_FATE_THERE;
	return how;
}
