"""The eBPF probe commands where they went wrong (second round): file
names longer than the 63 bytes kept, and mmapsnoop's MAP_32BIT.  Each case compiles a small C
program when it needs one (gcc), and skips where BPF cannot be used.
Label "probes"."""

import htlib
from htlib import case, check, eq
from htprobe import need_bpf, probe_json

PAGE = 4096


def compile_c(t, name, source):
    """htlib.compile_c with frame pointers."""
    return htlib.compile_c(t, name, source, ("-fno-omit-frame-pointer",))


# Maps the file argv[1] (private, writable) and writes a byte of each of its
# first argv[2] pages: one fault each (copy on write, no fault-around); then
# the same for argv[3], argv[4] ...; after the pairs, "- PROGRAM ARGS..."
# execs PROGRAM.
TOUCH_C = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	int i = 1;
	for (; i + 1 < argc && argv[i][0] != '-'; i += 2) {
		int fd = open(argv[i], O_RDONLY), n = atoi(argv[i + 1]);
		char *p = mmap(0, n * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		if (fd < 0 || p == MAP_FAILED)
			return 1;
		for (int k = 0; k < n; k++)
			p[k * 4096] = 1;
		munmap(p, n * 4096);
		close(fd);
	}
	if (i + 1 < argc)
		execv(argv[i + 1], argv + i + 1);
	return 0;
}
"""


def data_file(t, name, pages):
    path = t.path(name)
    with open(path, "wb") as f:
        f.write(b"\1" * pages * PAGE)
    return path


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_long_file_names(t):
    """File names longer than the 63 bytes kept keep their head and tail
    around "...": two files whose 90-byte names differ in their last bytes
    only are two rows (before: one row of both files' faults, the name cut
    at 63 bytes with no mark), and mmapsnoop names them the same way."""
    need_bpf(t, "ffaults")
    exe = compile_c(t, "touch", TOUCH_C)
    base = "L" * 82
    one = data_file(t, base + "_one.dat", 10)
    two = data_file(t, base + "_two.dat", 20)
    cmd = "%s %s 10 %s 20" % (exe, one, two)
    doc, r = probe_json(t, ["ffaults", "--json", "-n", "0", "-c", cmd])
    files = {f["file"]: f["faults"] for f in doc["intervals"][-1]["files"]}
    want_one = "L" * 30 + "..." + "L" * 22 + "_one.dat"
    want_two = "L" * 30 + "..." + "L" * 22 + "_two.dat"
    eq(files.get(want_one), 10, "faults on %s: %r" % (want_one, files))
    eq(files.get(want_two), 20, "faults on %s: %r" % (want_two, files))
    doc, r = probe_json(t, ["mmapsnoop", "--json", "-c", cmd])
    named = [e.get("file") for e in doc["events"] if e.get("call") == "mmap"
             and e.get("size") in (10 * PAGE, 20 * PAGE)]
    eq(named, [want_one, want_two], "mmapsnoop's files")
    check(all(len(n) == 63 for n in named), "names of 63 bytes: %r" % named)


# One mmap of 4 pages of private anonymous memory below 2 GiB (MAP_32BIT).
MAP32_C = r"""
#define _GNU_SOURCE
#include <sys/mman.h>
int main(void)
{
	char *p = mmap(0, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT,
		       -1, 0);
	return p == MAP_FAILED;
}
"""


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_mmapsnoop_map_32bit(t):
    """mmapsnoop decodes MAP_32BIT as 32BIT, in the text and the JSON
    (before: PRIVATE|ANONYMOUS|0x40, which also broke the columns)."""
    need_bpf(t, "mmapsnoop")
    exe = compile_c(t, "map32", MAP32_C)
    doc, r = probe_json(t, ["mmapsnoop", "--json", "-c", exe])
    ours = [e for e in doc["events"] if e.get("call") == "mmap" and e.get("size") == 4 * PAGE]
    eq(len(ours), 1, "the program's mmap: %r" % doc["events"][-3:])
    eq(ours[0]["flags_text"], "PRIVATE|ANONYMOUS|32BIT", "flags_text")
    r = t.run([t.heaptrail, "mmapsnoop", "-c", exe], timeout=60)
    eq(r.rc, 0, r.describe())
    lines = [l for l in r.stdout.splitlines() if " 16384 " in l and "mmap" in l]
    eq(len(lines), 1, "the program's mmap line: %s" % r.stdout)
    check("PRIVATE|ANONYMOUS|32BIT " in lines[0] and "|0x40" not in lines[0],
          "flags decoded: %s" % lines[0])
