/* The run of memsys.bpf.c shared by mmapsnoop and shmsnoop: load it for a
 * set of system calls and the target, attach, and hand every event to a
 * callback until the session stops. */
#ifndef HEAPTRAIL_PROBES_MEMSYS_RUN_H
#define HEAPTRAIL_PROBES_MEMSYS_RUN_H

#include <linux/types.h>
#include <stdint.h>

#include "probes/memsys.h"
#include "probes/probe.h"

/* Called for each event; t_ns is its time since the start. */
typedef void (*ht_memsys_fn)(void *ctx, const struct ht_memsys_event *ev, uint64_t t_ns);

/* What a run ends with. */
struct ht_memsys_result {
	uint64_t dropped;   /* events the ring buffer had no room for */
	char reason[160];   /* why it stopped */
	uint64_t elapsed;   /* ns traced */
};

/* Runs the probes for the system calls whose bit is set in mask (bit nr,
 * HT_NR_*, set with HT_MEMSYS_SET) until the session stops; before the first event calls
 * started(ctx, s) (for the JSON head, the column header).  Returns 0 or
 * an exit code (HT_EXIT_NOBPF, HT_EXIT_DATA...) after an error; *status
 * gets -c's exit status. */
int ht_memsys__run(const char *cmd, const struct ht_probe_opts *po, const uint64_t mask[2],
		   void (*started)(void *ctx, struct ht_probe_session *s), ht_memsys_fn fn,
		   void *ctx, struct ht_memsys_result *res, int *status);

#endif
