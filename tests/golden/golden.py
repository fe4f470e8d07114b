"""The golden outputs (tests/golden/README.md): the commands of
commands.txt on the committed traces, their standard output compared byte
for byte with expected/NAME.  Used by tests/e2e/cases_golden.py and by
update.sh (python3 tests/golden/golden.py --update BUILD)."""

import gzip
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "expected")


def commands():
    """(name, trace, args) for each line of commands.txt, in order."""
    out = []
    with open(os.path.join(HERE, "commands.txt")) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, rest = line.partition(":")
            args = rest.split()
            trace = [a for a in args if a.endswith(".ht")][0].split(".")[0]
            out.append((name.strip(), trace, args))
    return out


def normalize(data):
    """Output bytes with the absolute path of tests/golden (a workload
    names the trace it was converted from) written @GOLDEN@, and gzip'ed
    output (the pprof export) decompressed, so that the expected files
    hold for any checkout and any zlib."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if data[:8] == b"HTWLOAD\n" and len(data) >= 128:
        # the SOURCE section (the last, docs/WORKLOAD.md) with its size
        off, size = struct.unpack_from("<QQ", data, 112)
        if off + size == len(data):
            src = data[off:].replace(HERE.encode(), b"@GOLDEN@")
            data = bytearray(data[:off] + src)
            struct.pack_into("<QQ", data, 112, off, len(src))
            return bytes(data)
    return data.replace(HERE.encode(), b"@GOLDEN@")


def expected(name):
    """The expected bytes of line NAME (a NAME ending in .gz is kept
    compressed: the report's pages are large)."""
    with open(os.path.join(EXPECTED, name), "rb") as f:
        data = f.read()
    return gzip.decompress(data) if name.endswith(".gz") else data


def run(heaptrail, args, empty):
    """(exit status, output bytes, stderr text) of heaptrail ARGS in
    tests/golden; the output is standard output, or with @OUT@ among ARGS
    the file the command wrote there."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out")
        argv = [heaptrail] + [empty if a == "@EMPTY@" else out if a == "@OUT@" else a
                              for a in args]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
        p = subprocess.run(argv, cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env, timeout=120)
        data = p.stdout
        if "@OUT@" in args:
            data = b""
            if os.path.exists(out):
                with open(out, "rb") as f:
                    data = normalize(f.read())
    return p.returncode, data, p.stderr.decode("utf-8", "replace")


def update(build):
    heaptrail = os.path.join(build, "heaptrail")
    os.makedirs(EXPECTED, exist_ok=True)
    with tempfile.TemporaryDirectory() as empty:
        for name, _, args in commands():
            rc, out, err = run(heaptrail, args, empty)
            if rc != 0:
                sys.exit("%s: heaptrail %s: exit %d\n%s" % (name, " ".join(args), rc, err))
            with open(os.path.join(EXPECTED, name), "wb") as f:
                f.write(gzip.compress(out, mtime=0) if name.endswith(".gz") else out)
            print("expected/%s: %d bytes" % (name, len(out)))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--update":
        sys.exit("usage: python3 tests/golden/golden.py --update BUILD")
    update(sys.argv[2])
