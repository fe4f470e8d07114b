/* Modules of a live process and function offsets of ELF files
 * (procmaps.h), with elfutils' libelf. */
#define _GNU_SOURCE
#include "procmaps.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

#define PAGE_DOWN(x) ((x) & ~(uint64_t)0xfff)

/* A mapping of a file. */
struct mapping {
	uint64_t start;  /* runtime address */
	uint64_t offset; /* file offset mapped there */
	char *path;      /* the file */
};

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

/* Fills m's bias, span and build-id from the file's program headers, the
 * mapping of its first loadable segment being at map_start, file offset
 * map_off.  Returns 0, or -1 if the file is not a loadable ELF file. */
static int describe(const char *file, const struct mapping *maps, size_t nmaps,
		    struct ht_module *m)
{
	int fd;
	Elf *e = elf_open(file, &fd);
	if (!e)
		return -1;
	size_t nph;
	int ret = -1;
	if (elf_getphdrnum(e, &nph) != 0)
		goto out;
	uint64_t lo = UINT64_MAX, hi = 0, first_vaddr = 0, first_off = 0;
	int have_first = 0;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph))
			continue;
		if (ph.p_type == PT_LOAD) {
			if (!have_first) {
				first_vaddr = ph.p_vaddr;
				first_off = ph.p_offset;
				have_first = 1;
			}
			if (ph.p_vaddr < lo)
				lo = ph.p_vaddr;
			if (ph.p_vaddr + ph.p_memsz > hi)
				hi = ph.p_vaddr + ph.p_memsz;
		} else if (ph.p_type == PT_NOTE && !m->build_id_len) {
			Elf_Data *d = elf_getdata_rawchunk(e, (int64_t)ph.p_offset, ph.p_filesz,
							   ELF_T_NHDR);
			size_t off = 0, name_off, desc_off;
			GElf_Nhdr nh;
			while (d && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
				if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
				    !memcmp((char *)d->d_buf + name_off, "GNU", 4) &&
				    nh.n_descsz <= sizeof(m->build_id)) {
					memcpy(m->build_id, (char *)d->d_buf + desc_off, nh.n_descsz);
					m->build_id_len = nh.n_descsz;
					break;
				}
			}
		}
	}
	if (!have_first)
		goto out;
	for (size_t i = 0; i < nmaps; i++) {
		if (maps[i].offset == PAGE_DOWN(first_off)) {
			m->base = maps[i].start - PAGE_DOWN(first_vaddr);
			m->lo = m->base + lo;
			m->hi = m->base + hi;
			ret = 0;
			break;
		}
	}
out:
	elf_end(e);
	close(fd);
	return ret;
}

int ht_proc_modules__read(pid_t pid, struct ht_proc_modules *pm, char *err, size_t errlen)
{
	char path[64];
	memset(pm, 0, sizeof(*pm));
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			snprintf(err, errlen, "no process %d (%s does not exist)", (int)pid, path);
		else
			snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	struct mapping *maps = NULL;
	size_t nmaps = 0;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		uint64_t start, end, off;
		int pos = 0;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64 " %*s %*s %n", &start, &end,
			   &off, &pos) < 3 || !pos)
			continue;
		char *p = line + pos;
		p[strcspn(p, "\n")] = 0;
		if (*p != '/')
			continue; /* anonymous, [heap], [stack], [vdso] */
		size_t l = strlen(p);
		if (l > 10 && !strcmp(p + l - 10, " (deleted)"))
			continue;
		maps = ht_xrealloc(maps, (nmaps + 1) * sizeof(*maps));
		maps[nmaps].start = start;
		maps[nmaps].offset = off;
		maps[nmaps].path = strdup(p);
		nmaps++;
	}
	free(line);
	fclose(f);
	if (!nmaps) {
		snprintf(err, errlen, "%s: no mapped files (is process %d a kernel thread, or gone?)",
			 path, (int)pid);
		free(maps);
		return -1;
	}
	/* one module per file, in the order of their first mapping */
	for (size_t i = 0; i < nmaps; i++) {
		int seen = 0;
		for (size_t k = 0; k < pm->n && !seen; k++)
			seen = !strcmp(pm->mods[k].path, maps[i].path);
		if (seen)
			continue;
		struct mapping *same = ht_xrealloc(NULL, nmaps * sizeof(*same));
		size_t nsame = 0;
		for (size_t k = i; k < nmaps; k++)
			if (!strcmp(maps[k].path, maps[i].path))
				same[nsame++] = maps[k];
		struct ht_module m;
		memset(&m, 0, sizeof(m));
		char file[4096];
		ht_proc__file(pid, maps[i].path, file, sizeof(file));
		if (describe(file, same, nsame, &m) == 0) {
			m.path = strdup(maps[i].path);
			pm->mods = ht_xrealloc(pm->mods, (pm->n + 1) * sizeof(*pm->mods));
			pm->mods[pm->n++] = m;
		}
		free(same);
	}
	for (size_t i = 0; i < nmaps; i++)
		free(maps[i].path);
	free(maps);
	return 0;
}

void ht_proc_modules__free(struct ht_proc_modules *pm)
{
	for (size_t i = 0; i < pm->n; i++)
		free((char *)pm->mods[i].path);
	free(pm->mods);
	memset(pm, 0, sizeof(*pm));
}

/* Looks name up in the symbol section of type sh_type; 0 and *vaddr set if
 * defined there as a function. */
static int find_sym(Elf *e, Elf64_Word sh_type, const char *name, uint64_t *vaddr)
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
			if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || !s.st_value ||
			    GELF_ST_TYPE(s.st_info) != STT_FUNC)
				continue;
			const char *sn = elf_strptr(e, sh.sh_link, s.st_name);
			if (sn && !strcmp(sn, name)) {
				*vaddr = s.st_value;
				return 0;
			}
		}
	}
	return -1;
}

int ht_elf__func_offset(const char *path, const char *name, uint64_t *off)
{
	int fd;
	Elf *e = elf_open(path, &fd);
	if (!e)
		return -1;
	uint64_t v = 0;
	int ret = -1;
	if (find_sym(e, SHT_DYNSYM, name, &v) == 0 || find_sym(e, SHT_SYMTAB, name, &v) == 0) {
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
