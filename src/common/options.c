/* Option parsing from per-command tables. */
#define _GNU_SOURCE
#include "options.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void ht_print_usage(const char *usage, const struct ht_option *o)
{
	/* usage: "usage lines\n\nDESCRIPTION\n" then options, then EXAMPLES
	 * after a "\f" separator. */
	const char *ff = strchr(usage, '\f');
	fwrite(usage, 1, ff ? (size_t)(ff - usage) : strlen(usage), stdout);
	printf("\nOptions:\n");
	for (; o->type != HT_OPT_END; o++) {
		char left[64];
		int opt = o->type == HT_OPT_OPT_INT;
		int n = snprintf(left, sizeof(left), "  %c%c%s--%s%s%s%s%s", o->short_name ? '-' : ' ',
				 o->short_name ? o->short_name : ' ', o->short_name ? ", " : "  ",
				 o->long_name, opt && o->argh ? "[" : "", o->argh ? "=" : "",
				 o->argh ? o->argh : "", opt && o->argh ? "]" : "");
		if (n < 30)
			printf("%-30s %s\n", left, o->help);
		else
			printf("%s\n%-30s %s\n", left, "", o->help);
	}
	printf("  -h, --help                   show this help\n");
	if (ff)
		fputs(ff + 1, stdout);
}

static int set_value(const struct ht_option *o, const char *arg, const char *shown)
{
	switch (o->type) {
	case HT_OPT_STRING:
		*(const char **)o->value = arg;
		return 0;
	case HT_OPT_STRINGS: {
		struct ht_opt_strings *l = o->value;
		if (l->n == HT_OPT_STRINGS_MAX) {
			ht_error("%s: given more than %d times", shown, HT_OPT_STRINGS_MAX);
			return -1;
		}
		l->v[l->n++] = arg;
		return 0;
	}
	case HT_OPT_U64: {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(arg, &end, 0);
		if (end == arg || *end || *arg == '-')
			break;
		if (errno == ERANGE) { /* (strtoull gives 2^64-1 then) */
			ht_error("%s: '%s' is out of range (at most %llu)", shown, arg, ULLONG_MAX);
			return -1;
		}
		*(uint64_t *)o->value = v;
		return 0;
	}
	case HT_OPT_INT:
	case HT_OPT_OPT_INT: {
		/* Within int, INT_MIN aside: the commands' "not given" (record's
		 * --stacks and --compact-level).  An optional value is never
		 * negative: -1 is "given alone" (ht_parse_options).  Before,
		 * the long was cut to an int, and --stacks=4294967297 recorded
		 * 1 frame, --stacks=-1 64. */
		char *end;
		errno = 0;
		long v = strtol(arg, &end, 0);
		if (end == arg || *end)
			break;
		int opt = o->type == HT_OPT_OPT_INT;
		if (opt && v < 0) {
			ht_error("%s: '%s' is negative: give a number, or %s alone for "
				 "its default",
				 shown, arg, shown);
			return -1;
		}
		if (errno == ERANGE || v > INT_MAX || v < -INT_MAX) {
			/* (the option's own bounds are checked by its command:
			 * a range here named numbers it refuses, as --repeat's
			 * -2147483647 to 2147483647 for counts of 1 and up) */
			if (v > 0)
				ht_error("%s: '%s' is out of range (at most %d)", shown, arg,
					 INT_MAX);
			else
				ht_error("%s: '%s' is out of range (at least %d)", shown, arg,
					 opt ? 0 : -INT_MAX);
			return -1;
		}
		*(int *)o->value = (int)v;
		return 0;
	}
	case HT_OPT_NTHREADS:
		if (ht_parse_threads(arg, (int *)o->value) == 0)
			return 0;
		break;
	case HT_OPT_SIZE:
		if (ht_parse_size(arg, (uint64_t *)o->value) == 0)
			return 0;
		break;
	case HT_OPT_DURATION:
		if (ht_parse_duration(arg, (uint64_t *)o->value) == 0)
			return 0;
		break;
	case HT_OPT_DURATION_POS:
		if (ht_parse_duration(arg, (uint64_t *)o->value) == 0 && *(uint64_t *)o->value)
			return 0;
		break;
	default:
		break;
	}
	const char *what = o->type == HT_OPT_SIZE ? "a size like 4096, 64K or 1M"
			   : o->type == HT_OPT_DURATION ? "a duration like 1.5s, 200ms or 30us (under 292 years)"
			   : o->type == HT_OPT_DURATION_POS ? "a duration above 0, like 1.5s, 200ms or 30us"
			   : o->type == HT_OPT_NTHREADS ? "a number of threads, 0 (one per CPU) to 1024"
							: "a number";
	ht_error("%s: '%s' is not %s", shown, arg, what);
	return -1;
}

/* The long option name (up to '=') mistypes, NULL if none
 * (ht_nearest_name). */
static const char *nearest(const struct ht_option *opts, const char *name)
{
	const char *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name), n = 0;
	while (opts[n].type != HT_OPT_END)
		n++;
	const char *names[n + 1];
	for (size_t i = 0; i < n; i++)
		names[i] = opts[i].long_name;
	return ht_nearest_name(name, len, names, n);
}

int ht_parse_options(int argc, char **argv, const struct ht_option *opts, const char *usage,
		     int flags)
{
	int nargs = 0;
	int i;
	const char *cmd = argv[0];
	for (i = 1; i < argc; i++) {
		char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (a[0] != '-' || a[1] == 0) {
			if (flags & HT_OPT_STOP_AT_NONOPT)
				break;
			argv[nargs++] = a;
			continue;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			ht_print_usage(usage, opts);
			exit(ht_stdout_done(0));
		}
		const struct ht_option *o = NULL;
		const char *val = NULL;
		char shown[80];
		if (a[1] == '-') {
			const char *name = a + 2;
			const char *eq = strchr(name, '=');
			size_t len = eq ? (size_t)(eq - name) : strlen(name);
			for (const struct ht_option *p = opts; p->type != HT_OPT_END; p++)
				if (strlen(p->long_name) == len && !strncmp(p->long_name, name, len))
					o = p;
			snprintf(shown, sizeof(shown), "--%.*s", (int)len, name);
			if (o && eq)
				val = eq + 1;
			if (o && eq && o->type == HT_OPT_FLAG) {
				ht_error("%s takes no value; run 'heaptrail %s --help'", shown, cmd);
				exit(HT_EXIT_USAGE);
			}
		} else {
			for (const struct ht_option *p = opts; p->type != HT_OPT_END; p++)
				if (p->short_name && p->short_name == a[1])
					o = p;
			snprintf(shown, sizeof(shown), "-%c", a[1]);
			if (o && a[2]) {
				if (o->type == HT_OPT_FLAG) {
					ht_error("unknown option '%s' (flags cannot be combined); run "
						 "'heaptrail %s --help'", a, cmd);
					exit(HT_EXIT_USAGE);
				}
				val = a + 2;
			}
		}
		if (!o) {
			const char *near = a[1] == '-' ? nearest(opts, a + 2) : NULL;
			if (near)
				ht_error("unknown option '%s'; did you mean '--%s'? (run 'heaptrail %s "
					 "--help')", a, near, cmd);
			else
				ht_error("unknown option '%s'; run 'heaptrail %s --help'", a, cmd);
			exit(HT_EXIT_USAGE);
		}
		if (o->type == HT_OPT_FLAG) {
			*(int *)o->value = 1;
			continue;
		}
		if (o->type == HT_OPT_OPT_INT && !val) {
			*(int *)o->value = -1; /* "the default" */
			continue;
		}
		if (!val) {
			if (i + 1 >= argc) {
				ht_error("%s needs a value (%s); run 'heaptrail %s --help'", shown,
					 o->argh ? o->argh : "VALUE", cmd);
				exit(HT_EXIT_USAGE);
			}
			val = argv[++i];
		}
		if (set_value(o, val, shown) < 0)
			exit(HT_EXIT_USAGE);
	}
	for (; i < argc; i++)
		argv[nargs++] = argv[i];
	argv[nargs] = NULL;
	/* -q, --quiet of any command: no progress line, and the analyses keep
	 * their warnings about the trace's state to themselves (ht_quiet) */
	for (const struct ht_option *p = opts; p->type != HT_OPT_END; p++)
		if (p->type == HT_OPT_FLAG && p->value && *(int *)p->value &&
		    (p->short_name == 'q' || !strcmp(p->long_name, "quiet")))
			ht_progress_off = ht_quiet = 1;
	return nargs;
}
