/* Function offsets of ELF files (elfsyms.h), with elfutils' libelf. */
#define _GNU_SOURCE
#include "elfsyms.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
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
