"""One JSON escaper and one HTML/XML escaper (src/common/json.c,
src/common/markup.c; docs/ARCHITECTURE.md): whatever bytes a symbol or a
command line holds, every JSON output parses with a strict JSON parser as
UTF-8, and every SVG as XML.  The program's allocating function is
renamed in its symbol table to bytes that are not UTF-8 (0xff), markup
characters (< & ") and a control character (0x01); its argument holds
0xfe 0xff.  A byte that is not UTF-8 reads back as its Latin-1 character;
the control character is \\u0001 in JSON and left out of XML."""

import json
import os
import xml.etree.ElementTree as ET

from htlib import case, check, eq, skip, which

SRC = r"""
#include <stdio.h>
#include <stdlib.h>
volatile void *sink;
__attribute__((noinline)) void *leak_here(size_t n)
{
	void *p = malloc(n);
	sink = p;
	return p;
}
int main(void)
{
	for (int i = 0; i < 5; i++)
		leak_here(100);
	return 0;
}
"""

RAW_NAME = b'leak\xff<&"\x01here'
JSON_NAME = 'leak\u00ff<&"\u0001here'  # what a JSON reader must get back
XML_NAME = 'leak\u00ff<&"here'         # XML 1.0 has no U+0001
RAW_ARG = b'arg\xfe\xff"<>'


def weird_trace(t):
    gcc, objcopy = which("gcc"), which("objcopy")
    if not gcc or not objcopy:
        skip("needs gcc and objcopy (scripts/deps.sh test)")
    src = t.path("w.c")
    with open(src, "w") as f:
        f.write(SRC)
    plain, prog = t.path("plain"), t.path("weird")
    t.run([gcc, "-O1", "-fno-omit-frame-pointer", "-o", plain, src], check_rc=0)
    t.run([objcopy.encode(), b"--redefine-sym", b"leak_here=" + RAW_NAME,
           plain.encode(), prog.encode()], check_rc=0)
    out = t.path("w.ht")
    r = t.run([t.heaptrail.encode(), b"record", b"-q", b"--stacks", b"-o", out.encode(),
               b"--", prog.encode(), RAW_ARG])
    eq(r.rc, 0, "record:\n" + r.describe())
    return out


def strict_json(t, args, what):
    r = t.run([t.heaptrail] + args)
    eq(r.rc, 0, "%s:\n%s" % (what, r.describe()))
    try:
        return json.loads(r.out.decode("utf-8"))  # strict: invalid UTF-8 fails here
    except (UnicodeDecodeError, ValueError) as e:
        raise AssertionError("%s: not valid JSON in UTF-8: %s\n%r" % (what, e, r.out[:400]))


def strings_in(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield k
            yield from strings_in(x)
    elif isinstance(v, list):
        for x in v:
            yield from strings_in(x)


@case(labels=("analyzers",))
def test_json_any_bytes(t):
    """stats, top, leaks, diff, events, heap, timeline and dump --json and
    export -f perfetto of a trace whose symbol and command line hold bytes
    that are not UTF-8: strict JSON, with the function's and the
    argument's bytes read back as Latin-1."""
    out = weird_trace(t)
    arg = RAW_ARG.decode("latin-1")
    s = strict_json(t, ["stats", "--json", out], "stats --json")
    check(s["command"].endswith(" " + arg), "stats: command %r" % s["command"])
    for args in (["top", "--json", out], ["leaks", "--json", out]):
        j = strict_json(t, args, " ".join(args[:2]))
        check(JSON_NAME in set(strings_in(j)),
              "%s: no function %r among its strings" % (args[0], JSON_NAME))
    p = strict_json(t, ["export", "-f", "perfetto", out], "export -f perfetto")
    check(any(s.endswith(arg) for s in strings_in(p)), "perfetto: no command line with %r" % arg)
    d = strict_json(t, ["diff", "--json", out, out], "diff --json")
    check(JSON_NAME in set(strings_in(d)), "diff: no function %r among its strings" % JSON_NAME)
    for args in (["events", "--json", out], ["heap", "--json", out],
                 ["timeline", "--json", "-o", "-", out]):
        strict_json(t, args, " ".join(args[:2]))
    r = t.run([t.heaptrail, "dump", "--json", out])
    eq(r.rc, 0, "dump --json:\n" + r.describe())
    for line in r.out.splitlines():
        try:
            json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise AssertionError("dump --json: not valid JSON in UTF-8: %s\n%r" % (e, line[:400]))


@case(labels=("analyzers",))
def test_svg_any_bytes(t):
    """The flame graph and the timeline of the same trace are well-formed
    XML, and the flame graph names the function with its bytes as Latin-1,
    the markup characters as text and the control character left out."""
    out = weird_trace(t)
    for name, args in (("flamegraph", ["flamegraph", "-o", t.path("f.svg"), out]),
                       ("timeline", ["timeline", "-o", t.path("t.svg"), out])):
        r = t.run([t.heaptrail] + args)
        eq(r.rc, 0, "%s:\n%s" % (name, r.describe()))
        try:
            root = ET.parse(args[2]).getroot()
        except ET.ParseError as e:
            raise AssertionError("%s: not well-formed XML: %s" % (name, e))
        if name == "flamegraph":
            text = "".join(root.itertext())
            check(XML_NAME in text, "flamegraph: no %r in the SVG's text" % XML_NAME)
    check(os.path.getsize(t.path("f.svg")) > 0, "flamegraph: empty SVG")
