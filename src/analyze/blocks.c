/* Live blocks and stacks for the analyzers (blocks.h). */
#define _GNU_SOURCE
#include "blocks.h"

#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"

#define MAX_DEPTH 256 /* return addresses read per stack */

struct ht_symbolizer *ht_blocks__symbolizer(struct ht_reader *r, const char *sysroot,
					    const char *debug_dir)
{
	const struct ht_module *mods;
	size_t nmods = ht_reader__modules(r, &mods);
	struct ht_symbol_opts so = {sysroot, debug_dir};
	struct ht_symbolizer *sym = ht_symbolizer__new(mods, nmods, &so);
	if (!sym) {
		ht_error("cannot set up symbolization (libdw)");
		return NULL;
	}
	const char *prob = ht_symbolizer__problems(sym);
	if (prob) /* (one line per module, the last ends in a newline) */
		ht_warning("some stacks will show addresses only:\n%.*s", (int)strlen(prob) - 1, prob);
	return sym;
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
	if (f->function) { /* (snprintf's "%s" cut short, without its cost: the
			    * flame graphs and tables name every frame) */
		if (len) {
			size_t n = strnlen(f->function, len - 1);
			memcpy(buf, f->function, n);
			buf[n] = 0;
		}
	} else {
		put_hex_name(buf, len, f->module, f->module ? f->offset : f->ip);
	}
	return buf;
}

void ht_blocks__print_frames(FILE *out, const struct ht_frame *f, size_t n, size_t depth)
{
	for (size_t i = 0; i < n && i < depth; i++) {
		char name[1024];
		fprintf(out, "%s%s", i ? " <- " : "", ht_blocks__frame_name(name, sizeof(name), &f[i]));
		if (f[i].file) {
			const char *slash = strrchr(f[i].file, '/');
			fprintf(out, " (%s:%d)", slash ? slash + 1 : f[i].file, f[i].line);
		}
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
	ht_json__bool(j, "inlined", f->inlined);
	ht_json__obj_end(j);
}
