/* The run of memsys.bpf.c (memsys_run.h). */
#define _GNU_SOURCE
#include "memsys_run.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

#ifdef HT_HAVE_BPF
#include <bpf/libbpf.h>

#include "memsys.skel.h"

/* What the ring buffer callback needs. */
struct run_ctx {
	const struct ht_memsys_spec *spec; /* the command's */
	struct ht_json *j;                 /* the document, NULL for text */
	uint64_t t0;                       /* session start, ns */
	uint64_t shown;                    /* events shown */
};

static int on_event(void *ctx, void *data, size_t len)
{
	struct run_ctx *rc = ctx;
	if (len < sizeof(struct ht_memsys_event))
		return 0;
	const struct ht_memsys_event *ev = data;
	rc->shown += (uint64_t)rc->spec->event(rc->spec->ctx, ev,
					       ev->ts_ns > rc->t0 ? ev->ts_ns - rc->t0 : 0, rc->j);
	if (!rc->j)
		fflush(stdout);
	return 0;
}
#endif

int ht_memsys__run(const struct ht_memsys_spec *spec, const struct ht_probe_opts *po)
{
#ifndef HT_HAVE_BPF
	return ht_probe__check(spec->cmd, po);
#else
	const char *cmd = spec->cmd;
	int rc = HT_EXIT_DATA, err;
	struct ht_probe_session *s = NULL;
	struct memsys_bpf *skel = NULL;
	struct ring_buffer *rb = NULL;
	struct ht_json j;
	struct run_ctx rctx = {.spec = spec, .j = po->json ? &j : NULL};

	ht_probe__libbpf_messages(0);
	if ((rc = ht_probe__start(&s, po, cmd)))
		goto cleanup;
	rc = HT_EXIT_DATA;
	skel = memsys_bpf__open();
	if (!skel) {
		ht_error("%s: cannot open the BPF program: %s", cmd, strerror(errno));
		goto cleanup;
	}
	skel->rodata->target_tgid = (__u32)ht_probe__tgid(s);
	skel->rodata->self_tgid = (__u32)getpid();
	skel->rodata->syscall_mask[0] = spec->mask[0];
	skel->rodata->syscall_mask[1] = spec->mask[1];
	if ((err = memsys_bpf__load(skel))) {
		ht_error("%s: cannot load the BPF program: %s (run 'heaptrail %s --check')", cmd,
			 strerror(-err), cmd);
		rc = HT_EXIT_NOBPF;
		goto cleanup;
	}
	if ((err = memsys_bpf__attach(skel))) {
		ht_error("%s: cannot attach to the system call tracepoints: %s", cmd, strerror(-err));
		rc = HT_EXIT_NOBPF;
		goto cleanup;
	}
	rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_event, &rctx, NULL);
	if (!rb) {
		ht_error("%s: ring buffer: %s", cmd, strerror(errno));
		goto cleanup;
	}
	if ((rc = ht_probe__go(s)))
		goto cleanup;
	rctx.t0 = ht_probe__t0(s);
	fprintf(stderr, "heaptrail %s: tracing... Ctrl-C to end\n", cmd);
	if (po->json) {
		ht_json__init(&j, stdout, 0);
		ht_json__obj_begin(&j, NULL);
		ht_probe__json_head(&j, s, cmd);
		ht_json__arr_begin(&j, "events");
	} else {
		printf("%s\n", spec->header);
		fflush(stdout);
	}
	while (ht_probe__step(s, rb) != HT_PROBE_STOP)
		;
	uint64_t dropped = skel->bss->dropped;
	if (po->json) {
		ht_json__arr_end(&j);
		ht_json__u64(&j, "events_shown", rctx.shown);
		ht_json__u64(&j, "dropped", dropped);
		ht_json__u64(&j, "elapsed_ns", ht_probe__elapsed(s));
		ht_json__str(&j, "stopped", ht_probe__reason(s));
		ht_json__obj_end(&j);
		ht_json__finish(&j);
	}
	if (dropped)
		ht_warning("%s: %llu events lost (the ring buffer was full)", cmd,
			   (unsigned long long)dropped);
	fprintf(stderr, "heaptrail %s: %llu calls; stopped: %s\n", cmd,
		(unsigned long long)rctx.shown, ht_probe__reason(s));
	rc = HT_EXIT_OK;
cleanup:
	ring_buffer__free(rb);
	memsys_bpf__destroy(skel);
	ht_probe__end(s);
	return rc;
#endif
}
