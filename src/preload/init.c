/* Start-up, fork, exit and signals, and the public control API of
 * include/heaptrail.h. */
#define _GNU_SOURCE
#include <dlfcn.h>
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
static int root_image = 1;       /* the first traced image (not a child) */

int ht_is_root_image(void)
{
	return root_image;
}

int ht_foreign_process(void)
{
	return traced_pid && (pid_t)syscall(SYS_getpid) != traced_pid;
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
	atomic_store(&ht_on, on && !disabled && !paused_by_user);
}

/* Removes libheaptrail.so from LD_PRELOAD so that exec'ed programs run
 * untraced unless HEAPTRAIL_FOLLOW_EXEC asks otherwise. */
static void strip_ld_preload(void)
{
	const char *v = getenv("LD_PRELOAD");
	if (!v)
		return;
	char out[4096];
	size_t n = 0;
	const char *p = v;
	while (*p) {
		size_t len = strcspn(p, ": ");
		const char *base = p;
		for (size_t i = 0; i < len; i++)
			if (p[i] == '/')
				base = p + i + 1;
		size_t blen = (size_t)(p + len - base);
		int ours = blen >= 15 && !strncmp(base, "libheaptrail.so", 15);
		if (len && !ours && n + len + 2 < sizeof(out)) {
			if (n)
				out[n++] = ':';
			memcpy(out + n, p, len);
			n += len;
		}
		p += len;
		while (*p == ':' || *p == ' ')
			p++;
	}
	out[n] = 0;
	if (n)
		setenv("LD_PRELOAD", out, 1);
	else
		unsetenv("LD_PRELOAD");
}

/* Cheap, idempotent part of start-up: safe from the first malloc call,
 * which may come before our constructor (other libraries' constructors). */
void ht_init(void)
{
	if (atomic_exchange(&ht_initialized, 1))
		return;
	ht_tls.guard++;
	ht_options__load();
#if defined(__x86_64__)
	__builtin_cpu_init();
	ht_lzcnt = __builtin_cpu_supports("abm") || __builtin_cpu_supports("lzcnt");
#endif
	traced_pid = (pid_t)syscall(SYS_getpid);
	if (getauxval(AT_SECURE)) {
		disabled = 1; /* setuid/setgid: never trace, never write files */
	}
	paused_by_user = ht_opt.start_paused;
	if (getenv("HEAPTRAIL_TRACED_BY"))
		root_image = 0; /* an exec'ed descendant of a traced program */
	set_recording(1);
	ht_tls.guard--;
}

static void after_fork_child(void)
{
	struct ht_tls *t = &ht_tls;
	t->guard++;
	traced_pid = (pid_t)syscall(SYS_getpid);
	root_image = 0;
	/* The parent's buffers are the parent's to write. */
	t->state = 0;
	t->buf = NULL;
	t->rec = NULL;
	t->creator = 0;
	ht_buf__pool_reset_after_fork();
	if (!ht_opt.follow_fork)
		disabled = 1;
	set_recording(1);
	ht_writer__after_fork_child();
	t->guard--;
}

/* Fatal signals: write what we have, then die as the program would have. */
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTERM, SIGINT,
				    SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGXCPU, SIGXFSZ, SIGUSR1};

static void on_fatal(int sig)
{
	int e = errno;
	ht_writer__close(1);
	signal(sig, SIG_DFL);
	errno = e;
	raise(sig); /* delivered when the handler returns (or now, if unblocked) */
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
		struct sigaction old;
		if (sigaction(fatal_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
		    !(old.sa_flags & SA_SIGINFO)) {
			struct sigaction sa;
			memset(&sa, 0, sizeof(sa));
			sa.sa_handler = on_fatal;
			sa.sa_flags = SA_RESETHAND | SA_NODEFER;
			sigemptyset(&sa.sa_mask);
			sigaction(fatal_signals[i], &sa, NULL);
		}
	}
	if (ht_opt.toggle_signal) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_toggle;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR2, &sa, NULL);
	}
}

__attribute__((constructor(101))) static void ht_constructor(void)
{
	ht_init();
	struct ht_tls *t = &ht_tls;
	t->guard++;
	if (!exit_key_ok && pthread_key_create(&exit_key, thread_exit_dtor) == 0)
		exit_key_ok = 1;
	ht_hooks__resolve();
	if (!ht_opt.follow_exec) {
		strip_ld_preload();
	} else if (root_image) {
		char pid[24];
		snprintf(pid, sizeof(pid), "%d", (int)traced_pid);
		setenv("HEAPTRAIL_TRACED_BY", pid, 1);
	}
	if (!disabled) {
		pthread_atfork(NULL, NULL, after_fork_child);
		install_signals();
		if (ht_writer__start() < 0) {
			disabled = 1;
			set_recording(1);
		}
	}
	t->guard--;
	if (t->state == 1)
		ht_register_thread_exit(); /* the main thread recorded before */
}

__attribute__((destructor)) static void ht_destructor(void)
{
	ht_writer__close(0);
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
