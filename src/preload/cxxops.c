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
 * Such an operator that finds no memory runs the program's new-handler and
 * may throw std::bad_alloc: what the handler does and the exception object
 * are the program's, recorded (handler_wrap, __cxa_allocate_exception).
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
	CXX_SET_NH,
	CXX_GET_NH,
	CXX_ALLOC_EXC,
	CXX_END_CATCH,
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
    "_ZSt15set_new_handlerPFvvE",
    "_ZSt15get_new_handlerv",
    "__cxa_allocate_exception",
    "__cxa_end_catch",
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

/* ---- the program's new-handler, and the bad_alloc a new throws ----------
 *
 * Another allocator's operator new that finds no memory calls the
 * program's new-handler (std::set_new_handler), as libstdc++'s does, and
 * throws std::bad_alloc when there is none.  Both are the program's: the
 * handler frees a reserve, writes a note; the exception object is
 * malloc'd by __cxa_allocate_exception and freed by the catch, outside.
 * Under the operator's guard none of it was recorded: with jemalloc, the
 * freed reserve stayed live at exit and the exception's free was unknown.
 *
 * So while this thread is inside such an operator (in_new), the handler
 * is handed out wrapped: std::set_new_handler and std::get_new_handler,
 * through which the allocators look it up (jemalloc and tcmalloc call
 * set_new_handler(NULL), then put back what it returned), answer
 * handler_wrap, which runs the program's handler with the guard lowered;
 * __cxa_allocate_exception lowers it too, and so does __cxa_end_catch,
 * which frees the bad_alloc a handler threw when the operator catches it
 * (jemalloc's nothrow new, tcmalloc's).  Outside the operators every call
 * goes straight on and the program sees its own handler. */
typedef void (*new_handler_fn)(void);

/* 1 while the thread is in another allocator's operator new, under its
 * guard (a handler that runs in it is outside). */
static __thread int in_new;
/* The program's handler that handler_wrap stands for (the last one handed
 * out wrapped: the one the operator saw). */
static new_handler_fn _Atomic wrapped_handler;

static inline int new_enter(int rec)
{
	int was = in_new;
	if (rec) {
		ht_tls.guard += HT_GUARD_OWN;
		in_new = 1;
	}
	return was | rec << 1;
}

static inline void new_leave(int *st)
{
	if (*st & 2) {
		ht_tls.guard -= HT_GUARD_OWN;
		in_new = *st & 1;
	}
}

#define NEW_CALL(call, rec)                                                                        \
	do {                                                                                       \
		int in_op __attribute__((cleanup(new_leave))) = new_enter(rec);                    \
		call;                                                                              \
	} while (0)

/* Out of the operator's guard for a call that is the program's (the
 * handler, the exception); put back by a cleanup if the handler throws. */
static inline int prog_enter(void)
{
	if (!in_new)
		return 0;
	in_new = 0;
	ht_tls.guard -= HT_GUARD_OWN;
	return 1;
}

static inline void prog_leave(int *st)
{
	if (*st) {
		ht_tls.guard += HT_GUARD_OWN;
		in_new = 1;
	}
}

static void handler_wrap(void)
{
	new_handler_fn h = atomic_load_explicit(&wrapped_handler, memory_order_relaxed);
	int st __attribute__((cleanup(prog_leave))) = prog_enter();
	h();
}

/* What set_new_handler or get_new_handler answers: the handler h, or
 * inside an operator, h wrapped. */
static new_handler_fn handed_out(new_handler_fn h)
{
	if (!in_new || !h || h == handler_wrap)
		return h;
	atomic_store_explicit(&wrapped_handler, h, memory_order_relaxed);
	return handler_wrap;
}

HT_EXPORT new_handler_fn _ZSt15set_new_handlerPFvvE(new_handler_fn h);
HT_EXPORT new_handler_fn _ZSt15set_new_handlerPFvvE(new_handler_fn h)
{
	/* (the wrapper is never installed: the allocator puts back the
	 * handler it took out) */
	if (h == handler_wrap)
		h = atomic_load_explicit(&wrapped_handler, memory_order_relaxed);
	return handed_out(((new_handler_fn(*)(new_handler_fn))cxx_fn(CXX_SET_NH))(h));
}

HT_EXPORT new_handler_fn _ZSt15get_new_handlerv(void);
HT_EXPORT new_handler_fn _ZSt15get_new_handlerv(void)
{
	return handed_out(((new_handler_fn(*)(void))cxx_fn(CXX_GET_NH))());
}

/* The exception object: libstdc++ mallocs it (tcmalloc's new calls this
 * itself, jemalloc's through std::__throw_bad_alloc). */
HT_EXPORT void *__cxa_allocate_exception(size_t n);
HT_EXPORT void *__cxa_allocate_exception(size_t n)
{
	void *(*f)(size_t) = (void *(*)(size_t))cxx_fn(CXX_ALLOC_EXC);
	if (HT_LIKELY(!in_new))
		return f(n);
	int st __attribute__((cleanup(prog_leave))) = prog_enter();
	return f(n);
}

/* The end of a catch, which frees the exception (and runs its destructor)
 * when it was the last handler of it. */
HT_EXPORT void __cxa_end_catch(void);
HT_EXPORT void __cxa_end_catch(void)
{
	void (*f)(void) = (void (*)(void))cxx_fn(CXX_END_CATCH);
	if (HT_LIKELY(!in_new)) {
		f();
		return;
	}
	int st __attribute__((cleanup(prog_leave))) = prog_enter();
	f();
}

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
		NEW_CALL(p = ((void *(*)(size_t))f)(n), rec);
		break;
	case CXX_NEW_NT:
	case CXX_NEWA_NT:
		NEW_CALL(p = ((void *(*)(size_t, const void *))f)(n, nt), rec);
		break;
	case CXX_NEW_AL:
	case CXX_NEWA_AL:
		NEW_CALL(p = ((void *(*)(size_t, size_t))f)(n, al), rec);
		break;
	default:
		NEW_CALL(p = ((void *(*)(size_t, size_t, const void *))f)(n, al, nt), rec);
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
