"""The eBPF probe commands where they went wrong (second round): file
names longer than the 63 bytes kept, and mmapsnoop's MAP_32BIT.  Each case compiles a small C
program when it needs one (gcc), and skips where BPF cannot be used.
Label "probes"."""

import os

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


# A thread named "pager" (pthread_setname_np) writes a byte of each of the
# first argv[2] pages of the file argv[1], mapped private and writable.
NAMED_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
static char **args;
static void *pager(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "pager");
	int fd = open(args[1], O_RDONLY), n = atoi(args[2]);
	char *p = mmap(0, n * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (fd < 0 || p == MAP_FAILED)
		exit(1);
	for (int k = 0; k < n; k++)
		p[k * 4096] = 1;
	return NULL;
}
int main(int argc, char **argv)
{
	pthread_t th;
	args = argv;
	if (argc < 3 || pthread_create(&th, NULL, pager, NULL))
		return 2;
	return pthread_join(th, NULL);
}
"""


@case(timeout=60, labels=("probes", "analyzers"))
def test_probes_ffaults_per_image(t):
    """Per process, the program a process execs has rows of its own, named
    after it: touch faults on common.dat (5 pages) and one.dat, then execs
    a copy of itself named "second", which faults on common.dat (7 pages)
    and two.dat.  Before, common.dat was one row of 12 faults under the
    first program's name, and two.dat was named after it too.  A row's name
    is the process's, not the faulting thread's ("pager")."""
    need_bpf(t, "ffaults")
    exe = compile_c(t, "touch", TOUCH_C)
    second = t.path("second")
    with open(exe, "rb") as f, open(second, "wb") as g:
        g.write(f.read())
    os.chmod(second, 0o755)
    common, one, two = (data_file(t, n, 32) for n in ("common.dat", "one.dat", "two.dat"))
    cmd = "%s %s 5 %s 10 - %s %s 7 %s 20" % (exe, common, one, second, common, two)
    doc, r = probe_json(t, ["ffaults", "--json", "-n", "0", "-c", cmd])
    rows = sorted((f["comm"], f["file"], f["faults"]) for f in doc["intervals"][-1]["files"]
                  if f["file"].endswith(".dat"))
    eq(rows, [("second", "common.dat", 7), ("second", "two.dat", 20),
              ("touch", "common.dat", 5), ("touch", "one.dat", 10)],
       "(comm, file, faults) of the data files")
    pids = {f["pid"] for f in doc["intervals"][-1]["files"]}
    eq(pids, {doc["pid"]}, "one process")
    r = t.run([t.heaptrail, "ffaults", "-n", "0", "-c", cmd])
    eq(r.rc, 0, r.describe())
    text = sorted(" ".join(l.split()[3:]) for l in r.stdout.splitlines()
                  if l.strip().endswith("common.dat"))
    eq(text, ["second common.dat", "touch common.dat"], "text rows:\n" + r.stdout)
    named = htlib.compile_c(t, "named", NAMED_C, ("-fno-omit-frame-pointer", "-pthread"))
    doc, r = probe_json(t, ["ffaults", "--json", "-n", "0", "-c", "%s %s 9" % (named, one)])
    rows = [(f["comm"], f["faults"]) for f in doc["intervals"][-1]["files"]
            if f["file"] == "one.dat"]
    eq(rows, [("named", 9)], "the pager thread's faults, under the process's name")
