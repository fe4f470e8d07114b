/* Runs a fuzz target's function (fuzz_reader.c or fuzz_workload.c, linked
 * in) over files, without libFuzzer: a plain main that any C compiler
 * builds, so that the seed corpus and the saved crash inputs are checked
 * on every test run (corpus.cmake).
 *
 *   run_corpus [-v] [-t SECONDS] PATH...
 *
 * A PATH that is a directory stands for every regular file in it (sorted;
 * dot files and README* skipped).  Each file is read and handed to
 * LLVMFuzzerTestOneInput.  A crash or a broken promise aborts the
 * process (with ASan/UBSan: after the sanitizer's report); the name of the
 * file being run is printed first, so the report says which one.  A file
 * that takes longer than SECONDS (default 30) is reported as a hang.
 * At the end: "run_corpus: N passed, 0 failed". */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *current = "";
static int verbose;
static unsigned timeout_s = 30;
static unsigned long passed;

static void on_alarm(int sig)
{
	(void)sig;
	static const char a[] = "run_corpus: HANG (timeout) on ";
	ssize_t k = write(2, a, sizeof(a) - 1);
	k = write(2, current, strlen(current));
	k = write(2, "\n", 1);
	(void)k;
	_exit(1);
}

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "run_corpus: %s: %s\n", path, strerror(errno));
		return -1;
	}
	size_t cap = 4096, n = 0;
	uint8_t *buf = malloc(cap);
	for (;;) {
		if (n == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
		}
		if (!buf) {
			fprintf(stderr, "run_corpus: out of memory\n");
			exit(2);
		}
		size_t k = fread(buf + n, 1, cap - n, f);
		if (k == 0)
			break;
		n += k;
	}
	fclose(f);
	current = path;
	if (verbose)
		fprintf(stderr, "run_corpus: %s (%zu bytes)\n", path, n);
	else
		fprintf(stderr, "run_corpus: %s\n", path);
	alarm(timeout_s);
	LLVMFuzzerTestOneInput(buf, n);
	alarm(0);
	free(buf);
	passed++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "run_corpus: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	char **names = NULL;
	size_t nn = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || !strncmp(de->d_name, "README", 6))
			continue;
		if (nn == cap) {
			cap = cap ? cap * 2 : 64;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				exit(2);
		}
		if (asprintf(&names[nn], "%s/%s", dir, de->d_name) < 0)
			exit(2);
		nn++;
	}
	closedir(d);
	if (nn > 1) /* an empty directory: names is NULL */
		qsort(names, nn, sizeof(*names), cmp_str);
	int bad = 0;
	for (size_t i = 0; i < nn; i++) {
		struct stat st;
		if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode) && run_file(names[i]) < 0)
			bad = 1;
		free(names[i]);
	}
	free(names);
	return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
	int i = 1, bad = 0;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-v"))
			verbose = 1;
		else if (!strcmp(argv[i], "-t") && i + 1 < argc)
			timeout_s = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else {
			fprintf(stderr, "usage: run_corpus [-v] [-t SECONDS] PATH...\n");
			return 2;
		}
	}
	if (i == argc) {
		fprintf(stderr, "usage: run_corpus [-v] [-t SECONDS] PATH...\n");
		return 2;
	}
	signal(SIGALRM, on_alarm);
	for (; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "run_corpus: %s: %s\n", argv[i], strerror(errno));
			bad = 1;
		} else if (S_ISDIR(st.st_mode)) {
			if (run_dir(argv[i]) < 0)
				bad = 1;
		} else if (run_file(argv[i]) < 0) {
			bad = 1;
		}
	}
	if (passed == 0 && !bad) {
		fprintf(stderr, "run_corpus: no input files\n");
		bad = 1;
	}
	printf("run_corpus: %lu passed, %d failed\n", passed, bad);
	return bad ? 1 : 0;
}
