/* heaptrail brkstack: the user stacks that move the program break (brk
 * calls), counted, with the growth each asked for, symbolized like the
 * offline analyzers (docs/brkstack.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/types.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/builtin.h"
#include "common/options.h"
#include "common/util.h"
#include "probes/probe.h"
#include "probes/stackcount.h"

#ifdef HT_HAVE_BPF
#include <bpf/libbpf.h>

#include "brkstack.skel.h"
#endif

/* One configuration per run; each default is labelled by its flag. */
struct brkstack_config {
	struct ht_probe_opts po;     /* -p, -c, -d, --json, --check, [INTERVAL [COUNT]] */
	struct ht_stackcount_out o;  /* -n, -o, --folded */
};

static const char usage_text[] =
	"usage: heaptrail brkstack [options] [INTERVAL [COUNT]]\n"
	"\n"
	"The user stacks that call brk (grow or shrink the program break, the\n"
	"heap of glibc's main arena), counted, with the growth each call asked\n"
	"for, system-wide or of one process; a report every INTERVAL (COUNT\n"
	"times), else one at the end (Ctrl-C, -d TIME, or the end of the process\n"
	"traced). Stacks are walked by frame pointers: frames of code built\n"
	"without them (glibc's malloc) may be missing. Needs root (or CAP_BPF and\n"
	"CAP_PERFMON) and a kernel with BTF.\n"
	"\fEXAMPLES\n"
	"  heaptrail brkstack -c './app --its-args'\n"
	"  heaptrail brkstack -p 1234 5 3            # three 5-second reports\n"
	"  heaptrail brkstack --folded -d 10s > brk.folded\n"
	"  heaptrail brkstack -o brk.svg -p 1234 -d 30s\n";

int cmd_brkstack(int argc, char **argv)
{
	struct brkstack_config cfg = {
		.o = {.top = 10, .what = "brk calls", .unit = "calls",
		      .title = "brk calls by stack (heaptrail brkstack)", .show_bytes = 1},
	};
	int rc;
	const struct ht_option opts[] = {
		HT_PROBE_OPTIONS(&cfg.po),
		HT_STACKCOUNT_OPTIONS(&cfg.o),
		{0},
	};
	if ((rc = ht_probe__parse(argc, argv, opts, usage_text, &cfg.po, "brkstack", HT_PROBE_TICKS)) >= 0)
		return rc;
#ifdef HT_HAVE_BPF
	struct ht_probe_session *s = NULL;
	struct brkstack_bpf *skel = NULL;
	struct ht_stackcount *sc = ht_stackcount__new(NULL, 0);
	int err;
	rc = HT_EXIT_DATA;
	ht_probe__libbpf_messages(0);
	if (!sc)
		goto cleanup;
	cfg.po.stdout_data = cfg.o.folded && !cfg.o.out; /* (the folded stacks on stdout) */
	if ((rc = ht_probe__start(&s, &cfg.po, "brkstack")))
		goto cleanup;
	rc = HT_EXIT_NOBPF;
	if (!(skel = brkstack_bpf__open())) {
		ht_error("brkstack: cannot open the BPF program: %s", strerror(errno));
		goto cleanup;
	}
	skel->rodata->target_tgid = (__u32)ht_probe__tgid(s);
	skel->rodata->self_tgid = (__u32)getpid();
	if ((err = brkstack_bpf__load(skel)) || (err = brkstack_bpf__attach(skel))) {
		ht_error("brkstack: cannot load or attach the BPF program: %s (run 'heaptrail "
			 "brkstack --check')", strerror(-err));
		goto cleanup;
	}
	struct ht_stackcount_maps maps = {
		.notes_fd = bpf_map__fd(skel->maps.notes),
		.counts_fd = bpf_map__fd(skel->maps.counts),
		.stacks_fd = bpf_map__fd(skel->maps.stacks),
		.dropped = &skel->bss->dropped,
	};
	rc = ht_stackcount__run(sc, s, &cfg.po, &cfg.o, &maps, "brkstack");
cleanup:
	brkstack_bpf__destroy(skel);
	ht_probe__end(s);
	ht_stackcount__free(sc);
#endif
	return rc;
}
