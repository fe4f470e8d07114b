/* A file name as one POSIX shell word, for messages that name it (and
 * suggest a command with it, which must paste as one argument): as it is
 * if every byte is one a POSIX shell reads as itself (letters, digits,
 * "_@%+=:,./-", and bytes from 0x80 on); else in single quotes, a quote
 * written '\'' (a space, '$', '*', a quote, a backslash...); with a
 * control character, which single quotes would keep raw and so break the
 * one-line message, $'...' with \n, \t, \', \\ and \xHH.  Suffixes
 * appended to the result (".old", ".123") still make one word.
 * Header-only, so that the preload library, which links none of
 * src/common, names its trace in its messages as `record` does. */
#ifndef HEAPTRAIL_COMMON_SHELLWORD_H
#define HEAPTRAIL_COMMON_SHELLWORD_H

#include <stddef.h>
#include <string.h>

/* Bytes a POSIX shell reads as themselves anywhere in a word (those from
 * 0x80 on too: the UTF-8 of a name); any other asks for quotes. */
static inline int ht_shell_plain(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c >= 0x80 || (c && strchr("_@%+=:,./-", c));
}

/* The word of s in out (cap bytes, not s), cut to cap (the word unusable
 * then, the line still one); returns out.  No allocation. */
static inline char *ht_shell_word(char *out, size_t cap, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = strlen(s), o = 0;
	int control = 0, quote = 0;
	if (!cap)
		return out;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f)
			control = 1;
		else if (!ht_shell_plain(c))
			quote = 1;
	}
	if ((!control && !quote) || cap < 4) {
		size_t len = n < cap ? n : cap - 1;
		memcpy(out, s, len);
		out[len] = 0;
		return out;
	}
	if (control) /* (single quotes would keep a newline, and the line break) */
		out[o++] = '$';
	out[o++] = '\'';
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *e = NULL;
		char esc[5] = {'\\', 'x', hex[c >> 4], hex[c & 15], 0};
		/* (a quote in single quotes: out of them, a quoted one, back in) */
		if (c == '\'')
			e = control ? "\\'" : "'\\''";
		else if (control && c == '\n')
			e = "\\n";
		else if (control && c == '\t')
			e = "\\t";
		else if (control && c == '\\')
			e = "\\\\";
		else if (c < 0x20 || c == 0x7f)
			e = esc;
		size_t len = e ? strlen(e) : 1;
		if (o + len + 2 > cap)
			break;
		if (e)
			memcpy(out + o, e, len);
		else
			out[o] = (char)c;
		o += len;
	}
	out[o++] = '\'';
	out[o] = 0;
	return out;
}

#endif
