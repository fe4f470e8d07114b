"""The recorder on programs that run on another allocator than glibc's
(jemalloc, tcmalloc, mimalloc in LD_PRELOAD): calls forwarded to it, its
usable sizes, its C++ operators recorded, the trace saying which it was."""

import os
import re
import sys

from cases_api import said
from htlib import case, check, eq, expect, expect_calls, live_set_check, skip, which

ALLOCATORS = {
    "jemalloc": "libjemalloc.so.2",
    "tcmalloc": "libtcmalloc_minimal.so.4",
    "mimalloc": "libmimalloc.so.2",
}
ROUNDS = 300
# tests/progs/otheralloc.c, per round
PER_ROUND = {"malloc": 3, "calloc": 1, "realloc": 1, "reallocarray": 1, "memalign": 1,
             "aligned_alloc": 1, "posix_memalign": 2, "valloc": 1, "pvalloc": 1}
ALLOC_KINDS = set(PER_ROUND)


def on(lib, argv):
    """argv run on lib: LD_PRELOAD for the program only (record's own
    process, built with ASan in CI's second pass, must not load it)."""
    return ["env", "LD_PRELOAD=" + lib] + list(argv)


def find_lib(name):
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"):
        p = os.path.join(d, ALLOCATORS[name])
        if os.path.exists(p):
            return p
    skip("%s is not installed (%s, scripts/deps.sh)" % (ALLOCATORS[name], name))


def between_marks(evs):
    marks = [i for i, e in enumerate(evs) if e.kind == "mark"]
    eq(len(marks), 2, "marks in the trace")
    return evs[marks[0] + 1:marks[1]]


def check_otheralloc(t, out, run, lib):
    """The trace of otheralloc against the program's own counts."""
    return check_otheralloc_rounds(t, out, run, lib, ROUNDS)


def check_otheralloc_rounds(t, out, run, lib, rounds):
    v = said(run)
    eq(v["calls"], 12 * rounds, "the program's count of its calls")
    body = between_marks(t.dump(out))
    counts = {}
    for e in body:
        if e.kind != "heap_break":
            counts[e.kind] = counts.get(e.kind, 0) + 1
    want = {k: n * rounds for k, n in PER_ROUND.items()}
    want["free"] = v["frees"] + v["own_api"]
    eq(counts, want, "calls between the marks")
    allocs = [e for e in body if e.kind in ALLOC_KINDS and e.result_ptr()]
    failed = [e for e in body if e.kind == "posix_memalign" and not e.result_ptr()]
    eq(len(failed), rounds, "posix_memalign(3): EINVAL")
    usable = sum(e.fields.get("usable", 0) for e in allocs)
    eq(usable, v["usable"], "usable bytes: the trace against malloc_usable_size()")
    s = t.stats(out)
    if lib:
        eq(s.get("allocator"), lib, "stats: the allocator")
    else:
        check("allocator" not in s, "stats names an allocator with glibc's: %r"
              % s.get("allocator"))
    # the block of the allocator's own function (mallocx, ...) was not seen
    expect(s, complete=True, closed=True, unknown_frees=v["own_api"])
    c = live_set_check(t.dump(out))
    check(c.reuse == 0 and c.unknown == v["own_api"], c.summary())
    return s


def other_allocator_case(name):
    @case(timeout=120, labels=("analyzers",))
    def test(t):
        lib = find_lib(name)
        out = t.path("o.ht")
        r = t.record(out, on(lib, [t.prog("otheralloc"), str(ROUNDS)]))
        check(said(r)["own_api"] == 1, "%s has no mallocx/tc_malloc/mi_malloc?" % name)
        s = check_otheralloc(t, out, r, lib)
        text = t.tool(["stats", out]).stdout
        check(("allocator  %s" % lib) in text, "stats does not name %s:\n%s" % (lib, text))
        check("mmapped chunks" not in text, "stats speaks of glibc's mmapped chunks")
        check("or by the allocator's own functions" in text,
              "stats does not say where the unknown free's block may come from:\n" + text)
        # glibc's internals: refused, saying why
        h = t.tool(["heap", out])
        check(h.rc == 1 and lib in h.stderr and "not glibc" in h.stderr, h.describe())
        rep = t.path("o.html")
        eq(t.tool(["report", "-q", "-o", rep, out]).rc, 0, "report")
        with open(rep, encoding="utf-8") as f:
            page = f.read()
        check(("The program's malloc was %s's, not glibc's" % lib) in page,
              "report does not name the allocator in its summary")
        check("there are no glibc arenas, heaps or thresholds to show" in page,
              "report shows glibc's heap internals")
        # with stacks (the general path) and after compaction: the same
        out2 = t.path("s.ht")
        r2 = t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out2, "--"] +
                   on(lib, [t.prog("otheralloc"), str(ROUNDS)]), check_rc=0)
        check_otheralloc(t, out2, r2, lib)
        eq(t.tool(["compact", out2]).rc, 0, "compact")
        s3 = check_otheralloc(t, out2, r2, lib)
        eq(s3["usable_bytes_allocated"] > 0, True, "usable bytes after compaction")
        # C++: the allocator's own operator new and delete, recorded
        cx = t.path("cx.ht")
        t.record(cx, on(lib, [t.prog("cxx_new")]))
        body = between_marks(t.dump(cx))
        mallocs = [e.args[0] for e in body if e.kind == "malloc"]
        eq(mallocs[:12], [24] * 10 + [1000, 4000], "operator new sizes")
        eq([e.result_ptr() for e in body if e.kind == "malloc"][12:13], [0],
           "the failed nothrow new")
        eq(sum(1 for e in body if e.kind == "free"),
           sum(1 for e in body if e.kind == "malloc" and e.result_ptr()),
           "operator delete: every block new gave")
        check(s["calls"]["malloc"] > 0, "no malloc")
        # an operator new that throws: the thread records on (mimalloc 2.0
        # aborts instead of throwing, untraced too: nothing to check there)
        if t.run([t.prog("cxx_throw")], env={"LD_PRELOAD": lib}).rc == 0:
            th = t.path("th.ht")
            t.record(th, on(lib, [t.prog("cxx_throw")]))
            body = [e for e in between_marks(t.dump(th)) if e.kind in ("malloc", "free")]
            eq([(e.kind, e.args[0] if e.kind == "malloc" else None) for e in body][-2:],
               [("malloc", 77), ("free", None)], "new char[77] and its delete[] after the throw")
        else:
            check(name == "mimalloc", "cxx_throw fails untraced on " + name)
    test.__doc__ = ("The program runs on %s (LD_PRELOAD): every malloc-API call goes to it "
                    "(before: glibc's blocks passed to its functions crashed the program, "
                    "or usable sizes were read from headers it does not have), its usable "
                    "sizes are in the trace, its C++ operators are recorded, and the trace "
                    "names it." % name)
    return test


test_record_jemalloc = other_allocator_case("jemalloc")
test_record_tcmalloc = other_allocator_case("tcmalloc")
test_record_mimalloc = other_allocator_case("mimalloc")


@case(labels=("analyzers",))
def test_record_glibc_usable(t):
    """The same program on glibc's allocator: usable sizes from the chunk
    headers agree with malloc_usable_size(), and no allocator is named."""
    out = t.path("g.ht")
    r = t.record(out, [t.prog("otheralloc"), str(ROUNDS)])
    eq(said(r)["own_api"], 0, "glibc has no mallocx")
    check_otheralloc(t, out, r, None)


@case(labels=("analyzers",))
def test_stats_usable_at_peak(t):
    """The usable bytes shown beside the peak are those live at that
    moment, not the usable bytes' own peak, which tests/progs/usablepeak.c
    reaches later (50 one-byte blocks): stats' text line and JSON, and the
    report's card, against the program's malloc_usable_size().  Before, the
    line put the later usable peak beside the requested one."""
    out = t.path("u.ht")
    r = t.record(out, [t.prog("usablepeak")])
    own = dict((k, int(v)) for k, v in (l.split(": ") for l in r.stdout.splitlines()))
    s = t.stats(out)
    expect_calls(s, {"malloc": 51, "free": 1})
    eq((s["peak_live_bytes"], s["live_usable_bytes_at_peak"], s["peak_live_usable_bytes"]),
       (own["peak_requested"], own["usable_at_peak"], own["usable_peak"]),
       "peak, usable at the peak, usable peak")
    text = t.tool(["stats", out]).stdout
    line = [l for l in text.splitlines() if l.startswith("peak live heap")]
    eq(len(line), 1, "the peak line:\n" + text)
    check(re.search(r"1000 B requested \(%d B usable\) in 1 block, at" % own["usable_at_peak"],
                    line[0]), "the peak line: %r" % line[0])
    html = t.path("u.html")
    t.run([t.heaptrail, "report", "-q", "-o", html, out], check_rc=0)
    with open(html) as f:
        page = f.read()
    check("(%d B usable)" % own["usable_at_peak"] in page, "the report's peak card")


@case(labels=("analyzers",))
def test_record_malloc_not_first(t):
    """When the program's malloc is not the recorder's, nothing of it is
    recorded, and the recorder says so: a library before it in LD_PRELOAD
    (used directly, not through record, which puts it first) and an
    executable with its own malloc (tests/progs/ownmalloc.c)."""
    lib = find_lib("jemalloc")
    out = t.path("j.ht")
    r = t.traced(out, [t.prog("cxx_new")],
                 env={"LD_PRELOAD": lib + ":" + t.preload})
    check(("malloc is %s's, which comes before the recorder" % lib) in r.stderr, r.describe())
    out2 = t.path("o.ht")
    r2 = t.record(out2, [t.prog("ownmalloc")])
    check("the program's executable defines malloc itself" in r2.stderr, r2.describe())
    # and with the recorder first: no such line
    r3 = t.record(t.path("f.ht"), on(lib, [t.prog("otheralloc"), "10"]))
    check("comes before the recorder" not in r3.stderr, r3.describe())


@case(labels=("analyzers",))
def test_record_follow_exec_env_replaced(t):
    """record --follow-exec of a command that replaces LD_PRELOAD (env
    LD_PRELOAD=libjemalloc.so.2 PROG) or clears the environment (env -i
    PROG): the exec'd program is traced all the same, on its allocator (it
    was not: the exec dropped the recorder with the variable, and record
    said that env wrote no trace)."""
    lib = find_lib("jemalloc")
    for name, argv, allocator in (
            ("preload", ["env", "LD_PRELOAD=" + lib, t.prog("otheralloc"), "20"], lib),
            ("cleared", ["env", "-i", t.prog("otheralloc"), "20"], None)):
        out = t.path(name + ".ht")
        r = t.run([t.heaptrail, "record", "--follow-exec", "-o", out, "--"] + argv, check_rc=0)
        check("wrote no trace" not in r.stderr, r.describe())
        check_otheralloc_rounds(t, out, r, allocator, 20)


SAN_PROG = b"""#include <stdio.h>
#include <stdlib.h>
int main(void)
{
	for (int i = 0; i < 100; i++)
		free(malloc(32));
	puts("done");
	return 0;
}
"""


def sanitizer_build(t, source, flag, name):
    """source (C, bytes) built by gcc with -fsanitize=flag as the test's
    file name, or the test is skipped (no gcc, or no such runtime)."""
    gcc = which("gcc")
    if not gcc:
        skip("gcc is not installed")
    src = t.path(name + ".c")
    with open(src, "wb") as f:
        f.write(source)
    exe = t.path(name)
    if t.run([gcc, "-fsanitize=" + flag, "-o", exe, src]).rc != 0:
        skip("gcc cannot build with -fsanitize=%s here" % flag)
    return exe


@case(timeout=120)
def test_record_sanitizer_builds(t):
    """A program built with a sanitizer runtime that replaces malloc: gcc's
    -fsanitize=address, thread and leak (shared runtimes that must be loaded
    first) are refused before they start, one line naming the sanitizer and
    its library, exit 2 (before: ASan and LSan stopped with their own
    errors, TSan crashed with SIGSEGV, and record guessed at a static
    binary); clang's -fsanitize=address (the runtime in the executable)
    runs, and the recorder says that the executable's malloc is its own;
    -fsanitize=undefined is recorded as any build."""
    for flag, name in (("address", "AddressSanitizer"), ("thread", "ThreadSanitizer"),
                       ("leak", "LeakSanitizer")):
        exe = sanitizer_build(t, SAN_PROG, flag, "san_" + flag)
        out = t.path(flag + ".ht")
        r = t.run([t.heaptrail, "record", "-o", out, "--", exe], check_rc=2)
        lines = r.heaptrail_lines()
        eq(len(lines), 1, "one line:\n" + r.describe())
        check(name in lines[0] and "-fsanitize" in lines[0], r.describe())
        check(r.stdout == "", "the program ran:\n" + r.describe())
        check(not os.path.exists(out), "a trace was written")
    gcc, src = which("gcc"), t.path("san_address.c")  # (sanitizer_build wrote it)
    exe = t.path("san_undefined")
    eq(t.run([gcc, "-fsanitize=undefined", "-o", exe, src]).rc, 0, "gcc -fsanitize=undefined")
    out = t.path("ub.ht")
    t.record(out, [exe])
    s = t.stats(out)
    check(s["calls"]["malloc"] >= 100 and s["calls"]["free"] >= 100, "ubsan build: %r" % s["calls"])
    clang = which("clang")
    if clang and t.run([clang, "-fsanitize=address", "-o", t.path("c_asan"), src]).rc == 0:
        r = t.run([t.heaptrail, "record", "-o", t.path("c.ht"), "--", t.path("c_asan")],
                  check_rc=0)
        check("the program's executable defines malloc itself" in r.stderr, r.describe())


SAN_ENV_PROG = b"""#include <stdio.h>
#include <stdlib.h>
int main(void)
{
	const char *p = getenv("LD_PRELOAD"), *o = getenv("HEAPTRAIL_OPTIONS");
	free(malloc(32));
	printf("LD_PRELOAD=%s HEAPTRAIL_OPTIONS=%s\\n", p ? p : "(none)", o ? "set" : "(none)");
	return 0;
}
"""


@case(timeout=120)
def test_exec_sanitizer_builds(t):
    """A traced program execs a sanitizer's build (a test script running
    ASan binaries under record --follow-exec): the exec'd program runs
    without the tracer, to its end, and one line says why (before: ASan
    stopped it at start, "runtime does not come first", exit 1, and record
    said nothing).  Its environment loses the library's word of LD_PRELOAD
    (another library there stays) and HEAPTRAIL_OPTIONS; the shell that
    exec'd it keeps its trace.  An exec with nothing after it leaves no
    main trace: record says the program exec'd one that was not traced and
    names the traces of the images before."""
    exe = sanitizer_build(t, SAN_ENV_PROG, "address", "san_env")
    note = ("heaptrail: note: %s is built with AddressSanitizer (libasan.so" % exe)
    out = t.path("sh.ht")
    r = t.run([t.heaptrail, "record", "--follow-exec", "-o", out, "--", "sh", "-c",
               exe + "; echo after"], check_rc=0)
    eq(r.stdout, "LD_PRELOAD=(none) HEAPTRAIL_OPTIONS=(none)\nafter\n",
       "the ASan program ran to its end:\n" + r.describe())
    eq(r.stderr.count(note), 1, "the note:\n" + r.stderr)
    check("runs without the tracer" in r.stderr, r.stderr)
    check(t.stats(out)["events"] > 0, "the shell's trace")
    # another library in LD_PRELOAD stays (ASan told not to mind it)
    libz = [p for p in ("/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1")
            if os.path.exists(p)]
    if libz:
        r = t.run([t.heaptrail, "record", "--follow-exec", "-o", t.path("z.ht"), "--", "sh",
                   "-c", exe], env={"LD_PRELOAD": libz[0],
                                    "ASAN_OPTIONS": "verify_asan_link_order=0"}, check_rc=0)
        eq(r.stdout, "LD_PRELOAD=%s HEAPTRAIL_OPTIONS=(none)\n" % libz[0],
           "the other preloaded library:\n" + r.describe())
    # posix_spawn and posix_spawnp, which exec inside glibc (python3's os.posix_spawn)
    py = sys.executable
    for fn, prog in (("posix_spawn", exe), ("posix_spawnp", os.path.basename(exe))):
        code = ("import os; pid = os.%s(%r, [%r], dict(os.environ, PATH=%r)); "
                "print(os.waitpid(pid, 0)[1], flush=True)"
                % (fn, prog, prog, os.path.dirname(exe) + ":" + os.environ.get("PATH", "")))
        r = t.run([t.heaptrail, "record", "--follow-exec", "-o", t.path(fn + ".ht"), "--", py,
                   "-c", code], env={"PATH": os.path.dirname(exe) + ":" +
                                     os.environ.get("PATH", "")}, check_rc=0)
        eq(r.stdout, "LD_PRELOAD=(none) HEAPTRAIL_OPTIONS=(none)\n0\n",
           "%s: the ASan program ran to its end:\n%s" % (fn, r.describe()))
        eq(r.stderr.count(note.replace(exe, prog if fn == "posix_spawn" else exe)), 1,
           "%s: the note:\n%s" % (fn, r.stderr))
    out = t.path("exec.ht")
    r = t.run([t.heaptrail, "record", "--follow-exec", "-o", out, "--", "sh", "-c",
               "exec " + exe], check_rc=0)
    eq(r.stdout, "LD_PRELOAD=(none) HEAPTRAIL_OPTIONS=(none)\n", r.describe())
    check("sh exec'd a program that was not traced, so nothing was written to %s; the traces "
          "of its images before that exec are %s.exec1" % (out, out) in r.stderr, r.stderr)
    check(t.stats(out + ".exec1")["events"] > 0, "the shell's own trace")
