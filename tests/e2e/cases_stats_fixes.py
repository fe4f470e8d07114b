"""`heaptrail stats` on calls whose category was counted twice or not at
all: a realloc(NULL, n) or reallocarray(NULL, n, m) that fails is a failed
realloc (the realloc line counted it "as malloc", while the calls table
counted it failed); an address handed out again while the trace held it
live (its free made while recording was off) was counted in the JSON
only."""

import json

from htlib import case, check, compile_c, eq

# Five reallocs, each in one category: as malloc, failed twice (a
# realloc(NULL, huge) and a reallocarray(NULL, ...) whose product
# overflows), moved or in place, as free.
REALLOC_KINDS_C = r"""
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	char *p = realloc(NULL, 100);
	void *volatile f1 = realloc(NULL, SIZE_MAX - 100);
	void *volatile f2 = reallocarray(NULL, (size_t)1 << 62, 16);
	p = realloc(p, 200);
	void *volatile z = realloc(p, 0);
	printf("%d %d %d\n", p != NULL, f1 == NULL, f2 == NULL);
	(void)z;
	return 0;
}
"""


@case(labels=("analyzers",))
def test_stats_realloc_null_failed(t):
    """Each realloc in exactly one category of the realloc line, and its
    failed ones those of the calls table: a failed realloc(NULL, n) is
    failed, not "as malloc" (before: 2 as malloc, 0 failed, against 1 + 1
    failed in the table)."""
    prog = compile_c(t, "realloc_kinds", REALLOC_KINDS_C)
    out = t.path("rk.ht")
    r = t.record(out, [prog])
    eq(r.stdout, "1 1 1\n", "the program's view (the premise)")
    s = t.stats(out)
    re_ = s["realloc"]
    eq((re_["calls"], re_["as_malloc"], re_["failed"], re_["as_free"],
        re_["moved"] + re_["in_place"]), (5, 1, 2, 1, 1), "realloc categories: %r" % re_)
    eq(s["failed"]["realloc"] + s["failed"]["reallocarray"], re_["failed"],
       "failed in the calls table: %r" % s["failed"])
    txt = t.tool(["stats", out]).stdout
    line = [l for l in txt.splitlines() if l.startswith("realloc ") and " calls: " in l]
    eq(len(line), 1, "the realloc line:\n" + txt)
    eq(line[0].split("calls: ")[1].split(", ")[2:], ["1 as malloc", "1 as free", "2 failed"],
       "the realloc line: " + line[0])


# A block freed while recording is off, then the same size allocated
# again: glibc's tcache hands the same address back.
PAUSED_REUSE_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <heaptrail.h>

int main(void)
{
	char *volatile p = malloc(1000);
	heaptrail_pause();
	free(p);
	heaptrail_resume();
	char *volatile q = malloc(1000);
	printf("%d\n", p == q);
	free(q);
	return 0;
}
"""


@case(labels=("analyzers",))
def test_stats_reuse_while_live_said(t):
    """The trace holds the block at p live (its free came while recording
    was off) when malloc hands p out again: stats --json counted it in
    address_reuse_while_live (docs said "must be 0") and the text said
    nothing.  The text has a line for it, naming the pause."""
    exe = compile_c(t, "pausedreuse", PAUSED_REUSE_C)
    out = t.path("r.ht")
    r = t.run([t.heaptrail, "record", "-q", "-o", out, "--", exe])
    eq(r.rc, 0, "record:\n" + r.describe())
    eq(r.stdout.strip(), "1", "the program: the same address handed back")
    st = json.loads(t.tool(["stats", "--json", out]).stdout)
    eq(st["address_reuse_while_live"], 1, "address_reuse_while_live")
    text = t.tool(["stats", out]).stdout
    line = [l for l in text.splitlines() if l.startswith("reused live")]
    eq(line, ["reused live      1 addresses handed out while the trace held them live "
              "(their frees were not recorded: made while recording was off, or hidden "
              "from the tracer)"], "the text's line:\n" + text)


# sbrk(0) twice, an sbrk that fails, sbrk(0): the break never moves.
SBRK_STILL_C = r"""
#include <stdint.h>
#include <unistd.h>
int main(void)
{
	sbrk(0);
	sbrk(0);
	if (sbrk((intptr_t)1 << 60) != (void *)-1)
		return 1;
	sbrk(0);
	return 0;
}
"""


@case(labels=("analyzers",))
def test_stats_break_still_no_move(t):
    """A program whose break never moves (sbrk(0), a failed sbrk): stats
    says 0 moves, heap_break.changes 0.  It said "grew +0 bytes in 1
    moves" of a heap_break event at the break where it was (probe P, a
    program under jemalloc); a single move is "1 move" now."""
    exe = compile_c(t, "sbrkstill", SBRK_STILL_C)
    out = t.path("b.ht")
    t.record(out, [exe])
    s = t.stats(out)
    eq((s["heap_break"]["changes"], s["heap_break"]["growth_bytes"]), (0, 0),
       "heap_break: %r" % s["heap_break"])
    txt = t.tool(["stats", out]).stdout
    check("grew +0 bytes in 0 moves" in txt, "stats' text:\n" + txt)
