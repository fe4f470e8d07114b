/* Offline symbolization with elfutils libdwfl (symbolize.h).
 *
 * Every recorded module is reported to one offline Dwfl at its load bias,
 * from its path (under --sysroot if given); separate debug files are found
 * the standard way (.gnu_debuglink, /usr/lib/debug/.build-id, and
 * --debug-dir), on disk only (find_debuginfo).  An address is looked up as ip - 1, inside the call
 * instruction, so that the line is the call's and not the next one's.
 * Inlined calls come from the DWARF scopes around the address: each
 * DW_TAG_inlined_subroutine is a frame, located at the innermost line for
 * the first and at the call site (DW_AT_call_file/line) of the one inside
 * it for the others.
 *
 * Modules mapped at the same addresses one after the other (a library
 * unloaded by dlclose, another loaded in its place) cannot share one Dwfl
 * address space: each one that overlaps a module reported before it is
 * reported at an address range of its own above every recorded module,
 * and an address resolved in that module (ht_symbolizer__resolve_in) is
 * moved there first.  Modules recorded later (ht_symbolizer__extend) are
 * added the same way; one that reaches into those ranges is moved above
 * them too. */
#define _GNU_SOURCE
#include "symbolize.h"

#include <dwarf.h>
#include <errno.h>
#include <limits.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>
#include <gelf.h>

#include "common/util.h"
#include "perfmap.h"
#include "symindex.h"

/* libstdc++'s demangler (linked in for it). */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

struct mod_ref {
	uint64_t lo, hi;     /* runtime extent */
	uint64_t base;       /* load bias */
	uint64_t shift;      /* added to its addresses in the Dwfl (0 unless it overlaps another) */
	const char *name;    /* file name without directory, NULL: no path recorded */
	struct ht_symindex *syms; /* its ELF symbols by address, built at the first need */
	int syms_tried;      /* syms was built (or could not be) */
	int stale;           /* not the file that was traced (another build-id at its
			      * path): its frames are module+0xoffset, never named from it */
	Dwfl_Module *dm;     /* as reported to the Dwfl, NULL if it was not */
};

struct cache_slot {
	uint64_t ip;    /* 0 = empty */
	int32_t mod;    /* the module it was resolved in, -1 none */
	uint32_t first; /* index of its first frame */
	uint32_t n;     /* frames */
};

struct ht_symbolizer {
	Dwfl *dwfl;                 /* every module, reported offline */
	Dwfl_Callbacks cb;          /* its callbacks */
	char *debug_path;           /* libdwfl's search path for debug files */
	char *sysroot;              /* prefix of module paths, NULL if none */
	uint64_t shift_floor;       /* where the ranges of overlapping modules start */
	uint64_t next_free;         /* where the next one goes */
	struct mod_ref *mods;       /* the recorded modules, in their order */
	size_t nmods;               /* count */
	uint32_t *by_lo;            /* those at their own addresses (shift 0), by lo */
	size_t nby_lo;              /* count */
	struct ht_frame *frames;    /* every frame resolved so far */
	size_t nframes, capframes;  /* count / allocated */
	struct cache_slot *cache;   /* ip -> frames, open addressing */
	size_t cache_cap, cache_n;  /* slots (power of two) / used */
	char **strs;                /* interned strings */
	size_t nstrs, capstrs;      /* count / allocated */
	char *debug_dir;            /* --debug-dir, absolute; NULL if none (or unusable) */
	char *problems;             /* for ht_symbolizer__problems */
	size_t problems_len;        /* its length */
	struct ht_perfmap *perfmap; /* names of code in no module (a JIT's), or NULL */
};

static void *xrealloc(void *p, size_t n)
{
	p = ht_xrealloc(p, n ? n : 1);
	return p;
}

/* Strings live as long as the symbolizer (libdw's may not). */
static const char *keep(struct ht_symbolizer *s, const char *str)
{
	if (!str)
		return NULL;
	/* the same pointer as last time is common: a small check saves memory */
	if (s->nstrs && !strcmp(s->strs[s->nstrs - 1], str))
		return s->strs[s->nstrs - 1];
	if (s->nstrs == s->capstrs) {
		s->capstrs = s->capstrs ? s->capstrs * 2 : 256;
		s->strs = xrealloc(s->strs, s->capstrs * sizeof(*s->strs));
	}
	char *c = ht_xstrdup(str);
	s->strs[s->nstrs++] = c;
	return c;
}

static const char *demangled(struct ht_symbolizer *s, const char *name)
{
	if (!name)
		return NULL;
	if (name[0] == '_' && name[1] == 'Z') {
		int status = -1;
		char *d = __cxa_demangle(name, NULL, NULL, &status);
		if (d && status == 0) {
			const char *k = keep(s, d);
			free(d);
			return k;
		}
		free(d);
	}
	return keep(s, name);
}

static __attribute__((format(printf, 2, 3))) void problem(struct ht_symbolizer *s,
							 const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n <= 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	s->problems = xrealloc(s->problems, s->problems_len + (size_t)n + 2);
	memcpy(s->problems + s->problems_len, line, (size_t)n);
	s->problems_len += (size_t)n;
	s->problems[s->problems_len++] = '\n';
	s->problems[s->problems_len] = 0;
}

static void hex(char *out, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = 0;
}

/* Reports module m (index i of the recorded ones) to the Dwfl, between
 * dwfl_report_begin_add and dwfl_report_end. */
static void add_module(struct ht_symbolizer *s, const struct ht_module *m, size_t i)
{
	struct mod_ref *r = &s->mods[s->nmods++];
	const uint64_t align = (uint64_t)1 << 30;
	r->lo = m->lo;
	r->hi = m->hi;
	r->base = m->base;
	if (!m->path)
		return;
	const char *slash = strrchr(m->path, '/');
	r->name = keep(s, slash ? slash + 1 : m->path);
	/* (a module added after the first ones may reach where the shifted
	 * ones go: it is shifted too) */
	int overlap = m->hi > s->shift_floor;
	for (size_t j = 0; j < s->nby_lo; j++) {
		const struct mod_ref *o = &s->mods[s->by_lo[j]];
		overlap |= o->lo < m->hi && m->lo < o->hi;
	}
	if (!overlap) {
		s->by_lo[s->nby_lo++] = (uint32_t)i;
	} else {
		r->shift = s->next_free - (m->lo & ~(align - 1));
		s->next_free += (m->hi - (m->lo & ~(align - 1)) + align) & ~(align - 1);
	}
	if (m->path[0] != '/' && (m->path[0] == '[' || !slash))
		return; /* [vdso] and friends: no file */
	char file[4096];
	if (m->path[0] != '/') {
		/* a path relative to the program's directory then (the
		 * loader's name of a library found by LD_LIBRARY_PATH=. or
		 * dlopen("./x.so"), in traces of recorders before absolute
		 * paths): from here, and the build-id check below says if
		 * that is another file */
		if (access(m->path, R_OK) != 0) {
			problem(s,
				"%s: recorded by a relative path, not found from this directory "
				"(run the command from the directory the program ran in)",
				m->path);
			return;
		}
		snprintf(file, sizeof(file), "%s", m->path);
	} else {
		snprintf(file, sizeof(file), "%s%s", s->sysroot ? s->sysroot : "", m->path);
	}
	Dwfl_Module *dm = dwfl_report_elf(s->dwfl, r->name, file, -1, m->base + r->shift, true);
	if (!dm) {
		problem(s, "%s: %s", file, dwfl_errmsg(-1));
		return;
	}
	r->dm = dm;
	void **ud;
	if (dwfl_module_info(dm, &ud, NULL, NULL, NULL, NULL, NULL, NULL))
		*ud = s; /* (for find_debuginfo) */
	const unsigned char *bits;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(dm, &bits, &vaddr);
	/* (the recorder's own library is left out: a heaptrail rebuilt
	 * or upgraded since the recording would make every old trace
	 * warn for nothing) */
	if (m->build_id_len && len > 0 && !ht_symbols__is_recorder(r->name) &&
	    ((size_t)len != m->build_id_len || memcmp(bits, m->build_id, (size_t)len))) {
		char got[129];
		hex(got, bits, (size_t)len < 64 ? (size_t)len : 64);
		problem(s, "%s: not the file that was traced (build-id %s)", file, got);
		r->stale = 1; /* (names from it would be another program's) */
	}
}

/* Debug files are looked up on disk only, unless HEAPTRAIL_DEBUGINFOD=1.
 * libdw's standard look-up asks debuginfod for what it does not find on
 * disk: it loads libdebuginfod with curl, GnuTLS and Kerberos (5 ms of
 * every command, here) and, when DEBUGINFOD_URLS is set (Ubuntu and
 * Fedora set it for everyone), waits for the server up to
 * DEBUGINFOD_TIMEOUT (90 s) for each module without debug info: `top`
 * on a trace of gcc's cc1, with a server that accepted and never
 * answered, was still waiting after 30 s, and said nothing.  So the
 * standard look-up runs only when a candidate file is on disk: the
 * build-id file under each absolute directory of the search path
 * (.build-id/xx/rest.debug), or the .gnu_debuglink name (else the
 * file's name + ".debug") beside the file, in its .debug directory, or
 * under each absolute directory followed by the file's directory, the
 * file's own path or its target's when it is a symlink. */
static int debuginfod_wanted(void)
{
	const char *v = getenv("HEAPTRAIL_DEBUGINFOD");
	return v && !strcmp(v, "1");
}

static int exists_other(const char *cand, const char *self)
{
	return strcmp(cand, self) != 0 && access(cand, R_OK) == 0;
}

/* A debug file for file (its debuglink name link, NULL none) in the
 * places of path (libdw's "+:.debug:/usr/lib/debug[:DIR]"). */
static int debuglink_on_disk(const char *file, const char *link, const char *path)
{
	char dir[PATH_MAX], name[NAME_MAX + 8], cand[PATH_MAX * 2 + NAME_MAX];
	const char *slash = strrchr(file, '/');
	if (!slash || (size_t)(slash - file) >= sizeof(dir))
		return 0;
	memcpy(dir, file, (size_t)(slash - file));
	dir[slash - file] = 0;
	if (link && *link)
		snprintf(name, sizeof(name), "%s", link);
	else
		snprintf(name, sizeof(name), "%.*s.debug", NAME_MAX, slash + 1);
	const char *p = path;
	while (p && *p) {
		size_t n = strcspn(p, ":");
		const char *e = p;
		if (*e == '+' || *e == '-') { /* (the CRC switch) */
			e++;
			n--;
		}
		if (n == 0)
			snprintf(cand, sizeof(cand), "%s/%s", dir, name);
		else if (*e == '/')
			snprintf(cand, sizeof(cand), "%.*s%s/%s", (int)n, e, dir, name);
		else
			snprintf(cand, sizeof(cand), "%s/%.*s/%s", dir, (int)n, e, name);
		if (exists_other(cand, file))
			return 1;
		p += strcspn(p, ":");
		if (*p == ':')
			p++;
	}
	return 0;
}

static int debug_on_disk(Dwfl_Module *mod, const char *file, const char *link, const char *path)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(mod, &bits, &vaddr);
	if (len > 1) {
		char hexid[129], cand[PATH_MAX];
		hex(hexid, bits, (size_t)len < 64 ? (size_t)len : 64);
		for (const char *p = path; p && *p;) {
			size_t n = strcspn(p, ":");
			const char *e = *p == '+' || *p == '-' ? p + 1 : p;
			size_t en = n - (size_t)(e - p);
			if (en && *e == '/') {
				snprintf(cand, sizeof(cand), "%.*s/.build-id/%.2s/%s.debug", (int)en, e,
					 hexid, hexid + 2);
				if (access(cand, R_OK) == 0)
					return 1;
			}
			p += n;
			if (*p == ':')
				p++;
		}
	}
	if (!file)
		return 0;
	if (debuglink_on_disk(file, link, path))
		return 1;
	char target[PATH_MAX];
	return realpath(file, target) && strcmp(target, file) &&
	       debuglink_on_disk(target, link, path);
}

/* A debug file put directly in --debug-dir: DIR/<debuglink name> (else
 * DIR/<file's name>.debug), which libdw does not look for (it looks in DIR
 * followed by the file's own directory, and DIR/.build-id/).  Taken only
 * if its build-id is the module's: an fd, its name in *name (malloc'd),
 * else -1. */
static int flat_debug_file(Dwfl_Module *mod, const char *dir, const char *file, const char *link,
			   char **name)
{
	const unsigned char *want;
	GElf_Addr vaddr;
	int wlen = dwfl_module_build_id(mod, &want, &vaddr);
	if (!dir || wlen <= 0 || (!file && !(link && *link)))
		return -1;
	const char *base = file ? strrchr(file, '/') : NULL;
	base = base ? base + 1 : file;
	char cand[PATH_MAX];
	if (link && *link)
		snprintf(cand, sizeof(cand), "%s/%s", dir, link);
	else
		snprintf(cand, sizeof(cand), "%s/%s.debug", dir, base);
	if (file && !strcmp(cand, file))
		return -1;
	int fd = open(cand, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	const void *got = NULL;
	ssize_t glen = elf ? dwelf_elf_gnu_build_id(elf, &got) : -1;
	int same = glen == wlen && got && !memcmp(got, want, (size_t)wlen);
	if (elf)
		elf_end(elf);
	if (!same || !(*name = strdup(cand))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, GElf_Addr base,
			  const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	const struct ht_symbolizer *s = *userdata; /* (set when it was reported) */
	if (s && s->debug_dir) {
		int fd = flat_debug_file(mod, s->debug_dir, file_name, debuglink_file,
					 debuginfo_file_name);
		if (fd >= 0)
			return fd;
	}
	if (s && !debuginfod_wanted() &&
	    !debug_on_disk(mod, file_name, debuglink_file, s ? s->debug_path : NULL)) {
		static _Atomic int said;
		const char *urls = getenv("DEBUGINFOD_URLS");
		const char *v = getenv("HEAPTRAIL_DEBUGINFOD");
		if (urls && *urls && !v && !ht_quiet && !atomic_exchange(&said, 1))
			fprintf(stderr,
				"heaptrail: note: DEBUGINFOD_URLS is set, but debug files are looked "
				"up on disk only (%s has none there); HEAPTRAIL_DEBUGINFOD=1 lets "
				"debuginfod download them (it may wait minutes for a server that "
				"does not answer), HEAPTRAIL_DEBUGINFOD=0 drops this note\n",
				modname ? modname : "a module");
		errno = ENOENT;
		return -1;
	}
	return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name,
					    debuglink_file, debuglink_crc, debuginfo_file_name);
}

struct ht_symbolizer *ht_symbolizer__new(const struct ht_module *mods, size_t nmods,
					 const struct ht_symbol_opts *opts)
{
	struct ht_symbolizer *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	const char *dd = opts && opts->debug_dir ? opts->debug_dir : NULL;
	char dd_abs[PATH_MAX];
	if (dd && *dd) {
		/* libdw takes a relative entry as relative to each module's
		 * directory, and a missing one as nothing: --debug-dir=dbg was
		 * ignored, silently */
		struct stat st;
		int e = !realpath(dd, dd_abs) ? errno : stat(dd_abs, &st) ? errno
						     : !S_ISDIR(st.st_mode)   ? ENOTDIR
									      : 0;
		static _Atomic int said;
		if (e && !ht_quiet && !atomic_exchange(&said, 1))
			ht_warning("--debug-dir %s: %s: no debug files are looked for there", dd,
				   strerror(e));
		dd = e ? NULL : dd_abs;
		if (dd && !(s->debug_dir = strdup(dd))) {
			free(s);
			return NULL;
		}
	}
	if (asprintf(&s->debug_path, "+:.debug:/usr/lib/debug%s%s", dd ? ":" : "", dd ? dd : "") < 0)
		s->debug_path = NULL;
	s->cb.find_elf = dwfl_build_id_find_elf;
	s->cb.find_debuginfo = find_debuginfo;
	s->cb.section_address = dwfl_offline_section_address;
	s->cb.debuginfo_path = &s->debug_path;
	s->dwfl = dwfl_begin(&s->cb);
	if (opts && opts->sysroot)
		s->sysroot = strdup(opts->sysroot);
	if (!s->dwfl || (opts && opts->sysroot && !s->sysroot)) {
		ht_symbolizer__free(s);
		return NULL;
	}
	/* the address ranges of overlapping modules start above every module */
	uint64_t top = 0;
	for (size_t i = 0; i < nmods; i++)
		if (mods[i].hi > top)
			top = mods[i].hi;
	const uint64_t align = (uint64_t)1 << 30;
	s->next_free = (top + align) & ~(align - 1);
	s->shift_floor = UINT64_MAX; /* (these are below it by construction) */
	if (ht_symbolizer__extend(s, mods, nmods) < 0) {
		ht_symbolizer__free(s);
		return NULL;
	}
	/* a module added later that reaches the shifted ones is shifted too;
	 * none is when the modules span the whole space (hi = UINT64_MAX:
	 * the probes' one file at a time) */
	s->shift_floor = s->next_free > top ? s->next_free : UINT64_MAX;
	return s;
}

int ht_symbolizer__extend(struct ht_symbolizer *s, const struct ht_module *mods, size_t nmods)
{
	size_t had = s->nmods;
	if (nmods <= had && s->mods)
		return 0;
	struct mod_ref *m = realloc(s->mods, (nmods ? nmods : 1) * sizeof(*m));
	if (m)
		s->mods = m;
	uint32_t *b = m ? realloc(s->by_lo, (nmods ? nmods : 1) * sizeof(*b)) : NULL;
	if (b)
		s->by_lo = b;
	if (!m || !b)
		return -1;
	memset(s->mods + had, 0, (nmods - had) * sizeof(*m));
	dwfl_report_begin_add(s->dwfl);
	for (size_t i = had; i < nmods; i++)
		add_module(s, &mods[i], i);
	dwfl_report_end(s->dwfl, NULL, NULL);
	/* the recorded modules by address, for module+offset */
	for (size_t i = 1; i < s->nby_lo; i++) {
		uint32_t x = s->by_lo[i];
		size_t k = i;
		while (k > 0 && s->mods[s->by_lo[k - 1]].lo > s->mods[x].lo) {
			s->by_lo[k] = s->by_lo[k - 1];
			k--;
		}
		s->by_lo[k] = x;
	}
	return 0;
}

void ht_symbolizer__prepare(struct ht_symbolizer *s, const uint8_t *want)
{
	for (size_t i = 0; i < s->nmods; i++) {
		struct mod_ref *m = &s->mods[i];
		if (!m->dm || m->stale || (want && !want[i]) || ht_symbols__is_recorder(m->name))
			continue;
		Dwarf_Addr bias;
		Dwarf *dw = dwfl_module_getdwarf(m->dm, &bias);
		Dwarf_Aranges *ar;
		size_t nar;
		if (dw)
			dwarf_getaranges(dw, &ar, &nar);
		if (!m->syms_tried) {
			m->syms_tried = 1;
			m->syms = ht_symindex__new(m->dm);
		}
	}
}

void ht_symbolizer__free(struct ht_symbolizer *s)
{
	if (!s)
		return;
	if (s->dwfl)
		dwfl_end(s->dwfl);
	for (size_t i = 0; i < s->nstrs; i++)
		free(s->strs[i]);
	free(s->strs);
	free(s->frames);
	free(s->cache);
	for (size_t i = 0; i < s->nmods; i++)
		ht_symindex__free(s->mods[i].syms);
	free(s->mods);
	free(s->by_lo);
	free(s->debug_path);
	free(s->sysroot);
	free(s->problems);
	free(s->debug_dir);
	ht_perfmap__free(s->perfmap);
	free(s);
}

void ht_symbolizer__set_perf_map(struct ht_symbolizer *s, struct ht_perfmap *m)
{
	ht_perfmap__free(s->perfmap);
	s->perfmap = m;
}

const char *ht_symbolizer__problems(const struct ht_symbolizer *s)
{
	return s->problems;
}

/* The index of the module at ip (among those at their own addresses), -1 if none. */
static int mod_of(const struct ht_symbolizer *s, uint64_t ip)
{
	int best = -1;
	for (size_t lo = 0, hi = s->nby_lo; lo < hi;) {
		size_t mid = (lo + hi) / 2;
		if (s->mods[s->by_lo[mid]].lo <= ip) {
			best = (int)s->by_lo[mid];
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return best >= 0 && ip < s->mods[best].hi ? best : -1;
}

static struct ht_frame *new_frame(struct ht_symbolizer *s, uint64_t ip, const struct mod_ref *m)
{
	if (s->nframes == s->capframes) {
		s->capframes = s->capframes ? s->capframes * 2 : 1024;
		s->frames = xrealloc(s->frames, s->capframes * sizeof(*s->frames));
	}
	struct ht_frame *f = &s->frames[s->nframes++];
	memset(f, 0, sizeof(*f));
	f->ip = ip;
	f->module = m ? m->name : NULL; /* (NULL too for a module recorded without path) */
	f->offset = m ? ip - m->base : ip;
	return f;
}

/* The name of a subprogram or inlined subroutine DIE: its linkage name
 * demangled when it has one (C++), else its name. */
static const char *die_function(struct ht_symbolizer *s, Dwarf_Die *die, int *linkage)
{
	Dwarf_Attribute a;
	const char *n = NULL;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
		n = dwarf_formstring(&a);
	*linkage = n != NULL;
	if (!n && dwarf_attr_integrate(die, DW_AT_name, &a))
		n = dwarf_formstring(&a);
	return n ? demangled(s, n) : NULL;
}

/* Whether cu is C++ (its functions' DWARF names are short: a method's or
 * a template's own name, without its class or namespace). */
static int cxx_unit(Dwarf_Die *cu)
{
	int lang = dwarf_srclang(cu);
	return lang == DW_LANG_C_plus_plus || lang == DW_LANG_C_plus_plus_03 ||
	       lang == DW_LANG_C_plus_plus_11 || lang == DW_LANG_C_plus_plus_14;
}

/* The innermost subprogram, inlined subroutine or lexical block of cu
 * that holds pc, by a descent of its DIE tree from the unit's top level;
 * 1 if found.  dwarf_getscopes finds none in the unit an LTO link makes
 * (<artificial>), whose concrete instances name their origins in other
 * units: the inlined frames were lost and the outer function got the
 * innermost line. */
static int innermost_die(Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die *out)
{
	Dwarf_Die cur = *cu, child;
	int found = 0;
	while (dwarf_child(&cur, &child) == 0) {
		int down = 0;
		do {
			int tag = dwarf_tag(&child);
			if ((tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
			     tag == DW_TAG_lexical_block) &&
			    dwarf_haspc(&child, pc) > 0) {
				cur = child;
				found = down = 1;
				break;
			}
		} while (dwarf_siblingof(&child, &child) == 0);
		if (!down)
			break;
	}
	if (found)
		*out = cur;
	return found;
}

/* The ELF symbol at addr (in the Dwfl's addresses) of module m, through
 * its index (symindex.h: the same answer as dwfl_module_addrinfo, without
 * a scan of the table per address); NULL if none.  Asked only when DWARF
 * does not name the function. */
static const char *elf_symbol(struct mod_ref *m, Dwfl_Module *dm, uint64_t addr)
{
	if (!m->syms_tried) {
		m->syms_tried = 1;
		m->syms = ht_symindex__new(dm);
	}
	uint64_t off;
	return ht_symindex__lookup(m->syms, dm, addr, &off);
}

/* Whether the code at addr (in the Dwfl's addresses) of module dm is the
 * x86-64 signal trampoline, `mov $15, %rax; syscall` (rt_sigreturn): the
 * frame a signal handler returns to, named so where no symbol table names
 * it (glibc's __restore_rt is a local symbol, in .symtab only, which a
 * stripped libc without its debug file lacks). */
static int is_sigreturn(Dwfl_Module *dm, uint64_t addr)
{
#if defined(__x86_64__)
	static const unsigned char code[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
	Dwarf_Addr bias = 0;
	Elf *e = dwfl_module_getelf(dm, &bias);
	if (!e || addr < bias)
		return 0;
	uint64_t va = addr - bias;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_EXECINSTR) || va < sh.sh_addr ||
		    va - sh.sh_addr > sh.sh_size || sh.sh_size - (va - sh.sh_addr) < sizeof(code))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		uint64_t o = va - sh.sh_addr;
		return d && d->d_buf && d->d_size >= o + sizeof(code) &&
		       !memcmp((const unsigned char *)d->d_buf + o, code, sizeof(code));
	}
#else
	(void)dm;
	(void)addr;
#endif
	return 0;
}

static void resolve_into(struct ht_symbolizer *s, uint64_t ip, struct mod_ref *m)
{
	if (m && !m->name)
		m = NULL;
	uint64_t addr = (ip ? ip - 1 : 0) + (m ? m->shift : 0);
	Dwfl_Module *dm = m && !m->stale ? dwfl_addrmodule(s->dwfl, addr) : NULL;
	if (!dm) {
		struct ht_frame *f = new_frame(s, ip, m);
		if (!m && s->perfmap) /* (a JIT's code: its perf map names it) */
			f->function = keep(s, ht_perfmap__lookup(s->perfmap, addr));
		return;
	}
	const char *file = NULL;
	int line = 0;
	Dwfl_Line *dl = dwfl_module_getsrc(dm, addr);
	if (dl) {
		int col;
		file = keep(s, dwfl_lineinfo(dl, NULL, &line, &col, NULL, NULL));
	}
	Dwarf_Addr bias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(dm, addr, &bias);
	Dwarf_Die *scopes = NULL;
	int nscopes = cu ? dwarf_getscopes(cu, addr - bias, &scopes) : 0;
	Dwarf_Die inner;
	if (nscopes > 0 || (cu && innermost_die(cu, addr - bias, &inner))) {
		/* dwarf_getscopes continues an inlined instance with its abstract
		 * origin's scopes; the concrete ones (the function it was
		 * inlined into) come from the innermost DIE. */
		if (nscopes > 0)
			inner = scopes[0];
		Dwarf_Die *concrete = NULL;
		int n = dwarf_getscopes_die(&inner, &concrete);
		free(scopes);
		scopes = concrete;
		nscopes = n > 0 ? n : 0;
	}
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	if (cu && dwarf_getsrcfiles(cu, &files, &nfiles) != 0)
		files = NULL;
	int made = 0;
	for (int i = 0; i < nscopes; i++) {
		int tag = dwarf_tag(&scopes[i]);
		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
			continue;
		struct ht_frame *f = new_frame(s, ip, m);
		int linkage;
		f->function = die_function(s, &scopes[i], &linkage);
		f->file = file;
		f->line = line;
		made++;
		if (tag == DW_TAG_subprogram) {
			/* A C++ function whose DWARF has no linkage name (libstdc++'s
			 * templates instantiated with a lambda: GCC gives them
			 * none) has only its short name there, `_M_invoke`,
			 * `_M_run`, the same for every instance: its ELF symbol
			 * names it whole, std::_Function_handler<void (),
			 * main::{lambda()#2}>::_M_invoke(...), as valgrind and
			 * perf show it.  (Inlined frames keep their DWARF names.) */
			if (!f->function || (!linkage && cxx_unit(cu))) {
				const char *e = elf_symbol(m, dm, addr);
				if (e || !f->function)
					f->function = demangled(s, e);
			}
			break;
		}
		f->inlined = 1;
		/* the next frame out is located at this call site */
		Dwarf_Attribute a;
		Dwarf_Word w;
		file = NULL;
		line = 0;
		if (files && dwarf_attr(&scopes[i], DW_AT_call_file, &a) && dwarf_formudata(&a, &w) == 0)
			file = keep(s, dwarf_filesrc(files, (size_t)w, NULL, NULL));
		if (dwarf_attr(&scopes[i], DW_AT_call_line, &a) && dwarf_formudata(&a, &w) == 0)
			line = (int)w;
	}
	free(scopes);
	if (!made) {
		/* no DWARF: the ELF symbol, and the line if there was one in a
		 * compilation unit whose ranges hold the address.  Code built without
		 * -g that follows a unit's last line row was given that row
		 * (libdw answers with the row before the address): the line of
		 * another function, in another file. */
		int covered = cu && dwarf_haspc(cu, addr - bias) > 0;
		struct ht_frame *f = new_frame(s, ip, m);
		const char *e = elf_symbol(m, dm, addr);
		/* A frame a signal handler returns to is the signal trampoline
		 * (__restore_rt), whose first byte is the address itself, not a
		 * return address after a call: ip - 1 lies in the padding before
		 * it, in no symbol.  The address itself names it. */
		if (!e && ip)
			e = elf_symbol(m, dm, addr + 1);
		if (!e && ip && is_sigreturn(dm, addr + 1))
			e = "__restore_rt";
		f->function = demangled(s, e);
		f->file = covered ? file : NULL;
		f->line = covered ? line : 0;
	}
}

static size_t slot_of(uint64_t ip, int mod, size_t mask)
{
	uint64_t h = (ip ^ (uint64_t)(uint32_t)mod << 48) * 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 20) & mask;
}

size_t ht_symbolizer__resolve_in(struct ht_symbolizer *s, uint64_t ip, int mod,
				 const struct ht_frame **frames)
{
	if (mod < 0 || (size_t)mod >= s->nmods)
		mod = mod_of(s, ip);
	if (s->cache_n * 2 >= s->cache_cap) {
		size_t cap = s->cache_cap ? s->cache_cap * 2 : 4096;
		struct cache_slot *c = ht_xzalloc(cap, sizeof(*c));
		for (size_t i = 0; i < s->cache_cap; i++) {
			if (!s->cache[i].ip)
				continue;
			size_t k = slot_of(s->cache[i].ip, s->cache[i].mod, cap - 1);
			while (c[k].ip)
				k = (k + 1) & (cap - 1);
			c[k] = s->cache[i];
		}
		free(s->cache);
		s->cache = c;
		s->cache_cap = cap;
	}
	uint64_t key = ip ? ip : 1;
	size_t mask = s->cache_cap - 1;
	size_t k = slot_of(key, mod, mask);
	for (; s->cache[k].ip; k = (k + 1) & mask) {
		if (s->cache[k].ip == key && s->cache[k].mod == mod) {
			*frames = &s->frames[s->cache[k].first];
			return s->cache[k].n;
		}
	}
	size_t first = s->nframes;
	resolve_into(s, ip, mod >= 0 ? &s->mods[mod] : NULL);
	s->cache[k].ip = key;
	s->cache[k].mod = mod;
	s->cache[k].first = (uint32_t)first;
	s->cache[k].n = (uint32_t)(s->nframes - first);
	s->cache_n++;
	*frames = &s->frames[first];
	return s->nframes - first;
}

size_t ht_symbolizer__resolve(struct ht_symbolizer *s, uint64_t ip,
			      const struct ht_frame **frames)
{
	return ht_symbolizer__resolve_in(s, ip, -1, frames);
}
