"""`record --stacks` and the stack analyzers, each on a program written for
the case: the first stack of a thread with a small stack, the caller of a
frame a signal interrupted, the range of `--stacks=DEPTH` (and of every
number option), `top`'s table of the biggest single allocations beyond 64
rows, `flamegraph --title`, and a thread's first stack taken on an
alternate signal stack."""

import json
import os
import re
import shutil
import struct

from htlib import case, check, compile_c, eq

# A thread with PTHREAD_STACK_MIN of stack puts X bytes on it (alloca),
# then allocates: the first heap call of the thread, and with --stacks
# its first stack, run with what is left.
SMALL_STACK_C = r"""
#include <alloca.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void *volatile sink;

__attribute__((noinline)) static void at(void)
{
	for (int i = 0; i < 1000; i++)
		free(malloc(i + 1));
	sink = malloc(4321);
}

__attribute__((noinline)) static void use(size_t x)
{
	char *p = alloca(x);
	memset(p, 0, x);
	sink = p;
	at();
	sink = p;
}

static void *th(void *a)
{
	use(strtoul(a, NULL, 0));
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, PTHREAD_STACK_MIN);
	pthread_t t;
	if (argc < 2 || pthread_create(&t, &at, th, argv[1]))
		return 9;
	pthread_join(t, NULL);
	return 0;
}
"""


@case(timeout=120, labels=("stacks",))
def test_stacks_small_thread_stack(t):
    """The first stack of a thread reads /proc/self/maps to learn the
    thread's stack; it read it into 4 KiB on the program's stack, and a
    thread with PTHREAD_STACK_MIN that runs untraced and under plain
    record with 6,600 bytes of its stack taken died of SIGSEGV with
    --stacks (headroom, by bisection: 8,752 bytes untraced, 7,534 under
    plain record, 5,671 with --stacks; now 7,534 with --stacks too).  The
    file is read in 256-byte pieces and parsed as it comes."""
    exe = compile_c(t, "smallstk", SMALL_STACK_C, ("-O1", "-pthread"))
    x = "6600"
    eq(t.run([exe, x]).rc, 0, "untraced")
    eq(t.run([t.heaptrail, "record", "-q", "-o", t.path("plain.ht"), "--", exe, x]).rc, 0,
       "under plain record")
    for how in ("auto", "dwarf"):
        out = t.path("stk-%s.ht" % how)
        r = t.run([t.heaptrail, "record", "-q", "--stacks", "--unwind=" + how, "-o", out, "--",
                   exe, x])
        eq(r.rc, 0, "record --stacks --unwind=%s (139: SIGSEGV):\n%s" % (how, r.describe()))
        # the thread's 4321 bytes, with their stack
        lk = json.loads(t.tool(["leaks", "--json", out]).stdout)
        gs = [g for g in lk["groups"] if g["bytes"] == 4321]
        eq(len(gs), 1, "--unwind=%s: one group of 4321 bytes" % how)
        eq([f["function"] for f in gs[0]["stack"]][:3], ["at", "use", "th"],
           "--unwind=%s: its stack" % how)


# main of the signal programs: SIGUSR1's handler on the alternate stack,
# and one thread that runs THREAD_FN (with argv[1] as its argument).
ONSTACK_MAIN = r"""
int main(int argc, char **argv)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t t;
	pthread_create(&t, NULL, THREAD_FN, argc > 1 ? argv[1] : NULL);
	pthread_join(t, NULL);
	return 0;
}
"""

# A handler that allocates, called by pthread_kill() at the KILL line of a
# thread (on the thread's stack, or with "alt" on an alternate signal
# stack), and a call at the NEXT line that allocates too.
SIGNAL_LINE_C = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void *volatile sink[3];

__attribute__((noinline)) static void handler(int s)
{
	(void)s;
	sink[0] = malloc(111);
}

__attribute__((noinline)) static void after(void)
{
	sink[1] = malloc(222);
}

__attribute__((noinline)) static void *signalled(void *alt)
{
	if (alt) {
		stack_t ss;
		memset(&ss, 0, sizeof(ss));
		ss.ss_size = 65536;
		ss.ss_sp = mmap(NULL, ss.ss_size, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		sigaltstack(&ss, NULL);
	}
	sink[2] = malloc(444); /* the thread's first stack, on its own stack */
	pthread_kill(pthread_self(), SIGUSR1); /* KILL */
	after(); /* NEXT */
	return NULL;
}

""" + ONSTACK_MAIN.replace("THREAD_FN", "signalled")


@case(timeout=120, labels=("stacks",))
def test_stacks_caller_of_interrupted_frame(t):
    """A handler's stack: the frame the signal interrupted (pthread_kill's)
    is taken as it is, one past its address; its caller is an ordinary
    return address.  libunwind says its cursor is a signal frame too, and
    the caller was recorded one past as well: named by the line after the
    call (NEXT instead of KILL) with every unwinder, --unwind=check
    agreeing with itself.  On the thread's stack (the walk, libunwind for
    the signal frame's stretch) and on an alternate signal stack
    (libunwind alone)."""
    exe = compile_c(t, "sigline", SIGNAL_LINE_C, ("-pthread",))
    lines = {}
    for no, text in enumerate(SIGNAL_LINE_C.splitlines(), 1):  # (line 1: the first newline)
        m = re.search(r"/\* (KILL|NEXT) \*/", text)
        if m:
            lines[m.group(1)] = no
    for stack in ("own", "alt"):
        for how in ("auto", "dwarf", "check"):
            what = "%s stack, --unwind=%s" % (stack, how)
            out = t.path("sig-%s-%s.ht" % (stack, how))
            r = t.run([t.heaptrail, "record", "-q", "--stacks", "--unwind=" + how, "-o", out,
                       "--", exe] + (["alt"] if stack == "alt" else []))
            eq(r.rc, 0, "record, %s:\n%s" % (what, r.describe()))
            if how == "check":
                check(re.search(r"unwind check: \d+ stacks, 0 differ", r.stderr),
                      "%s: the walks differ:\n%s" % (what, r.stderr))
            lk = json.loads(t.tool(["leaks", "--json", out]).stdout)
            stacks = {}
            for g in lk["groups"]:
                stacks[g["bytes"]] = g["stack"]
            check(111 in stacks and 222 in stacks, "%s: groups %s" % (what, sorted(stacks)))
            # the handler, the trampoline, pthread_kill (its inner frames,
            # in libc), then the caller at the KILL line
            fr = stacks[111]
            names = [f["function"] for f in fr]
            check("handler" in names and "signalled" in names,
                  "%s: the handler's stack: %s" % (what, names))
            check(names.index("signalled") >= names.index("handler") + 3,
                  "%s: the trampoline and pthread_kill between: %s" % (what, names))
            # the trampoline is named: the frame's address is its first
            # byte, not a return address (it was libc.so.6+0x...)
            eq(names[names.index("handler") + 1], "__restore_rt",
               "%s: the frame under the handler" % what)
            eq(fr[names.index("signalled")].get("line"), lines["KILL"],
               "%s: the line of pthread_kill's caller" % what)
            # (the next line's call, for comparison)
            eq([(f["function"], f.get("line")) for f in stacks[222][:2]][1],
               ("signalled", lines["NEXT"]), "%s: the line of after()'s caller" % what)
    # A libc with no symbol table but .dynsym and no debug file to be
    # found (Debian's, without libc6-dbg): the trampoline's code names it.
    trace = t.path("sig-own-auto.ht")
    libc_path = None
    with open("/proc/self/maps") as f:
        for line in f:
            if "/libc.so.6" in line:
                libc_path = line.split()[-1]
                break
    check(libc_path, "libc.so.6 in this process's maps")
    root = t.path("root")
    # (the trace names it /lib/... or /usr/lib/..., one a link to the other)
    plain = libc_path[4:] if libc_path.startswith("/usr/") else libc_path
    for where in (plain, "/usr" + plain):
        os.makedirs(root + os.path.dirname(where))
        r = t.run(["objcopy", "--strip-all", "--remove-section=.note.gnu.build-id",
                   "--remove-section=.gnu_debuglink", libc_path, root + where])
        eq(r.rc, 0, "objcopy of libc:\n%s" % r.describe())
    os.makedirs(root + os.path.dirname(exe))
    shutil.copy(exe, root + exe)
    r = t.tool(["leaks", "--json", "--sysroot", root, trace])
    eq(r.rc, 0, "leaks --sysroot:\n%s" % r.describe())
    lk = json.loads(r.stdout)
    names = [f["function"] for g in lk["groups"] if g["bytes"] == 111 for f in g["stack"]]
    eq(names[names.index("handler") + 1], "__restore_rt",
       "a stripped libc: the frame under the handler: %s" % names)


@case(labels=("analyzers",))
def test_option_numbers_out_of_range(t):
    """A number option's value is an int: one outside int's range was cut
    to one (--stacks=4294967297 recorded stacks of 1 frame,
    --stacks=18446744073709551615 was taken, compact --level=4294967299
    compacted at level 3), and --stacks=-1 was --stacks alone (64 frames).
    Refused now, exit 2, one line saying why; --stacks alone keeps its 64
    frames, and compact --fast keeps its negative levels."""
    exe = compile_c(t, "one", "#include <stdlib.h>\nvoid *volatile p;\n"
                    "int main(void) { p = malloc(12); return 0; }\n")
    for value, msg in (
            ("-1", "--stacks: '-1' is negative: give a number, or --stacks alone for its "
                   "default"),
            ("-2147483648", "--stacks: '-2147483648' is negative: give a number, or --stacks "
                            "alone for its default"),
            ("4294967297", "--stacks: '4294967297' is out of range (at most 2147483647)"),
            ("18446744073709551615",
             "--stacks: '18446744073709551615' is out of range (at most 2147483647)")):
        out = t.path("d.ht")
        r = t.run([t.heaptrail, "record", "-q", "--stacks=" + value, "-o", out, "--", exe])
        eq(r.rc, 2, "--stacks=%s: exit status" % value)
        eq(r.stderr, "heaptrail: error: %s\n" % msg, "--stacks=%s: the message" % value)
    # given alone: the default depth, recorded with a stack
    out = t.path("alone.ht")
    r = t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", exe])
    eq(r.rc, 0, "--stacks alone:\n" + r.describe())
    lk = json.loads(t.tool(["leaks", "--json", out]).stdout)
    g = [g for g in lk["groups"] if g["bytes"] == 12]
    eq(len(g), 1, "--stacks alone: the 12 bytes")
    eq(g[0]["stack"][0]["function"], "main", "--stacks alone: the 12 bytes' stack")
    # an int option (not an optional one): int's range, negative ones kept;
    # the bound it passed, not a range that names numbers the option
    # refuses (replay --repeat's counts of 1 and up)
    r = t.tool(["compact", "--level=4294967299", out])
    eq((r.rc, r.stderr), (2, "heaptrail: error: --level: '4294967299' is out of range "
                             "(at most 2147483647)\n"), "compact --level=4294967299")
    r = t.tool(["compact", "--level=-4294967299", out])
    eq((r.rc, r.stderr), (2, "heaptrail: error: --level: '-4294967299' is out of range "
                             "(at least -2147483647)\n"), "compact --level=-4294967299")
    r = t.tool(["compact", "-q", "--fast", "--level=-7", out])
    eq(r.rc, 0, "compact --fast --level=-7:\n" + r.describe())


# N allocations of 1000 + i bytes (i = 0 .. N-1), each freed at once.
MANY_SIZES_C = r"""
#include <stdlib.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;
	for (int i = 0; i < n; i++)
		free(malloc(1000 + (size_t)i));
	/* three of one size, at three times: the earliest two are kept */
	void *volatile a = malloc(50000), *volatile b = malloc(50000), *volatile c = malloc(50000);
	free(a);
	free(b);
	free(c);
	return 0;
}
"""


def top_largest(t, trace, n):
    r = t.tool(["top", "--json", "-n", str(n), trace])
    eq(r.rc, 0, "top --json -n %d:\n%s" % (n, r.describe()))
    return json.loads(r.stdout)


@case(timeout=120, labels=("analyzers",))
def test_top_largest_beyond_64(t):
    """top's biggest single allocations kept 64 of them whatever -n asked:
    `-n 0` ("all") and `-n 100` stopped at 64 rows without a word.  They
    are as many as asked now, 10,000 at most, and the table says how many
    it left out (text and JSON's largest_left_out); of allocations of one
    size, the earliest come first and are the ones kept."""
    exe = compile_c(t, "sizes", MANY_SIZES_C)
    tr = t.path("m.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", tr, "--", exe, "100"], check_rc=0)
    # 103 allocations: 3 of 50000 bytes, then 1099 down to 1000 bytes
    every = [50000] * 3 + list(range(1099, 999, -1))
    for n in (0, 100, 70):
        d = top_largest(t, tr, n)
        want = every[:n] if n else every
        eq([x["bytes"] for x in d["largest"]], want, "-n %d: the largest" % n)
        eq(d["largest_left_out"], 0, "-n %d: left out" % n)
    d = top_largest(t, tr, 2)
    eq([x["bytes"] for x in d["largest"]], [50000, 50000], "-n 2")
    times = [x["time_ns"] for x in top_largest(t, tr, 3)["largest"]]
    eq([x["time_ns"] for x in d["largest"]], times[:2], "-n 2: the earliest two of one size")
    check(times == sorted(times), "-n 3: the three of one size in time order: %s" % times)
    r = t.tool(["top", "-n", "0", tr])
    eq(r.rc, 0, "top -n 0:\n" + r.describe())
    big = r.stdout.split("biggest single allocations:\n", 1)[1].splitlines()
    eq(len(big), 103, "top -n 0: rows of the biggest single allocations")
    # more than the table keeps
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", t.path("b.ht"), "--", exe, "10050"],
          check_rc=0)
    d = top_largest(t, t.path("b.ht"), 0)
    eq(len(d["largest"]), 10000, "10,053 allocations, -n 0: rows kept")
    eq(d["largest"][-1]["bytes"], 1000 + 10050 - 9997, "the smallest kept")
    eq(d["largest_left_out"], 53, "10,053 allocations, -n 0: left out")
    r = t.tool(["top", "-n", "0", t.path("b.ht")])
    eq(r.stdout.splitlines()[-1],
       "  (53 smaller allocations left out: the table keeps the 10000 biggest)",
       "top -n 0: the last line")
    eq(top_largest(t, t.path("b.ht"), 10)["largest_left_out"], 0, "-n 10: nothing left out")


@case(labels=("analyzers",))
def test_flamegraph_title_as_given(t):
    """flamegraph --title TEXT is the SVG's title as given, as diff's is;
    the command was added to it ("TEXT: ./prog ARGS").  Without --title:
    the metric and the command, as before."""
    exe = compile_c(t, "sizes", MANY_SIZES_C)
    tr = t.path("m.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", tr, "--", exe, "3"], check_rc=0)
    svg = t.path("f.svg")

    def title(args):
        r = t.tool(["flamegraph", "-q", "-o", svg] + args + [tr])
        eq(r.rc, 0, "flamegraph %s:\n%s" % (" ".join(args), r.describe()))
        with open(svg) as f:
            m = re.search(r'<text class="title"[^>]*>([^<]*)</text>', f.read())
        check(m, "flamegraph %s: no title in the SVG" % " ".join(args))
        return m.group(1)

    eq(title(["--title", "Heap of A & B"]), "Heap of A &amp; B", "--title")
    eq(title(["--title", "Heap of A & B", "--reverse"]), "Heap of A &amp; B",
       "--title --reverse")
    eq(title([]), "Bytes allocated: %s 3" % exe, "the default title")


# A thread whose first heap call is in a signal handler on an alternate
# stack, then makes 600 calls on its own stack.
ALT_FIRST_C = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *volatile sink;
static char alt[65536] __attribute__((aligned(64)));

static void handler(int s)
{
	(void)s;
	sink = malloc(111); /* the thread's first stack: on the alternate one */
	free(sink);
}

static void *th(void *a)
{
	(void)a;
	stack_t ss; /* (static: an mmap would be the thread's first call) */
	memset(&ss, 0, sizeof(ss));
	ss.ss_size = sizeof(alt);
	ss.ss_sp = alt;
	sigaltstack(&ss, NULL);
	pthread_kill(pthread_self(), SIGUSR1);
	for (int i = 0; i < 600; i++) {
		sink = malloc(i + 1);
		free(sink);
	}
	return NULL;
}

""" + ONSTACK_MAIN.replace("THREAD_FN", "th")


@case(timeout=120, labels=("stacks",))
def test_stacks_first_on_alternate_stack(t):
    """The first stack of a thread taken in a handler on an alternate
    signal stack: the recorder took that stack's bounds as the thread's, so
    the thread's 600 later stacks, on its own stack, all went through
    libunwind instead of the walk (slower), and the walk of the handler's
    own stack, within those bounds, differed from libunwind's.
    --unwind=check counts the stacks the walk took (checked against
    libunwind): the 600 must be among them, and all agree."""
    exe = compile_c(t, "altfirst", ALT_FIRST_C, ("-pthread",))
    out = t.path("alt.ht")
    r = t.run([t.heaptrail, "record", "-q", "--stacks", "--unwind=check", "-o", out, "--", exe])
    eq(r.rc, 0, "record:\n" + r.describe())
    m = re.search(r"unwind check: (\d+) stacks, (\d+) differ", r.stderr)
    check(m, "no unwind check summary:\n" + r.stderr)
    check(int(m.group(1)) >= 600, "the walk took %s stacks, not the thread's 600:\n%s"
          % (m.group(1), r.stderr))
    eq(int(m.group(2)), 0, "stacks that differ from libunwind's:\n" + r.stderr)


# rec(N) recurses N deep and leaks 77 bytes at the bottom: N + 4 frames
# (rec's, main, __libc_start_call_main, __libc_start_main, _start).
DEEP_C = r"""
#include <stdlib.h>
void *volatile sink;
__attribute__((noinline)) int rec(int d)
{
	if (d == 0) {
		sink = malloc(77);
		return 1;
	}
	int r = rec(d - 1);
	sink = (void *)(long)r;
	return r + 1;
}
int main(int argc, char **argv)
{
	(void)argc;
	rec(atoi(argv[1]));
	return 0;
}
"""


@case(timeout=120, labels=("stacks", "analyzers"))
def test_stacks_depth_reached_said(t):
    """A stack cut at the --stacks depth is said: rec() 300 deep under
    --stacks (64) and --stacks=16, leaks, top, flamegraph and report each
    print one note naming the trace and the depth (diff one a trace; before, the 64 frames of rec came
    with no word, and a flame graph rooted them apart from main); 40
    deep (44 frames) under the default, none; -q, none.  The trace's
    header carries the depth (stack_depth)."""
    exe = compile_c(t, "deep", DEEP_C, ("-O2",))
    want = ("heaptrail: note: %s: 1 stack reached the recorder's depth of %d frames: callers "
            "beyond it, if any, were not recorded, so it may reach neither main nor a "
            "thread's start (a flame graph shows it as a root of its own); record with a "
            "larger --stacks (at most 256) for more")
    for depth, opt in ((64, "--stacks"), (16, "--stacks=16")):
        out = t.path("d%d.ht" % depth)
        t.run([t.heaptrail, "record", "-q", opt, "-o", out, "--", exe, "300"], check_rc=0)
        with open(out, "rb") as f:
            hdr = f.read(280)
        eq(struct.unpack_from("<I", hdr, 128)[0], depth, "the header's stack_depth")
        for cmd in (["leaks"], ["top"], ["flamegraph", "--folded", "-o", t.path("f.txt")],
                    ["report", "-o", t.path("r.html")]):
            r = t.tool(cmd + [out])
            eq(r.rc, 0, r.describe())
            eq([l for l in r.stderr.splitlines() if "stack" in l and "note" in l],
               [want % (out, depth)], "%s on --stacks=%d" % (cmd[0], depth))
        folded = open(t.path("f.txt")).read().splitlines()
        check(any(l.startswith("rec;") for l in folded), "a root of rec's own:\n%s" % folded[:5])
        r = t.tool(["leaks", "-q", out])
        eq([l for l in r.stderr.splitlines() if "note" in l], [], "leaks -q")
    out = t.path("short.ht")
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", out, "--", exe, "40"], check_rc=0)
    r = t.tool(["leaks", out])
    eq([l for l in r.stderr.splitlines() if "note" in l], [], "44 frames under 64: no note")
    check(re.search(r"^\s+main ", r.stdout, re.M), "the short stack reaches main:\n" + r.stdout)


@case(timeout=120)
def test_stacks_first_in_many_threads(t):
    """The process's first stacks taken in several threads at once
    (tests/progs/stackrace.c, 4 threads from a barrier, sampled so that
    main's few blocks are not; HEAPTRAIL_SCAN_DELAY_US holds the first
    read of the modules open 30 ms, as a slow one would be): every stack of
    site() is whole, __clone3;start_thread;worker;site.  Before (probe V,
    1 run in 15 without the delay, every run with it): a thread whose
    first stack came while another thread read the modules had no module
    for a return address, kept the frame-chain guess it made for it, and
    every later stack of the thread through it ended there; and a thread
    could take the library's own frames for the program's, the library's
    extent being read with the modules."""
    for run in range(2):
        out = t.path("race%d.ht" % run)
        r = t.run([t.heaptrail, "record", "-q", "--stacks", "--sample-bytes", "1M", "-o", out,
                   "--", t.prog("stackrace"), "4"], env={"HEAPTRAIL_SCAN_DELAY_US": "30000"})
        eq(r.rc, 0, r.describe())
        fg = t.tool(["flamegraph", "-q", "--folded", out])
        eq(fg.rc, 0, fg.describe())
        stacks = [l.rsplit(" ", 1)[0] for l in fg.stdout.splitlines() if "site" in l]
        check(stacks and all(s == "__clone3;start_thread;worker;site" for s in stacks),
              "run %d: site's stacks:\n%s" % (run, fg.stdout))
