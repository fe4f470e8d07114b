/* What every eBPF probe command shares (probe.h). */
#define _GNU_SOURCE
#include "probe.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef HT_HAVE_BPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#endif

#include "common/util.h"

#ifndef HT_BPF_MISSING
#define HT_BPF_MISSING "clang, bpftool, libbpf-dev"
#endif

#define POLL_MAX_MS 100 /* the longest wait without checking signals and the target */

int ht_probe__usage(struct ht_probe_opts *po, int nargs, char **argv, const char *cmd,
		    int positional)
{
	if (po->pid_text) {
		/* (a string option: as a number, -p 0 read as "no -p" and traced
		 * every process) */
		char *end;
		errno = 0;
		unsigned long long v = strtoull(po->pid_text, &end, 10);
		if (errno || end == po->pid_text || *end || po->pid_text[0] == '-' || !v ||
		    v > 0x7fffffff) {
			ht_error("%s: -p %s is not a process id (leave -p out to trace every process)",
				 cmd, po->pid_text);
			return HT_EXIT_USAGE;
		}
		po->pid = v;
	}
	if ((po->pid || po->pid_text) && po->command) {
		ht_error("%s: -p and -c exclude each other: trace a running process or start one",
			 cmd);
		return HT_EXIT_USAGE;
	}
	if (po->pid > 0x7fffffff) {
		ht_error("%s: -p %llu is not a process id", cmd, (unsigned long long)po->pid);
		return HT_EXIT_USAGE;
	}
	if (po->command && !po->command[strspn(po->command, " \t")]) {
		ht_error("%s: -c needs a command, e.g. -c './app --its-args'", cmd);
		return HT_EXIT_USAGE;
	}
	int max = positional == HT_PROBE_TICKS ? 2 : 0;
	/* `faults -- ./app` (record's way): the arguments are a command */
	const char *cmd_hint = nargs && !(argv[0][0] >= '0' && argv[0][0] <= '9')
				       ? "; to run a command, use -c 'CMD ARGS'"
				       : "";
	if (nargs > max) {
		if (max)
			ht_error("%s: too many arguments ('%s'): the usage is [INTERVAL [COUNT]]%s",
				 cmd, argv[max], cmd_hint);
		else
			ht_error("%s: unexpected argument '%s': it prints events as they come; "
				 "use -d TIME to stop after a while%s",
				 cmd, argv[0], cmd_hint);
		return HT_EXIT_USAGE;
	}
	if (nargs >= 1 && (ht_parse_duration(argv[0], &po->interval) || !po->interval)) {
		ht_error("%s: INTERVAL '%s' is not a duration (e.g. 1, 2s, 500ms)%s", cmd, argv[0],
			 cmd_hint);
		return HT_EXIT_USAGE;
	}
	if (nargs >= 2) {
		char *end;
		errno = 0;
		unsigned long long c = strtoull(argv[1], &end, 10);
		if (errno || end == argv[1] || *end || !c || argv[1][0] == '-') {
			ht_error("%s: COUNT '%s' is not a positive number of reports", cmd, argv[1]);
			return HT_EXIT_USAGE;
		}
		po->count = c;
	}
	return 0;
}

/* ---- can BPF be used here ---- */

static void reason(char *buf, size_t len, int *n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void reason(char *buf, size_t len, int *n, const char *fmt, ...)
{
	size_t used = strlen(buf);
	if (used + 1 >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
	used = strlen(buf);
	if (used + 1 < len) {
		buf[used] = '\n';
		buf[used + 1] = 0;
	}
	(*n)++;
}

#ifdef HT_HAVE_BPF
/* Whether the effective capability set has cap. */
static int has_cap(int cap)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d))
		return 0;
	return (d[cap / 32].effective >> (cap % 32)) & 1;
}
#endif

/* The first line of a small file in buf, or "" if it cannot be read. */
static const char *first_line(const char *path, char *buf, size_t len)
{
	buf[0] = 0;
	FILE *f = fopen(path, "re");
	if (!f)
		return buf;
	if (!fgets(buf, (int)len, f))
		buf[0] = 0;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return buf;
}

int ht_probe__why_not(char *buf, size_t len)
{
	int n = 0;
	buf[0] = 0;
#ifndef HT_HAVE_BPF
	if (HT_BPF_MISSING[0])
		reason(buf, len, &n,
		       "this heaptrail was built without BPF support (missing at build time: %s): "
		       "install them (scripts/deps.sh build, or apt-get install clang bpftool "
		       "libbpf-dev) and rebuild",
		       HT_BPF_MISSING);
	else
		reason(buf, len, &n,
		       "this heaptrail was built without BPF support (configured with "
		       "-DHEAPTRAIL_BPF=OFF): install clang, bpftool and libbpf-dev (scripts/deps.sh "
		       "build) and rebuild with -DHEAPTRAIL_BPF=AUTO or ON");
	return n;
#else
	/* CAP_BPF 39, CAP_PERFMON 38 (kernels >= 5.8), else CAP_SYS_ADMIN */
	int caps = has_cap(21) || (has_cap(39) && has_cap(38));
	if (!caps)
		reason(buf, len, &n,
		       "not root, and without CAP_BPF and CAP_PERFMON: run it as root (sudo "
		       "heaptrail ...) or give it those capabilities (setcap "
		       "cap_bpf,cap_perfmon,cap_sys_resource+ep heaptrail)");
	if (access("/sys/kernel/btf/vmlinux", R_OK))
		reason(buf, len, &n,
		       "the kernel has no BTF type information (/sys/kernel/btf/vmlinux: %s): the "
		       "probes need a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian's are)",
		       strerror(errno));
	char lock[256];
	first_line("/sys/kernel/security/lockdown", lock, sizeof(lock));
	if (strstr(lock, "[confidentiality]"))
		reason(buf, len, &n,
		       "the kernel is locked down in confidentiality mode (/sys/kernel/security/"
		       "lockdown), which forbids BPF reading kernel memory: boot with lockdown=integrity "
		       "or without lockdown (Secure Boot may impose it)");
	if (caps) {
		/* the syscall itself: a tiny array map */
		int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "ht_check", 4, 4, 1, NULL);
		if (fd >= 0) {
			close(fd);
		} else {
			int e = -fd;
			int seccomp = 0;
			FILE *f = fopen("/proc/self/status", "re");
			char line[256];
			while (f && fgets(line, sizeof(line), f))
				if (!strncmp(line, "Seccomp:", 8))
					seccomp = atoi(line + 8);
			if (f)
				fclose(f);
			if (e == ENOSYS)
				reason(buf, len, &n,
				       "the kernel has no bpf() system call (CONFIG_BPF_SYSCALL is not "
				       "set): use a kernel with BPF");
			else if (seccomp == 2)
				reason(buf, len, &n,
				       "bpf() is refused (%s) and a seccomp filter is active: in a "
				       "container, run it privileged (docker run --privileged, or "
				       "--cap-add BPF,PERFMON with a seccomp profile allowing bpf)",
				       strerror(e));
			else
				reason(buf, len, &n,
				       "bpf() is refused (%s): check kernel.unprivileged_bpf_disabled, "
				       "lockdown and the LSMs (SELinux, AppArmor) of this machine",
				       strerror(e));
		}
	}
	return n;
#endif
}

int ht_probe__check(const char *cmd, const struct ht_probe_opts *po)
{
	char why[4096];
	int n = ht_probe__why_not(why, sizeof(why));
	if (!n) {
		if (po && po->check) {
			printf("heaptrail %s: BPF can be used here\n", cmd);
			return -1;
		}
		return 0;
	}
	for (char *line = why; *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		ht_error("%s: cannot use BPF: %s", cmd, line);
		line = nl ? nl + 1 : line + strlen(line);
	}
	return HT_EXIT_NOBPF;
}

int ht_probe__parse(int argc, char **argv, const struct ht_option *opts, const char *usage,
		    struct ht_probe_opts *po, const char *cmd, int positional)
{
	int nargs = ht_parse_options(argc, argv, opts, usage, 0);
	int rc = ht_probe__usage(po, nargs, argv, cmd, positional);
	if (rc)
		return rc;
	rc = ht_probe__check(cmd, po);
	return rc < 0 ? HT_EXIT_OK : rc ? rc : -1;
}

/* ---- the session ---- */

struct ht_probe_session {
	const struct ht_probe_opts *po; /* the options */
	const char *cmd;                /* command name, for messages */
	pid_t tgid;                     /* the process traced, 0 = all */
	pid_t child;                    /* -c: the started command, 0 if none */
	int child_done;                 /* it has exited (status valid) */
	int status;                     /* its exit status (128+signal) */
	ht_probe_exit_fn on_exit;       /* see ht_probe__on_exit */
	void *on_exit_ctx;              /* its argument */
	uint64_t t0;                    /* ht_probe__go, CLOCK_MONOTONIC ns */
	uint64_t next_tick;             /* the next interval's end, 0 if none */
	uint64_t deadline;              /* the end of the duration, 0 if none */
	uint64_t ticks;                 /* intervals reported */
	int stopping;                   /* a reason is set: drain, then stop */
	uint64_t t_stop;                /* when the reason was set, CLOCK_MONOTONIC ns */
	char reason[160];               /* why it stopped */
	struct sigaction old_int;       /* restored by ht_probe__end */
	struct sigaction old_term;      /* same */
	struct sigaction old_chld;      /* same */
	struct sigaction old_pipe;      /* same */
};

static volatile sig_atomic_t probe_signal; /* SIGINT, SIGTERM or SIGPIPE received */

/* The state letter of /proc/PID/stat or /proc/PID/task/TID/stat (path), 0
 * if it cannot be read; *flags gets its flags field (PF_*). */
static char proc_state(const char *path, unsigned long *flags)
{
	char buf[512];
	first_line(path, buf, sizeof(buf));
	const char *rp = strrchr(buf, ')');
	if (!buf[0] || !rp || !rp[1] || !rp[2])
		return 0;
	if (flags) {
		/* state ppid pgrp session tty_nr tpgid flags */
		*flags = 0;
		if (sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %lu", flags) != 1)
			*flags = 0;
	}
	return rp[2];
}

static void on_signal(int sig)
{
	if (sig != SIGCHLD)
		probe_signal = sig;
}

/* Splits a command line at blanks (no shell: quote nothing). */
static char **split_command(const char *cmdline)
{
	size_t cap = 8, n = 0;
	char **v = ht_xrealloc(NULL, cap * sizeof(*v));
	char *copy = strdup(cmdline), *save = NULL;
	if (!copy)
		return NULL;
	for (char *tok = strtok_r(copy, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		if (n + 2 > cap) {
			cap *= 2;
			v = ht_xrealloc(v, cap * sizeof(*v));
		}
		v[n++] = tok;
	}
	v[n] = NULL;
	return v;
}

/* Starts cmdline stopped at its first instruction (ptrace, exec stop). */
static int start_child(struct ht_probe_session *s, const char *cmdline)
{
	char **argv = split_command(cmdline);
	if (!argv)
		return HT_EXIT_DATA;
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC)) {
		ht_error("%s: pipe: %s", s->cmd, strerror(errno));
		return HT_EXIT_DATA;
	}
	pid_t c = fork();
	if (c < 0) {
		ht_error("%s: fork: %s", s->cmd, strerror(errno));
		return HT_EXIT_DATA;
	}
	if (c == 0) {
		close(pfd[0]);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		if (s->po->json || s->po->stdout_data)
			dup2(2, 1); /* its output must not break the document */
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0)
			execvp(argv[0], argv);
		/* tell the parent why (the pipe closes on a successful exec) */
		int e = errno;
		if (write(pfd[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(pfd[1]);
	int e = 0;
	ssize_t got = read(pfd[0], &e, sizeof(e));
	close(pfd[0]);
	int st;
	if (waitpid(c, &st, 0) != c || got > 0 || !WIFSTOPPED(st)) {
		if (got <= 0 && !WIFSTOPPED(st))
			e = ECHILD;
		ht_error("%s: cannot run '%s': %s", s->cmd, argv[0],
			 e == ECHILD ? "it ended before starting" : strerror(e));
		if (WIFSTOPPED(st))
			kill(c, SIGKILL);
		waitpid(c, &st, 0);
		free(argv[0]);
		free(argv);
		/* as record, env and the shells: 127 not found, 126 not runnable */
		return e == ENOENT ? 127 : e == ECHILD ? HT_EXIT_USAGE : 126;
	}
	free(argv[0]);
	free(argv);
	/* stopped after its exec: stop again before it exits (its memory map
	 * is still there), report execs as events, die with us */
	if (ptrace(PTRACE_SETOPTIONS, c, NULL,
		   (void *)(long)(PTRACE_O_TRACEEXIT | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL))) {
		ht_error("%s: ptrace: %s", s->cmd, strerror(errno));
		kill(c, SIGKILL);
		waitpid(c, &st, 0);
		return HT_EXIT_DATA;
	}
	s->child = c;
	s->tgid = c;
	return 0;
}

int ht_probe__start(struct ht_probe_session **out, const struct ht_probe_opts *po,
		    const char *cmd)
{
	*out = NULL;
	struct ht_probe_session *s = calloc(1, sizeof(*s));
	if (!s) {
		ht_error("out of memory");
		return HT_EXIT_DATA;
	}
	s->po = po;
	s->cmd = cmd;
	if (po->pid) {
		if (kill((pid_t)po->pid, 0) && errno == ESRCH) {
			ht_error("%s: no process %llu (-p)", cmd, (unsigned long long)po->pid);
			free(s);
			return HT_EXIT_USAGE;
		}
		s->tgid = (pid_t)po->pid;
		char stat[64];
		unsigned long flags = 0;
		snprintf(stat, sizeof(stat), "/proc/%d/stat", (int)s->tgid);
		if (proc_state(stat, &flags) && (flags & 0x00200000)) { /* PF_KTHREAD */
			ht_error("%s: %llu is a kernel thread: it has no user memory and makes no "
				 "page faults or memory calls to trace",
				 cmd, (unsigned long long)po->pid);
			free(s);
			return HT_EXIT_USAGE;
		}
		/* a thread's id: its process (the probes filter on processes) */
		char path[64], line[256];
		snprintf(path, sizeof(path), "/proc/%d/status", (int)s->tgid);
		FILE *f = fopen(path, "re");
		while (f && fgets(line, sizeof(line), f)) {
			int tgid;
			if (sscanf(line, "Tgid: %d", &tgid) == 1) {
				if (tgid > 0 && tgid != s->tgid) {
					fprintf(stderr,
						"heaptrail %s: %d is a thread of process %d: tracing "
						"the process\n",
						cmd, (int)s->tgid, tgid);
					s->tgid = tgid;
				}
				break;
			}
		}
		if (f)
			fclose(f);
	}
	probe_signal = 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	/* SA_RESTART: a write to a blocked stdout (a pipe to a slow reader)
	 * is taken up again, not failed with EINTR (the output was cut);
	 * poll, epoll_wait and usleep are never restarted, so the loop still
	 * sees the signal at once */
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &s->old_int);
	sigaction(SIGTERM, &sa, &s->old_term);
	sigaction(SIGCHLD, &sa, &s->old_chld);
	/* stdout's reader gone (`attach -o t.ht 1 | head`): a stop as an
	 * interrupt is, the -o trace made; SIGPIPE killed attach, which left
	 * only its temporary (probe Z) */
	sigaction(SIGPIPE, &sa, &s->old_pipe);
	if (po->command) {
		int rc = start_child(s, po->command);
		if (rc) {
			ht_probe__end(s);
			return rc;
		}
	}
	*out = s;
	return 0;
}

pid_t ht_probe__tgid(const struct ht_probe_session *s)
{
	return s->tgid;
}

void ht_probe__on_exit(struct ht_probe_session *s, ht_probe_exit_fn fn, void *ctx)
{
	s->on_exit = fn;
	s->on_exit_ctx = ctx;
}

int ht_probe__go(struct ht_probe_session *s)
{
	s->t0 = ht_clock_ns();
	if (s->po->interval)
		s->next_tick = s->t0 + s->po->interval;
	if (s->po->duration)
		s->deadline = s->t0 + s->po->duration;
	if (s->child && ptrace(PTRACE_CONT, s->child, NULL, NULL)) {
		ht_error("%s: cannot start the command: ptrace: %s", s->cmd, strerror(errno));
		return HT_EXIT_DATA;
	}
	return 0;
}

uint64_t ht_probe__t0(const struct ht_probe_session *s)
{
	return s->t0;
}

uint64_t ht_probe__elapsed(const struct ht_probe_session *s)
{
	return s->t0 ? ht_probe__now(s) - s->t0 : 0;
}

uint64_t ht_probe__now(const struct ht_probe_session *s)
{
	return s->stopping ? s->t_stop : ht_clock_ns();
}

static void stop(struct ht_probe_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void stop(struct ht_probe_session *s, const char *fmt, ...)
{
	if (s->stopping)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->reason, sizeof(s->reason), fmt, ap);
	va_end(ap);
	s->stopping = 1;
	s->t_stop = ht_clock_ns();
}

/* The started command's ptrace stops and its end. */
static void watch_child(struct ht_probe_session *s)
{
	int st;
	pid_t w;
	while (!s->child_done && (w = waitpid(s->child, &st, WNOHANG | __WALL)) == s->child) {
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			s->child_done = 1;
			s->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			if (WIFEXITED(st))
				stop(s, "the command exited with status %d", WEXITSTATUS(st));
			else
				stop(s, "the command was killed by signal %d (%s)", WTERMSIG(st),
				     strsignal(WTERMSIG(st)));
			break;
		}
		if (!WIFSTOPPED(st))
			continue;
		int sig = WSTOPSIG(st), event = st >> 16;
		if (sig == SIGTRAP && event == PTRACE_EVENT_EXIT) {
			if (s->on_exit)
				s->on_exit(s->on_exit_ctx, s->child);
			sig = 0;
		} else if (sig == SIGTRAP && event) {
			sig = 0; /* an exec */
		} else if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
			/* a stop signal is reported twice: when it is delivered (pass it
			 * on), then as the stop itself, with no siginfo (resume: a traced
			 * command does not stay stopped) */
			siginfo_t si;
			if (ptrace(PTRACE_GETSIGINFO, s->child, NULL, &si))
				sig = 0;
		}
		ptrace(PTRACE_CONT, s->child, NULL, (void *)(long)sig);
	}
}

/* Whether -p's process is gone (or a zombie): when all its threads are.
 * Not its main thread's state: a main thread that called pthread_exit is a
 * zombie while the others run on. */
static int pid_gone(pid_t pid)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return 1;
	int gone = 1;
	struct dirent *de;
	while (gone && (de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/stat", (int)pid, de->d_name);
		char st = proc_state(path, NULL);
		gone = !st || st == 'Z' || st == 'X';
	}
	closedir(d);
	return gone;
}

static void drain(struct ring_buffer *rb)
{
#ifdef HT_HAVE_BPF
	if (rb)
		ring_buffer__consume(rb);
#else
	(void)rb;
#endif
}

enum ht_probe_step ht_probe__step(struct ht_probe_session *s, struct ring_buffer *rb)
{
	if (s->stopping)
		return HT_PROBE_STOP;
	if (probe_signal) {
		stop(s, "interrupted (%s)", strsignal(probe_signal));
		drain(rb);
		return HT_PROBE_STOP;
	}
	uint64_t t = ht_clock_ns();
	if (s->deadline && t >= s->deadline) {
		char b[32];
		stop(s, "%s passed (-d)", ht_fmt_ns(b, s->po->duration));
		drain(rb);
		return HT_PROBE_STOP;
	}
	if (s->next_tick && t >= s->next_tick) {
		drain(rb);
		s->ticks++;
		s->next_tick += s->po->interval;
		if (s->next_tick <= t)
			s->next_tick = t + s->po->interval;
		if (s->po->count && s->ticks >= s->po->count)
			stop(s, "%llu reports made", (unsigned long long)s->ticks);
		return HT_PROBE_TICK;
	}
	uint64_t until = t + POLL_MAX_MS * 1000000ull;
	if (s->deadline && s->deadline < until)
		until = s->deadline;
	if (s->next_tick && s->next_tick < until)
		until = s->next_tick;
	int ms = (int)((until - t + 999999) / 1000000);
#ifdef HT_HAVE_BPF
	if (rb) {
		/* then read what is there: a program that submits without
		 * waking the reader (attach's) does not end the poll, and its
		 * events were read only at the next interval or the end, after
		 * the process may have gone (its map no longer readable) */
		ring_buffer__poll(rb, ms);
		ring_buffer__consume(rb);
	} else {
		usleep((useconds_t)ms * 1000);
	}
#else
	usleep((useconds_t)ms * 1000);
#endif
	if (s->child)
		watch_child(s);
	else if (s->tgid && pid_gone(s->tgid))
		stop(s, "PID %d exited", (int)s->tgid);
	if (s->stopping) {
		drain(rb);
		return HT_PROBE_STOP;
	}
	return HT_PROBE_IDLE;
}

const char *ht_probe__reason(const struct ht_probe_session *s)
{
	return s->stopping ? s->reason : NULL;
}

int ht_probe__final_due(const struct ht_probe_session *s)
{
	return !(s->po->count && s->ticks >= s->po->count);
}

int ht_probe__end(struct ht_probe_session *s)
{
	if (!s)
		return 0;
	if (s->child && !s->child_done) {
		/* interrupted: the command ends with us (as with a Ctrl-C at a
		 * terminal, which it got too), and says so (after -d or COUNT
		 * reports, it ended with no word, exit 137) */
		kill(s->child, SIGKILL);
		fprintf(stderr,
			"heaptrail %s: ended the command (pid %d) with SIGKILL: tracing stopped "
			"before it exited, and a command started with -c ends with the tracer\n",
			s->cmd, (int)s->child);
		int st;
		while (waitpid(s->child, &st, __WALL) == s->child) {
			if (WIFEXITED(st) || WIFSIGNALED(st)) {
				s->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
				break;
			}
			if (WIFSTOPPED(st)) /* its exit stop */
				ptrace(PTRACE_CONT, s->child, NULL, NULL);
		}
	}
	sigaction(SIGINT, &s->old_int, NULL);
	sigaction(SIGTERM, &s->old_term, NULL);
	sigaction(SIGCHLD, &s->old_chld, NULL);
	sigaction(SIGPIPE, &s->old_pipe, NULL);
	int status = s->status;
	free(s);
	return status;
}

#ifdef HT_HAVE_BPF
static int libbpf_verbose; /* ht_probe__libbpf_messages */

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (libbpf_verbose < 0 || (level == LIBBPF_DEBUG && !libbpf_verbose))
		return 0;
	fprintf(stderr, "heaptrail: ");
	return vfprintf(stderr, fmt, ap);
}
#endif

void ht_probe__libbpf_messages(int verbose)
{
#ifdef HT_HAVE_BPF
	/* HEAPTRAIL_LIBBPF_DEBUG=1: everything libbpf says, always */
	const char *debug = getenv("HEAPTRAIL_LIBBPF_DEBUG");
	libbpf_verbose = debug && *debug && *debug != '0' ? 1 : verbose;
	libbpf_set_print(libbpf_print);
#else
	(void)verbose;
#endif
}

int ht_probe__perf_sw_open(const char *cmd, int event, uint64_t sample_period,
			   uint64_t sample_type, int *fds, int max)
{
	int n = 0;
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	for (long cpu = 0; cpu < ncpu && n < max; cpu++) {
		char path[96], buf[8];
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%ld/online", cpu);
		if (cpu && first_line(path, buf, sizeof(buf))[0] == '0')
			continue; /* offline (cpu0 has no such file) */
		struct perf_event_attr a;
		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.type = PERF_TYPE_SOFTWARE;
		a.config = (uint64_t)event;
		a.sample_period = sample_period;
		a.sample_type = sample_type;
		int fd = (int)syscall(SYS_perf_event_open, &a, -1, (int)cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			if (errno == ENODEV)
				continue;
			ht_error("%s: perf_event_open (software event %d on CPU %ld): %s", cmd, event,
				 cpu, strerror(errno));
			for (int i = 0; i < n; i++)
				close(fds[i]);
			return -1;
		}
		fds[n++] = fd;
	}
	return n;
}

struct bpf_link **ht_probe__attach_perf(const char *cmd, struct bpf_program *prog,
					const int *fds, int n)
{
#ifdef HT_HAVE_BPF
	struct bpf_link **links = calloc((size_t)(n ? n : 1), sizeof(*links));
	if (!links)
		return NULL;
	for (int i = 0; i < n; i++) {
		links[i] = bpf_program__attach_perf_event(prog, fds[i]);
		if (!links[i]) {
			ht_error("%s: cannot attach to the perf event: %s", cmd, strerror(errno));
			ht_probe__detach(links, NULL, i);
			return NULL;
		}
	}
	return links;
#else
	(void)prog;
	(void)fds;
	(void)n;
	ht_error("%s: built without BPF support", cmd);
	return NULL;
#endif
}

void ht_probe__detach(struct bpf_link **links, int *fds, int n)
{
	for (int i = 0; i < n; i++) {
#ifdef HT_HAVE_BPF
		if (links && links[i])
			bpf_link__destroy(links[i]);
#endif
		if (fds && fds[i] >= 0)
			close(fds[i]);
	}
	free(links);
}

const char *ht_probe__errname(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "E?";
}

const char *ht_probe__comm(char *buf, const char *comm)
{
	memcpy(buf, comm, 16);
	buf[16] = 0;
	return buf;
}

void ht_probe__json_head(struct ht_json *j, const struct ht_probe_session *s, const char *cmd)
{
	ht_json__str(j, "command", cmd);
	if (s->tgid)
		ht_json__u64(j, "pid", (uint64_t)s->tgid);
	else
		ht_json__null(j, "pid");
	if (s->po->command)
		ht_json__str(j, "traced_command", s->po->command);
	if (s->stopping) {
		ht_json__u64(j, "elapsed_ns", ht_probe__elapsed(s));
		ht_json__str(j, "stopped", s->reason);
	}
}
