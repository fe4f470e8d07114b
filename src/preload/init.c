/* Start-up, fork, exit and signals, and the public control API of
 * include/heaptrail.h. */
#define _GNU_SOURCE
#include <dlfcn.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../include/heaptrail.h"
#include "preload.h"

_Atomic int ht_initialized;
static pthread_key_t exit_key;   /* its destructor records THREAD_EXIT */
static int exit_key_ok;          /* exit_key was created */
static pid_t traced_pid;         /* the process this state belongs to */
static int disabled;             /* setuid program, or a fork child not followed */
static int paused_by_user;       /* heaptrail_pause()/SIGUSR2 in effect */
static int root_image = 1;       /* the traced process itself (not a child) */
static int image_index;          /* execs of the traced process before this image */
static char saved_preload[4096]; /* LD_PRELOAD as we found it */
static uid_t start_euid;         /* effective user when the tracer started */
static gid_t start_egid;         /* effective group when the tracer started */

int ht_is_root_image(void)
{
	return root_image;
}

int ht_image_index(void)
{
	return image_index;
}

/* What the images to come read their options from (HEAPTRAIL_OPTIONS=...,
 * ht_options__entry), made once the output path is settled. */
static char options_entry[sizeof(ht_opt.out) + 512];

/* Whether the LD_PRELOAD value v (n bytes, or up to its NUL) names the
 * library: a word whose file name starts with libheaptrail.so; its start
 * in *at and length in *len. */
static int preload_word(const char *v, size_t n, const char **at, size_t *len)
{
	for (const char *p = v, *end = v + n; p < end && *p;) {
		size_t l = strcspn(p, ": ");
		if (l > (size_t)(end - p))
			l = (size_t)(end - p);
		const char *base = memrchr(p, '/', l);
		base = base ? base + 1 : p;
		if ((size_t)(p + l - base) >= 15 && !strncmp(base, "libheaptrail.so", 15)) {
			*at = p;
			*len = l;
			return 1;
		}
		p += l;
		while (p < end && (*p == ':' || *p == ' '))
			p++;
	}
	return 0;
}

/* The environment for an exec.  By the traced process itself: the tracer
 * goes on in the new image even when children are not followed, so the
 * exec gets back LD_PRELOAD with the library (in front of what the program
 * has there) and HEAPTRAIL_OPTIONS, which the program's own environment no
 * longer holds (docs/record.md).  With --follow-exec, by any process: the
 * two stay in the environment, but a program may have replaced or cleared
 * them (`env LD_PRELOAD=libjemalloc.so.2 app`, `env -i app`), and whichever
 * is missing is put back.  Returns envp unchanged when nothing is to be
 * added; else fills out (n+3 slots). */
char *const *ht_exec_env(char *const envp[], char **out, size_t cap, char *entry, size_t elen)
{
	if ((!ht_opt.follow_exec && !root_image) || disabled || !saved_preload[0] ||
	    !options_entry[0] || !envp)
		return envp;
	/* the library's own word of LD_PRELOAD as it was at start */
	const char *lib = NULL, *w;
	size_t llen = 0, wlen;
	if (!preload_word(saved_preload, sizeof(saved_preload), &lib, &llen))
		return envp;
	const char *theirs = NULL;
	int has_opts = 0;
	for (size_t i = 0; envp[i]; i++) {
		if (!strncmp(envp[i], "LD_PRELOAD=", 11))
			theirs = envp[i] + 11;
		else if (!strncmp(envp[i], HT_OPTIONS_ENV "=", sizeof(HT_OPTIONS_ENV)))
			has_opts = 1;
	}
	int has_lib = theirs && preload_word(theirs, strlen(theirs), &w, &wlen);
	if (ht_opt.follow_exec && has_lib && has_opts)
		return envp; /* (as the tracer left it) */
	size_t n = 0;
	for (size_t i = 0; envp[i]; i++) {
		if (!strncmp(envp[i], "LD_PRELOAD=", 11) ||
		    !strncmp(envp[i], HT_OPTIONS_ENV "=", sizeof(HT_OPTIONS_ENV)))
			continue;
		if (n + 3 >= cap)
			return envp;
		out[n++] = envp[i];
	}
	int len = has_lib ? snprintf(entry, elen, "LD_PRELOAD=%s", theirs)
			  : snprintf(entry, elen, "LD_PRELOAD=%.*s%s%s", (int)llen, lib,
				     theirs && *theirs ? ":" : "", theirs ? theirs : "");
	if (len < 0 || (size_t)len >= elen)
		return envp;
	out[n++] = entry;
	out[n++] = options_entry;
	out[n] = NULL;
	return out;
}

char *const *ht_exec_env_untraced(char *const envp[], char **out, size_t cap, char *entry,
				  size_t elen)
{
	int ours = 0;
	for (size_t i = 0; envp && envp[i]; i++) {
		const char *w;
		size_t wl;
		if ((!strncmp(envp[i], "LD_PRELOAD=", 11) &&
		     preload_word(envp[i] + 11, strlen(envp[i] + 11), &w, &wl)) ||
		    !strncmp(envp[i], HT_OPTIONS_ENV "=", sizeof(HT_OPTIONS_ENV)))
			ours = 1;
	}
	if (!ours)
		return envp;
	size_t n = 0;
	for (size_t i = 0; envp[i]; i++) {
		if (!strncmp(envp[i], HT_OPTIONS_ENV "=", sizeof(HT_OPTIONS_ENV)))
			continue;
		if (n + 1 >= cap)
			return envp;
		const char *v = envp[i] + 11, *w;
		size_t wl;
		if (strncmp(envp[i], "LD_PRELOAD=", 11) || !preload_word(v, strlen(v), &w, &wl)) {
			out[n++] = envp[i];
			continue;
		}
		/* the value less the word and one separator next to it */
		size_t pre = (size_t)(w - v), rest = strlen(w + wl);
		const char *after = w + wl;
		while (rest && (*after == ':' || *after == ' '))
			after++, rest--;
		while (pre && (v[pre - 1] == ':' || v[pre - 1] == ' ') && !rest)
			pre--;
		if (!pre && !rest)
			continue; /* nothing else in it */
		if (11 + pre + rest + 1 > elen)
			return envp;
		memcpy(entry, "LD_PRELOAD=", 11);
		memcpy(entry + 11, v, pre);
		memcpy(entry + 11 + pre, after, rest);
		entry[11 + pre + rest] = 0;
		out[n++] = entry;
	}
	out[n] = NULL;
	return out;
}

int ht_identity_changed(void)
{
	return geteuid() != start_euid || getegid() != start_egid;
}

int ht_foreign_process(void)
{
	/* (a getpid that fails, refused by a seccomp filter, says nothing:
	 * taken as foreign, the trace was never closed and the writer thread's
	 * events were lost) */
	pid_t pid = ht_self_pid();
	return traced_pid && pid > 0 && pid != traced_pid;
}

static void thread_exit_dtor(void *arg)
{
	(void)arg;
	ht_tls__exit(&ht_tls);
}

void ht_register_thread_exit(void)
{
	if (exit_key_ok)
		pthread_setspecific(exit_key, (void *)1);
}

static void set_recording(int on)
{
	if (on) /* (a child forked while its parent exited records anew) */
		atomic_store(&ht_closing, 0);
	atomic_store(&ht_on, on && !disabled && !paused_by_user);
}

/* The environment is edited in place, never through setenv/unsetenv: a
 * program may define its own (bash does), and they may allocate. */
extern void *__libc_malloc(size_t);

static void env_set(const char *name, char *entry)
{
	size_t len = strlen(name), n = 0;
	for (; environ && environ[n]; n++) {
		if (!strncmp(environ[n], name, len) && environ[n][len] == '=') {
			environ[n] = entry;
			return;
		}
	}
	char **e = __libc_malloc((n + 2) * sizeof(char *));
	if (!e)
		return;
	for (size_t i = 0; i < n; i++)
		e[i] = environ[i];
	e[n] = entry;
	e[n + 1] = NULL;
	environ = e;
}

static void env_remove(const char *name)
{
	size_t len = strlen(name), o = 0;
	for (size_t i = 0; environ && environ[i]; i++)
		if (strncmp(environ[i], name, len) || environ[i][len] != '=')
			environ[o++] = environ[i];
	if (environ)
		environ[o] = NULL;
}

/* Removes libheaptrail.so from LD_PRELOAD so that programs started by the
 * traced one run untraced unless HEAPTRAIL_FOLLOW_EXEC asks otherwise. */
static void strip_ld_preload(void)
{
	static char entry[4200];
	const char *v = getenv("LD_PRELOAD");
	if (!v)
		return;
	size_t n = (size_t)snprintf(entry, sizeof(entry), "LD_PRELOAD=");
	const char *p = v;
	int kept = 0;
	while (*p) {
		size_t len = strcspn(p, ": ");
		const char *base = p;
		for (size_t i = 0; i < len; i++)
			if (p[i] == '/')
				base = p + i + 1;
		size_t blen = (size_t)(p + len - base);
		int ours = blen >= 15 && !strncmp(base, "libheaptrail.so", 15);
		if (len && !ours && n + len + 2 < sizeof(entry)) {
			if (kept++)
				entry[n++] = ':';
			memcpy(entry + n, p, len);
			n += len;
		}
		p += len;
		while (*p == ':' || *p == ' ')
			p++;
	}
	entry[n] = 0;
	if (kept)
		env_set("LD_PRELOAD", entry);
	else
		env_remove("LD_PRELOAD");
}

/* Cheap, idempotent part of start-up: safe from the first malloc call,
 * which may come before our constructor (other libraries' constructors). */
void ht_init(void)
{
	if (atomic_exchange(&ht_initialized, 1))
		return;
	ht_alloc__resolve(); /* (before the options: it sets the slow paths) */
	ht_tls.guard += HT_GUARD_OWN;
	ht_options__load();
	ht_clock__init();
#if defined(__x86_64__)
	__builtin_cpu_init();
	ht_lzcnt = __builtin_cpu_supports("abm") || __builtin_cpu_supports("lzcnt");
	/* malloc's and free's fast paths count field lengths with LZCNT and
	 * prefetch the buffer with PREFETCHW (hooks.c) */
	unsigned int a, b, c, d;
	int prfchw = __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 8));
	if (!ht_lzcnt || !prfchw)
		ht_opt.slow_malloc = ht_opt.slow_free = 1;
#endif
	traced_pid = ht_self_pid();
	start_euid = geteuid();
	start_egid = getegid();
	if (getauxval(AT_SECURE)) {
		disabled = 1; /* setuid/setgid: never trace, never write files */
	}
	if (!disabled)
		ht_alloc__check_first();
	paused_by_user = ht_opt.start_paused;
	/* The traced process keeps its role across its own execs (a shim or
	 * wrapper that execs the real program); other processes that run
	 * the tracer are children. */
	if (ht_opt.root_pid && ht_opt.root_pid != traced_pid)
		root_image = 0;
	image_index = ht_opt.image;
	set_recording(1);
	ht_tls.guard -= HT_GUARD_OWN;
}

void ht_init__after_fork_child(void)
{
	struct ht_tls *t = &ht_tls;
	t->guard += HT_GUARD_OWN;
	traced_pid = ht_self_pid();
	/* the child's identity is the one it was forked with: a process that
	 * dropped privileges before it forks its workers (a daemon) has them
	 * traced; a child that switches user after the fork does not
	 * (ht_identity_changed) */
	start_euid = geteuid();
	start_egid = getegid();
	root_image = 0;
	image_index = 0;
	/* The parent's buffers are the parent's to write. */
	ht_stack__after_fork_child(t);
	t->state = 0;
	t->buf = NULL;
	t->end = NULL; /* hot_ready() takes the slow path */
	t->nested_tail = t->nested_head; /* (a handler's calls kept before the fork: the parent's) */
	t->nobuf = 0;
	t->rec = NULL;
	t->creator = 0;
	if (!ht_opt.follow_fork)
		disabled = 1;
	set_recording(1);
	ht_writer__after_fork_child();
	ht_buf__pool_reset_after_fork();
	t->guard -= HT_GUARD_OWN;
}

/* Fatal signals: write what we have, then die as the program would have.
 *
 * The handler is invisible to the program: a program that asks what a
 * fatal signal's disposition is (sigaction(sig, NULL, &old), the old
 * value of signal()) is told SIG_DFL, as it would be without the tracer.
 * Programs act on that answer: CPython installs its KeyboardInterrupt
 * handler for SIGINT only if it finds SIG_DFL there (with the handler
 * visible, Ctrl-C killed a traced python3 and _thread.interrupt_main()
 * failed); shells keep signals that they find ignored.  A program that
 * installs its own handler replaces ours; one that sets SIG_DFL (again) gets
 * ours, which behaves like SIG_DFL: the trace is closed, then the process
 * dies of the same signal. */
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTERM, SIGINT,
				    SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGXCPU, SIGXFSZ, SIGUSR1};
#define HT_NSIG 65
static _Atomic int armed[HT_NSIG];  /* signal -> on_fatal stands in for its SIG_DFL */

/* glibc's sigaction, reached without our interposed one below. */
extern int __sigaction(int, const struct sigaction *, struct sigaction *);

static void on_fatal(int sig);

/* While on_fatal closes the trace, the signal it handles and the other
 * signals sent to end a process wait: `timeout` sends SIGTERM to the
 * program and to `heaptrail record`, which passes it on, and a second
 * SIGTERM that killed the program in the middle of the close left a trace
 * the writer process had to finish as orphaned.  They are delivered, with
 * their default action, when the handler returns. */
static const int ending_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM,
				     SIGXCPU, SIGXFSZ, SIGUSR1};

static int set_fatal_handler(int sig, struct sigaction *old)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fatal;
	/* Not SA_RESETHAND: the kernel resets the disposition when it takes
	 * the signal, and blocks it (with sa_mask) only once the handler's
	 * frame is set up; a second SIGTERM between the two (timeout(1)
	 * sends one to the program and one to its group, record passes a
	 * third on) found SIG_DFL and killed the program before on_fatal
	 * ran, and the writer process finished the trace as orphaned (1 time
	 * in 80 with a handler of 2 ms and two signals in a row; in a
	 * threaded program, a second signal taken by another thread found
	 * SIG_DFL for as long as the handler ran).  on_fatal sets SIG_DFL
	 * itself once the trace is closed. */
	sa.sa_flags = 0;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(ending_signals) / sizeof(ending_signals[0]); i++)
		sigaddset(&sa.sa_mask, ending_signals[i]);
	return __sigaction(sig, &sa, old);
}

static void on_fatal(int sig)
{
	int e = errno;
	ht_writer__shutdown(sig > 0 ? sig : SIGTERM);
	if (sig > 0 && sig < HT_NSIG)
		atomic_store(&armed[sig], 0);
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	__sigaction(sig, &dfl, NULL);
	errno = e;
	raise(sig); /* blocked here: delivered when the handler returns */
}

/* What the program sees as the old disposition: ours reads as SIG_DFL. */
static void hide_old(struct sigaction *old)
{
	if (old && !(old->sa_flags & SA_SIGINFO) && old->sa_handler == on_fatal) {
		memset(old, 0, sizeof(*old));
		old->sa_handler = SIG_DFL;
	}
}

HT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (sig <= 0 || sig >= HT_NSIG || !atomic_load(&armed[sig]))
		return __sigaction(sig, act, old);
	int r;
	if (act && !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL) {
		/* the default (back from a handler of the program's, as CPython
		 * does at exit before it re-raises a SIGINT): ours again */
		r = set_fatal_handler(sig, old);
	} else {
		r = __sigaction(sig, act, old); /* the program's own handler, or SIG_IGN */
	}
	if (r == 0)
		hide_old(old);
	return r;
}

/* signal() with glibc's (BSD) semantics, through sigaction above: glibc's
 * own signal() calls its sigaction internally, past the interposition. */
HT_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	if (sig <= 0 || sig >= HT_NSIG || handler == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, sig);
	sa.sa_flags = SA_RESTART;
	if (sigaction(sig, &sa, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* glibc declares it only without _GNU_SOURCE */
sighandler_t bsd_signal(int sig, sighandler_t handler);
HT_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	return signal(sig, handler);
}

static void on_toggle(int sig)
{
	(void)sig;
	int e = errno;
	paused_by_user = !paused_by_user;
	if (paused_by_user) {
		uint64_t v[1] = {HT_CTL_PAUSE};
		ht_record(HT_EV_CONTROL, 0, ht_now(), v, NULL);
		set_recording(1);
	} else {
		set_recording(1);
		uint64_t v[1] = {HT_CTL_RESUME};
		ht_record(HT_EV_CONTROL, 0, ht_now(), v, NULL);
	}
	errno = e;
}

static void install_signals(void)
{
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
		int sig = fatal_signals[i];
		struct sigaction old;
		if (__sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
		    !(old.sa_flags & SA_SIGINFO) && set_fatal_handler(sig, NULL) == 0) {
			atomic_store(&armed[sig], 1);
		}
	}
	if (ht_opt.toggle_signal) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_toggle;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		__sigaction(SIGUSR2, &sa, NULL);
	}
}

/* The trace is closed at exit after every library's destructors, not in
 * ours: _dl_fini runs this library's destructor before those of the
 * program's other libraries (the ones it links and the ones it dlopen'ed
 * and kept), and of C++ objects with static storage in them, so their
 * frees at exit went unrecorded and `leaks` reported their blocks
 * (a std::vector of a global object in a shared library; valgrind: nothing
 * in use).  A handler registered here, with no library as its owner, runs
 * after _dl_fini (which __libc_start_main registers later): exit handlers
 * run last registered first.  Our destructor closes the trace only when
 * that handler could not be registered. */
extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);
static int exit_handler_set;

/* libstdc++ keeps a pool for exceptions thrown when memory runs out
 * (72 KiB, allocated as it loads) and frees it only in
 * __gnu_cxx::__freeres, which valgrind and heaptrack call at exit: without
 * it every C++ program had a 72,704-byte leak in libstdc++ that valgrind
 * does not report.  It is called here, after every other exit handler and
 * destructor, just before the trace is closed; its free is recorded.
 * The look-up is the recorder's own (a C program has no such symbol, and
 * dlsym allocates its error message). */
static void close_at_exit(void *arg)
{
	(void)arg;
	struct ht_tls *t = &ht_tls;
	t->guard += HT_GUARD_OWN;
	void (*freeres)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "_ZN9__gnu_cxx9__freeresEv");
	t->guard -= HT_GUARD_OWN;
	if (freeres)
		freeres();
	ht_writer__shutdown(0);
}

__attribute__((constructor(101))) static void ht_constructor(void)
{
	ht_init();
	struct ht_tls *t = &ht_tls;
	t->guard += HT_GUARD_OWN;
	if (!exit_key_ok && pthread_key_create(&exit_key, thread_exit_dtor) == 0)
		exit_key_ok = 1;
	ht_hooks__resolve();
	const char *pre = getenv("LD_PRELOAD");
	if (pre && strlen(pre) < sizeof(saved_preload))
		strcpy(saved_preload, pre);
	/* The program sees its own environment: without --follow-exec,
	 * neither the library in LD_PRELOAD nor HEAPTRAIL_OPTIONS stays in it
	 * (programs that copy their environment allocate no more than
	 * untraced, and the programs it starts run untraced); its own execs
	 * get them back (ht_exec_env). */
	if (!ht_opt.follow_exec) {
		strip_ld_preload();
		env_remove(HT_OPTIONS_ENV);
	}
	if (!disabled) {
		pthread_atfork(NULL, NULL, ht_init__after_fork_child);
		install_signals();
		if (ht_writer__start() < 0) {
			disabled = 1;
			set_recording(1);
		} else if (!exit_handler_set && __cxa_atexit(close_at_exit, NULL, NULL) == 0) {
			exit_handler_set = 1;
		}
	}
	/* The images to come (this process's own execs, and with
	 * HEAPTRAIL_FOLLOW_EXEC the programs children exec) write where this
	 * one does, even after a chdir: the output path as made absolute at
	 * start (or as open_output changed it, if another recording had it),
	 * with every option that is not at its default, in one variable.  The
	 * traced process itself passes root=<its pid> and image=<execs so
	 * far>, which tell its next image that it is the traced process
	 * still (and tell the others that they are not, even if this one
	 * could not record). */
	int root = root_image ? (int)traced_pid : ht_opt.root_pid;
	if (ht_options__entry(options_entry, sizeof(options_entry), root,
			      root_image ? image_index + 1 : 0) < 0)
		options_entry[0] = 0;
	else if (ht_opt.follow_exec)
		env_set(HT_OPTIONS_ENV, options_entry);
	t->guard -= HT_GUARD_OWN;
	if (t->state == 1)
		ht_register_thread_exit(); /* the main thread recorded before */
}

__attribute__((destructor)) static void ht_destructor(void)
{
	if (!exit_handler_set)
		ht_writer__shutdown(0);
}

/* ---- public API (include/heaptrail.h) ----------------------------------- */

static void control(int op)
{
	uint64_t v[1] = {(uint64_t)op};
	ht_record(HT_EV_CONTROL, 0, ht_now(), v, NULL);
}

HT_EXPORT void heaptrail_start(void)
{
	paused_by_user = 0;
	set_recording(1);
	control(HT_CTL_START);
}

HT_EXPORT void heaptrail_stop(void)
{
	control(HT_CTL_STOP);
	paused_by_user = 1;
	set_recording(1);
	ht_writer__sync(2000);
}

HT_EXPORT void heaptrail_pause(void)
{
	control(HT_CTL_PAUSE);
	paused_by_user = 1;
	set_recording(1);
}

HT_EXPORT void heaptrail_resume(void)
{
	paused_by_user = 0;
	set_recording(1);
	control(HT_CTL_RESUME);
}

HT_EXPORT void heaptrail_sync(void)
{
	control(HT_CTL_SYNC);
	ht_writer__sync(5000);
}

HT_EXPORT void heaptrail_reset(void)
{
	control(HT_CTL_RESET);
}

HT_EXPORT void heaptrail_mark(const char *label)
{
	if (atomic_load(&ht_on))
		ht_record(HT_EV_MARK, 0, ht_now(), NULL, label ? label : "");
}

HT_EXPORT int heaptrail_active(void)
{
	return atomic_load(&ht_on);
}
