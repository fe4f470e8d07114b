"""Symbols where they fell short of valgrind's on real builds: a
--debug-dir given relative, missing, or holding the debug file itself
(objcopy --only-keep-debug prog prog.debug), and C++ functions whose DWARF
names them short (libstdc++'s templates instantiated with lambdas)."""
import json
import os
import re

from htlib import case, check, compile_c, eq, which, skip

LEAK_C = r"""
#include <stdlib.h>
static void *volatile sink;
__attribute__((noinline)) static void leak_here(void)
{
	sink = malloc(123); /* LEAK */
}
int main(void)
{
	leak_here();
	return 0;
}
"""


def leak_frame(t, trace, args):
    r = t.tool(["leaks", "--json"] + args + [trace])
    eq(r.rc, 0, "leaks %s:\n%s" % (args, r.describe()))
    g = [g for g in json.loads(r.stdout)["groups"] if g["bytes"] == 123]
    eq(len(g), 1, "the leak (%s)" % args)
    f = g[0]["stack"][0]
    return (f["function"], f["file"] and os.path.basename(f["file"]), f["line"]), r.stderr


@case(timeout=120, labels=("analyzers",))
def test_debug_dir_relative_flat_missing(t):
    """A stripped program whose debug file is in dbg/ (its debuglink name,
    directly in the directory): --debug-dir dbg (relative) and its absolute
    path both give leak_here's file and line, as the unstripped program
    has them (before: neither: libdw took the relative entry as relative
    to the module's directory, and never looked for the file directly in
    the directory); another build's debug file of the same name there is
    not taken; a missing directory is said in one warning."""
    if not which("objcopy") or not which("strip"):
        skip("needs objcopy and strip (binutils)")
    exe = compile_c(t, "p", LEAK_C)
    line = next(i + 1 for i, l in enumerate(LEAK_C.splitlines()) if "LEAK" in l)
    full = t.path("full.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", full, "--", exe], check_rc=0)
    want, _ = leak_frame(t, full, [])
    eq(want, ("leak_here", "p.c", line), "the unstripped program's frame")
    os.makedirs(t.path("dbg"))
    t.run(["objcopy", "--only-keep-debug", exe, t.path("dbg", "p.debug")], check_rc=0)
    t.run(["strip", "-g", exe], check_rc=0)
    t.run(["objcopy", "--add-gnu-debuglink=" + t.path("dbg", "p.debug"), exe], check_rc=0)
    out = t.path("stripped.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", exe], check_rc=0)
    got, _ = leak_frame(t, out, [])
    eq(got, ("leak_here", None, 0), "stripped, no --debug-dir: the symbol only")
    for d in ("dbg", t.path("dbg"), "./dbg/"):
        got, err = leak_frame(t, out, ["--debug-dir", d])
        eq(got, want, "--debug-dir %s" % d)
        eq(err, "", "--debug-dir %s: stderr" % d)
    r = t.tool(["top", "--debug-dir", "dbg", out])
    check("leak_here (p.c:%d)" % line in r.stdout, "top --debug-dir dbg:\n" + r.stdout)
    # another build's p.debug (another build-id) is not taken for this one
    other = compile_c(t, "other", LEAK_C.replace("123", "124"))
    os.makedirs(t.path("wrong"))
    t.run(["objcopy", "--only-keep-debug", other, t.path("wrong", "p.debug")], check_rc=0)
    got, _ = leak_frame(t, out, ["--debug-dir", "wrong"])
    eq(got, ("leak_here", None, 0), "a debug file of another build")
    got, err = leak_frame(t, out, ["--debug-dir", "nothere"])
    eq(got, ("leak_here", None, 0), "a missing --debug-dir")
    eq(err.splitlines(), ["heaptrail: warning: --debug-dir nothere: No such file or directory: "
                          "no debug files are looked for there"], "a missing --debug-dir: stderr")
    got, err = leak_frame(t, out, ["--debug-dir", exe])
    check("--debug-dir %s: Not a directory" % exe in err, "a file as --debug-dir:\n" + err)


LAMBDAS_CPP = r"""
#include <cstdlib>
#include <functional>
#include <thread>
static void *volatile sink;
int main()
{
	std::thread th([] { sink = malloc(111); });
	th.join();
	std::function<void()> f = [] { sink = malloc(222); };
	f();
	std::function<void(int)> g = [](int n) { sink = malloc(n); };
	g(333);
	return 0;
}
"""


@case(timeout=120, labels=("analyzers",))
def test_cxx_short_dwarf_names(t):
    """libstdc++'s templates instantiated with lambdas have no linkage name
    in GCC's DWARF, only a short name (`_M_invoke`, `__invoke_impl<...>`):
    their frames are named from the ELF symbol, whole, as valgrind names
    them (std::_Function_handler<void (), main::{lambda()#2}>::_M_invoke
    ...), so that the two std::function handlers differ; C frames and
    the lambdas' own keep their names."""
    exe = compile_c(t, "lambdas", LAMBDAS_CPP, ("-pthread", "-fno-omit-frame-pointer"), cxx=True)
    out = t.path("l.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", exe], check_rc=0)
    r = t.tool(["leaks", "--json", out])
    eq(r.rc, 0, r.describe())
    stacks = {g["bytes"]: [f["function"] for f in g["stack"]]
              for g in json.loads(r.stdout)["groups"] if g["bytes"] in (111, 222, 333)}
    eq(sorted(stacks), [111, 222, 333], "the three leaks")
    eq(stacks[222][0], "main::{lambda()#2}::operator()() const", "the lambda's own frame")
    check("std::_Function_handler<void (), main::{lambda()#2}>::_M_invoke(std::_Any_data const&)"
          in stacks[222], "the std::function<void()> handler: %r" % stacks[222])
    check("std::_Function_handler<void (int), main::{lambda(int)#3}>::_M_invoke("
          "std::_Any_data const&, int&&)" in stacks[333],
          "the std::function<void(int)> handler: %r" % stacks[333])
    check(any(re.match(r"void std::thread::_Invoker<std::tuple<main::\{lambda\(\)#1\}> >::"
                       r"_M_invoke<0ul>\(", f or "") for f in stacks[111]),
          "the thread's invoker: %r" % stacks[111])
    for b, fs in stacks.items():
        check("_M_invoke" not in fs and "_M_run" not in fs, "%d: a bare short name: %r" % (b, fs))
    check(stacks[111][-1] in ("clone3", "clone", "__clone3", "__clone")
          or "start_thread" in stacks[111], "the thread's bottom frames: %r" % stacks[111])
    r = t.tool(["top", "--by", "function", "--json", out])
    names = [e["function"][0]["function"] for e in json.loads(r.stdout)["calls"]["entries"]]
    check(len([n for n in names if (n or "").startswith("main::{lambda")]) == 3,
          "three lambdas, three rows: %r" % names)
