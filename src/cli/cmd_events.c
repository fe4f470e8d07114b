/* heaptrail events: the program's mmap family, brk/sbrk and SysV shm calls,
 * one line each in the columns of mmapsnoop and shmsnoop, and each growth
 * of the program break with the call (and stack) that caused it, as
 * brkstack shows it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>

#include "analyze/analyze.h"
#include "analyze/blocks.h"
#include "cli/builtin.h"
#include "common/json.h"
#include "common/options.h"
#include "common/util.h"

#define MAX_FRAMES 256

/* One configuration per run; each default is labelled by its flag. */
struct events_config {
	const char *kinds;     /* --kind (mmap,munmap,mremap,brk,sbrk,shm,heap_break) */
	uint64_t min_size;     /* --min-size (0) */
	uint64_t from;         /* --from (0) */
	uint64_t to;           /* --to (the end: UINT64_MAX; 0 is a time) */
	int stacks;            /* --stacks */
	int json;              /* --json */
	uint64_t depth;        /* --depth (all): frames printed per stack */
	const char *sysroot;   /* --sysroot */
	const char *debug_dir; /* --debug-dir */
	int quiet;             /* -q */
};

static const char usage_text[] =
	"usage: heaptrail events [options] TRACE\n"
	"\n"
	"The program's mmap, munmap, mremap, brk, sbrk and SysV shm calls, one\n"
	"line each, in the columns of mmapsnoop and shmsnoop, and each move of\n"
	"the program break (heap_break) with its size and the call that caused\n"
	"it; with --stacks, the symbolized stack under each line (a heap_break\n"
	"shows the stack of its call, as brkstack does).\n"
	"\fEXAMPLES\n"
	"  heaptrail events app.ht\n"
	"  heaptrail events --kind mmap,brk,shm app.ht\n"
	"  heaptrail events --kind heap_break --stacks app.ht\n"
	"  heaptrail events --min-size 1M --from 2s --json app.ht\n";

/* The kinds this command shows. */
static const uint64_t shown_kinds =
	1ull << HT_EV_MMAP | 1ull << HT_EV_MUNMAP | 1ull << HT_EV_MREMAP | 1ull << HT_EV_BRK |
	1ull << HT_EV_SBRK | 1ull << HT_EV_SHMGET | 1ull << HT_EV_SHMAT | 1ull << HT_EV_SHMDT |
	1ull << HT_EV_SHMCTL | 1ull << HT_EV_HEAP_BREAK;

struct flag_name {
	uint64_t bit;      /* the flag's value */
	const char *name;  /* as printed */
};

static const struct flag_name map_flags[] = {
	{MAP_SHARED, "SHARED"}, {MAP_PRIVATE, "PRIVATE"}, {MAP_FIXED, "FIXED"},
	{MAP_ANONYMOUS, "ANON"}, {MAP_32BIT, "32BIT"}, {MAP_GROWSDOWN, "GROWSDOWN"},
	{MAP_DENYWRITE, "DENYWRITE"}, {MAP_EXECUTABLE, "EXECUTABLE"}, {MAP_LOCKED, "LOCKED"},
	{MAP_NORESERVE, "NORESERVE"}, {MAP_POPULATE, "POPULATE"}, {MAP_NONBLOCK, "NONBLOCK"},
	{MAP_STACK, "STACK"}, {MAP_HUGETLB, "HUGETLB"}, {0x80000, "SYNC"},
	{0x100000, "FIXED_NOREPLACE"}, {0},
};
static const struct flag_name mremap_flags[] = {
	{1, "MAYMOVE"}, {2, "FIXED"}, {4, "DONTUNMAP"}, {0},
};
static const struct flag_name shmget_flags[] = {
	{IPC_CREAT, "IPC_CREAT"}, {IPC_EXCL, "IPC_EXCL"}, {04000, "SHM_HUGETLB"},
	{010000, "SHM_NORESERVE"}, {0},
};
static const struct flag_name shmat_flags[] = {
	{SHM_RDONLY, "SHM_RDONLY"}, {SHM_RND, "SHM_RND"}, {040000, "SHM_REMAP"},
	{0100000, "SHM_EXEC"}, {0},
};
static const struct flag_name shmctl_cmds[] = {
	{IPC_RMID, "IPC_RMID"}, {IPC_SET, "IPC_SET"}, {IPC_STAT, "IPC_STAT"},
	{IPC_INFO, "IPC_INFO"}, {SHM_LOCK, "SHM_LOCK"}, {SHM_UNLOCK, "SHM_UNLOCK"},
	{SHM_STAT, "SHM_STAT"}, {SHM_INFO, "SHM_INFO"}, {15, "SHM_STAT_ANY"}, {0},
};

/* What a thread did last: a heap_break belongs to its thread's call before it. */
struct thread_last {
	uint32_t tid;             /* thread */
	uint8_t kind;             /* its last event's kind */
	uint32_t stack;           /* and stack node */
	char name[16];            /* its name (thread_name), "" = the program's */
};

/* A SysV segment or attachment, for the sizes of shmat/shmdt/shmctl. */
struct shm_seg {
	int64_t id;     /* shmget's result */
	uint64_t addr;  /* where shmat put it, 0 if not attached */
	uint64_t size;  /* shmget's size */
};

struct events_state {
	struct thread_last *threads; /* every thread seen */
	size_t nthreads, capthreads; /* count / allocated */
	size_t last;                 /* index of the last thread looked up */
	struct shm_seg *segs;        /* segments and attachments seen */
	size_t nsegs, capsegs;       /* count / allocated */
	uint64_t brk;                /* the program break as last seen, 0 unknown */
	char comm[16];               /* the program's name, 15 characters as the kernel's */
};

static void *xgrow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return p;
	*cap = *cap ? 2 * *cap : 16;
	if (*cap < need)
		*cap = need;
	return ht_xrealloc(p, *cap * elem);
}

static struct thread_last *thread_of(struct events_state *s, uint32_t tid)
{
	if (s->last < s->nthreads && s->threads[s->last].tid == tid)
		return &s->threads[s->last];
	for (size_t i = 0; i < s->nthreads; i++)
		if (s->threads[i].tid == tid)
			return &s->threads[s->last = i];
	s->threads = xgrow(s->threads, &s->capthreads, s->nthreads + 1, sizeof(*s->threads));
	struct thread_last *t = &s->threads[s->last = s->nthreads++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	return t;
}

static struct shm_seg *seg_by(struct events_state *s, int64_t id, uint64_t addr)
{
	for (size_t i = s->nsegs; i-- > 0;)
		if (addr ? s->segs[i].addr == addr : s->segs[i].id == id)
			return &s->segs[i];
	return NULL;
}

static void seg_add(struct events_state *s, int64_t id, uint64_t addr, uint64_t size)
{
	s->segs = xgrow(s->segs, &s->capsegs, s->nsegs + 1, sizeof(*s->segs));
	s->segs[s->nsegs++] = (struct shm_seg){id, addr, size};
}

/* "SHARED|ANON", with any bits left over in hex; "0" for none. */
static const char *flag_names(char *buf, size_t len, uint64_t v, const struct flag_name *t,
			      int mode_bits)
{
	size_t n = 0;
	buf[0] = 0;
	for (; t->name; t++) {
		/* MAP_SHARED|MAP_PRIVATE is a value of its own (SHARED_VALIDATE) */
		if ((v & t->bit) == t->bit && t->bit) {
			n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? "|" : "",
					      t->name);
			v &= ~t->bit;
		}
	}
	if (mode_bits && (v & 0777)) {
		n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s0%llo", n ? "|" : "",
				      (unsigned long long)(v & 0777));
		v &= ~0777ull;
	}
	if (v)
		snprintf(buf + n, n < len ? len - n : 0, "%s0x%llx", n ? "|" : "",
			 (unsigned long long)v);
	else if (!n)
		snprintf(buf, len, "0");
	return buf;
}

static const char *cmd_name(char *buf, size_t len, int64_t cmd)
{
	for (const struct flag_name *t = shmctl_cmds; t->name; t++)
		if ((uint64_t)(cmd & ~0x100) == t->bit) /* IPC_64 aside */
			return t->name;
	snprintf(buf, len, "%lld", (long long)cmd);
	return buf;
}

static const char *prot_str(char *buf, int64_t prot)
{
	buf[0] = prot & PROT_READ ? 'r' : '-';
	buf[1] = prot & PROT_WRITE ? 'w' : '-';
	buf[2] = prot & PROT_EXEC ? 'x' : '-';
	buf[3] = 0;
	return buf;
}

/* One event, its columns as strings ("-" = does not apply). */
struct row {
	const char *call;   /* the kind's name */
	uint64_t addr;      /* the address it names */
	int has_addr;       /* addr applies */
	int64_t size;       /* bytes (signed: a break that shrinks) */
	int has_size;       /* size applies (known) */
	char prot[4];       /* rwx */
	char flags[128];    /* names */
	uint64_t flags_raw; /* the value */
	int64_t offset;     /* mmap's file offset */
	int64_t fd;         /* mmap's fd */
	int64_t key;        /* shmget's key */
	int64_t id;         /* shm id */
	int has_off, has_fd, has_key, has_id; /* which apply */
	const char *cmd;    /* shmctl's command */
	char result[40];    /* as printed */
	int failed;         /* the call returned its error value */
	const char *cause;  /* heap_break: the kind of the call that moved the break */
	uint32_t stack;     /* the stack to show (heap_break: its call's) */
};

static void fill_row(struct events_state *s, const struct ht_event *e, struct row *w)
{
	memset(w, 0, sizeof(*w));
	w->call = ht_kind_name(e->kind);
	w->stack = e->stack;
	strcpy(w->prot, "-");
	strcpy(w->flags, "-");
	char tmp[32];
	const uint64_t *v = e->v;
	switch (e->kind) {
	case HT_EV_MMAP:
		w->addr = v[0], w->has_addr = 1;
		w->size = (int64_t)v[1], w->has_size = 1;
		prot_str(w->prot, (int64_t)v[2]);
		w->flags_raw = v[3];
		flag_names(w->flags, sizeof(w->flags), v[3] & 0xffffffff, map_flags, 0);
		w->fd = (int64_t)v[4], w->has_fd = 1;
		w->offset = (int64_t)v[5], w->has_off = 1;
		w->failed = v[6] == (uint64_t)-1;
		snprintf(w->result, sizeof(w->result), w->failed ? "-1" : "0x%llx",
			 (unsigned long long)v[6]);
		break;
	case HT_EV_MUNMAP:
		w->addr = v[0], w->has_addr = 1;
		w->size = (int64_t)v[1], w->has_size = 1;
		w->failed = (int64_t)v[2] < 0;
		snprintf(w->result, sizeof(w->result), "%lld", (long long)(int64_t)v[2]);
		break;
	case HT_EV_MREMAP:
		w->addr = v[0], w->has_addr = 1;
		w->size = (int64_t)(v[2] > v[1] ? v[2] : v[1]), w->has_size = 1;
		w->flags_raw = v[3];
		flag_names(w->flags, sizeof(w->flags), v[3], mremap_flags, 0);
		w->failed = v[5] == (uint64_t)-1;
		if (w->failed)
			snprintf(w->result, sizeof(w->result), "-1");
		else
			snprintf(w->result, sizeof(w->result), "0x%llx", (unsigned long long)v[5]);
		break;
	case HT_EV_BRK:
		w->addr = v[0], w->has_addr = 1;
		if (s->brk && v[0])
			w->size = (int64_t)(v[0] - s->brk), w->has_size = 1;
		w->failed = (int64_t)v[1] < 0;
		snprintf(w->result, sizeof(w->result), "%lld", (long long)(int64_t)v[1]);
		break;
	case HT_EV_SBRK:
		w->size = (int64_t)v[0], w->has_size = 1;
		w->failed = v[1] == (uint64_t)-1;
		snprintf(w->result, sizeof(w->result), w->failed ? "-1" : "0x%llx",
			 (unsigned long long)v[1]);
		break;
	case HT_EV_SHMGET:
		w->key = (int64_t)v[0], w->has_key = 1;
		w->size = (int64_t)v[1], w->has_size = 1;
		w->flags_raw = v[2];
		flag_names(w->flags, sizeof(w->flags), v[2] & 0xffffffff, shmget_flags, 1);
		w->id = (int64_t)v[3], w->has_id = 1;
		w->failed = (int64_t)v[3] < 0;
		snprintf(w->result, sizeof(w->result), "%lld", (long long)(int64_t)v[3]);
		if (!w->failed && !seg_by(s, w->id, 0))
			seg_add(s, w->id, 0, v[1]);
		break;
	case HT_EV_SHMAT: {
		w->id = (int64_t)v[0], w->has_id = 1;
		w->addr = v[1], w->has_addr = 1;
		w->flags_raw = v[2];
		flag_names(w->flags, sizeof(w->flags), v[2] & 0xffffffff, shmat_flags, 0);
		strcpy(w->prot, (v[2] & SHM_RDONLY) ? "r--" : "rw-");
		if (v[2] & SHM_EXEC)
			w->prot[2] = 'x';
		w->failed = v[3] == (uint64_t)-1;
		snprintf(w->result, sizeof(w->result), w->failed ? "-1" : "0x%llx",
			 (unsigned long long)v[3]);
		struct shm_seg *g = seg_by(s, w->id, 0);
		if (g)
			w->size = (int64_t)g->size, w->has_size = 1;
		if (!w->failed)
			seg_add(s, w->id, v[3], g ? g->size : 0);
		break;
	}
	case HT_EV_SHMDT: {
		w->addr = v[0], w->has_addr = 1;
		w->failed = (int64_t)v[1] < 0;
		snprintf(w->result, sizeof(w->result), "%lld", (long long)(int64_t)v[1]);
		struct shm_seg *g = v[0] ? seg_by(s, 0, v[0]) : NULL;
		if (g) {
			w->id = g->id, w->has_id = 1;
			if (g->size)
				w->size = (int64_t)g->size, w->has_size = 1;
			if (!w->failed)
				g->addr = 0, g->id = -1; /* detached */
		}
		break;
	}
	case HT_EV_SHMCTL: {
		w->id = (int64_t)v[0], w->has_id = 1;
		w->cmd = cmd_name(tmp, sizeof(tmp), (int64_t)v[1]);
		w->flags_raw = v[1];
		snprintf(w->flags, sizeof(w->flags), "%s", w->cmd);
		w->failed = (int64_t)v[2] < 0;
		snprintf(w->result, sizeof(w->result), "%lld", (long long)(int64_t)v[2]);
		struct shm_seg *g = seg_by(s, w->id, 0);
		if (g && g->size)
			w->size = (int64_t)g->size, w->has_size = 1;
		if (w->cmd == tmp) /* (tmp does not outlive this call) */
			w->cmd = "?";
		break;
	}
	case HT_EV_HEAP_BREAK: {
		w->addr = v[0], w->has_addr = 1;
		if (s->brk)
			w->size = (int64_t)(v[0] - s->brk), w->has_size = 1;
		struct thread_last *t = thread_of(s, e->tid);
		w->cause = t->kind ? ht_kind_name(t->kind) : "?";
		w->stack = t->stack;
		snprintf(w->flags, sizeof(w->flags), "by %s", w->cause);
		strcpy(w->result, "-");
		break;
	}
	}
}

static void print_header(void)
{
	printf("%-12s %-7s %-15s %-7s %-10s %-14s %10s %-4s %-24s %8s %4s %10s %6s %s\n",
	       "TIME(s)", "PID", "COMM", "TID", "CALL", "ADDR", "SIZE", "PROT", "FLAGS", "OFF", "FD",
	       "KEY", "ID", "RESULT");
}

static void print_row(const struct events_state *s, const struct thread_last *t,
		      const struct ht_event *e, const struct row *w, int32_t pid)
{
	char addr[24] = "-", size[24] = "-", off[24] = "-", fd[16] = "-", key[24] = "-",
	     id[16] = "-";
	if (w->has_addr)
		snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)w->addr);
	if (w->has_size)
		snprintf(size, sizeof(size), e->kind == HT_EV_HEAP_BREAK || e->kind == HT_EV_BRK ||
					     e->kind == HT_EV_SBRK ? "%+lld" : "%lld",
			 (long long)w->size);
	if (w->has_off)
		snprintf(off, sizeof(off), "%lld", (long long)w->offset);
	if (w->has_fd)
		snprintf(fd, sizeof(fd), "%lld", (long long)w->fd);
	if (w->has_key)
		snprintf(key, sizeof(key), "0x%llx", (unsigned long long)(uint32_t)w->key);
	if (w->has_id)
		snprintf(id, sizeof(id), "%lld", (long long)w->id);
	printf("%-12.6f %-7d %-15s %-7u %-10s %-14s %10s %-4s %-24s %8s %4s %10s %6s %s\n",
	       (double)e->time_ns / 1e9, pid, t->name[0] ? t->name : s->comm, e->tid, w->call, addr,
	       size, w->prot, w->flags, off, fd, key, id, w->result);
}

static void print_json(struct ht_json *j, const struct events_state *s,
		       const struct thread_last *t, const struct ht_event *e, const struct row *w,
		       int32_t pid)
{
	char buf[32];
	ht_json__obj_begin(j, NULL);
	ht_json__u64(j, "time_ns", e->time_ns);
	ht_json__i64(j, "pid", pid);
	ht_json__str(j, "comm", t->name[0] ? t->name : s->comm);
	ht_json__u64(j, "tid", e->tid);
	ht_json__str(j, "call", w->call);
	if (w->has_addr) {
		snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)w->addr);
		ht_json__str(j, "addr", buf);
	}
	if (w->has_size)
		ht_json__i64(j, "size", w->size);
	if (strcmp(w->prot, "-"))
		ht_json__str(j, "prot", w->prot);
	if (e->kind == HT_EV_SHMCTL) {
		ht_json__str(j, "cmd", w->flags);
		ht_json__i64(j, "cmd_value", (int64_t)w->flags_raw);
	} else if (e->kind != HT_EV_HEAP_BREAK && strcmp(w->flags, "-")) {
		ht_json__arr_begin(j, "flags");
		char copy[sizeof(w->flags)], *save = NULL;
		strcpy(copy, w->flags);
		for (char *p = strtok_r(copy, "|", &save); p; p = strtok_r(NULL, "|", &save))
			if (strcmp(p, "0"))
				ht_json__str(j, NULL, p);
		ht_json__arr_end(j);
		ht_json__u64(j, "flags_value", w->flags_raw);
	}
	if (w->has_off)
		ht_json__i64(j, "offset", w->offset);
	if (w->has_fd)
		ht_json__i64(j, "fd", w->fd);
	if (w->has_key)
		ht_json__i64(j, "key", w->key);
	if (w->has_id)
		ht_json__i64(j, "id", w->id);
	if (e->kind == HT_EV_HEAP_BREAK) {
		ht_json__str(j, "cause", w->cause);
	} else {
		ht_json__str(j, "result", w->result);
		ht_json__bool(j, "failed", w->failed);
	}
}

/* The symbolizer for the modules seen so far: made again when a module
 * was added (dlopen) since. */
struct syms {
	struct ht_symbolizer *sym; /* current */
	size_t nmods;              /* modules it knows */
	const char *sysroot, *debug_dir; /* --sysroot, --debug-dir */
};

static struct ht_symbolizer *syms_get(struct syms *y, struct ht_reader *r)
{
	const struct ht_module *mods;
	size_t n = ht_reader__modules(r, &mods);
	if (y->sym && n == y->nmods)
		return y->sym;
	if (!y->sym) {
		y->sym = ht_blocks__symbolizer(r, y->sysroot, y->debug_dir); /* warns once */
	} else {
		struct ht_symbol_opts so = {y->sysroot, y->debug_dir};
		struct ht_symbolizer *s2 = ht_symbolizer__new(mods, n, &so);
		if (s2) {
			ht_symbolizer__free(y->sym);
			y->sym = s2;
		}
	}
	y->nmods = n;
	return y->sym;
}

static void print_stack(struct ht_reader *r, struct syms *y, uint32_t node, uint64_t depth,
			struct ht_json *j)
{
	static struct ht_frame f[MAX_FRAMES];
	struct ht_symbolizer *sym = node ? syms_get(y, r) : NULL;
	size_t n = sym ? ht_blocks__frames(r, sym, node, f, MAX_FRAMES) : 0;
	if (depth && n > depth)
		n = (size_t)depth;
	if (j) {
		ht_json__arr_begin(j, "stack");
		for (size_t i = 0; i < n; i++)
			ht_blocks__json_frame(j, &f[i]);
		ht_json__arr_end(j);
		return;
	}
	if (!n) {
		printf("        [no stack]\n");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		char name[1024];
		printf("        %s", ht_blocks__frame_name(name, sizeof(name), &f[i]));
		if (f[i].file)
			printf(" %s:%d", strrchr(f[i].file, '/') ? strrchr(f[i].file, '/') + 1 : f[i].file,
			       f[i].line);
		if (f[i].module)
			printf(" [%s]", f[i].module);
		printf("\n");
	}
}

static uint64_t abs64(int64_t v)
{
	return v < 0 ? (uint64_t)-v : (uint64_t)v;
}

int cmd_events(int argc, char **argv)
{
	struct events_config cfg = {.to = UINT64_MAX};
	const struct ht_option opts[] = {
		{0, "kind", HT_OPT_STRING, &cfg.kinds, "KINDS", "comma-separated: mmap, munmap, mremap, brk, sbrk, shm (or shmget, shmat, shmdt, shmctl), heap_break (all)"},
		{0, "min-size", HT_OPT_SIZE, &cfg.min_size, "SIZE", "only calls of at least this many bytes (K/M/G), those of unknown size left out (0)"},
		{0, "from", HT_OPT_DURATION, &cfg.from, "TIME", "from this time since the start (0)"},
		{0, "to", HT_OPT_DURATION, &cfg.to, "TIME", "up to this time (the end)"},
		{0, "stacks", HT_OPT_FLAG, &cfg.stacks, NULL, "the symbolized stack under each line (a trace recorded with --stacks)"},
		{0, "depth", HT_OPT_U64, &cfg.depth, "N", "frames shown per stack (all)"},
		{0, "json", HT_OPT_FLAG, &cfg.json, NULL, "one JSON object per line"},
		{0, "sysroot", HT_OPT_STRING, &cfg.sysroot, "DIR", "find the traced modules under DIR"},
		{0, "debug-dir", HT_OPT_STRING, &cfg.debug_dir, "DIR", "also look for separate debug files in DIR"},
		{'q', "quiet", HT_OPT_FLAG, &cfg.quiet, NULL, "no warnings about traces not closed cleanly, not in exact order or without stacks (--stacks)"},
		HT_OPT_THREADS,
		{0},
	};
	int ret = HT_EXIT_USAGE;
	struct ht_reader *r = NULL;
	struct events_state st;
	struct syms y = {NULL, 0, NULL, NULL};
	memset(&st, 0, sizeof(st));
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs != 1) {
		ht_error("%s; usage: heaptrail events [options] TRACE",
			 nargs ? "one trace at a time" : "no trace given");
		goto cleanup;
	}
	if (cfg.to < cfg.from) {
		ht_error("--to must come after --from"); /* (one wording for all: probe V) */
		goto cleanup;
	}
	uint64_t kinds = shown_kinds;
	if (cfg.kinds) {
		/* (its own kinds in the messages: dump's were refused next) */
#define SHOWN_KINDS "mmap, munmap, mremap, brk, sbrk, shm, shmget, shmat, shmdt, shmctl and heap_break"
		if (ht_parse_kinds(cfg.kinds, &kinds, "the ones events shows: " SHOWN_KINDS) < 0)
			goto cleanup;
		if (kinds & ~shown_kinds) {
			ht_error("--kind=%s: events shows " SHOWN_KINDS
				 "; 'heaptrail dump --kind' shows the others",
				 cfg.kinds);
			goto cleanup;
		}
	}
	if (cfg.to <= cfg.from) { /* (--to 0 included: it was taken for no --to) */
		ht_error("--to must come after --from");
		goto cleanup;
	}
	y.sysroot = cfg.sysroot;
	y.debug_dir = cfg.debug_dir;
	ret = HT_EXIT_DATA;
	r = ht_analyze__open(argv[0]);
	if (!r)
		goto cleanup;
	const struct ht_trace_info *in = ht_reader__info(r);
	/* (as dump, heap and timeline: it said no calls matched, exit 0) */
	if (ht_analyze__from_past_end(in, cfg.from, argv[0])) {
		ret = HT_EXIT_USAGE;
		goto cleanup;
	}
	const char *exe = in->exe && *in->exe ? in->exe : in->cmdline ? in->cmdline : "?";
	const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
	snprintf(st.comm, sizeof(st.comm), "%s", base); /* 15 characters, like the kernel's */
	st.brk = in->start_brk;
	struct ht_json j;
	ht_json__init(&j, stdout, 0);
	if (!cfg.json)
		print_header();
	uint64_t shown = 0;
	struct ht_event e;
	while (ht_analyze__next(r, &e)) {
		if (e.time_ns > cfg.to)
			break;
		if (e.part == HT_PART_RELEASE)
			continue; /* a moving mremap: shown once, at its end */
		struct thread_last *t = thread_of(&st, e.tid);
		if (e.kind == HT_EV_THREAD_NAME) {
			snprintf(t->name, sizeof(t->name), "%s", e.str ? e.str : "");
			continue;
		}
		int want = (kinds >> e.kind & 1) && e.time_ns >= cfg.from;
		struct row w;
		if (shown_kinds >> e.kind & 1)
			fill_row(&st, &e, &w); /* (keeps the shm and break state) */
		else
			memset(&w, 0, sizeof(w));
		if (e.kind == HT_EV_HEAP_BREAK)
			st.brk = e.v[0]; /* (a brk() call is followed by one when it moved it) */
		if (e.kind != HT_EV_HEAP_BREAK) {
			t = thread_of(&st, e.tid);
			t->kind = e.kind;
			t->stack = e.stack;
		}
		if (!want || (cfg.min_size && (!w.has_size || abs64(w.size) < cfg.min_size)))
			continue;
		shown++;
		if (cfg.json) {
			print_json(&j, &st, t, &e, &w, in->pid);
			/* a heap_break carries its call's stack, as brkstack shows it */
			if (cfg.stacks || (e.kind == HT_EV_HEAP_BREAK && w.stack))
				print_stack(r, &y, w.stack, cfg.depth, &j);
			ht_json__obj_end(&j);
			ht_json__finish(&j);
		} else {
			print_row(&st, t, &e, &w, in->pid);
			if (cfg.stacks)
				print_stack(r, &y, w.stack, cfg.depth, NULL);
		}
	}
	fflush(stdout);
	ret = ht_analyze__finish(r, argv[0], cfg.quiet);
	int filtered = cfg.min_size || cfg.from || cfg.to != UINT64_MAX;
	if (!shown && !cfg.json)
		fprintf(stderr, "heaptrail: %s: no %s calls%s\n", argv[0],
			cfg.kinds ? cfg.kinds : "mmap, brk or shm",
			filtered ? " matched the filters" : " in the trace");
	if (cfg.stacks && !ht_reader__nnodes(r) && shown && !cfg.quiet)
		ht_warning("%s has no stacks: record with --stacks", argv[0]);
cleanup:
	ht_symbolizer__free(y.sym);
	free(st.threads);
	free(st.segs);
	ht_reader__close(r);
	return ret;
}
