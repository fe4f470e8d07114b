"""report, export and flamegraph: what their outputs say and where they
go.  The report's summary gives the trace's end in the words of stats and
leaks (a crash, a kill or a cut trace is not "closed cleanly"); its leaks
table leaves out what leaks suppresses by default and says how much; its
temporary-allocations table shows the temporaries' own calls and bytes, as
top does.  `-o -` is standard output for the three commands; a directory
at `-o` is refused before the trace is read; flamegraph says "wrote" only
once the file is in place, and not with -q.  export's massif `--time-unit
i` counts a sampled trace's calls as stats does."""

import json
import os
import re
import signal

from htlib import case, check, compile_c, eq, fail
from cases_export import HEAP_CALLS
from cases_reader import fmt_ns
from cases_report import rows, section

# One program for every case: two threads (glibc keeps their thread vectors,
# calloc <- allocate_dtv, to the end: leaks suppresses them by default), one
# stack with five blocks kept a while and one temporary, three leaked
# blocks of 700 B, then an exit, a SIGSEGV or a SIGKILL; "churn" adds
# 100,000 malloc/realloc/free rounds (a trace of several chunks).
PROGRAM = r"""
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void *site(size_t n) { return malloc(n); }
__attribute__((noinline)) void *leak_site(size_t n) { return malloc(n); }
static void *worker(void *a) { return a; }

int main(int argc, char **argv)
{
	const char *how = argc > 1 ? argv[1] : "exit";
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	/* one stack (one call): 5 x 1000 B freed after later allocations,
	 * then 304 B freed before the next one (the one temporary) */
	void *keep[5];
	for (int i = 0; i < 6; i++) {
		void *p = site(i < 5 ? 1000 : 304);
		if (i < 5)
			keep[i] = p;
		else
			free(p);
	}
	for (int i = 0; i < 5; i++)
		free(keep[i]);
	for (int i = 0; i < 3; i++)
		leak_site(700);
	if (!strcmp(how, "churn"))
		for (int i = 0; i < 100000; i++) {
			void *p = malloc(100 + i % 900);
			p = realloc(p, 2000 + i % 3000);
			free(p);
		}
	if (!strcmp(how, "segv"))
		*(volatile int *)0 = 1;
	if (!strcmp(how, "kill"))
		raise(SIGKILL);
	return 0;
}
"""


def program(t):
    return compile_c(t, "outfix", PROGRAM, ["-pthread"])


def record(t, name, how, rc=0, opts=("--stacks",)):
    out = t.path(name + ".ht")
    r = t.run([t.heaptrail, "record", "-q", "-o", out] + list(opts) + ["--", program(t), how])
    eq(r.rc, rc, "record %s:\n%s" % (how, r.describe()))
    return out


def cut_trace(t):
    """The churn trace cut inside a chunk (60% of its bytes), and the time
    of the last event that the cut trace still holds."""
    whole = record(t, "churn", "churn")
    with open(whole, "rb") as f:
        data = f.read()
    cut = t.path("cut.ht")
    with open(cut, "wb") as f:
        f.write(data[:len(data) * 6 // 10])
    r = t.tool(["dump", "--json", cut])
    eq(r.rc, 1, "dump of the cut trace (the reader's error):\n" + r.describe())
    times = [json.loads(l)["time_ns"] for l in r.stdout.splitlines() if l.strip()]
    check(len(times) > 1000, "the cut trace holds %d events" % len(times))
    return cut, times[-1]


def duration_detail(html):
    m = re.search(r'<div class="l">duration</div><div class="v">[^<]*</div>'
                  r'<div class="d">([^<]*)</div>', html)
    check(m, "no duration card in the report")
    return m.group(1)


def report(t, trace, rc=0):
    out = t.path(os.path.basename(trace) + ".html")
    r = t.tool(["report", "-q", "-o", out, trace])
    eq(r.rc, rc, "report:\n" + r.describe())
    with open(out) as f:
        return f.read()


@case(timeout=180, labels=("analyzers",))
def test_report_trace_end_said(t):
    """The report's duration card says how the trace ended, as stats and
    leaks do (ht_analyze__trace_end): "trace closed cleanly" only when the
    program exited; "the program died of SIGSEGV: not at exit"; for one
    killed by SIGKILL (its writer process closed the trace), the same with
    SIGKILL, which record notes in the header (until 2026-11-28: "the
    program did not exit cleanly"); for a trace cut inside a chunk, that it is
    cut and when its events end (the last event dump reads from it)."""
    ends = {
        "exit": (0, "trace closed cleanly", "live at exit"),
        "segv": (128 + signal.SIGSEGV, "the program died of SIGSEGV: not at exit",
                 "live at the end"),
        "kill": (128 + signal.SIGKILL, "the program died of SIGKILL: not at exit",
                 "live at the end"),
    }
    for how, (rc, words, label) in ends.items():
        trace = record(t, how, how, rc=rc)
        html = report(t, trace)
        with t.soft():
            eq(duration_detail(html), words, "the duration card of the %s trace" % how)
            # the same verdict as stats': its label for the live bytes
            st = t.tool(["stats", trace])
            check(re.search(r"^%s " % label, st.stdout, re.M),
                  "stats of the %s trace does not say %r:\n%s" % (how, label, st.stdout))
            check(('<div class="l">%s</div>' % label) in html,
                  "the report of the %s trace has no %r card" % (how, label))
    cut, last_ns = cut_trace(t)
    html = report(t, cut, rc=1)
    with t.soft():
        eq(duration_detail(html),
           "the trace is cut short or damaged: its events end at %s, later ones are not in it"
           % fmt_ns(last_ns), "the duration card of the cut trace")
        check('<div class="l">live at the end</div>' in html,
              "the report of the cut trace has no 'live at the end' card")


@case(timeout=180, labels=("analyzers",))
def test_outputs_dash_is_stdout(t):
    """`-o -` writes to standard output in report, export, flamegraph and
    diff (docs/output-files.md): the bytes of `-o FILE` (of no -o for
    export, flamegraph and diff), no file named `-`, no "wrote" line
    (diff made a file named `-`)."""
    trace = record(t, "exit", "exit")
    page = report(t, trace)
    r = t.tool(["report", "-o", "-", trace])
    eq(r.rc, 0, "report -o -:\n" + r.describe())
    eq(r.stdout, page, "report -o -: standard output against the page of -o FILE")
    eq(r.stderr, "", "report -o -: stderr")
    for args in (["export", "-f", "csv"], ["export", "-f", "massif"],
                 ["flamegraph"], ["flamegraph", "--folded"], ["diff", trace],
                 ["diff", "--json", trace], ["diff", "--svg", trace]):
        plain = t.tool(args + [trace])
        eq(plain.rc, 0, "%s:\n%s" % (" ".join(args), plain.describe()))
        dash = t.tool(args + ["-o", "-", trace])
        eq(dash.rc, 0, "%s -o -:\n%s" % (" ".join(args), dash.describe()))
        check(dash.stdout and dash.stdout == plain.stdout,
              "%s -o -: standard output differs from that without -o (%d against %d bytes)"
              % (" ".join(args), len(dash.stdout), len(plain.stdout)))
        eq(dash.stderr, plain.stderr, "%s -o -: stderr" % " ".join(args))
    check(not os.path.exists(t.path("-")), "a file named - was made in the current directory")


@case(timeout=120, labels=("analyzers",))
def test_flamegraph_wrote_line(t):
    """flamegraph -o FILE says "wrote FILE: N frames from M stacks" once
    the file is in place: not when writing it failed (/dev/full: exit 1,
    the error alone), and not with -q (as report)."""
    trace = record(t, "exit", "exit")
    out = t.path("f.svg")
    r = t.tool(["flamegraph", "-o", out, trace])
    eq(r.rc, 0, "flamegraph -o:\n" + r.describe())
    check(re.fullmatch(r"heaptrail: wrote %s: \d+ frames? from \d+ stacks?\n" % re.escape(out),
                       r.stderr), "flamegraph -o: stderr\n" + r.describe())
    full = t.tool(["flamegraph", "-o", "/dev/full", trace])
    eq(full.rc, 1, "flamegraph -o /dev/full:\n" + full.describe())
    eq(full.stderr, "heaptrail: error: cannot write /dev/full: No space left on device\n",
       "flamegraph -o /dev/full: stderr")
    os.unlink(out)
    q = t.tool(["flamegraph", "-q", "-o", out, trace])
    eq(q.rc, 0, "flamegraph -q -o:\n" + q.describe())
    eq(q.stderr, "", "flamegraph -q -o: stderr")
    check(os.path.getsize(out) > 0, "flamegraph -q -o wrote nothing")


@case(timeout=120, labels=("analyzers",))
def test_report_wrote_line_device(t):
    """report -o FILE says how big the page is and to open it in a
    browser; -o /dev/null (a device, no page to open) says only what it
    wrote, with no size (it gave /dev/null's 0 B and the browser hint)."""
    trace = record(t, "exit", "exit")
    out = t.path("r.html")
    r = t.tool(["report", "-o", out, trace])
    eq(r.rc, 0, "report -o:\n" + r.describe())
    check(re.fullmatch(r"heaptrail: wrote %s \([0-9.]+ KiB\) from \d+ events; open it in a "
                       r"browser\n" % re.escape(out), r.stderr), "report -o: stderr\n" + r.describe())
    null = t.tool(["report", "-o", "/dev/null", trace])
    eq(null.rc, 0, "report -o /dev/null:\n" + null.describe())
    check(re.fullmatch(r"heaptrail: wrote /dev/null from \d+ events\n", null.stderr),
          "report -o /dev/null: stderr\n" + null.describe())


@case(timeout=180, labels=("analyzers",))
def test_outputs_directory_refused_first(t):
    """A directory at -o (`.`, a named one) in report, export, flamegraph,
    diff, timeline and convert: exit 1 and the one line of the commands
    that check their output at the start, "cannot write DIR: it is a directory: name a
    file" (not "Device or resource busy" from the final rename), before
    the trace is read: given a cut trace, nothing of the reader's warnings
    and error comes first.  Nothing is left in the directory."""
    cut, _ = cut_trace(t)
    os.mkdir(t.path("sub"))
    before = sorted(os.listdir(t.dir))
    for args in (["report"], ["export", "-f", "csv"], ["export", "-f", "pprof"],
                 ["flamegraph"], ["diff", cut], ["timeline"], ["convert"]):
        for d in (".", "sub"):
            # (diff, timeline and convert found it at the final rename:
            # "Device or resource busy", after reading everything)
            r = t.tool(args + [d, cut] if args == ["convert"] else args + ["-o", d, cut])
            with t.soft():
                eq((r.rc, r.stderr),
                   (1, "heaptrail: error: cannot write %s: it is a directory: name a file\n" % d),
                   "%s -o %s: exit status and stderr" % (" ".join(args), d))
    eq(sorted(os.listdir(t.dir)), before, "the directory's files after the refusals")
    eq(os.listdir(t.path("sub")), [], "sub's files after the refusals")
    # a missing directory: the same words in every command
    for args in (["report"], ["export", "-f", "csv"], ["flamegraph"], ["diff", cut],
                 ["timeline"], ["convert"]):
        bad = t.path("nodir", "x.out")
        r = t.tool(args + [bad, cut] if args == ["convert"] else args + ["-o", bad, cut])
        with t.soft():
            eq((r.rc, r.stderr), (1, "heaptrail: error: cannot write %s: %s: No such file or "
                                     "directory\n" % (bad, t.path("nodir"))),
               "%s -o nodir/x.out: exit status and stderr" % " ".join(args))
    # a character device needs no writable directory: still written to itself
    for args in (["report"], ["export", "-f", "csv"], ["flamegraph"]):
        r = t.tool(args + ["-o", "/dev/null", record(t, "exit", "exit")])
        eq(r.rc, 0, "%s -o /dev/null:\n%s" % (" ".join(args), r.describe()))


@case(timeout=180, labels=("analyzers",))
def test_report_leaks_suppressed(t):
    """The report's leaks table is leaks': glibc's thread vectors (calloc <-
    allocate_dtv, one per thread the program started), which leaks
    suppresses by default, are not rows, and the section says how many
    blocks and bytes were left out, leaks' own "(N blocks, X suppressed)"
    figures; the rows are leaks' groups (the 2100 bytes of leak_site)."""
    trace = record(t, "exit", "exit")
    lj = json.loads(t.tool(["leaks", "--json", "--top", "1000", trace]).stdout)
    check(lj["suppressed_blocks"] >= 2, "leaks suppressed %d blocks: expected the two threads' "
          "vectors at least" % lj["suppressed_blocks"])
    text = t.tool(["leaks", trace]).stdout
    m = re.search(r"\((\d+ blocks, [^)]+) suppressed\)", text)
    check(m, "leaks says nothing suppressed:\n" + text)
    html = report(t, trace)
    leaks = section(html, "leaks")
    check("(%s suppressed)" % m.group(1) in leaks,
          "the report's leaks section does not say %r:\n%s" % (m.group(0), leaks[:1500]))
    check("allocate_dtv" not in leaks, "a thread vector in the report's leaks table:\n" + leaks)
    got = sorted(v for v, _ in rows(leaks))
    want = sorted("%d B" % g["bytes"] if g["bytes"] < 1024 else "%.1f KiB" % (g["bytes"] / 1024)
                  for g in lj["groups"])
    eq(got, want, "the leaks table's bytes against leaks --json's groups")
    check(any("leak_site" in s for _, s in rows(leaks)), "no leak_site row:\n" + leaks)
    eq(sum(g["bytes"] for g in lj["groups"] if g["stack"] and
           g["stack"][0].get("function") == "leak_site"), 2100, "leak_site's bytes (leaks)")


@case(timeout=120, labels=("analyzers",))
def test_report_temporary_own_figures(t):
    """The report's temporary-allocations row of `site` (five blocks of
    1000 B freed after later allocations, one of 304 B freed at once)
    shows 1 call, 1 block and 304 B, as top's "1 call, 304 B", not the
    stack's 6 allocations and 5.2 KiB."""
    trace = record(t, "exit", "exit")
    top = t.tool(["top", trace])
    eq(top.rc, 0, "top:\n" + top.describe())
    temp = top.stdout.split("most temporary allocations")[1]
    check(re.search(r"^\s+1 call,\s+304 B\s+site\b", temp, re.M),
          "top's temporaries have no '1 call, 304 B site':\n" + temp)
    html = report(t, trace)
    tab = section(html, "temporary")
    found = [tr for tr in re.findall(r"<tr><td>.*?</tr>", tab, re.S)
             if re.search(r"<summary>site\b", tr)]
    eq(len(found), 1, "rows of site in the report's temporaries:\n" + tab)
    cells = re.findall(r"<td>([^<]*)</td>", found[0])
    eq((cells[0], cells[2], cells[3]), ("1", "1", "304 B"),
       "site's temporaries: calls, blocks, allocated")


@case(timeout=180, labels=("analyzers",))
def test_export_massif_calls_sampled(t):
    """export -f massif --time-unit i of a --sample-bytes trace: the last
    snapshot is at the sum of stats' malloc-family and free calls, which
    count each call as the calls it stands for (docs/export.md), not at
    the number of calls recorded."""
    trace = record(t, "sampled", "churn", opts=("--sample-bytes", "65536"))
    s = t.stats(trace)
    calls = sum(s["calls"][k] for k in HEAP_CALLS)
    r = t.tool(["dump", "--json", trace])
    recorded = sum(1 for l in r.stdout.splitlines()
                   if l.strip() and json.loads(l)["kind"] in HEAP_CALLS)
    check(calls > 2 * recorded, "the sampled trace: %d calls estimated, %d recorded"
          % (calls, recorded))
    out = t.path("massif.out")
    r = t.tool(["export", "-q", "-f", "massif", "--time-unit", "i", "-o", out, trace])
    eq(r.rc, 0, "export massif:\n" + r.describe())
    with open(out) as f:
        times = re.findall(r"^time=(\d+)$", f.read(), re.M)
    if not times:
        fail("no snapshot in the massif file")
    eq(int(times[-1]), calls, "the last snapshot's time (%d calls recorded)" % recorded)
