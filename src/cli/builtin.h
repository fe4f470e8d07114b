/* The subcommands: one cmd_<name> per command, each in its own file. */
#ifndef HEAPTRAIL_CLI_BUILTIN_H
#define HEAPTRAIL_CLI_BUILTIN_H

int cmd_record(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_compact(int argc, char **argv);
int cmd_leaks(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_live(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_timeline(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_heap(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_maps(int argc, char **argv);
int cmd_mmapsnoop(int argc, char **argv);
int cmd_shmsnoop(int argc, char **argv);
int cmd_brkstack(int argc, char **argv);
int cmd_faults(int argc, char **argv);
int cmd_ffaults(int argc, char **argv);
int cmd_attach(int argc, char **argv);

/* The line of the --help of the commands that name stack frames: where a
 * JIT's frames get their names (src/analyze/blocks.c, perf_map). */
#define HT_HELP_PERF_MAP                                                                  \
	"Frames of a JIT's code are named from its /tmp/perf-PID.map when it has one\n"     \
	"(HEAPTRAIL_PERF_MAP=FILE reads another map, HEAPTRAIL_PERF_MAP=0 none).\n"

#endif
