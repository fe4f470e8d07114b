/* Classifies a process's mappings by kind (mapkinds.h); the rules are
 * explained in docs/maps.md. */
#define _GNU_SOURCE
#include "analyze/mapkinds.h"

#include <stdarg.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

/* glibc's HEAP_MAX_SIZE on 64-bit: 2 * DEFAULT_MMAP_THRESHOLD_MAX
 * (4 MiB * sizeof(long)); every non-main arena heap is a reservation of
 * this size at an address aligned to it. */
#define ARENA_HEAP_MAX (64ull << 20)

static const char *const kind_key[HT_MK_N] = {
	"heap", "arena", "stack", "anon", "library", "executable", "file", "kernel",
};
static const char *const kind_title[HT_MK_N] = {
	"main heap", "arena heaps", "stacks", "anonymous", "libraries", "executable",
	"files", "kernel",
};

const char *ht_map_kind__key(enum ht_map_kind k)
{
	return (unsigned)k < HT_MK_N ? kind_key[k] : "?";
}

const char *ht_map_kind__title(enum ht_map_kind k)
{
	return (unsigned)k < HT_MK_N ? kind_title[k] : "?";
}

/* What classification learns about one mapping. */
struct mapinfo {
	enum ht_map_kind kind; /* its kind */
	size_t owner;          /* the mapping whose region it joins (itself if none) */
	uint32_t tid;          /* stacks: the thread */
	const char *label;     /* region name, if not the mapping's own */
	uint8_t anon;          /* anonymous without a name: may be an arena heap or a stack */
	uint8_t claimed;       /* joined to, or owner of, an arena heap or stack region */
};

/* The state of one classification. */
struct classify {
	struct ht_mapkinds *m;  /* the object */
	struct mapinfo *mi;     /* per mapping, in input order */
	size_t *order;          /* mapping indices by start address */
	size_t n;               /* mappings */
};

static const struct ht_smaps_map *map_at(const struct classify *c, size_t k)
{
	return &c->m->sm.maps[c->order[k]];
}

static int by_start(const void *a, const void *b, void *arg)
{
	const struct ht_smaps_map *maps = arg;
	const struct ht_smaps_map *x = &maps[*(const size_t *)a], *y = &maps[*(const size_t *)b];
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static int has_prefix(const char *s, const char *p)
{
	return !strncmp(s, p, strlen(p));
}

/* A shared object by its name: "NAME.so" or "NAME.so.VERSION". */
static int library_name(const char *path)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	for (const char *p = strstr(base, ".so"); p; p = strstr(p + 1, ".so"))
		if (p[3] == 0 || p[3] == '.')
			return 1;
	return 0;
}

static enum ht_map_kind first_kind(const struct ht_mapkinds *m, const struct ht_smaps_map *s,
				   struct mapinfo *mi)
{
	const char *n = s->name;
	if (!strcmp(n, "[heap]"))
		return HT_MK_HEAP;
	if (!strcmp(n, "[stack]"))
		return HT_MK_STACK;
	if (has_prefix(n, "[stack:")) { /* kernels before 4.5 named thread stacks */
		mi->tid = (uint32_t)strtoul(n + 7, NULL, 10);
		return HT_MK_STACK;
	}
	if (has_prefix(n, "[anon:") || has_prefix(n, "[anon_shmem:"))
		return HT_MK_ANON;
	if (n[0] == '[')
		return HT_MK_KERNEL;
	if (!n[0]) {
		mi->anon = 1;
		return HT_MK_ANON;
	}
	if (!strcmp(n, "/dev/zero") && s->deleted) /* MAP_SHARED|MAP_ANONYMOUS */
		return HT_MK_ANON;
	if (m->exe[0] && !strcmp(n, m->exe))
		return HT_MK_EXE;
	return library_name(n) ? HT_MK_LIBRARY : HT_MK_FILE;
}

/* The mapping that contains addr, as an index into order, or -1. */
static long find_addr(const struct classify *c, uint64_t addr)
{
	size_t lo = 0, hi = c->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (map_at(c, mid)->start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || addr >= map_at(c, lo - 1)->end)
		return -1;
	return (long)(lo - 1);
}

/* order[k] and order[k - 1] touch, and the lower one is an unclaimed
 * anonymous ---p mapping: a guard page or a reserve. */
static int guard_below(const struct classify *c, size_t k)
{
	if (!k)
		return 0;
	const struct ht_smaps_map *lo = map_at(c, k - 1);
	const struct mapinfo *li = &c->mi[c->order[k - 1]];
	return lo->end == map_at(c, k)->start && li->anon && !li->claimed &&
	       !strcmp(lo->perms, "---p");
}

static int plain_rw(const struct classify *c, size_t k)
{
	const struct mapinfo *i = &c->mi[c->order[k]];
	return i->anon && !i->claimed && !strcmp(map_at(c, k)->perms, "rw-p");
}

static void join(struct classify *c, size_t k_owner, size_t k, enum ht_map_kind kind)
{
	struct mapinfo *o = &c->mi[c->order[k_owner]], *x = &c->mi[c->order[k]];
	o->kind = x->kind = kind;
	o->claimed = x->claimed = 1;
	x->owner = c->order[k_owner];
}

/* Arena heaps: an anonymous rw-p mapping at a 64 MiB boundary, of 64 MiB,
 * or followed by an anonymous ---p mapping that ends 64 MiB after it. */
static void find_arenas(struct classify *c)
{
	for (size_t k = 0; k < c->n; k++) {
		const struct ht_smaps_map *s = map_at(c, k);
		if (!plain_rw(c, k) || s->start % ARENA_HEAP_MAX ||
		    s->end - s->start > ARENA_HEAP_MAX)
			continue;
		int whole = s->end - s->start == ARENA_HEAP_MAX;
		int reserve = 0;
		if (!whole && k + 1 < c->n) {
			const struct ht_smaps_map *r = map_at(c, k + 1);
			const struct mapinfo *ri = &c->mi[c->order[k + 1]];
			reserve = r->start == s->end && r->end == s->start + ARENA_HEAP_MAX &&
				  ri->anon && !ri->claimed && !strcmp(r->perms, "---p");
		}
		if (!whole && !reserve)
			continue;
		join(c, k, k, HT_MK_ARENA);
		c->mi[c->order[k]].label = "arena heap";
		if (reserve)
			join(c, k, k + 1, HT_MK_ARENA);
	}
}

static void make_stack(struct classify *c, size_t k, uint32_t tid)
{
	join(c, k, k, HT_MK_STACK);
	c->mi[c->order[k]].tid = tid;
	if (guard_below(c, k))
		join(c, k, k - 1, HT_MK_STACK);
}

/* A thread's stack pointer: from /proc/PID/task/TID/syscall (the thread
 * is blocked in a system call: "NR ARGS... SP PC", or "-1 SP PC"), else
 * kstkesp in its stat (0 on most kernels now). */
static uint64_t thread_sp(int pid, const char *tid)
{
	char path[128], buf[512];
	uint64_t sp = 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%s/syscall", pid, tid);
	FILE *f = fopen(path, "r");
	if (f) {
		if (fgets(buf, sizeof(buf), f) && strncmp(buf, "running", 7)) {
			char *tok[16];
			int n = 0;
			for (char *save, *t = strtok_r(buf, " \n", &save); t && n < 16;
			     t = strtok_r(NULL, " \n", &save))
				tok[n++] = t;
			if (n == 9 || n == 3)
				sp = strtoull(tok[n - 2], NULL, 16);
		}
		fclose(f);
	}
	if (sp)
		return sp;
	snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", pid, tid);
	f = fopen(path, "r");
	if (f) {
		char *p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		/* after ") ", fields 3.. of stat; kstkesp is field 29 */
		for (int field = 2; p && field < 29; field++)
			p = strchr(p + 1, ' ');
		if (p)
			sp = strtoull(p + 1, NULL, 10);
		fclose(f);
	}
	return sp;
}

static void find_stacks(struct classify *c)
{
	struct ht_mapkinds *m = c->m;
	if (m->pid) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/task", m->pid);
		DIR *d = opendir(path);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (e->d_name[0] < '0' || e->d_name[0] > '9')
				continue;
			m->threads++;
			uint32_t tid = (uint32_t)strtoul(e->d_name, NULL, 10);
			if (tid == (uint32_t)m->pid)
				continue; /* the main thread's is [stack] */
			uint64_t sp = thread_sp(m->pid, e->d_name);
			long k = sp ? find_addr(c, sp) : -1;
			if (k < 0) {
				if (sp)
					m->threads_elsewhere++;
				else
					m->threads_unknown++;
				continue;
			}
			struct mapinfo *i = &c->mi[c->order[k]];
			if (i->kind == HT_MK_ANON && !i->claimed) {
				make_stack(c, (size_t)k, tid);
				m->stacks_by_sp++;
			} else if (i->kind != HT_MK_STACK) {
				m->threads_elsewhere++;
			}
		}
		if (d)
			closedir(d);
	}
	/* an old kernel's [stack:TID], and glibc's layout: the stack above its
	 * guard page */
	for (size_t k = 0; k < c->n; k++) {
		const struct mapinfo *i = &c->mi[c->order[k]];
		if (i->kind == HT_MK_STACK && i->tid && has_prefix(map_at(c, k)->name, "[stack:") &&
		    guard_below(c, k))
			join(c, k, k - 1, HT_MK_STACK);
	}
	for (size_t k = 0; k < c->n; k++) {
		if (plain_rw(c, k) && guard_below(c, k)) {
			make_stack(c, k, 0);
			m->stacks_by_layout++;
		}
	}
	for (size_t k = 0; k < c->n; k++) {
		struct mapinfo *i = &c->mi[c->order[k]];
		if (i->kind == HT_MK_STACK && i->owner == c->order[k] && !i->label &&
		    !map_at(c, k)->name[0] && !i->tid)
			i->label = m->pid && !m->threads_unknown
					   ? "thread stack (of no live thread: glibc's cache?)"
					   : "thread stack";
	}
}

/* ---- regions ---------------------------------------------------------- */

static void add_amount(struct ht_map_amount *a, const struct ht_map_amount *b)
{
	a->size_kb += b->size_kb;
	a->rss_kb += b->rss_kb;
	a->pss_kb += b->pss_kb;
	a->swap_kb += b->swap_kb;
	a->dirty_kb += b->dirty_kb;
}

static void map_amount(const struct ht_smaps_map *s, struct ht_map_amount *a)
{
	a->size_kb = s->seen & (1u << HT_SM_SIZE) ? s->kb[HT_SM_SIZE] : (s->end - s->start) >> 10;
	a->rss_kb = s->kb[HT_SM_RSS];
	a->pss_kb = s->kb[HT_SM_PSS];
	a->swap_kb = s->kb[HT_SM_SWAP];
	a->dirty_kb = s->kb[HT_SM_SHARED_DIRTY] + s->kb[HT_SM_PRIVATE_DIRTY];
}

static int by_rss(const void *a, const void *b)
{
	const struct ht_map_region *x = a, *y = b;
	if (x->a.rss_kb != y->a.rss_kb)
		return x->a.rss_kb < y->a.rss_kb ? 1 : -1;
	if (x->a.size_kb != y->a.size_kb)
		return x->a.size_kb < y->a.size_kb ? 1 : -1;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* Kinds whose regions gather every mapping of one name. */
static int by_name(enum ht_map_kind k, const struct ht_smaps_map *s)
{
	return k == HT_MK_LIBRARY || k == HT_MK_EXE || k == HT_MK_FILE || k == HT_MK_KERNEL ||
	       k == HT_MK_HEAP || (k == HT_MK_ANON && s->name[0] == '[');
}

static __attribute__((format(printf, 2, 3))) char *keep_name(struct ht_mapkinds *m,
								 const char *fmt, ...)
{
	char **names = realloc(m->names, (m->nnames + 1) * sizeof(*names));
	if (!names)
		return NULL;
	m->names = names;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&m->names[m->nnames], fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	return m->names[m->nnames++];
}

static const char *region_name(struct ht_mapkinds *m, const struct ht_smaps_map *s,
			       const struct mapinfo *i)
{
	if (i->kind == HT_MK_STACK && !strcmp(s->name, "[stack]"))
		return m->pid ? keep_name(m, "[stack] (main thread %lu)", (unsigned long)m->pid)
			      : "[stack] (main thread)";
	if (i->kind == HT_MK_STACK && i->tid)
		return keep_name(m, "stack of thread %lu", (unsigned long)i->tid);
	if (i->label)
		return i->label;
	if (i->kind == HT_MK_ANON && !s->name[0])
		return !strcmp(s->perms, "---p") ? "anonymous, no access (reserved)" : "anonymous";
	if (i->kind == HT_MK_ANON && !strcmp(s->name, "/dev/zero"))
		return "shared anonymous";
	return s->name;
}

static int build_regions(struct classify *c)
{
	struct ht_mapkinds *m = c->m;
	size_t n = c->n, nr = 0;
	struct ht_map_region *all = calloc(n ? n : 1, sizeof(*all));
	size_t *region_of = malloc((n ? n : 1) * sizeof(*region_of));
	size_t cap = 16;
	while (cap < 2 * n)
		cap *= 2;
	size_t *table = malloc(cap * sizeof(*table)); /* by-name regions: index + 1 */
	int ret = -1;
	if (!all || !region_of || !table)
		goto cleanup;
	memset(table, 0, cap * sizeof(*table));
	/* one region per owner, or per name */
	for (size_t k = 0; k < n; k++) {
		size_t x = c->order[k];
		const struct ht_smaps_map *s = &m->sm.maps[x];
		const struct mapinfo *i = &c->mi[x];
		if (i->owner != x)
			continue;
		const char *name = region_name(m, s, i);
		if (!name)
			goto cleanup;
		size_t *slot = NULL;
		if (by_name(i->kind, s)) {
			uint64_t h = ht_hash_str((uint64_t)i->kind * 2 + s->deleted, name);
			size_t p = h & (cap - 1);
			for (; table[p]; p = (p + 1) & (cap - 1)) {
				const struct ht_map_region *r = &all[table[p] - 1];
				if (r->kind == i->kind && r->deleted == s->deleted &&
				    !strcmp(r->name, name))
					break;
			}
			if (table[p]) {
				region_of[x] = table[p] - 1;
				continue;
			}
			slot = &table[p];
		}
		struct ht_map_region *r = &all[nr];
		r->kind = i->kind;
		r->name = name;
		r->start = s->start;
		r->end = s->end;
		r->tid = i->tid;
		r->main_stack = i->kind == HT_MK_STACK && !strcmp(s->name, "[stack]");
		r->deleted = s->deleted;
		region_of[x] = nr++;
		if (slot)
			*slot = nr;
	}
	/* every mapping into its owner's region */
	for (size_t k = 0; k < n; k++) {
		size_t x = c->order[k];
		const struct ht_smaps_map *s = &m->sm.maps[x];
		struct ht_map_region *r = &all[region_of[c->mi[x].owner]];
		struct ht_map_amount a;
		map_amount(s, &a);
		add_amount(&r->a, &a);
		add_amount(&m->total, &a);
		r->nmaps++;
		if (s->start < r->start)
			r->start = s->start;
		if (s->end > r->end)
			r->end = s->end;
		if (!strcmp(s->perms, "---p") && c->mi[x].owner != x)
			r->reserve_kb += a.size_kb;
	}
	/* into the groups */
	for (size_t k = 0; k < nr; k++)
		m->g[all[k].kind].n++;
	for (int g = 0; g < HT_MK_N; g++) {
		m->g[g].r = calloc(m->g[g].n ? m->g[g].n : 1, sizeof(*m->g[g].r));
		if (!m->g[g].r)
			goto cleanup;
		m->g[g].n = 0;
	}
	for (size_t k = 0; k < nr; k++) {
		struct ht_map_group *g = &m->g[all[k].kind];
		g->r[g->n++] = all[k];
		add_amount(&g->a, &all[k].a);
	}
	for (int g = 0; g < HT_MK_N; g++)
		qsort(m->g[g].r, m->g[g].n, sizeof(*m->g[g].r), by_rss);
	ret = 0;
cleanup:
	free(all);
	free(region_of);
	free(table);
	return ret;
}

int ht_mapkinds__classify(struct ht_mapkinds *m)
{
	struct classify c = {.m = m, .n = m->sm.n};
	int ret = -1;
	c.mi = calloc(c.n ? c.n : 1, sizeof(*c.mi));
	c.order = malloc((c.n ? c.n : 1) * sizeof(*c.order));
	if (!c.mi || !c.order)
		goto cleanup;
	for (size_t i = 0; i < c.n; i++)
		c.order[i] = i;
	qsort_r(c.order, c.n, sizeof(*c.order), by_start, m->sm.maps);
	if (!m->exe[0]) {
		/* a saved copy: the lowest file mapping is the executable's */
		for (size_t k = 0; k < c.n; k++) {
			const struct ht_smaps_map *s = map_at(&c, k);
			if (s->inode && s->name[0] == '/') {
				snprintf(m->exe, sizeof(m->exe), "%s", s->name);
				break;
			}
		}
	}
	for (size_t i = 0; i < c.n; i++) {
		c.mi[i].owner = i;
		c.mi[i].kind = first_kind(m, &m->sm.maps[i], &c.mi[i]);
	}
	/* a file with executable code that does not look like NAME.so: a
	 * library all the same (a plugin, a Python extension renamed) */
	for (size_t i = 0; i < c.n; i++) {
		if (c.mi[i].kind != HT_MK_FILE || !strchr(m->sm.maps[i].perms, 'x'))
			continue;
		for (size_t j = 0; j < c.n; j++)
			if (c.mi[j].kind == HT_MK_FILE &&
			    !strcmp(m->sm.maps[j].name, m->sm.maps[i].name))
				c.mi[j].kind = HT_MK_LIBRARY;
	}
	find_arenas(&c);
	find_stacks(&c);
	ret = build_regions(&c);
cleanup:
	free(c.mi);
	free(c.order);
	return ret;
}

/* ---- reading ---------------------------------------------------------- */

static void denied(const struct ht_mapkinds *m)
{
	ht_error("%s: permission denied: process %d belongs to another user; "
		 "run heaptrail maps as that user or as root",
		 m->source, m->pid);
}

static int load(struct ht_mapkinds *m, FILE *f, const char *what)
{
	char err[256];
	errno = 0;
	if (ht_smaps__parse_file(&m->sm, f, err, sizeof(err))) {
		if (m->pid && (errno == EACCES || errno == EPERM))
			denied(m);
		else
			ht_error("%s: %s", what, err);
		return HT_EXIT_DATA;
	}
	return 0;
}

static int check_parsed(struct ht_mapkinds *m, const char *what, uint64_t bytes)
{
	const char *why = ht_smaps__not_smaps(&m->sm, bytes);
	if (why) {
		ht_error("%s: %s", what, why);
		return HT_EXIT_DATA;
	}
	if (ht_mapkinds__classify(m)) {
		ht_error("%s: out of memory", what);
		return HT_EXIT_DATA;
	}
	return 0;
}

/* When the main thread of process pid has exited (pthread_exit) while
 * others run on, its /proc/PID/smaps is empty: the id of a thread still
 * running, whose smaps shows the process's memory; 0 if the main thread
 * runs or none does. */
static int live_thread(int pid)
{
	char path[96], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "re");
	int zombie = f && fgets(buf, sizeof(buf), f) && strrchr(buf, ')') &&
		     strrchr(buf, ')')[1] == ' ' && strrchr(buf, ')')[2] == 'Z';
	if (f)
		fclose(f);
	if (!zombie)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	DIR *d = opendir(path);
	int tid = 0;
	struct dirent *de;
	while (d && !tid && (de = readdir(d))) {
		int t = atoi(de->d_name);
		if (t <= 0 || t == pid)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, t);
		f = fopen(path, "re");
		const char *rp = f && fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		if (rp && rp[1] == ' ' && rp[2] && rp[2] != 'Z' && rp[2] != 'X')
			tid = t;
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return tid;
}

int ht_mapkinds__from_pid(struct ht_mapkinds *m, int pid)
{
	memset(m, 0, sizeof(*m));
	m->pid = pid;
	snprintf(m->source, sizeof(m->source), "/proc/%d/smaps", pid);
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d", pid);
	if (access(dir, F_OK)) {
		ht_error("no process %d (%s: %s)", pid, dir, strerror(errno));
		return HT_EXIT_DATA;
	}
	int tid = live_thread(pid);
	if (tid)
		snprintf(m->source, sizeof(m->source), "/proc/%d/task/%d/smaps", pid, tid);
	FILE *f = fopen(m->source, "r");
	if (!f) {
		if (errno == EACCES || errno == EPERM)
			denied(m);
		else
			ht_error("%s: %s", m->source, strerror(errno));
		return HT_EXIT_DATA;
	}
	char exe_link[64];
	if (tid)
		snprintf(exe_link, sizeof(exe_link), "/proc/%d/task/%d/exe", pid, tid);
	else
		snprintf(exe_link, sizeof(exe_link), "/proc/%d/exe", pid);
	ssize_t k = readlink(exe_link, m->exe, sizeof(m->exe) - 1);
	m->exe[k > 0 ? k : 0] = 0;
	static const char deleted[] = " (deleted)";
	size_t el = strlen(m->exe), dl = sizeof(deleted) - 1;
	if (el > dl && !strcmp(m->exe + el - dl, deleted))
		m->exe[el - dl] = 0;
	int ret = load(m, f, m->source);
	fclose(f);
	if (ret)
		return ret;
	if (!m->sm.n) {
		ht_error("%s: no mappings: process %d is a kernel thread or has exited", m->source,
			 pid);
		return HT_EXIT_DATA;
	}
	return check_parsed(m, m->source, 1);
}

int ht_mapkinds__from_file(struct ht_mapkinds *m, const char *path)
{
	memset(m, 0, sizeof(*m));
	m->path = path;
	int is_stdin = !strcmp(path, "-");
	const char *what = is_stdin ? "standard input" : path;
	FILE *f = is_stdin ? stdin : fopen(path, "r");
	if (!f) {
		ht_error("%s: %s", path, strerror(errno));
		return HT_EXIT_DATA;
	}
	int ret = load(m, f, what);
	uint64_t bytes = (uint64_t)ftell(f);
	if (is_stdin || bytes == (uint64_t)-1)
		bytes = m->sm.lines; /* a pipe: any line means not empty */
	if (!is_stdin)
		fclose(f);
	return ret ? ret : check_parsed(m, what, bytes);
}

void ht_mapkinds__free(struct ht_mapkinds *m)
{
	ht_smaps__free(&m->sm);
	for (int g = 0; g < HT_MK_N; g++)
		free(m->g[g].r);
	for (size_t i = 0; i < m->nnames; i++)
		free(m->names[i]);
	free(m->names);
	memset(m, 0, sizeof(*m));
}

/* ---- output ----------------------------------------------------------- */

static void print_amount(FILE *f, const struct ht_map_amount *a)
{
	fprintf(f, "%11llu %10llu %10llu %10llu %10llu", (unsigned long long)a->size_kb,
		(unsigned long long)a->rss_kb, (unsigned long long)a->pss_kb,
		(unsigned long long)a->dirty_kb, (unsigned long long)a->swap_kb);
}

static int group_by_rss(const void *a, const void *b)
{
	const struct ht_map_group *x = *(const struct ht_map_group *const *)a;
	const struct ht_map_group *y = *(const struct ht_map_group *const *)b;
	if (x->a.rss_kb != y->a.rss_kb)
		return x->a.rss_kb < y->a.rss_kb ? 1 : -1;
	if (x->a.size_kb != y->a.size_kb)
		return x->a.size_kb < y->a.size_kb ? 1 : -1;
	return x < y ? -1 : 1;
}

void ht_mapkinds__print(const struct ht_mapkinds *m, FILE *f, size_t top)
{
	if (m->pid)
		fprintf(f, "process %d (%s): %zu mappings, %u threads\n", m->pid,
			m->exe[0] ? m->exe : "?", m->sm.n, m->threads);
	else
		fprintf(f, "%s (executable %s): %zu mappings\n",
			strcmp(m->path, "-") ? m->path : "standard input",
			m->exe[0] ? m->exe : "not known", m->sm.n);
	const struct ht_map_group *order[HT_MK_N];
	for (int g = 0; g < HT_MK_N; g++)
		order[g] = &m->g[g];
	qsort(order, HT_MK_N, sizeof(order[0]), group_by_rss);
	fprintf(f, "\n%-14s %11s %10s %10s %10s %10s  %s\n", "kind (kB)", "size", "rss", "pss",
		"dirty", "swap", "regions");
	for (int k = 0; k < HT_MK_N; k++) {
		const struct ht_map_group *g = order[k];
		if (!g->n)
			continue;
		fprintf(f, "%-14s ", ht_map_kind__title((enum ht_map_kind)(g - m->g)));
		print_amount(f, &g->a);
		fprintf(f, "  %zu\n", g->n);
	}
	fprintf(f, "%-14s ", "total");
	print_amount(f, &m->total);
	fprintf(f, "  %zu mappings\n", m->sm.n);
	for (int k = 0; k < HT_MK_N; k++) {
		const struct ht_map_group *g = order[k];
		if (!g->n)
			continue;
		fprintf(f, "\n%s (%zu), by RSS:\n%11s %10s %10s %10s %10s %5s  %s\n",
			ht_map_kind__title((enum ht_map_kind)(g - m->g)), g->n, "size", "rss", "pss",
			"dirty", "swap", "maps", "region");
		for (size_t i = 0; i < g->n && (!top || i < top); i++) {
			const struct ht_map_region *r = &g->r[i];
			print_amount(f, &r->a);
			fprintf(f, " %5u  %s%s", r->nmaps, r->name, r->deleted ? " (deleted)" : "");
			if (r->kind != HT_MK_LIBRARY && r->kind != HT_MK_FILE &&
			    r->kind != HT_MK_EXE)
				fprintf(f, " %llx-%llx", (unsigned long long)r->start,
					(unsigned long long)r->end);
			if (r->reserve_kb)
				fprintf(f, ", %llu kB %s", (unsigned long long)r->reserve_kb,
					r->kind == HT_MK_STACK ? "guard" : "reserved");
			fputc('\n', f);
		}
		if (top && g->n > top)
			fprintf(f, "%*s... %zu more (--all)\n", 58, "", g->n - top);
	}
	if (m->threads_elsewhere)
		fprintf(f, "\n%u thread(s) run on a stack in no anonymous mapping (a heap block, "
			   "a file?): not counted as stacks\n",
			m->threads_elsewhere);
	if (m->threads_unknown)
		fprintf(f, "\n%u thread(s) were running: their stacks, found by glibc's layout "
			   "alone, are not named\n",
			m->threads_unknown);
}

static void json_amount(struct ht_json *j, const struct ht_map_amount *a)
{
	ht_json__u64(j, "size_kb", a->size_kb);
	ht_json__u64(j, "rss_kb", a->rss_kb);
	ht_json__u64(j, "pss_kb", a->pss_kb);
	ht_json__u64(j, "swap_kb", a->swap_kb);
	ht_json__u64(j, "dirty_kb", a->dirty_kb);
}

static void json_hex(struct ht_json *j, const char *key, uint64_t v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)v);
	ht_json__str(j, key, buf);
}

void ht_mapkinds__json(const struct ht_mapkinds *m, struct ht_json *j)
{
	ht_json__str(j, "source", m->pid ? m->source : m->path);
	if (m->pid)
		ht_json__u64(j, "pid", (uint64_t)m->pid);
	else
		ht_json__null(j, "pid");
	ht_json__str(j, "executable", m->exe);
	ht_json__u64(j, "mappings", m->sm.n);
	ht_json__u64(j, "threads", m->threads);
	ht_json__u64(j, "stacks_by_sp", m->stacks_by_sp);
	ht_json__u64(j, "stacks_by_layout", m->stacks_by_layout);
	ht_json__u64(j, "threads_unknown_sp", m->threads_unknown);
	ht_json__u64(j, "threads_sp_elsewhere", m->threads_elsewhere);
	ht_json__obj_begin(j, "total");
	json_amount(j, &m->total);
	ht_json__obj_end(j);
	ht_json__obj_begin(j, "regions");
	for (int k = 0; k < HT_MK_N; k++) {
		const struct ht_map_group *g = &m->g[k];
		ht_json__obj_begin(j, ht_map_kind__key((enum ht_map_kind)k));
		ht_json__str(j, "title", ht_map_kind__title((enum ht_map_kind)k));
		ht_json__u64(j, "count", g->n);
		json_amount(j, &g->a);
		ht_json__arr_begin(j, "regions");
		for (size_t i = 0; i < g->n; i++) {
			const struct ht_map_region *r = &g->r[i];
			ht_json__obj_begin(j, NULL);
			ht_json__str(j, "name", r->name);
			json_hex(j, "start", r->start);
			json_hex(j, "end", r->end);
			ht_json__u64(j, "maps", r->nmaps);
			json_amount(j, &r->a);
			ht_json__u64(j, "reserve_kb", r->reserve_kb);
			if (r->kind == HT_MK_STACK) {
				if (r->tid)
					ht_json__u64(j, "tid", r->tid);
				else if (r->main_stack && m->pid)
					ht_json__u64(j, "tid", (uint64_t)m->pid);
				else
					ht_json__null(j, "tid");
				ht_json__bool(j, "main", r->main_stack);
			}
			if (r->deleted)
				ht_json__bool(j, "deleted", 1);
			ht_json__obj_end(j);
		}
		ht_json__arr_end(j);
		ht_json__obj_end(j);
	}
	ht_json__obj_end(j);
}
