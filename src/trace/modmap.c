/* The reader's modules: identities, each thread's view, lookups (modmap.h). */
#include "modmap.h"
#include "record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int overlaps(const struct ht_module *a, const struct ht_module *b)
{
	return a->lo < b->hi && b->lo < a->hi;
}

/* Drops from v the identities that overlap m (m itself included). */
static void view_drop(struct ht_modmap *mm, struct ht_modview *v, const struct ht_module *m)
{
	size_t k = 0;
	for (size_t i = 0; i < v->n; i++)
		if (!overlaps(&mm->mods[v->ids[i] - 1], m))
			v->ids[k++] = v->ids[i];
	v->n = k;
	v->hit = 0;
}

/* Adds id to v, kept by lo (its modules never overlap). */
static void view_add(struct ht_modmap *mm, struct ht_modview *v, uint32_t id)
{
	view_drop(mm, v, &mm->mods[id - 1]);
	v->ids = ht_grow(v->ids, &v->cap, v->n + 1, sizeof(*v->ids));
	size_t k = v->n++;
	while (k > 0 && mm->mods[v->ids[k - 1] - 1].lo > mm->mods[id - 1].lo) {
		v->ids[k] = v->ids[k - 1];
		k--;
	}
	v->ids[k] = id;
}

/* The identity of ids[0..n) (disjoint, by lo) that holds ip, 0 if none. */
static uint32_t search(const struct ht_modmap *mm, const uint32_t *ids, size_t n, uint64_t ip)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct ht_module *m = &mm->mods[ids[mid] - 1];
		if (ip < m->lo)
			hi = mid;
		else if (ip >= m->hi)
			lo = mid + 1;
		else
			return ids[mid];
	}
	return 0;
}

static uint32_t identity_new(struct ht_modmap *mm, uint64_t base, uint64_t lo, uint64_t hi,
			     const char *path, size_t len)
{
	mm->mods = ht_grow(mm->mods, &mm->cap, mm->n + 1, sizeof(*mm->mods));
	mm->stamp = ht_grow(mm->stamp, &mm->capstamp, mm->n + 1, sizeof(*mm->stamp));
	struct ht_module *m = &mm->mods[mm->n];
	memset(m, 0, sizeof(*m));
	m->base = base;
	m->lo = lo;
	m->hi = hi;
	char *p = ht_xmalloc(len + 1);
	memcpy(p, path, len);
	p[len] = 0;
	m->path = p;
	mm->stamp[mm->n] = 0;
	return (uint32_t)++mm->n;
}

/* Marks identity id mapped now (announced last). */
static void identity_mapped(struct ht_modmap *mm, uint32_t id)
{
	mm->mods[id - 1].gone = 0;
	mm->stamp[id - 1] = ++mm->clock;
	mm->dirty = 1;
}

void ht_modmap__module(struct ht_modmap *mm, struct ht_modview *v, uint64_t base, uint64_t lo,
		       uint64_t hi, const char *path, size_t len)
{
	/* the latest identity of that path, place and extent; its build-id,
	 * if it has one, is checked by the BUILD_ID record that follows */
	uint32_t id = 0;
	for (size_t i = mm->n; i-- > 0 && !id;) {
		const struct ht_module *m = &mm->mods[i];
		if (m->base == base && m->lo == lo && m->hi == hi && strlen(m->path) == len &&
		    !memcmp(m->path, path, len))
			id = (uint32_t)i + 1;
	}
	if (!id)
		id = identity_new(mm, base, lo, hi, path, len);
	identity_mapped(mm, id);
	view_add(mm, v, id);
	v->last = id;
}

void ht_modmap__build_id(struct ht_modmap *mm, struct ht_modview *v, uint64_t base,
			 const uint8_t *bid, size_t len)
{
	uint32_t id = v->last;
	if (!id || mm->mods[id - 1].base != base || len > sizeof(mm->mods[0].build_id))
		return;
	struct ht_module *m = &mm->mods[id - 1];
	if (!m->build_id_len) {
		memcpy(m->build_id, bid, len);
		m->build_id_len = len;
		return;
	}
	if (m->build_id_len == len && !memcmp(m->build_id, bid, len))
		return;
	/* another file under the same name at the same place (rebuilt):
	 * another identity */
	uint32_t other = 0;
	for (size_t i = mm->n; i-- > 0 && !other;) {
		const struct ht_module *o = &mm->mods[i];
		if (o->base == m->base && o->lo == m->lo && o->hi == m->hi &&
		    !strcmp(o->path, m->path) && o->build_id_len == len &&
		    !memcmp(o->build_id, bid, len))
			other = (uint32_t)i + 1;
	}
	if (!other) {
		other = identity_new(mm, m->base, m->lo, m->hi, m->path, strlen(m->path));
		m = &mm->mods[id - 1]; /* (moved) */
		memcpy(mm->mods[other - 1].build_id, bid, len);
		mm->mods[other - 1].build_id_len = len;
	}
	m->gone = 1; /* not the one mapped after all */
	identity_mapped(mm, other);
	view_add(mm, v, other);
	v->last = other;
}

void ht_modmap__gone(struct ht_modmap *mm, struct ht_modview *v, uint64_t base)
{
	uint32_t id = 0;
	for (size_t i = 0; i < v->n && !id; i++)
		if (mm->mods[v->ids[i] - 1].base == base)
			id = v->ids[i];
	if (id) {
		view_drop(mm, v, &mm->mods[id - 1]);
	} else {
		/* announced by another thread: the latest mapped at that bias */
		uint64_t best = 0;
		for (size_t i = 0; i < mm->n; i++)
			if (mm->mods[i].base == base && !mm->mods[i].gone && mm->stamp[i] >= best) {
				best = mm->stamp[i];
				id = (uint32_t)i + 1;
			}
	}
	if (id) {
		mm->mods[id - 1].gone = 1;
		mm->dirty = 1;
	}
	if (v->last == id)
		v->last = 0;
}

/* The identities mapped now, by lo; of two that overlap (their threads'
 * records read out of order), the one announced last. */
static void live_make(struct ht_modmap *mm)
{
	mm->live = ht_grow(mm->live, &mm->caplive, mm->n + 1, sizeof(*mm->live));
	mm->nlive = 0;
	for (size_t i = 0; i < mm->n; i++) {
		if (mm->mods[i].gone)
			continue;
		size_t k = mm->nlive++; /* insertion by lo: few modules, rarely */
		while (k > 0 && mm->mods[mm->live[k - 1] - 1].lo > mm->mods[i].lo) {
			mm->live[k] = mm->live[k - 1];
			k--;
		}
		mm->live[k] = (uint32_t)i + 1;
	}
	size_t k = 0;
	for (size_t i = 0; i < mm->nlive; i++) {
		uint32_t id = mm->live[i];
		if (k && overlaps(&mm->mods[mm->live[k - 1] - 1], &mm->mods[id - 1])) {
			if (mm->stamp[id - 1] > mm->stamp[mm->live[k - 1] - 1])
				mm->live[k - 1] = id;
			continue;
		}
		mm->live[k++] = id;
	}
	mm->nlive = k;
	mm->dirty = 0;
}

static int holds(const struct ht_modmap *mm, uint32_t id, uint64_t ip)
{
	return id && ip >= mm->mods[id - 1].lo && ip < mm->mods[id - 1].hi;
}

uint32_t ht_modmap__find(struct ht_modmap *mm, struct ht_modview *v, uint64_t ip)
{
	if (holds(mm, v->hit, ip))
		return v->hit;
	uint32_t id = search(mm, v->ids, v->n, ip);
	if (id)
		return v->hit = id;
	if (mm->dirty)
		live_make(mm);
	if ((id = search(mm, mm->live, mm->nlive, ip)) != 0)
		return id;
	/* unmapped by then: the module announced last that held it */
	for (size_t i = 0; i < mm->n; i++)
		if (holds(mm, (uint32_t)i + 1, ip) && (!id || mm->stamp[i] > mm->stamp[id - 1]))
			id = (uint32_t)i + 1;
	return id;
}

void ht_modview__free(struct ht_modview *v)
{
	free(v->ids);
	memset(v, 0, sizeof(*v));
}

void ht_modmap__free(struct ht_modmap *mm)
{
	for (size_t i = 0; i < mm->n; i++)
		free((char *)mm->mods[i].path);
	free(mm->mods);
	free(mm->stamp);
	free(mm->live);
	memset(mm, 0, sizeof(*mm));
}
