/* C++'s operator new and delete.
 *
 * libstdc++'s operators call malloc and free, which record them; those of
 * jemalloc, tcmalloc and mimalloc do not, so that a C++ program running on
 * one of them had none of its new and delete in the trace.  Each operator
 * here calls the next definition of itself: with glibc's allocator through
 * a tail jump (no frame of ours stays on the stack, the calls are recorded
 * by malloc and free as before); with another allocator (alloc.c) it
 * records new as malloc (aligned_alloc for the aligned forms) and delete as
 * free.  A new that throws is not recorded.
 *
 * Built with -fexceptions: an operator that throws unwinds through these
 * frames, and the guard they raise is lowered on the way (op_leave). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

#include "preload.h"

enum {
	CXX_NEW,
	CXX_NEWA,
	CXX_NEW_NT,
	CXX_NEWA_NT,
	CXX_NEW_AL,
	CXX_NEWA_AL,
	CXX_NEW_AL_NT,
	CXX_NEWA_AL_NT,
	CXX_DEL,
	CXX_DELA,
	CXX_DEL_SZ,
	CXX_DELA_SZ,
	CXX_DEL_NT,
	CXX_DELA_NT,
	CXX_DEL_AL,
	CXX_DELA_AL,
	CXX_DEL_SZ_AL,
	CXX_DELA_SZ_AL,
	CXX_DEL_AL_NT,
	CXX_DELA_AL_NT,
	CXX_NR
};
static const char *const cxx_names[CXX_NR] = {
    "_Znwm",
    "_Znam",
    "_ZnwmRKSt9nothrow_t",
    "_ZnamRKSt9nothrow_t",
    "_ZnwmSt11align_val_t",
    "_ZnamSt11align_val_t",
    "_ZnwmSt11align_val_tRKSt9nothrow_t",
    "_ZnamSt11align_val_tRKSt9nothrow_t",
    "_ZdlPv",
    "_ZdaPv",
    "_ZdlPvm",
    "_ZdaPvm",
    "_ZdlPvRKSt9nothrow_t",
    "_ZdaPvRKSt9nothrow_t",
    "_ZdlPvSt11align_val_t",
    "_ZdaPvSt11align_val_t",
    "_ZdlPvmSt11align_val_t",
    "_ZdaPvmSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    "_ZdaPvSt11align_val_tRKSt9nothrow_t",
};
static void *_Atomic cxx_next[CXX_NR];

/* The next definition of operator i, looked up at its first call (the C++
 * runtime may be loaded late, with a plugin). */
static __attribute__((noinline, cold)) void *cxx_find(int i)
{
	void *f;
	ht_tls.guard += HT_GUARD_OWN;
	f = dlsym(RTLD_NEXT, cxx_names[i]);
	ht_tls.guard -= HT_GUARD_OWN;
	if (!f) {
		ht_msg("no C++ runtime defines %s after the recorder: the program cannot go on",
		       cxx_names[i]);
		abort();
	}
	atomic_store_explicit(&cxx_next[i], f, memory_order_relaxed);
	return f;
}

static inline void *cxx_fn(int i)
{
	void *f = atomic_load_explicit(&cxx_next[i], memory_order_relaxed);
	return HT_LIKELY(f != NULL) ? f : cxx_find(i);
}

/* While the other allocator's operator runs: the calls it makes to the
 * malloc API itself (jemalloc's delete[] calls its delete) are its own, as
 * the calls glibc's allocator makes inside are.  Restored by a cleanup
 * when the operator throws (this file is built with -fexceptions). */
static inline int op_enter(int rec)
{
	if (rec)
		ht_tls.guard += HT_GUARD_OWN;
	return rec;
}

static inline void op_leave(int *entered)
{
	if (*entered)
		ht_tls.guard -= HT_GUARD_OWN;
}

#define OP_CALL(call, rec)                                                                         \
	do {                                                                                       \
		int in_op __attribute__((cleanup(op_leave))) = op_enter(rec);                      \
		call;                                                                              \
	} while (0)

/* Operator i's next definition when glibc's allocator serves the program
 * (set by its first call), else NULL: the one load of the common path. */
static void *_Atomic cxx_plain[CXX_NR];

/* The first call of operator i with glibc's allocator, and every call with
 * another: its next definition called, and with another allocator, the
 * call recorded (as malloc or aligned_alloc: a new that throws is not). */
static __attribute__((noinline)) void *new_slow(int i, size_t n, size_t al, const void *nt)
{
	void *f = cxx_fn(i);
	if (!ht_alloc__is_other())
		atomic_store_explicit(&cxx_plain[i], f, memory_order_relaxed);
	int rec = ht_alloc_other;
	uint64_t t0 = rec ? ht_hooks__timed_start() : 0;
	void *p;
	switch (i) {
	case CXX_NEW:
	case CXX_NEWA:
		OP_CALL(p = ((void *(*)(size_t))f)(n), rec);
		break;
	case CXX_NEW_NT:
	case CXX_NEWA_NT:
		OP_CALL(p = ((void *(*)(size_t, const void *))f)(n, nt), rec);
		break;
	case CXX_NEW_AL:
	case CXX_NEWA_AL:
		OP_CALL(p = ((void *(*)(size_t, size_t))f)(n, al), rec);
		break;
	default:
		OP_CALL(p = ((void *(*)(size_t, size_t, const void *))f)(n, al, nt), rec);
		break;
	}
	if (rec)
		ht_hooks__new_done(n, i >= CXX_NEW_AL ? (al ? al : 1) : 0, p, t0);
	return p;
}

/* The same for operator delete i on p (sz and al as it takes them), its
 * free recorded before the block goes. */
static __attribute__((noinline)) void delete_slow(int i, void *p, size_t sz, size_t al,
						  const void *nt)
{
	void *f = cxx_fn(i);
	if (!ht_alloc__is_other())
		atomic_store_explicit(&cxx_plain[i], f, memory_order_relaxed);
	int rec = ht_alloc_other;
	struct ht_free_timing d = {0};
	if (rec)
		ht_hooks__free_start(p, &d);
	switch (i) {
	case CXX_DEL:
	case CXX_DELA:
		OP_CALL(((void (*)(void *))f)(p), rec);
		break;
	case CXX_DEL_SZ:
	case CXX_DELA_SZ:
		OP_CALL(((void (*)(void *, size_t))f)(p, sz), rec);
		break;
	case CXX_DEL_NT:
	case CXX_DELA_NT:
		OP_CALL(((void (*)(void *, const void *))f)(p, nt), rec);
		break;
	case CXX_DEL_AL:
	case CXX_DELA_AL:
		OP_CALL(((void (*)(void *, size_t))f)(p, al), rec);
		break;
	case CXX_DEL_SZ_AL:
	case CXX_DELA_SZ_AL:
		OP_CALL(((void (*)(void *, size_t, size_t))f)(p, sz, al), rec);
		break;
	default:
		OP_CALL(((void (*)(void *, size_t, const void *))f)(p, al, nt), rec);
		break;
	}
	if (rec)
		ht_hooks__free_done(p, &d);
}

/* The operators: with glibc's allocator, a load and a tail jump to the next
 * definition (libstdc++'s, which calls malloc or free), no frame of ours
 * left on the stack; anything else goes the slow way. */
#define PLAIN(i, type) ((type)atomic_load_explicit(&cxx_plain[i], memory_order_relaxed))

#define NEW_OP(name, i, params, args, al, nt)                                                      \
	HT_EXPORT void *name params;                                                               \
	HT_EXPORT void *name params                                                                \
	{                                                                                          \
		void *(*f)params = PLAIN(i, void *(*)params);                                      \
		if (HT_LIKELY(f != NULL))                                                          \
			return f args;                                                             \
		return new_slow(i, n, al, nt);                                                     \
	}
#define DELETE_OP(name, i, params, args, sz, al, nt)                                               \
	HT_EXPORT void name params;                                                                \
	HT_EXPORT void name params                                                                 \
	{                                                                                          \
		void(*f) params = PLAIN(i, void(*) params);                                        \
		if (HT_LIKELY(f != NULL)) {                                                        \
			f args;                                                                    \
			return;                                                                    \
		}                                                                                  \
		delete_slow(i, p, sz, al, nt);                                                     \
	}

NEW_OP(_Znwm, CXX_NEW, (size_t n), (n), 0, NULL)
NEW_OP(_Znam, CXX_NEWA, (size_t n), (n), 0, NULL)
NEW_OP(_ZnwmRKSt9nothrow_t, CXX_NEW_NT, (size_t n, const void *nt), (n, nt), 0, nt)
NEW_OP(_ZnamRKSt9nothrow_t, CXX_NEWA_NT, (size_t n, const void *nt), (n, nt), 0, nt)
NEW_OP(_ZnwmSt11align_val_t, CXX_NEW_AL, (size_t n, size_t al), (n, al), al, NULL)
NEW_OP(_ZnamSt11align_val_t, CXX_NEWA_AL, (size_t n, size_t al), (n, al), al, NULL)
NEW_OP(_ZnwmSt11align_val_tRKSt9nothrow_t, CXX_NEW_AL_NT, (size_t n, size_t al, const void *nt),
       (n, al, nt), al, nt)
NEW_OP(_ZnamSt11align_val_tRKSt9nothrow_t, CXX_NEWA_AL_NT, (size_t n, size_t al, const void *nt),
       (n, al, nt), al, nt)
DELETE_OP(_ZdlPv, CXX_DEL, (void *p), (p), 0, 0, NULL)
DELETE_OP(_ZdaPv, CXX_DELA, (void *p), (p), 0, 0, NULL)
DELETE_OP(_ZdlPvm, CXX_DEL_SZ, (void *p, size_t sz), (p, sz), sz, 0, NULL)
DELETE_OP(_ZdaPvm, CXX_DELA_SZ, (void *p, size_t sz), (p, sz), sz, 0, NULL)
DELETE_OP(_ZdlPvRKSt9nothrow_t, CXX_DEL_NT, (void *p, const void *nt), (p, nt), 0, 0, nt)
DELETE_OP(_ZdaPvRKSt9nothrow_t, CXX_DELA_NT, (void *p, const void *nt), (p, nt), 0, 0, nt)
DELETE_OP(_ZdlPvSt11align_val_t, CXX_DEL_AL, (void *p, size_t al), (p, al), 0, al, NULL)
DELETE_OP(_ZdaPvSt11align_val_t, CXX_DELA_AL, (void *p, size_t al), (p, al), 0, al, NULL)
DELETE_OP(_ZdlPvmSt11align_val_t, CXX_DEL_SZ_AL, (void *p, size_t sz, size_t al), (p, sz, al), sz,
	  al, NULL)
DELETE_OP(_ZdaPvmSt11align_val_t, CXX_DELA_SZ_AL, (void *p, size_t sz, size_t al), (p, sz, al), sz,
	  al, NULL)
DELETE_OP(_ZdlPvSt11align_val_tRKSt9nothrow_t, CXX_DEL_AL_NT, (void *p, size_t al, const void *nt),
	  (p, al, nt), 0, al, nt)
DELETE_OP(_ZdaPvSt11align_val_tRKSt9nothrow_t, CXX_DELA_AL_NT, (void *p, size_t al, const void *nt),
	  (p, al, nt), 0, al, nt)
