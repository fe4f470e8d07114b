/* A program that puts its own file under the number of the trace's
 * descriptor and back, again and again, while threads allocate
 * (cases_record_files.py, trace_fd_juggled):
 * fdjuggle THREADS PAIRS ROUNDS FILE [raw|rawpipe]
 *
 * FILE is the program's own; it never writes to it.  A thread finds the
 * trace's descriptor (find_trace), keeps a copy, and ROUNDS times dup2()s FILE onto its number,
 * then the copy back (so that the number is the trace's again: a tracer
 * that checks the number's file before each write is fooled half the
 * time).  THREADS threads make PAIRS malloc/free pairs each meanwhile.
 * At the end FILE must still be empty; the program writes "pairs N",
 * "juggled R" and "foreign B" (FILE's size) to stderr.  With "raw" the
 * dup2()s are raw system calls, which no wrapper of the recorder sees,
 * and "data B" says how many bytes of FILE are not zero (a write at an
 * offset past its end makes it sparse); with "rawpipe" the same with a
 * pipe's write end in place of FILE. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tp.h"

static long pairs, rounds;
static int own_fd = -1, trace_fd = -1, trace_copy = -1;
static _Atomic long made, juggled;
static _Atomic int go;
static int raw;

static int dup2_of(int from, int to)
{
	return raw ? (int)syscall(SYS_dup2, from, to) : dup2(from, to);
}

static void *alloc_loop(void *arg)
{
	(void)arg;
	while (!atomic_load(&go))
		;
	for (long i = 0; i < pairs; i++)
		free(tp_keep(malloc(16 + (size_t)(i % 200) * 8)));
	atomic_fetch_add(&made, pairs);
	return NULL;
}

static void *juggle(void *arg)
{
	(void)arg;
	atomic_store(&go, 1);
	for (long i = 0; i < rounds; i++) {
		TP_CHECK(dup2_of(own_fd, trace_fd) == trace_fd);
		TP_CHECK(dup2_of(trace_copy, trace_fd) == trace_fd);
		atomic_fetch_add(&juggled, 1);
	}
	return NULL;
}

/* The trace's descriptor: the recorder keeps it at 1000 or above, a
 * regular file (a new trace has no name until it is whole) open for
 * writing only. */
static int find_trace(void)
{
	for (int fd = 1000; fd < 4096; fd++) {
		struct stat st;
		int fl = fcntl(fd, F_GETFL);
		if (fd != own_fd && fl >= 0 && (fl & O_ACCMODE) == O_WRONLY && !fstat(fd, &st) &&
		    S_ISREG(st.st_mode))
			return fd;
	}
	return -1;
}

static void say(const char *what, long v)
{
	char buf[24];
	tp_write(2, what);
	tp_write(2, tp_utoa(buf, (unsigned long long)v));
	tp_write(2, "\n");
}

int main(int argc, char **argv)
{
	TP_CHECK(argc == 5 ||
		 (argc == 6 && (!strcmp(argv[5], "raw") || !strcmp(argv[5], "rawpipe"))));
	raw = argc == 6;
	int nthreads = (int)tp_atoul(argv[1]);
	pairs = (long)tp_atoul(argv[2]);
	rounds = (long)tp_atoul(argv[3]);
	TP_CHECK(nthreads > 0 && nthreads <= 64);
	own_fd = open(argv[4], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	TP_CHECK(own_fd >= 0);
	int pfd[2];
	if (argc == 6 && !strcmp(argv[5], "rawpipe")) {
		TP_CHECK(pipe2(pfd, O_CLOEXEC) == 0);
		own_fd = pfd[1];
	}
	free(tp_keep(malloc(100))); /* (the recorder's start: its file open) */
	trace_fd = find_trace();
	TP_CHECK(trace_fd >= 0);
	trace_copy = fcntl(trace_fd, F_DUPFD_CLOEXEC, 3);
	TP_CHECK(trace_copy >= 0);
	pthread_t t[65];
	for (int i = 0; i < nthreads; i++)
		TP_CHECK(pthread_create(&t[i], NULL, alloc_loop, NULL) == 0);
	TP_CHECK(pthread_create(&t[nthreads], NULL, juggle, NULL) == 0);
	for (int i = 0; i <= nthreads; i++)
		TP_CHECK(pthread_join(t[i], NULL) == 0);
	struct stat st;
	TP_CHECK(stat(argv[4], &st) == 0);
	say("pairs ", (long)atomic_load(&made));
	say("juggled ", (long)atomic_load(&juggled));
	say("foreign ", (long)st.st_size);
	if (raw) {
		int rd = open(argv[4], O_RDONLY | O_CLOEXEC);
		TP_CHECK(rd >= 0);
		long data = 0;
		static unsigned char buf[65536];
		ssize_t n;
		while ((n = read(rd, buf, sizeof(buf))) > 0)
			for (ssize_t i = 0; i < n; i++)
				data += buf[i] != 0;
		close(rd);
		say("data ", data);
	}
	return 0;
}
