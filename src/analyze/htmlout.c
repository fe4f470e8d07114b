/* The HTML page of heaptrail report (htmlout.h). */
#define _GNU_SOURCE
#include "htmlout.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/markup.h"
#include "common/outfile.h"
#include "common/util.h"

/* The page shows what the other reports show (sizes, stacks, the command
 * line): a file for sharing, with the mode of any new file (HT_OUT_PUBLIC). */
int ht_html__open(struct ht_html_file *h, const char *path)
{
	char err[1024];
	memset(h, 0, sizeof(*h));
	if (ht_out__open(&h->out, path, HT_OUT_PUBLIC, HT_OUT_DASH, err, sizeof(err)) < 0) {
		ht_error("%s", err);
		return -1;
	}
	h->f = h->out.f;
	return 0;
}

int ht_html__commit(struct ht_html_file *h)
{
	char err[1024];
	h->f = NULL;
	if (ht_out__commit(&h->out, err, sizeof(err)) < 0) {
		ht_error("%s", err);
		return -1;
	}
	return 0;
}

void ht_html__abort(struct ht_html_file *h)
{
	ht_out__abort(&h->out);
	memset(h, 0, sizeof(*h));
}

void ht_html__text(FILE *f, const char *s)
{
	ht_markup__text(f, s, HT_MARKUP_ALL);
}

static const char style[] =
	"body{font:14px/1.4 system-ui,sans-serif;margin:0 auto;max-width:1280px;padding:0 16px;color:#222}"
	"header{border-bottom:2px solid #c33;margin-bottom:8px}h1{font-size:20px;margin:12px 0 4px}"
	"h2{font-size:17px;border-bottom:1px solid #ddd;margin-top:28px}h3{font-size:15px}"
	"nav a{margin-right:12px}"
	".cards{display:flex;flex-wrap:wrap;gap:10px}"
	".card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:170px}"
	".card .l{color:#666;font-size:12px}.card .v{font-size:20px;font-weight:600}"
	".card .d{color:#666;font-size:12px}"
	"table{border-collapse:collapse;margin:8px 0}th,td{padding:3px 8px;border-bottom:1px solid #eee;"
	"text-align:right;vertical-align:top}th{background:#f6f6f6}"
	"td.stack,th.stack{text-align:left;font-family:monospace;font-size:12px}"
	"td:first-child,th:first-child{text-align:left}"
	".loc{color:#777}.warn{color:#a40}details summary{cursor:pointer}"
	".row{display:flex;flex-wrap:wrap;gap:16px}svg.chart{background:#fff}"
	"svg.chart text{font:11px sans-serif}#selfcheck{display:none}";

void ht_html__begin(FILE *f, const char *title)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>", f);
	ht_html__text(f, title);
	fprintf(f, "</title>\n<style>%s</style></head>\n<body>\n", style);
}

/* For each chart: its id, its drawn size and how many marks it holds
 * (bars and frames: class "mark"; series: paths and polylines), written into #selfcheck
 * as JSON. */
static const char selfcheck[] =
	"<pre id=\"selfcheck\"></pre>\n<script>\n"
	"(function(){var out=[];\n"
	"document.querySelectorAll('svg.chart, svg[data-chart]').forEach(function(s){\n"
	" var b={width:0,height:0};try{b=s.getBBox();}catch(e){}\n"
	" var marks=0;s.querySelectorAll('.mark, path, polyline').forEach(function(m){\n"
	"  try{var r=m.getBBox();if(r.width>0||r.height>0)marks++;}catch(e){}});\n"
	" out.push({id:s.id,width:Math.round(b.width),height:Math.round(b.height),marks:marks});});\n"
	"document.getElementById('selfcheck').textContent=JSON.stringify(out);})();\n"
	"</script>\n";

void ht_html__end(FILE *f)
{
	fputs("<footer><p class=\"loc\">Written by heaptrail report.</p></footer>\n", f);
	fputs(selfcheck, f);
	fputs("</body></html>\n", f);
}

void ht_html__card(FILE *f, const char *label, const char *value, const char *fmt, ...)
{
	char detail[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	fputs("<div class=\"card\"><div class=\"l\">", f);
	ht_html__text(f, label);
	fputs("</div><div class=\"v\">", f);
	ht_html__text(f, value);
	fputs("</div><div class=\"d\">", f);
	ht_html__text(f, detail);
	fputs("</div></div>\n", f);
}

const char *ht_html__count(char *buf, uint64_t n)
{
	char digits[24];
	int len = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)n), o = 0;
	for (int i = 0; i < len; i++) {
		if (i && (len - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = 0;
	return buf;
}

void ht_html__bars(FILE *f, const char *id, const char *title, const char *const *labels,
		   const uint64_t *values, int n, const char *unit)
{
	const int label_w = 150, bar_w = 380, row = 18, top = 24;
	uint64_t max = 0;
	for (int i = 0; i < n; i++)
		if (values[i] > max)
			max = values[i];
	int h = top + (n ? n : 1) * row + 8;
	fprintf(f, "<svg class=\"chart\" id=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
		   "height=\"%d\" viewBox=\"0 0 %d %d\">\n<text x=\"0\" y=\"14\" "
		   "style=\"font-weight:bold\">", id, label_w + bar_w + 110, h, label_w + bar_w + 110, h);
	ht_html__text(f, title);
	fputs("</text>\n", f);
	if (!n)
		fprintf(f, "<text x=\"0\" y=\"%d\">none</text>\n", top + 12);
	for (int i = 0; i < n; i++) {
		char cnt[32];
		int w = max ? (int)((double)bar_w * (double)values[i] / (double)max + 0.5) : 0;
		int y = top + i * row;
		fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", label_w - 6, y + 12);
		ht_html__text(f, labels[i]);
		fprintf(f, "</text><rect class=\"mark\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
			   "fill=\"#d9534f\"><title>", label_w, y + 2, w ? w : 1, row - 4);
		ht_html__text(f, labels[i]);
		fprintf(f, ": %s %s</title></rect><text x=\"%d\" y=\"%d\">%s</text>\n",
			ht_html__count(cnt, values[i]), unit, label_w + (w ? w : 1) + 4, y + 12, cnt);
	}
	fputs("</svg>\n", f);
}
