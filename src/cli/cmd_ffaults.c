/* heaptrail ffaults: page faults by the file that backs the faulting
 * address (libraries, data files, mapped caches), the rest counted as
 * anonymous memory (docs/ffaults.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <linux/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/builtin.h"
#include "common/json.h"
#include "common/options.h"
#include "common/util.h"
#include "probes/probe.h"
#include "probes/stacks.h"

#ifdef HT_HAVE_BPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "faults.skel.h"
#endif

#define MAX_CPUS 1024

/* One configuration per run; each default is labelled by its flag. */
struct ffaults_config {
	struct ht_probe_opts po; /* -p, -c, -d, --json, --check, [INTERVAL [COUNT]] */
	uint64_t top;            /* -n, --top (20): files shown per report */
	int per_process;         /* --per-process: a row per process and file */
};

static const char usage_text[] =
	"usage: heaptrail ffaults [options] [INTERVAL [COUNT]]\n"
	"\n"
	"Page faults counted by the file mapped at the faulting address (its\n"
	"name, without the directory): which libraries, data files and caches are\n"
	"paged in; faults on anonymous memory (heap, stacks, arenas), and those\n"
	"whose mapping could not be looked up, are counted apart. System-wide or one process; a report every INTERVAL (COUNT\n"
	"times), else one at the end (Ctrl-C, -d TIME, or the end of the process\n"
	"traced). Needs root (or CAP_BPF and CAP_PERFMON) and a kernel with BTF.\n"
	"\fEXAMPLES\n"
	"  heaptrail ffaults -d 10s\n"
	"  heaptrail ffaults --per-process -n 30 5\n"
	"  heaptrail ffaults --json -c './app --its-args' | jq '.intervals[-1].files[0]'\n";

#ifdef HT_HAVE_BPF
/* One row of a report. */
struct row {
	struct ht_file_key key; /* file (and process) */
	struct ht_file_val val; /* faults */
};

static int by_faults(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->val.count != y->val.count)
		return x->val.count < y->val.count ? 1 : -1;
	int c = strncmp(x->key.name, y->key.name, HT_FILE_LEN);
	return c ? c : (x->key.pid > y->key.pid) - (x->key.pid < y->key.pid);
}

/* The sums of a report. */
struct sums {
	uint64_t total;   /* every fault counted */
	uint64_t anon;    /* on anonymous memory (or no mapping) */
	uint64_t unknown; /* whose mapping could not be looked up */
};

/* Reads (and empties) the counts map into rows, sorted; returns their
 * number, *sum the sums. */
static size_t collect(int fd, struct row **out, struct sums *sum)
{
	size_t n = 0, cap = 0;
	struct row *rows = NULL;
	memset(sum, 0, sizeof(*sum));
	struct ht_file_key key, next;
	int first = 1;
	while (!bpf_map_get_next_key(fd, first ? NULL : &key, &next)) {
		first = 0;
		key = next;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			rows = ht_xrealloc(rows, cap * sizeof(*rows));
		}
		rows[n].key = key;
		if (bpf_map_lookup_elem(fd, &key, &rows[n].val))
			continue;
		n++;
	}
	for (size_t i = 0; i < n; i++) {
		bpf_map_delete_elem(fd, &rows[i].key);
		sum->total += rows[i].val.count;
		if (rows[i].key.kind == HT_FILE_ANON)
			sum->anon += rows[i].val.count;
		else if (rows[i].key.kind == HT_FILE_UNKNOWN)
			sum->unknown += rows[i].val.count;
	}
	if (n)
		qsort(rows, n, sizeof(*rows), by_faults);
	*out = rows;
	return n;
}

/* Rows per process image and file (--per-process; always with -p and -c,
 * where the probe filters on one process and its execs). */
static int per_process(const struct ffaults_config *cfg)
{
	return cfg->per_process || cfg->po.pid || cfg->po.command;
}

static void report(const struct ffaults_config *cfg, struct ht_json *j, struct row *rows,
		   size_t n, const struct sums *sum, uint64_t t, int final)
{
	size_t shown = 0;
	uint64_t total = sum->total, anon = sum->anon, unknown = sum->unknown;
	uint64_t on_files = total - anon - unknown;
	if (cfg->po.json) {
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "elapsed_ns", t);
		ht_json__bool(j, "final", final);
		ht_json__u64(j, "total", total);
		ht_json__u64(j, "anonymous", anon);
		ht_json__u64(j, "unknown", unknown);
		ht_json__arr_begin(j, "files");
		for (size_t i = 0; i < n && (!cfg->top || shown < cfg->top); i++) {
			if (rows[i].key.kind != HT_FILE_NAMED)
				continue;
			shown++;
			char name[HT_FILE_LEN + 1], comm[17];
			snprintf(name, sizeof(name), "%.*s", HT_FILE_LEN, rows[i].key.name);
			ht_json__obj_begin(j, NULL);
			ht_json__str(j, "file", name);
			ht_json__u64(j, "faults", rows[i].val.count);
			if (per_process(cfg)) {
				ht_json__u64(j, "pid", rows[i].key.pid);
				ht_json__str(j, "comm", ht_probe__comm(comm, rows[i].val.comm));
			}
			ht_json__obj_end(j);
		}
		ht_json__arr_end(j);
		ht_json__obj_end(j);
		return;
	}
	char b[32];
	if (cfg->po.interval)
		printf("[%s] ", ht_fmt_ns(b, t));
	printf("%llu page faults, %llu of them on files (%.1f%%), %llu on anonymous memory",
	       (unsigned long long)total, (unsigned long long)on_files,
	       total ? 100.0 * (double)on_files / (double)total : 0.0, (unsigned long long)anon);
	if (unknown)
		printf(", %llu unknown (%.1f%%: the mapping could not be looked up, another thread "
		       "held the process's mmap lock)",
		       (unsigned long long)unknown, 100.0 * (double)unknown / (double)total);
	printf("\n");
	if (per_process(cfg))
		printf("%10s %6s  %-7s %-16s %s\n", "FAULTS", "%", "PID", "COMM", "FILE");
	else
		printf("%10s %6s  %s\n", "FAULTS", "%", "FILE");
	for (size_t i = 0; i < n && (!cfg->top || shown < cfg->top); i++) {
		if (rows[i].key.kind != HT_FILE_NAMED)
			continue;
		shown++;
		char comm[17];
		printf("%10llu %5.1f%%  ", (unsigned long long)rows[i].val.count,
		       total ? 100.0 * (double)rows[i].val.count / (double)total : 0.0);
		if (per_process(cfg))
			printf("%-7u %-16s ", rows[i].key.pid, ht_probe__comm(comm, rows[i].val.comm));
		printf("%.*s\n", HT_FILE_LEN, rows[i].key.name);
	}
	if (cfg->po.interval)
		printf("\n");
	fflush(stdout);
}

/* Opens, loads and attaches the counting program: at handle_mm_fault's
 * entry (fentry set; link[0] is that program's), or on the page-fault perf
 * event of every CPU (links, fds set; link[0..2] are the programs that keep
 * a process's cache of mappings as it changes them or exits); link[3] the
 * count of each process's execs, per process.  Returns 0,
 * or -1 with everything undone (after an error message, but for fentry). */
static int open_probes(const struct ffaults_config *cfg, struct ht_probe_session *s,
		       struct faults_bpf **skel, int fentry, struct bpf_link *link[4],
		       struct bpf_link ***links, int *fds, int *nfds)
{
	int err;
	if (!(*skel = faults_bpf__open())) {
		if (!fentry)
			ht_error("ffaults: cannot open the BPF program: %s", strerror(errno));
		return -1;
	}
	(*skel)->rodata->target_tgid = (__u32)ht_probe__tgid(s);
	(*skel)->rodata->self_tgid = (__u32)getpid();
	(*skel)->rodata->per_process = cfg->per_process || ht_probe__tgid(s);
	bpf_program__set_autoload((*skel)->progs.fault_stack, false);
	bpf_program__set_autoload((*skel)->progs.fault_file, !fentry);
	bpf_program__set_autoload((*skel)->progs.vma_forget, !fentry);
	bpf_program__set_autoload((*skel)->progs.vma_changed, !fentry);
	bpf_program__set_autoload((*skel)->progs.vma_exit, !fentry);
	bpf_program__set_autoload((*skel)->progs.fault_vma, fentry);
	bpf_program__set_autoload((*skel)->progs.image_exec, !!(*skel)->rodata->per_process);
	if ((err = faults_bpf__load(*skel))) {
		if (!fentry)
			ht_error("ffaults: cannot load the BPF program: %s (run 'heaptrail ffaults "
				 "--check')",
				 strerror(-err));
		goto fail;
	}
	link[0] = bpf_program__attach(fentry ? (*skel)->progs.fault_vma : (*skel)->progs.vma_forget);
	if (!fentry && link[0])
		link[1] = bpf_program__attach((*skel)->progs.vma_exit);
	if (!fentry && link[1])
		link[2] = bpf_program__attach((*skel)->progs.vma_changed);
	if (!link[0] || (!fentry && (!link[1] || !link[2]))) {
		if (!fentry)
			ht_error("ffaults: cannot attach to sys_enter, sys_exit, sched_process_exit: %s",
				 strerror(errno));
		goto fail;
	}
	if ((*skel)->rodata->per_process && !(link[3] = bpf_program__attach((*skel)->progs.image_exec))) {
		if (!fentry)
			ht_error("ffaults: cannot attach to sched_process_exec: %s", strerror(errno));
		goto fail;
	}
	if (fentry)
		return 0;
	*nfds = ht_probe__perf_sw_open("ffaults", PERF_COUNT_SW_PAGE_FAULTS, 1, PERF_SAMPLE_ADDR,
				       fds, MAX_CPUS);
	if (*nfds >= 0 &&
	    (*links = ht_probe__attach_perf("ffaults", (*skel)->progs.fault_file, fds, *nfds)))
		return 0;
	if (*nfds < 0)
		*nfds = 0;
fail:
	for (int i = 0; i < 4; i++) {
		bpf_link__destroy(link[i]);
		link[i] = NULL;
	}
	faults_bpf__destroy(*skel);
	*skel = NULL;
	return -1;
}
#endif

int cmd_ffaults(int argc, char **argv)
{
	struct ffaults_config cfg = {.top = 20};
	int rc;
	const struct ht_option opts[] = {
		HT_PROBE_OPTIONS(&cfg.po),
		{'n', "top", HT_OPT_U64, &cfg.top, "N", "files shown per report, 0 for all (20)"},
		{0, "per-process", HT_OPT_FLAG, &cfg.per_process, NULL,
		 "a row per process and file (files summed over processes)"},
		{0},
	};
	if ((rc = ht_probe__parse(argc, argv, opts, usage_text, &cfg.po, "ffaults", HT_PROBE_TICKS)) >= 0)
		return rc;
#ifdef HT_HAVE_BPF
	struct ht_probe_session *s = NULL;
	struct faults_bpf *skel = NULL;
	struct bpf_link **links = NULL, *link[4] = {NULL, NULL, NULL, NULL};
	static int fds[MAX_CPUS];
	int nfds = 0;
	struct ht_json j;
	struct row *rows = NULL;
	struct sums sum;
	size_t n;
	enum ht_probe_step st;
	rc = HT_EXIT_DATA;
	ht_probe__libbpf_messages(0);
	if ((rc = ht_probe__start(&s, &cfg.po, "ffaults")))
		goto cleanup;
	rc = HT_EXIT_NOBPF;
	/* handle_mm_fault's entry where BPF trampolines work, else the perf event */
	ht_probe__libbpf_messages(-1);
	int fentry = open_probes(&cfg, s, &skel, 1, link, NULL, NULL, NULL) == 0;
	ht_probe__libbpf_messages(0);
	if (!fentry) {
		fprintf(stderr, "heaptrail ffaults: handle_mm_fault cannot be traced here (no BPF "
				"trampolines): sampling the page-fault perf event, which costs more\n");
		if (open_probes(&cfg, s, &skel, 0, link, &links, fds, &nfds))
			goto cleanup;
	}
	if ((rc = ht_probe__go(s)))
		goto cleanup;
	int mfd = bpf_map__fd(skel->maps.file_counts);
	if (cfg.po.json) {
		ht_json__init(&j, stdout, 0);
		ht_json__obj_begin(&j, NULL);
		ht_probe__json_head(&j, s, "ffaults");
		ht_json__arr_begin(&j, "intervals");
	}
	fprintf(stderr, "heaptrail ffaults: counting page faults by file... Ctrl-C to end\n");
	while ((st = ht_probe__step(s, NULL)) != HT_PROBE_STOP) {
		if (st != HT_PROBE_TICK)
			continue;
		n = collect(mfd, &rows, &sum);
		report(&cfg, &j, rows, n, &sum, ht_probe__elapsed(s), 0);
		free(rows);
		rows = NULL;
	}
	if (!cfg.po.interval || ht_probe__final_due(s)) {
		n = collect(mfd, &rows, &sum);
		report(&cfg, &j, rows, n, &sum, ht_probe__elapsed(s), 1);
	}
	if (cfg.po.json) {
		ht_json__arr_end(&j);
		ht_json__u64(&j, "not_counted", skel->bss->dropped);
		ht_json__u64(&j, "elapsed_ns", ht_probe__elapsed(s));
		ht_json__str(&j, "stopped", ht_probe__reason(s));
		ht_json__obj_end(&j);
		ht_json__finish(&j);
	}
	if (skel->bss->dropped)
		ht_warning("ffaults: %llu page faults not counted (the counts map was full)",
			   (unsigned long long)skel->bss->dropped);
	fprintf(stderr, "heaptrail ffaults: stopped: %s\n", ht_probe__reason(s));
	rc = HT_EXIT_OK;
cleanup:
	free(rows);
	ht_probe__detach(links, fds, nfds > 0 ? nfds : 0);
	for (int i = 0; i < 4; i++)
		bpf_link__destroy(link[i]);
	faults_bpf__destroy(skel);
	ht_probe__end(s);
#endif
	return rc;
}
