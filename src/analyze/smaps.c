/* The /proc/PID/smaps parser (smaps.h).
 *
 * The text is a sequence of mappings, each a header line
 *
 *   START-END PERMS OFFSET MAJOR:MINOR INODE [NAME]
 *
 * (hex, hex, 4 characters, hex, hex:hex, decimal, the rest of the line)
 * followed by field lines "Name:   value [kB]", VmFlags last on current
 * kernels.  Every line is taken on its own: a field line belongs to the
 * last header; a line that is neither ends the current mapping (its later
 * fields are not attributed to it) and is counted in unknown_lines. */
#define _GNU_SOURCE
#include "analyze/smaps.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const field_names[HT_SM_NFIELDS] = {
	[HT_SM_SIZE] = "Size",
	[HT_SM_RSS] = "Rss",
	[HT_SM_PSS] = "Pss",
	[HT_SM_PSS_DIRTY] = "Pss_Dirty",
	[HT_SM_SHARED_CLEAN] = "Shared_Clean",
	[HT_SM_SHARED_DIRTY] = "Shared_Dirty",
	[HT_SM_PRIVATE_CLEAN] = "Private_Clean",
	[HT_SM_PRIVATE_DIRTY] = "Private_Dirty",
	[HT_SM_REFERENCED] = "Referenced",
	[HT_SM_ANONYMOUS] = "Anonymous",
	[HT_SM_LAZYFREE] = "LazyFree",
	[HT_SM_ANON_HUGE] = "AnonHugePages",
	[HT_SM_SWAP] = "Swap",
	[HT_SM_SWAP_PSS] = "SwapPss",
	[HT_SM_LOCKED] = "Locked",
};

/* The state of one parse: the line being assembled and the mapping the
 * field lines go to. */
struct parser {
	struct ht_smaps *s;               /* the result */
	char line[HT_SMAPS_LINE_MAX];     /* the current line, cut at the limit */
	size_t len;                       /* its bytes in line */
	int current;                      /* field lines go to s->maps[n - 1] */
	int oom;                          /* an allocation failed */
};

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Reads a number in base 16 or 10 at *pp (at most end); at least one
 * digit, no overflow.  Advances *pp. */
static int number(const char **pp, const char *end, int base, uint64_t *out)
{
	const char *p = *pp;
	uint64_t v = 0;
	int digits = 0;
	for (; p < end; p++) {
		int d = base == 16 ? hexval(*p) : (*p >= '0' && *p <= '9' ? *p - '0' : -1);
		if (d < 0)
			break;
		if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			return -1;
		v = v * (uint64_t)base + (uint64_t)d;
		digits++;
	}
	if (!digits)
		return -1;
	*pp = p;
	*out = v;
	return 0;
}

static int expect_char(const char **pp, const char *end, char c)
{
	if (*pp >= end || **pp != c)
		return -1;
	(*pp)++;
	return 0;
}

static void skip_spaces(const char **pp, const char *end)
{
	while (*pp < end && (**pp == ' ' || **pp == '\t'))
		(*pp)++;
}

/* "Name:" at the start of the line: an identifier and a colon. */
static size_t field_key(const char *p, size_t n)
{
	size_t i = 0;
	if (!n || !((p[0] >= 'A' && p[0] <= 'Z') || (p[0] >= 'a' && p[0] <= 'z') || p[0] == '_'))
		return 0;
	while (i < n && ((p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= 'a' && p[i] <= 'z') ||
			 (p[i] >= '0' && p[i] <= '9') || p[i] == '_'))
		i++;
	return i < n && p[i] == ':' ? i : 0;
}

static int add_map(struct parser *ps, const struct ht_smaps_map *m, const char *name,
		   size_t name_len)
{
	struct ht_smaps *s = ps->s;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct ht_smaps_map *maps = realloc(s->maps, cap * sizeof(*maps));
		if (!maps)
			return -1;
		s->maps = maps;
		s->cap = cap;
	}
	char *copy = malloc(name_len + 1);
	if (!copy)
		return -1;
	memcpy(copy, name, name_len);
	copy[name_len] = 0;
	if (s->n && m->start < s->maps[s->n - 1].end)
		s->unsorted = 1;
	s->maps[s->n] = *m;
	s->maps[s->n].name = copy;
	s->n++;
	return 0;
}

/* START-END PERMS OFFSET MAJOR:MINOR INODE [NAME] */
static int header(struct parser *ps, const char *p, const char *end)
{
	struct ht_smaps_map m;
	memset(&m, 0, sizeof(m));
	uint64_t major, minor;
	if (number(&p, end, 16, &m.start) || expect_char(&p, end, '-') ||
	    number(&p, end, 16, &m.end) || expect_char(&p, end, ' ') || m.end < m.start)
		return -1;
	if (end - p < 5 || p[4] != ' ')
		return -1;
	static const char allowed[4][3] = {{'r', '-', 0}, {'w', '-', 0}, {'x', '-', 0},
					   {'p', 's', '-'}};
	for (int i = 0; i < 4; i++) {
		if (!p[i] || !memchr(allowed[i], p[i], sizeof(allowed[i])))
			return -1;
		m.perms[i] = p[i];
	}
	p += 5;
	if (number(&p, end, 16, &m.offset) || expect_char(&p, end, ' ') ||
	    number(&p, end, 16, &major) || expect_char(&p, end, ':') ||
	    number(&p, end, 16, &minor) || expect_char(&p, end, ' ') ||
	    number(&p, end, 10, &m.inode) || major > UINT32_MAX || minor > UINT32_MAX)
		return -1;
	m.dev_major = (uint32_t)major;
	m.dev_minor = (uint32_t)minor;
	if (p < end && *p != ' ' && *p != '\t')
		return -1;
	skip_spaces(&p, end);
	size_t name_len = (size_t)(end - p);
	const char *nul = memchr(p, 0, name_len);
	if (nul)
		name_len = (size_t)(nul - p);
	static const char deleted[] = " (deleted)";
	const size_t dlen = sizeof(deleted) - 1;
	if (name_len >= dlen && !memcmp(p + name_len - dlen, deleted, dlen)) {
		m.deleted = 1;
		name_len -= dlen;
	}
	if (name_len > HT_SMAPS_NAME_MAX) {
		name_len = HT_SMAPS_NAME_MAX;
		m.cut = 1;
	}
	if (add_map(ps, &m, p, name_len)) {
		ps->oom = 1;
		return 0;
	}
	ps->current = 1;
	return 0;
}

static void field(struct parser *ps, const char *p, size_t klen, const char *end)
{
	struct ht_smaps *s = ps->s;
	int f = -1;
	for (int i = 0; i < HT_SM_NFIELDS; i++) {
		if (strlen(field_names[i]) == klen && !memcmp(field_names[i], p, klen)) {
			f = i;
			break;
		}
	}
	s->fields++;
	if (f < 0)
		return; /* VmFlags, THPeligible, ProtectionKey, newer fields */
	const char *v = p + klen + 1;
	uint64_t kb;
	skip_spaces(&v, end);
	if (number(&v, end, 10, &kb))
		return; /* a malformed value: as if absent */
	struct ht_smaps_map *m = &s->maps[s->n - 1];
	m->kb[f] = kb;
	m->seen |= 1u << f;
	s->seen |= 1u << f;
}

static void line(struct parser *ps)
{
	const char *p = ps->line, *end = ps->line + ps->len;
	ps->s->lines++;
	if (ps->len && end[-1] == '\r')
		end--;
	size_t klen = field_key(p, (size_t)(end - p));
	if (klen) {
		if (ps->current)
			field(ps, p, klen, end);
		else
			ps->s->unknown_lines++;
		return;
	}
	if (header(ps, p, end)) {
		ps->s->unknown_lines++;
		ps->current = 0;
	}
}

static void feed(struct parser *ps, const char *buf, size_t len)
{
	while (len && !ps->oom) {
		const char *nl = memchr(buf, '\n', len);
		size_t take = nl ? (size_t)(nl - buf) : len;
		size_t room = sizeof(ps->line) - ps->len;
		size_t copy = take < room ? take : room;
		memcpy(ps->line + ps->len, buf, copy);
		ps->len += copy;
		if (!nl)
			return;
		line(ps);
		ps->len = 0;
		buf = nl + 1;
		len -= take + 1;
	}
}

static int finish(struct parser *ps, char *err, size_t errlen)
{
	if (ps->len && !ps->oom) {
		line(ps);
		ps->s->truncated = 1;
	}
	ps->len = 0;
	if (ps->oom) {
		snprintf(err, errlen, "out of memory after %zu mappings", ps->s->n);
		return -1;
	}
	return 0;
}

int ht_smaps__parse_mem(struct ht_smaps *s, const char *buf, size_t len, char *err,
			size_t errlen)
{
	struct parser *ps = calloc(1, sizeof(*ps));
	if (!ps) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	ps->s = s;
	feed(ps, buf, len);
	int ret = finish(ps, err, errlen);
	free(ps);
	return ret;
}

#define HT_SMAPS_MAX_BYTES (1024u << 20)

int ht_smaps__parse_file(struct ht_smaps *s, FILE *f, char *err, size_t errlen)
{
	struct parser *ps = calloc(1, sizeof(*ps));
	char *buf = malloc(65536);
	int ret = -1;
	if (!ps || !buf) {
		snprintf(err, errlen, "out of memory");
		goto cleanup;
	}
	ps->s = s;
	uint64_t total = 0;
	for (;;) {
		size_t k = fread(buf, 1, 65536, f);
		/* bounded: a text file of mappings holds no NUL byte, and even
		 * the smaps of a process with a million mappings is far below
		 * the limit (/dev/zero, a sparse file, a disk image end here) */
		const char *nul = k ? memchr(buf, 0, k) : NULL;
		if (nul) {
			snprintf(err, errlen, "binary data (a NUL byte at offset %llu): not an smaps file",
				 (unsigned long long)(total + (uint64_t)(nul - buf)));
			goto cleanup;
		}
		total += k;
		if (total > HT_SMAPS_MAX_BYTES) {
			snprintf(err, errlen, "more than %u MiB of text: not an smaps file",
				 HT_SMAPS_MAX_BYTES >> 20);
			goto cleanup;
		}
		if (k)
			feed(ps, buf, k);
		if (k < 65536) {
			if (ferror(f)) {
				snprintf(err, errlen, "read error: %s", strerror(errno));
				goto cleanup;
			}
			break;
		}
	}
	ret = finish(ps, err, errlen);
cleanup:
	free(buf);
	free(ps);
	return ret;
}

void ht_smaps__free(struct ht_smaps *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->maps[i].name);
	free(s->maps);
	memset(s, 0, sizeof(*s));
}

const char *ht_smaps__not_smaps(const struct ht_smaps *s, uint64_t input_bytes)
{
	if (!input_bytes)
		return "empty file";
	if (!s->n)
		return "not an smaps file (no mapping line such as "
		       "\"7f12a000-7f12b000 rw-p 00000000 00:00 0\")";
	if (!(s->seen & ((1u << HT_SM_SIZE) | (1u << HT_SM_RSS))))
		return "a maps file, not smaps (mappings without Size/Rss fields): "
		       "copy /proc/PID/smaps instead of /proc/PID/maps";
	if (s->truncated)
		return "truncated: the last line ends without a newline (a partial copy of "
		       "/proc/PID/smaps?)";
	return NULL;
}
