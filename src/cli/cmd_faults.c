/* heaptrail faults: page faults by user stack, the code that touches
 * memory first and so grows the resident set; counted, as a table, JSON,
 * folded stacks or a flame graph SVG (docs/faults.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
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

#include "faults.skel.h"
#endif

#define MAX_CPUS 1024

/* One configuration per run; each default is labelled by its flag. */
struct faults_config {
	struct ht_probe_opts po;    /* -p, -c, -d, --json, --check, [INTERVAL [COUNT]] */
	struct ht_stackcount_out o; /* -n, -o, --folded */
};

static const char usage_text[] =
	"usage: heaptrail faults [options] [INTERVAL [COUNT]]\n"
	"\n"
	"Page faults (minor and major, the software perf event) counted by the\n"
	"user stack that faulted: the code that touches memory first and so grows\n"
	"the resident set. System-wide or one process; a report every INTERVAL\n"
	"(COUNT times), else one at the end (Ctrl-C, -d TIME, or the end of the\n"
	"process traced); -o writes a flame graph SVG. Stacks are walked by frame\n"
	"pointers. Needs root (or CAP_BPF and CAP_PERFMON) and a kernel with BTF.\n"
	"\fEXAMPLES\n"
	"  heaptrail faults -c './app --its-args' -o faults.svg\n"
	"  heaptrail faults -p 1234 -d 10s -n 5\n"
	"  heaptrail faults -p 1234 1 10               # ten 1-second reports\n"
	"  heaptrail faults --folded -d 5s | flamegraph.pl > faults.svg\n";

int cmd_faults(int argc, char **argv)
{
	struct faults_config cfg = {
		.o = {.top = 10, .what = "page faults", .unit = "faults",
		      .title = "Page faults by stack (heaptrail faults)"},
	};
	int rc;
	const struct ht_option opts[] = {
		HT_PROBE_OPTIONS(&cfg.po),
		HT_STACKCOUNT_OPTIONS(&cfg.o),
		{0},
	};
	if ((rc = ht_probe__parse(argc, argv, opts, usage_text, &cfg.po, "faults", HT_PROBE_TICKS)) >= 0)
		return rc;
#ifdef HT_HAVE_BPF
	struct ht_probe_session *s = NULL;
	struct faults_bpf *skel = NULL;
	struct bpf_link **links = NULL;
	static int fds[MAX_CPUS];
	int nfds = 0, err;
	struct ht_stackcount *sc = ht_stackcount__new(NULL, 1);
	rc = HT_EXIT_DATA;
	ht_probe__libbpf_messages(0);
	if (!sc)
		goto cleanup;
	cfg.po.stdout_data = cfg.o.folded && !cfg.o.out; /* (the folded stacks on stdout) */
	if ((rc = ht_probe__start(&s, &cfg.po, "faults")))
		goto cleanup;
	rc = HT_EXIT_NOBPF;
	if (!(skel = faults_bpf__open())) {
		ht_error("faults: cannot open the BPF program: %s", strerror(errno));
		goto cleanup;
	}
	skel->rodata->target_tgid = (__u32)ht_probe__tgid(s);
	skel->rodata->self_tgid = (__u32)getpid();
	bpf_program__set_autoload(skel->progs.fault_file, false);
	bpf_program__set_autoload(skel->progs.fault_vma, false);
	bpf_program__set_autoload(skel->progs.vma_forget, false);
	bpf_program__set_autoload(skel->progs.vma_changed, false);
	bpf_program__set_autoload(skel->progs.vma_exit, false);
	bpf_program__set_autoload(skel->progs.image_exec, false);
	if ((err = faults_bpf__load(skel))) {
		ht_error("faults: cannot load the BPF program: %s (run 'heaptrail faults --check')",
			 strerror(-err));
		goto cleanup;
	}
	nfds = ht_probe__perf_sw_open("faults", PERF_COUNT_SW_PAGE_FAULTS, 1, 0, fds, MAX_CPUS);
	if (nfds < 0 || !(links = ht_probe__attach_perf("faults", skel->progs.fault_stack, fds, nfds)))
		goto cleanup;
	struct ht_stackcount_maps maps = {
		.notes_fd = bpf_map__fd(skel->maps.notes),
		.counts_fd = bpf_map__fd(skel->maps.counts),
		.stacks_fd = bpf_map__fd(skel->maps.stacks),
		.dropped = &skel->bss->dropped,
	};
	rc = ht_stackcount__run(sc, s, &cfg.po, &cfg.o, &maps, "faults");
cleanup:
	ht_probe__detach(links, fds, nfds > 0 ? nfds : 0);
	faults_bpf__destroy(skel);
	ht_probe__end(s);
	ht_stackcount__free(sc);
#endif
	return rc;
}
