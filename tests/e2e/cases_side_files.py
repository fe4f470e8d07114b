"""Options that meant one thing in one command and another elsewhere:
`report -n 0` refused where `top`, `leaks` and `diff` take 0 for all;
`leaks --suppressions` taking any file (a binary one included) as
patterns; and a side file named by an option (`report --compare`, `leaks
--suppressions`, `attach --lib`) that cannot be read ending with exit 1
in one command and 2 in another."""

import json
import os
import re

from htlib import bad_compare_files, case, check, compile_c, eq
from cases_cli_fixes import leaks_trace
from cases_report import rows, section, selfcheck

# SITES leak sites, each its own function (so its own stack), site i
# leaking i+1 blocks of (i+1)*100 bytes, and one block of each size freed.
SITES = 14


def many_sites_source(extra_allocs=0):
    fns = "".join(
        "__attribute__((noinline)) void *site_%d(size_t n) { return malloc(n); }\n" % i
        for i in range(SITES))
    calls = "".join(
        "\tfor (int i = 0; i <= %d; i++)\n\t\tsite_%d(%d);\n\tfree(site_%d(%d));\n"
        % (i, i, (i + 1) * 100, i, (i + 1) * 100) for i in range(SITES))
    more = ("\tfor (int i = 0; i < %d; i++)\n\t\tfree(malloc(16 + (size_t)i));\n"
            % extra_allocs) if extra_allocs else ""
    return "#include <stdlib.h>\n" + fns + "int main(void)\n{\n" + calls + more + \
        "\treturn 0;\n}\n"


@case(timeout=240, labels=("analyzers",))
def test_report_top_zero_all(t):
    """`report -n 0` lists every stack in each table, as `top -n 0` and
    `leaks -n 0` do (it was refused, "--top and --depth take a number
    above 0", exit 2); the page still renders in Chromium.  The biggest
    single allocations stay bounded (10,000, as in top), and a page whose
    table left some out says how many.  `--depth 0` is still refused."""
    prog = compile_c(t, "sites", many_sites_source())
    trace = t.path("sites.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", trace, "--", prog], check_rc=0)
    out = t.path("all.html")
    r = t.tool(["report", "-q", "-n", "0", "-o", out, trace])
    eq(r.rc, 0, "report -n 0:\n" + r.describe())
    html = open(out).read()
    for table in ("peak", "leaks", "calls"):
        sites = sorted({m for _, s in rows(section(html, table))
                        for m in re.findall(r"site_(\d+)", s.split("&larr;")[0])})
        eq(len(sites), SITES, "site rows of the %s table with -n 0" % table)
    # the biggest single allocations: all of them (leaked and freed)
    big = rows(section(html, "biggest"))
    want = sum(i + 2 for i in range(SITES))
    check(len(big) >= want, "biggest allocations with -n 0: %d rows, the program made %d"
          % (len(big), want))
    check("left out" not in html, "a note of allocations left out, with none left out")
    # the default still shows 10 per table
    out10 = t.path("ten.html")
    eq(t.tool(["report", "-q", "-o", out10, trace]).rc, 0, "report")
    html10 = open(out10).read()
    eq(len(rows(section(html10, "leaks"))), 10, "leaks rows by default")
    eq(len(rows(section(html10, "biggest"))), 10, "biggest rows by default")
    charts = selfcheck(t, out)
    for cid in ("timeline-chart", "sizes", "flame-allocated"):
        check(charts.get(cid, {}).get("marks", 0) > 0, "chart %s with -n 0: %r" % (cid, charts))
    r = t.tool(["report", "--depth", "0", "-o", out, trace])
    eq(r.rc, 2, "report --depth 0:\n" + r.describe())
    check("--depth 0" in r.stderr, "the error names --depth:\n" + r.stderr)
    # more allocations than the biggest table keeps: 10,000 rows and a note
    prog = compile_c(t, "many", many_sites_source(extra_allocs=10100))
    trace = t.path("many.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", trace, "--", prog], check_rc=0)
    r = t.tool(["report", "-q", "-n", "0", "-o", out, trace])
    eq(r.rc, 0, "report -n 0 of 10,219 allocations:\n" + r.describe())
    html = open(out).read()
    eq(len(rows(section(html, "biggest"))), 10000, "biggest rows kept")
    m = re.search(r'<p id="biggest-left-out">(\d+) smaller allocations left out: the table '
                  r'keeps the 10000 biggest\.</p>', html)
    check(m and int(m.group(1)) >= 219, "no note of the allocations left out: %r"
          % (m and m.group(0)))


def leaks_json_of(t, trace, *args):
    r = t.tool(["leaks", "--json", "-n", "0"] + list(args) + [trace])
    eq(r.rc, 0, "leaks:\n" + r.describe())
    return json.loads(r.stdout)


@case(labels=("analyzers",))
def test_leaks_suppressions_not_text(t):
    """`leaks --suppressions` refuses a file that is not one of patterns,
    before the trace is read, naming the file and the line, exit 2 and
    nothing on stdout: a binary (/bin/ls, which was taken silently, exit
    0), a NUL byte, a control byte, a line of another sanitizer's type
    (`race:f`).  A good file with CRLF, comments, blanks after `leak:` and
    C++ `::` names is taken; a line longer than 1,023 bytes is one pattern
    (it was cut in two, the second part suppressing site_c)."""
    trace = leaks_trace(t)
    hint = ("give a text file of patterns, one a line, optionally after 'leak:' "
            "(docs/leaks.md, \"Suppressions\")")
    nul = t.path("nul.supp")
    with open(nul, "wb") as f:
        f.write(b"site_a\n# fine\nsite\0b\n")
    esc = t.path("esc.supp")
    with open(esc, "wb") as f:
        f.write(b"\x1b[1msite_a\n")
    race = t.path("race.supp")
    with open(race, "w") as f:
        f.write("leak:site_a\nrace:site_b\n")
    for path, what in (("/bin/ls", "/bin/ls, line 1: a control byte 0x7f: not a text file"),
                       (nul, nul + ", line 3: a NUL byte: not a text file"),
                       (esc, esc + ", line 1: a control byte 0x1b: not a text file"),
                       (race, race + ", line 2: 'race:' is not a leak suppression")):
        r = t.tool(["leaks", "--suppressions", path, trace])
        eq(r.rc, 2, "leaks --suppressions %s:\n%s" % (path, r.describe()))
        eq(r.stdout, "", "stdout of leaks --suppressions %s" % path)
        eq(r.stderr, "heaptrail: error: --suppressions: %s; %s\n" % (what, hint),
           "stderr of leaks --suppressions %s" % path)
    good = t.path("good.supp")
    with open(good, "wb") as f:
        f.write(b"# known\r\nleak:  site_a  # the first\r\n\r\n"
                b"leak:std::vector<int>::push_back\r\nsite_b")
    j = leaks_json_of(t, trace, "--suppressions", good)
    eq((j["leaked_bytes"], j["suppressed_bytes"]), (1000, 5000),
       "leaked and suppressed bytes with site_a and site_b suppressed")
    longf = t.path("long.supp")
    with open(longf, "w") as f:
        f.write("x" * 1023 + "site_c\n")
    j = leaks_json_of(t, trace, "--suppressions", longf)
    eq((j["leaked_bytes"], j["suppressed_bytes"]), (6000, 0),
       "a long line that matches nothing suppresses nothing")


@case(timeout=60, labels=("analyzers",))
def test_side_file_usage_errors(t):
    """A file named by an option that cannot be opened or read is a bad
    command line: exit 2, before the trace (or workload, or process) is
    looked at, one line naming the option and the file, nothing on stdout,
    no output left.  `report --compare` exited 1 (missing, not JSON, not
    compare's output) where `leaks --suppressions` exited 2; `attach --lib`
    exited 1 after the probe session had started; replay's and compare's
    allocator paths were refused with 2 but without the option's name."""
    missing_trace = t.path("no-such.ht")  # (a trace read first would be said first)
    out = t.path("out.html")
    junk, other = bad_compare_files(t)
    nope = t.path("nope.json")
    nosupp = t.path("nope.supp")
    compare_hint = "give the output of 'heaptrail compare --json'"
    cases = [
        (["report", "--compare", nope, "-o", out, missing_trace],
         "--compare: cannot open %s: No such file or directory; %s" % (nope, compare_hint)),
        (["report", "--compare", "/bin/ls", "-o", out, missing_trace],
         "--compare: /bin/ls: not JSON (line 1, column 1: expected a value); %s" % compare_hint),
        (["report", "--compare", junk, "-o", out, missing_trace],
         "--compare: %s: not JSON (line 1, column 36: unexpected end of input); %s"
         % (junk, compare_hint)),
        (["report", "--compare", other, "-o", out, missing_trace],
         "--compare: %s: not the output of 'heaptrail compare --json' (no workload and results)"
         % other),
        (["leaks", "--suppressions", nosupp, missing_trace],
         "--suppressions: cannot open %s: No such file or directory; give a text file of "
         "patterns, one a line, optionally after 'leak:' (docs/leaks.md, \"Suppressions\")"
         % nosupp),
        (["replay", "-a", "/nonexistent.so", t.path("no-such.wl")],
         "--allocator: allocator library /nonexistent.so: No such file or directory"),
        (["compare", "-a", "glibc,/nonexistent.so", t.path("no-such.wl")],
         "--allocators: allocator library /nonexistent.so: No such file or directory"),
        (["attach", "-p", str(os.getpid()), "--lib", "/nonexistent.so"],
         "attach: --lib /nonexistent.so: No such file or directory"),
        (["attach", "-p", str(os.getpid()), "--lib", t.dir],
         "attach: --lib %s: not a file: name the allocator library" % t.dir),
        (["attach", "-c", "touch " + t.path("ran"), "--lib", "/nonexistent.so"],
         "attach: --lib /nonexistent.so: No such file or directory"),
    ]
    for args, line in cases:
        r = t.tool(args)
        eq(r.rc, 2, "exit of %s:\n%s" % (" ".join(args), r.describe()))
        eq(r.stdout, "", "stdout of %s" % " ".join(args))
        eq(r.stderr, "heaptrail: error: %s\n" % line, "stderr of %s" % " ".join(args))
    left = [n for n in os.listdir(t.dir) if n.startswith("out.html") or n == "ran"]
    eq(left, [], "files left behind (a page, or the -c command run)")
