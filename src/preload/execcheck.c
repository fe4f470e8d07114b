/* Whether a program about to be exec'd loads a sanitizer runtime (ASan,
 * TSan, LSan, MSan, HWASan as a shared library): those replace malloc and
 * must be the first library loaded, so that LD_PRELOAD of this library
 * stops them at start ("ASan runtime does not come first in initial
 * library list", exit 1).  `heaptrail record` refuses such a program
 * itself (src/cli/cmd_record.c, sanitizer_of); this is the same test for
 * the images the tracer would follow into, made in the process that
 * execs: no allocation, only open, pread and close of the file, so that
 * it is safe between fork and exec and in a signal handler. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "../common/readsmall.h"
#include "../common/sanitizers.h"
#include "preload.h"

#define MAX_PHDRS 64 /* program headers read (a few in any real program) */
#define MAX_DYN 512  /* dynamic entries read */


/* The file offset of address vaddr in the file's loaded segments, or
 * UINT64_MAX. */
static uint64_t file_offset(const Elf64_Phdr *ph, unsigned n, uint64_t vaddr)
{
	for (unsigned i = 0; i < n; i++)
		if (ph[i].p_type == PT_LOAD && vaddr >= ph[i].p_vaddr &&
		    vaddr - ph[i].p_vaddr < ph[i].p_filesz)
			return vaddr - ph[i].p_vaddr + ph[i].p_offset;
	return UINT64_MAX;
}

/* The sanitizer runtime fd's ELF file needs (DT_NEEDED), copied to lib;
 * 0 if it needs one, else -1 (none, not a 64-bit ELF file, unreadable). */
static int needs_runtime(int fd, char *lib, size_t cap)
{
	Elf64_Ehdr eh;
	if (ht_pread_full(fd, &eh, sizeof(eh), 0) < 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    eh.e_phnum == 0 || eh.e_phnum > MAX_PHDRS)
		return -1;
	Elf64_Phdr ph[MAX_PHDRS];
	unsigned n = eh.e_phnum;
	if (ht_pread_full(fd, ph, n * sizeof(ph[0]), eh.e_phoff) < 0)
		return -1;
	const Elf64_Phdr *dyn = NULL;
	for (unsigned i = 0; i < n && !dyn; i++)
		if (ph[i].p_type == PT_DYNAMIC)
			dyn = &ph[i];
	if (!dyn)
		return -1; /* statically linked: no runtime to load */
	uint64_t strtab = 0, needed[32];
	unsigned nneeded = 0;
	Elf64_Dyn d[32];
	uint64_t count = dyn->p_filesz / sizeof(Elf64_Dyn);
	if (count > MAX_DYN)
		count = MAX_DYN;
	for (uint64_t at = 0; at < count;) {
		unsigned k = count - at < 32 ? (unsigned)(count - at) : 32;
		if (ht_pread_full(fd, d, k * sizeof(d[0]), dyn->p_offset + at * sizeof(d[0])) < 0)
			return -1;
		for (unsigned i = 0; i < k; i++) {
			if (d[i].d_tag == DT_NULL) {
				at = count;
				break;
			}
			if (d[i].d_tag == DT_STRTAB)
				strtab = d[i].d_un.d_ptr;
			else if (d[i].d_tag == DT_NEEDED && nneeded < 32)
				needed[nneeded++] = d[i].d_un.d_val;
		}
		at += k;
	}
	uint64_t str = strtab ? file_offset(ph, n, strtab) : UINT64_MAX;
	if (str == UINT64_MAX)
		return -1;
	for (unsigned i = 0; i < nneeded; i++) {
		char name[64];
		ssize_t r = ht_sys_pread(fd, name, sizeof(name) - 1, (off_t)(str + needed[i]));
		if (r <= 0)
			continue;
		name[r] = 0;
		const char *const *runtimes = ht_sanitizer_runtimes();
		for (int k = 0; runtimes[k]; k++)
			if (!strncmp(name, runtimes[k], strlen(runtimes[k]))) {
				size_t len = strnlen(name, sizeof(name) - 1);
				if (len >= cap)
					len = cap - 1;
				memcpy(lib, name, len);
				lib[len] = 0;
				return 0;
			}
	}
	return -1;
}

int ht_exec_sanitizer(const char *path, int fd, char *lib, size_t cap)
{
	int own = fd < 0;
	if (own)
		fd = ht_sys_open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int r = needs_runtime(fd, lib, cap);
	if (own)
		ht_sys_close(fd);
	return r;
}
