/* Live blocks and stacks for the analyzers (blocks.h). */
#define _GNU_SOURCE
#include "blocks.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "common/json.h"
#include "common/util.h"
#include "symbols/perfmap.h"

#define MAX_DEPTH 256 /* return addresses read per stack */

/* ---- symbols made ready while the events are read ---------------------- */

/* One request at a time (a command symbolizes one trace): asked before
 * the trace is opened, bound to the reader that opens next, started at
 * its first progress tick, taken by ht_blocks__symbolizer. */
static struct {
	int asked;                 /* ht_blocks__symbols_ahead was called */
	struct ht_reader *r;       /* the reader it is for, once opened */
	char *sysroot, *debug_dir; /* the symbolizer's options */
	struct ht_symbolizer *sym; /* made from the modules known at the start */
	uint8_t *want;             /* the modules to prepare */
	pthread_t thread;          /* preparing sym */
	int running;               /* thread not joined yet */
} ahead;

static void *prepare_main(void *arg)
{
	(void)arg;
	ht_symbolizer__prepare(ahead.sym, ahead.want);
	return NULL;
}

static void ahead_join(void)
{
	if (ahead.running) {
		pthread_join(ahead.thread, NULL);
		ahead.running = 0;
	}
}

/* (ht_analyze__tick: the first reader that ticks is the command's) */
static void symbols_tick(struct ht_reader *r)
{
	if (!ahead.asked)
		return;
	ahead.asked = 0; /* one try */
	ahead.r = r;
	const struct ht_module *mods;
	size_t nmods = ht_reader__modules(r, &mods), nwant = 0;
	/* the modules of the stacks read so far: those of the rest are
	 * mostly the same, and a module no stack needs is not worth loading */
	ahead.want = calloc(nmods ? nmods : 1, 1);
	if (!ahead.want)
		return;
	for (size_t n = 1, nn = ht_reader__nnodes(r); n < nn; n++) {
		int m = ht_reader__node_module(r, (uint32_t)n);
		if (m >= 0 && (size_t)m < nmods && !ahead.want[m]) {
			ahead.want[m] = 1;
			nwant++;
		}
	}
	if (!nwant)
		return;
	struct ht_symbol_opts so = {ahead.sysroot, ahead.debug_dir};
	ahead.sym = ht_symbolizer__new(mods, nmods, &so);
	if (!ahead.sym)
		return;
	if (pthread_create(&ahead.thread, NULL, prepare_main, NULL) == 0) {
		ahead.running = 1;
		atexit(ahead_join); /* (an exit before the symbols are asked for) */
	}
}

void ht_blocks__symbols_ahead(const char *sysroot, const char *debug_dir)
{
	/* another CPU, and not told to use one thread (-j 1) */
	if (ht_threads == 1 || sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return;
	ahead.asked = 1;
	ht_analyze__tick = symbols_tick;
	ahead.sysroot = sysroot ? ht_xstrdup(sysroot) : NULL;
	ahead.debug_dir = debug_dir ? ht_xstrdup(debug_dir) : NULL;
}

/* The perf map of the traced process's JIT, /tmp/perf-PID.map (node
 * --perf-basic-prof, java's perf-map-agent, LuaJIT, .NET), names the
 * frames in no module: when there is one of this process, not older than
 * the recording (an earlier process's with the same pid), and
 * HEAPTRAIL_PERF_MAP is not 0.  HEAPTRAIL_PERF_MAP=FILE reads that file
 * instead (a map saved from another machine). */
static void perf_map(struct ht_reader *r, struct ht_symbolizer *sym)
{
	const struct ht_trace_info *in = ht_reader__info(r);
	const char *env = getenv("HEAPTRAIL_PERF_MAP");
	char path[64], err[256];
	if (env && (!strcmp(env, "0") || !*env))
		return;
	if (!env) {
		struct stat st;
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)in->pid);
		if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) ||
		    (uint64_t)st.st_mtime < in->start_realtime_ns / 1000000000u)
			return;
	}
	struct ht_perfmap *m = ht_perfmap__load(env ? env : path, err, sizeof(err));
	if (!m) {
		ht_warning("%s: %s: frames in no module stay addresses", env ? env : path, err);
		return;
	}
	ht_symbolizer__set_perf_map(sym, m);
}

/* Says once, on stderr, how many stacks reached the recorder's --stacks
 * depth: their callers further out were not recorded, so they reach
 * neither main nor a thread's start, and a flame graph roots them apart.
 * (Printed without a word before: a recursion 300 deep showed 64 frames
 * of it and nothing else.)  A node at that depth is one: a stack's nodes
 * number from the outermost frame recorded in. */
static void depth_note(struct ht_reader *r)
{
	const struct ht_trace_info *in = ht_reader__info(r);
	size_t n = ht_reader__nnodes(r);
	struct ht_order_info o;
	ht_reader__order(r, &o);
	/* (only once the trace is read to its end: a symbolizer made while
	 * it is read, as events makes one, would count the stacks so far) */
	if (ht_quiet || !in->stack_depth || n < 2 || !o.final)
		return;
	uint16_t *depth = calloc(n, sizeof(*depth));
	if (!depth)
		return;
	uint64_t at_limit = 0;
	for (uint32_t x = 1; x < n; x++) {
		uint32_t p = ht_reader__node_parent(r, x);
		uint32_t d = 1;
		if (p && p < x) {
			d = depth[p] + 1u;
		} else if (p) { /* (a parent numbered after it: counted the long way) */
			for (uint32_t y = p; y && d <= in->stack_depth;
			     y = ht_reader__node_parent(r, y))
				d++;
		}
		depth[x] = (uint16_t)(d < 65535 ? d : 65535);
		at_limit += d == in->stack_depth;
	}
	free(depth);
	if (at_limit)
		fprintf(stderr,
			"heaptrail: note: %s: %" PRIu64
			" stack%s reached the recorder's depth of %u "
			"frames: callers beyond it, if any, were not recorded, so %s neither "
			"main nor a thread's start (a flame graph shows %s); record with a larger "
			"--stacks (at most 256) for more\n",
			ht_reader__path(r), at_limit, at_limit == 1 ? "" : "s", in->stack_depth,
			at_limit == 1 ? "it may reach" : "they may reach",
			at_limit == 1 ? "it as a root of its own" : "them as roots of their own");
}

struct ht_symbolizer *ht_blocks__symbolizer(struct ht_reader *r, const char *sysroot,
					    const char *debug_dir)
{
	const struct ht_module *mods;
	size_t nmods = ht_reader__modules(r, &mods);
	struct ht_symbol_opts so = {sysroot, debug_dir};
	struct ht_symbolizer *sym = NULL;
	if (ahead.sym && r == ahead.r) { /* made ready while the events were read */
		ahead_join();
		sym = ahead.sym;
		ahead.sym = NULL;
		ahead.r = NULL;
		free(ahead.want);
		ahead.want = NULL;
		if (ht_symbolizer__extend(sym, mods, nmods) < 0) {
			ht_symbolizer__free(sym);
			sym = NULL;
		}
	} else {
		sym = ht_symbolizer__new(mods, nmods, &so);
	}
	if (!sym) {
		ht_error("cannot set up symbolization (libdw)");
		return NULL;
	}
	perf_map(r, sym);
	depth_note(r);
	const char *prob = ht_symbolizer__problems(sym);
	if (prob) /* (one line per module, the last ends in a newline) */
		ht_warning("some stacks will show addresses only:\n%.*s", (int)strlen(prob) - 1, prob);
	return sym;
}


static uint64_t fold_frame(uint64_t h, const struct ht_frame *f)
{
	h = ht_hash_str(h, f->function);
	h = ht_hash_str(h, f->file);
	h = ht_hash_str(h, f->module);
	h = (h ^ (uint64_t)f->line ^ ((uint64_t)f->inlined << 32)) * 0x100000001B3ull;
	if (!f->function && !f->file)
		h = (h ^ f->offset) * 0x100000001B3ull;
	return h;
}

uint64_t ht_blocks__stack_key(struct ht_reader *r, struct ht_symbolizer *sym, uint32_t node,
			      uint64_t *memo)
{
	if (!node)
		return 0;
	uint32_t chain[MAX_DEPTH + 1];
	size_t n = 0;
	/* up to the outermost node, or to one folded before */
	for (uint32_t x = node; x && !memo[x] && n <= MAX_DEPTH; x = ht_reader__node_parent(r, x))
		chain[n++] = x;
	uint64_t h = 0xcbf29ce484222325ull;
	if (n && ht_reader__node_parent(r, chain[n - 1]))
		h = memo[ht_reader__node_parent(r, chain[n - 1])];
	else if (!n)
		return memo[node];
	while (n--) {
		const struct ht_frame *f;
		uint32_t x = chain[n];
		size_t nf = ht_symbolizer__resolve_in(sym, ht_reader__node_ip(r, x),
						      ht_reader__node_module(r, x), &f);
		for (size_t j = nf; j-- > 0;) /* (a node's frames come innermost first) */
			if (!ht_symbols__is_recorder(f[j].module))
				h = fold_frame(h, &f[j]);
		if (!h)
			h = 1; /* (0 is "not yet": part of the fold, the same on every path) */
		memo[x] = h;
	}
	return memo[node];
}

const char *ht_blocks__no_stack_why(const struct ht_reader *r)
{
	return ht_reader__nnodes(r) ? "not taken when they were recorded" : "record with --stacks";
}

const char *ht_blocks__no_stack_frame(const struct ht_reader *r)
{
	return ht_reader__nnodes(r) ? "[no stack: not taken when they were recorded]"
				    : "[no stacks: record with --stacks]";
}

size_t ht_blocks__frames(struct ht_reader *r, struct ht_symbolizer *sym, uint32_t node,
			 struct ht_frame *out, size_t max)
{
	size_t k = 0;
	for (size_t i = 0; node && i < MAX_DEPTH && k < max; i++) {
		const struct ht_frame *f;
		size_t nf = ht_symbolizer__resolve_in(sym, ht_reader__node_ip(r, node),
						      ht_reader__node_module(r, node), &f);
		node = ht_reader__node_parent(r, node);
		for (size_t j = 0; j < nf && k < max; j++)
			if (!ht_symbols__is_recorder(f[j].module))
				out[k++] = f[j]; /* the tracer's own wrappers are noise */
	}
	return k;
}

/* snprintf(buf, len, "%s+0x%llx", module, x), or "0x%llx" without a
 * module: the same bytes, cut short the same way. */
static void put_hex_name(char *buf, size_t len, const char *module, uint64_t x)
{
	char tail[24]; /* "+0x" or "0x", then the digits, at its end */
	size_t t = sizeof(tail);
	do
		tail[--t] = "0123456789abcdef"[x & 15];
	while (x >>= 4);
	tail[--t] = 'x';
	tail[--t] = '0';
	if (module)
		tail[--t] = '+';
	if (!len)
		return;
	size_t room = len - 1, ml = module ? strlen(module) : 0;
	size_t k = ml < room ? ml : room;
	memcpy(buf, module ? module : "", k);
	size_t n = sizeof(tail) - t < room - k ? sizeof(tail) - t : room - k;
	memcpy(buf + k, tail + t, n);
	buf[k + n] = 0;
}

const char *ht_blocks__frame_name(char *buf, size_t len, const struct ht_frame *f)
{
	if (f->function)
		return f->function;
	put_hex_name(buf, len, f->module, f->module ? f->offset : f->ip);
	return buf;
}

void ht_blocks__print_frames(FILE *out, const struct ht_frame *f, size_t n, size_t depth)
{
	for (size_t i = 0; i < n && i < depth; i++) {
		char name[1024];
		fprintf(out, "%s%s", i ? " <- " : "", ht_blocks__frame_name(name, sizeof(name), &f[i]));
		if (f[i].file) {
			const char *slash = strrchr(f[i].file, '/');
			if (f[i].line)
				fprintf(out, " (%s:%d)", slash ? slash + 1 : f[i].file, f[i].line);
			else /* no line known, or a row summing several */
				fprintf(out, " (%s)", slash ? slash + 1 : f[i].file);
		}
	}
}

void ht_blocks__merge_site(struct ht_frame *into, const struct ht_frame *f)
{
	if (into->line != f->line)
		into->line = 0;
	if (into->file && (!f->file || strcmp(into->file, f->file))) {
		into->file = NULL;
		into->line = 0;
	}
}

void ht_blocks__json_frame(struct ht_json *j, const struct ht_frame *f)
{
	char addr[32];
	ht_json__obj_begin(j, NULL);
	if (f->function)
		ht_json__str(j, "function", f->function);
	else
		ht_json__null(j, "function");
	if (f->file)
		ht_json__str(j, "file", f->file);
	else
		ht_json__null(j, "file");
	ht_json__u64(j, "line", (uint64_t)f->line);
	if (f->module)
		ht_json__str(j, "module", f->module);
	else
		ht_json__null(j, "module");
	snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)f->offset);
	ht_json__str(j, "offset", addr);
	/* the address itself: all there is of a frame outside any module (the
	 * text shows it; offset is 0 there) */
	snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)f->ip);
	ht_json__str(j, "address", addr);
	ht_json__bool(j, "inlined", f->inlined);
	ht_json__obj_end(j);
}
