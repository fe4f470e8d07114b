/* heaptrail attach: outstanding allocations of a running process by stack,
 * from uprobes on its allocator's functions (attach.bpf.c), like BCC's
 * memleak; or a heaptrail trace of them (-o) that every analyzer reads.
 * docs/attach.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analyze/blocks.h"
#include "cli/builtin.h"
#include "common/json.h"
#include "common/keyindex.h"
#include "common/options.h"
#include "common/outfile.h"
#include "common/util.h"
#include "probes/probe.h"
#include "probes/procsyms.h"
#include "symbols/elfsyms.h"
#include "symbols/symbolize.h"
#include "trace/format.h"
#include "trace/writer.h"

#ifdef HT_HAVE_BPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "probes/attach.bpf.h"
#include "attach.skel.h"
#endif

/* One configuration per run; each default is labelled by its flag. */
struct attach_config {
	struct ht_probe_opts po; /* -p, -c, -d, --json, --check; INTERVAL, COUNT */
	uint64_t top;            /* -n, --top (10): stacks per report */
	uint64_t older;          /* --older (0): only blocks older than this, ns */
	uint64_t sample;         /* -s, --sample (1): trace 1 in N allocation calls */
	uint64_t depth;          /* --depth (3): frames shown per stack (text) */
	uint64_t max_blocks;     /* --max-blocks (1M): traced blocks the kernel side keeps */
	const char *lib;         /* --lib (found in the process): the allocator's file */
	const char *output;      /* -o, --output (none): write a heaptrail trace */
	int at_entry;            /* --at-entry: every probe on the first instruction */
};

static const char usage_text[] =
	"usage: heaptrail attach -p PID [options] [INTERVAL [COUNT]]\n"
	"       heaptrail attach -c COMMAND [options] [INTERVAL [COUNT]]\n"
	"\n"
	"Outstanding allocations of a running process by stack, from uprobes on its\n"
	"allocator (glibc's malloc family, or jemalloc, tcmalloc or mimalloc when the\n"
	"process has one mapped): every INTERVAL (seconds, or 500ms...), COUNT times,\n"
	"else once at the end (Ctrl-C, -d, or the process exits).  Detaching leaves\n"
	"the process running, unchanged.  Every probed call traps into the kernel\n"
	"(a microsecond or two a malloc/free pair); --sample N traces 1 in N\n"
	"allocations and scales the figures by N.  Needs root (or CAP_BPF and\n"
	"CAP_PERFMON).\n"
	"\fEXAMPLES\n"
	"  heaptrail attach -p 1234 5              # top stacks every 5 s\n"
	"  heaptrail attach -p 1234 --older 10s    # only blocks older than 10 s\n"
	"  heaptrail attach -p 1234 --sample 100 -o live.ht -d 60s\n"
	"  heaptrail leaks live.ht                 # the trace, as any other\n"
	"  heaptrail attach -c './server --once' --json\n";

#ifdef HT_HAVE_BPF
/* The allocator functions probed, with their BPF entry program. */
struct probe_fn {
	const char *name; /* symbol */
	int kind;         /* enum ht_kind; HT_EV_FREE for the free family */
	int ret;          /* also a uretprobe */
	int glibc_only;   /* probed only in glibc (the others: only if defined) */
};

static const struct probe_fn probe_fns[] = {
	{"malloc", HT_EV_MALLOC, 1, 0},
	{"free", HT_EV_FREE, 0, 0},
	{"calloc", HT_EV_CALLOC, 1, 0},
	{"realloc", HT_EV_REALLOC, 1, 0},
	{"memalign", HT_EV_MEMALIGN, 1, 0},
	{"posix_memalign", HT_EV_POSIX_MEMALIGN, 1, 0},
	{"aligned_alloc", HT_EV_ALIGNED_ALLOC, 1, 0},
	{"valloc", HT_EV_VALLOC, 1, 0},
	{"pvalloc", HT_EV_PVALLOC, 1, 0},
	/* C++ operators the other allocators define themselves (glibc's
	 * programs reach them through libstdc++, which calls malloc) */
	{"_Znwm", HT_EV_MALLOC, 1, 0},
	{"_Znam", HT_EV_MALLOC, 1, 0},
	{"_ZdlPv", HT_EV_FREE, 0, 0},
	{"_ZdaPv", HT_EV_FREE, 0, 0},
	{"_ZdlPvm", HT_EV_FREE, 0, 0},
	{"_ZdaPvm", HT_EV_FREE, 0, 0},
};
#define NPROBE_FNS (sizeof(probe_fns) / sizeof(probe_fns[0]))
#define NSTD_FNS 9 /* the C functions, probed wherever they are */

/* The allocator libraries recognized by name, in order of preference. */
static const char *const alt_allocators[] = {"libjemalloc", "libtcmalloc", "libmimalloc"};
#endif

/* A stack seen (one or more keys of the stack map: stacks equal up to
 * their cut are one). */
struct stack {
	int32_t seq;      /* stacks seen before it (the order of rows of equal bytes), -1 = none */
	uint32_t n;       /* frames */
	uint64_t *ips;    /* return addresses, innermost first */
	uint64_t bytes;   /* outstanding (scratch, per report) */
	uint64_t blocks;  /* outstanding blocks (scratch) */
	uint64_t oldest;  /* ts of the oldest outstanding block (scratch) */
	int cut;          /* ends at a frame that was not code (the frames past it dropped) */
};

/* A key of the stack map (the BPF side's hash of a stack's addresses) and
 * the stack it is. */
struct stack_ref {
	uint64_t key;
	uint32_t stack; /* index in stacks */
};

/* A traced block still live. */
struct block {
	uint64_t ptr;    /* address, 0 = empty slot, 1 = deleted */
	uint64_t size;   /* requested bytes */
	uint64_t ts;     /* when it was handed out (monotonic ns) */
	uint32_t stack;  /* index in stacks, or UINT32_MAX */
};

/* The state of one run. */
struct attach {
	struct attach_config *cfg;     /* options */
	pid_t pid;                     /* the target */
	struct block *blocks;          /* open addressing by ptr */
	size_t nblocks, used, cap;     /* live, slots used (live + deleted), slots */
	struct stack *stacks;          /* every stack seen */
	size_t nstacks;                /* how many */
	struct stack_ref *refs;        /* every key of the stack map seen */
	size_t nrefs;                  /* how many */
	struct ht_keyindex byref;      /* refs by key */
	struct ht_keyindex bykey;      /* stacks by their frames' hash (stack_key) */
	int stack_fd;                  /* the stack map */
	struct ht_writer *w;           /* -o, or NULL */
	struct ht_procsyms *syms;      /* symbols of the target */
	uint64_t events, allocs, frees; /* events read */
	int is_glibc;                  /* the allocator is glibc's */
	int failed;                    /* a write of the trace failed */
	uint64_t last_rss;             /* when the last RSS sample was written */
	uint64_t end;                  /* when tracing stopped (0: not yet), monotonic ns */
	uint64_t trace_end;            /* -o: the trace's end, at the first exec (0: none) */
	int signal;                    /* -c: the signal the command died of, 0 if none */
	uint64_t execs;                /* execs of the process seen */
	const char *lib;               /* the file probed */
#ifdef HT_HAVE_BPF
	struct ring_buffer *rb;        /* the events, once set up */
#endif
};

#ifdef HT_HAVE_BPF
/* ---- the live blocks ---------------------------------------------------- */

static size_t slot_of(uint64_t ptr, size_t cap)
{
	uint64_t h = (ptr >> 4) * 0x9E3779B97F4A7C15ull;
	return (size_t)(h ^ (h >> 32)) & (cap - 1);
}

static void blocks_grow(struct attach *a)
{
	size_t ncap = a->cap ? (a->nblocks * 4 > a->cap ? 2 * a->cap : a->cap) : 1024;
	struct block *n = calloc(ncap, sizeof(*n));
	if (!n)
		ht_xrealloc(NULL, SIZE_MAX); /* the out-of-memory exit */
	for (size_t i = 0; i < a->cap; i++) {
		if (a->blocks[i].ptr <= 1)
			continue;
		size_t j = slot_of(a->blocks[i].ptr, ncap);
		while (n[j].ptr)
			j = (j + 1) & (ncap - 1);
		n[j] = a->blocks[i];
	}
	free(a->blocks);
	a->blocks = n;
	a->cap = ncap;
	a->used = a->nblocks;
}

static struct block *block_find(struct attach *a, uint64_t ptr)
{
	if (!a->cap)
		return NULL;
	for (size_t j = slot_of(ptr, a->cap);; j = (j + 1) & (a->cap - 1)) {
		if (a->blocks[j].ptr == ptr)
			return &a->blocks[j];
		if (!a->blocks[j].ptr)
			return NULL;
	}
}

static void block_add(struct attach *a, uint64_t ptr, uint64_t size, uint64_t ts, uint32_t st)
{
	struct block *b = block_find(a, ptr);
	if (b) { /* a block we missed the free of (lost events) */
		b->size = size;
		b->ts = ts;
		b->stack = st;
		return;
	}
	if (2 * (a->used + 1) > a->cap)
		blocks_grow(a);
	size_t j = slot_of(ptr, a->cap);
	while (a->blocks[j].ptr > 1)
		j = (j + 1) & (a->cap - 1);
	if (!a->blocks[j].ptr)
		a->used++;
	a->blocks[j] = (struct block){ptr, size, ts, st};
	a->nblocks++;
}

static void block_del(struct attach *a, uint64_t ptr)
{
	struct block *b = block_find(a, ptr);
	if (b) {
		b->ptr = 1;
		a->nblocks--;
	}
}

/* ---- stacks --------------------------------------------------------------- */

static uint64_t stack_hash(const uint64_t *ips, uint32_t n, int cut)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n ^ ((uint64_t)cut << 32);
	for (uint32_t i = 0; i < n; i++)
		h = (h ^ ips[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t stack_key(const void *arr, size_t i)
{
	const struct stack *s = &((const struct stack *)arr)[i];
	return stack_hash(s->ips, s->n, s->cut);
}

/* The stack of these frames already seen, or UINT32_MAX and the slot of
 * a->bykey to give a new one.  (Two stacks may share a hash: the frames
 * decide, which ht_keyindex__find, comparing keys alone, cannot.) */
static uint32_t stack_find(struct attach *a, const uint64_t *ips, uint32_t n, int cut, size_t *slot)
{
	struct ht_keyindex *x = &a->bykey;
	ht_keyindex__reserve(x, a->nstacks, a->stacks, stack_key);
	size_t j = ht_livemap__hash(stack_hash(ips, n, cut), x->cap - 1);
	for (; x->slot[j]; j = (j + 1) & (x->cap - 1)) {
		const struct stack *s = &a->stacks[x->slot[j] - 1];
		if (s->n == n && s->cut == cut && !memcmp(s->ips, ips, n * sizeof(*ips)))
			return x->slot[j] - 1;
	}
	*slot = j;
	return UINT32_MAX;
}

static uint64_t ref_key(const void *arr, size_t i)
{
	return ((const struct stack_ref *)arr)[i].key;
}

/* The stack of event e (an index in a->stacks), or UINT32_MAX if it has
 * none: read from the stack map the first time its key comes. */
static uint32_t stack_of(struct attach *a, const struct ht_attach_event *e)
{
	if (e->kind == HT_EV_FREE || e->stack_error)
		return UINT32_MAX;
	ht_keyindex__reserve(&a->byref, a->nrefs, a->refs, ref_key);
	size_t ref = ht_keyindex__find(&a->byref, e->stack, a->refs, ref_key);
	if (a->byref.slot[ref])
		return a->refs[a->byref.slot[ref] - 1].stack;
	uint64_t ips[HT_ATTACH_MAX_DEPTH];
	memset(ips, 0, sizeof(ips));
	if (bpf_map_lookup_elem(a->stack_fd, &e->stack, ips) != 0)
		return UINT32_MAX;
	uint32_t n = 0;
	while (n < HT_ATTACH_MAX_DEPTH && ips[n])
		n++;
	/* The kernel follows frame pointers: through code built without them
	 * (-O2 on x86-64) it goes on with whatever the register holds, a heap
	 * pointer, bytes of a string (0x2f656c61636f6c2f), and every block of
	 * one site got a stack of its own.  The stack ends at the first frame
	 * that is not in the process's code; stacks equal up to there are one
	 * (asked while the process runs, which also reads the map again for
	 * code mapped since the attach: a dlopened library). */
	int cut = 0;
	for (uint32_t i = 0; i < n; i++)
		if (ht_procsyms__is_code(a->syms, a->pid, ips[i]) == 0) {
			n = i;
			cut = 1;
			break;
		}
	size_t slot = 0;
	uint32_t k = stack_find(a, ips, n, cut, &slot);
	if (k == UINT32_MAX) {
		a->stacks = ht_xrealloc(a->stacks, (a->nstacks + 1) * sizeof(*a->stacks));
		struct stack *s = &a->stacks[a->nstacks];
		memset(s, 0, sizeof(*s));
		s->seq = (int32_t)a->nstacks;
		s->n = n;
		s->cut = cut;
		s->ips = ht_xrealloc(NULL, (n ? n : 1) * sizeof(uint64_t));
		memcpy(s->ips, ips, n * sizeof(uint64_t));
		a->bykey.slot[slot] = (uint32_t)a->nstacks + 1;
		k = (uint32_t)a->nstacks++;
	}
	a->refs = ht_xrealloc(a->refs, (a->nrefs + 1) * sizeof(*a->refs));
	a->refs[a->nrefs] = (struct stack_ref){e->stack, k};
	a->byref.slot[ref] = (uint32_t)++a->nrefs;
	return k;
}

/* ---- the trace (-o) --------------------------------------------------------- */

/* The 'U' field of an allocation (format.h): from glibc's usable size when
 * the BPF side read it, else 0 (glibc's rounding assumed). */
static uint64_t slack_of(uint64_t req, uint64_t usable, unsigned flags)
{
	if (!usable)
		return 0;
	if (flags & HT_F_MMAPPED)
		return usable - req;
	return ht_zigzag((int64_t)(usable - ht_glibc_usable(req)));
}

static void trace_event(struct attach *a, const struct ht_attach_event *e, uint32_t st)
{
	uint64_t v[HT_MAX_FIELDS];
	unsigned flags = e->flags;
	memset(v, 0, sizeof(v));
	switch (e->kind) {
	case HT_EV_FREE:
		v[0] = e->ptr;
		break;
	case HT_EV_MALLOC:
	case HT_EV_VALLOC:
	case HT_EV_PVALLOC:
		v[0] = e->a0;
		v[1] = e->ptr;
		v[2] = slack_of(e->a0, e->usable, flags);
		break;
	case HT_EV_CALLOC:
		v[0] = e->a0;
		v[1] = e->a1;
		v[2] = e->ptr;
		v[3] = slack_of(e->a0 * e->a1, e->usable, flags);
		break;
	case HT_EV_REALLOC:
		/* an input block that was not traced is not in the trace:
		 * the call reads as realloc(NULL, n) */
		v[0] = e->old_traced ? e->old : 0;
		v[1] = e->a1;
		v[2] = e->ptr;
		v[3] = e->ptr ? slack_of(e->a1, e->usable, flags) : 0;
		/* the call's start (the probe at its entry): the reader
		 * releases the old block then, before another thread's
		 * malloc that got its address in the call returned */
		v[4] = e->old_traced && e->start && e->start < e->ts ? e->ts - e->start : 0;
		break;
	case HT_EV_MEMALIGN:
	case HT_EV_ALIGNED_ALLOC:
		v[0] = e->a0;
		v[1] = e->a1;
		v[2] = e->ptr;
		v[3] = slack_of(e->a1, e->usable, flags);
		break;
	case HT_EV_POSIX_MEMALIGN:
		v[0] = e->a0;
		v[1] = e->a1;
		v[2] = e->ptr;
		v[3] = (uint64_t)e->ret;
		v[4] = slack_of(e->a1, e->usable, flags);
		break;
	default:
		return;
	}
	uint32_t node = 0;
	if (st != UINT32_MAX)
		node = ht_writer__stack(a->w, e->tid, a->stacks[st].ips, a->stacks[st].n);
	if (ht_writer__event(a->w, e->tid, e->kind, flags, v, e->ts, node) < 0)
		a->failed = 1;
}

static uint64_t size_of(const struct ht_attach_event *e)
{
	switch (e->kind) {
	case HT_EV_MALLOC:
	case HT_EV_VALLOC:
	case HT_EV_PVALLOC:
		return e->a0;
	case HT_EV_CALLOC:
		return e->a0 * e->a1;
	default: /* realloc, memalign, posix_memalign, aligned_alloc */
		return e->a1;
	}
}

static void trace_modules(struct attach *a);

/* After an exec: what the probes in a->lib will see of the new image, a
 * clause for on_exec's line.  They go on in any process that maps that
 * file: the same file run again (a static program), or a dynamic one that
 * needs it (its libraries are not mapped yet when the exec is reported:
 * its DT_NEEDED entries say); a static program of another file maps none. */
static void new_image(const struct attach *a, char *buf, size_t len)
{
	char exe[64];
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)a->pid);
	const char *base = strrchr(a->lib, '/');
	base = base ? base + 1 : a->lib;
	struct stat se, sl;
	snprintf(buf, len, "tracing goes on in the new image");
	if (stat(exe, &se) < 0 || (stat(a->lib, &sl) == 0 && se.st_dev == sl.st_dev &&
				   se.st_ino == sl.st_ino))
		return; /* (gone already: nothing to say of it) */
	int interp = ht_elf__interp(exe);
	const char *pre[] = {base, NULL};
	char got[256];
	if (interp == 0)
		snprintf(buf, len,
			 "the new image is linked statically and does not map %s: the probes see "
			 "none of its calls (attach goes on until it ends)",
			 base);
	else if (interp == 1 && ht_elf__needs(exe, pre, got, sizeof(got)) < 0)
		snprintf(buf, len,
			 "the new image does not link %s: its calls are seen only if it loads that "
			 "file",
			 base);
}

/* The process exec'd: its blocks went with the old image, and its code is
 * another one.  The old image's blocks are dropped, its modules forgotten
 * (the -o trace ends at the exec, with them), and a line says so; the
 * probes go on in the new image when it maps the same allocator. */
static void on_exec(struct attach *a, const struct ht_attach_event *e)
{
	uint64_t bytes = 0, blocks = a->nblocks;
	for (size_t i = 0; i < a->cap; i++)
		if (a->blocks[i].ptr > 1)
			bytes += a->blocks[i].size * a->cfg->sample;
	memset(a->blocks, 0, a->cap * sizeof(*a->blocks));
	a->nblocks = a->used = 0;
	a->execs++;
	if (a->w && !a->trace_end) {
		trace_modules(a);
		a->trace_end = e->ts;
	}
	ht_procsyms__forget(a->syms, a->pid);
	ht_procsyms__load(a->syms, a->pid);
	char exe[PATH_MAX], link[64], b1[32];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)a->pid);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	char then[PATH_MAX + 200];
	new_image(a, then, sizeof(then));
	fprintf(stderr,
		"heaptrail attach: pid %d exec'd %s: the %s in %" PRIu64 " block%s outstanding in "
		"the image before are dropped (they went with it)%s; %s\n",
		(int)a->pid, n > 0 ? exe : "a new program", ht_fmt_bytes(b1, bytes),
		blocks * a->cfg->sample, ht_s(blocks * a->cfg->sample),
		a->w && a->execs == 1 ? "; the -o trace ends at the exec" : "", then);
}

static int on_event(void *ctx, void *data, size_t len)
{
	struct attach *a = ctx;
	const struct ht_attach_event *e = data;
	if (len < sizeof(*e))
		return 0;
	if (a->end && e->ts > a->end)
		return 0; /* made while the probes were being removed: after the end */
	if (e->kind == HT_ATTACH_EXEC) {
		on_exec(a, e);
		return 0;
	}
	a->events++;
	uint32_t st = stack_of(a, e);
	if (e->kind == HT_EV_FREE) {
		a->frees++;
		block_del(a, e->ptr);
	} else {
		a->allocs++;
		if (e->kind == HT_EV_REALLOC && e->old_traced && e->old != e->ptr &&
		    (e->ptr || !e->a1)) {
			/* The realloc's input, unless the block at its address
			 * was handed out after the realloc began: glibc frees the
			 * input inside the call, and another thread's malloc can
			 * get the address and be seen before the realloc returns.
			 * That block is live (the input's entry became it). */
			struct block *ob = block_find(a, e->old);
			if (ob && ob->ts <= e->start)
				block_del(a, e->old);
		}
		if (e->reused && block_find(a, e->ptr) && a->w && !a->trace_end) {
			/* a traced block at this address whose free the probes
			 * did not see: the allocator handed the address out
			 * again, so it was freed; the trace frees it here, not
			 * two blocks at one address.  (Not any block live here:
			 * another thread's malloc may return the address a
			 * realloc freed before the realloc returns, which the
			 * reader puts in order.) */
			struct ht_attach_event f = {.ts = e->ts,
						    .ptr = e->ptr,
						    .tid = e->tid,
						    .kind = HT_EV_FREE,
						    .stack_error = -ENOENT};
			trace_event(a, &f, UINT32_MAX);
		}
		if (e->ptr)
			block_add(a, e->ptr, size_of(e), e->ts, st);
	}
	if (a->w && !a->trace_end)
		trace_event(a, e, st);
	return 0;
}

/* ---- reports ---------------------------------------------------------------- */

static int by_bytes(const void *x, const void *y)
{
	const struct stack *a = *(struct stack *const *)x, *b = *(struct stack *const *)y;
	if (a->bytes != b->bytes)
		return a->bytes < b->bytes ? 1 : -1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Sums the live blocks by stack (older than --older at now); returns the
 * stacks with outstanding blocks, largest first, in *out (malloc'd). */
static size_t tally(struct attach *a, uint64_t now, struct stack ***out, uint64_t *bytes,
		    uint64_t *blocks, struct stack *nostack)
{
	for (size_t i = 0; i < a->nstacks; i++)
		a->stacks[i].bytes = a->stacks[i].blocks = 0, a->stacks[i].oldest = UINT64_MAX;
	memset(nostack, 0, sizeof(*nostack));
	nostack->seq = -1;
	nostack->oldest = UINT64_MAX;
	*bytes = *blocks = 0;
	uint64_t w = a->cfg->sample;
	for (size_t i = 0; i < a->cap; i++) {
		struct block *b = &a->blocks[i];
		if (b->ptr <= 1)
			continue;
		if (a->cfg->older && (b->ts > now || now - b->ts < a->cfg->older))
			continue;
		struct stack *s = b->stack == UINT32_MAX ? nostack : &a->stacks[b->stack];
		s->bytes += b->size * w;
		s->blocks += w;
		if (b->ts < s->oldest)
			s->oldest = b->ts;
		*bytes += b->size * w;
		*blocks += w;
	}
	struct stack **v = ht_xrealloc(NULL, (a->nstacks + 1) * sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; i < a->nstacks; i++)
		if (a->stacks[i].blocks)
			v[n++] = &a->stacks[i];
	if (nostack->blocks)
		v[n++] = nostack;
	qsort(v, n, sizeof(*v), by_bytes);
	*out = v;
	return n;
}

static size_t frames_of(struct attach *a, const struct stack *s, struct ht_frame *out,
			size_t max)
{
	size_t k = 0;
	for (uint32_t i = 0; i < s->n && k < max; i++) {
		const struct ht_frame *f;
		size_t nf = ht_procsyms__resolve(a->syms, a->pid, s->ips[i], 0, &f);
		/* (a process running under record: its wrappers left out, as by leaks) */
		for (size_t j = 0; j < nf && k < max; j++)
			if (!ht_symbols__is_recorder(f[j].module))
				out[k++] = f[j];
	}
	return k;
}

static void report(struct attach *a, struct ht_probe_session *ps, int final)
{
	/* the final report's ages are at the end of tracing, not after the
	 * probes are removed (a second or two later) */
	uint64_t now = ht_probe__now(ps), bytes, blocks;
	struct stack **v, nostack;
	size_t n = tally(a, now, &v, &bytes, &blocks, &nostack);
	size_t shown = !a->cfg->top || n < a->cfg->top ? n : (size_t)a->cfg->top; /* (-n 0: all) */
	static struct ht_frame f[256];
	char b1[32], b2[32];
	if (a->cfg->po.json) {
		struct ht_json j;
		ht_json__init(&j, stdout, 0);
		ht_json__obj_begin(&j, NULL);
		ht_probe__json_head(&j, ps, "attach");
		ht_json__bool(&j, "final", final);
		ht_json__u64(&j, "sample_every", a->cfg->sample);
		ht_json__u64(&j, "older_ns", a->cfg->older);
		ht_json__u64(&j, "outstanding_bytes", bytes);
		ht_json__u64(&j, "outstanding_blocks", blocks);
		ht_json__u64(&j, "stacks", n);
		ht_json__u64(&j, "events", a->events);
		ht_json__arr_begin(&j, "entries");
		for (size_t i = 0; i < shown; i++) {
			ht_json__obj_begin(&j, NULL);
			ht_json__u64(&j, "bytes", v[i]->bytes);
			ht_json__u64(&j, "blocks", v[i]->blocks);
			ht_json__u64(&j, "oldest_age_ns", now > v[i]->oldest ? now - v[i]->oldest : 0);
			ht_json__bool(&j, "stack_cut", v[i]->cut);
			ht_json__arr_begin(&j, "stack");
			size_t nf = frames_of(a, v[i], f, 256);
			for (size_t k = 0; k < nf; k++)
				ht_blocks__json_frame(&j, &f[k]);
			ht_json__arr_end(&j);
			ht_json__obj_end(&j);
		}
		ht_json__arr_end(&j);
		ht_json__obj_end(&j);
		ht_json__finish(&j);
	} else {
		time_t t = time(NULL);
		struct tm tm;
		localtime_r(&t, &tm);
		printf("[%02d:%02d:%02d] pid %d: %s in %" PRIu64 " block%s outstanding%s%s",
		       tm.tm_hour, tm.tm_min, tm.tm_sec, (int)a->pid, ht_fmt_bytes(b1, bytes), blocks,
		       ht_s(blocks),
		       a->cfg->older ? " older than " : "",
		       a->cfg->older ? ht_fmt_ns(b2, a->cfg->older) : "");
		if (a->cfg->sample > 1)
			printf(" (estimated from 1 in %" PRIu64 " allocations)", a->cfg->sample);
		printf(", %zu stack%s%s\n", n, ht_s(n), shown < n ? ", the largest:" : "");
		for (size_t i = 0; i < shown; i++) {
			printf("%12s in %6" PRIu64 " blocks, oldest %9s  ", ht_fmt_bytes(b1, v[i]->bytes),
			       v[i]->blocks, ht_fmt_ns(b2, now > v[i]->oldest ? now - v[i]->oldest : 0));
			size_t nf = frames_of(a, v[i], f, 256);
			if (!nf)
				printf(v[i]->cut ? "[stack cut]" : "[no stack]");
			ht_blocks__print_frames(stdout, f, nf, a->cfg->depth);
			if (nf && v[i]->cut && nf <= a->cfg->depth)
				printf(" <- [cut]"); /* (the next frame was not code) */
			printf("\n");
		}
		printf("\n");
	}
	fflush(stdout);
	free(v);
}

/* ---- the target -------------------------------------------------------------- */

/* The allocator's file: --lib, else a known allocator library mapped in the
 * process, else the libc it maps.  Returns 0, or -1 after an error. */
static int find_allocator(struct attach *a, const struct ht_module *mods, size_t n, char *path,
			  size_t len)
{
	if (a->cfg->lib) {
		snprintf(path, len, "%s", a->cfg->lib);
		const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		a->is_glibc = !strncmp(base, "libc.so", 7) || !strncmp(base, "libc-", 5);
		struct stat lst, mst;
		if (stat(path, &lst) < 0) {
			ht_error("attach: --lib %s: %s", path, strerror(errno));
			return -1;
		}
		if (a->cfg->po.command)
			return 0; /* (the command maps nothing yet) */
		for (size_t i = 0; i < n; i++)
			if (mods[i].path[0] == '/' && stat(mods[i].path, &mst) == 0 &&
			    mst.st_dev == lst.st_dev && mst.st_ino == lst.st_ino)
				return 0;
		ht_warning("attach: pid %d does not map %s (--lib): its probes will see no call of "
			   "the process (/proc/%d/maps lists the files it maps)",
			   (int)a->pid, path, (int)a->pid);
		return 0;
	}
	for (size_t k = 0; k < sizeof(alt_allocators) / sizeof(alt_allocators[0]); k++)
		for (size_t i = 0; i < n; i++) {
			const char *base = strrchr(mods[i].path, '/');
			base = base ? base + 1 : mods[i].path;
			if (!strncmp(base, alt_allocators[k], strlen(alt_allocators[k]))) {
				ht_proc__file(a->pid, mods[i].path, path, len);
				return 0;
			}
		}
	for (size_t i = 0; i < n; i++) {
		const char *base = strrchr(mods[i].path, '/');
		base = base ? base + 1 : mods[i].path;
		if (!strncmp(base, "libc.so", 7) || !strncmp(base, "libc-", 5)) {
			ht_proc__file(a->pid, mods[i].path, path, len);
			a->is_glibc = 1;
			return 0;
		}
	}
	/* a static program: its own malloc */
	for (size_t i = 0; i < n; i++) {
		uint64_t off;
		char file[PATH_MAX];
		ht_proc__file(a->pid, mods[i].path, file, sizeof(file));
		if (ht_elf__func_offset(file, "malloc", &off, NULL) == 0) {
			snprintf(path, len, "%s", file);
			a->is_glibc = 1; /* glibc's, statically linked (the usual case) */
			return 0;
		}
	}
	ht_error("attach: process %d maps no libc, jemalloc, tcmalloc or mimalloc, and defines no "
		 "malloc: name the allocator's file with --lib",
		 (int)a->pid);
	return -1;
}

/* The libc this program uses, for -c (the command has not mapped its own
 * yet when the probes go in: they go on the file). */
static int own_libc(struct attach *a, char *path, size_t len)
{
	if (ht_procsyms__load(a->syms, getpid()) < 0)
		return -1;
	size_t n = 0;
	const struct ht_module *m = ht_procsyms__modules(a->syms, getpid(), &n);
	for (size_t i = 0; i < n; i++) {
		const char *base = strrchr(m[i].path, '/');
		base = base ? base + 1 : m[i].path;
		if (!strncmp(base, "libc.so", 7)) {
			snprintf(path, len, "%s", m[i].path);
			return 0;
		}
	}
	return -1;
}

/* /proc/PID/FILE, at most 8 KiB, NUL-terminated (length in *len). */
static char *read_small(const char *file, pid_t pid, size_t *len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char *buf = ht_xrealloc(NULL, 8193);
	*len = fread(buf, 1, 8192, f);
	buf[*len] = 0;
	fclose(f);
	return buf;
}

/* ppid and start_brk from /proc/PID/stat (fields 4 and 47). */
static void stat_fields(pid_t pid, int32_t *ppid, uint64_t *start_brk)
{
	size_t len;
	char *s = read_small("stat", pid, &len);
	*ppid = 0;
	*start_brk = 0;
	if (!s)
		return;
	char *p = strrchr(s, ')');
	int field = 2;
	for (; p && *p; p++) {
		if (*p != ' ')
			continue;
		field++;
		if (field == 4)
			*ppid = (int32_t)strtol(p + 1, NULL, 10);
		else if (field == 47)
			*start_brk = strtoull(p + 1, NULL, 10);
	}
	free(s);
}

/* Whether pid has not exited (a zombie has). */
static int running(pid_t pid)
{
	size_t len;
	char *s = read_small("stat", pid, &len);
	const char *rp = s ? strrchr(s, ')') : NULL;
	char state = 0;
	if (rp)
		sscanf(rp + 1, " %c", &state);
	free(s);
	return rp && state != 'Z' && state != 'X';
}

/* Says why pid's map cannot be read, if it has no user memory to trace (a
 * kernel thread, a zombie) or is gone: 1 after the error, else 0. */
static int no_memory(pid_t pid)
{
	size_t len;
	char *s = read_small("stat", pid, &len);
	const char *rp = s ? strrchr(s, ')') : NULL;
	unsigned long long flags = 0;
	char state = 0;
	if (rp)
		sscanf(rp + 1, " %c %*d %*d %*d %*d %*d %llu", &state, &flags);
	free(s);
	if (!rp)
		ht_error("attach: cannot read /proc/%d/maps: the process is gone", (int)pid);
	else if (flags & 0x00200000) /* PF_KTHREAD */
		ht_error("attach: %d is a kernel thread: it has no user memory and no allocator to "
			 "trace",
			 (int)pid);
	else if (state == 'Z' || state == 'X')
		ht_error("attach: %d is a zombie (it has exited; its parent has not waited for "
			 "it): it has no memory left to trace",
			 (int)pid);
	else
		return 0;
	return 1;
}

static struct ht_writer *open_trace(struct attach *a, uint64_t start)
{
	struct ht_writer_info wi;
	memset(&wi, 0, sizeof(wi));
	size_t clen = 0;
	char *cmdline = read_small("cmdline", a->pid, &clen);
	char exe[PATH_MAX], link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)a->pid);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	wi.pid = a->pid;
	stat_fields(a->pid, &wi.ppid, &wi.start_brk);
	wi.cmdline = cmdline;
	wi.cmdline_len = clen;
	wi.exe = exe;
	wi.start_mono_ns = start;
	/* every event is dated on the side of its call that orders it: a
	 * free at its entry, an allocation at its return, a realloc's release
	 * at its entry (its duration): docs/FORMAT.md, "Ordering guarantee" */
	wi.flags = HT_FILE_F_ORDERED;
	if (a->cfg->sample > 1) {
		wi.flags |= HT_FILE_F_SAMPLED | HT_FILE_F_SAMPLE_EVERY;
		wi.sample_every = (uint32_t)a->cfg->sample;
	}
	char err[512];
	struct ht_writer *w = ht_writer__open(a->cfg->output, &wi, err, sizeof(err));
	if (!w)
		ht_error("attach: %s", err);
	free(cmdline);
	return w;
}

/* A clock sample with the target's RSS (timeline's RSS curve), at most
 * every 10 ms (HEAPTRAIL_RSS_INTERVAL's default). */
static void trace_rss(struct attach *a)
{
	uint64_t t = ht_clock_ns();
	if (t - a->last_rss < 10000000u || a->trace_end)
		return;
	a->last_rss = t;
	size_t len;
	char *s = read_small("statm", a->pid, &len);
	unsigned long long size, rss;
	if (s && sscanf(s, "%llu %llu", &size, &rss) == 2)
		ht_writer__clock(a->w, t, rss * (uint64_t)(sysconf(_SC_PAGESIZE) / 1024));
	free(s);
}

/* Writes the target's modules into the trace (at the end: the libraries
 * dlopened meanwhile are in the map by then). */
static void trace_modules(struct attach *a)
{
	size_t n = 0;
	const struct ht_module *m = ht_procsyms__modules(a->syms, a->pid, &n);
	for (size_t i = 0; i < n; i++)
		ht_writer__module(a->w, m[i].base, m[i].lo, m[i].hi, m[i].path, m[i].build_id,
				  m[i].build_id_len);
}

/* Says which of the process's files were deleted or replaced since it
 * mapped them (an upgrade while it runs), and whether they could be read
 * all the same. */
static void stale_notes(struct attach *a)
{
	const char *path;
	int deleted, readable;
	size_t n = ht_procsyms__stale(a->syms, 0, &path, &deleted, &readable);
	for (size_t i = 0; i < n; i++) {
		ht_procsyms__stale(a->syms, i, &path, &deleted, &readable);
		const char *what = deleted ? "deleted" : "replaced by another file";
		if (readable)
			fprintf(stderr,
				"heaptrail attach: %s was %s since pid %d mapped it: its symbols "
				"were read through /proc/%d/map_files\n",
				path, what, (int)a->pid, (int)a->pid);
		else
			ht_warning("attach: %s was %s since pid %d mapped it, and "
				   "/proc/%d/map_files cannot be read (%s): its frames are shown "
				   "as addresses",
				   path, what, (int)a->pid, (int)a->pid,
				   geteuid() ? "not root" : "the process was gone");
	}
}

static void on_target_exit(void *ctx, pid_t pid)
{
	struct attach *a = ctx;
	/* its map can still be read: the stacks not read yet are looked up
	 * in it (stack_of), then it is read for the end */
	if (a->rb)
		ring_buffer__consume(a->rb);
	ht_procsyms__load(a->syms, pid);
	/* (-c's command, at its exit stop: how it ends, for the trace) */
	unsigned long st = 0;
	if (ptrace(PTRACE_GETEVENTMSG, pid, NULL, &st) == 0 && WIFSIGNALED((int)st))
		a->signal = WTERMSIG((int)st);
}
#endif /* HT_HAVE_BPF */

int cmd_attach(int argc, char **argv)
{
	struct attach_config cfg = {.top = 10, .sample = 1, .depth = 3, .max_blocks = 1 << 20};
	const struct ht_option opts[] = {
		/* HT_PROBE_OPTIONS but -p's text: attach has no every-process mode */
		{'p', "pid", HT_OPT_U64, &cfg.po.pid, "PID", "trace this process (or -c)"},
		{'c', "command", HT_OPT_STRING, &cfg.po.command, "CMD",
		 "start CMD (split at blanks, no shell), trace it, stop when it exits"},
		{'d', "duration", HT_OPT_DURATION_POS, &cfg.po.duration, "TIME",
		 "stop after TIME, e.g. 10s, 500ms (until Ctrl-C or the target exits)"},
		{0, "json", HT_OPT_FLAG, &cfg.po.json, NULL, "JSON output, for scripts"},
		{0, "check", HT_OPT_FLAG, &cfg.po.check, NULL,
		 "only check that BPF can be used here: exit 0, or 3 with what is missing"},
		{'n', "top", HT_OPT_U64, &cfg.top, "N",
		 "stacks per report, by outstanding bytes (10; 0: all)"},
		{0, "older", HT_OPT_DURATION, &cfg.older, "TIME",
		 "only blocks outstanding for longer than TIME, e.g. 5s (all)"},
		{'s', "sample", HT_OPT_U64, &cfg.sample, "N",
		 "trace 1 in N allocation calls; figures are scaled by N (1: every call)"},
		{0, "depth", HT_OPT_U64, &cfg.depth, "N", "frames shown per stack in the text output (3)"},
		{0, "max-blocks", HT_OPT_U64, &cfg.max_blocks, "N",
		 "traced blocks the kernel side can keep live (1048576)"},
		{0, "lib", HT_OPT_STRING, &cfg.lib, "FILE",
		 "the allocator's file to probe (the process's jemalloc, tcmalloc, mimalloc, else libc)"},
		{0, "at-entry", HT_OPT_FLAG, &cfg.at_entry, NULL,
		 "probe each function at its first instruction, not at a cheaper one just after"},
		{'o', "output", HT_OPT_STRING, &cfg.output, "FILE",
		 "also write a heaptrail trace of the traced calls (with stacks)"},
		{0},
	};
	int ret = HT_EXIT_USAGE, rc;
	struct attach a;
	struct ht_probe_session *ps = NULL;
	memset(&a, 0, sizeof(a));
	a.cfg = &cfg;
	a.stack_fd = -1;
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if ((rc = ht_probe__usage(&cfg.po, nargs, argv, "attach", HT_PROBE_TICKS)))
		return rc;
	if (!cfg.po.pid && !cfg.po.command && !cfg.po.check) {
		ht_error("attach: which process? -p PID or -c COMMAND; usage: heaptrail attach -p PID "
			 "[options] [INTERVAL [COUNT]]");
		return HT_EXIT_USAGE;
	}
	if (cfg.sample < 1 || cfg.sample > UINT32_MAX) {
		ht_error("attach: --sample %" PRIu64 ": give a number from 1 (every call) up",
			 cfg.sample);
		return HT_EXIT_USAGE;
	}
	if (!cfg.depth) {
		ht_error("attach: --depth 0: a row shows at least one frame: give 1 or more (3)");
		return HT_EXIT_USAGE;
	}
	if (cfg.max_blocks < 1024 || cfg.max_blocks > (1u << 26)) {
		ht_error("attach: --max-blocks %" PRIu64 ": give 1024 to 67108864", cfg.max_blocks);
		return HT_EXIT_USAGE;
	}
	if (cfg.po.pid && kill((pid_t)cfg.po.pid, 0) < 0 && errno == ESRCH) {
		/* (2, as every probe command's -p of no process: the
		 * argument is what is wrong) */
		ht_error("attach: no process %" PRIu64 " (is it still running?)", cfg.po.pid);
		return HT_EXIT_USAGE;
	}
	if (cfg.lib) {
		/* (2, before any probe or command, as report --compare and
		 * leaks --suppressions: the option is what is wrong) */
		struct stat lst;
		const char *why = stat(cfg.lib, &lst) < 0 ? strerror(errno)
				  : !S_ISREG(lst.st_mode) ? "not a file: name the allocator library"
							  : NULL;
		if (why) {
			ht_error("attach: --lib %s: %s", cfg.lib, why);
			return HT_EXIT_USAGE;
		}
	}
	if ((rc = ht_probe__check("attach", &cfg.po)))
		return rc < 0 ? HT_EXIT_OK : rc;
	char oerr[512];
	if (cfg.output && ht_out__check_data(cfg.output, oerr, sizeof(oerr))) {
		/* (the trace is renamed into place at the end: a directory
		 * there would lose it after the whole session.  A trace there
		 * may be replaced, as compact's and convert's outputs may:
		 * the check of what writes traces, docs/output-files.md) */
		ht_error("attach: %s", oerr);
		return HT_EXIT_DATA;
	}
#ifndef HT_HAVE_BPF
	(void)ps;
	(void)ret;
	return HT_EXIT_NOBPF; /* (ht_probe__check said why) */
#else
	struct attach_bpf *skel = NULL;
	struct bpf_link **links = NULL;
	struct ring_buffer *rb = NULL;
	size_t nlinks = 0;
	char lib[PATH_MAX];
	ret = HT_EXIT_DATA;
	struct ht_symbol_opts so = {0};
	a.syms = ht_procsyms__new(&so);
	if ((rc = ht_probe__start(&ps, &cfg.po, "attach"))) {
		ret = rc;
		goto cleanup;
	}
	a.pid = ht_probe__tgid(ps);
	ht_probe__on_exit(ps, on_target_exit, &a);
	if (cfg.po.command && !cfg.lib) {
		if (own_libc(&a, lib, sizeof(lib)) < 0) {
			ht_error("attach: cannot find the libc to probe for -c: name it with --lib");
			goto cleanup;
		}
		a.is_glibc = 1;
	} else {
		if (ht_procsyms__load(a.syms, a.pid) < 0) {
			char maps[64];
			snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)a.pid);
			int why = 0, fd = open(maps, O_RDONLY | O_CLOEXEC);
			char c;
			if (fd < 0 || read(fd, &c, 1) < 0)
				why = errno;
			if (fd >= 0)
				close(fd);
			if (no_memory(a.pid))
				goto cleanup;
			if (!cfg.lib) { /* (it ended with no word: exit 1) */
				ht_error(
				    "attach: cannot read %s%s%s: its modules are needed to find "
				    "the allocator (another user's process, or one this user may "
				    "not inspect?)",
				    maps, why ? ": " : "", why ? strerror(why) : "");
				goto cleanup;
			}
		}
		size_t nm = 0;
		const struct ht_module *mods = ht_procsyms__modules(a.syms, a.pid, &nm);
		if (find_allocator(&a, mods, nm, lib, sizeof(lib)) < 0)
			goto cleanup;
	}

	/* the trace first: a bad -o path fails before any probe goes in */
	if (cfg.output && !(a.w = open_trace(&a, ht_clock_ns())))
		goto cleanup;
	skel = attach_bpf__open();
	if (!skel) {
		ht_error("attach: cannot open the BPF program: %s", strerror(errno));
		goto cleanup;
	}
	skel->rodata->target_tgid = (uint32_t)a.pid;
	skel->rodata->sample_every = (uint32_t)cfg.sample;
	skel->rodata->is_glibc = (uint8_t)a.is_glibc;
	bpf_map__set_max_entries(skel->maps.traced, (uint32_t)cfg.max_blocks);
	if (attach_bpf__load(skel)) {
		ht_error("attach: cannot load the BPF program: %s (heaptrail attach --check says "
			 "what is missing)", strerror(errno));
		goto cleanup;
	}
	a.stack_fd = bpf_map__fd(skel->maps.stacks);
	struct bpf_program *enter_prog[] = {
		[HT_EV_MALLOC] = skel->progs.malloc_enter,
		[HT_EV_FREE] = skel->progs.free_enter,
		[HT_EV_CALLOC] = skel->progs.calloc_enter,
		[HT_EV_REALLOC] = skel->progs.realloc_enter,
		[HT_EV_MEMALIGN] = skel->progs.memalign_enter,
		[HT_EV_POSIX_MEMALIGN] = skel->progs.posix_memalign_enter,
		[HT_EV_ALIGNED_ALLOC] = skel->progs.aligned_alloc_enter,
		[HT_EV_VALLOC] = skel->progs.valloc_enter,
		[HT_EV_PVALLOC] = skel->progs.pvalloc_enter,
	};
	a.lib = lib;
	links = ht_xrealloc(NULL, (2 * NPROBE_FNS + 1) * sizeof(*links));
	char probed[512] = "";
	for (size_t i = 0; i < NPROBE_FNS; i++) {
		uint64_t off, fsize;
		if (a.is_glibc && i >= NSTD_FNS)
			continue; /* libstdc++'s operators call malloc */
		if (ht_elf__func_offset(lib, probe_fns[i].name, &off, &fsize) < 0) {
			if (i < 2) {
				ht_error("attach: %s defines no %s: not an allocator (--lib)", lib,
					 probe_fns[i].name);
				goto cleanup;
			}
			continue;
		}
		uint64_t entry = off;
		if (!cfg.at_entry)
			off = ht_elf__probe_offset(lib, off, fsize);
		struct bpf_link *l = bpf_program__attach_uprobe(enter_prog[probe_fns[i].kind], false,
								a.pid, lib, off);
		if (!l) {
			ht_error("attach: cannot put a uprobe on %s in %s: %s", probe_fns[i].name, lib,
				 strerror(errno));
			goto cleanup;
		}
		links[nlinks++] = l;
		if (probe_fns[i].ret) {
			l = bpf_program__attach_uprobe(skel->progs.alloc_exit, true, a.pid, lib, off);
			if (!l) {
				ht_error("attach: cannot put a uretprobe on %s in %s: %s",
					 probe_fns[i].name, lib, strerror(errno));
				goto cleanup;
			}
			links[nlinks++] = l;
		}
		size_t pl = strlen(probed);
		snprintf(probed + pl, sizeof(probed) - pl, "%s%s", pl ? " " : "", probe_fns[i].name);
		pl = strlen(probed);
		if (off != entry)
			snprintf(probed + pl, sizeof(probed) - pl, "+%" PRIu64, off - entry);
	}
	/* execs: the blocks of the image before go with it */
	links[nlinks] = bpf_program__attach(skel->progs.on_exec);
	if (!links[nlinks]) {
		ht_error("attach: cannot attach to the exec tracepoint: %s", strerror(errno));
		goto cleanup;
	}
	nlinks++;
	rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_event, &a, NULL);
	if (!rb) {
		ht_error("attach: cannot set up the ring buffer: %s", strerror(errno));
		goto cleanup;
	}
	a.rb = rb;
	/* every probe is in: the calls are traced from now on (a call whose
	 * entry probe was in before its return probe was never seen to
	 * return, and hid its thread's calls: attach.bpf.c) */
	skel->bss->armed = 1;
	char every[64] = "";
	if (cfg.sample > 1)
		snprintf(every, sizeof(every), ", 1 in %" PRIu64 " allocation calls", cfg.sample);
	/* the clocks start before the line (a script waits for it, then
	 * makes the calls whose ages it checks) */
	if (ht_probe__go(ps))
		goto cleanup;
	fprintf(stderr, "heaptrail attach: tracing pid %d: %s in %s%s; Ctrl-C to detach\n",
		(int)a.pid, probed, lib, every);
	enum ht_probe_step st;
	if (a.w)
		trace_rss(&a);
	int last_due = 0; /* the COUNT-th report, made once detached (below) */
	while ((st = ht_probe__step(ps, rb)) != HT_PROBE_STOP) {
		if (st == HT_PROBE_TICK && ht_probe__reason(ps) && !ht_probe__final_due(ps)) {
			last_due = 1;
			break;
		}
		if (st == HT_PROBE_TICK)
			report(&a, ps, 0);
		if (a.w)
			trace_rss(&a);
	}
	/* tracing ends here: the counters, the ages of the last report and
	 * the trace's end are taken now; what the probes still see while they
	 * are removed is dropped */
	a.end = ht_probe__now(ps);
	skel->bss->armed = 0; /* (the probes go out one by one, as they came in) */
	uint64_t st_v[HT_AS_NR];
	for (uint32_t k = 0; k < HT_AS_NR; k++) {
		st_v[k] = 0;
		bpf_map_lookup_elem(bpf_map__fd(skel->maps.stats), &k, &st_v[k]);
	}
	/* detach first: the process runs on untraced while we report */
	for (size_t i = 0; i < nlinks; i++)
		bpf_link__destroy(links[i]);
	nlinks = 0;
	ring_buffer__consume(rb);
	if (kill(a.pid, 0) == 0)
		ht_procsyms__load(a.syms, a.pid); /* libraries dlopened meanwhile */
	if (!cfg.po.interval || !cfg.po.count)
		report(&a, ps, 1);
	else if (last_due)
		/* (after the ring is read to its end, as the trace -o writes it:
		 * the last of COUNT reports was made before, and disagreed with
		 * the trace by what came meanwhile) */
		report(&a, ps, 0);
	if (st_v[HT_AS_LOST] || st_v[HT_AS_FULL])
		ht_warning("attach: %" PRIu64 " events lost (ring buffer full), %" PRIu64
			   " blocks not traced (more than --max-blocks live): the figures are low",
			   st_v[HT_AS_LOST], st_v[HT_AS_FULL]);
	if (st_v[HT_AS_REUSED])
		ht_warning("attach: %" PRIu64 " traced blocks were freed by calls the probes do not "
			   "see (their addresses were handed out again): each counts as freed when "
			   "its address was reused",
			   st_v[HT_AS_REUSED]);
	if (st_v[HT_AS_NOSTACK])
		ht_warning("attach: the stacks of %" PRIu64
			   " allocation%s not taken: the kernel could not walk them (a page of "
			   "the stack not in memory); their blocks are counted without a stack",
			   st_v[HT_AS_NOSTACK], ht_s(st_v[HT_AS_NOSTACK]));
	if (st_v[HT_AS_STACKS_FULL])
		ht_warning("attach: the stacks of %" PRIu64
			   " allocation%s not kept: the stack map holds %u distinct stacks as "
			   "the kernel walked them (through code without frame pointers, "
			   "often one a call); their blocks are counted without a stack",
			   st_v[HT_AS_STACKS_FULL], ht_s(st_v[HT_AS_STACKS_FULL]),
			   HT_ATTACH_STACKS);
	fprintf(stderr, "heaptrail attach: detached from pid %d (%s): %" PRIu64 " allocation calls, "
		"%" PRIu64 " traced, %" PRIu64 " frees of traced blocks\n",
		(int)a.pid, ht_probe__reason(ps) ? ht_probe__reason(ps) : "stopped",
		st_v[HT_AS_CALLS], a.allocs, a.frees);
	stale_notes(&a);
	ret = HT_EXIT_OK;
	if (a.w) {
		char err[512];
		if (!a.trace_end)
			trace_modules(&a);
		struct ht_writer *w = a.w;
		a.w = NULL;
		/* the process runs on (not gone, not a zombie): its blocks live
		 * at the end were live when tracing stopped, not at its exit */
		if (!a.trace_end && kill(a.pid, 0) == 0 && running(a.pid))
			ht_writer__flags(w, HT_FILE_F_DETACHED);
		/* the calls the trace lacks (readers warn: it read as whole
		 * with no word before), and a signal the command died of */
		ht_writer__flags(w, HT_FILE_F_PROBED);
		ht_writer__end_notes(w, st_v[HT_AS_LOST] + st_v[HT_AS_FULL],
				     a.trace_end ? 0 : a.signal);
		if (a.failed ||
		    ht_writer__close(w, a.trace_end ? a.trace_end : a.end, err, sizeof(err)) < 0) {
			ht_error("attach: %s", a.failed ? "writing the trace failed" : err);
			ret = HT_EXIT_DATA;
		}
	}
	rc = ht_probe__end(ps);
	ps = NULL;
	if (cfg.po.command && ret == HT_EXIT_OK)
		ret = rc; /* the command's exit status, as for the other probe commands */
cleanup:
	for (size_t i = 0; i < nlinks; i++)
		bpf_link__destroy(links[i]);
	free(links);
	ring_buffer__free(rb);
	attach_bpf__destroy(skel);
	if (ps)
		ht_probe__end(ps);
	if (a.w)
		ht_writer__abort(a.w);
	for (size_t i = 0; i < a.nstacks; i++)
		free(a.stacks[i].ips);
	free(a.stacks);
	free(a.refs);
	free(a.byref.slot);
	free(a.bykey.slot);
	free(a.blocks);
	if (a.syms)
		ht_procsyms__free(a.syms);
	return ret;
#endif
}
