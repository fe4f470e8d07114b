/* The run of memsys.bpf.c (memsys_run.h). */
#define _GNU_SOURCE
#include "memsys_run.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

#ifdef HT_HAVE_BPF
#include <bpf/libbpf.h>

#include "memsys.skel.h"

/* What the ring buffer callback needs. */
struct run_ctx {
	ht_memsys_fn fn;   /* the command's */
	void *ctx;         /* its argument */
	uint64_t t0;       /* session start, ns */
};

static int on_event(void *ctx, void *data, size_t len)
{
	struct run_ctx *rc = ctx;
	if (len < sizeof(struct ht_memsys_event))
		return 0;
	const struct ht_memsys_event *ev = data;
	rc->fn(rc->ctx, ev, ev->ts_ns > rc->t0 ? ev->ts_ns - rc->t0 : 0);
	fflush(stdout);
	return 0;
}
#endif

int ht_memsys__run(const char *cmd, const struct ht_probe_opts *po, const uint64_t mask[2],
		   void (*started)(void *ctx, struct ht_probe_session *s), ht_memsys_fn fn,
		   void *ctx, struct ht_memsys_result *res, int *status)
{
	memset(res, 0, sizeof(*res));
	*status = 0;
#ifndef HT_HAVE_BPF
	(void)mask;
	(void)started;
	(void)fn;
	(void)ctx;
	return ht_probe__check(cmd, po);
#else
	int rc = HT_EXIT_DATA, err;
	struct ht_probe_session *s = NULL;
	struct memsys_bpf *skel = NULL;
	struct ring_buffer *rb = NULL;
	struct run_ctx rctx = {.fn = fn, .ctx = ctx};

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
	skel->rodata->syscall_mask[0] = mask[0];
	skel->rodata->syscall_mask[1] = mask[1];
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
	if (started)
		started(ctx, s);
	while (ht_probe__step(s, rb) != HT_PROBE_STOP)
		;
	res->dropped = skel->bss->dropped;
	res->elapsed = ht_probe__elapsed(s);
	snprintf(res->reason, sizeof(res->reason), "%s", ht_probe__reason(s));
	rc = 0;
cleanup:
	ring_buffer__free(rb);
	memsys_bpf__destroy(skel);
	if (s)
		*status = ht_probe__end(s);
	return rc;
#endif
}
