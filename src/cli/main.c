/* heaptrail: one binary, one subcommand per job. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "cli/builtin.h"
#include "common/util.h"
#include "trace/format.h"

#ifndef HT_VERSION_STRING
#define HT_VERSION_STRING "dev"
#endif

struct cmd_struct {
	const char *name;              /* as typed */
	int (*fn)(int argc, char **argv); /* argv[0] is the name */
	const char *summary;           /* one line for 'heaptrail help' */
};

static const struct cmd_struct commands[] = {
	{"record", cmd_record, "run a command and record its heap calls to a trace"},
	{"dump", cmd_dump, "print a trace's events, one per line"},
	{"stats", cmd_stats, "summarize a trace: calls, bytes, peak, leaks, threads"},
	{"leaks", cmd_leaks, "blocks never freed, grouped by the stack that allocated them"},
	{"top", cmd_top, "biggest contributors: at the peak, most calls, most temporary, largest"},
	{"live", cmd_live, "the heap of a running (or finished) program by stack, on the terminal"},
	{"timeline", cmd_timeline, "the heap over time: live bytes, RSS, break, mmapped bytes, rate, marks (SVG/CSV)"},
	{"events", cmd_events, "mmap/munmap/mremap/brk/sbrk/shm calls and heap growth, mmapsnoop style"},
	{"diff", cmd_diff, "two traces (or two times of one) compared by stack: what grew"},
	{"heap", cmd_heap, "glibc's arenas, heaps, sbrk, mmap/trim thresholds, lock waits"},
	{"flamegraph", cmd_flamegraph, "flame graph of allocations by stack: interactive SVG or folded"},
	{"export", cmd_export, "the trace as pprof, Perfetto/Chrome JSON, massif or CSV"},
	{"report", cmd_report, "everything above in one self-contained HTML page"},
	{"maps", cmd_maps, "a process's memory by kind (heap, arenas, stacks, libraries...): pmap -X, explained"},
	{"mmapsnoop", cmd_mmapsnoop, "live: mmap/munmap/mremap calls as they happen, flags and files (eBPF)"},
	{"shmsnoop", cmd_shmsnoop, "live: System V shared memory calls (shmget/shmat/shmdt/shmctl) (eBPF)"},
	{"brkstack", cmd_brkstack, "live: the stacks that grow the program break (brk), counted (eBPF)"},
	{"faults", cmd_faults, "live: page faults by stack (what grows RSS), table and flame graph (eBPF)"},
	{"ffaults", cmd_ffaults, "live: page faults by the file backing the address (eBPF)"},
	{"attach", cmd_attach, "live: outstanding allocations of a running process by stack, or a trace of them (eBPF)"},
	{"convert", cmd_convert, "turn a trace into a workload for replay (also: trace2wl OUT.wl TRACE)"},
	{"replay", cmd_replay, "run a workload under any allocator and tunables, timed (also: trace_run)"},
	{"compare", cmd_compare, "replay a workload under several allocators/tunables: table and RSS chart"},
	{"compact", cmd_compact, "recompress a trace into large zstd chunks (record does it)"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: heaptrail <command> [options] [args]\n\n"
		   "Records every heap call a program makes, with little slowdown, and\n"
		   "answers questions about the trace.\n\nCommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nRun 'heaptrail <command> --help' for a command's options.\n\n"
		   "EXAMPLES\n"
		   "  heaptrail record -o app.ht -- ./app --its --args\n"
		   "  heaptrail stats app.ht\n"
		   "  heaptrail dump --kind malloc,free app.ht | head\n"
		   "  heaptrail convert app.wl app.ht && heaptrail compare -a glibc,jemalloc app.wl\n");
}

/* A name that is no command: the name meant, if it is clear
 * (ht_nearest_name); exit status 2. */
static int unknown_command(const char *name)
{
	const size_t ncmd = sizeof(commands) / sizeof(commands[0]);
	const char *names[ncmd];
	for (size_t i = 0; i < ncmd; i++)
		names[i] = commands[i].name;
	const char *best = ht_nearest_name(name, strlen(name), names, ncmd);
	if (best)
		ht_error("'%s' is not a heaptrail command; did you mean '%s'? ('heaptrail help' "
			 "lists them)", name, best);
	else
		ht_error("'%s' is not a heaptrail command; run 'heaptrail help' for the list",
			 name);
	return HT_EXIT_USAGE;
}

int main(int argc, char **argv)
{
	ht_progress_start(); /* (a command's progress counts from here) */
	/* the names of glibc's tools: trace2wl OUT.wl TRACE, trace_run WL */
	const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	if (!strcmp(base, "trace2wl"))
		return ht_stdout_done(cmd_convert(argc, argv));
	if (!strcmp(base, "trace_run"))
		return ht_stdout_done(cmd_replay(argc, argv));
	if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "-h")) {
		if (argc >= 3 && strcmp(argv[1], "help") == 0) {
			for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
				if (!strcmp(argv[2], commands[i].name)) {
					char *hargv[] = {argv[2], "--help", NULL};
					return ht_stdout_done(commands[i].fn(2, hargv));
				}
			}
			/* (it printed the general usage and exit 0, as if the
			 * name were right; help and version are said there) */
			if (strcmp(argv[2], "help") && strcmp(argv[2], "version"))
				return unknown_command(argv[2]);
		}
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? HT_EXIT_USAGE : ht_stdout_done(HT_EXIT_OK);
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("heaptrail %s (trace format %d)\n", HT_VERSION_STRING, HT_VERSION);
		return ht_stdout_done(0);
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return ht_stdout_done(commands[i].fn(argc - 1, argv + 1));
	return unknown_command(argv[1]); /* (a typo) */
}
