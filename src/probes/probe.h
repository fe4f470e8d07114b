/* What every eBPF probe command shares (attach, mmapsnoop, shmsnoop,
 * brkstack, faults, ffaults; docs/probes.md):
 *
 *  - the check "can BPF be used here", naming exactly what is missing (not
 *    root nor CAP_BPF+CAP_PERFMON, no BTF, bpf() disabled or filtered,
 *    kernel lockdown, tracefs not mounted, built without BPF support) and
 *    what to do; the exit code for that case is HT_EXIT_NOBPF;
 *  - the target: every process, -p PID, or -c COMMAND, which is started
 *    stopped (under ptrace, so that nothing it does is missed and its
 *    memory map can still be read when it exits), released once the
 *    probes are attached, and followed until it exits (with --json its
 *    standard output goes to standard error, out of the document);
 *  - the timing: duration, interval and count, ring-buffer polling, and a
 *    clean end on Ctrl-C (SIGINT/SIGTERM), the target left untouched;
 *  - the common options (-p, -c, -d, --json, --check) for the option tables.
 *
 * Typical flow of a command:
 *
 *	if ((rc = ht_probe__parse(argc, argv, opts, usage, &po, "cmd",
 *				  HT_PROBE_TICKS)) >= 0)
 *		return rc;                          (--check, bad usage, no BPF)
 *	ht_probe__start(&s, &po, "cmd");            (forks -c COMMAND, stopped)
 *	skel->rodata->target_tgid = ht_probe__tgid(s);
 *	... load and attach ...
 *	ht_probe__go(s);                            (releases the command)
 *	while ((st = ht_probe__step(s, rb)) != HT_PROBE_STOP)
 *		if (st == HT_PROBE_TICK) print the interval;
 *	ht_probe__end(s)                            (its exit code, reason said)
 */
#ifndef HEAPTRAIL_PROBES_PROBE_H
#define HEAPTRAIL_PROBES_PROBE_H

#include <stdint.h>
#include <sys/types.h>

#include "common/json.h"
#include "common/options.h"

struct ring_buffer; /* libbpf's */

/* Exit code of a probe command that cannot use BPF here (tests skip on it). */
#define HT_EXIT_NOBPF 3

/* The options every probe command has; defaults labelled by their flag. */
struct ht_probe_opts {
	const char *pid_text; /* -p, --pid as given (HT_PROBE_OPTIONS): ht_probe__usage checks
			       * it (0 is refused, not taken for "every process") and sets pid */
	uint64_t pid;         /* the process to trace (0: every process) */
	const char *command;  /* -c, --command (none): split at blanks, started, traced */
	uint64_t duration;    /* -d, --duration (0: until Ctrl-C or the target exits), ns */
	uint64_t interval;    /* positional INTERVAL (0: one report at the end), ns */
	uint64_t count;       /* positional COUNT (0: unlimited) reports */
	int json;             /* --json */
	int check;            /* --check: only say whether BPF can be used here */
	int stdout_data;      /* stdout carries data for programs (--folded): -c's command
			       * writes to stderr, as with --json */
};

/* The option-table rows of struct ht_probe_opts, to copy into a command's
 * table (it ends with HT_OPT_END after them). */
#define HT_PROBE_OPTIONS(po)                                                                   \
	{'p', "pid", HT_OPT_STRING, &(po)->pid_text, "PID",                                    \
	 "trace this process only (every process)"},                                           \
	{'c', "command", HT_OPT_STRING, &(po)->command, "CMD",                                 \
	 "start CMD (split at blanks, no shell), trace it, stop when it exits"},                       \
	{'d', "duration", HT_OPT_DURATION_POS, &(po)->duration, "TIME",                        \
	 "stop after TIME, e.g. 10s, 500ms (until Ctrl-C or the target exits)"},                \
	{0, "json", HT_OPT_FLAG, &(po)->json, NULL, "JSON output, for scripts"},               \
	{0, "check", HT_OPT_FLAG, &(po)->check, NULL,                                          \
	 "only check that BPF can be used here: exit 0, or 3 with what is missing"}

/* Which positional arguments a command takes. */
enum {
	HT_PROBE_NO_ARGS = 0, /* none (the snoop commands print events as they come) */
	HT_PROBE_TICKS = 1,   /* [INTERVAL [COUNT]]: a report every INTERVAL, COUNT times */
};

/* Checks -p/-c and the positional arguments (nargs of them in argv[0..]),
 * filling po->pid (from po->pid_text), po->interval and po->count.
 * Returns 0, or HT_EXIT_USAGE after a one-line error. */
int ht_probe__usage(struct ht_probe_opts *po, int nargs, char **argv, const char *cmd,
		    int positional);

/* Whether BPF can be used here: 0, or HT_EXIT_NOBPF after one line per
 * missing thing on stderr ("heaptrail: error: CMD: cannot use BPF: WHAT: WHAT TO
 * DO").  With --check and BPF usable: prints "BPF can be used here" on
 * stdout and returns -1, and the command exits 0 at once. */
int ht_probe__check(const char *cmd, const struct ht_probe_opts *po);

/* A probe command's start: parses argv with its option table (which holds
 * HT_PROBE_OPTIONS), checks the usage (ht_probe__usage; a number option
 * (HT_OPT_U64) too large to hold is refused) and whether BPF can be used
 * (ht_probe__check).  Returns -1 to go on, else the exit code to
 * return at once (0 after --check, 2 for bad usage, 3 without BPF). */
int ht_probe__parse(int argc, char **argv, const struct ht_option *opts, const char *usage,
		    struct ht_probe_opts *po, const char *cmd, int positional);

/* The reasons BPF cannot be used, one per line, or "" if it can; for
 * commands and tests that want the text.  Returns the number of reasons. */
int ht_probe__why_not(char *buf, size_t len);

struct ht_probe_session; /* opaque */

/* What ht_probe__step saw. */
enum ht_probe_step {
	HT_PROBE_IDLE = 0, /* nothing due: call again */
	HT_PROBE_TICK,     /* an interval has passed: report it */
	HT_PROBE_STOP,     /* duration reached, count reached, Ctrl-C, or the target ended */
};

/* Called when the traced process (-c, -p) is about to exit and its memory
 * map can still be read (for -c; for -p when it is seen gone). */
typedef void (*ht_probe_exit_fn)(void *ctx, pid_t pid);

/* Starts a session: installs the SIGINT/SIGTERM handlers, checks that -p
 * PID exists and is not a kernel thread (HT_EXIT_USAGE), and with -c starts the command stopped before its first
 * instruction.  Returns 0, or HT_EXIT_DATA / HT_EXIT_USAGE after an error,
 * 127 / 126 when -c's command is not found / cannot be run (as record). */
int ht_probe__start(struct ht_probe_session **out, const struct ht_probe_opts *po,
		    const char *cmd);
/* The process to trace: -p PID, the started command's PID, or 0 for all. */
pid_t ht_probe__tgid(const struct ht_probe_session *s);
/* Calls fn(ctx, pid) before the traced process exits (see ht_probe_exit_fn). */
void ht_probe__on_exit(struct ht_probe_session *s, ht_probe_exit_fn fn, void *ctx);
/* Releases the started command (call once the probes are attached); also
 * starts the clocks of duration and interval. */
int ht_probe__go(struct ht_probe_session *s);
/* Waits for events (ring_buffer__poll on rb, if not NULL, which calls the
 * ring buffer's callbacks), at most until the next interval, the end of
 * the duration, or a signal.  When the target has ended, the ring buffer
 * is drained before HT_PROBE_STOP is returned. */
enum ht_probe_step ht_probe__step(struct ht_probe_session *s, struct ring_buffer *rb);
/* Why the session stopped: "interrupted", "10 s passed", "PID 12 exited",
 * "the command exited with status 0"..., NULL while it runs. */
const char *ht_probe__reason(const struct ht_probe_session *s);
/* When ht_probe__go was called, CLOCK_MONOTONIC ns (the clock of
 * bpf_ktime_get_ns, so event times are ts - t0). */
uint64_t ht_probe__t0(const struct ht_probe_session *s);
/* Nanoseconds since ht_probe__go (CLOCK_MONOTONIC), up to the stop once
 * the session has stopped (not counting the time the probes take to be
 * removed, a second or two for attach's). */
uint64_t ht_probe__elapsed(const struct ht_probe_session *s);
/* CLOCK_MONOTONIC now, or when the session stopped (the end of tracing:
 * the time of the reports and of the trace's end made after it). */
uint64_t ht_probe__now(const struct ht_probe_session *s);
/* Whether the last interval still has to be reported when the session
 * stopped (it was not stopped by the count of reports). */
int ht_probe__final_due(const struct ht_probe_session *s);
/* Ends the session: kills the started command if it still runs (stopped by
 * Ctrl-C, -d or COUNT), restores the signal handlers, frees s.  Returns the command's
 * exit status (128+signal if killed by one), or 0. */
int ht_probe__end(struct ht_probe_session *s);

/* Routes libbpf's messages: warnings to stderr prefixed "heaptrail: ",
 * its debug messages only if verbose > 0, nothing at all if verbose < 0
 * (while trying what may fail, with a fallback); the environment variable
 * HEAPTRAIL_LIBBPF_DEBUG=1 shows everything. */
void ht_probe__libbpf_messages(int verbose);

/* Opens a software perf event (PERF_COUNT_SW_*) on every online CPU, for
 * every process, each sample_period events, with sample_type's fields;
 * fds[] gets one per CPU (up to max).  Returns the count, or -1 after an
 * error naming the event. */
int ht_probe__perf_sw_open(const char *cmd, int event, uint64_t sample_period,
			   uint64_t sample_type, int *fds, int max);

struct bpf_program;
struct bpf_link;
/* Attaches prog to each of the n perf event fds; NULL after an error
 * (everything attached so far detached).  Free with ht_probe__detach. */
struct bpf_link **ht_probe__attach_perf(const char *cmd, struct bpf_program *prog,
					const int *fds, int n);
/* Detaches and closes what ht_probe__attach_perf and ht_probe__perf_sw_open made. */
void ht_probe__detach(struct bpf_link **links, int *fds, int n);

/* The name of errno value e ("EINVAL"), "E?" if unknown. */
const char *ht_probe__errname(int e);

/* Reads the NUL-terminated process name of a 16-byte comm field. */
const char *ht_probe__comm(char *buf, const char *comm);

/* JSON: the fields every probe command's document starts with: the
 * command name, the target, and once stopped the time traced and why. */
void ht_probe__json_head(struct ht_json *j, const struct ht_probe_session *s, const char *cmd);

#endif
