"""Rows that sum several stacks of one function (top --by function, diff
--by function) show only the place all of them share: a file without a
line where the lines differ, neither where the files do."""
import json
import re

from htlib import case, check, compile_c, eq

SRC = r"""
#include <stdlib.h>
#include "heaptrail.h"
static void *volatile sink;
__attribute__((noinline)) static void two_lines(int k)
{
	for (int i = 0; i < k; i++) {
		sink = malloc(100);       /* LINE_A */
		free(sink);
		sink = malloc(200);       /* LINE_B */
		free(sink);
	}
}
__attribute__((noinline)) static void one_line(int k)
{
	for (int i = 0; i < k; i++) {
		sink = malloc(300);       /* LINE_C */
		free(sink);
	}
}
int main(int argc, char **argv)
{
	int k = argc > 1 ? atoi(argv[1]) : 10;
	two_lines(k);
	one_line(k);
	one_line(1);
	return 0;
}
"""


def line_of(tag):
    return next(i + 1 for i, l in enumerate(SRC.lstrip("\n").splitlines()) if tag in l) + 0


@case(timeout=120, labels=("analyzers",))
def test_function_rows_shared_place(t):
    """two_lines() allocates on two lines, one_line() on one from two call
    paths: --by function's row of two_lines says `two_lines (rows.c)` and
    its JSON line 0 (the first stack's line was shown as the whole row's),
    one_line's keeps its line; the same in diff --by function; --by stack
    keeps each line."""
    exe = compile_c(t, "rows", SRC.lstrip("\n"))
    a, b = t.path("a.ht"), t.path("b.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", a, "--", exe, "10"], check_rc=0)
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", b, "--", exe, "30"], check_rc=0)
    la, lb, lc = line_of("LINE_A"), line_of("LINE_B"), line_of("LINE_C")
    r = t.tool(["top", "--by", "function", a])
    eq(r.rc, 0, r.describe())
    rows = [l for l in r.stdout.split("most allocation calls")[1].split("\n\n")[0].splitlines()
            if "two_lines" in l or "one_line" in l]
    eq(sorted(re.sub(r"^ +\d+ calls, +[\d.]+ \w+ +", "", l) for l in rows),
       ["one_line (rows.c:%d)" % lc, "two_lines (rows.c)"], "top --by function rows:\n" + r.stdout)
    j = json.loads(t.tool(["top", "--json", "--by", "function", a]).stdout)
    got = {e["function"][0]["function"]: (e["calls"], e["function"][0]["file"].split("/")[-1],
                                          e["function"][0]["line"])
           for e in j["calls"]["entries"] if e["function"][0]["function"] in ("two_lines",
                                                                             "one_line")}
    eq(got, {"two_lines": (20, "rows.c", 0), "one_line": (11, "rows.c", lc)},
       "top --json --by function: (calls, file, line)")
    r = t.tool(["top", "--depth", "1", a])
    for line in (la, lb, lc):
        check("(rows.c:%d)" % line in r.stdout, "top by stack: line %d:\n%s" % (line, r.stdout))
    r = t.tool(["diff", "--by", "function", a, b])
    eq(r.rc, 0, r.describe())
    check(re.search(r"two_lines \(rows\.c\)$", r.stdout, re.M)
          and re.search(r"one_line \(rows\.c:%d\)$" % lc, r.stdout, re.M),
          "diff --by function:\n" + r.stdout)
    d = json.loads(t.tool(["diff", "--json", "--by", "function", a, b]).stdout)
    text = json.dumps(d)
    check('"function": "two_lines", "file": ' in text, "diff --json: two_lines:\n" + text[:2000])
    for e in d["entries"]:
        fr = e["function"][0]
        if fr["function"] == "two_lines":
            eq(fr["line"], 0, "diff --json: two_lines's line")
        if fr["function"] == "one_line":
            eq(fr["line"], lc, "diff --json: one_line's line")
