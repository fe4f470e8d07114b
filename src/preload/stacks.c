/* Stacks for `record --stacks`: the call stack of every allocation, taken
 * from the call-frame information of each module (.eh_frame: code built
 * without frame pointers, most of Debian, gives whole stacks at the cost
 * of frame pointers; the walk below, rules from ehframe.c), and written
 * once per call path.
 *
 * Each thread keeps a tree of the call paths it has seen: a node is a
 * return address under its caller's node, and a new node is written to
 * the thread's stream as a FRAME record (id, parent, address) before the
 * first event that uses it.  A second table maps a hash of a whole stack
 * to its innermost node, so that a call path seen before costs one lookup
 * after the unwind; the hash goes from the outermost frame in, so that a
 * stack sharing its outer frames with the last one continues the last
 * one's hash where they part (log_node), and one that ends at a frame of
 * the last one takes that frame's node without a lookup.  The tables are
 * the thread's own (no lock); the same path in two threads is two sets of
 * nodes, which the reader merges.
 *
 * The modules the addresses belong to (path, load bias, extent, build-id)
 * are written as MODULE records the first time a stack is taken and
 * whenever a new node's address lies outside every module known (a
 * library dlopen'ed since), so that the analyzers resolve addresses
 * offline, on another machine too.
 *
 * Once a dlclose has unmapped a library (ht_stack__after_dlclose: a new
 * module generation), another may be mapped at its addresses: each thread
 * then starts its tables over at its next stack and writes the modules in
 * its own stream, so that the reader binds each FRAME to the right one
 * (stacks_sync; docs/record.md, "Stacks of libraries loaded and
 * unloaded"). */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <elf.h>
#include <emmintrin.h>
#include <stddef.h>
#include <libunwind.h>
#include <link.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "preload.h"

#define HT_MAX_DEPTH 256 /* --stacks=DEPTH at most */
#define SKIP_SLACK 8     /* frames of the tracer itself above the program's */
#define ALT_ROOM 4096    /* stack libunwind's walk may take: less left on an alternate
			  * signal stack, the call goes without a stack */
#define LEAF0_LG 9       /* log2 of the first-level stack table's slots */

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

struct mod_list;

struct ht_stacks {
	struct stk_node *nodes;  /* (parent, ip) -> id, open addressing */
	unsigned nodes_lg;       /* log2 of its slots */
	struct stk_leaf *leaves; /* stack hash -> innermost node */
	unsigned leaves_lg;      /* log2 of its slots */
	uint32_t next_id;        /* ids handed out (they keep increasing: FRAME records) */
	uint32_t nnodes;         /* nodes stored */
	uint32_t nleaves;        /* leaves stored */
	uint32_t gen;            /* mod_gen the tables belong to, GEN_NEW before the first stack */
	struct mod_list *own;    /* the thread's own modules once a library was unmapped, else NULL */
	uintptr_t stack_lo;      /* bottom of the thread's stack */
	uintptr_t stack_hi;      /* its top; 0: unknown */
	int bounds_known;        /* stack_lo/hi were looked for (never on an
				  * alternate signal stack: stacks_bounds_try) */
	struct walk_cache *walk; /* the walk's caches, or NULL */
	/* the stacks seen last, in front of leaves: the large table's slot
	 * of a stack is, in a program with a large working set of its own,
	 * out of every cache by the time the stack comes again */
	struct stk_leaf leaf0[1u << LEAF0_LG];
	/* The walk's frames and libunwind's context and cursor, here and not
	 * on the stack (some 4 KiB): a signal handler on an alternate stack of
	 * SIGSTKSZ (8 KiB, an AVX-512 signal frame taking 3 of them) that
	 * allocates overflowed it with --stacks.  One capture at a time per
	 * thread (the recorder's guard is up: a handler interrupting it is a
	 * nested call, taken without a stack). */
	uint64_t ips[HT_MAX_DEPTH + SKIP_SLACK];
	unw_context_t uc;
	unw_cursor_t cur;
};

/* ---- memory without malloc --------------------------------------------- */

static void *map(size_t bytes)
{
	return ht_own_map(bytes, MAP_PRIVATE);
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
		ht_own_unmap(s->nodes, ((size_t)1 << s->nodes_lg) * sizeof(*s->nodes));
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
		ht_own_unmap(s->leaves, ((size_t)1 << s->leaves_lg) * sizeof(*s->leaves));
	s->leaves = t;
	s->leaves_lg = lg;
	return 0;
}

/* ---- modules ------------------------------------------------------------- */

struct mod {
	uint64_t lo, hi;        /* extent of its PT_LOAD segments */
	uint64_t base;          /* load bias */
	uint64_t key;           /* hash of its path and build-id: with lo, hi, base, which module it is */
	const uint8_t *eh_hdr;  /* its .eh_frame_hdr, NULL if none usable */
	uint64_t eh_lo, eh_hi;  /* the loaded segment that holds it: what ehframe.c may read */
	uint32_t nfde;          /* entries of its search table */
	uint32_t path_len;      /* bytes of path */
	uint32_t bid_len;       /* bytes of build_id, 0 if it has none */
	char path[HT_MAX_STR];  /* as the loader names it (the executable: /proc/self/exe) */
	uint8_t build_id[64];   /* its GNU build-id */
};

struct mod_list {
	size_t n;          /* modules */
	size_t bytes;      /* size of this mapping */
	struct mod m[];    /* sorted by lo */
};

/* Until a dlclose unmaps a library (generation 0), the modules are one
 * list for every thread: MODULE records go to the stream of the thread
 * that finds a module first, and the reader shares them between threads.
 * Published lists are never freed (modules change rarely): a thread may
 * still be searching an old one.  After an unmapping, each thread keeps
 * its own list and writes the changes to its own stream (see
 * stacks_sync): a library mapped where another one was is then told
 * apart by the reader, whatever the order in which it reads the threads. */
static _Atomic(struct mod_list *) mods;
static _Atomic int mods_busy; /* a refresh is under way */
static uint64_t self_lo, self_hi; /* libheaptrail.so: frames to skip */
/* Bumped when a dlclose unmapped something (ht_stack__after_dlclose): the
 * threads' call-path tables may hold addresses that now mean other code. */
static _Atomic uint32_t mod_gen;
#define GEN_NEW UINT32_MAX /* a thread's tables belong to no generation yet */
static _Atomic unsigned long long last_subs; /* the loader's unmap count, last looked at */

static const struct mod *module_of(const struct mod_list *l, uint64_t ip)
{
	if (!l)
		return NULL;
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (ip < l->m[mid].lo)
			hi = mid;
		else if (ip >= l->m[mid].hi)
			lo = mid + 1;
		else
			return &l->m[mid];
	}
	return NULL;
}

/* ---- the modules' call-frame information ---------------------------------- */

/* Bytes of a DW_EH_PE-encoded value of fixed size, 0 if not fixed. */
static unsigned enc_size(uint8_t enc)
{
	switch (enc & 0x0f) {
	case 0x00: return 8;
	case 0x02: case 0x0a: return 2;
	case 0x03: case 0x0b: return 4;
	case 0x04: case 0x0c: return 8;
	default: return 0;
	}
}

/* The search table of a module's .eh_frame_hdr: version 1, a 4-byte FDE
 * count, pairs of 4-byte offsets from the header (what GNU ld writes). */
static const uint8_t *eh_table(const struct dl_phdr_info *info, uint32_t *count)
{
	const uint8_t *hdr = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME)
			hdr = (const uint8_t *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	if (!hdr || hdr[0] != 1 || (hdr[2] & 0x0f) != 0x03 || hdr[3] != 0x3b || !enc_size(hdr[1]))
		return NULL;
	memcpy(count, hdr + 4 + enc_size(hdr[1]), 4);
	return hdr;
}

struct scan {
	struct mod_list *next;        /* the list being built */
	size_t cap;                   /* its room */
	int full;                     /* more modules than room: scan again */
};

/* Copies the module's GNU build-id into m. */
static void find_build_id(struct mod *m, const struct dl_phdr_info *info)
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
			    !memcmp(name, "GNU", 4) && nh->n_descsz <= sizeof(m->build_id)) {
				memcpy(m->build_id, desc, nh->n_descsz);
				m->bid_len = nh->n_descsz;
				return;
			}
			p = next;
		}
	}
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001B3ull;
	return h;
}

static int same_module(const struct mod *a, const struct mod *b)
{
	return a->lo == b->lo && a->hi == b->hi && a->base == b->base && a->key == b->key;
}

static const struct mod *find_same(const struct mod_list *l, const struct mod *m)
{
	for (size_t i = 0; l && i < l->n; i++)
		if (same_module(&l->m[i], m))
			return &l->m[i];
	return NULL;
}

static int count_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	++*(size_t *)arg;
	return 0;
}

/* The line of /proc/self/maps whose mapping holds addr: its start and end,
 * the end of the mapping before it (*prev_end), and its name (a path,
 * "[stack]", ...; empty for anonymous memory) in name, cut at cap - 1
 * bytes and ended by a 0, its whole length in *name_len.  1 if found.
 * System calls only, no allocation, no cancellation point: the first
 * stack of a thread may be taken in an mmap made by another allocator
 * holding its own lock (alloc.c), and in a signal handler.  Read in small
 * pieces and parsed as it comes, whatever the length of a line: it runs
 * on the program's stack, at the thread's first stack, and a thread made
 * with PTHREAD_STACK_MIN that ran untraced and without --stacks died of
 * SIGSEGV when the file was read into 4 KiB there
 * (e2e.stacks_small_thread_stack). */
static int maps_line(uintptr_t addr, uintptr_t *start, uintptr_t *end, uintptr_t *prev_end,
		     char *name, size_t cap, size_t *name_len)
{
	enum { LO, HI, FIELDS, PAD, NAME, SKIP };
	int fd = ht_sys_open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[256];
	int state = LO, fields = 0, found = 0;
	uintptr_t lo = 0, hi = 0, before = 0;
	size_t len = 0;
	ssize_t n;
	while (!found && (n = ht_sys_read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			char c = buf[i];
			if (c == '\n') {
				if (state == FIELDS || state == PAD || state == NAME) {
					found = 1; /* (addr in [lo, hi): seen at HI) */
					break;
				}
				before = hi;
				state = LO;
				lo = hi = 0;
				len = 0;
				fields = 0;
				continue;
			}
			int digit = -1;
			if (c >= '0' && c <= '9')
				digit = c - '0';
			else if (c >= 'a' && c <= 'f')
				digit = c - 'a' + 10;
			switch (state) {
			case LO:
				if (digit >= 0)
					lo = lo << 4 | (uintptr_t)digit;
				else
					state = c == '-' ? HI : SKIP;
				break;
			case HI:
				if (digit >= 0)
					hi = hi << 4 | (uintptr_t)digit;
				else
					state = c == ' ' && addr >= lo && addr < hi ? FIELDS : SKIP;
				break;
			case FIELDS: /* permissions, offset, device, inode */
				if (c == ' ' && ++fields == 4)
					state = PAD;
				break;
			case PAD:
				if (c == ' ')
					break;
				state = NAME;
				/* fallthrough */
			case NAME:
				if (len + 1 < cap)
					name[len] = c;
				len++;
				break;
			default: /* SKIP: another mapping's line */
				break;
			}
		}
	}
	ht_sys_close(fd);
	if (!found)
		return 0;
	*start = lo;
	*end = hi;
	*prev_end = before;
	name[len < cap ? len : cap - 1] = 0;
	*name_len = len;
	return 1;
}

/* The absolute path of the file mapped at addr (maps_line), " (deleted)"
 * left off, into out (at most cap bytes); its length, 0 if none.  For
 * libraries the loader names by a relative path (LD_LIBRARY_PATH=.,
 * dlopen("./x.so")): that name means nothing once the program has changed
 * directory, or to an analyzer run elsewhere. */
static uint32_t maps_path(uint64_t addr, char *out, size_t cap)
{
	static const char deleted[] = " (deleted)";
	uintptr_t lo, hi, prev;
	char path[HT_MAX_STR + sizeof(deleted)];
	size_t len;
	if (!maps_line((uintptr_t)addr, &lo, &hi, &prev, path, sizeof(path), &len))
		return 0;
	if (path[0] != '/')
		return 0; /* mapped, but not from a file */
	if (len >= sizeof(path))
		return 0; /* (cut: not the whole path) */
	if (len > sizeof(deleted) - 1 && !strcmp(path + len - (sizeof(deleted) - 1), deleted))
		len -= sizeof(deleted) - 1;
	if (len > cap)
		return 0;
	memcpy(out, path, len);
	return (uint32_t)len;
}

/* The extent of module info's PT_LOAD segments: 0 if it has none. */
static int module_extent(const struct dl_phdr_info *info, uint64_t *lo_out, uint64_t *hi_out)
{
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
	*lo_out = lo;
	*hi_out = hi;
	return lo < hi;
}

static int on_self(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	uint64_t lo, hi, self = (uint64_t)(uintptr_t)&on_self;
	if (!module_extent(info, &lo, &hi) || self < lo || self >= hi)
		return 0;
	__atomic_store_n(&self_lo, lo, __ATOMIC_RELAXED);
	__atomic_store_n(&self_hi, hi, __ATOMIC_RELEASE);
	return 1;
}

/* This library's extent, for the walk to skip its own frames: before a
 * thread's first stack, not with the module list, which one thread at a
 * time reads.  A thread whose first stack came while another read it
 * took the library's own return address for the program's, and its
 * stacks at that call site, kept by the walk's log, lost their frames
 * (probe V: sampled stacks of 4 threads cut to one frame, 1 run in 15). */
static void self_bounds(void)
{
	if (!__atomic_load_n(&self_hi, __ATOMIC_ACQUIRE))
		dl_iterate_phdr(on_self, NULL);
}

static int on_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct scan *sc = arg;
	uint64_t lo, hi;
	if (!module_extent(info, &lo, &hi))
		return 0;
	if (sc->next->n == sc->cap) {
		sc->full = 1;
		return 1;
	}
	/* insert sorted */
	size_t k = sc->next->n++;
	while (k > 0 && sc->next->m[k - 1].lo > lo) {
		sc->next->m[k] = sc->next->m[k - 1];
		k--;
	}
	struct mod *m = &sc->next->m[k];
	memset(m, 0, sizeof(*m));
	m->lo = lo;
	m->hi = hi;
	m->base = info->dlpi_addr;
	const char *path = info->dlpi_name;
	if (path && *path) {
		m->path_len = (uint32_t)strnlen(path, sizeof(m->path));
		memcpy(m->path, path, m->path_len);
	} else {
		/* the main program: the loader gives no name (read once: it
		 * changes only with exec, which starts the tracer again) */
		static char exe[HT_MAX_STR];
		static _Atomic int exe_len = -1;
		int n = atomic_load(&exe_len);
		if (n < 0) {
			ssize_t got = readlink("/proc/self/exe", exe, sizeof(exe));
			n = got > 0 ? (int)got : 0;
			atomic_store(&exe_len, n);
		}
		memcpy(m->path, exe, (size_t)n);
		m->path_len = (uint32_t)n;
	}
	find_build_id(m, info);
	m->key = hash_bytes(hash_bytes(0xcbf29ce484222325ull, m->path, m->path_len), m->build_id,
			    m->bid_len);
	if (m->path_len && m->path[0] != '/') {
		/* named by a relative path: the file's absolute one, from the
		 * list published before if it has the module (the key stays
		 * that of the loader's name), else from /proc/self/maps */
		const struct mod *had = find_same(atomic_load(&mods), m);
		if (had) {
			memcpy(m->path, had->path, had->path_len);
			m->path_len = had->path_len;
		} else {
			uint32_t n = maps_path(lo, m->path, sizeof(m->path));
			if (n)
				m->path_len = n;
		}
	}
	m->eh_hdr = eh_table(info, &m->nfde);
	for (int i = 0; m->eh_hdr && i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uint64_t a = info->dlpi_addr + ph->p_vaddr, h = (uint64_t)(uintptr_t)m->eh_hdr;
		if (ph->p_type == PT_LOAD && h >= a && h < a + ph->p_filesz) {
			m->eh_lo = a;
			m->eh_hi = a + ph->p_filesz;
		}
	}
	if (!m->eh_hi)
		m->eh_hdr = NULL;
	return 0;
}

/* The modules mapped now; NULL if out of memory. */
static struct mod_list *modules_scan(void)
{
	for (size_t extra = 8;; extra *= 2) {
		size_t n = 0;
		dl_iterate_phdr(count_module, &n);
		size_t bytes = sizeof(struct mod_list) + (n + extra) * sizeof(struct mod);
		struct mod_list *l = map(bytes);
		if (!l)
			return NULL;
		l->bytes = bytes;
		struct scan sc = {l, n + extra, 0};
		dl_iterate_phdr(on_module, &sc);
		if (!sc.full)
			return l;
		ht_own_unmap(l, bytes); /* libraries were loaded meanwhile */
	}
}

/* Writes to t's stream MODULE_GONE for the modules of old that now lacks,
 * then MODULE and BUILD_ID for those of now that old lacks (gone first: a
 * new module may have the load bias of one gone). */
static void modules_announce(struct ht_tls *t, const struct mod_list *old,
			     const struct mod_list *now)
{
	for (size_t i = 0; old && i < old->n; i++) {
		if (!find_same(now, &old->m[i])) {
			uint64_t v[1] = {old->m[i].base};
			ht_meta__write(t, HT_EV_MODULE_GONE, v, NULL, 0);
		}
	}
	for (size_t i = 0; i < now->n; i++) {
		const struct mod *m = &now->m[i];
		if (find_same(old, m))
			continue;
		uint64_t v[4] = {m->base, m->lo, m->hi, m->path_len};
		ht_meta__write(t, HT_EV_MODULE, v, m->path, m->path_len);
		if (m->bid_len) {
			uint64_t b[2] = {m->base, m->bid_len};
			ht_meta__write(t, HT_EV_BUILD_ID, b, m->build_id, m->bid_len);
		}
	}
}

/* Generation 0: refreshes the shared list, with MODULE records for the
 * modules mapped since the last look and MODULE_GONE for those unmapped.
 * One thread at a time; the others go on without (their addresses resolve
 * once the module is written).  Returns 0 if another thread was at it (it
 * is never waited for: it may wait for the loader's lock, which this
 * thread may hold, in a dlopen that allocates). */
static int modules_refresh(struct ht_tls *t)
{
	int expect = 0;
	if (!atomic_compare_exchange_strong(&mods_busy, &expect, 1))
		return 0;
	struct mod_list *old = atomic_load(&mods);
	if (HT_UNLIKELY(ht_opt.scan_delay_us) && !old) {
		/* (the tests' window for other threads' first stacks) */
		struct timespec ts = {ht_opt.scan_delay_us / 1000000,
				      ht_opt.scan_delay_us % 1000000 * 1000L};
		ht_raw_syscall(SYS_nanosleep, (long)&ts, 0, 0, 0, 0, 0);
	}
	struct mod_list *l = modules_scan();
	if (l) {
		modules_announce(t, old, l);
		atomic_store_explicit(&mods, l, memory_order_release);
	}
	atomic_store(&mods_busy, 0);
	return 1;
}

/* After an unmapping: the thread's own list, brought up to date, with the
 * changes in its own stream (all modules, the first time). */
static void modules_own(struct ht_tls *t, struct ht_stacks *s)
{
	struct mod_list *l = modules_scan();
	if (!l)
		return;
	modules_announce(t, s->own, l);
	if (s->own)
		ht_own_unmap(s->own, s->own->bytes);
	s->own = l;
}

/* The list the thread resolves its addresses with. */
static const struct mod_list *view_of(const struct ht_stacks *s)
{
	return s->own ? s->own : atomic_load_explicit(&mods, memory_order_acquire);
}

/* ---- capture --------------------------------------------------------------- */

static uint32_t node_get(struct ht_tls *t, struct ht_stacks *s, uint32_t parent, uint64_t ip)
{
	if ((s->nnodes + 1) * 2 >= ((size_t)1 << s->nodes_lg) && grow_nodes(s) < 0)
		return 0;
	size_t mask = ((size_t)1 << s->nodes_lg) - 1;
	size_t k = mix(ip ^ ((uint64_t)parent << 40)) & mask;
	for (; s->nodes[k].id; k = (k + 1) & mask)
		if (s->nodes[k].ip == ip && s->nodes[k].parent == parent)
			return s->nodes[k].id;
	if (!module_of(view_of(s), ip)) {
		if (s->own)
			modules_own(t, s);
		else
			modules_refresh(t);
	}
	uint32_t id = ++s->next_id;
	s->nnodes++;
	s->nodes[k].ip = ip;
	s->nodes[k].parent = parent;
	s->nodes[k].id = id;
	uint64_t v[3] = {id, parent, ip};
	ht_meta__write(t, HT_EV_FRAME, v, NULL, 0);
	return id;
}

/* The hash of a call path, outermost frame first, one frame at a time:
 * path_step(... path_step(PATH_SEED, outermost) ..., innermost).  So a
 * stack that shares its outer frames with the last one continues from the
 * hash the log kept where they agree (log_node), and the frames the last
 * walk reused are not read again.  For a given ip each step is a
 * bijection of h (xor, then an invertible multiply-xorshift mix): two
 * paths of one length that differ in one frame never collide, others as
 * random 64-bit values do.  The stack table trusts the hash: two stacks of
 * one thread with the same hash would share a node (odds about n^2 / 2^65
 * for n distinct stacks). */
#define PATH_SEED 0x9E3779B97F4A7C15ull

static inline uint64_t path_step(uint64_t h, uint64_t ip)
{
	h ^= ip;
	h *= 0xBF58476D1CE4E5B9ull;
	h ^= h >> 31;
	h *= 0x94D049BB133111EBull;
	h ^= h >> 29;
	return h;
}

/* Asks for the cache lines where the stack table may hold the stack of
 * path hash h (both levels at once: in a program with a large working set
 * of its own, such as cc1, each is a miss, and one after the other they
 * were the walk's largest cost). */
static inline void leaf_prefetch(const struct ht_stacks *s, uint64_t h)
{
	__builtin_prefetch(&s->leaf0[h >> (64 - LEAF0_LG)]);
	__builtin_prefetch(&s->leaves[mix(h) & (((size_t)1 << s->leaves_lg) - 1)]);
}

/* ---- the walk ---------------------------------------------------------------
 * Frame by frame with the rule each return address's function gives in
 * its module's .eh_frame (ehframe.c): the caller's stack pointer (the CFA)
 * from rsp or rbp, the return address just below it, rbp reloaded where
 * the function saved it.  Code with frame pointers and code without cost
 * the same: the rules are cached per thread by return address, so a warm
 * frame is one probe of that cache and one or two loads from the stack.
 * Only the rbp chain of the tracer's own frames is followed without rules
 * (it is built with frame pointers).
 *
 * A frame whose rule the compact form cannot say (a signal frame, a PLT
 * entry, a CFA computed from another register, code without call-frame
 * information) goes to libunwind, from the registers the walk has (rip,
 * rsp, rbp), until a frame with a compact rule comes again.  Those
 * stretches are cached per thread by where they start, with the stack
 * slots each return address was read from: a later walk that finds the
 * same addresses in the same slots takes the cached frames without
 * unwinding.  The walk reads nothing outside the part of the thread's
 * stack above its own frame. */

#define CONT_SLOTS 64  /* cached libunwind stretches per thread */
#define CONT_FRAMES 16 /* frames per cached stretch */
#define RULE_LG 14     /* log2 of the cached rules per thread */
#define RULE0_LG 10    /* log2 of those in the first level */
#define RULE_WAYS_LG 2 /* log2 of the ways of a second-level set (4: a cache line) */

struct cont_entry {
	uint64_t pc, sp, bp;         /* the frame it starts from (pc already recorded) */
	uint32_t n;                  /* frames it adds */
	uint32_t resume;             /* the walk goes on from the last of them, else the stack ends */
	uint64_t resume_sp;          /* the last frame's rsp */
	uint64_t resume_bp;          /* and rbp */
	uint64_t ips[CONT_FRAMES];   /* the frames */
	uint64_t slots[CONT_FRAMES]; /* where each was read */
};

/* One frame of the last walk, and what the step from it read from the
 * stack: a later walk that reaches the same frame (same return address,
 * stack pointer and, if the rest depends on it, rbp) while those slots
 * still hold the same values takes the rest of the stack from the log
 * without stepping: the same registers and the same memory give the same
 * frames.  The reads of a whole stack are independent loads (a walk's are
 * a chain: each address comes from the load before). */
struct wframe {
	uint64_t pc, sp, bp; /* the frame's registers (bp: what the walk had) */
	uint64_t ra_at, ra;  /* the step read the caller's pc here (ra_at 0: nothing) */
	uint64_t x_at, x;    /* and rbp's save slot (x_at 0: none) */
	uint64_t y_at, y;    /* and the CFA's slot (a realigned frame; y_at 0: none) */
	uint8_t anchor;      /* a later walk may take the rest from here */
	uint8_t uses_bp;     /* the step from it uses rbp (or libunwind took it) */
	uint8_t keeps_bp;    /* the step leaves rbp as it was for the caller */
	uint8_t pad[5];
};

#define LOG_FRAMES (HT_MAX_DEPTH + CONT_FRAMES + 8)
#define LOG_READS (3 * LOG_FRAMES)

enum { LF_ANCHOR = 1, LF_USES_BP = 2, LF_KEEPS_BP = 4, LF_BP_IN = 8 };

/* What the step from a frame read, as one 16-byte window of the stack
 * (see walk_log.w). */
struct log_win {
	__m128i v;   /* what the window held */
	__m128i m;   /* the bytes the step read */
	uint64_t at; /* where it is */
	uint64_t pad;
};

/* The last walk, outermost frame first, in dense arrays: a later walk
 * touches few cache lines to check it (the program's own work evicts
 * them between two allocations). */
struct walk_log {
	uint32_t n;                  /* frames */
	uint32_t cut;                /* the walk stopped at the depth asked (or at a bound that
				      * depends on where it started), not at the stack's end */
	uint32_t nhash;              /* frames 0..nhash - 1 have their path's hash (and maybe node) */
	uint32_t pad;
	uint64_t pc[LOG_FRAMES];     /* each frame's return address */
	uint64_t sp[LOG_FRAMES];     /* its stack pointer */
	uint64_t bp[LOG_FRAMES];     /* its rbp */
	uint64_t rlo[LOG_FRAMES];    /* the lowest slot the steps from frames i..0 read */
	uint32_t rend[LOG_FRAMES];   /* its reads end at rd[rend[i]] (begin at rend[i - 1]) */
	uint8_t flags[LOG_FRAMES];   /* LF_* */
	/* the call path from frame 0 (outermost) to frame i: its hash (the
	 * key of the stack table, path_step) and its node (0: not known
	 * yet), so that a stack that shares its outer frames with the last
	 * one is named from where they agree, not hashed again whole */
	uint64_t hs[LOG_FRAMES];
	uint32_t nd[LOG_FRAMES];
	/* What the step from frame i read, as one 16-byte window of the
	 * stack at w[i].at: the return address in its upper half (v) and,
	 * when rbp was saved just below it (every frame-pointer frame), rbp
	 * in its lower half; m masks off what the step did not read (a frame
	 * that read nothing: all of it, and at points at its own v).  Checking
	 * a frame is then one load of 16 bytes, where checking its two slots
	 * one by one is three loads each. */
	struct log_win w[LOG_FRAMES];
	struct {
		uint64_t at, val;
	} rd[LOG_READS];             /* the other slots the steps read, and what they held */
};

struct rule_slot {
	uint64_t pc;     /* a return address, 0 = empty */
	struct ht_cfi r; /* the rule of its frame */
};

struct walk_cache {
	struct rule_slot rules0[1u << RULE0_LG]; /* direct-mapped by pc: the first level */
	struct walk_log log;                     /* the last walk */
	struct wframe tmp[LOG_FRAMES];           /* the walk under way, innermost first */
	/* the second level: sets of four by pc, one cache line each (a
	 * direct-mapped table of cc1's return addresses parsed .eh_frame
	 * again for 1% of the steps, conflicts) */
	struct rule_slot rules[1u << RULE_LG] __attribute__((aligned(64)));
	struct cont_entry cont[CONT_SLOTS]; /* direct-mapped by (pc, sp, bp) */
	struct ht_stacks *owner;            /* the thread's tables (its modules: view_of) */
	struct ht_tls *t;                   /* and its stream, for MODULE records */
	unsigned long long adds;            /* the loader's load count when a miss last rescanned */
	int unsure;                         /* this walk met a pc of no module while another
					     * thread read the modules: taken again by libunwind */
};

static int read_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds))
		*(unsigned long long *)arg = info->dlpi_adds;
	return 1; /* the counters are the same in every entry */
}

static struct ht_cfi rule_slow(struct walk_cache *wc, uint64_t pc, struct rule_slot *set);

/* The set of the second level for a return address hashed to h. */
static inline struct rule_slot *rule_set(const struct walk_cache *wc, uint64_t h)
{
	size_t set = (size_t)(h >> (64 - RULE_LG + RULE_WAYS_LG));
	return (struct rule_slot *)&wc->rules[set << RULE_WAYS_LG];
}

/* Two levels: a small table the most frequent return addresses keep warm
 * between two allocations of a program with a large working set of its
 * own (cc1's evicts most of the large one between two stacks), then the
 * large one. */
static inline __attribute__((always_inline)) struct ht_cfi rule_of(struct walk_cache *wc,
								    uint64_t pc)
{
	uint64_t h = pc * 0x9E3779B97F4A7C15ull;
	size_t k0 = (size_t)(h >> (64 - RULE0_LG));
	if (HT_LIKELY(wc->rules0[k0].pc == pc))
		return wc->rules0[k0].r;
	struct rule_slot *set = rule_set(wc, h);
	struct ht_cfi r;
	if (HT_LIKELY(set[0].pc == pc))
		r = set[0].r;
	else if (set[1].pc == pc)
		r = set[1].r;
	else if (set[2].pc == pc)
		r = set[2].r;
	else if (set[3].pc == pc)
		r = set[3].r;
	else if (r = rule_slow(wc, pc, set), HT_UNLIKELY(wc->unsure))
		return r; /* (not known yet: kept nowhere, rule_slow) */
	wc->rules0[k0].pc = pc;
	wc->rules0[k0].r = r;
	return r;
}

/* Asks for the cache lines of pc's rule (its slot in the first level and
 * its set in the second), for a step from pc that may come: the walk
 * checks the frame against the log while they come. */
static inline void rule_prefetch(const struct walk_cache *wc, uint64_t pc)
{
	uint64_t h = pc * 0x9E3779B97F4A7C15ull;
	__builtin_prefetch(&wc->rules0[h >> (64 - RULE0_LG)]);
	__builtin_prefetch(rule_set(wc, h));
}

/* The rule for code of a module that no FDE covers (V8's builtins in
 * node, hand-written assembly), as libunwind steps it when it finds no
 * unwind information: a signal trampoline it recognizes by its code
 * (libunwind steps it), a PLT entry (the return address at rsp), else the
 * frame-chain guess (HT_CFI_GUESS).  The code is read only when the 16
 * bytes at pc lie in the page of pc - 1, the call's, which is mapped;
 * otherwise libunwind steps the frame. */
/* Whether the code at pc is the signal trampoline (mov $15, %rax;
 * syscall: rt_sigreturn), read only when the 16 bytes lie in the page of
 * pc - 1, which is mapped. */
static int sigreturn_words(uint64_t w0, uint64_t w1)
{
	return w0 == 0x0f0000000fc0c748ull && (w1 & 0xff) == 0x05;
}

static int is_sigreturn(uint64_t pc)
{
	if ((pc & 0xfff) == 0 || (pc & 0xfff) > 0x1000 - 16)
		return 0;
	uint64_t w0, w1;
	memcpy(&w0, (const void *)(uintptr_t)pc, 8);
	memcpy(&w1, (const void *)(uintptr_t)(pc + 8), 8);
	return sigreturn_words(w0, w1);
}

/* Whether the frame at cur (its ip at) is a signal trampoline.  libunwind
 * says so only for one it recognized by its code, not for glibc's
 * __restore_rt, which it steps by its FDE (S augmentation); the code at
 * at is read only when an FDE covers it (unw_get_proc_info: a mapped
 * module's text).  libunwind (1.6) says so of the frame the signal
 * interrupted too, the cursor it reached through a signal frame: the
 * callers do not ask for that one. */
static int signal_frame(unw_cursor_t *cur, uint64_t at)
{
	unw_proc_info_t pi;
	return unw_is_signal_frame(cur) > 0 || (unw_get_proc_info(cur, &pi) == 0 && is_sigreturn(at));
}

static struct ht_cfi rule_nofde(uint64_t pc)
{
	struct ht_cfi none = {0, 0, HT_CFI_NONE, 0}, plt = {8, 0, HT_CFI_RSP, 0};
	struct ht_cfi guess = {0, 0, HT_CFI_GUESS, 0};
	if ((pc & 0xfff) == 0 || (pc & 0xfff) > 0x1000 - 16)
		return none;
	uint64_t w0, w1;
	memcpy(&w0, (const void *)(uintptr_t)pc, 8);
	memcpy(&w1, (const void *)(uintptr_t)(pc + 8), 8);
	if (sigreturn_words(w0, w1))
		return none; /* rt_sigreturn: libunwind steps it */
	if ((w0 & 0xffff) == 0x25ff && ((w0 >> 48) & 0xff) == 0x68 && ((w1 >> 24) & 0xff) == 0xe9)
		return plt; /* jmp *x(%rip); push $n; jmp .plt */
	return guess;
}

static __attribute__((noinline)) struct ht_cfi rule_slow(struct walk_cache *wc, uint64_t pc,
							 struct rule_slot *set)
{
	const struct mod *m = module_of(view_of(wc->owner), pc);
	int unsure = 0;
	if (!m) {
		/* a library loaded since the modules were read: read them
		 * again, once per load the loader counts */
		unsigned long long adds = 0;
		dl_iterate_phdr(read_adds, &adds);
		if (adds != wc->adds) {
			int fresh = 1;
			if (wc->owner->own)
				modules_own(wc->t, wc->owner);
			else
				fresh = modules_refresh(wc->t);
			m = module_of(view_of(wc->owner), pc);
			/* Another thread was reading them (the process's first
			 * stacks, taken in several threads at once): not known
			 * yet is not "no module".  Its guess, kept for this pc,
			 * cut every later stack of the thread through it to one
			 * frame (probe V: sampled stacks of 4 threads, 1 run in
			 * 15).  Neither the rule nor the load count is kept, and
			 * the walk is taken again by libunwind (capture). */
			if (fresh)
				wc->adds = adds;
			else if (!m)
				unsure = wc->unsure = 1;
		}
	}
	struct ht_cfi r = {0, 0, HT_CFI_GUESS, 0};
	if (m)
		r = ht_cfi__find(m->eh_hdr, m->nfde, (uintptr_t)m->eh_lo, (uintptr_t)m->eh_hi, pc);
	if (r.kind == HT_CFI_NOFDE)
		r = rule_nofde(pc);
	if (unsure)
		return r;
	/* the set's newest: the oldest leaves */
	memmove(set + 1, set, ((1u << RULE_WAYS_LG) - 1) * sizeof(*set));
	set[0].pc = pc;
	set[0].r = r;
	return r;
}

/* libunwind from the frame of return address pc, with its rsp and rbp,
 * until a frame has a compact rule again (c->resume, with that frame's
 * registers) or the stack ends; also stops, resuming, a frame or two
 * short of CONT_FRAMES (the walk goes on with another stretch).  Never
 * resumes at the frame a signal frame interrupted: libunwind looks that
 * one up at its own address, not the one before. */
static __attribute__((noinline)) void dwarf_stretch(struct walk_cache *wc, struct cont_entry *c)
{
	/* (libunwind's context and cursor are the thread's, some 2 KiB off
	 * the program's stack: the walk runs in one capture at a time, and
	 * libunwind_walk, which uses them too, never during it) */
	unw_context_t *uc = &wc->owner->uc;
	unw_cursor_t *cur = &wc->owner->cur;
	c->n = 0;
	c->resume = 0;
	if (unw_getcontext(uc) != 0)
		return;
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)c->pc;
	uc->uc_mcontext.gregs[REG_RSP] = (greg_t)c->sp;
	uc->uc_mcontext.gregs[REG_RBP] = (greg_t)c->bp;
	if (unw_init_local(cur, uc) < 0)
		return;
	int first = 1, after_signal = 0;
	uint64_t at = c->pc;
	while (c->n < CONT_FRAMES) {
		/* (libunwind does not see a signal frame at the start of a
		 * cursor made from registers: the walk resumed at the frame the
		 * signal interrupted, stepped it as if its pc were a return
		 * address, and cut the stack short or went astray there.  The
		 * code at c->pc was read already: rule_nofde, or an FDE of a
		 * module.)  The frame a signal interrupted is not a signal
		 * frame itself, though libunwind says so of its cursor: the
		 * frame after it is an ordinary caller (its return address was
		 * recorded one past, and named by the line after the call). */
		after_signal =
		    !after_signal && ((first && is_sigreturn(at)) || signal_frame(cur, at));
		first = 0;
		if (unw_step(cur) <= 0)
			break;
		unw_word_t ip, sp, bp;
		if (unw_get_reg(cur, UNW_REG_IP, &ip) < 0 || !ip ||
		    unw_get_reg(cur, UNW_REG_SP, &sp) < 0)
			break;
		at = ip;
		/* The frame a signal interrupted holds the address of the
		 * instruction it stopped at, not a return address: recorded
		 * one past it, as readers look up a return address less one
		 * (the call), so that it is named by the instruction itself
		 * (a fault in a function's first instruction was named after
		 * the function before it). */
		c->ips[c->n] = after_signal ? ip + 1 : ip;
		c->slots[c->n] = sp - 8; /* the return address sat just below the caller's stack pointer */
		c->n++;
		if (after_signal || unw_get_reg(cur, UNW_X86_64_RBP, &bp) < 0)
			continue;
		if (c->n + 2 >= CONT_FRAMES || rule_of(wc, ip).kind != HT_CFI_NONE) {
			c->resume = 1;
			c->resume_sp = sp;
			c->resume_bp = bp;
			break;
		}
	}
}

static int cont_valid(const struct cont_entry *c, uintptr_t lo, uintptr_t hi)
{
	for (uint32_t i = 0; i < c->n; i++) {
		if (c->slots[i] < lo || c->slots[i] + 8 > hi ||
		    *(const uint64_t *)(uintptr_t)c->slots[i] != c->ips[i])
			return 0;
	}
	return 1;
}

static inline int on_stack(uint64_t a, uintptr_t lo, uintptr_t hi)
{
	return a >= lo && a <= hi - 8;
}

/* The bits of a window that differ from what the step read there. */
static inline __m128i win_diff(const struct log_win *p)
{
	__m128i now = _mm_loadu_si128((const __m128i *)(uintptr_t)p->at);
	return _mm_xor_si128(_mm_and_si128(now, p->m), p->v);
}

/* Whether every slot the steps from frames j..0 read still holds what was
 * read there (and lies above lo, the walk's own frame).  Innermost frames
 * first (what changed since the last walk is most often near the top of
 * the stack), four at a time with one branch: the loads are independent,
 * and a stack 60 frames deep has over 100 slots to check. */
static int log_valid(const struct walk_log *L, uint32_t j, uintptr_t lo)
{
	if (L->rlo[j] < lo)
		return 0;
	uint64_t d = 0;
	for (uint32_t e = L->rend[j]; e > 0; e--)
		d |= *(const uint64_t *)(uintptr_t)L->rd[e - 1].at ^ L->rd[e - 1].val;
	if (d)
		return 0;
	const __m128i zero = _mm_setzero_si128();
	const struct log_win *p = &L->w[j + 1];
	for (; p - L->w >= 4; p -= 4) {
		__m128i x = _mm_or_si128(_mm_or_si128(win_diff(p - 1), win_diff(p - 2)),
					 _mm_or_si128(win_diff(p - 3), win_diff(p - 4)));
		if (_mm_movemask_epi8(_mm_cmpeq_epi8(x, zero)) != 0xffff)
			return 0;
	}
	__m128i x = zero;
	for (; p > L->w; p--)
		x = _mm_or_si128(x, win_diff(p - 1));
	return _mm_movemask_epi8(_mm_cmpeq_epi8(x, zero)) == 0xffff;
}

static inline void log_read(struct walk_log *L, uint32_t *r, uint64_t *rlo, uint64_t at,
			    uint64_t val)
{
	L->rd[*r].at = at;
	L->rd[(*r)++].val = val;
	*rlo = at < *rlo ? at : *rlo;
}

/* Appends the walk's frames T[from] (inner) .. T[to] (outer), outer first,
 * to the log's frames 0..L->n - 1; 0 if they do not fit.  Their paths'
 * hashes too, when the log has those of all its frames. */
static int log_append(struct walk_log *L, const struct wframe *T, int from, int to)
{
	uint32_t n = L->n, r = n ? L->rend[n - 1] : 0;
	uint64_t rlo = n ? L->rlo[n - 1] : UINT64_MAX;
	if (n + (uint32_t)(to - from + 1) > LOG_FRAMES || r + 3u * (uint32_t)(to - from + 1) > LOG_READS)
		return 0;
	int hash = L->nhash == n;
	uint64_t h = n ? L->hs[n - 1] : PATH_SEED;
	for (int i = to; i >= from; i--, n++) {
		const struct wframe *w = &T[i];
		if (hash) {
			h = path_step(h, w->pc);
			L->hs[n] = h;
			L->nd[n] = 0;
		}
		L->pc[n] = w->pc;
		L->sp[n] = w->sp;
		L->bp[n] = w->bp;
		uint8_t f = (uint8_t)((w->anchor ? LF_ANCHOR : 0) | (w->uses_bp ? LF_USES_BP : 0) |
				      (w->keeps_bp ? LF_KEEPS_BP : 0));
		/* whether the rest of the stack depends on the rbp the frame starts with */
		if (w->uses_bp || (w->keeps_bp && (n == 0 || (L->flags[n - 1] & LF_BP_IN))))
			f |= LF_BP_IN;
		L->flags[n] = f;
		int x_in = 0;
		if (w->ra_at) {
			x_in = w->x_at && w->x_at == w->ra_at - 8;
			L->w[n].at = w->ra_at - 8;
			L->w[n].v = _mm_set_epi64x((long long)w->ra, x_in ? (long long)w->x : 0);
			L->w[n].m = _mm_set_epi64x(-1, x_in ? -1 : 0);
			rlo = w->ra_at - 8 < rlo ? w->ra_at - 8 : rlo;
		} else {
			L->w[n].v = _mm_setzero_si128();
			L->w[n].m = _mm_setzero_si128();
			L->w[n].at = (uint64_t)(uintptr_t)&L->w[n].v;
		}
		if (w->x_at && !x_in)
			log_read(L, &r, &rlo, w->x_at, w->x);
		if (w->y_at)
			log_read(L, &r, &rlo, w->y_at, w->y);
		L->rend[n] = r;
		L->rlo[n] = rlo;
	}
	L->n = n;
	if (hash)
		L->nhash = n;
	return 1;
}

/* The walk's stack, innermost first, when it is the log's (see cfi_walk). */
static void log_ips(const struct walk_log *L, uint64_t *ips, int n)
{
	for (int i = 0; i < n; i++)
		ips[i] = L->pc[L->n - 1 - (uint32_t)i];
}

/* The walk's end: the stack table's lines for the stack the log holds,
 * when log_node will look for it there. */
static inline void walk_done(const struct ht_stacks *s, const struct walk_log *L, int n)
{
	if ((uint32_t)n == L->n && L->nhash == L->n && !L->nd[n - 1])
		leaf_prefetch(s, L->hs[n - 1]);
}

/* The stack of the caller of the traced function, at most depth frames:
 * returns how many.  *in_log says where they are: 1, in the log, which
 * then holds the stack (its frames L->n - 1 .. L->n - n, innermost first:
 * log_ips), written nowhere else; 0, in ips. */
static __attribute__((noinline)) int cfi_walk(struct ht_stacks *s, uint64_t *ips, int depth,
					      int *in_log)
{
	struct walk_cache *wc = s->walk;
	struct walk_log *L = &wc->log;
	struct wframe *T = wc->tmp;
	uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
	uintptr_t lo = fp, hi = s->stack_hi;
	/* the tracer's own frames, through their frame pointers */
	for (;;) {
		if (fp < lo || fp + 16 > hi)
			return 0;
		uintptr_t next = ((const uintptr_t *)fp)[0], ret = ((const uintptr_t *)fp)[1];
		if (!ret)
			return 0;
		if (ret < self_lo || ret >= self_hi) {
			memset(&T[0], 0, sizeof(T[0]));
			T[0].pc = ret;
			T[0].sp = fp + 16;
			T[0].bp = next;
			T[0].anchor = 1;
			rule_prefetch(wc, ret);
			break;
		}
		if (next <= fp)
			return 0;
		fp = next;
	}
	int k = 1, cut = 0;
	uint32_t q = L->n; /* the log's frames below q are inner to the current one */
	for (;;) {
		struct wframe *w = &T[k - 1];
		if (w->anchor) {
			while (q > 0 && L->sp[q - 1] < w->sp)
				q--;
			uint32_t j = q - 1;
			if (q && L->sp[j] == w->sp && L->pc[j] == w->pc && (L->flags[j] & LF_ANCHOR) &&
			    (!(L->flags[j] & LF_BP_IN) || L->bp[j] == w->bp) &&
			    (!L->cut || (int)q + k - 1 >= depth) && log_valid(L, j, lo)) {
				/* the rest of the stack is the last walk's from here */
				int n = (int)q + k - 1 < depth ? (int)q + k - 1 : depth;
				L->n = q;
				if (L->nhash > q)
					L->nhash = q;
				*in_log = 1;
				if (k > 1 && !log_append(L, T, 0, k - 2)) {
					/* no room (a deep stack grown deeper): the stack
					 * in ips, the log forgotten */
					int m = 0;
					for (int i = 0; i < k - 1 && m < depth; i++)
						ips[m++] = T[i].pc;
					for (uint32_t i = q; i-- > 0 && m < depth;)
						ips[m++] = L->pc[i];
					L->n = L->nhash = 0;
					*in_log = 0;
				}
				walk_done(s, L, n);
				return n;
			}
		}
		if (k >= depth) {
			cut = 1;
			break;
		}
		struct ht_cfi r = rule_of(wc, w->pc);
		uint64_t cfa = 0, ra_at, nsp, bp_at = 0; /* (the caller's pc, rsp, rbp: where) */
		w->uses_bp = r.kind == HT_CFI_RBP || r.kind == HT_CFI_RBP_DEREF;
		w->keeps_bp = r.rbp_off == 0;
		if (r.kind == HT_CFI_GUESS) {
			/* Code no unwind information covers: a JIT's (V8,
			 * HotSpot, LuaJIT: in no module), or a module's outside
			 * every FDE (V8's builtins in node).  libunwind finds none
			 * either (lookups that mask signals, and addresses
			 * validated with system calls, at every such step), then
			 * guesses a frame-pointer frame: the caller's pc at
			 * rbp + 8, its rbp at rbp, its rsp this frame's + 16;
			 * unless rbp is 0, below this frame's rsp or more than
			 * 16 KiB above it, which ends the stack.  The same guess
			 * here, reading the thread's stack only. */
			uint64_t b = w->bp;
			w->uses_bp = 1;
			w->keeps_bp = 0;
			if (!b || b < w->sp || b - w->sp > 0x4000)
				break;
			if (!on_stack(b, lo, hi) || !on_stack(b + 8, lo, hi)) {
				cut = 1;
				break;
			}
			ra_at = b + 8;
			nsp = w->sp + 16;
			bp_at = b;
		} else if (r.kind == HT_CFI_RSP) {
			cfa = w->sp + (uint64_t)(int64_t)r.cfa_off;
		} else if (r.kind == HT_CFI_RBP) {
			cfa = w->bp + (uint64_t)(int64_t)r.cfa_off;
		} else if (r.kind == HT_CFI_RBP_DEREF) {
			uint64_t a = w->bp + (uint64_t)(int64_t)r.cfa_off;
			if (!on_stack(a, lo, hi)) {
				cut = 1; /* where it stops depends on lo */
				break;
			}
			cfa = *(const uint64_t *)(uintptr_t)a;
			w->y_at = a;
			w->y = cfa;
		} else if (r.kind == HT_CFI_END) {
			break;
		} else {
			/* libunwind, or the stretch it gave from here before */
			struct cont_entry *c = &wc->cont[mix(w->pc ^ (w->sp << 7) ^ (w->bp << 17)) &
							  (CONT_SLOTS - 1)];
			if (!(c->pc == w->pc && c->sp == w->sp && c->bp == w->bp &&
			      cont_valid(c, lo, hi))) {
				c->pc = w->pc;
				c->sp = w->sp;
				c->bp = w->bp;
				ht_tls.guard += HT_GUARD_OWN; /* (libunwind maps memory) */
				dwarf_stretch(wc, c);
				ht_tls.guard -= HT_GUARD_OWN;
			}
			w->uses_bp = 1;
			uint64_t sp0 = w->sp;
			uint32_t i = 0;
			for (; i < c->n && k < depth; i++) {
				T[k - 1].ra_at = c->slots[i];
				T[k - 1].ra = c->ips[i];
				struct wframe *x = &T[k++];
				memset(x, 0, sizeof(*x));
				x->pc = c->ips[i];
				x->sp = c->slots[i] + 8;
				x->uses_bp = 1;
			}
			if (i < c->n) {
				cut = 1;
				break;
			}
			if (!c->resume || c->resume_sp <= sp0)
				break;
			T[k - 1].sp = c->resume_sp;
			T[k - 1].bp = c->resume_bp;
			T[k - 1].anchor = 1;
			T[k - 1].uses_bp = 0;
			continue;
		}
		if (r.kind != HT_CFI_GUESS) {
			if (cfa <= w->sp || cfa > hi)
				break;
			ra_at = cfa - 8;
			nsp = cfa;
			if (r.rbp_off) {
				bp_at = cfa + (uint64_t)(int64_t)r.rbp_off;
				if (!on_stack(bp_at, lo, hi)) {
					cut = 1;
					break;
				}
			}
		}
		uint64_t pc = *(const uint64_t *)(uintptr_t)ra_at, bp = w->bp;
		w->ra_at = ra_at;
		w->ra = pc;
		if (bp_at) {
			bp = *(const uint64_t *)(uintptr_t)bp_at;
			w->x_at = bp_at;
			w->x = bp;
		}
		if (!pc)
			break;
		struct wframe *x = &T[k++];
		memset(x, 0, sizeof(*x));
		x->pc = pc;
		x->sp = nsp;
		x->bp = bp;
		x->anchor = 1;
		rule_prefetch(wc, pc);
	}
	/* a new stack from T[0] to its end: the log, for the next walk (k
	 * frames always fit: k <= depth) */
	L->n = L->nhash = 0;
	L->cut = (uint32_t)cut;
	*in_log = log_append(L, T, 0, k - 1);
	if (!*in_log)
		for (int i = 0; i < k; i++)
			ips[i] = T[i].pc;
	walk_done(s, L, k);
	return k;
}

/* libunwind alone, frame by frame (--unwind=dwarf, the reference, and
 * stacks that are not on the thread's own stack).  unw_step rather than
 * unw_backtrace: the latter's fast path keeps a per-thread table that
 * libunwind maps on first use and unmaps when the thread exits, which the
 * trace would show as the program's munmap. */
static __attribute__((noinline)) int libunwind_walk(struct ht_stacks *s, uint64_t *ips, int depth)
{
	if (unw_getcontext(&s->uc) != 0 || unw_init_local(&s->cur, &s->uc) < 0)
		return 0;
	int n = 0, after_signal = 0;
	do {
		unw_word_t ip;
		if (unw_get_reg(&s->cur, UNW_REG_IP, &ip) < 0 || !ip)
			break;
		/* (one past it, and not a signal frame itself: dwarf_stretch) */
		int interrupted = after_signal;
		after_signal = !interrupted && signal_frame(&s->cur, ip);
		if (n == 0 && ip >= self_lo && ip < self_hi)
			continue; /* the tracer's own frames */
		ips[n++] = interrupted ? ip + 1 : ip;
	} while (n < depth && unw_step(&s->cur) > 0);
	return n;
}

/* --unwind=check: every stack taken both ways; libunwind's is recorded,
 * and those the walk got otherwise are counted and the first few shown. */
static _Atomic unsigned long check_stacks, check_differ;

static __attribute__((noinline)) int unwind_check(struct ht_stacks *s, uint64_t *ips, int n,
						       int depth)
{
	uint64_t ref[HT_MAX_DEPTH]; /* (a check mode: the stack is not spared here) */
	ht_tls.guard += HT_GUARD_OWN; /* (libunwind maps memory) */
	int m = libunwind_walk(s, ref, depth);
	ht_tls.guard -= HT_GUARD_OWN;
	atomic_fetch_add_explicit(&check_stacks, 1, memory_order_relaxed);
	if (m == n && !memcmp(ref, ips, (size_t)n * sizeof(*ips)))
		return n;
	if (atomic_fetch_add(&check_differ, 1) < 5) {
		int i = 0;
		while (i < n && i < m && ips[i] == ref[i])
			i++;
		ht_msg("unwind check: a stack of %d frames (libunwind: %d) differs from frame %d: "
		       "%#llx, libunwind %#llx", n, m, i,
		       i < n ? (unsigned long long)ips[i] : 0ull, i < m ? (unsigned long long)ref[i] : 0ull);
	}
	memcpy(ips, ref, (size_t)m * sizeof(*ips));
	return m;
}

__attribute__((destructor)) static void unwind_check_report(void)
{
	if (ht_opt.unwind_fp == 2)
		ht_msg("unwind check: %lu stacks, %lu differ from libunwind's",
		       atomic_load(&check_stacks), atomic_load(&check_differ));
}

/* The calling thread's stack, for the walk; 0 if unknown: the mapping of
 * /proc/self/maps that holds the stack pointer, and for the main thread's
 * "[stack]" as far down as RLIMIT_STACK lets it grow (what glibc's
 * pthread_getattr_np says).  Read with system calls and no allocation:
 * pthread_getattr_np mallocs, and the first stack of a thread may be taken
 * in an mmap made by another allocator holding its own lock (alloc.c). */
static __attribute__((noinline)) uintptr_t stack_bounds(uintptr_t *lo)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0), start, end, prev_end;
	char name[sizeof("[stack]")];
	size_t len;
	if (!maps_line(sp, &start, &end, &prev_end, name, sizeof(name), &len))
		return 0;
	*lo = start;
	struct rlimit rl;
	if (len == sizeof(name) - 1 && !strcmp(name, "[stack]") &&
	    getrlimit(RLIMIT_STACK, &rl) == 0) {
		uintptr_t grow = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > end ? end
										     : (uintptr_t)rl.rlim_cur;
		*lo = end - grow > prev_end ? end - grow : prev_end;
	}
	return end;
}

/* The thread's stack bounds, once, unless the stack pointer is on an
 * alternate signal stack (the first stack of a thread taken in a handler
 * that runs there): those would then be taken for the thread's own, and
 * every later stack would go through libunwind.  They are looked for again
 * at the next capture off it (a system call until then). */
static __attribute__((noinline)) void stack_bounds_try(struct ht_stacks *s)
{
	stack_t ss;
	if (syscall(SYS_sigaltstack, NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK))
		return;
	s->stack_hi = stack_bounds(&s->stack_lo);
	s->bounds_known = 1;
}

/* The innermost node of the stack whose path hash is h, 0 if none yet. */
static uint32_t leaf_get(struct ht_stacks *s, uint64_t h)
{
	struct stk_leaf *l0 = &s->leaf0[h >> (64 - LEAF0_LG)];
	if (l0->hash == h && l0->id)
		return l0->id;
	size_t mask = ((size_t)1 << s->leaves_lg) - 1;
	for (size_t k = mix(h) & mask; s->leaves[k].id; k = (k + 1) & mask)
		if (s->leaves[k].hash == h) {
			l0->hash = h;
			l0->id = s->leaves[k].id;
			return l0->id;
		}
	return 0;
}

/* Remembers id as the innermost node of the stack whose path hash is h
 * (not found by leaf_get).  Out of memory, the stack is only not
 * remembered: the next one along the same path finds its nodes again. */
static void leaf_put(struct ht_stacks *s, uint64_t h, uint32_t id)
{
	if ((s->nleaves + 1) * 2 >= ((size_t)1 << s->leaves_lg) && grow_leaves(s) < 0)
		return;
	size_t mask = ((size_t)1 << s->leaves_lg) - 1, k = mix(h) & mask;
	while (s->leaves[k].id)
		k = (k + 1) & mask;
	s->leaves[k].hash = h;
	s->leaves[k].id = id;
	s->nleaves++;
	struct stk_leaf *l0 = &s->leaf0[h >> (64 - LEAF0_LG)];
	l0->hash = h;
	l0->id = id;
}

/* The node of the stack ips[0] (innermost) .. ips[n - 1]. */
static uint32_t ips_node(struct ht_tls *t, struct ht_stacks *s, const uint64_t *ips, int n)
{
	uint64_t h = PATH_SEED;
	for (int j = n - 1; j >= 0; j--)
		h = path_step(h, ips[j]);
	uint32_t node = leaf_get(s, h);
	if (node)
		return node;
	/* a new call path: its nodes, outermost first */
	for (int j = n - 1; j >= 0; j--) {
		node = node_get(t, s, node, ips[j]);
		if (!node)
			return 0;
	}
	leaf_put(s, h, node);
	return node;
}

/* The node of the stack the log holds (all its frames): the path's hash
 * goes on from the last frame the log knows it for (the frames the walk
 * reused keep theirs), and a stack ending at a frame whose node the log
 * knows is named without a lookup. */
static uint32_t log_node(struct ht_tls *t, struct ht_stacks *s, struct walk_log *L)
{
	uint32_t n = L->n, i = L->nhash;
	if (i == n && L->nd[n - 1])
		return L->nd[n - 1];
	uint64_t h = i ? L->hs[i - 1] : PATH_SEED;
	for (; i < n; i++) {
		h = path_step(h, L->pc[i]);
		L->hs[i] = h;
		L->nd[i] = 0;
	}
	L->nhash = n;
	uint32_t node = leaf_get(s, h);
	if (!node) {
		/* a new call path: its nodes, from the innermost the log knows */
		uint32_t b = n - 1;
		while (b > 0 && !L->nd[b - 1])
			b--;
		node = b ? L->nd[b - 1] : 0;
		for (; b < n; b++) {
			node = node_get(t, s, node, L->pc[b]);
			if (!node)
				return 0;
			L->nd[b] = node;
		}
		leaf_put(s, h, node);
	}
	L->nd[n - 1] = node;
	return node;
}

static void tables_free(struct ht_stacks *s)
{
	if (s->nodes)
		ht_own_unmap(s->nodes, ((size_t)1 << s->nodes_lg) * sizeof(*s->nodes));
	if (s->leaves)
		ht_own_unmap(s->leaves, ((size_t)1 << s->leaves_lg) * sizeof(*s->leaves));
	s->nodes = NULL;
	s->leaves = NULL;
	s->nodes_lg = s->leaves_lg = 0;
	s->nnodes = s->nleaves = 0;
}

/* The thread's first stack, or the first since a dlclose unmapped a
 * library (generation g): the return addresses the tables hold may now
 * belong to another library mapped at the same place, so the tables start
 * over (new nodes take new ids: the reader binds each to the module that
 * holds its address when it reads it), and the modules are looked at
 * again.  From the first unmapping on, each thread writes the modules
 * into its own stream, so that its FRAME records always follow, in the
 * same stream, the MODULE record of the library they belong to. */
static __attribute__((noinline)) int stacks_sync(struct ht_tls *t, struct ht_stacks *s, uint32_t g)
{
	if (s->gen != GEN_NEW) {
		if (s->nodes_lg == 12 && s->leaves_lg == 12) {
			/* small (the common case): cleared in place, no system call */
			memset(s->nodes, 0, ((size_t)1 << 12) * sizeof(*s->nodes));
			memset(s->leaves, 0, ((size_t)1 << 12) * sizeof(*s->leaves));
			s->nnodes = s->nleaves = 0;
		} else {
			tables_free(s);
		}
		memset(s->leaf0, 0, sizeof(s->leaf0));
		if (s->walk) {
			memset(s->walk, 0, sizeof(*s->walk));
			s->walk->owner = s;
			s->walk->t = t;
		}
		if ((!s->nodes && grow_nodes(s) < 0) || (!s->leaves && grow_leaves(s) < 0))
			return -1;
	}
	s->gen = g;
	if (g)
		modules_own(t, s);
	else if (!atomic_load_explicit(&mods, memory_order_acquire))
		modules_refresh(t); /* the first stack of the process */
	return 0;
}

uint32_t ht_stack__capture(struct ht_tls *t)
{
	struct ht_stacks *s = t->stacks;
	if (!s) {
		self_bounds();
		s = map(sizeof(*s));
		if (!s || grow_nodes(s) < 0 || grow_leaves(s) < 0)
			return 0;
		s->gen = GEN_NEW;
		/* libunwind's caches per thread: no lock, so no signal masking
		 * around each lookup (its global cache blocks signals to take
		 * its lock) */
		ht_tls.guard += HT_GUARD_OWN; /* (libunwind maps memory) */
		unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
		ht_tls.guard -= HT_GUARD_OWN;
		if (ht_opt.unwind_fp && (s->walk = map(sizeof(*s->walk))) != NULL) {
			s->walk->owner = s;
			s->walk->t = t;
		}
		t->stacks = s;
	}
	/* (libunwind's walk needs them too: off the thread's own stack,
	 * an alternate signal stack may be too small for it) */
	if (HT_UNLIKELY(!s->bounds_known))
		stack_bounds_try(s);
	/* the only cost of dlclose's support when there is none */
	uint32_t g = atomic_load_explicit(&mod_gen, memory_order_relaxed);
	if (HT_UNLIKELY(g != s->gen) && stacks_sync(t, s, g) < 0)
		return 0;
	uint64_t *ips = s->ips;
	int depth = ht_opt.stack_depth > HT_MAX_DEPTH ? HT_MAX_DEPTH : ht_opt.stack_depth;
	int n = 0, in_log = 0;
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	int on_own = s->stack_hi && here >= s->stack_lo && here < s->stack_hi;
	if (on_own && s->walk) {
		s->walk->unsure = 0;
		n = cfi_walk(s, ips, depth, &in_log);
		if (HT_UNLIKELY(s->walk->unsure)) {
			/* (a module another thread was reading: rule_slow) */
			struct walk_log *L = &s->walk->log;
			L->n = L->nhash = 0;
			in_log = 0;
			ht_tls.guard += HT_GUARD_OWN; /* (libunwind maps memory) */
			n = libunwind_walk(s, ips, depth);
			ht_tls.guard -= HT_GUARD_OWN;
		} else if (HT_UNLIKELY(ht_opt.unwind_fp == 2)) {
			if (in_log)
				log_ips(&s->walk->log, ips, n);
			in_log = 0;
			n = unwind_check(s, ips, n, depth);
		}
	} else {
		/* no walk of our own, or not on the thread's own stack (a signal
		 * handler's alternate stack, a coroutine's): libunwind alone, so
		 * that nothing reads outside the stack we are on.  On an
		 * alternate signal stack with less room left than libunwind
		 * takes, the call goes without a stack rather than overflow it
		 * (a handler on a 6 KiB stack died of SIGSEGV) */
		stack_t ss;
		if (!on_own && syscall(SYS_sigaltstack, NULL, &ss) == 0 &&
		    (ss.ss_flags & SS_ONSTACK) && here >= (uintptr_t)ss.ss_sp &&
		    here - (uintptr_t)ss.ss_sp < ALT_ROOM)
			return 0;
		ht_tls.guard += HT_GUARD_OWN; /* (libunwind maps memory) */
		n = libunwind_walk(s, ips, depth);
		ht_tls.guard -= HT_GUARD_OWN;
	}
	if (n <= 0)
		return 0;
	if (in_log) {
		struct walk_log *L = &s->walk->log;
		if ((uint32_t)n == L->n)
			return log_node(t, s, L);
		log_ips(L, ips, n); /* cut at depth: not the log's whole path */
	}
	return ips_node(t, s, ips, n);
}

void ht_stack__thread_exit(struct ht_tls *t)
{
	struct ht_stacks *s = t->stacks;
	if (!s)
		return;
	t->stacks = NULL;
	tables_free(s);
	if (s->own)
		ht_own_unmap(s->own, s->own->bytes);
	if (s->walk)
		ht_own_unmap(s->walk, sizeof(*s->walk));
	ht_own_unmap(s, sizeof(*s));
}

/* In a fork child: its trace is new, so every node and module is new to it. */
void ht_stack__after_fork_child(struct ht_tls *t)
{
	ht_stack__thread_exit(t);
	atomic_store(&mods, NULL);
	atomic_store(&mods_busy, 0);
}

static int read_subs(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
		*(unsigned long long *)arg = info->dlpi_subs;
	return 1; /* the counters are the same in every entry */
}

/* After the program's dlclose: when the loader unmapped something since
 * the last look (its dlpi_subs count; a dlclose that only drops a
 * reference unmaps nothing), a new generation. */
void ht_stack__after_dlclose(void)
{
	unsigned long long subs = 0;
	dl_iterate_phdr(read_subs, &subs);
	if (subs && atomic_exchange(&last_subs, subs) == subs)
		return;
	uint32_t g = atomic_load(&mod_gen), next;
	do {
		next = g + 1;
		if (next == GEN_NEW || next == 0)
			next = 1;
	} while (!atomic_compare_exchange_weak(&mod_gen, &g, next));
}
