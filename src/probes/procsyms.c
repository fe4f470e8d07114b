/* Symbols of live processes (procsyms.h). */
#define _GNU_SOURCE
#include "procsyms.h"

#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

#define MAX_PROCS 4096 /* processes cached at once (then the oldest goes) */

/* One process's modules. */
struct proc {
	pid_t pid;                  /* 0 = free slot */
	struct ht_module *mods;     /* from its maps */
	size_t nmods;               /* count */
	int *file;                  /* per module: its index in files, -1 until needed */
	int reread;                 /* an unknown address already caused a reread */
	uint64_t used;              /* last use, for eviction */
};

/* A module file, symbolized once for every process that maps it: at load
 * bias 0, so that it resolves file addresses. */
struct file {
	char *path;                 /* as mapped */
	uint8_t build_id[64];       /* its build-id */
	size_t build_id_len;        /* length, 0 if none */
	struct ht_symbolizer *sym;  /* the file alone */
};

struct ht_procsyms {
	struct ht_symbol_opts opts; /* for every symbolizer */
	struct proc *procs;         /* by pid, linear (few processes in practice) */
	size_t n, cap;              /* used / allocated */
	struct file *files;         /* every module file seen */
	size_t nfiles, capfiles;    /* used / allocated */
	uint64_t clock;             /* use counter */
	struct ht_frame frame;      /* the frame of an address nothing resolves */
	struct ht_frame *copy;      /* the frames of an instruction pointer (is_ip) */
	size_t copycap;             /* allocated */
};

struct ht_procsyms *ht_procsyms__new(const struct ht_symbol_opts *opts)
{
	struct ht_procsyms *ps = calloc(1, sizeof(*ps));
	if (!ps)
		return NULL;
	if (opts)
		ps->opts = *opts;
	return ps;
}

void ht_procsyms__free_modules(struct ht_module *m, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free((char *)m[i].path);
	free(m);
}

static void proc_clear(struct proc *p)
{
	free(p->file);
	ht_procsyms__free_modules(p->mods, p->nmods);
	memset(p, 0, sizeof(*p));
}

void ht_procsyms__free(struct ht_procsyms *ps)
{
	if (!ps)
		return;
	for (size_t i = 0; i < ps->n; i++)
		proc_clear(&ps->procs[i]);
	free(ps->procs);
	for (size_t i = 0; i < ps->nfiles; i++) {
		free(ps->files[i].path);
		if (ps->files[i].sym)
			ht_symbolizer__free(ps->files[i].sym);
	}
	free(ps->files);
	free(ps->copy);
	free(ps);
}

/* The load bias of path mapped at start from file offset off, and its
 * build-id; returns -1 if it is not an ELF file we can read. */
static int elf_bias(const char *path, uint64_t start, uint64_t off, struct ht_module *m)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	int rc = -1;
	size_t nph = 0;
	if (!e || elf_kind(e) != ELF_K_ELF || elf_getphdrnum(e, &nph))
		goto done;
	GElf_Ehdr eh;
	if (!gelf_getehdr(e, &eh))
		goto done;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if ((ph.p_offset & ~(uint64_t)0xfff) == off) {
			m->base = eh.e_type == ET_EXEC ? 0 : start - (ph.p_vaddr & ~(uint64_t)0xfff);
			rc = 0;
			break;
		}
	}
	const void *id;
	ssize_t len = dwelf_elf_gnu_build_id(e, &id);
	if (len > 0 && (size_t)len <= sizeof(m->build_id)) {
		memcpy(m->build_id, id, (size_t)len);
		m->build_id_len = (size_t)len;
	}
done:
	if (e)
		elf_end(e);
	close(fd);
	return rc;
}

size_t ht_procsyms__parse_maps(const char *text, struct ht_module **out)
{
	struct ht_module *m = NULL;
	size_t n = 0, cap = 0;
	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[4608];
		if (len >= sizeof(buf))
			len = sizeof(buf) - 1;
		memcpy(buf, line, len);
		buf[len] = 0;
		line = nl ? nl + 1 : NULL;
		unsigned long long lo, hi, off, ino;
		char perms[8];
		int name_at = 0;
		if (sscanf(buf, "%llx-%llx %7s %llx %*x:%*x %llu %n", &lo, &hi, perms, &off, &ino,
			   &name_at) < 5 || !name_at)
			continue;
		const char *name = buf + name_at;
		if (name[0] != '/' && strcmp(name, "[vdso]"))
			continue; /* anonymous, heap, stack: no code to name */
		if (strstr(name, " (deleted)"))
			continue;
		size_t k;
		for (k = 0; k < n; k++)
			if (!strcmp(m[k].path, name))
				break;
		if (k < n) {
			if (lo < m[k].lo)
				m[k].lo = lo;
			if (hi > m[k].hi)
				m[k].hi = hi;
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			m = ht_xrealloc(m, cap * sizeof(*m));
		}
		memset(&m[n], 0, sizeof(m[n]));
		m[n].lo = lo;
		m[n].hi = hi;
		m[n].path = ht_xstrdup(name);
		/* the first mapping of a file (offset 0) gives the bias */
		if (name[0] != '/' || elf_bias(name, lo, off, &m[n]))
			m[n].base = lo - off;
		n++;
	}
	*out = m;
	return n;
}

static struct proc *find(struct ht_procsyms *ps, pid_t pid)
{
	for (size_t i = 0; i < ps->n; i++)
		if (ps->procs[i].pid == pid)
			return &ps->procs[i];
	return NULL;
}

int ht_procsyms__load(struct ht_procsyms *ps, pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	char chunk[65536];
	size_t got;
	while (mem && (got = fread(chunk, 1, sizeof(chunk), f)) > 0)
		fwrite(chunk, 1, got, mem);
	fclose(f);
	if (!mem || fclose(mem) || !len) {
		free(text);
		return -1; /* a zombie's map is empty: keep what was read */
	}
	struct ht_module *mods;
	size_t n = ht_procsyms__parse_maps(text, &mods);
	free(text);
	struct proc *p = find(ps, pid);
	if (!p) {
		if (ps->n == MAX_PROCS) {
			/* the least recently used goes */
			size_t old = 0;
			for (size_t i = 1; i < ps->n; i++)
				if (ps->procs[i].used < ps->procs[old].used)
					old = i;
			proc_clear(&ps->procs[old]);
			p = &ps->procs[old];
		} else {
			if (ps->n == ps->cap) {
				ps->cap = ps->cap ? ps->cap * 2 : 16;
				ps->procs = ht_xrealloc(ps->procs, ps->cap * sizeof(*ps->procs));
			}
			p = &ps->procs[ps->n++];
			memset(p, 0, sizeof(*p));
		}
	} else {
		int reread = p->reread;
		proc_clear(p);
		p->reread = reread;
	}
	p->pid = pid;
	p->mods = mods;
	p->nmods = n;
	p->file = ht_xrealloc(NULL, (n ? n : 1) * sizeof(*p->file));
	for (size_t i = 0; i < n; i++)
		p->file[i] = -1;
	p->used = ++ps->clock;
	return 0;
}

const struct ht_module *ht_procsyms__modules(struct ht_procsyms *ps, pid_t pid, size_t *n)
{
	struct proc *p = find(ps, pid);
	*n = p ? p->nmods : 0;
	return p ? p->mods : NULL;
}

/* The module of p holding ip, or -1. */
static int module_of(const struct proc *p, uint64_t ip)
{
	for (size_t i = 0; i < p->nmods; i++)
		if (ip >= p->mods[i].lo && ip < p->mods[i].hi)
			return (int)i;
	return -1;
}

/* The symbolizer of module m's file, made the first time it is needed. */
static struct ht_symbolizer *file_sym(struct ht_procsyms *ps, struct proc *p, int m)
{
	if (p->file[m] < 0) {
		const struct ht_module *mod = &p->mods[m];
		size_t i;
		for (i = 0; i < ps->nfiles; i++)
			if (!strcmp(ps->files[i].path, mod->path) &&
			    ps->files[i].build_id_len == mod->build_id_len &&
			    !memcmp(ps->files[i].build_id, mod->build_id, mod->build_id_len))
				break;
		if (i == ps->nfiles) {
			if (ps->nfiles == ps->capfiles) {
				ps->capfiles = ps->capfiles ? ps->capfiles * 2 : 64;
				ps->files = ht_xrealloc(ps->files, ps->capfiles * sizeof(*ps->files));
			}
			struct file *f = &ps->files[ps->nfiles++];
			memset(f, 0, sizeof(*f));
			f->path = strdup(mod->path);
			memcpy(f->build_id, mod->build_id, sizeof(f->build_id));
			f->build_id_len = mod->build_id_len;
			struct ht_module one = *mod;
			one.base = 0;
			one.lo = 0;
			one.hi = UINT64_MAX;
			f->sym = f->path ? ht_symbolizer__new(&one, 1, &ps->opts) : NULL;
			if (!f->sym)
				ht_oom();
		}
		p->file[m] = (int)i;
	}
	return ps->files[p->file[m]].sym;
}

size_t ht_procsyms__resolve(struct ht_procsyms *ps, pid_t pid, uint64_t ip, int is_ip,
			    const struct ht_frame **frames)
{
	struct proc *p = find(ps, pid);
	if (!p && ht_procsyms__load(ps, pid) == 0)
		p = find(ps, pid);
	int m = p ? module_of(p, ip) : -1;
	if (p && m < 0 && !p->reread) {
		/* a library mapped since the map was read */
		p->reread = 1;
		if (ht_procsyms__load(ps, pid) == 0) {
			p = find(ps, pid);
			m = module_of(p, ip);
		}
	}
	if (!p || m < 0 || p->mods[m].path[0] != '/') {
		memset(&ps->frame, 0, sizeof(ps->frame));
		ps->frame.ip = ip;
		if (p && m >= 0) { /* [vdso]: no file */
			const char *slash = strrchr(p->mods[m].path, '/');
			ps->frame.module = slash ? slash + 1 : p->mods[m].path;
			ps->frame.offset = ip - p->mods[m].base;
		}
		*frames = &ps->frame;
		return 1;
	}
	p->used = ++ps->clock;
	/* the symbolizer of the file resolves file addresses; it looks up
	 * ip - 1 (inside the call of a return address), and an instruction
	 * pointer is the instruction itself */
	uint64_t base = p->mods[m].base;
	size_t n = ht_symbolizer__resolve(file_sym(ps, p, m), ip - base + (is_ip ? 1 : 0), frames);
	if (n > ps->copycap) {
		ps->copycap = n;
		ps->copy = ht_xrealloc(ps->copy, n * sizeof(*ps->copy));
	}
	memcpy(ps->copy, *frames, n * sizeof(*ps->copy));
	for (size_t i = 0; i < n; i++) {
		ps->copy[i].ip = ip;
		if (is_ip && ps->copy[i].offset)
			ps->copy[i].offset--;
	}
	*frames = ps->copy;
	return n;
}
