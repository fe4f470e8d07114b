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
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/util.h"

#define MAX_PROCS 4096 /* processes cached at once (then the oldest goes) */

/* An executable mapping. */
struct code_range {
	uint64_t lo, hi;
};

/* One process's modules. */
struct proc {
	pid_t pid;                  /* 0 = free slot */
	struct ht_module *mods;     /* from its maps */
	size_t nmods;               /* count */
	int *file;                  /* per module: its index in files, -1 until needed */
	int *stale;                 /* per module: its index in stale + 1, 0 if read by path */
	struct code_range *code;    /* its executable mappings (files, anonymous, vdso) */
	size_t ncode;               /* count */
	struct code_range *data;    /* its other mappings (heap, stacks, data), as last read */
	size_t ndata;               /* count */
	struct code_range *gone;    /* code mapped at an earlier read, unmapped since */
	size_t ngone;               /* count */
	int reread;                 /* an unknown address already caused a reread */
	uint64_t used;              /* last use, for eviction */
};

/* A module file deleted or replaced since a process mapped it, read through
 * /proc/PID/map_files (which only lasts as long as the process: the
 * descriptor is kept open, so that it can still be read after the exit). */
struct stale {
	uint64_t dev, ino;          /* of the mapped file, as /proc/PID/maps says */
	int fd;                     /* open on it, -1 if map_files could not be read */
	char *open_path;            /* /proc/self/fd/N, what is opened to read it */
	char *name;                 /* the module's name in frames (the path's last part) */
	char *path;                 /* the path it was mapped from */
	int deleted;                /* deleted (else replaced by another file) */
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
	uint64_t min_addr;          /* vm.mmap_min_addr, 0 until read */
	struct stale *stale;        /* module files gone or replaced, kept open */
	size_t nstale, capstale;    /* used / allocated */
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
	free(p->stale);
	free(p->code);
	free(p->data);
	free(p->gone);
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
	for (size_t i = 0; i < ps->nstale; i++) {
		if (ps->stale[i].fd >= 0)
			close(ps->stale[i].fd);
		free(ps->stale[i].open_path);
		free(ps->stale[i].name);
		free(ps->stale[i].path);
	}
	free(ps->stale);
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

/* The file a mapping of pid maps, when its path no longer names it
 * (deleted, or replaced by another file: another inode): an entry of
 * ps->stale, opened through /proc/PID/map_files/LO-HI.  Returns its index. */
static size_t stale_of(struct ht_procsyms *ps, pid_t pid, const char *path, int deleted,
		       uint64_t dev, uint64_t ino, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < ps->nstale; i++)
		if (ps->stale[i].dev == dev && ps->stale[i].ino == ino &&
		    !strcmp(ps->stale[i].path, path))
			return i;
	ps->stale = ht_grow(ps->stale, &ps->capstale, ps->nstale + 1, sizeof(*ps->stale));
	struct stale *st = &ps->stale[ps->nstale];
	memset(st, 0, sizeof(*st));
	st->dev = dev;
	st->ino = ino;
	st->deleted = deleted;
	st->path = ht_xstrdup(path);
	const char *slash = strrchr(path, '/');
	st->name = ht_xstrdup(slash ? slash + 1 : path);
	char mf[96];
	snprintf(mf, sizeof(mf), "/proc/%d/map_files/%llx-%llx", (int)pid, (unsigned long long)lo,
		 (unsigned long long)hi);
	st->fd = open(mf, O_RDONLY | O_CLOEXEC);
	if (st->fd >= 0) {
		char fdp[64];
		snprintf(fdp, sizeof(fdp), "/proc/self/fd/%d", st->fd);
		st->open_path = ht_xstrdup(fdp);
	}
	return ps->nstale++;
}

/* A file mapped with execute permission, by its name in the map (with
 * " (deleted)" if so): parse takes only these as modules. */
struct exec_file {
	char *name;  /* as in the map */
	int checked; /* whether it is ELF was asked */
	int not_elf; /* it can be read, and is not an ELF file */
};

static int exec_file_cmp(const void *a, const void *b)
{
	return strcmp(((const struct exec_file *)a)->name, ((const struct exec_file *)b)->name);
}

/* The next line of a maps text at *at, in buf (cut at cap - 1 bytes); 0 at
 * the end. */
static int map_line(const char **at, char *buf, size_t cap)
{
	const char *line = *at;
	if (!line || !*line)
		return 0;
	const char *nl = strchr(line, '\n');
	size_t len = nl ? (size_t)(nl - line) : strlen(line);
	if (len >= cap)
		len = cap - 1;
	memcpy(buf, line, len);
	buf[len] = 0;
	*at = nl ? nl + 1 : NULL;
	return 1;
}

/* The files the maps text maps with execute permission, sorted by name
 * (malloc'd, names too; *n of them). */
static struct exec_file *exec_files(const char *text, size_t *n)
{
	struct exec_file *v = NULL;
	size_t cap = 0;
	char buf[4608], perms[8];
	*n = 0;
	for (const char *at = text; map_line(&at, buf, sizeof(buf));) {
		unsigned long long lo, hi, off, ino;
		unsigned dmaj, dmin;
		int name_at = 0;
		if (sscanf(buf, "%llx-%llx %7s %llx %x:%x %llu %n", &lo, &hi, perms, &off, &dmaj,
			   &dmin, &ino, &name_at) < 7 ||
		    !name_at || buf[name_at] != '/' || perms[2] != 'x')
			continue;
		v = ht_grow(v, &cap, *n + 1, sizeof(*v));
		v[(*n)++] = (struct exec_file){ht_xstrdup(buf + name_at), 0, 0};
	}
	if (*n)
		qsort(v, *n, sizeof(*v), exec_file_cmp);
	return v;
}

/* Whether path (a mapped file, or its /proc/PID/map_files entry) is an ELF
 * file: 1 yes, 0 no (not a regular file, or another format), -1 cannot be
 * read.  (A device is not opened: opening one may do something.) */
static int is_elf(const char *path)
{
	struct stat sb;
	if (stat(path, &sb) < 0)
		return -1;
	if (!S_ISREG(sb.st_mode))
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -1;
	unsigned char mag[SELFMAG];
	ssize_t r = pread(fd, mag, SELFMAG, 0);
	close(fd);
	if (r < 0)
		return -1;
	return r == SELFMAG && !memcmp(mag, ELFMAG, SELFMAG);
}

/* parse_maps, for process pid when ps is not NULL: a file deleted or
 * replaced since it was mapped is read through /proc/PID/map_files
 * ((*stale)[i]: its index in ps->stale + 1, else 0); without ps its
 * mappings are left out.  Code ranges in *code, if not NULL.
 *
 * A module is a file with code: one that is mapped executable, and is an
 * ELF file.  Not any path in the map: a process's shared anonymous memory
 * shows as "/dev/zero (deleted)" (every process under heaptrail record
 * has some), SysV shared memory as "/SYSV... (deleted)", a memfd as
 * "/memfd:NAME (deleted)"; taken for modules, they were said to be
 * deleted program files, and the -o trace named /dev/zero as a module
 * that leaks could not read ("not a valid ELF file"). */
static size_t parse(struct ht_procsyms *ps, pid_t pid, const char *text, struct ht_module **out,
		    int **stale, struct code_range **code, size_t *ncode, struct code_range **data,
		    size_t *ndata)
{
	struct ht_module *m = NULL;
	int *stl = NULL;
	size_t n = 0, cap = 0, capcode = 0, capdata = 0, nexec = 0;
	struct exec_file *exec = exec_files(text, &nexec);
	char buf[4608];
	if (code) {
		*code = NULL;
		*ncode = 0;
		*data = NULL;
		*ndata = 0;
	}
	for (const char *line = text; map_line(&line, buf, sizeof(buf));) {
		unsigned long long lo, hi, off, ino;
		unsigned dmaj, dmin;
		char perms[8];
		int name_at = 0;
		if (sscanf(buf, "%llx-%llx %7s %llx %x:%x %llu %n", &lo, &hi, perms, &off, &dmaj,
			   &dmin, &ino, &name_at) < 7)
			continue;
		if (code && perms[2] == 'x') {
			*code = ht_grow(*code, &capcode, *ncode + 1, sizeof(**code));
			(*code)[(*ncode)++] = (struct code_range){lo, hi};
		} else if (code) {
			*data = ht_grow(*data, &capdata, *ndata + 1, sizeof(**data));
			(*data)[(*ndata)++] = (struct code_range){lo, hi};
		}
		if (!name_at)
			continue;
		char *name = buf + name_at;
		if (name[0] != '/' && strcmp(name, "[vdso]"))
			continue; /* anonymous, heap, stack: no code to name */
		struct exec_file key = {name, 0, 0}, *ef = NULL;
		if (name[0] == '/' &&
		    (!(ef = bsearch(&key, exec, nexec, sizeof(*exec), exec_file_cmp)) ||
		     ef->not_elf))
			continue; /* no code in it: a data file, shared memory */
		int deleted = 0, replaced = 0;
		size_t nl2 = strlen(name);
		if (nl2 > 10 && !strcmp(name + nl2 - 10, " (deleted)")) {
			if (!ps)
				continue;
			name[nl2 - 10] = 0;
			deleted = 1;
		} else if (ps && name[0] == '/') {
			struct stat sb;
			replaced = stat(name, &sb) < 0 || (uint64_t)sb.st_ino != ino ||
				   major(sb.st_dev) != dmaj || minor(sb.st_dev) != dmin;
		}
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
		if (ef && !ef->checked) {
			/* (an executable mapping of something else: a memfd
			 * of generated code) */
			char mf[96];
			snprintf(mf, sizeof(mf), "/proc/%d/map_files/%llx-%llx", (int)pid, lo, hi);
			ef->checked = 1;
			ef->not_elf = is_elf(deleted || replaced ? mf : name) == 0;
			if (ef->not_elf)
				continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			m = ht_xrealloc(m, cap * sizeof(*m));
			stl = ht_xrealloc(stl, cap * sizeof(*stl));
		}
		memset(&m[n], 0, sizeof(m[n]));
		stl[n] = 0;
		m[n].lo = lo;
		m[n].hi = hi;
		m[n].path = ht_xstrdup(name);
		const char *file = name;
		if (deleted || replaced) {
			size_t i =
				stale_of(ps, pid, name, deleted, makedev(dmaj, dmin), ino, lo, hi);
			stl[n] = (int)i + 1;
			file = ps->stale[i].open_path;
		}
		/* the first mapping of a file (offset 0) gives the bias */
		if (!file || file[0] != '/' || elf_bias(file, lo, off, &m[n]))
			m[n].base = lo - off;
		n++;
	}
	for (size_t i = 0; i < nexec; i++)
		free(exec[i].name);
	free(exec);
	*out = m;
	if (stale)
		*stale = stl;
	else
		free(stl);
	return n;
}

size_t ht_procsyms__parse_maps(const char *text, struct ht_module **out)
{
	return parse(NULL, 0, text, out, NULL, NULL, NULL, NULL, NULL);
}

/* /proc/PID/maps (malloc'd), NULL if it cannot be read or is empty (a
 * zombie's, a kernel thread's). */
static char *read_maps(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
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
		return NULL;
	}
	return text;
}

static struct proc *find(struct ht_procsyms *ps, pid_t pid)
{
	for (size_t i = 0; i < ps->n; i++)
		if (ps->procs[i].pid == pid)
			return &ps->procs[i];
	return NULL;
}

static int overlaps_code(const struct code_range *v, size_t n, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < n; i++)
		if (lo < v[i].hi && v[i].lo < hi)
			return 1;
	return 0;
}

static int overlaps_module(const struct ht_module *v, size_t n, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < n; i++)
		if (lo < v[i].hi && v[i].lo < hi)
			return 1;
	return 0;
}

int ht_procsyms__load(struct ht_procsyms *ps, pid_t pid)
{
	char *text = read_maps(pid);
	if (!text)
		return -1; /* a zombie's map is empty: keep what was read */
	struct ht_module *mods;
	struct code_range *code, *data;
	size_t ncode, ndata;
	int *stale;
	size_t n = parse(ps, pid, text, &mods, &stale, &code, &ncode, &data, &ndata);
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
		/* what was mapped before and is no longer (a library dlopened,
		 * then closed) stays known: the stacks taken meanwhile are in it */
		struct code_range *gone = NULL;
		size_t ngone = 0, capgone = 0;
		for (int pass = 0; pass < 2; pass++) {
			const struct code_range *v = pass ? p->gone : p->code;
			size_t nv = pass ? p->ngone : p->ncode;
			for (size_t i = 0; i < nv; i++) {
				if (overlaps_code(code, ncode, v[i].lo, v[i].hi))
					continue;
				gone = ht_grow(gone, &capgone, ngone + 1, sizeof(*gone));
				gone[ngone++] = v[i];
			}
		}
		size_t cap = n;
		for (size_t i = 0; i < p->nmods; i++) {
			const struct ht_module *o = &p->mods[i];
			if (overlaps_module(mods, n, o->lo, o->hi))
				continue;
			mods = ht_grow(mods, &cap, n + 1, sizeof(*mods));
			stale = ht_xrealloc(stale, cap * sizeof(*stale));
			mods[n] = *o;
			mods[n].path = ht_xstrdup(o->path);
			mods[n].gone = 1;
			stale[n++] = p->stale[i];
		}
		int reread = p->reread;
		proc_clear(p);
		p->reread = reread;
		p->gone = gone;
		p->ngone = ngone;
	}
	p->pid = pid;
	p->mods = mods;
	p->nmods = n;
	p->stale = stale;
	p->code = code;
	p->ncode = ncode;
	p->data = data;
	p->ndata = ndata;
	p->file = ht_xrealloc(NULL, (n ? n : 1) * sizeof(*p->file));
	for (size_t i = 0; i < n; i++)
		p->file[i] = -1;
	p->used = ++ps->clock;
	return 0;
}

void ht_procsyms__forget(struct ht_procsyms *ps, pid_t pid)
{
	struct proc *p = find(ps, pid);
	if (p)
		proc_clear(p); /* (pid 0: a free slot) */
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

/* The file to open for module m of p: its path, or for a file deleted or
 * replaced since, its descriptor's (NULL if map_files could not be read). */
static const char *open_path(const struct ht_procsyms *ps, const struct proc *p, int m)
{
	return p->stale[m] ? ps->stale[p->stale[m] - 1].open_path : p->mods[m].path;
}

/* The symbolizer of module m's file, made the first time it is needed;
 * NULL if the file cannot be read. */
static struct ht_symbolizer *file_sym(struct ht_procsyms *ps, struct proc *p, int m)
{
	if (p->file[m] < 0) {
		const struct ht_module *mod = &p->mods[m];
		const char *path = open_path(ps, p, m);
		if (!path)
			return NULL;
		size_t i;
		for (i = 0; i < ps->nfiles; i++)
			if (!strcmp(ps->files[i].path, path) &&
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
			f->path = strdup(path);
			memcpy(f->build_id, mod->build_id, sizeof(f->build_id));
			f->build_id_len = mod->build_id_len;
			struct ht_module one = *mod;
			one.path = path;
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
	if (!p || m < 0 || p->mods[m].path[0] != '/' || !open_path(ps, p, m)) {
		memset(&ps->frame, 0, sizeof(ps->frame));
		ps->frame.ip = ip;
		if (p && m >= 0) { /* [vdso], or a file that cannot be read: no file */
			const char *slash = strrchr(p->mods[m].path, '/');
			ps->frame.module = p->stale[m] ? ps->stale[p->stale[m] - 1].name
				       : slash			   ? slash + 1
								   : p->mods[m].path;
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
		if (p->stale[m]) /* (not the name of its descriptor) */
			ps->copy[i].module = ps->stale[p->stale[m] - 1].name;
	}
	*frames = ps->copy;
	return n;
}

/* Whether two lists of code ranges are the same. */
static int same_code(const struct code_range *a, size_t na, const struct code_range *b, size_t nb)
{
	return na == nb && (!na || !memcmp(a, b, na * sizeof(*a)));
}

static int in_code(const struct proc *p, uint64_t ip)
{
	return overlaps_code(p->code, p->ncode, ip, ip + 1) ||
	       overlaps_code(p->gone, p->ngone, ip, ip + 1);
}

int ht_procsyms__is_code(struct ht_procsyms *ps, pid_t pid, uint64_t ip)
{
	/* never code, whatever the map: below the lowest address a process
	 * can map (vm.mmap_min_addr), or beyond user space (2^47, 2^56 with
	 * 5-level page tables): small numbers, bytes of a string */
	if (!ps->min_addr) {
		FILE *f = fopen("/proc/sys/vm/mmap_min_addr", "re");
		unsigned long long v = 0;
		ps->min_addr = f && fscanf(f, "%llu", &v) == 1 && v ? v : 4096;
		if (f)
			fclose(f);
	}
	if (ip < ps->min_addr || ip >= (1ull << 56))
		return 0;
	struct proc *p = find(ps, pid);
	if (!p && ht_procsyms__load(ps, pid) == 0)
		p = find(ps, pid);
	if (!p)
		return -1;
	if (in_code(p, ip))
		return 1;
	/* mapped since the map was read?  Reading the map costs little; the
	 * modules (an ELF header each) are read again only if the code
	 * mappings changed */
	char *text = read_maps(pid);
	if (!text)
		return -1;
	struct ht_module *mods;
	struct code_range *code, *data;
	size_t ncode, ndata;
	size_t n = parse(NULL, 0, text, &mods, NULL, &code, &ncode, &data, &ndata);
	ht_procsyms__free_modules(mods, n);
	free(text);
	int same = same_code(code, ncode, p->code, p->ncode);
	free(code);
	if (same) {
		free(p->data);
		p->data = data;
		p->ndata = ndata;
	} else {
		free(data);
		if (ht_procsyms__load(ps, pid) < 0)
			return -1;
		p = find(ps, pid);
		if (!p)
			return -1;
	}
	if (in_code(p, ip))
		return 1;
	/* data (a heap or stack pointer) is not code; an address mapped by
	 * nothing may be code unmapped since (a library dlclosed before its
	 * stacks were read): cannot tell */
	return overlaps_code(p->data, p->ndata, ip, ip + 1) ? 0 : -1;
}

size_t ht_procsyms__stale(struct ht_procsyms *ps, size_t i, const char **path, int *deleted,
			  int *readable)
{
	if (i < ps->nstale) {
		*path = ps->stale[i].path;
		*deleted = ps->stale[i].deleted;
		*readable = ps->stale[i].fd >= 0;
	}
	return ps->nstale;
}
