/* Function offsets of ELF files (elfsyms.h), with elfutils' libelf. */
#define _GNU_SOURCE
#include "elfsyms.h"

#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static Elf *elf_open(const char *path, int *fd)
{
	elf_version(EV_CURRENT);
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return NULL;
	Elf *e = elf_begin(*fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		if (e)
			elf_end(e);
		close(*fd);
		*fd = -1;
		return NULL;
	}
	return e;
}

const char *ht_proc__file(pid_t pid, const char *path, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/%d/root%s", (int)pid, path);
	struct stat a, b;
	/* the same file seen both ways: use the plain path (shorter messages) */
	if (stat(buf, &a) < 0 || (stat(path, &b) == 0 && a.st_dev == b.st_dev &&
				   a.st_ino == b.st_ino))
		snprintf(buf, len, "%s", path);
	return buf;
}

/* What a symbol lookup takes: find_sym's rule (a function with an
 * address: where a uprobe goes), or what the dynamic loader binds a
 * preloaded library's name to (a function or an indirect one, not local). */
enum sym_rule { SYM_PROBED, SYM_EXPORTED };

static int sym_matches(const GElf_Sym *s, enum sym_rule rule)
{
	if (s->st_shndx == SHN_UNDEF)
		return 0;
	int type = GELF_ST_TYPE(s->st_info);
	if (rule == SYM_PROBED)
		return s->st_value && type == STT_FUNC;
	return (type == STT_FUNC || type == STT_GNU_IFUNC) && GELF_ST_BIND(s->st_info) != STB_LOCAL;
}

/* Looks name up in the symbol section of type sh_type; 0 and *out set if
 * it is defined there by rule, else -1. */
static int lookup_sym(Elf *e, Elf64_Word sh_type, const char *name, enum sym_rule rule,
		      GElf_Sym *out)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != sh_type || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; d && i < n; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, (int)i, &s) || !sym_matches(&s, rule))
				continue;
			const char *sn = elf_strptr(e, sh.sh_link, s.st_name);
			if (sn && !strcmp(sn, name)) {
				*out = s;
				return 0;
			}
		}
	}
	return -1;
}

/* Looks name up in the symbol section of type sh_type; 0 and *vaddr set if
 * defined there as a function. */
static int find_sym(Elf *e, Elf64_Word sh_type, const char *name, uint64_t *vaddr, uint64_t *size)
{
	GElf_Sym s;
	if (lookup_sym(e, sh_type, name, SYM_PROBED, &s) < 0)
		return -1;
	*vaddr = s.st_value;
	*size = s.st_size;
	return 0;
}

/* Calls fn(e, the dynamic section's string table, entry, arg) for each
 * entry of e's dynamic section until it returns non-zero; returns that,
 * or 0. */
static int each_dyn(Elf *e, int (*fn)(Elf *, size_t, const GElf_Dyn *, void *), void *arg)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; d && i < n; i++) {
			GElf_Dyn dyn;
			int r;
			if (gelf_getdyn(d, (int)i, &dyn) && (r = fn(e, sh.sh_link, &dyn, arg)) != 0)
				return r;
		}
	}
	return 0;
}

int ht_elf__func_offset(const char *path, const char *name, uint64_t *off, uint64_t *size)
{
	int fd;
	Elf *e = elf_open(path, &fd);
	if (!e)
		return -1;
	uint64_t v = 0, sz = 0;
	int ret = -1;
	if (find_sym(e, SHT_DYNSYM, name, &v, &sz) == 0 ||
	    find_sym(e, SHT_SYMTAB, name, &v, &sz) == 0) {
		if (size)
			*size = sz;
		size_t nph;
		if (elf_getphdrnum(e, &nph) == 0) {
			for (size_t i = 0; i < nph; i++) {
				GElf_Phdr ph;
				if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
				    v >= ph.p_vaddr && v < ph.p_vaddr + ph.p_filesz) {
					*off = v - ph.p_vaddr + ph.p_offset;
					ret = 0;
					break;
				}
			}
		}
	}
	elf_end(e);
	close(fd);
	return ret;
}

/* Length of an instruction at b that only sets flags from registers (and
 * an immediate), 0 if b is not one: [REX] 85 /r, 39 /r, 3b /r (mod 3),
 * [REX] 83 /7 ib, [REX] 81 /7 id (mod 3). */
static unsigned flags_only_len(const uint8_t *b)
{
	unsigned i = (b[0] & 0xf0) == 0x40 ? 1 : 0; /* REX */
	uint8_t op = b[i], modrm = b[i + 1];
	if ((modrm >> 6) != 3)
		return 0; /* a memory operand: not only registers */
	if (op == 0x85 || op == 0x39 || op == 0x3b)
		return i + 2;
	if (op == 0x83 && ((modrm >> 3) & 7) == 7)
		return i + 3;
	if (op == 0x81 && ((modrm >> 3) & 7) == 7)
		return i + 6;
	return 0;
}

/* Whether some rel8/rel32 jump or call encoded anywhere in code[0..n)
 * (read as bytes, not decoded: a false match only keeps the probe at the
 * entry) lands on code offset to. */
static int branch_to(const uint8_t *code, size_t n, size_t to)
{
	for (size_t i = 0; i + 2 <= n; i++) {
		uint8_t op = code[i];
		if ((op >= 0x70 && op <= 0x7f) || op == 0xeb) {
			if ((int64_t)i + 2 + (int8_t)code[i + 1] == (int64_t)to)
				return 1;
		}
		if (i + 5 <= n && (op == 0xe8 || op == 0xe9)) {
			int32_t rel;
			memcpy(&rel, code + i + 1, 4);
			if ((int64_t)i + 5 + rel == (int64_t)to)
				return 1;
		}
		if (i + 6 <= n && op == 0x0f && (code[i + 1] & 0xf0) == 0x80) {
			int32_t rel;
			memcpy(&rel, code + i + 2, 4);
			if ((int64_t)i + 6 + rel == (int64_t)to)
				return 1;
		}
	}
	return 0;
}

uint64_t ht_elf__probe_offset(const char *path, uint64_t off, uint64_t size)
{
	if (size < 32 || size > (1u << 20))
		return off; /* no size: the whole function cannot be checked */
	uint8_t *b = malloc(size + 16);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint64_t ret = off;
	if (!b || fd < 0)
		goto out;
	memset(b, 0, size + 16);
	if (pread(fd, b, size, (off_t)off) != (ssize_t)size)
		goto out;
	unsigned at = 0;
	for (int k = 0; k < 2; k++) {
		unsigned len = flags_only_len(b + at);
		if (!len)
			break;
		at += len;
	}
	if (!at)
		goto out;
	int jcc = (b[at] >= 0x70 && b[at] <= 0x7f) || (b[at] == 0x0f && (b[at + 1] & 0xf0) == 0x80);
	/* a jump inside the function to that instruction would hit the probe
	 * a second time, mid-call */
	if (jcc && !branch_to(b, size, at))
		ret = off + at;
out:
	if (fd >= 0)
		close(fd);
	free(b);
	return ret;
}

struct needs {
	const char *const *prefixes;
	char *out;
	size_t cap;
};

static int need_of(Elf *e, size_t strtab, const GElf_Dyn *dyn, void *arg)
{
	struct needs *nd = arg;
	if (dyn->d_tag != DT_NEEDED)
		return 0;
	const char *lib = elf_strptr(e, strtab, dyn->d_un.d_val);
	for (size_t k = 0; lib && nd->prefixes[k]; k++)
		if (!strncmp(lib, nd->prefixes[k], strlen(nd->prefixes[k]))) {
			snprintf(nd->out, nd->cap, "%s", lib);
			return 1;
		}
	return 0;
}

int ht_elf__needs(const char *path, const char *const *prefixes, char *out, size_t cap)
{
	int fd;
	Elf *e = elf_open(path, &fd);
	if (!e)
		return -1;
	struct needs nd = {prefixes, out, cap};
	int ret = each_dyn(e, need_of, &nd) ? 0 : -1;
	elf_end(e);
	close(fd);
	return ret;
}

int ht_elf__interp(const char *path)
{
	int fd, ret = 0;
	Elf *e = elf_open(path, &fd);
	if (!e)
		return -1;
	size_t n = 0;
	if (elf_getphdrnum(e, &n) < 0)
		ret = -1;
	for (size_t i = 0; ret == 0 && i < n; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_INTERP)
			ret = 1;
	}
	elf_end(e);
	close(fd);
	return ret;
}

/* DT_FLAGS_1 with DF_1_PIE (each_dyn): 1 a position-independent
 * executable, -1 another DT_FLAGS_1 (the search ends there). */
static int pie_flag(Elf *e, size_t strtab, const GElf_Dyn *dyn, void *arg)
{
	(void)e, (void)strtab, (void)arg;
	if (dyn->d_tag != DT_FLAGS_1)
		return 0;
	return (dyn->d_un.d_val & DF_1_PIE) ? 1 : -1;
}

extern const ElfW(Ehdr) __ehdr_start; /* this program's own ELF header */

int ht_elf__preloadable(const char *path, const char *const *names, char *why, size_t len)
{
	int fd;
	Elf *e = elf_open(path, &fd);
	if (!e) {
		snprintf(why, len, "not an ELF file");
		return -1;
	}
	GElf_Ehdr eh;
	int ret = -1;
	if (!gelf_getehdr(e, &eh)) {
		snprintf(why, len, "not an ELF file");
	} else if (eh.e_ident[EI_CLASS] != __ehdr_start.e_ident[EI_CLASS] ||
		   eh.e_machine != __ehdr_start.e_machine) {
		snprintf(why, len,
			 "an ELF file of another machine (class %d, machine %d; this "
			 "one's: %d, %d)",
			 eh.e_ident[EI_CLASS], eh.e_machine, __ehdr_start.e_ident[EI_CLASS],
			 __ehdr_start.e_machine);
	} else if (eh.e_type != ET_DYN || each_dyn(e, pie_flag, NULL) == 1) {
		snprintf(why, len, "%s, not a shared library",
			 eh.e_type == ET_EXEC || eh.e_type == ET_DYN ? "a program"
								     : "an object file");
	} else {
		GElf_Sym s;
		ret = 0;
		for (size_t i = 0; names[i]; i++)
			if (lookup_sym(e, SHT_DYNSYM, names[i], SYM_EXPORTED, &s) < 0) {
				snprintf(why, len, "a shared library that does not define %s()",
					 names[i]);
				ret = -1;
				break;
			}
	}
	elf_end(e);
	close(fd);
	return ret;
}
