/* The heaptrail_mark() labels of a trace (marks.h). */
#include "marks.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

void ht_marks__add(struct ht_marks *m, const struct ht_event *e)
{
	if (m->max && m->n == m->max) {
		m->dropped++;
		return;
	}
	if (m->n == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 16;
		m->v = ht_xrealloc(m->v, m->cap * sizeof(*m->v));
	}
	struct ht_mark *k = &m->v[m->n++];
	k->time_ns = e->time_ns;
	k->tid = e->tid;
	const char *text = e->str ? e->str : "";
	size_t len = strlen(text);
	k->label = memcpy(ht_xrealloc(NULL, len + 1), text, len + 1);
}

void ht_marks__append(struct ht_marks *m, const struct ht_marks *from)
{
	for (size_t i = 0; i < from->n; i++) {
		struct ht_event e = {.kind = HT_EV_MARK,
				     .time_ns = from->v[i].time_ns,
				     .tid = from->v[i].tid,
				     .str = from->v[i].label};
		ht_marks__add(m, &e);
	}
	m->dropped += from->dropped;
}

void ht_marks__json(const struct ht_marks *m, struct ht_json *j)
{
	ht_json__arr_begin(j, "marks");
	for (size_t i = 0; i < m->n; i++) {
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "time_ns", m->v[i].time_ns);
		ht_json__u64(j, "tid", m->v[i].tid);
		ht_json__str(j, "label", m->v[i].label);
		ht_json__obj_end(j);
	}
	ht_json__arr_end(j);
}

void ht_marks__free(struct ht_marks *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].label);
	free(m->v);
	memset(m, 0, sizeof(*m));
}
