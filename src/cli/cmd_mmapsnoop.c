/* heaptrail mmapsnoop: mmap, munmap and mremap calls as they happen,
 * system-wide or of one process, with protection and flags decoded, the
 * offset, the size and the file mapped (docs/mmapsnoop.md). */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "cli/builtin.h"
#include "common/json.h"
#include "common/options.h"
#include "common/util.h"
#include "probes/memsys_run.h"
#include "probes/probe.h"

/* One configuration per run; each default is labelled by its flag. */
struct mmapsnoop_config {
	struct ht_probe_opts po; /* -p, -c, -d, --json, --check */
	int failed_only;         /* --failed: only the calls that failed */
};

static const char usage_text[] =
	"usage: heaptrail mmapsnoop [options]\n"
	"\n"
	"Every mmap, munmap and mremap call, system-wide or of one process, as it\n"
	"returns: the address, the size, the protection and flags decoded, the\n"
	"file offset, the result and the name of the file mapped (? where it could\n"
	"not be found out). Needs root (or\n"
	"CAP_BPF and CAP_PERFMON) and a kernel with BTF; runs until Ctrl-C, -d\n"
	"TIME, or the end of the process traced.\n"
	"\fEXAMPLES\n"
	"  heaptrail mmapsnoop                        # every process, until Ctrl-C\n"
	"  heaptrail mmapsnoop -p 1234 -d 10s\n"
	"  heaptrail mmapsnoop -c './app --its-args'  # start it, trace it to its end\n"
	"  heaptrail mmapsnoop --json -c ./app | jq '.events[] | select(.call==\"mmap\")'\n";

/* A flag bit and its name. */
struct flag_name {
	unsigned long bit; /* the value */
	const char *name;  /* as strace spells it, without the prefix */
};

static const struct flag_name map_flags[] = {
	{MAP_SHARED, "SHARED"},
	{MAP_PRIVATE, "PRIVATE"},
	{0x03, "SHARED_VALIDATE"}, /* the type, not a bit: handled first */
	{MAP_FIXED, "FIXED"},
	{MAP_ANONYMOUS, "ANONYMOUS"},
	{0x40, "32BIT"}, /* (MAP_32BIT, x86-64) */
	{MAP_GROWSDOWN, "GROWSDOWN"},
	{MAP_DENYWRITE, "DENYWRITE"},
	{MAP_EXECUTABLE, "EXECUTABLE"},
	{MAP_LOCKED, "LOCKED"},
	{MAP_NORESERVE, "NORESERVE"},
	{MAP_POPULATE, "POPULATE"},
	{MAP_NONBLOCK, "NONBLOCK"},
	{MAP_STACK, "STACK"},
	{MAP_HUGETLB, "HUGETLB"},
	{0x80000, "SYNC"},
	{0x100000, "FIXED_NOREPLACE"},
	{0x4000000, "UNINITIALIZED"},
	{0, NULL},
};

static const struct flag_name mremap_flags[] = {
	{1, "MAYMOVE"},
	{2, "FIXED"},
	{4, "DONTUNMAP"},
	{0, NULL},
};

/* Names the bits of v joined by '|', the rest in hex; "0" if none. */
static const char *flags_text(char *buf, size_t len, unsigned long v, const struct flag_name *t,
			      int is_map)
{
	size_t used = 0;
	buf[0] = 0;
	if (is_map) {
		unsigned long type = v & 0x03;
		const char *tn = type == 1   ? "SHARED"
				 : type == 2 ? "PRIVATE"
				 : type == 3 ? "SHARED_VALIDATE"
					     : NULL;
		if (tn)
			used += (size_t)snprintf(buf + used, len - used, "%s", tn);
		v &= ~0x03ul;
		/* the huge page size, bits 26-31, with MAP_HUGETLB */
		unsigned long shift = (v >> 26) & 0x3f;
		if ((v & MAP_HUGETLB) && shift) {
			used += (size_t)snprintf(buf + used, len - used, "%sHUGE_%luKB", used ? "|" : "",
						 (1ul << shift) >> 10);
			v &= ~(0x3ful << 26);
		}
	}
	for (const struct flag_name *f = t; f->name && used < len; f++) {
		if (is_map && f->bit <= 0x03)
			continue;
		if (v & f->bit) {
			used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "|" : "", f->name);
			v &= ~f->bit;
		}
	}
	if (v && used < len)
		used += (size_t)snprintf(buf + used, len - used, "%s0x%lx", used ? "|" : "", v);
	if (!used)
		snprintf(buf, len, "0");
	return buf;
}

static const char *prot_text(char *buf, unsigned long prot)
{
	if (!(prot & 7)) {
		snprintf(buf, 8, prot ? "0x%lx" : "NONE", prot);
		return buf;
	}
	snprintf(buf, 8, "%c%c%c", prot & PROT_READ ? 'R' : '-', prot & PROT_WRITE ? 'W' : '-',
		 prot & PROT_EXEC ? 'X' : '-');
	return buf;
}

static const char *call_name(uint32_t nr)
{
	return nr == HT_NR_MMAP ? "mmap" : nr == HT_NR_MUNMAP ? "munmap" : "mremap";
}

static int on_event(void *ctx, const struct ht_memsys_event *ev, uint64_t t, struct ht_json *j)
{
	int failed = ev->ret < 0 && ev->ret > -4096;
	const struct mmapsnoop_config *cfg = ctx;
	if (cfg->failed_only && !failed)
		return 0;
	char comm[17], flags[160], prot[8], result[32];
	ht_probe__comm(comm, ev->comm);
	const __u64 *a = ev->args;
	uint64_t size = ev->nr == HT_NR_MREMAP ? a[2] : a[1];
	if (failed)
		snprintf(result, sizeof(result), "%s", ht_probe__errname((int)-ev->ret));
	else if (ev->nr == HT_NR_MUNMAP)
		snprintf(result, sizeof(result), "0");
	else
		snprintf(result, sizeof(result), "0x%llx", (unsigned long long)ev->ret);
	if (ev->nr == HT_NR_MMAP) {
		flags_text(flags, sizeof(flags), a[3], map_flags, 1);
		prot_text(prot, a[2]);
	} else if (ev->nr == HT_NR_MREMAP) {
		flags_text(flags, sizeof(flags), a[3], mremap_flags, 0);
		snprintf(prot, sizeof(prot), "-");
	} else {
		snprintf(flags, sizeof(flags), "-");
		snprintf(prot, sizeof(prot), "-");
	}
	if (j) {
		ht_json__obj_begin(j, NULL);
		ht_json__u64(j, "time_ns", t);
		ht_json__u64(j, "pid", ev->pid);
		ht_json__u64(j, "tid", ev->tid);
		ht_json__str(j, "comm", comm);
		ht_json__str(j, "call", call_name(ev->nr));
		ht_json__u64(j, "addr", a[0]);
		ht_json__u64(j, "size", size);
		if (ev->nr == HT_NR_MREMAP) {
			ht_json__u64(j, "old_size", a[1]);
			ht_json__u64(j, "new_addr_arg", a[4]);
		}
		if (ev->nr == HT_NR_MMAP) {
			ht_json__u64(j, "prot", a[2]);
			ht_json__str(j, "prot_text", prot);
			ht_json__i64(j, "fd", (int32_t)a[4]);
			ht_json__u64(j, "offset", a[5]);
		}
		if (ev->nr != HT_NR_MUNMAP) {
			ht_json__u64(j, "flags", a[3]);
			ht_json__str(j, "flags_text", flags);
		}
		if (failed) {
			ht_json__null(j, "result");
			ht_json__str(j, "error", result);
		} else {
			ht_json__u64(j, "result", (uint64_t)ev->ret);
		}
		if (ev->file_state == HT_MEMSYS_FILE)
			ht_json__str(j, "file", ev->file);
		else
			ht_json__null(j, "file");
		ht_json__bool(j, "file_unknown", ev->file_state == HT_MEMSYS_FILE_UNKNOWN);
		ht_json__obj_end(j);
		return 1;
	}
	char off[24], sz[40];
	if (ev->nr == HT_NR_MMAP)
		snprintf(off, sizeof(off), "%llu", (unsigned long long)a[5]);
	else
		snprintf(off, sizeof(off), "-");
	if (ev->nr == HT_NR_MREMAP)
		snprintf(sz, sizeof(sz), "%llu->%llu", (unsigned long long)a[1],
			 (unsigned long long)a[2]);
	else
		snprintf(sz, sizeof(sz), "%llu", (unsigned long long)size);
	printf("%-10.6f %-7u %-7u %-15s %-7s 0x%-16llx %12s %-4s %-24s %10s %-18s %s\n", t / 1e9,
	       ev->pid, ev->tid, comm, call_name(ev->nr), (unsigned long long)a[0], sz, prot, flags,
	       off, result,
	       ev->file_state == HT_MEMSYS_FILE	    ? ev->file
	       : ev->file_state == HT_MEMSYS_FILE_UNKNOWN ? "?"
							  : "-");
	return 1;
}

int cmd_mmapsnoop(int argc, char **argv)
{
	struct mmapsnoop_config cfg = {0};
	struct ht_memsys_spec spec = {
		.cmd = "mmapsnoop",
		.header = "TIME(s)    PID     TID     COMM            CALL    ADDR                 "
			  "      SIZE PROT FLAGS                        OFFSET RESULT             FILE",
		.event = on_event,
		.ctx = &cfg,
	};
	int rc;
	const struct ht_option opts[] = {
		HT_PROBE_OPTIONS(&cfg.po),
		{0, "failed", HT_OPT_FLAG, &cfg.failed_only, NULL, "only the calls that failed"},
		{0},
	};
	rc = ht_probe__parse(argc, argv, opts, usage_text, &cfg.po, "mmapsnoop", HT_PROBE_NO_ARGS);
	if (rc >= 0)
		goto cleanup;
	HT_MEMSYS_SET(spec.mask, HT_NR_MMAP);
	HT_MEMSYS_SET(spec.mask, HT_NR_MUNMAP);
	HT_MEMSYS_SET(spec.mask, HT_NR_MREMAP);
	rc = ht_memsys__run(&spec, &cfg.po);
cleanup:
	return rc;
}
