/* Stacks for `record --stacks`: the call stack of every allocation, taken
 * with libunwind (DWARF CFI, so that code built without frame pointers,
 * glibc's and libstdc++'s included, still gives whole stacks), and written
 * once per call path.
 *
 * Each thread keeps a tree of the call paths it has seen: a node is a
 * return address under its caller's node, and a new node is written to
 * the thread's stream as a FRAME record (id, parent, address) before the
 * first event that uses it.  A second table maps a hash of a whole stack
 * to its innermost node, so that a call path seen before costs one lookup
 * after the unwind.  The tables are the thread's own (no lock); the same
 * path in two threads is two sets of nodes, which the reader merges.
 *
 * The modules the addresses belong to (path, load bias, extent, build-id)
 * are written as MODULE records the first time a stack is taken and
 * whenever a new node's address lies outside every module known (a
 * library dlopen'ed since), so that the analyzers resolve addresses
 * offline, on another machine too. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <elf.h>
#include <libunwind.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "preload.h"

#define HT_MAX_DEPTH 256 /* --stacks=DEPTH at most */
#define SKIP_SLACK 8     /* frames of the tracer itself above the program's */

struct stk_node {
	uint64_t ip;     /* return address */
	uint32_t parent; /* caller's node, 0 = outermost */
	uint32_t id;     /* this node, 0 = empty slot */
};

struct stk_leaf {
	uint64_t hash; /* of the whole stack */
	uint32_t id;   /* its innermost node, 0 = empty slot */
	uint32_t pad;  /* zero */
};

struct ht_stacks {
	struct stk_node *nodes;  /* (parent, ip) -> id, open addressing */
	unsigned nodes_lg;       /* log2 of its slots */
	struct stk_leaf *leaves; /* stack hash -> innermost node */
	unsigned leaves_lg;      /* log2 of its slots */
	uint32_t next_id;        /* ids handed out */
	uint32_t nleaves;        /* leaves stored */
};

/* ---- memory without malloc --------------------------------------------- */

static void *map(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static size_t mix(uint64_t h)
{
	h *= 0x9E3779B97F4A7C15ull;
	return (size_t)(h ^ (h >> 31));
}

static int grow_nodes(struct ht_stacks *s)
{
	unsigned lg = s->nodes_lg ? s->nodes_lg + 1 : 12;
	size_t cap = (size_t)1 << lg, mask = cap - 1;
	struct stk_node *t = map(cap * sizeof(*t));
	if (!t)
		return -1;
	for (size_t i = 0; s->nodes && i < ((size_t)1 << s->nodes_lg); i++) {
		const struct stk_node *n = &s->nodes[i];
		if (!n->id)
			continue;
		size_t k = mix(n->ip ^ ((uint64_t)n->parent << 40)) & mask;
		while (t[k].id)
			k = (k + 1) & mask;
		t[k] = *n;
	}
	if (s->nodes)
		munmap(s->nodes, ((size_t)1 << s->nodes_lg) * sizeof(*s->nodes));
	s->nodes = t;
	s->nodes_lg = lg;
	return 0;
}

static int grow_leaves(struct ht_stacks *s)
{
	unsigned lg = s->leaves_lg ? s->leaves_lg + 1 : 12;
	size_t cap = (size_t)1 << lg, mask = cap - 1;
	struct stk_leaf *t = map(cap * sizeof(*t));
	if (!t)
		return -1;
	for (size_t i = 0; s->leaves && i < ((size_t)1 << s->leaves_lg); i++) {
		if (!s->leaves[i].id)
			continue;
		size_t k = mix(s->leaves[i].hash) & mask;
		while (t[k].id)
			k = (k + 1) & mask;
		t[k] = s->leaves[i];
	}
	if (s->leaves)
		munmap(s->leaves, ((size_t)1 << s->leaves_lg) * sizeof(*s->leaves));
	s->leaves = t;
	s->leaves_lg = lg;
	return 0;
}

/* ---- modules ------------------------------------------------------------- */

struct mod {
	uint64_t lo, hi; /* extent of its PT_LOAD segments */
	uint64_t base;   /* load bias */
};

struct mod_list {
	size_t n;          /* modules */
	struct mod m[];    /* sorted by lo */
};

/* Published lists are never freed (modules change rarely): a thread may
 * still be searching an old one. */
static _Atomic(struct mod_list *) mods;
static _Atomic int mods_busy; /* a refresh is under way */
static uint64_t self_lo, self_hi; /* libheaptrail.so: frames to skip */

static int known(uint64_t ip)
{
	struct mod_list *l = atomic_load_explicit(&mods, memory_order_acquire);
	if (!l)
		return 0;
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (ip < l->m[mid].lo)
			hi = mid;
		else if (ip >= l->m[mid].hi)
			lo = mid + 1;
		else
			return 1;
	}
	return 0;
}

struct scan {
	struct ht_tls *t;        /* the thread that writes the records */
	struct mod_list *old;    /* the list before */
	struct mod_list *next;   /* the list being built */
	size_t cap;              /* its room */
};

static void note_build_id(struct ht_tls *t, const struct dl_phdr_info *info, uint64_t base)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		const uint8_t *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			const uint8_t *name = p + sizeof(*nh);
			const uint8_t *desc = name + ((nh->n_namesz + 3) & ~3u);
			const uint8_t *next = desc + ((nh->n_descsz + 3) & ~3u);
			if (next > end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    !memcmp(name, "GNU", 4) && nh->n_descsz <= 64) {
				uint64_t v[2] = {base, nh->n_descsz};
				ht_meta__write(t, HT_EV_BUILD_ID, v, desc, nh->n_descsz);
				return;
			}
			p = next;
		}
	}
}

static int on_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct scan *sc = arg;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uint64_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < lo)
			lo = a;
		if (a + ph->p_memsz > hi)
			hi = a + ph->p_memsz;
	}
	if (lo >= hi || sc->next->n == sc->cap)
		return 0;
	uint64_t self = (uint64_t)(uintptr_t)&on_module;
	if (self >= lo && self < hi) {
		self_lo = lo;
		self_hi = hi;
	}
	struct mod m = {lo, hi, info->dlpi_addr};
	/* insert sorted */
	size_t k = sc->next->n++;
	while (k > 0 && sc->next->m[k - 1].lo > lo) {
		sc->next->m[k] = sc->next->m[k - 1];
		k--;
	}
	sc->next->m[k] = m;
	int seen = 0;
	for (size_t i = 0; sc->old && i < sc->old->n; i++)
		if (sc->old->m[i].lo == lo && sc->old->m[i].base == m.base)
			seen = 1;
	if (!seen) {
		const char *path = info->dlpi_name;
		char exe[512];
		if (!path || !*path) {
			/* the main program: the loader gives no name */
			ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
			exe[n > 0 ? n : 0] = 0;
			path = exe;
		}
		size_t len = strnlen(path, HT_MAX_STR);
		uint64_t v[4] = {m.base, lo, hi, len};
		ht_meta__write(sc->t, HT_EV_MODULE, v, (const uint8_t *)path, len);
		note_build_id(sc->t, info, m.base);
	}
	return 0;
}

/* Writes MODULE records for modules mapped since the last look, and
 * MODULE_GONE for those unmapped.  One thread at a time; the others go
 * on without (their addresses resolve once the module is written). */
static void modules_refresh(struct ht_tls *t)
{
	int expect = 0;
	if (!atomic_compare_exchange_strong(&mods_busy, &expect, 1))
		return;
	struct scan sc = {t, atomic_load(&mods), NULL, 1024};
	sc.next = map(sizeof(struct mod_list) + sc.cap * sizeof(struct mod));
	if (sc.next) {
		dl_iterate_phdr(on_module, &sc);
		for (size_t i = 0; sc.old && i < sc.old->n; i++) {
			int still = 0;
			for (size_t j = 0; j < sc.next->n; j++)
				if (sc.next->m[j].lo == sc.old->m[i].lo &&
				    sc.next->m[j].base == sc.old->m[i].base)
					still = 1;
			if (!still) {
				uint64_t v[1] = {sc.old->m[i].base};
				ht_meta__write(t, HT_EV_MODULE_GONE, v, NULL, 0);
			}
		}
		atomic_store_explicit(&mods, sc.next, memory_order_release);
	}
	atomic_store(&mods_busy, 0);
}

/* ---- capture --------------------------------------------------------------- */

static uint32_t node_get(struct ht_tls *t, struct ht_stacks *s, uint32_t parent, uint64_t ip)
{
	if ((s->next_id + 1) * 2 >= ((size_t)1 << s->nodes_lg) && grow_nodes(s) < 0)
		return 0;
	size_t mask = ((size_t)1 << s->nodes_lg) - 1;
	size_t k = mix(ip ^ ((uint64_t)parent << 40)) & mask;
	for (; s->nodes[k].id; k = (k + 1) & mask)
		if (s->nodes[k].ip == ip && s->nodes[k].parent == parent)
			return s->nodes[k].id;
	if (!known(ip))
		modules_refresh(t);
	uint32_t id = ++s->next_id;
	s->nodes[k].ip = ip;
	s->nodes[k].parent = parent;
	s->nodes[k].id = id;
	uint64_t v[3] = {id, parent, ip};
	ht_meta__write(t, HT_EV_FRAME, v, NULL, 0);
	return id;
}

uint32_t ht_stack__capture(struct ht_tls *t)
{
	struct ht_stacks *s = t->stacks;
	if (!s) {
		s = map(sizeof(*s));
		if (!s || grow_nodes(s) < 0 || grow_leaves(s) < 0)
			return 0;
		t->stacks = s;
	}
	if (!atomic_load_explicit(&mods, memory_order_acquire))
		modules_refresh(t); /* the first stack of the process */
	void *ips[HT_MAX_DEPTH + SKIP_SLACK];
	int depth = ht_opt.stack_depth > HT_MAX_DEPTH ? HT_MAX_DEPTH : ht_opt.stack_depth;
	int n = unw_backtrace(ips, depth + SKIP_SLACK);
	int i = 0;
	while (i < n && (uint64_t)(uintptr_t)ips[i] >= self_lo &&
	       (uint64_t)(uintptr_t)ips[i] < self_hi)
		i++;
	n -= i;
	if (n > depth)
		n = depth;
	if (n <= 0)
		return 0;
	void **st = ips + i;
	uint64_t h = (uint64_t)n;
	for (int j = 0; j < n; j++)
		h = (h ^ (uint64_t)(uintptr_t)st[j]) * 0x100000001B3ull + (h >> 23);
	if (!h)
		h = 1;
	size_t mask = ((size_t)1 << s->leaves_lg) - 1;
	size_t k = mix(h) & mask;
	for (; s->leaves[k].id; k = (k + 1) & mask)
		if (s->leaves[k].hash == h)
			return s->leaves[k].id;
	/* A new call path: its nodes, outermost first. */
	uint32_t node = 0;
	for (int j = n - 1; j >= 0; j--) {
		node = node_get(t, s, node, (uint64_t)(uintptr_t)st[j]);
		if (!node)
			return 0;
	}
	if ((s->nleaves + 1) * 2 >= ((size_t)1 << s->leaves_lg)) {
		if (grow_leaves(s) < 0)
			return node;
		mask = ((size_t)1 << s->leaves_lg) - 1;
		k = mix(h) & mask;
		while (s->leaves[k].id)
			k = (k + 1) & mask;
	}
	s->leaves[k].hash = h;
	s->leaves[k].id = node;
	s->nleaves++;
	return node;
}

void ht_stack__thread_exit(struct ht_tls *t)
{
	struct ht_stacks *s = t->stacks;
	if (!s)
		return;
	t->stacks = NULL;
	if (s->nodes)
		munmap(s->nodes, ((size_t)1 << s->nodes_lg) * sizeof(*s->nodes));
	if (s->leaves)
		munmap(s->leaves, ((size_t)1 << s->leaves_lg) * sizeof(*s->leaves));
	munmap(s, sizeof(*s));
}

/* In a fork child: its trace is new, so every node and module is new to it. */
void ht_stack__after_fork_child(struct ht_tls *t)
{
	ht_stack__thread_exit(t);
	atomic_store(&mods, NULL);
	atomic_store(&mods_busy, 0);
}
