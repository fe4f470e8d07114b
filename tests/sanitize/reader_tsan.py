#!/usr/bin/env python3
"""The trace reader's decoding threads under ThreadSanitizer (issue 21,
item 3; src/trace/reader_par.c).

    tests/sanitize/reader_tsan.py BUILD TSAN_BUILD

BUILD is the normal build (its recorder and test programs record the
traces); TSAN_BUILD a tree configured with -DHEAPTRAIL_TSAN=ON in which the
target `heaptrail` is built.  Multi-threaded programs are recorded (with
stacks, raw and compacted), a copy is cut in the middle, and the TSan
heaptrail reads each with 2, 3 and 8 threads (stats, dump, leaks,
flamegraph, the timeline, the HTML report), stats and timeline in 2 and 3
time slices and the report with its heap model beside (one trace recorded
with small buffers, without stacks, has chunks to cut at).  Then record's
end step, `compact --fast`,
whose workers compress a raw trace of 3 threads (more than twice what
they may run ahead of the writing) while the calling thread writes: the
TSan build's file must be the normal build's, byte for byte.
Fails on any ThreadSanitizer report
(halt_on_error, exit code 66), or when an output differs from the normal
build's serial one (-j 1).  Exit 0 when all is clean."""

import os
import shutil
import subprocess
import sys
import tempfile

TRACES = [
    # name, program and arguments, record options
    ("threads", ["threads", "4", "20000"], ["--stacks"]),
    ("handoff", ["handoff", "20000"], ["--stacks", "--no-compact"]),
    ("prodcons", ["prodcons", "3000"], []),
    ("churn", ["churn", "40"], []),  # 40 short threads: streams that end early
    # small buffers: chunks to cut at, for the time slices (stats, timeline)
    # and report's heap model beside (no stacks: slices read none)
    ("pipeline", ["pipeline", "4", "20000"], ["--buffer-size=4K"]),
]


def run(argv, env=None, cwd=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=300, cwd=cwd)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def finish(ht, ht_tsan, progs, d, tsan_env, bad):
    """compact --fast (src/trace/compact.c, ht_trace__finish) under TSan."""
    raw = os.path.join(d, "finish-raw.ht")
    rc, _, err = run([ht, "record", "-q", "-o", raw, "--no-compact", "--zstd-level=0", "--",
                      os.path.join(progs, "threads"), "3", "2000000"])
    if rc:
        bad.append("finish: record failed: " + err[-500:])
        return
    outs = {}
    for name, tool, env in (("normal", ht, None), ("tsan", ht_tsan, tsan_env)):
        outs[name] = os.path.join(d, "finish-%s.ht" % name)
        shutil.copy(raw, outs[name])
        rc, _, err = run([tool, "compact", "-q", "--fast", outs[name]], env=env)
        if rc == 66 or "ThreadSanitizer" in err:
            bad.append("compact --fast: ThreadSanitizer:\n" + err[-4000:])
            return
        if rc:
            bad.append("compact --fast (%s build): exit %d: %s" % (name, rc, err[-500:]))
            return
    with open(outs["normal"], "rb") as a, open(outs["tsan"], "rb") as b:
        if a.read() != b.read():
            bad.append("compact --fast: the TSan build's file differs from the normal build's")
            return
    print("reader_tsan: compact --fast: clean, the same file as the normal build's")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: reader_tsan.py BUILD TSAN_BUILD")
    build, tsan = (os.path.abspath(a) for a in sys.argv[1:])
    ht, ht_tsan = os.path.join(build, "heaptrail"), os.path.join(tsan, "heaptrail")
    progs = os.path.join(build, "tests", "progs")
    tsan_env = {"TSAN_OPTIONS": "halt_on_error=1:exitcode=66:second_deadlock_stack=1"}
    bad = []
    with tempfile.TemporaryDirectory(prefix="ht-rtsan-") as d:
        sysroot = os.path.join(d, "sysroot")
        os.mkdir(sysroot)
        traces = []
        for name, prog, ropts in TRACES:
            trace = os.path.join(d, name + ".ht")
            rc, _, err = run([ht, "record", "-q", "-o", trace] + ropts +
                             ["--", os.path.join(progs, prog[0])] + prog[1:])
            if rc:
                bad.append("%s: record failed: %s" % (name, err[-500:]))
                continue
            traces.append((name, trace))
            if name == "threads":
                packed = os.path.join(d, name + "-compact.ht")
                shutil.copy(trace, packed)
                run([ht, "compact", "-q", packed])
                traces.append((name + "-compact", packed))
                cut = os.path.join(d, name + "-cut.ht")
                with open(trace, "rb") as f:
                    data = f.read()
                with open(cut, "wb") as f:
                    f.write(data[:len(data) * 3 // 5])
                traces.append((name + "-cut", cut))
        for name, trace in traces:
            html = os.path.join(d, "r.html")
            for args in (["stats", "--json"], ["dump"], ["leaks", "--sysroot", sysroot],
                         ["flamegraph", "--folded", "--sysroot", sysroot],
                         ["timeline", "--csv", "-o", "-"],
                         ["report", "-q", "--sysroot", sysroot, "-o", html]):
                what = "%s: %s" % (name, " ".join(args[:2]))
                want = run([ht] + args[:1] + ["-j", "1"] + args[1:] + [trace], cwd=d)
                want_html = open(html, "rb").read() if args[0] == "report" else None
                # stats and timeline also in time slices (analyze/slices.c),
                # small as these traces are: a thread each, the same bytes;
                # report with its heap model on a thread of its own
                runs = [(j, tsan_env) for j in ("2", "3", "8")]
                if args[0] in ("stats", "timeline", "report"):
                    runs += [(j + " (slices)", dict(tsan_env, HEAPTRAIL_SLICE_MIN_EVENTS="0"))
                             for j in ("2", "3")]
                for j, env in runs:
                    got = run([ht_tsan] + args[:1] + ["-j", j.split()[0]] + args[1:] + [trace],
                              env=env, cwd=d)
                    if got[0] == 66 or "ThreadSanitizer" in got[2]:
                        bad.append("%s -j %s: ThreadSanitizer:\n%s" % (what, j, got[2][-4000:]))
                        continue
                    if got[0] != want[0] or got[1] != want[1] or got[2] != want[2]:
                        bad.append("%s -j %s: exit %d, %d bytes out; serial: exit %d, %d bytes\n%s"
                                   % (what, j, got[0], len(got[1]), want[0], len(want[1]),
                                      got[2][-1500:]))
                        continue
                    if want_html is not None and open(html, "rb").read() != want_html:
                        bad.append("%s -j %s: the HTML report differs" % (what, j))
                        continue
                print("reader_tsan: %s: clean, the same as -j 1" % what)
        finish(ht, ht_tsan, progs, d, tsan_env, bad)
    if bad:
        print("reader_tsan: FAILED\n" + "\n\n".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
