/* libFuzzer target for the leak suppressions parser of `heaptrail leaks
 * --suppressions` (src/analyze/suppressions.c), which reads files users
 * give it.
 *
 * Each input is taken as a suppressions file, parsed from memory after
 * the built-in patterns and, when it fits in a temporary file, loaded
 * from that file too.  Beyond "no crash, no hang, no leak", it checks
 * what holds for any input:
 *
 *   - an input with a NUL byte is refused; a refusal says "NAME, line N:"
 *     and adds no pattern (the built-in ones stay);
 *   - no more patterns than lines, each "*TEXT*" with TEXT non-empty, with
 *     no control byte and no leading or trailing blank;
 *   - a pattern matches a frame whose function is its own TEXT (unless
 *     TEXT holds fnmatch's '[' or '\');
 *   - the parse from memory and the load from a file agree;
 *   - the stack walk (ht_suppressions__stack, over the made-up stack tree
 *     below, asked twice so that the memo answers the second time) says a
 *     stack is suppressed exactly when a pattern matches one of its
 *     frames, the recorder's own frames left out.
 *
 * A broken promise aborts, which libFuzzer reports like a crash.  Without
 * clang, tests/fuzz/run_corpus.c runs the same function over the corpus
 * and the saved regressions (ctest fuzz.suppressions_corpus). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/suppressions.h"
#include "symbols/symbolize.h"
#include "trace/reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- a made-up stack tree, in place of a trace and its symbols ----------
 * Nodes 1..NODES; node k's parent is PARENT[k] (0: the outermost); node
 * k's ip is k, resolved to FRAMES[k] (node 4's second frame is an inlined
 * one; node 5 is the recorder's own wrapper, whose names a pattern never
 * matches through a stack).  The function of node 3 is taken from the
 * input's first line, so that the input's own patterns can match. */
#define NODES 6
static const uint32_t parent_of[NODES + 1] = {0, 0, 1, 2, 2, 4, 5};
static char input_name[80];
static struct ht_frame frames[NODES + 1][2];

static void make_frames(const uint8_t *data, size_t size)
{
	size_t n = 0;
	while (n < size && n < sizeof(input_name) - 1 && data[n] != '\n' && data[n])
		n++;
	memcpy(input_name, data, n);
	input_name[n] = 0;
	static const struct ht_frame fixed[NODES + 1] = {
	    {0},
	    {.function = "main", .file = "/src/app.c", .module = "/usr/bin/app"},
	    {.function = "std::vector<int, std::allocator<int> >::push_back",
	     .file = "/usr/include/c++/12/bits/stl_vector.h",
	     .module = "/usr/bin/app"},
	    {.function = NULL, .file = NULL, .module = "/usr/lib/libfoo.so.1"},
	    {.function = "_dl_allocate_tls", .file = NULL, .module = "/lib64/ld-linux-x86-64.so.2"},
	    {.function = "malloc", .file = "preload.c", .module = "libheaptrail.so"},
	    {.function = "init_config_cache", .file = "/src/cfg.c", .module = "/usr/bin/app"},
	};
	for (int k = 1; k <= NODES; k++)
		frames[k][0] = fixed[k];
	frames[3][0].function = input_name;
	frames[4][1] = (struct ht_frame){
	    .function = "allocate_dtv", .inlined = 1, .module = "/lib64/ld-linux-x86-64.so.2"};
}

size_t ht_reader__nnodes(const struct ht_reader *r)
{
	(void)r;
	return NODES + 1;
}

uint32_t ht_reader__node_parent(const struct ht_reader *r, uint32_t node)
{
	(void)r;
	return node <= NODES ? parent_of[node] : 0;
}

uint64_t ht_reader__node_ip(const struct ht_reader *r, uint32_t node)
{
	(void)r;
	return node;
}

int ht_reader__node_module(const struct ht_reader *r, uint32_t node)
{
	(void)r;
	(void)node;
	return 0;
}

size_t ht_symbolizer__resolve_in(struct ht_symbolizer *s, uint64_t ip, int mod,
				 const struct ht_frame **out)
{
	(void)s;
	(void)mod;
	if (!ip || ip > NODES)
		return 0;
	*out = frames[ip];
	return ip == 4 ? 2 : 1;
}

/* ---- the checks ---------------------------------------------------------- */

static void broken(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_suppressions: broken promise: %s (%s)\n", what, detail);
	abort();
}

/* Whether the stack at node holds a frame (not the recorder's) that a
 * pattern matches, found the slow way. */
static int stack_matches(const struct ht_suppressions *s, uint32_t node)
{
	for (uint32_t x = node; x; x = parent_of[x]) {
		size_t nf = x == 4 ? 2 : 1;
		for (size_t j = 0; j < nf; j++)
			if (!ht_symbols__is_recorder(frames[x][j].module) &&
			    ht_suppressions__frame(s, &frames[x][j]))
				return 1;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	char err[1024] = "";
	struct ht_suppressions s = {0};
	ht_suppressions__add_defaults(&s);
	size_t defaults = s.n;
	int rc = ht_suppressions__parse(&s, text, size, "input", err, sizeof(err));
	if (rc < 0) {
		if (strncmp(err, "input, line ", 12))
			broken("a refusal that does not name the file and line", err);
		if (s.n != defaults)
			broken("patterns kept from a refused file", err);
	} else {
		if (rc != 0)
			broken("neither 0 nor -1", err);
		if (memchr(data, 0, size))
			broken("an input with a NUL byte taken", "NUL");
	}
	size_t lines = 1;
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	if (s.n - defaults > lines)
		broken("more patterns than lines", "count");
	for (size_t i = defaults; i < s.n; i++) {
		const char *p = s.patterns[i];
		size_t n = strlen(p);
		if (n < 3 || p[0] != '*' || p[n - 1] != '*')
			broken("a pattern not *TEXT* with TEXT non-empty", p);
		if (p[1] == ' ' || p[1] == '\t' || p[n - 2] == ' ' || p[n - 2] == '\t')
			broken("a pattern with a leading or trailing blank", p);
		for (size_t k = 0; k < n; k++)
			if ((unsigned char)p[k] < 0x20 && p[k] != '\t')
				broken("a pattern with a control byte", p);
		if (!strpbrk(p, "[\\")) {
			char *own = strndup(p + 1, n - 2);
			struct ht_frame f = {.function = own};
			struct ht_suppressions one = {.patterns = &s.patterns[i], .n = 1};
			if (!own || !ht_suppressions__frame(&one, &f))
				broken("a pattern that does not match its own text", p);
			free(own);
		}
	}
	/* the same file, loaded */
	char path[] = "/tmp/fuzz-suppressions-XXXXXX";
	int fd = mkstemp(path);
	if (fd >= 0) {
		if (write(fd, data, size) == (ssize_t)size) {
			struct ht_suppressions t = {0};
			char err2[1024] = "";
			int rc2 = ht_suppressions__load(&t, path, err2, sizeof(err2));
			if (rc2 != rc)
				broken("the parse from memory and the load from a file disagree",
				       err2);
			if (t.n != s.n - defaults)
				broken("the load from a file takes other patterns", path);
			for (size_t i = 0; i < t.n; i++)
				if (strcmp(t.patterns[i], s.patterns[defaults + i]))
					broken("the load from a file takes other patterns",
					       t.patterns[i]);
			ht_suppressions__free(&t);
		}
		close(fd);
		unlink(path);
	}
	/* the stack walk over the made-up tree, twice (the memo's answers) */
	make_frames(data, size);
	struct ht_reader *r = NULL; /* (the stubs above look at neither) */
	struct ht_symbolizer *sym = NULL;
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t node = NODES; node >= 1; node--)
			if (ht_suppressions__stack(&s, r, sym, node) != stack_matches(&s, node))
				broken("the stack walk and the frames disagree", input_name);
	if (ht_suppressions__stack(&s, r, sym, 0))
		broken("no stack suppressed", "node 0");
	ht_suppressions__free(&s);
	return 0;
}
