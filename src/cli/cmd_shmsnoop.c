/* heaptrail shmsnoop: System V shared memory calls (shmget, shmat, shmdt,
 * shmctl) as they happen, system-wide or of one process, with keys, sizes,
 * flags and ids decoded (docs/shmsnoop.md). */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>

#include "cli/builtin.h"
#include "common/json.h"
#include "common/options.h"
#include "common/util.h"
#include "probes/memsys_run.h"
#include "probes/probe.h"

/* One configuration per run; each default is labelled by its flag. */
struct shmsnoop_config {
	struct ht_probe_opts po; /* -p, -c, -d, --json, --check */
};

static const char usage_text[] =
	"usage: heaptrail shmsnoop [options]\n"
	"\n"
	"Every System V shared memory call (shmget, shmat, shmdt, shmctl),\n"
	"system-wide or of one process, as it returns: keys, sizes, flags, ids,\n"
	"addresses and results. Needs root (or CAP_BPF and CAP_PERFMON) and a\n"
	"kernel with BTF; runs until Ctrl-C, -d TIME, or the end of the process\n"
	"traced.\n"
	"\fEXAMPLES\n"
	"  heaptrail shmsnoop                         # every process, until Ctrl-C\n"
	"  heaptrail shmsnoop -p $(pidof postgres | cut -d' ' -f1) -d 30s\n"
	"  heaptrail shmsnoop --json -c './app --its-args'\n";

static const char *call_name(uint32_t nr)
{
	switch (nr) {
	case HT_NR_SHMGET: return "shmget";
	case HT_NR_SHMAT: return "shmat";
	case HT_NR_SHMDT: return "shmdt";
	default: return "shmctl";
	}
}

/* shmget's flags: IPC_CREAT|IPC_EXCL|SHM_HUGETLB|SHM_NORESERVE|0600. */
static const char *shmget_flags(char *buf, size_t len, unsigned long v)
{
	snprintf(buf, len, "%s%s%s%s0%lo", v & IPC_CREAT ? "IPC_CREAT|" : "",
		 v & IPC_EXCL ? "IPC_EXCL|" : "", v & SHM_HUGETLB ? "SHM_HUGETLB|" : "",
		 v & SHM_NORESERVE ? "SHM_NORESERVE|" : "", v & 0777);
	unsigned long known = IPC_CREAT | IPC_EXCL | SHM_HUGETLB | SHM_NORESERVE | 0777;
	unsigned long rest = v & ~known;
	if (rest) {
		size_t used = strlen(buf);
		snprintf(buf + used, len - used, "|0x%lx", rest);
	}
	return buf;
}

/* shmat's flags: SHM_RDONLY|SHM_RND|SHM_REMAP|SHM_EXEC. */
static const char *shmat_flags(char *buf, size_t len, unsigned long v)
{
	snprintf(buf, len, "%s%s%s%s", v & SHM_RDONLY ? "|SHM_RDONLY" : "",
		 v & SHM_RND ? "|SHM_RND" : "", v & SHM_REMAP ? "|SHM_REMAP" : "",
		 v & SHM_EXEC ? "|SHM_EXEC" : "");
	unsigned long rest = v & ~(unsigned long)(SHM_RDONLY | SHM_RND | SHM_REMAP | SHM_EXEC);
	size_t used = strlen(buf);
	if (rest)
		snprintf(buf + used, len - used, "|0x%lx", rest);
	if (!buf[0])
		snprintf(buf, len, "|0");
	memmove(buf, buf + 1, strlen(buf));
	return buf;
}

static const char *shmctl_cmd(char *buf, size_t len, unsigned long v)
{
	static const char *const names[] = {
		[IPC_RMID] = "IPC_RMID", [IPC_SET] = "IPC_SET", [IPC_STAT] = "IPC_STAT",
		[IPC_INFO] = "IPC_INFO", [SHM_LOCK] = "SHM_LOCK", [SHM_UNLOCK] = "SHM_UNLOCK",
		[SHM_STAT] = "SHM_STAT", [SHM_INFO] = "SHM_INFO", [15] = "SHM_STAT_ANY",
	};
	unsigned long c = v & ~0x100ul; /* IPC_64 */
	if (c < sizeof(names) / sizeof(names[0]) && names[c])
		snprintf(buf, len, "%s", names[c]);
	else
		snprintf(buf, len, "%lu", v);
	return buf;
}

static int on_event(void *ctx, const struct ht_memsys_event *ev, uint64_t t, struct ht_json *j)
{
	(void)ctx;
	char comm[17], flags[128], result[32], args[256];
	ht_probe__comm(comm, ev->comm);
	const __u64 *a = ev->args;
	int failed = ev->ret < 0 && ev->ret > -4096;
	if (failed)
		snprintf(result, sizeof(result), "%s", ht_probe__errname((int)-ev->ret));
	else if (ev->nr == HT_NR_SHMAT)
		snprintf(result, sizeof(result), "0x%llx", (unsigned long long)ev->ret);
	else
		snprintf(result, sizeof(result), "%lld", (long long)ev->ret);
	switch (ev->nr) {
	case HT_NR_SHMGET:
		snprintf(args, sizeof(args), "key=%s0x%llx size=%llu flags=%s",
			 (int32_t)a[0] == IPC_PRIVATE ? "IPC_PRIVATE/" : "",
			 (unsigned long long)(uint32_t)a[0], (unsigned long long)a[1],
			 shmget_flags(flags, sizeof(flags), a[2]));
		break;
	case HT_NR_SHMAT:
		snprintf(args, sizeof(args), "shmid=%d addr=0x%llx flags=%s", (int)a[0],
			 (unsigned long long)a[1], shmat_flags(flags, sizeof(flags), a[2]));
		break;
	case HT_NR_SHMDT:
		snprintf(args, sizeof(args), "addr=0x%llx", (unsigned long long)a[0]);
		break;
	default:
		snprintf(args, sizeof(args), "shmid=%d cmd=%s buf=0x%llx", (int)a[0],
			 shmctl_cmd(flags, sizeof(flags), a[1]), (unsigned long long)a[2]);
	}
	if (!j) {
		printf("%-10.6f %-7u %-7u %-15s %-7s %s = %s\n", t / 1e9, ev->pid, ev->tid, comm,
		       call_name(ev->nr), args, result);
		return 1;
	}
	ht_json__obj_begin(j, NULL);
	ht_json__u64(j, "time_ns", t);
	ht_json__u64(j, "pid", ev->pid);
	ht_json__u64(j, "tid", ev->tid);
	ht_json__str(j, "comm", comm);
	ht_json__str(j, "call", call_name(ev->nr));
	switch (ev->nr) {
	case HT_NR_SHMGET:
		ht_json__i64(j, "key", (int32_t)a[0]);
		ht_json__u64(j, "size", a[1]);
		ht_json__u64(j, "flags", a[2]);
		ht_json__str(j, "flags_text", shmget_flags(flags, sizeof(flags), a[2]));
		break;
	case HT_NR_SHMAT:
		ht_json__i64(j, "shmid", (int32_t)a[0]);
		ht_json__u64(j, "addr", a[1]);
		ht_json__u64(j, "flags", a[2]);
		ht_json__str(j, "flags_text", shmat_flags(flags, sizeof(flags), a[2]));
		break;
	case HT_NR_SHMDT:
		ht_json__u64(j, "addr", a[0]);
		break;
	default:
		ht_json__i64(j, "shmid", (int32_t)a[0]);
		ht_json__u64(j, "cmd", a[1]);
		ht_json__str(j, "cmd_text", shmctl_cmd(flags, sizeof(flags), a[1]));
		ht_json__u64(j, "buf", a[2]);
	}
	if (failed) {
		ht_json__null(j, "result");
		ht_json__str(j, "error", result);
	} else {
		ht_json__i64(j, "result", ev->ret);
	}
	ht_json__obj_end(j);
	return 1;
}

int cmd_shmsnoop(int argc, char **argv)
{
	struct shmsnoop_config cfg = {0};
	struct ht_memsys_spec spec = {
		.cmd = "shmsnoop",
		.header = "TIME(s)    PID     TID     COMM            CALL    ARGUMENTS = RESULT",
		.event = on_event,
		.ctx = &cfg,
	};
	int rc;
	const struct ht_option opts[] = {
		HT_PROBE_OPTIONS(&cfg.po),
		{0},
	};
	rc = ht_probe__parse(argc, argv, opts, usage_text, &cfg.po, "shmsnoop", HT_PROBE_NO_ARGS);
	if (rc >= 0)
		goto cleanup;
	HT_MEMSYS_SET(spec.mask, HT_NR_SHMGET);
	HT_MEMSYS_SET(spec.mask, HT_NR_SHMAT);
	HT_MEMSYS_SET(spec.mask, HT_NR_SHMDT);
	HT_MEMSYS_SET(spec.mask, HT_NR_SHMCTL);
	rc = ht_memsys__run(&spec, &cfg.po);
cleanup:
	return rc;
}
