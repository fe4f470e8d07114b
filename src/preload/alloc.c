/* Which allocator the malloc API goes to.
 *
 * Most programs run on glibc's malloc, and the hooks call glibc's own entry
 * points (__libc_malloc, ...) directly.  A program can also run on another
 * allocator: jemalloc, tcmalloc or mimalloc in LD_PRELOAD, or linked to the
 * program.  Its malloc is then the next definition after this library's,
 * and the program calls the allocator's other functions too
 * (malloc_usable_size, mallocx, sdallocx, its C++ operators).  Handing such
 * a program glibc's blocks broke it: jemalloc's malloc_usable_size() on a
 * block of glibc's crashed the program, and every block a program got from
 * mallocx() crashed glibc's free().
 *
 * So before the first call is forwarded, the library that holds the next
 * malloc is looked up (dlsym(RTLD_NEXT), dladdr).  If it is not glibc's
 * libc, every call goes to that library's functions, through the hooks'
 * general paths (ht_opt.slow_malloc and slow_free stay set); the chunk
 * header, which only glibc's blocks have, is never read, and the usable
 * size is the allocator's malloc_usable_size().  The trace says which
 * allocator it was (HT_FILE_F_OTHER_ALLOCATOR, section ALLOCATOR).
 *
 * dlsym and dladdr may allocate (through these very hooks): calls made by
 * the resolving thread while it resolves go to glibc's malloc, and their
 * blocks are remembered so that their free goes back to glibc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "preload.h"

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);
extern int __libc_mallopt(int, int);

static struct {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	int (*mallopt)(int, int);
	size_t (*usable)(void *);
} other;

int ht_alloc_other;	       /* 1: another allocator than glibc's */
static char other_path[512];   /* its library */
_Atomic int ht_alloc_state;    /* 0 not resolved, 1 resolving, 2 done */
static __thread int resolving; /* this thread is resolving */

/* Blocks glibc handed out while resolving (dlsym's and dladdr's own). */
#define HT_BOOT_MAX 32
static void *boot[HT_BOOT_MAX];
static _Atomic unsigned nboot;

static int is_glibc(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return strncmp(b, "libc.so", 7) == 0 || strncmp(b, "libc-", 5) == 0;
}

/* The next definition of name, if it is in the library at base. */
static void *next_in(const char *name, const void *base)
{
	void *f = dlsym(RTLD_NEXT, name);
	Dl_info di;
	if (!f || !dladdr(f, &di) || di.dli_fbase != base)
		return NULL;
	return f;
}

static void resolve(void)
{
	void *m = dlsym(RTLD_NEXT, "malloc");
	Dl_info di;
	if (!m || !dladdr(m, &di) || !di.dli_fname || is_glibc(di.dli_fname))
		return;
	const void *base = di.dli_fbase;
	void *f = next_in("free", base), *c = next_in("calloc", base),
	     *r = next_in("realloc", base);
	if (!f || !c || !r) {
		/* blocks of one allocator freed by another: never safe */
		ht_msg("malloc is %s's, but not free, calloc and realloc: calls go to glibc's "
		       "allocator",
		       di.dli_fname);
		return;
	}
	other.malloc = (__typeof__(other.malloc))m;
	other.free = (__typeof__(other.free))f;
	other.calloc = (__typeof__(other.calloc))c;
	other.realloc = (__typeof__(other.realloc))r;
	other.memalign = (__typeof__(other.memalign))next_in("memalign", base);
	other.aligned_alloc = (__typeof__(other.aligned_alloc))next_in("aligned_alloc", base);
	other.posix_memalign = (__typeof__(other.posix_memalign))next_in("posix_memalign", base);
	other.valloc = (__typeof__(other.valloc))next_in("valloc", base);
	other.pvalloc = (__typeof__(other.pvalloc))next_in("pvalloc", base);
	/* (mallopt goes where the program's would: glibc's, for an allocator
	 * without one, as untraced) */
	other.mallopt = (__typeof__(other.mallopt))dlsym(RTLD_NEXT, "mallopt");
	other.usable = (__typeof__(other.usable))next_in("malloc_usable_size", base);
	size_t n = strlen(di.dli_fname);
	if (n >= sizeof(other_path))
		n = sizeof(other_path) - 1;
	memcpy(other_path, di.dli_fname, n);
	other_path[n] = 0;
	ht_alloc_other = 1;
	ht_opt.slow_malloc = ht_opt.slow_free = 1;
}

void ht_alloc__resolve(void)
{
	if (atomic_load_explicit(&ht_alloc_state, memory_order_acquire) == 2 || resolving)
		return;
	int expect = 0;
	if (!atomic_compare_exchange_strong(&ht_alloc_state, &expect, 1)) {
		while (atomic_load_explicit(&ht_alloc_state, memory_order_acquire) != 2)
			sched_yield(); /* another thread resolves: a few microseconds */
		return;
	}
	resolving = 1;
	ht_tls.guard += HT_GUARD_OWN;
	resolve();
	ht_tls.guard -= HT_GUARD_OWN;
	resolving = 0;
	atomic_store_explicit(&ht_alloc_state, 2, memory_order_release);
}

/* dl_iterate_phdr: whether the object that holds *(uintptr_t *)arg is the
 * executable (the first object, with no name). */
static int in_exe(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	uintptr_t a = *(uintptr_t *)arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && a >= lo && a < lo + ph->p_memsz)
			return info->dlpi_name && !*info->dlpi_name ? 1 : 2;
	}
	return 0;
}

void ht_alloc__check_first(void)
{
	void *m = dlsym(RTLD_DEFAULT, "malloc");
	Dl_info di;
	const ElfW(Sym) *sym = NULL;
	/* (an executable built without PIE that takes malloc's address has
	 * its PLT entry as malloc's address, an undefined symbol: the calls
	 * reach ours) */
	if (!m || m == (void *)ht_self_malloc || !dladdr1(m, &di, (void **)&sym, RTLD_DL_SYMENT) ||
	    !sym || sym->st_shndx == SHN_UNDEF)
		return;
	uintptr_t a = (uintptr_t)m;
	if (dl_iterate_phdr(in_exe, &a) != 1 && di.dli_fname && *di.dli_fname)
		ht_msg("malloc is %s's, which comes before the recorder in the lookup order: the "
		       "calls it serves are not recorded (libheaptrail.so must come first in "
		       "LD_PRELOAD, as 'heaptrail record' puts it)",
		       di.dli_fname);
	else
		ht_msg("the program's executable defines malloc itself: the calls it serves are "
		       "not recorded");
}

const char *ht_alloc__path(void)
{
	return ht_alloc_other ? other_path : NULL;
}

/* Whether this call goes to the other allocator (not while resolving). */
static inline int ready_other(void)
{
	return ht_alloc__is_other() && !resolving;
}

static void *booted(void *p)
{
	if (resolving && p) {
		unsigned i = atomic_fetch_add(&nboot, 1);
		if (i < HT_BOOT_MAX)
			boot[i] = p;
	}
	return p;
}

/* Where p is among the blocks glibc handed out while resolving, or -1. */
static int boot_index(const void *p)
{
	unsigned n = atomic_load(&nboot);
	for (unsigned i = 0; p && i < n && i < HT_BOOT_MAX; i++)
		if (boot[i] == p)
			return (int)i;
	return -1;
}

/* glibc's usable size of one of its blocks (its chunk header). */
static size_t glibc_usable(const void *p)
{
	size_t h = ((const size_t *)p)[-1];
	return (h & ~(size_t)7) - ((h & 2) ? 2 * sizeof(size_t) : sizeof(size_t));
}

void *ht_alloc__malloc(size_t size)
{
	return ready_other() ? other.malloc(size) : booted(__libc_malloc(size));
}

void ht_alloc__free(void *p)
{
	if (!ready_other()) {
		__libc_free(p);
		return;
	}
	int i = HT_UNLIKELY(atomic_load(&nboot)) ? boot_index(p) : -1;
	if (i < 0) {
		other.free(p);
		return;
	}
	boot[i] = NULL; /* (glibc's, handed out while resolving) */
	__libc_free(p);
}

void *ht_alloc__calloc(size_t n, size_t size)
{
	return ready_other() ? other.calloc(n, size) : booted(__libc_calloc(n, size));
}

void *ht_alloc__realloc(void *old, size_t size)
{
	if (!ready_other())
		return booted(__libc_realloc(old, size));
	int i = HT_UNLIKELY(atomic_load(&nboot)) ? boot_index(old) : -1;
	if (i >= 0) {
		/* glibc's block, moved to the program's allocator */
		void *p = other.malloc(size);
		if (!p)
			return NULL;
		size_t u = glibc_usable(old);
		memcpy(p, old, u < size ? u : size);
		boot[i] = NULL;
		__libc_free(old);
		return p;
	}
	return other.realloc(old, size);
}

void *ht_alloc__memalign(size_t align, size_t size)
{
	if (!ready_other())
		return booted(__libc_memalign(align, size));
	if (other.memalign)
		return other.memalign(align, size);
	if (other.aligned_alloc)
		return other.aligned_alloc(align, size);
	void *p = NULL;
	int e = other.posix_memalign ? other.posix_memalign(&p, align, size) : ENOMEM;
	if (e)
		errno = e;
	return e ? NULL : p;
}

/* aligned_alloc and posix_memalign go to the allocator's own when it has
 * them: their checks, return values and errno are not its memalign's
 * (jemalloc's aligned_alloc(3, 100) fails with EINVAL and one too large
 * sets ENOMEM; its memalign sets neither, and the traced program saw
 * errno 0). */
void *ht_alloc__aligned_alloc(size_t align, size_t size)
{
	if (ready_other() && other.aligned_alloc)
		return other.aligned_alloc(align, size);
	return ht_alloc__memalign(align, size);
}

int ht_alloc__posix_memalign(void **out, size_t align, size_t size)
{
	if (ready_other() && other.posix_memalign)
		return other.posix_memalign(out, align, size);
	/* glibc's checks: a power of two multiple of sizeof(void *) */
	if (align % sizeof(void *) != 0 || (align & (align - 1)) != 0 || align == 0)
		return EINVAL;
	void *p = ht_alloc__memalign(align, size);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *ht_alloc__valloc(size_t size)
{
	if (!ready_other())
		return booted(__libc_valloc(size));
	return other.valloc ? other.valloc(size)
			    : ht_alloc__memalign((size_t)sysconf(_SC_PAGESIZE), size);
}

void *ht_alloc__pvalloc(size_t size)
{
	if (!ready_other())
		return booted(__libc_pvalloc(size));
	if (other.pvalloc)
		return other.pvalloc(size);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), r = (size + pg - 1) & ~(pg - 1);
	if (r < size) {
		errno = ENOMEM;
		return NULL;
	}
	return ht_alloc__memalign(pg, r ? r : pg);
}

int ht_alloc__mallopt(int param, int value)
{
	if (!ready_other())
		return __libc_mallopt(param, value);
	return other.mallopt ? other.mallopt(param, value) : 0;
}

uint64_t ht_alloc__usable(void *p, uint64_t size)
{
	/* tcmalloc answers 0 for a block handed out while a constructor of
	 * its library's runs (libstdc++'s emergency pool): no allocator hands
	 * out fewer bytes than asked, so such an answer is not known */
	uint64_t u = 0;
	if (p && other.usable) {
		/* tcmalloc's answer calls its operator new the first time: the
		 * allocator's own, not the program's (nor a handler's) */
		ht_tls.guard += HT_GUARD_OWN;
		u = other.usable(p);
		ht_tls.guard -= HT_GUARD_OWN;
	}
	return u >= size ? u : size;
}
