#!/usr/bin/env python3
"""The replay engine under ThreadSanitizer (issue 7, item 3).

    tests/sanitize/replay_tsan.py BUILD TSAN_BUILD

BUILD is the normal build (its recorder and test programs record the
traces and convert them); TSAN_BUILD a tree configured with
-DHEAPTRAIL_TSAN=ON in which the target `heaptrail` is built: the tools
compiled with -fsanitize=thread (the preload library is not: it is
injected into other programs).  Multi-threaded test programs are recorded
and converted, and each workload is replayed by the TSan heaptrail with its
threads and with --threads-as-one (prodcons also twice in a row with
malloc_trim every 50 ops and every byte touched, and under compare, whose
replays are children of the TSan heaptrail).  Fails on any ThreadSanitizer report
(halt_on_error, exit code 66), on a replay that is not the TSan build, or
when the two runs do not make the same calls as the workload holds, or a
slot error.  Exit 0 when all is clean."""

import json
import os
import subprocess
import sys
import tempfile

WORKLOADS = [
    # name, program and arguments, environment, record options, convert options
    ("prodcons", ["prodcons", "3000"], {}, [], []),  # 3 threads, cross-thread frees and reallocs
    ("ring", ["ring", "4002"],         # one address passed around 3 threads: a wait per step
     {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1"},
     [], []),
    ("threads-mmap", ["threads", "4", "5000"], {}, [], ["--mmap"]),
    ("churn", ["churn", "40"], {}, [], []),          # 40 threads one after the other
]


def run(argv, env=None, **kw):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=300, **kw)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: replay_tsan.py BUILD TSAN_BUILD")
    build, tsan = (os.path.abspath(a) for a in sys.argv[1:])
    ht, ht_tsan = os.path.join(build, "heaptrail"), os.path.join(tsan, "heaptrail")
    progs = os.path.join(build, "tests", "progs")
    bad = []
    with tempfile.TemporaryDirectory(prefix="ht-tsan-") as d:
        for name, prog, env, ropts, copts in WORKLOADS:
            trace, wl = os.path.join(d, name + ".ht"), os.path.join(d, name + ".wl")
            r = run([ht, "record", "-q", "-o", trace] + ropts +
                    ["--", os.path.join(progs, prog[0])] + prog[1:], env=env)
            if r.returncode:
                bad.append("%s: record failed: %s" % (name, r.stderr.decode()[-500:]))
                continue
            r = run([ht, "convert", "--json"] + copts + [wl, trace])
            if r.returncode:
                bad.append("%s: convert failed: %s" % (name, r.stderr.decode()[-500:]))
                continue
            conv = json.loads(r.stdout)
            modes = [[], ["--threads-as-one"]]
            if name == "prodcons":
                modes.append(["--repeat", "2", "--trim-interval", "50", "--touch", "all"])
            for mode in modes:
                what = " ".join([name] + mode)
                r = run([ht_tsan, "replay", "--json", "--no-mlock"] + mode + [wl],
                        env={"TSAN_OPTIONS": "halt_on_error=1:exitcode=66:second_deadlock_stack=1"})
                err = r.stderr.decode("utf-8", "replace")
                if r.returncode or "ThreadSanitizer" in err:
                    bad.append("%s: exit %d\n%s" % (what, r.returncode, err[-4000:]))
                    continue
                j = json.loads(r.stdout)
                calls = {k: v for k, v in j["calls"].items() if v}
                problems = []
                if "tsan" not in (j["allocator_library"] or ""):
                    problems.append("not the TSan build (allocator %s)" % j["allocator_library"])
                k = 2 if "--repeat" in mode else 1
                want = {f: n * k for f, n in conv["calls"].items()}
                if "--trim-interval" in mode:
                    calls.pop("malloc_trim", None)
                if calls != want:
                    problems.append("calls %s, the workload holds %s" % (calls, want))
                if j["ops"] != conv["ops"] * k or j["slot_errors"]:
                    problems.append("ops %d of %d, slot errors %d"
                                    % (j["ops"], conv["ops"] * k, j["slot_errors"]))
                if not mode and j["threads"] != conv["threads"]:
                    problems.append("threads %d of %d" % (j["threads"], conv["threads"]))
                if problems:
                    bad.append("%s: %s" % (what, "; ".join(problems)))
                print("replay_tsan: %s: %d threads, %d ops, %d waits: clean"
                      % (what, conv["threads"], j["ops"], conv["waits"]))
        # compare: the TSan heaptrail runs the replays as its children
        wl = os.path.join(d, "prodcons.wl")
        if os.path.exists(wl):
            r = run([ht_tsan, "compare", "--json", "-n", "2", "-t", "glibc.malloc.arena_max=1",
                     "-o", os.path.join(d, "c.svg"), wl],
                    env={"TSAN_OPTIONS": "halt_on_error=1:exitcode=66"})
            err = r.stderr.decode("utf-8", "replace")
            if r.returncode or "ThreadSanitizer" in err:
                bad.append("compare: exit %d\n%s" % (r.returncode, err[-4000:]))
            else:
                print("replay_tsan: compare (glibc and arena_max=1, 2 runs each): clean")
    if bad:
        print("replay_tsan: FAILED\n" + "\n\n".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
