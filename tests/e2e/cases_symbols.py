"""The symbol index (src/symbols/symindex.c, issue 21): the ELF symbol of
an address found by a binary search in a table sorted once per module,
instead of libdwfl's scan of the whole symbol table for each address.
tests/tools/symcheck.c asks both for the symbol of addresses around the
start and end of the module's symbols and spread over the module; every
answer must be the same, name and offset, on Debian's own binaries
(libc with its separate debug file when installed, libstdc++, the dynamic
loader, gcc's cc1 with its 29k exported symbols, python3), a test program,
and a library stripped of its symbol table whose symbols are in a separate
debug file found through its .gnu_debuglink."""

import glob
import os
import shutil

from htlib import case, check, eq, skip, which

SYSTEM = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libstdc++.so.6",
          "/lib64/ld-linux-x86-64.so.2", "/usr/bin/python3"]


def symcheck(t, files):
    r = t.run([t.prog("symcheck"), "-n", "3000"] + files, timeout=600)
    for line in r.stdout.splitlines():
        t.note(line)
    eq(r.rc, 0, "symcheck:\n" + r.describe())
    lines = [l for l in r.stdout.splitlines() if " addresses, " in l]
    eq(len(lines), len(files), "one line per file:\n" + r.stdout)
    for l in lines:
        check(l.split(" addresses, ")[1].startswith("0 differ"), l)
        check(int(l.split(" symbols, ")[1].split()[0]) > 500, "too few addresses: " + l)


@case(timeout=600, labels=("analyzers",))
def test_symbol_index_debian(t):
    """Debian's libraries and programs: the index and libdwfl agree on
    every address."""
    files = [os.path.realpath(f) for f in SYSTEM if os.path.exists(f)]
    files += sorted(glob.glob("/usr/lib/gcc/x86_64-linux-gnu/*/cc1"))[-1:]
    if len(files) < 3:
        skip("too few of %s installed" % ", ".join(SYSTEM))
    symcheck(t, files)


@case(timeout=300, labels=("analyzers",))
def test_symbol_index_stripped(t):
    """A test program, and a library stripped of its symbol table whose
    symbols libdwfl finds in a separate debug file: the same answers."""
    objcopy = which("objcopy")
    if not objcopy:
        skip("objcopy (binutils) is not installed")
    lib = t.path("libleak.so")
    shutil.copy(t.prog("libleaklib.so"), lib)
    dbg = t.path("libleak.so.debug")
    t.run([objcopy, "--only-keep-debug", lib, dbg], check_rc=0)
    t.run([objcopy, "--strip-all", "--add-gnu-debuglink=" + dbg, lib], check_rc=0)
    r = t.run(["nm", lib])
    check("no symbols" in r.stderr, "the library still has its symbol table:\n" + r.describe())
    symcheck(t, [t.prog("leaky"), t.prog("threads"), lib, t.prog("libtpdl.so")])
