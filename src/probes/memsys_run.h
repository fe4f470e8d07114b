/* The run of memsys.bpf.c shared by mmapsnoop and shmsnoop: load it for a
 * set of system calls and the target, attach, hand every event to the
 * command's printer until the session stops, and frame the output (the
 * column header, or the JSON document around the "events" array; the
 * last line on stderr). */
#ifndef HEAPTRAIL_PROBES_MEMSYS_RUN_H
#define HEAPTRAIL_PROBES_MEMSYS_RUN_H

#include <linux/types.h>
#include <stdint.h>

#include "common/json.h"
#include "probes/memsys.h"
#include "probes/probe.h"

/* What a snoop command gives the runner. */
struct ht_memsys_spec {
	const char *cmd;    /* its name */
	uint64_t mask[2];   /* the system calls: bit nr set (HT_MEMSYS_SET) */
	const char *header; /* the column header line of the text output */
	/* prints one event (t_ns: its time since the start) as a text line, or
	 * as an object of the "events" array when j is not NULL (--json);
	 * returns 1 if shown, 0 if filtered out */
	int (*event)(void *ctx, const struct ht_memsys_event *ev, uint64_t t_ns,
		     struct ht_json *j);
	void *ctx;          /* its argument */
};

/* Runs the probes until the session stops and prints everything; the
 * command has checked its usage and ht_probe__check already.  Returns the
 * exit code: 0, HT_EXIT_NOBPF (the program could not be loaded),
 * HT_EXIT_DATA or HT_EXIT_USAGE (-c's command cannot run, no -p process). */
int ht_memsys__run(const struct ht_memsys_spec *spec, const struct ht_probe_opts *po);

#endif
