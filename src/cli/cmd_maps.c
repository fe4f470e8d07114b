/* heaptrail maps: what a process's memory is made of, from
 * /proc/PID/smaps or a saved copy: the main heap, glibc's arena heaps,
 * each thread's stack, anonymous maps, each library, the executable,
 * other files, the kernel's pages; size, RSS, PSS, dirty and swap per
 * kind and per region, with totals equal to pmap -X's. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/mapkinds.h"
#include "cli/builtin.h"
#include "common/json.h"
#include "common/options.h"
#include "common/util.h"

/* One configuration per run; each default is labelled by its flag. */
struct maps_config {
	uint64_t top; /* -n, --top (10): regions listed per kind */
	int all;      /* --all: every region */
	int json;     /* --json */
};

static const char usage_text[] =
	"usage: heaptrail maps [options] PID|SMAPS-FILE|-\n"
	"\n"
	"What a process's memory is made of, from /proc/PID/smaps or a saved copy\n"
	"of it (- reads standard input): the main heap, glibc's arena heaps, each\n"
	"thread's stack, other anonymous maps, each library, the executable, other\n"
	"files and the kernel's pages, with size, RSS, PSS, dirty and swap in kB\n"
	"per kind and per region.  The total equals pmap -X's.  An argument made\n"
	"of digits only is a PID: write ./123 for a file of that name.\n"
	"\fEXAMPLES\n"
	"  heaptrail maps 4242\n"
	"  heaptrail maps --all $(pidof myserver)\n"
	"  cp /proc/4242/smaps s.txt; heaptrail maps s.txt\n"
	"  ssh host cat /proc/4242/smaps | heaptrail maps -\n"
	"  heaptrail maps --json 4242 | jq '.regions.arena'\n";

static int is_pid(const char *s)
{
	if (!*s || strlen(s) > 9)
		return 0;
	for (const char *p = s; *p; p++)
		if (*p < '0' || *p > '9')
			return 0;
	return 1;
}

int cmd_maps(int argc, char **argv)
{
	struct maps_config cfg = {.top = 10};
	const struct ht_option opts[] = {
		{'n', "top", HT_OPT_U64, &cfg.top, "N", "regions listed per kind (10)"},
		{0, "all", HT_OPT_FLAG, &cfg.all, NULL, "list every region"},
		{0, "json", HT_OPT_FLAG, &cfg.json, NULL,
		 "JSON: total{size_kb,rss_kb,pss_kb,swap_kb,dirty_kb}, regions by kind (always all)"},
		{0},
	};
	int ret = HT_EXIT_USAGE;
	struct ht_mapkinds m;
	memset(&m, 0, sizeof(m));
	int nargs = ht_parse_options(argc, argv, opts, usage_text, 0);
	if (nargs != 1) {
		ht_error("%s; usage: heaptrail maps [options] PID|SMAPS-FILE|-",
			 nargs ? "one process or file at a time" : "no process or file given");
		goto cleanup;
	}
	if (is_pid(argv[0])) {
		int pid = atoi(argv[0]);
		if (pid <= 0) {
			ht_error("%s: not a process id", argv[0]);
			goto cleanup;
		}
		ret = ht_mapkinds__from_pid(&m, pid);
	} else {
		ret = ht_mapkinds__from_file(&m, argv[0]);
	}
	if (ret)
		goto cleanup;
	if (cfg.json) {
		struct ht_json j;
		ht_json__init(&j, stdout, 1);
		ht_json__obj_begin(&j, NULL);
		ht_mapkinds__json(&m, &j);
		ht_json__obj_end(&j);
		ht_json__finish(&j);
	} else {
		ht_mapkinds__print(&m, stdout, cfg.all ? 0 : (size_t)cfg.top);
	}
	ret = ht_stdout_done(ret);
cleanup:
	ht_mapkinds__free(&m);
	return ret;
}
