/* The HTML/XML text escaper and the UTF-8 check (markup.h). */
#include "markup.h"

int ht_utf8_len(const unsigned char *p, size_t avail)
{
	unsigned c = p[0];
	int n;
	unsigned min, cp;
	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0)
		n = 2, min = 0x80, cp = c & 0x1f;
	else if ((c & 0xf0) == 0xe0)
		n = 3, min = 0x800, cp = c & 0x0f;
	else if ((c & 0xf8) == 0xf0)
		n = 4, min = 0x10000, cp = c & 0x07;
	else
		return 0;
	if ((size_t)n > avail)
		return 0;
	for (int i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void ht_markup__text(FILE *f, const char *s, size_t n)
{
	if (!s)
		return;
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < n && p[i];) {
		size_t j = i; /* a run of printable ASCII that needs no escape, in one write */
		while (j < n && p[j] >= 0x20 && p[j] < 0x7f && p[j] != '&' && p[j] != '<' &&
		       p[j] != '>' && p[j] != '"' && p[j] != '\'')
			j++;
		if (j > i) {
			fwrite(p + i, 1, j - i, f);
			i = j;
			continue;
		}
		unsigned c = p[i];
		int len;
		switch (c) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		case '\t':
		case '\n':
		case '\r': fputc((int)c, f); break;
		default:
			if (c < 0x20 || c == 0x7f)
				break; /* not allowed in XML 1.0 */
			len = ht_utf8_len(p + i, n - i);
			if (len > 0) {
				fwrite(p + i, 1, (size_t)len, f);
				i += (size_t)len;
				continue;
			}
			fprintf(f, "&#x%02x;", c); /* not UTF-8: the Latin-1 character */
		}
		i++;
	}
}
