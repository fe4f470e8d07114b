/* heaptrail flamegraph: memory flame graphs from the stacks of a trace
 * (record --stacks), as folded stacks (flamegraph.pl, speedscope, inferno)
 * or as a self-contained interactive SVG written here (click to zoom,
 * search, tooltips with bytes and counts). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/blocks.h"
#include "analyze/stackstats.h"
#include "common/options.h"
#include "common/util.h"

#define MAX_FRAMES 1024

/* One configuration per run; each default is labelled by its flag. */
struct fg_config {
	const char *out;       /* -o, --output (stdout) */
	int folded;            /* --folded: text, not SVG */
	const char *metric;    /* --metric (allocated) */
	int reverse;           /* --reverse: callers of the allocating functions */
	uint64_t tid;          /* --thread (all) */
	const char *title;     /* --title (the metric and the command) */
	uint64_t width;        /* --width (1200) */
	const char *sysroot;   /* --sysroot */
	const char *debug_dir; /* --debug-dir */
};

enum metric { M_ALLOCATED, M_ALLOCATIONS, M_LEAKED, M_PEAK, M_TEMPORARY };

static const struct {
	const char *name;  /* as --metric takes it */
	const char *unit;  /* of the values */
	const char *title; /* default title */
} metrics[] = {
	[M_ALLOCATED] = {"allocated", "bytes", "Bytes allocated"},
	[M_ALLOCATIONS] = {"allocations", "allocations", "Allocation calls"},
	[M_LEAKED] = {"leaked", "bytes", "Bytes never freed"},
	[M_PEAK] = {"peak", "bytes", "Bytes live at the peak of the heap"},
	[M_TEMPORARY] = {"temporary", "allocations", "Temporary allocations (freed before the thread's next allocation)"},
};

static const char usage_text[] =
	"usage: heaptrail flamegraph [options] TRACE\n"
	"\n"
	"A flame graph of where memory is allocated, from a trace recorded with\n"
	"--stacks: an interactive SVG (click a frame to zoom, Search to highlight,\n"
	"hover for bytes and counts), or folded stacks for flamegraph.pl,\n"
	"speedscope and inferno.\n"
	"\n"
	"Metrics: allocated (bytes, every allocation), allocations (calls),\n"
	"leaked (bytes never freed), peak (bytes live when the heap peaked),\n"
	"temporary (allocations freed before their thread's next allocation).\n"
	"\fEXAMPLES\n"
	"  heaptrail flamegraph -o alloc.svg app.ht\n"
	"  heaptrail flamegraph -o leaks.svg --metric leaked app.ht\n"
	"  heaptrail flamegraph --folded --metric allocated app.ht > app.folded\n"
	"  heaptrail flamegraph --reverse --metric peak -o peak-callers.svg app.ht\n";

/* The metric's value of a stack, and the allocations behind it. */
static void metric_of(enum metric m, const struct ht_stackstat *st, uint64_t *value,
		      uint64_t *count)
{
	switch (m) {
	case M_ALLOCATED:
		*value = st->alloc_bytes, *count = st->alloc_calls;
		break;
	case M_ALLOCATIONS:
		*value = *count = st->alloc_calls;
		break;
	case M_LEAKED:
		*value = st->end_bytes, *count = st->end_blocks;
		break;
	case M_PEAK:
		*value = st->peak_bytes, *count = st->peak_blocks;
		break;
	case M_TEMPORARY:
		*value = *count = st->temp_calls;
		break;
	}
}

/* ---- folded stacks ------------------------------------------------------------- */

struct folded {
	char *stack;    /* frames joined by ';', outermost first (or reversed) */
	uint64_t value; /* of the metric */
	uint64_t count; /* allocations */
};

static void frame_label(char *buf, size_t len, const struct ht_frame *f)
{
	ht_blocks__frame_name(buf, len, f);
	for (char *p = buf; *p; p++)
		if (*p == ';' || *p == '\n')
			*p = ':'; /* the folded format's separators */
}

static int by_stack(const void *a, const void *b)
{
	return strcmp(((const struct folded *)a)->stack, ((const struct folded *)b)->stack);
}

/* One folded line per distinct symbolized stack, sorted, values summed. */
static struct folded *fold(struct ht_reader *r, struct ht_symbolizer *sym,
			   const struct ht_stackstats *ss, enum metric m, int reverse, size_t *nout)
{
	static struct ht_frame frames[MAX_FRAMES];
	struct folded *out = calloc(ss->n ? ss->n : 1, sizeof(*out));
	size_t n = 0;
	if (!out)
		exit(1);
	for (size_t i = 0; i < ss->cap; i++) {
		const struct ht_stackstat *st = &ss->slots[i];
		uint64_t value = 0, count = 0;
		if (!st->node)
			continue;
		metric_of(m, st, &value, &count);
		if (!value)
			continue;
		size_t nf = st->node > 1 ? ht_blocks__frames(r, sym, st->node - 1, frames, MAX_FRAMES) : 0;
		size_t cap = 64, len = 0;
		char *s = malloc(cap);
		if (!s)
			exit(1);
		s[0] = 0;
		if (!nf)
			len = (size_t)snprintf(s, cap, "[no stack]");
		for (size_t k = 0; k < nf; k++) {
			char label[512];
			frame_label(label, sizeof(label), &frames[reverse ? k : nf - 1 - k]);
			size_t l = strlen(label);
			while (len + l + 2 > cap) {
				cap *= 2;
				s = realloc(s, cap);
				if (!s)
					exit(1);
			}
			if (k)
				s[len++] = ';';
			memcpy(s + len, label, l + 1);
			len += l;
		}
		out[n].stack = s;
		out[n].value = value;
		out[n].count = count;
		n++;
	}
	qsort(out, n, sizeof(*out), by_stack);
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (o && !strcmp(out[o - 1].stack, out[i].stack)) {
			out[o - 1].value += out[i].value;
			out[o - 1].count += out[i].count;
			free(out[i].stack);
			continue;
		}
		out[o++] = out[i];
	}
	*nout = o;
	return out;
}

/* ---- the SVG ----------------------------------------------------------------- */

struct tnode {
	const char *name;   /* frame label (points into a folded stack) */
	size_t namelen;     /* its length */
	uint64_t value;     /* inclusive */
	uint64_t count;     /* inclusive */
	int child, next;    /* first child, next sibling: indexes, -1 none */
};

struct tree {
	struct tnode *n; /* n[0] is the root */
	size_t len, cap; /* used / allocated */
};

static int tree_child(struct tree *t, int parent, const char *name, size_t len)
{
	int prev = -1;
	for (int c = t->n[parent].child; c >= 0; prev = c, c = t->n[c].next) {
		int cmp = strncmp(t->n[c].name, name, len < t->n[c].namelen ? len : t->n[c].namelen);
		if (!cmp && t->n[c].namelen == len)
			return c;
		if (cmp > 0 || (!cmp && t->n[c].namelen > len))
			break; /* children are kept sorted by name */
	}
	if (t->len == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 1024;
		t->n = realloc(t->n, t->cap * sizeof(*t->n));
		if (!t->n)
			exit(1);
	}
	int id = (int)t->len++;
	t->n[id] = (struct tnode){name, len, 0, 0, -1, -1};
	if (prev < 0) {
		t->n[id].next = t->n[parent].child;
		t->n[parent].child = id;
	} else {
		t->n[id].next = t->n[prev].next;
		t->n[prev].next = id;
	}
	return id;
}

static void xml_text(FILE *f, const char *s, size_t n)
{
	for (size_t i = 0; i < n && s[i]; i++) {
		switch (s[i]) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(s[i], f);
		}
	}
}

static unsigned name_hash(const char *s, size_t n)
{
	unsigned h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

#define FRAME_H 16
#define PAD_TOP 44
#define PAD_SIDE 10
#define PAD_BOTTOM 24

struct svg {
	FILE *f;           /* output */
	struct tree *t;    /* frames */
	double scale;      /* pixels per unit of value */
	int height;        /* of the image */
	const char *unit;  /* of the values */
	uint64_t total;    /* root value */
	int drawn;         /* frames written */
};

static int max_depth(const struct tree *t, int id, int d)
{
	int m = d;
	for (int c = t->n[id].child; c >= 0; c = t->n[c].next) {
		int x = max_depth(t, c, d + 1);
		if (x > m)
			m = x;
	}
	return m;
}

static void draw(struct svg *s, int id, double x, int depth)
{
	const struct tnode *n = &s->t->n[id];
	double w = (double)n->value * s->scale;
	if (id) {
		if (w < 0.1)
			return; /* too narrow to see, as flamegraph.pl does */
		double y = s->height - PAD_BOTTOM - (double)depth * FRAME_H;
		unsigned h = name_hash(n->name, n->namelen);
		/* the memory palette: greens and blues */
		int r = 0, g = 140 + (int)(h % 100), b = 60 + (int)((h >> 8) % 140);
		char amount[32];
		ht_fmt_bytes(amount, n->value);
		fprintf(s->f, "<g class=\"f\" data-x=\"%.6f\" data-w=\"%.6f\" data-d=\"%d\"><title>",
			(x - PAD_SIDE) / s->scale / (double)s->total,
			(double)n->value / (double)s->total, depth);
		xml_text(s->f, n->name, n->namelen);
		if (!strcmp(s->unit, "bytes"))
			fprintf(s->f, " (%llu bytes, %s, %llu allocations, %.2f%%)",
				(unsigned long long)n->value, amount, (unsigned long long)n->count,
				100.0 * (double)n->value / (double)s->total);
		else
			fprintf(s->f, " (%llu %s, %.2f%%)", (unsigned long long)n->value, s->unit,
				100.0 * (double)n->value / (double)s->total);
		fprintf(s->f, "</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
			      "fill=\"rgb(%d,%d,%d)\" rx=\"2\"/><text x=\"%.2f\" y=\"%.1f\">",
			x, y - FRAME_H, w, FRAME_H - 1, r, g, b, x + 3, y - 4.5);
		size_t fit = w > 20 ? (size_t)((w - 6) / 7) : 0;
		if (fit >= n->namelen) {
			xml_text(s->f, n->name, n->namelen);
		} else if (fit > 2) {
			xml_text(s->f, n->name, fit - 2);
			fputs("..", s->f);
		}
		fputs("</text></g>\n", s->f);
		s->drawn++;
	}
	double cx = x;
	for (int c = n->child; c >= 0; c = s->t->n[c].next) {
		draw(s, c, cx, depth + (id ? 1 : 0));
		cx += (double)s->t->n[c].value * s->scale;
	}
}

static const char svg_script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"var W, frames, details, matchedtxt;\n"
	"function init(evt) {\n"
	"  frames = Array.prototype.slice.call(document.querySelectorAll('g.f'));\n"
	"  details = document.getElementById('details');\n"
	"  matchedtxt = document.getElementById('matched');\n"
	"  W = +document.documentElement.getAttribute('data-fw');\n"
	"  frames.forEach(function (g) {\n"
	"    g.addEventListener('click', function () { zoom(g); });\n"
	"    g.addEventListener('mouseover', function () {\n"
	"      details.textContent = g.querySelector('title').textContent; });\n"
	"    g.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
	"  });\n"
	"}\n"
	"function place(g, x0, w0) {\n"
	"  var x = +g.getAttribute('data-x'), w = +g.getAttribute('data-w');\n"
	"  var r = g.querySelector('rect'), t = g.querySelector('text');\n"
	"  var nx = (x - x0) / w0, nw = w / w0;\n"
	"  if (nx < 0) { nw += nx; nx = 0; }\n"
	"  if (nx + nw > 1) nw = 1 - nx;\n"
	"  if (nw <= 0 || nx >= 1) { g.style.display = 'none'; return; }\n"
	"  g.style.display = '';\n"
	"  r.setAttribute('x', 10 + nx * W); r.setAttribute('width', nw * W);\n"
	"  t.setAttribute('x', 13 + nx * W);\n"
	"  var name = g.querySelector('title').textContent.replace(/ \\(.*$/, '');\n"
	"  var fit = Math.floor((nw * W - 6) / 7);\n"
	"  t.textContent = fit >= name.length ? name : fit > 2 ? name.substr(0, fit - 2) + '..' : '';\n"
	"}\n"
	"function zoom(g) {\n"
	"  var x0 = +g.getAttribute('data-x'), w0 = +g.getAttribute('data-w');\n"
	"  var d0 = +g.getAttribute('data-d');\n"
	"  frames.forEach(function (f) {\n"
	"    var x = +f.getAttribute('data-x'), w = +f.getAttribute('data-w');\n"
	"    var d = +f.getAttribute('data-d');\n"
	"    if (d < d0 && x <= x0 + 1e-9 && x + w >= x0 + w0 - 1e-9) place(f, x, w); /* an ancestor: full width */\n"
	"    else if (d < d0) f.style.display = 'none';\n"
	"    else place(f, x0, w0);\n"
	"  });\n"
	"  document.getElementById('unzoom').style.opacity = 1;\n"
	"}\n"
	"function unzoom() {\n"
	"  frames.forEach(function (f) { place(f, 0, 1); });\n"
	"  document.getElementById('unzoom').style.opacity = 0;\n"
	"}\n"
	"function search() {\n"
	"  var term = prompt('Search for (a regular expression):', '');\n"
	"  if (term === null) return;\n"
	"  var re = new RegExp(term), hit = 0, seen = [];\n"
	"  frames.forEach(function (f) {\n"
	"    var name = f.querySelector('title').textContent.replace(/ \\(.*$/, '');\n"
	"    var r = f.querySelector('rect');\n"
	"    if (!r.getAttribute('data-fill')) r.setAttribute('data-fill', r.getAttribute('fill'));\n"
	"    if (term !== '' && re.test(name)) {\n"
	"      r.setAttribute('fill', 'rgb(230,0,230)');\n"
	"      var x = +f.getAttribute('data-x'), w = +f.getAttribute('data-w');\n"
	"      if (!seen.some(function (s) { return x >= s[0] && x + w <= s[1] + 1e-9; })) {\n"
	"        seen.push([x, x + w]); hit += w; }\n"
	"    } else r.setAttribute('fill', r.getAttribute('data-fill'));\n"
	"  });\n"
	"  matchedtxt.textContent = term === '' ? ' ' : 'Matched: ' + (100 * hit).toFixed(1) + '%';\n"
	"}\n"
	"]]></script>\n";

static int write_svg(FILE *f, const struct folded *fl, size_t n, const char *title,
		     const char *unit, uint64_t width)
{
	struct tree t = {0};
	t.cap = 1024;
	t.n = malloc(t.cap * sizeof(*t.n));
	if (!t.n)
		exit(1);
	t.n[0] = (struct tnode){"all", 3, 0, 0, -1, -1};
	t.len = 1;
	for (size_t i = 0; i < n; i++) {
		int cur = 0;
		t.n[0].value += fl[i].value;
		t.n[0].count += fl[i].count;
		for (const char *p = fl[i].stack; *p;) {
			const char *e = strchr(p, ';');
			size_t len = e ? (size_t)(e - p) : strlen(p);
			cur = tree_child(&t, cur, p, len);
			t.n[cur].value += fl[i].value;
			t.n[cur].count += fl[i].count;
			p += len + (e ? 1 : 0);
		}
	}
	int depth = max_depth(&t, 0, 0);
	struct svg s = {f, &t, 0, PAD_TOP + PAD_BOTTOM + (depth + 1) * FRAME_H, unit,
			t.n[0].value, 0};
	double fw = (double)width - 2 * PAD_SIDE;
	s.scale = t.n[0].value ? fw / (double)t.n[0].value : 0;
	fprintf(f, "<?xml version=\"1.0\" standalone=\"no\"?>\n"
		   "<svg version=\"1.1\" width=\"%llu\" height=\"%d\" onload=\"init(evt)\" "
		   "viewBox=\"0 0 %llu %d\" xmlns=\"http://www.w3.org/2000/svg\" "
		   "data-fw=\"%.2f\" data-total=\"%llu\" data-unit=\"%s\">\n",
		(unsigned long long)width, s.height, (unsigned long long)width, s.height, fw,
		(unsigned long long)t.n[0].value, unit);
	fputs("<style>text { font-family: Verdana, sans-serif; font-size: 12px; fill: #000; }\n"
	      "g.f:hover rect { stroke: #000; stroke-width: 0.5; cursor: pointer; }\n"
	      "#title { font-size: 17px; }\n"
	      ".btn { cursor: pointer; fill: #124; }</style>\n", f);
	fputs(svg_script, f);
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%llu\" height=\"%d\" fill=\"#f4f8f4\"/>\n",
		(unsigned long long)width, s.height);
	fprintf(f, "<text id=\"title\" x=\"%.1f\" y=\"24\" text-anchor=\"middle\">",
		(double)width / 2);
	xml_text(f, title, strlen(title));
	fprintf(f, "</text>\n<text id=\"unzoom\" class=\"btn\" x=\"%d\" y=\"24\" "
		   "style=\"opacity:0\" onclick=\"unzoom()\">Reset Zoom</text>\n"
		   "<text id=\"search\" class=\"btn\" x=\"%llu\" y=\"24\" text-anchor=\"end\" "
		   "onclick=\"search()\">Search</text>\n"
		   "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n"
		   "<text id=\"matched\" x=\"%llu\" y=\"%d\" text-anchor=\"end\"> </text>\n",
		PAD_SIDE, (unsigned long long)width - PAD_SIDE, PAD_SIDE, s.height - 6,
		(unsigned long long)width - PAD_SIDE, s.height - 6);
	fputs("<g id=\"frames\">\n", f);
	draw(&s, 0, PAD_SIDE, 0);
	fputs("</g>\n</svg>\n", f);
	free(t.n);
	return s.drawn;
}

/* ---- the command --------------------------------------------------------------- */

int cmd_flamegraph(int argc, char **argv)
{
	struct fg_config cfg = {.metric = "allocated", .width = 1200};
	const struct ht_option opts[] = {
		{'o', "output", HT_OPT_STRING, &cfg.out, "FILE", "write here (standard output)"},
		{0, "folded", HT_OPT_FLAG, &cfg.folded, NULL, "folded stacks, one 'a;b;c VALUE' line each, not SVG"},
		{'m', "metric", HT_OPT_STRING, &cfg.metric, "METRIC", "allocated, allocations, leaked, peak or temporary (allocated)"},
		{0, "reverse", HT_OPT_FLAG, &cfg.reverse, NULL, "the allocating functions at the root, their callers above"},
		{0, "thread", HT_OPT_U64, &cfg.tid, "TID", "only blocks this thread allocated (all)"},
		{0, "title", HT_OPT_STRING, &cfg.title, "TEXT", "the SVG's title (the metric)"},
		{0, "width", HT_OPT_U64, &cfg.width, "PIXELS", "the SVG's width (1200)"},
		{0, "sysroot", HT_OPT_STRING, &cfg.sysroot, "DIR", "find the traced modules under DIR"},
		{0, "debug-dir", HT_OPT_STRING, &cfg.debug_dir, "DIR", "also look for separate debug files in DIR"},
		{0},
	};
	int ret = HT_EXIT_USAGE;
	struct ht_reader *r = NULL;
	struct ht_symbolizer *sym = NULL;
	struct folded *fl = NULL;
	size_t nfl = 0;
	FILE *out = stdout;
	struct ht_stackstats ss;
	memset(&ss, 0, sizeof(ss));
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs != 1) {
		ht_error("%s; usage: heaptrail flamegraph [options] TRACE",
			 nargs ? "one trace at a time" : "no trace given");
		goto cleanup;
	}
	int m = -1;
	for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++)
		if (!strcmp(cfg.metric, metrics[i].name))
			m = (int)i;
	if (m < 0) {
		ht_error("--metric=%s: expected allocated, allocations, leaked, peak or temporary",
			 cfg.metric);
		goto cleanup;
	}
	if (cfg.width < 100 || cfg.width > 100000) {
		ht_error("--width=%llu: expected 100 to 100000 pixels", (unsigned long long)cfg.width);
		goto cleanup;
	}
	ret = ht_stackstats__collect(argv[0], (uint32_t)cfg.tid, &ss, &r);
	if (!r)
		goto cleanup;
	sym = ht_blocks__symbolizer(r, cfg.sysroot, cfg.debug_dir);
	if (!sym) {
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	fl = fold(r, sym, &ss, (enum metric)m, cfg.reverse, &nfl);
	if (cfg.out && !(out = fopen(cfg.out, "w"))) {
		ht_error("cannot write %s: %m", cfg.out);
		out = stdout;
		ret = HT_EXIT_DATA;
		goto cleanup;
	}
	if (cfg.folded) {
		for (size_t i = 0; i < nfl; i++)
			fprintf(out, "%s %llu\n", fl[i].stack, (unsigned long long)fl[i].value);
	} else {
		char title[512];
		const struct ht_trace_info *in = ht_reader__info(r);
		snprintf(title, sizeof(title), "%s%s: %s", cfg.title ? cfg.title : metrics[m].title,
			 cfg.reverse ? " (callers)" : "", in->cmdline ? in->cmdline : "");
		int drawn = write_svg(out, fl, nfl, title, metrics[m].unit, cfg.width);
		if (cfg.out)
			fprintf(stderr, "heaptrail: wrote %s: %d frames from %zu stacks\n", cfg.out,
				drawn, nfl);
	}
	if (!nfl)
		ht_warning("%s: nothing to show for --metric=%s%s", argv[0], metrics[m].name,
			   ht_reader__nnodes(r) ? "" : " (no stacks: record with --stacks)");
	if (ferror(out) || (out != stdout && fclose(out) != 0)) {
		ht_error("cannot write %s", cfg.out ? cfg.out : "standard output");
		ret = HT_EXIT_DATA;
	}
	out = stdout;
cleanup:
	if (out != stdout)
		fclose(out);
	for (size_t i = 0; i < nfl; i++)
		free(fl[i].stack);
	free(fl);
	ht_symbolizer__free(sym);
	ht_reader__close(r);
	ht_stackstats__free(&ss);
	return ret;
}
