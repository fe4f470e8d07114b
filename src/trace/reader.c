/* The trace reader: opening a trace, finding its chunks (index or scan)
 * and its clock, the accessors, closing (reader_int.h says where the
 * decoding and the merge are). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "common/procstat.h"
#include "common/readsmall.h"
#include "common/util.h"
#include "reader_int.h"

/* The first error is the one said, but for one met in reading after the
 * scan stopped at a damaged or cut chunk (file_err): a chunk before that
 * point which does not decompress or decode is said after it, once
 * (before, a trace whose only readable-looking chunk was damaged too read
 * 0 events with nothing to say why).  Of several, the one at the lowest
 * offset: the serial reader and the decoding threads meet them in
 * different orders (a worker's is said once the events before it are
 * delivered, the serial reader's as it decodes), and say the same. */
#define ERR_ALSO "; and before it, "

/* The offset an error message starts with ("offset N: ..."), else the
 * largest. */
static uint64_t err_offset(const char *msg)
{
	if (strncmp(msg, "offset ", 7))
		return UINT64_MAX;
	return strtoull(msg + 7, NULL, 10);
}

void ht_rd__err(struct ht_reader *r, const char *fmt, ...)
{
	char msg[sizeof(r->err)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!r->err[0]) {
		memcpy(r->err, msg, sizeof(msg));
		return;
	}
	if (!r->file_err)
		return;
	char *also = strstr(r->err, ERR_ALSO);
	if (also) {
		if (err_offset(msg) >= err_offset(also + strlen(ERR_ALSO)))
			return;
		*also = 0;
	}
	size_t at = strlen(r->err);
	snprintf(r->err + at, sizeof(r->err) - at, "%s%s", ERR_ALSO, msg);
}

void ht_rd__warn(struct ht_reader *r, const char *fmt, ...)
{
	if (r->warn[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->warn, sizeof(r->warn), fmt, ap);
	va_end(ap);
}

const char *ht_kind_name(int kind)
{
	if (kind < 0 || kind >= HT_EV_NR)
		return "?";
	return ht_kind_descs[kind].name;
}

int ht_kind_parse(const char *name)
{
	for (int k = 0; k < HT_EV_NR; k++)
		if (!strcmp(ht_kind_descs[k].name, name))
			return k;
	return -1;
}

int ht_rd__read_at(struct ht_reader *r, void *buf, size_t n, uint64_t off)
{
	return ht_pread_full(r->fd, buf, n, off);
}

static size_t read_at_most(struct ht_reader *r, void *buf, size_t n, uint64_t off)
{
	return ht_pread_most(r->fd, buf, n, off);
}

/* The reference to the event chunk whose header h is at off. */
static struct chunk_ref chunk_ref_of(const struct ht_chunk_header *h, uint64_t off)
{
	return (struct chunk_ref){.offset = off,
				  .first_seq = h->first_seq,
				  .tid = h->tid,
				  .nevents = h->nevents,
				  .comp_size = h->comp_size,
				  .raw_size = h->raw_size,
				  .flags = h->flags};
}

static void add_chunk(struct ht_reader *r, const struct ht_chunk_header *h, uint64_t off)
{
	r->chunks = ht_grow(r->chunks, &r->capchunks, r->nchunks + 1, sizeof(*r->chunks));
	r->chunks[r->nchunks++] = chunk_ref_of(h, off);
	r->total_bytes += h->comp_size;
	r->info.events_chunks += h->nevents;
}

/* Follow mode (heaptrail live, which may watch a run for days) keeps at
 * most this many clock samples: past it, every other one goes, the newest
 * kept, so that those left thin out evenly over the run.  The clock fit
 * takes the newest sample, the flush-round gate its own copies (clock_ts)
 * and the duration the newest: only the RSS series gets coarser (at the
 * default 100 samples a second, one every 11 to 21 s of a day-long run,
 * in 330 KB instead of 340 MB). */
#define FOLLOW_MAX_CLOCKS 8192

static void thin_clocks(struct ht_reader *r)
{
	while (r->nclocks > FOLLOW_MAX_CLOCKS) {
		size_t k = 0;
		for (size_t i = (r->nclocks - 1) % 2; i < r->nclocks; i += 2)
			r->clocks[k++] = r->clocks[i];
		r->nclocks = k;
	}
}

/* A CLOCK chunk holds one sample, or (RSS interval samples) up to
 * HT_MAX_CLOCK_SAMPLES of them in time order. */
static void add_clock(struct ht_reader *r, uint64_t off, const struct ht_chunk_header *h)
{
	size_t n = h->comp_size / sizeof(struct ht_clock_sample);
	if (!n || n > HT_MAX_CLOCK_SAMPLES || h->comp_size % sizeof(struct ht_clock_sample))
		return;
	r->clocks = ht_grow(r->clocks, &r->capclocks, r->nclocks + n, sizeof(*r->clocks));
	if (ht_rd__read_at(r, &r->clocks[r->nclocks], h->comp_size, off + sizeof(*h)) < 0)
		return;
	if (n == 1) {
		/* Every flush round starts with a chunk of one sample; a batch of
		 * interval samples may be one sample too, and comes just before
		 * its round's.  Of the three newest such chunks, the oldest is
		 * a round's or older than the round's after it, and a chunk
		 * follows that round's: its events are all on disk. */
		r->clock_ts[2] = r->clock_ts[1];
		r->clock_ts[1] = r->clock_ts[0];
		r->clock_ts[0] = r->clocks[r->nclocks].ts;
	}
	r->nclocks += n;
	if (r->follow)
		thin_clocks(r);
}

static int check_chunk_header(struct ht_reader *r, const struct ht_chunk_header *h, uint64_t off)
{
	if (h->magic != HT_CHUNK_MAGIC) {
		ht_rd__err(r, "offset %llu: not a chunk header (bad magic 0x%08x): the trace is corrupt "
			   "from here", (unsigned long long)off, h->magic);
		return -1;
	}
	if (h->type < HT_CHUNK_EVENTS || h->type > HT_CHUNK_INDEX) {
		ht_rd__err(r, "offset %llu: unknown chunk type %u", (unsigned long long)off, h->type);
		return -1;
	}
	if (h->type == HT_CHUNK_EVENTS &&
	    (h->raw_size > HT_MAX_CHUNK_RAW || h->comp_size > HT_MAX_CHUNK_RAW ||
	     (!(h->flags & HT_CHUNK_F_ZSTD) && h->comp_size != h->raw_size))) {
		ht_rd__err(r, "offset %llu: chunk sizes out of range (%u stored, %u decoded)",
			(unsigned long long)off, h->comp_size, h->raw_size);
		return -1;
	}
	return 0;
}

/* Walks the chunk stream from r->scan_off; stops at the first bad header
 * or at a truncated chunk (what came before stays usable).  In follow mode
 * while the writer lives, a chunk cut by the end of the file is one being
 * written: the scan stops before it, and goes on from there next time.
 * So it is in a trace opened while being written (its writer held the
 * lock): the writer puts a chunk's header and its payload in with two
 * writes, and the size taken at the open may fall between them (1 report
 * in 60 on a running pipeline called the trace truncated, probe S).
 * new_chunk, if set, takes the event chunks instead of add_chunk. */
static void scan_chunks_from(struct ht_reader *r,
			     void (*new_chunk)(struct ht_reader *, const struct ht_chunk_header *,
					       uint64_t))
{
	uint64_t off = r->scan_off;
	uint64_t size = r->info.file_size;
	int growing = (r->follow && !r->writer_gone) || (!r->follow && r->info.being_written);
	while (off < size) {
		struct ht_chunk_header h;
		size_t got = read_at_most(r, &h, sizeof(h), off);
		if (got < sizeof(h)) {
			if (!growing)
				ht_rd__err(r, "offset %llu: trace ends inside a chunk header (%zu of %zu "
					   "bytes): the file is truncated", (unsigned long long)off, got,
					sizeof(h));
			break;
		}
		if (check_chunk_header(r, &h, off) < 0)
			break;
		if (off + sizeof(h) + h.comp_size > size) {
			if (!growing)
				ht_rd__err(r, "offset %llu: trace ends inside a chunk (%llu of %u bytes): "
					   "the file is truncated", (unsigned long long)off,
					(unsigned long long)(size - off - sizeof(h)), h.comp_size);
			break;
		}
		if (h.type == HT_CHUNK_EVENTS)
			(new_chunk ? new_chunk : add_chunk)(r, &h, off);
		else if (h.type == HT_CHUNK_CLOCK)
			add_clock(r, off, &h);
		off += sizeof(h) + h.comp_size;
	}
	r->scan_off = off;
}

static void scan_chunks(struct ht_reader *r)
{
	r->scan_off = r->hdr.sec[HT_SEC_CHUNKS].offset;
	scan_chunks_from(r, NULL);
}

/* Reads the index of a cleanly closed trace; 0 on success. */
static int load_index(struct ht_reader *r)
{
	struct ht_section_ref s = r->hdr.sec[HT_SEC_INDEX];
	struct ht_chunk_header h;
	if (s.size < sizeof(h) || s.offset + s.size > r->info.file_size ||
	    ht_rd__read_at(r, &h, sizeof(h), s.offset) < 0 || h.magic != HT_CHUNK_MAGIC ||
	    h.type != HT_CHUNK_INDEX || h.comp_size != s.size - sizeof(h) ||
	    h.comp_size % sizeof(struct ht_index_entry))
		return -1;
	size_t n = h.comp_size / sizeof(struct ht_index_entry);
	struct ht_index_entry *e = malloc(n ? h.comp_size : 1);
	if (!e || ht_rd__read_at(r, e, h.comp_size, s.offset + sizeof(h)) < 0) {
		free(e);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct ht_chunk_header ch;
		if (e[i].offset + sizeof(ch) > r->info.file_size ||
		    ht_rd__read_at(r, &ch, sizeof(ch), e[i].offset) < 0 ||
		    check_chunk_header(r, &ch, e[i].offset) < 0 || ch.tid != e[i].tid ||
		    ch.first_seq != e[i].first_seq || ch.type != e[i].type ||
		    e[i].offset + sizeof(ch) + ch.comp_size > r->info.file_size) {
			r->err[0] = 0;
			r->nchunks = 0;
			r->nclocks = 0;
			r->total_bytes = 0;
			r->info.events_chunks = 0;
			free(e);
			return -1;
		}
		if (ch.type == HT_CHUNK_EVENTS)
			add_chunk(r, &ch, e[i].offset);
		else if (ch.type == HT_CHUNK_CLOCK)
			add_clock(r, e[i].offset, &ch);
	}
	free(e);
	return 0;
}

static void fit_clock(struct ht_reader *r)
{
	const struct ht_file_header *h = &r->hdr;
	if (!(h->flags & HT_FILE_F_TSC)) {
		r->ts_per_ns = 1.0;
		return;
	}
	uint64_t t0 = h->start_ts, n0 = h->start_mono_ns, t1 = 0, n1 = 0;
	for (size_t i = 0; i < r->nclocks; i++) {
		if (r->clocks[i].mono_ns > n1 && r->clocks[i].ts > t0) {
			t1 = r->clocks[i].ts;
			n1 = r->clocks[i].mono_ns;
		}
	}
	if ((h->flags & HT_FILE_F_CLOSED) && h->end_mono_ns > n1 && h->end_ts > t0) {
		t1 = h->end_ts;
		n1 = h->end_mono_ns;
	}
	if (n1 > n0 + 100000 && t1 > t0)
		r->ts_per_ns = (double)(t1 - t0) / (double)(n1 - n0);
	else
		r->ts_per_ns = h->ts_hz ? (double)h->ts_hz / 1e9 : 1.0;
	r->fit_span_ns = n1 > n0 ? n1 - n0 : 0;
}

/* A double as uint64_t, saturating (a damaged clock gives absurd rates). */
static uint64_t sat_u64(double v)
{
	if (!(v < 18446744073709549568.0)) /* the largest double below 2^64; NaN too */
		return UINT64_MAX;
	return v > 0 ? (uint64_t)v : 0;
}

uint64_t ht_reader__ts_to_ns(const struct ht_reader *r, uint64_t ts)
{
	if (ts <= r->base_ts)
		return 0;
	return sat_u64((double)(ts - r->base_ts) / r->ts_per_ns);
}

static char *dup_section(struct ht_reader *r, int sec, int join)
{
	struct ht_section_ref s = r->hdr.sec[sec];
	size_t n = s.size > 65536 ? 65536 : (size_t)s.size;
	char *p = calloc(1, n + 1);
	if (!p)
		return NULL;
	if (n && s.offset + n <= r->info.file_size)
		ht_rd__read_at(r, p, n, s.offset);
	if (join) {
		for (size_t i = 0; i + 1 < n; i++)
			if (!p[i])
				p[i] = ' ';
	}
	while (n && (p[n - 1] == 0 || p[n - 1] == ' '))
		p[--n] = 0;
	return p;
}

static int cmp_chunk(const void *a, const void *b)
{
	const struct chunk_ref *x = a, *y = b;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->first_seq != y->first_seq)
		return x->first_seq < y->first_seq ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* ---- open/close ---------------------------------------------------------- */

/* What the waits for writers of this process take together, in ms: a
 * writer that does not finish (stopped with SIGSTOP, stuck) is waited for
 * once, not once per look at its trace (record's end step looked five
 * times: 2.5 minutes).  HT_WAIT_WRITER_MS, or HEAPTRAIL_WAIT_WRITER_MS
 * (read once; the tests make it short). */
static int wait_budget_ms = -1;

int ht_trace__wait_writer(int fd, int32_t pid, int timeout_ms)
{
	if (flock(fd, LOCK_SH | LOCK_NB) == 0)
		return flock(fd, LOCK_UN), 0;
	if (errno != EWOULDBLOCK)
		return 0; /* no locks here (some network file systems): read */
	/* A recorder holds the file.  While the program runs, read what is
	 * there; once it has ended, its writer is finishing the file. */
	if (ht_proc_exists(pid))
		return 1;
	if (wait_budget_ms < 0) {
		const char *env = getenv("HEAPTRAIL_WAIT_WRITER_MS");
		char *end = "";
		long v = env && *env ? strtol(env, &end, 10) : -1;
		wait_budget_ms = v >= 0 && v <= INT_MAX && !*end ? (int)v : HT_WAIT_WRITER_MS;
	}
	for (int waited = 0; waited < timeout_ms && wait_budget_ms > 0; waited += 5) {
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL);
		wait_budget_ms -= 5;
		if (flock(fd, LOCK_SH | LOCK_NB) == 0)
			return flock(fd, LOCK_UN), 0;
	}
	return 1;
}

/* The signal a header notes the program died of (HT_FILE_F_SIGNALED, a
 * valid number), else 0. */
static int header_signal(const struct ht_file_header *h)
{
	return (h->flags & HT_FILE_F_SIGNALED) && h->signal > 0 && h->signal < 65 ? (int)h->signal
										  : 0;
}

/* fd: the file already open (a descriptor the reader then owns), else -1. */
static struct ht_reader *open_trace(const char *path, int fd, char *err, size_t errlen,
				    int follow, int serial)
{
	struct stat st;
	/* O_NONBLOCK: a FIFO must not block the open (regular files ignore it) */
	if (fd < 0)
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		ht_open_error(err, errlen, path, errno, "trace");
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: %s, not a heaptrail trace (traces are regular files)", path,
			 S_ISDIR(st.st_mode)    ? "is a directory"
			 : S_ISFIFO(st.st_mode) ? "is a FIFO"
			 : S_ISSOCK(st.st_mode) ? "is a socket"
						: "is a device");
		close(fd);
		return NULL;
	}
	struct ht_reader *r = calloc(1, sizeof(*r));
	if (!r) {
		close(fd);
		snprintf(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	r->fd = fd;
	r->path = strdup(path);
	r->info.file_size = (uint64_t)st.st_size;
	char head[8];
	if (st.st_size == 0 && pread(fd, head, sizeof(head), 0) <= 0) {
		/* (a /proc file says 0 bytes too, but reads: bad magic below) */
		snprintf(err, errlen, "%s: empty file, not a heaptrail trace (was the program "
				      "killed before it started?)", path);
		goto fail;
	}
	size_t got = read_at_most(r, &r->hdr, sizeof(r->hdr), 0);
	if (got < 8 || memcmp(r->hdr.magic, HT_MAGIC, 8) != 0) {
		/* HT_WL_MAGIC (src/replay/workload.h) */
		if (got >= 8 && !memcmp(r->hdr.magic, "HTWLOAD\n", 8))
			snprintf(err, errlen, "%s: is a heaptrail workload, not a trace: use "
					      "'heaptrail replay' on it", path);
		else
			snprintf(err, errlen, "%s: not a heaptrail trace (bad magic); record one with "
					      "'heaptrail record'", path);
		goto fail;
	}
	if (got == sizeof(r->hdr)) {
		if (ht_trace__wait_writer(fd, r->hdr.pid, HT_WAIT_WRITER_MS) == 0) {
			/* the writer finished meanwhile: read what it left */
			if (fstat(fd, &st) == 0)
				r->info.file_size = (uint64_t)st.st_size;
			got = read_at_most(r, &r->hdr, sizeof(r->hdr), 0);
		} else {
			r->info.being_written = 1; /* read what is there now */
		}
	}
	if (got < sizeof(r->hdr)) {
		snprintf(err, errlen, "%s: file ends inside the header (%zu of %zu bytes): truncated",
			 path, got, sizeof(r->hdr));
		goto fail;
	}
	if (r->hdr.version > HT_VERSION) {
		snprintf(err, errlen, "%s: trace format version %u is newer than this heaptrail "
				      "reads (%u): use a newer heaptrail", path, r->hdr.version, HT_VERSION);
		goto fail;
	}
	if (r->hdr.version == 0 || r->hdr.header_size < sizeof(r->hdr) ||
	    r->hdr.sec[HT_SEC_CHUNKS].offset < sizeof(r->hdr)) {
		snprintf(err, errlen, "%s: corrupt header (version %u, header size %u)", path,
			 r->hdr.version, r->hdr.header_size);
		goto fail;
	}
	if (r->hdr.sec[HT_SEC_CHUNKS].offset > r->info.file_size) {
		/* a whole header, but not the sections it says come before the
		 * chunks (command line, executable): a cut file */
		snprintf(err, errlen,
			 "%s: file ends at %llu bytes, before its first chunk (at %llu): truncated",
			 path, (unsigned long long)r->info.file_size,
			 (unsigned long long)r->hdr.sec[HT_SEC_CHUNKS].offset);
		goto fail;
	}
	r->follow = follow;
	r->writer_gone = !r->info.being_written;
	r->cmdline = dup_section(r, HT_SEC_CMDLINE, 1);
	r->exe = dup_section(r, HT_SEC_EXE, 0);
	if (r->hdr.flags & HT_FILE_F_OTHER_ALLOCATOR)
		r->allocator = dup_section(r, HT_SEC_ALLOCATOR, 0);
	r->info.closed = (r->hdr.flags & HT_FILE_F_CLOSED) != 0;
	if (r->hdr.dropped && (r->hdr.flags & HT_FILE_F_PROBED))
		ht_rd__warn(r,
			    "heaptrail attach did not trace %llu calls of the program (more "
			    "blocks live than its --max-blocks, or events its ring buffer had no "
			    "room for: docs/attach.md): figures miss them",
			    (unsigned long long)r->hdr.dropped);
	else if (r->hdr.dropped) /* (said first: the figures are short of these calls) */
		ht_rd__warn(r,
			    "the recorder could not record %llu calls of the program (other "
			    "threads' calls while it exited, signal handlers' calls beyond those "
			    "it keeps for later, a thread's calls after an asynchronous "
			    "pthread_cancel cut one short or in seccomp's strict mode, or "
			    "threads beyond its buffers: "
			    "docs/record.md): figures miss them",
			    (unsigned long long)r->hdr.dropped);
	/* (a closed trace whose header gives its index neither place nor
	 * size was closed without one: no room left on the disk for it, or
	 * more chunks than it holds; its chunks are read in file order) */
	r->info.unindexed = r->info.closed && r->hdr.sec[HT_SEC_INDEX].offset == 0 &&
			    r->hdr.sec[HT_SEC_INDEX].size == 0;
	if (r->info.closed && !r->info.unindexed && load_index(r) == 0) {
		r->info.indexed = 1;
	} else {
		scan_chunks(r);
		/* A closed trace says where its chunks and index end: a scan
		 * that stops cleanly before that, at a chunk boundary, read a
		 * cut file. */
		uint64_t end = 0;
		for (int i = HT_SEC_CHUNKS; i <= HT_SEC_INDEX; i++)
			if (r->hdr.sec[i].offset + r->hdr.sec[i].size > end)
				end = r->hdr.sec[i].offset + r->hdr.sec[i].size;
		if (r->info.closed && end > r->info.file_size)
			ht_rd__err(r, "offset %llu: the file ends before its %s (the header says it "
				   "ends at %llu): the file is truncated",
				(unsigned long long)r->info.file_size,
				r->info.file_size >= r->hdr.sec[HT_SEC_CHUNKS].offset +
							     r->hdr.sec[HT_SEC_CHUNKS].size
					? "index" : "last chunk",
				(unsigned long long)end);
		/* The header of a closed trace counts its events: chunks short
		 * of that lost some (a cut file salvaged by compact keeps the
		 * count, and would read cleanly otherwise). */
		if (r->info.closed && r->hdr.events > r->info.events_chunks)
			ht_rd__warn(r, "its header counts %llu events but its chunks hold %llu: the "
				    "rest was lost (the file was cut or damaged, and maybe compacted "
				    "since); figures miss them",
				    (unsigned long long)r->hdr.events,
				    (unsigned long long)r->info.events_chunks);
		else if (r->info.closed && !r->info.unindexed)
			ht_rd__warn(r, "the index is damaged; chunks were scanned instead");
	}
	r->info.orphaned = (r->hdr.flags & HT_FILE_F_ORPHANED) != 0;
	r->info.detached = r->info.closed && (r->hdr.flags & HT_FILE_F_DETACHED);
	r->info.signal = r->info.closed ? header_signal(&r->hdr) : 0;
	r->info.exit_syscall = r->info.orphaned && (r->hdr.flags & HT_FILE_F_EXIT_SYSCALL);
	/* (a program that ended by the exit_group system call, as record saw
	 * it exit with a status, lost nothing: no warning; one record saw
	 * killed by a signal the recorder never saw, SIGKILL, is said so) */
	if (r->info.orphaned && r->info.signal) {
		char name[16];
		ht_signal_name(r->info.signal, name);
		ht_rd__warn(r,
			    "the program was killed by %s without shutting the tracer down; "
			    "its writer process saved every event it had recorded",
			    name);
	} else if (r->info.orphaned && !r->info.exit_syscall) {
		ht_rd__warn(r, "the program ended without shutting the tracer down (killed, ended "
			    "by a signal it did not catch, or by the exit_group system call "
			    "without exit(), as Go programs end); its writer process saved every "
			    "event it had recorded");
	}
	r->info.disk_full = (r->hdr.flags & HT_FILE_F_DISK_FULL) != 0;
	r->info.namespace = (r->hdr.flags & HT_FILE_F_NAMESPACE) != 0;
	if (r->info.namespace)
		ht_rd__warn(r, "the program loaded a library with dlmopen() into a link-map "
			    "namespace of its own: the calls made there (malloc, free, mmap...) went "
			    "to that namespace's C library and are not in the trace; figures miss "
			    "them");
	if (r->info.being_written && !r->info.closed && ht_proc_exists(r->hdr.pid))
		ht_rd__warn(r, "the trace is still being written (its program, pid %d, runs): read as "
			    "of now, up to the last flush; what is live at its end is live now, not "
			    "at exit", (int)r->hdr.pid);
	else if (r->info.being_written && !r->info.closed)
		ht_rd__warn(r, "the trace is not finished: its program (pid %d) has ended but its "
			    "writer process still holds the file (stopped, or slow to finish?): read "
			    "as it is now", (int)r->hdr.pid);
	else if (r->info.disk_full && !r->info.closed)
		ht_rd__warn(r, "recording stopped when a write failed (disk full, or a file size "
			    "limit?): the trace holds the events written before");
	else if (!r->info.closed)
		ht_rd__warn(r, "the trace was not closed cleanly (the program was killed, crashed or "
			    "exec'ed): it holds the events up to the last flush");
	r->dctx = ZSTD_createDCtx();

	/* Group the chunks by thread, in sequence order. */
	if (r->nchunks > 1)
		qsort(r->chunks, r->nchunks, sizeof(*r->chunks), cmp_chunk);
	for (size_t i = 0; i < r->nchunks; i++)
		if (i == 0 || r->chunks[i].tid != r->chunks[i - 1].tid)
			r->nstreams++;
	r->streams = calloc(r->nstreams ? r->nstreams : 1, sizeof(*r->streams));
	r->heap = calloc(r->nstreams ? r->nstreams : 1, sizeof(*r->heap));
	r->held = calloc(r->nstreams ? r->nstreams : 1, sizeof(*r->held));
	if (!r->streams || !r->heap || !r->held) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	/* Traces with HT_FILE_F_ORDERED dated every event whose previous one on
	 * its address was in another thread: (ts, tid, seq) is the order. */
	r->causal = r->hdr.version >= 2 && (r->nstreams > 1 || r->follow) &&
		    !(r->hdr.flags & HT_FILE_F_ORDERED);
	/* The live set is kept where threads are merged: one thread's order is
	 * its sequence numbers, and keeping the set would cost a single-threaded
	 * trace with many live blocks a third more time in stats (measured:
	 * 100000 live blocks, 20M events).  Calls hidden from the tracer there
	 * show in the analyzers' own counts (stats: unknown_frees,
	 * address_reuse_while_live). */
	r->check = !(r->hdr.flags & HT_FILE_F_SAMPLED) && r->nstreams > 1;
	/* a fork child frees what its parent allocated */
	r->check_free = r->check && !(r->hdr.flags & HT_FILE_F_FORK_CHILD);
	r->track = r->causal || r->check;
	if ((r->hdr.flags & (HT_FILE_F_SAMPLED | HT_FILE_F_SAMPLE_EVERY)) ==
	    (HT_FILE_F_SAMPLED | HT_FILE_F_SAMPLE_EVERY))
		r->sampled = 1;
	else if (r->hdr.flags & HT_FILE_F_SAMPLED)
		r->sampled = 2;
	r->fast = ht_rd__fast_path();
	size_t si = 0;
	for (size_t i = 0; i < r->nchunks; i++) {
		if (i > 0 && r->chunks[i].tid == r->chunks[i - 1].tid) {
			r->streams[si - 1].nchunks++;
			continue;
		}
		struct stream *s = &r->streams[si++];
		s->tid = r->chunks[i].tid;
		s->chunks = &r->chunks[i];
		s->nchunks = 1;
		s->seq = r->chunks[i].first_seq;
	}
	r->capstreams = r->nstreams ? r->nstreams : 1;
	for (size_t i = 0; r->follow && i < r->nstreams; i++) {
		/* followed: each stream's chunks grow apart */
		struct stream *s = &r->streams[i];
		struct chunk_ref *own = ht_xmalloc(s->nchunks * sizeof(*own));
		memcpy(own, s->chunks, s->nchunks * sizeof(*own));
		s->chunks = own;
		s->capchunks = s->nchunks;
	}
	r->gate_ts = r->follow && !r->writer_gone ? r->clock_ts[2] : UINT64_MAX;
	fit_clock(r);
	/* An event without its own timestamp happened before its thread's
	 * next epoch tick; four ticks leave room for a late writer thread. */
	r->hold_ticks = sat_u64(4.0 * HT_EPOCH_MS * 1e6 * r->ts_per_ns);
	r->base_ts = r->hdr.start_ts;
	if (!serial)
		ht_rd__par_start(r);
	r->file_err = r->err[0] != 0; /* (no stream has had its turn yet) */
	for (size_t i = 0; i < r->nstreams; i++) {
		struct stream *s = &r->streams[i];
		if (stream_advance(r, s)) {
			r->heap[r->nheap++] = s;
			if (s->ev->ts < r->base_ts)
				r->base_ts = s->ev->ts; /* events before the recorder's start-up */
			if (r->nstreams > 64 && !r->follow && !s->ev->str && !s->has_split)
				ht_rd__park(s);
		} else {
			ht_rd__stream_ended(r, s, 0, 0);
			s->out = s->exhausted && r->follow;
		}
	}
	for (size_t i = r->nheap; i-- > 0;)
		ht_rd__heap_down(r, i);

	struct ht_trace_info *in = &r->info;
	in->version = r->hdr.version;
	in->pid = r->hdr.pid;
	in->ppid = r->hdr.ppid;
	in->start_brk = r->hdr.start_brk;
	in->sample_bytes = (r->hdr.flags & HT_FILE_F_SAMPLED) ? r->hdr.sample_bytes : 0;
	in->writer_cpu_ns = r->hdr.writer_cpu_ns;
	in->stack_depth = r->hdr.stack_depth;
	in->sample_every = (r->hdr.flags & HT_FILE_F_SAMPLED) && (r->hdr.flags & HT_FILE_F_SAMPLE_EVERY)
				   ? r->hdr.sample_every : 0;
	in->flags = r->hdr.flags;
	in->start_realtime_ns = r->hdr.start_realtime_ns;
	in->ts_per_ns = r->ts_per_ns;
	in->events_hdr = r->hdr.events;
	in->dropped = r->hdr.dropped;
	in->nchunks = (uint32_t)r->nchunks;
	in->nthreads = (uint32_t)r->nstreams;
	in->cmdline = r->cmdline ? r->cmdline : "";
	in->exe = r->exe ? r->exe : "";
	if (r->hdr.flags & HT_FILE_F_OTHER_ALLOCATOR)
		in->allocator = r->allocator && *r->allocator ? r->allocator : "?";
	if (in->closed && r->hdr.end_mono_ns > r->hdr.start_mono_ns)
		in->duration_ns = r->hdr.end_mono_ns - r->hdr.start_mono_ns;
	else if (r->nclocks)
		in->duration_ns = r->clocks[r->nclocks - 1].mono_ns - r->hdr.start_mono_ns;
	in->duration_ns += ht_reader__ts_to_ns(r, r->hdr.start_ts);

	/* RSS samples, in time order. */
	r->rss_t = calloc(r->nclocks + 1, sizeof(uint64_t));
	r->rss_v = calloc(r->nclocks + 1, sizeof(uint64_t));
	return r;
fail:
	ht_reader__close(r);
	return NULL;
}

struct ht_reader *ht_reader__open(const char *path, char *err, size_t errlen)
{
	return open_trace(path, -1, err, errlen, 0, 0);
}

struct ht_reader *ht_reader__open_info(const char *path, char *err, size_t errlen)
{
	return open_trace(path, -1, err, errlen, 0, 1);
}

struct ht_reader *ht_reader__open_again(const struct ht_reader *r, char *err, size_t errlen)
{
	int fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0); /* (read with pread only: one offset is fine) */
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot read it twice: %s", r->path, strerror(errno));
		return NULL;
	}
	return open_trace(r->path, fd, err, errlen, 0, 1);
}

struct ht_reader *ht_reader__open_follow(const char *path, char *err, size_t errlen)
{
	return open_trace(path, -1, err, errlen, 1, 0);
}

/* ---- follow mode --------------------------------------------------------- */

/* Room for one more stream.  The merge's heap, its held list and the run
 * point into the array, a stream's ev may point to its own split and an
 * event's string to its stream's str: a move rebases them. */
static void grow_streams(struct ht_reader *r)
{
	if (r->nstreams < r->capstreams)
		return;
	size_t ncap = r->capstreams * 2;
	struct stream *old = r->streams, *nw = ht_xcalloc(ncap, sizeof(*nw));
	memcpy(nw, old, r->nstreams * sizeof(*nw));
	for (size_t i = 0; i < r->nstreams; i++) {
		/* an event's string is the stream's str */
		struct stream *s = &nw[i];
		if (old[i].ev == &old[i].split)
			s->ev = &s->split;
		for (unsigned k = 0; s->batch && k < s->bn; k++)
			if (s->batch[k].str == old[i].str)
				s->batch[k].str = s->str;
		if (s->split.str == old[i].str)
			s->split.str = s->str;
	}
	for (size_t i = 0; i < r->nheap; i++)
		r->heap[i] = nw + (r->heap[i] - old);
	for (size_t i = 0; i < r->nheld; i++)
		r->held[i] = nw + (r->held[i] - old);
	r->run = NULL;
	free(old);
	r->streams = nw;
	r->heap = ht_xrealloc(r->heap, ncap * sizeof(*r->heap));
	r->held = ht_xrealloc(r->held, ncap * sizeof(*r->held));
	r->capstreams = ncap;
}

/* An event chunk found by a follow-up scan: to its thread's stream, which
 * is new if the thread is. */
static void follow_chunk(struct ht_reader *r, const struct ht_chunk_header *h, uint64_t off)
{
	struct stream *s = NULL;
	for (size_t i = r->nstreams; i-- > 0;)
		if (r->streams[i].tid == h->tid) {
			s = &r->streams[i];
			break;
		}
	if (!s) {
		grow_streams(r);
		s = &r->streams[r->nstreams++];
		memset(s, 0, sizeof(*s));
		s->tid = h->tid;
		s->seq = h->first_seq;
		s->exhausted = 1; /* nothing decoded yet: taken into the heap below */
		s->done = 1;
		s->out = 1;
	}
	s->chunks = ht_grow(s->chunks, &s->capchunks, s->nchunks + 1, sizeof(*s->chunks));
	/* in sequence order among those not decoded yet, as the index gives
	 * them to a closed trace's reader: a recorder before 2026-11-28 could
	 * write a thread's chunk after a later one of it */
	size_t at = s->nchunks;
	while (at > s->next_chunk && s->chunks[at - 1].first_seq > h->first_seq)
		at--;
	memmove(s->chunks + at + 1, s->chunks + at, (s->nchunks - at) * sizeof(*s->chunks));
	s->chunks[at] = chunk_ref_of(h, off);
	s->nchunks++;
	r->nchunks++;
	r->total_bytes += h->comp_size;
	r->info.events_chunks += h->nevents;
}

static void heap_push(struct ht_reader *r, struct stream *s)
{
	size_t i = r->nheap++;
	r->heap[i] = s;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		struct stream *a = r->heap[i], *b = r->heap[p];
		if (a->ev->ts > b->ev->ts ||
		    (a->ev->ts == b->ev->ts && (a->tid > b->tid || (a->tid == b->tid &&
								   a->ev->seq >= b->ev->seq))))
			break;
		r->heap[i] = b;
		r->heap[p] = a;
		i = p;
	}
	r->run = NULL;
}

int ht_reader__poll(struct ht_reader *r)
{
	if (!r->follow || r->writer_gone)
		return 0;
	size_t before = r->nchunks, nclocks = r->nclocks;
	if (ht_trace__wait_writer(r->fd, r->hdr.pid, 0) == 0) {
		/* the writer closed the file: what it wrote last, then the end */
		r->writer_gone = 1;
		read_at_most(r, &r->hdr, sizeof(r->hdr), 0);
		r->info.closed = (r->hdr.flags & HT_FILE_F_CLOSED) != 0;
		r->info.orphaned = (r->hdr.flags & HT_FILE_F_ORPHANED) != 0;
		r->info.disk_full = (r->hdr.flags & HT_FILE_F_DISK_FULL) != 0;
		r->info.being_written = 0;
		r->info.events_hdr = r->hdr.events;
		r->info.dropped = r->hdr.dropped;
		r->info.flags = r->hdr.flags;
		if (!strncmp(r->warn, "the trace is still being written", 32) ||
		    !strncmp(r->warn, "the trace is not finished", 25))
			r->warn[0] = 0;
		if (!r->info.closed)
			ht_rd__warn(r, "the trace was not closed cleanly (the program was killed, "
				    "crashed or exec'ed): it holds the events up to the last flush");
	}
	struct stat st;
	if (fstat(r->fd, &st) == 0)
		r->info.file_size = (uint64_t)st.st_size;
	scan_chunks_from(r, follow_chunk);
	if (r->err[0] && !r->cut_tid)
		r->file_err = 1;
	for (size_t i = 0; i < r->nstreams; i++) {
		struct stream *s = &r->streams[i];
		if (s->next_chunk) {
			/* decoded chunks are not read again (no parking here) */
			memmove(s->chunks, s->chunks + s->next_chunk,
				(s->nchunks - s->next_chunk) * sizeof(*s->chunks));
			s->nchunks -= s->next_chunk;
			s->next_chunk = 0;
		}
		if (!s->exhausted || s->next_chunk >= s->nchunks)
			continue;
		s->exhausted = 0;
		s->done = 0;
		if (s->out) {
			s->out = 0;
			if (stream_advance(r, s))
				heap_push(r, s);
			else
				s->out = s->exhausted;
		}
	}
	if (r->nclocks != nclocks && r->nclocks &&
	    r->clocks[r->nclocks - 1].mono_ns > r->hdr.start_mono_ns + 2 * r->fit_span_ns) {
		/* A fit on the first milliseconds of a run can be far off (a
		 * preempted writer between its two clock reads): fitted again
		 * each time the span doubles, so that times settle within a
		 * few refits and never jump by more than the error left. */
		fit_clock(r);
		r->hold_ticks = sat_u64(4.0 * HT_EPOCH_MS * 1e6 * r->ts_per_ns);
		r->info.ts_per_ns = r->ts_per_ns;
	}
	if (r->nclocks != nclocks) {
		r->rss_t = ht_xrealloc(r->rss_t, (r->nclocks + 1) * sizeof(uint64_t));
		r->rss_v = ht_xrealloc(r->rss_v, (r->nclocks + 1) * sizeof(uint64_t));
	}
	struct ht_trace_info *in = &r->info;
	in->nchunks = (uint32_t)r->nchunks;
	in->nthreads = (uint32_t)r->nstreams;
	if (in->closed && r->hdr.end_mono_ns > r->hdr.start_mono_ns)
		in->duration_ns = r->hdr.end_mono_ns - r->hdr.start_mono_ns;
	else if (r->nclocks)
		in->duration_ns = r->clocks[r->nclocks - 1].mono_ns - r->hdr.start_mono_ns;
	r->gate_ts = r->writer_gone ? UINT64_MAX : r->clock_ts[2];
	if (r->writer_gone)
		r->at_end = 0;
	return r->nchunks != before || r->nclocks != nclocks || r->writer_gone;
}

/* The notes of how the program ended in the header h, for the trace r
 * reads (the same magic, pid and start): a signal in *sig, or the
 * exit_group system call; 1 if h has one. */
static int end_noted(const struct ht_reader *r, const struct ht_file_header *h, int *sig)
{
	if (memcmp(h->magic, r->hdr.magic, 8) || h->pid != r->hdr.pid ||
	    h->start_mono_ns != r->hdr.start_mono_ns)
		return 0;
	*sig = header_signal(h);
	return *sig || (h->flags & HT_FILE_F_EXIT_SYSCALL);
}

int ht_reader__recheck_end(struct ht_reader *r)
{
	struct ht_file_header h;
	int sig = 0;
	if (!r->follow || !r->writer_gone || !r->info.closed || !r->info.orphaned ||
	    r->info.signal || r->info.exit_syscall)
		return 0;
	int noted = ht_pread_full(r->fd, &h, sizeof(h), 0) == 0 && end_noted(r, &h, &sig);
	if (!noted && r->path) {
		/* record's end step may have put a rewritten trace in its place
		 * (compressed what the writer left raw): that file is noted */
		int fd = open(r->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		noted =
		    fd >= 0 && ht_pread_full(fd, &h, sizeof(h), 0) == 0 && end_noted(r, &h, &sig);
		if (fd >= 0)
			close(fd);
	}
	if (!noted)
		return 0;
	r->hdr.flags |= h.flags & (HT_FILE_F_SIGNALED | HT_FILE_F_EXIT_SYSCALL);
	r->hdr.signal = h.signal;
	r->info.flags = r->hdr.flags;
	r->info.signal = sig;
	r->info.exit_syscall = (h.flags & HT_FILE_F_EXIT_SYSCALL) != 0;
	return 1;
}

int ht_reader__following(const struct ht_reader *r)
{
	return r->follow && !r->writer_gone;
}

uint64_t ht_reader__follow_ns(const struct ht_reader *r)
{
	if (!ht_reader__following(r) || !r->gate_ts || r->gate_ts == UINT64_MAX)
		return 0;
	return ht_reader__ts_to_ns(r, r->gate_ts);
}

void ht_reader__order(const struct ht_reader *r, struct ht_order_info *o)
{
	memset(o, 0, sizeof(*o));
	o->ordered = (r->hdr.flags & HT_FILE_F_ORDERED) != 0;
	o->final = r->at_end;
	o->undated = r->undated_threads > 1 ? r->undated : 0;
	o->anomalies = r->anomalies;
	/* pending ones stand unless a control event drops them: at the end,
	 * those of a recording that ends paused go */
	if (r->ctl_state == 0 || (r->ctl_state == 2 && !r->at_end))
		o->anomalies += r->anomalies_pend;
	o->events_concerned = o->undated + o->anomalies;
	o->exact = o->events_concerned == 0;
}

size_t ht_reader__rss_samples(const struct ht_reader *r, const uint64_t **time_ns,
			      const uint64_t **rss_kb)
{
	size_t n = 0;
	for (size_t i = 0; i < r->nclocks; i++) {
		if (!r->clocks[i].rss_kb)
			continue;
		r->rss_t[n] = ht_reader__ts_to_ns(r, r->clocks[i].ts);
		r->rss_v[n] = r->clocks[i].rss_kb;
		n++;
	}
	*time_ns = r->rss_t;
	*rss_kb = r->rss_v;
	return n;
}

void ht_reader__close(struct ht_reader *r)
{
	if (!r)
		return;
	ht_rd__par_stop(r); /* (its workers read fd) */
	if (r->fd >= 0)
		close(r->fd);
	for (size_t i = 0; i < r->nstreams; i++) {
		free(r->streams[i].buf);
		free(r->streams[i].batch);
		free(r->streams[i].pend_err);
		free(r->streams[i].pend_warn);
		ht_coldec__free(r->streams[i].cd);
		free(r->streams[i].nodes);
		if (r->follow)
			free(r->streams[i].chunks);
		ht_modview__free(&r->streams[i].mods);
	}
	free(r->streams);
	free(r->nodes);
	free(r->node_hash);
	ht_modmap__free(&r->mods);
	free(r->heap);
	free(r->held);
	free(r->live);
	free(r->chunks);
	free(r->clocks);
	free(r->rss_t);
	free(r->rss_v);
	free(r->zbuf);
	free(r->cmdline);
	free(r->exe);
	free(r->allocator);
	free(r->path);
	if (r->dctx)
		ZSTD_freeDCtx(r->dctx);
	free(r);
}

const struct ht_trace_info *ht_reader__info(const struct ht_reader *r)
{
	return &r->info;
}

const char *ht_reader__path(const struct ht_reader *r)
{
	return r->path ? r->path : "the trace";
}

const char *ht_reader__error(const struct ht_reader *r)
{
	return r->err[0] ? r->err : NULL;
}

int ht_reader__damage(const struct ht_reader *r, struct ht_damage *d)
{
	memset(d, 0, sizeof(*d));
	if (!r->err[0])
		return 0;
	d->last_ns = r->last_out_ns;
	d->exact_to_ns = d->last_ns;
	if (!r->cut_tid)
		return 1;
	d->tid = r->cut_tid;
	d->thread_read = r->cut_read;
	d->thread_ns = r->cut_read ? ht_reader__ts_to_ns(r, r->cut_ts) : 0;
	d->read_on = !r->cut_read ? r->last_out_ts != 0 : r->last_out_ts > r->cut_ts;
	if (d->read_on)
		d->exact_to_ns = d->thread_ns;
	return 1;
}

const char *ht_reader__warning(const struct ht_reader *r)
{
	return r->warn[0] ? r->warn : NULL;
}

void ht_reader__progress(const struct ht_reader *r, uint64_t *done, uint64_t *total)
{
	*done = r->done_bytes;
	*total = r->total_bytes;
}

uint64_t ht_reader__node_ip(const struct ht_reader *r, uint32_t node)
{
	return node && node < r->nnodes ? r->nodes[node].ip : 0;
}

uint32_t ht_reader__node_parent(const struct ht_reader *r, uint32_t node)
{
	return node && node < r->nnodes ? r->nodes[node].parent : 0;
}

int ht_reader__node_module(const struct ht_reader *r, uint32_t node)
{
	return node && node < r->nnodes ? (int)r->nodes[node].mod - 1 : -1;
}

size_t ht_reader__nnodes(const struct ht_reader *r)
{
	return r->nnodes;
}

size_t ht_reader__modules(const struct ht_reader *r, const struct ht_module **mods)
{
	*mods = r->mods.mods;
	return r->mods.n;
}

uint32_t ht_sample_weight(uint64_t size, uint64_t ptr, uint64_t salt, uint64_t sample_bytes)
{
	if (!sample_bytes)
		return 1;
	double p = -expm1(-(double)(size ? size : 1) / (double)sample_bytes);
	double w = p > 0 ? 1.0 / p : 1.0;
	if (w > 4e9)
		w = 4e9;
	uint64_t h = ((ptr >> 4) ^ (salt * 0xD6E8FEB86659FD93ull)) * 0x9E3779B97F4A7C15ull;
	h ^= h >> 31;
	h *= 0xBF58476D1CE4E5B9ull;
	h ^= h >> 29;
	double u = (double)(h >> 11) / 9007199254740992.0;
	uint32_t k = (uint32_t)w;
	return k + (u < w - (double)k);
}
