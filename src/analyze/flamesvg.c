/* Flame graphs as interactive SVG (flamesvg.h). */
#define _GNU_SOURCE
#include "flamesvg.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/blocks.h"
#include "common/markup.h"
#include "common/util.h"

size_t ht_flame__label(char **buf, size_t *cap, const struct ht_frame *fr)
{
	/* room for the whole name: the function's, else module+0xOFFSET */
	const char *whole = fr->function ? fr->function : fr->module ? fr->module : "";
	size_t need = strlen(whole) + 32;
	if (need > *cap) {
		*cap = need > 2 * *cap ? need : 2 * *cap;
		*buf = ht_xrealloc(*buf, *cap);
	}
	char *b = *buf;
	const char *nm = ht_blocks__frame_name(b, *cap, fr);
	if (nm != b)
		memcpy(b, nm, strlen(nm) + 1); /* (the function's own string) */
	for (char *p = strpbrk(b, ";\n"); p; p = strpbrk(p + 1, ";\n"))
		*p = ':'; /* the folded format's separators */
	return strlen(b);
}

char *ht_flame__join(const struct ht_frame *frames, size_t n, int reverse)
{
	size_t cap = 64, len = 0, lcap = 0;
	char *s = ht_xmalloc(cap), *label = NULL;
	s[0] = 0;
	if (!n)
		snprintf(s, cap, "[no stack]");
	for (size_t k = 0; k < n; k++) {
		size_t l = ht_flame__label(&label, &lcap, &frames[reverse ? k : n - 1 - k]);
		while (len + l + 2 > cap) {
			cap *= 2;
			s = ht_xrealloc(s, cap);
		}
		if (k)
			s[len++] = ';';
		memcpy(s + len, label, l + 1);
		len += l;
	}
	free(label);
	return s;
}

struct tnode {
	struct ht_flame_frame fr; /* label and sums */
	int child, next, parent;  /* first child, next sibling, parent: indexes, -1 none */
};

#define ARENA_BLOCK 65536 /* bytes of labels per block of a tree's arena */

struct ht_flame_tree {
	struct tnode *n;   /* n[0] is the root */
	size_t len, cap;   /* used / allocated */
	char **blocks;     /* the labels copied in (ht_flame_tree__child) */
	size_t nblocks;    /* count */
	size_t used, room; /* bytes used in the last block / its size */
};

/* A copy of name that lives as long as the tree. */
static const char *tree_keep(struct ht_flame_tree *t, const char *name, size_t len)
{
	if (t->used + len > t->room) { /* a new block (a label longer than one: its own) */
		t->room = len > ARENA_BLOCK ? len : ARENA_BLOCK;
		t->blocks = ht_xrealloc(t->blocks, (t->nblocks + 1) * sizeof(*t->blocks));
		t->blocks[t->nblocks++] = ht_xmalloc(t->room);
		t->used = 0;
	}
	char *c = t->blocks[t->nblocks - 1] + t->used;
	memcpy(c, name, len);
	t->used += len;
	return c;
}

/* The child of parent named name (found, or added in its place among the
 * children, which are kept sorted by name); copy: name is copied into the
 * tree's arena when added, else it must outlive the tree. */
static int tree_child(struct ht_flame_tree *t, int parent, const char *name, size_t len,
		      int copy)
{
	int prev = -1;
	for (int c = t->n[parent].child; c >= 0; prev = c, c = t->n[c].next) {
		const struct ht_flame_frame *fr = &t->n[c].fr;
		size_t min = len < fr->namelen ? len : fr->namelen;
		/* (most siblings differ in the first byte: no call for them) */
		int cmp = min && fr->name[0] != name[0]
				  ? (unsigned char)fr->name[0] - (unsigned char)name[0]
				  : strncmp(fr->name, name, min);
		if (!cmp && fr->namelen == len)
			return c;
		if (cmp > 0 || (!cmp && fr->namelen > len))
			break; /* children are kept sorted by name */
	}
	if (t->len == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 1024;
		t->n = ht_xrealloc(t->n, t->cap * sizeof(*t->n));
	}
	int id = (int)t->len++;
	if (copy)
		name = tree_keep(t, name, len);
	t->n[id] = (struct tnode){{name, len, 0, 0, 0}, -1, -1, parent};
	if (prev < 0) {
		t->n[id].next = t->n[parent].child;
		t->n[parent].child = id;
	} else {
		t->n[id].next = t->n[prev].next;
		t->n[prev].next = id;
	}
	return id;
}

struct ht_flame_tree *ht_flame_tree__new(void)
{
	struct ht_flame_tree *t = ht_xcalloc(1, sizeof(*t));
	t->cap = 1024;
	t->n = ht_xmalloc(t->cap * sizeof(*t->n));
	t->n[0] = (struct tnode){{"all", 3, 0, 0, 0}, -1, -1, -1};
	t->len = 1;
	return t;
}

int ht_flame_tree__child(struct ht_flame_tree *t, int parent, const char *name, size_t len)
{
	return tree_child(t, parent, name, len, 1);
}

void ht_flame_tree__add(struct ht_flame_tree *t, int id, uint64_t value, uint64_t count,
			uint64_t base)
{
	for (; id >= 0; id = t->n[id].parent) {
		t->n[id].fr.value += value;
		t->n[id].fr.count += count;
		t->n[id].fr.base += base;
	}
}

void ht_flame_tree__free(struct ht_flame_tree *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nblocks; i++)
		free(t->blocks[i]);
	free(t->blocks);
	free(t->n);
	free(t);
}

static unsigned name_hash(const char *s, size_t n)
{
	unsigned h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

/* The memory palette: greens and blues, by name. */
static void memory_fill(const struct ht_flame_frame *fr, int rgb[3])
{
	unsigned h = name_hash(fr->name, fr->namelen);
	rgb[0] = 0;
	rgb[1] = 140 + (int)(h % 100);
	rgb[2] = 60 + (int)((h >> 8) % 140);
}

/* The value, the count (of bytes) and the share of the total. */
static void value_details(void *ctx, FILE *f, const struct ht_flame_frame *fr, uint64_t total)
{
	const char *unit = ctx;
	char amount[32];
	if (!strcmp(unit, "bytes"))
		ht_fputf(f, " (%llu bytes, %s, %llu allocation%s, %.2f%%)",
			(unsigned long long)fr->value, ht_fmt_bytes(amount, fr->value),
			(unsigned long long)fr->count, ht_s(fr->count),
			100.0 * (double)fr->value / (double)total);
	else
		ht_fputf(f, " (%llu %s, %.2f%%)", (unsigned long long)fr->value, unit,
			100.0 * (double)fr->value / (double)total);
}

#define FRAME_H 16
#define PAD_TOP 44
#define PAD_SIDE 10
#define PAD_BOTTOM 24

struct svg {
	FILE *f;           /* output */
	struct ht_flame_tree *t; /* frames */
	double scale;      /* pixels per unit of value */
	int height;        /* of the image */
	const struct ht_flame_style *st; /* colours and tooltips */
	uint64_t total;    /* root value */
	uint64_t max_change; /* the largest |value - base| of a frame */
	int drawn;         /* frames written */
};

static int max_depth(const struct ht_flame_tree *t, int id, int d)
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
	const struct ht_flame_frame *fr = &n->fr;
	double w = (double)fr->value * s->scale;
	if (id) {
		if (w < 0.1)
			return; /* too narrow to see, as flamegraph.pl does */
		double y = s->height - PAD_BOTTOM - (double)depth * FRAME_H;
		int rgb[3];
		if (s->st->fill)
			s->st->fill(s->st->ctx, fr, s->max_change, rgb);
		else
			memory_fill(fr, rgb);
		ht_fputf(s->f, "<g class=\"f\" data-x=\"%.6f\" data-w=\"%.6f\" data-d=\"%d\"><title>",
			(x - PAD_SIDE) / s->scale / (double)s->total,
			(double)fr->value / (double)s->total, depth);
		ht_markup__text(s->f, fr->name, fr->namelen);
		if (s->st->details)
			s->st->details(s->st->ctx, s->f, fr, s->total);
		else
			value_details((void *)s->st->unit, s->f, fr, s->total);
		ht_fputf(s->f, "</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
			      "fill=\"rgb(%d,%d,%d)\" rx=\"2\" class=\"mark\"/><text x=\"%.2f\" y=\"%.1f\">",
			x, y - FRAME_H, w, FRAME_H - 1, rgb[0], rgb[1], rgb[2], x + 3, y - 4.5);
		size_t fit = w > 20 ? (size_t)((w - 6) / 7) : 0;
		if (fit >= fr->namelen) {
			ht_markup__text(s->f, fr->name, fr->namelen);
		} else if (fit > 2) {
			ht_markup__text(s->f, fr->name, fit - 2);
			fputs("..", s->f);
		}
		fputs("</text></g>\n", s->f);
		s->drawn++;
	}
	double cx = x;
	for (int c = n->child; c >= 0; c = s->t->n[c].next) {
		draw(s, c, cx, depth + (id ? 1 : 0));
		cx += (double)s->t->n[c].fr.value * s->scale;
	}
}

/* The interactivity, scoped to its own <svg> (the script's parent), so
 * that several graphs can live inline in one HTML page (report). */
static const char svg_script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"(function (svg) {\n"
	"  var W = +svg.getAttribute('data-fw');\n"
	"  var frames = Array.prototype.slice.call(svg.querySelectorAll('g.f'));\n"
	"  var details = svg.querySelector('.details'), matchedtxt = svg.querySelector('.matched');\n"
	"  var unzoombtn = svg.querySelector('.unzoom');\n"
	"  function place(g, x0, w0) {\n"
	"    var x = +g.getAttribute('data-x'), w = +g.getAttribute('data-w');\n"
	"    var r = g.querySelector('rect'), t = g.querySelector('text');\n"
	"    var nx = (x - x0) / w0, nw = w / w0;\n"
	"    if (nx < 0) { nw += nx; nx = 0; }\n"
	"    if (nx + nw > 1) nw = 1 - nx;\n"
	"    if (nw <= 0 || nx >= 1) { g.style.display = 'none'; return; }\n"
	"    g.style.display = '';\n"
	"    r.setAttribute('x', 10 + nx * W); r.setAttribute('width', nw * W);\n"
	"    t.setAttribute('x', 13 + nx * W);\n"
	"    var name = g.querySelector('title').textContent.replace(/ \\(.*$/, '');\n"
	"    var fit = Math.floor((nw * W - 6) / 7);\n"
	"    t.textContent = fit >= name.length ? name : fit > 2 ? name.substr(0, fit - 2) + '..' : '';\n"
	"  }\n"
	"  function zoom(g) {\n"
	"    var x0 = +g.getAttribute('data-x'), w0 = +g.getAttribute('data-w');\n"
	"    var d0 = +g.getAttribute('data-d');\n"
	"    frames.forEach(function (f) {\n"
	"      var x = +f.getAttribute('data-x'), w = +f.getAttribute('data-w');\n"
	"      var d = +f.getAttribute('data-d');\n"
	"      if (d < d0 && x <= x0 + 1e-9 && x + w >= x0 + w0 - 1e-9) place(f, x, w); /* an ancestor: full width */\n"
	"      else if (d < d0) f.style.display = 'none';\n"
	"      else place(f, x0, w0);\n"
	"    });\n"
	"    unzoombtn.style.opacity = 1;\n"
	"  }\n"
	"  function unzoom() {\n"
	"    frames.forEach(function (f) { place(f, 0, 1); });\n"
	"    unzoombtn.style.opacity = 0;\n"
	"  }\n"
	"  function search() {\n"
	"    var term = prompt('Search for (a regular expression):', '');\n"
	"    if (term === null) return;\n"
	"    var re = new RegExp(term), hit = 0, seen = [];\n"
	"    frames.forEach(function (f) {\n"
	"      var name = f.querySelector('title').textContent.replace(/ \\(.*$/, '');\n"
	"      var r = f.querySelector('rect');\n"
	"      if (!r.getAttribute('data-fill')) r.setAttribute('data-fill', r.getAttribute('fill'));\n"
	"      if (term !== '' && re.test(name)) {\n"
	"        r.setAttribute('fill', 'rgb(230,0,230)');\n"
	"        var x = +f.getAttribute('data-x'), w = +f.getAttribute('data-w');\n"
	"        if (!seen.some(function (s) { return x >= s[0] && x + w <= s[1] + 1e-9; })) {\n"
	"          seen.push([x, x + w]); hit += w; }\n"
	"      } else r.setAttribute('fill', r.getAttribute('data-fill'));\n"
	"    });\n"
	"    matchedtxt.textContent = term === '' ? ' ' : 'Matched: ' + (100 * hit).toFixed(1) + '%';\n"
	"  }\n"
	"  frames.forEach(function (g) {\n"
	"    g.addEventListener('click', function () { zoom(g); });\n"
	"    g.addEventListener('mouseover', function () {\n"
	"      details.textContent = g.querySelector('title').textContent; });\n"
	"    g.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
	"  });\n"
	"  unzoombtn.addEventListener('click', unzoom);\n"
	"  svg.querySelector('.search').addEventListener('click', search);\n"
	"})(document.currentScript.parentNode);\n"
	"]]></script>\n";

int ht_flame__svg(FILE *f, const struct ht_flame_stack *fl, size_t n,
		  const struct ht_flame_style *style)
{
	struct ht_flame_tree *t = ht_flame_tree__new();
	for (size_t i = 0; i < n; i++) {
		int cur = 0;
		t->n[0].fr.value += fl[i].value;
		t->n[0].fr.count += fl[i].count;
		t->n[0].fr.base += fl[i].base;
		for (const char *p = fl[i].stack; *p;) {
			const char *e = strchr(p, ';');
			size_t len = e ? (size_t)(e - p) : strlen(p);
			cur = tree_child(t, cur, p, len, 0);
			t->n[cur].fr.value += fl[i].value;
			t->n[cur].fr.count += fl[i].count;
			t->n[cur].fr.base += fl[i].base;
			p += len + (e ? 1 : 0);
		}
	}
	int drawn = ht_flame_tree__svg(f, t, style);
	ht_flame_tree__free(t);
	return drawn;
}

int ht_flame_tree__svg(FILE *f, struct ht_flame_tree *t, const struct ht_flame_style *style)
{
	uint64_t width = style->width;
	int depth = max_depth(t, 0, 0);
	struct svg s = {f, t, 0, PAD_TOP + PAD_BOTTOM + (depth + 1) * FRAME_H, style,
			t->n[0].fr.value, 0, 0};
	for (size_t i = 1; i < t->len; i++) {
		const struct ht_flame_frame *fr = &t->n[i].fr;
		uint64_t c = fr->value > fr->base ? fr->value - fr->base : fr->base - fr->value;
		if (c > s.max_change)
			s.max_change = c;
	}
	double fw = (double)width - 2 * PAD_SIDE;
	s.scale = t->n[0].fr.value ? fw / (double)t->n[0].fr.value : 0;
	if (!style->id)
		fputs("<?xml version=\"1.0\" standalone=\"no\"?>\n", f);
	fputs("<svg version=\"1.1\"", f);
	if (style->id)
		fprintf(f, " class=\"chart flame\" id=\"%s\"", style->id);
	fprintf(f, " width=\"%llu\" height=\"%d\" "
		   "viewBox=\"0 0 %llu %d\" xmlns=\"http://www.w3.org/2000/svg\" "
		   "data-fw=\"%.2f\" data-total=\"%llu\" data-unit=\"%s\">\n",
		(unsigned long long)width, s.height, (unsigned long long)width, s.height, fw,
		(unsigned long long)t->n[0].fr.value, style->unit);
	fputs("<style>text { font-family: Verdana, sans-serif; font-size: 12px; fill: #000; }\n"
	      "g.f:hover rect { stroke: #000; stroke-width: 0.5; cursor: pointer; }\n"
	      ".title { font-size: 17px; }\n"
	      ".btn { cursor: pointer; fill: #124; }</style>\n", f);
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%llu\" height=\"%d\" fill=\"#f4f8f4\"/>\n",
		(unsigned long long)width, s.height);
	fprintf(f, "<text class=\"title\" x=\"%.1f\" y=\"24\" text-anchor=\"middle\">",
		(double)width / 2);
	ht_markup__text(f, style->title, strlen(style->title));
	fprintf(f, "</text>\n<text class=\"btn unzoom\" x=\"%d\" y=\"24\" "
		   "style=\"opacity:0\">Reset Zoom</text>\n"
		   "<text class=\"btn search\" x=\"%llu\" y=\"24\" text-anchor=\"end\">Search</text>\n"
		   "<text class=\"details\" x=\"%d\" y=\"%d\"> </text>\n"
		   "<text class=\"matched\" x=\"%llu\" y=\"%d\" text-anchor=\"end\"> </text>\n",
		PAD_SIDE, (unsigned long long)width - PAD_SIDE, PAD_SIDE, s.height - 6,
		(unsigned long long)width - PAD_SIDE, s.height - 6);
	fputs("<g class=\"frames\">\n", f);
	draw(&s, 0, PAD_SIDE, 0);
	fputs("</g>\n", f);
	fputs(svg_script, f);
	fputs("</svg>\n", f);
	return s.drawn;
}
