#!/usr/bin/env python3
"""Runs heaptrail end-to-end test cases (tests/e2e/cases_*.py, and the
transparency suite of real programs, tests/real/cases_*.py).

    run.py --list                       name, timeout and labels of every case
    run.py --build-dir B --progs-dir P CASE...
                                        runs the cases; exit 0 if all passed,
                                        77 if all were skipped, 1 otherwise
Options: --keep keeps each case's temporary directory.
The build directory holds `heaptrail` and `libheaptrail.so`; the progs
directory holds the programs of tests/progs.  HEAPTRAIL_TEST_BUILD_DIR and
HEAPTRAIL_TEST_PROGS_DIR can stand in for the options.
"""

import argparse
import importlib
import os
import signal
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(os.path.dirname(HERE), "real")
CASE_DIRS = [HERE, REAL]
sys.path.insert(0, REAL)
sys.path.insert(0, HERE)

import htlib  # noqa: E402


def all_cases():
    cases = {}
    for fn in sorted(f for d in CASE_DIRS if os.path.isdir(d) for f in os.listdir(d)):
        if not (fn.startswith("cases_") and fn.endswith(".py")):
            continue
        mod = importlib.import_module(fn[:-3])
        for name in dir(mod):
            f = getattr(mod, name)
            if name.startswith("test_") and callable(f):
                cname = name[len("test_"):]
                if cname in cases:
                    raise SystemExit("duplicate case name %s" % cname)
                cases[cname] = f
    return cases


def main():
    # The programs under test start with the default action of SIGINT and
    # SIGQUIT, as from a terminal, however this runner was started: a
    # shell's background job ignores both, and its children would inherit
    # that (python3 then installs no KeyboardInterrupt handler:
    # e2e.real_python_ctrl_c failed so when run with '&').
    for sig, action in ((signal.SIGINT, signal.default_int_handler),
                        (signal.SIGQUIT, signal.SIG_DFL)):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, action)
    ap = argparse.ArgumentParser()
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--build-dir", default=os.environ.get("HEAPTRAIL_TEST_BUILD_DIR"))
    ap.add_argument("--progs-dir", default=os.environ.get("HEAPTRAIL_TEST_PROGS_DIR"))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args()
    cases = all_cases()
    if a.list:
        for name, f in cases.items():
            meta = getattr(f, "ht_case", {"timeout": 60, "labels": ("e2e",), "locks": ()})
            print("%s %d %s %s" % (name, meta["timeout"], ",".join(meta["labels"]),
                                   ",".join(meta["locks"]) or "-"))
        return 0
    if not a.build_dir or not a.progs_dir:
        ap.error("--build-dir and --progs-dir are needed")
    names = a.cases or list(cases)
    unknown = [n for n in names if n not in cases]
    if unknown:
        ap.error("no such case: %s" % ", ".join(unknown))
    passed = failed = skipped = 0
    for name in names:
        t = htlib.T(a.build_dir, a.progs_dir, name, keep=a.keep)
        t0 = time.monotonic()
        ok = False
        try:
            cases[name](t)
            if t.problems:
                raise htlib.Failure("\n".join(t.problems))
            ok = True
            passed += 1
            print("PASS %s (%.1fs)" % (name, time.monotonic() - t0))
        except htlib.Skipped as e:
            ok = True
            skipped += 1
            print("SKIP %s: %s" % (name, e))
        except htlib.Failure as e:
            failed += 1
            print("FAIL %s: %s" % (name, e))
            print("  (work directory kept: %s)" % t.dir)
        except Exception:
            failed += 1
            print("ERROR %s:\n%s" % (name, traceback.format_exc()))
            print("  (work directory kept: %s)" % t.dir)
        if not ok and t.log:
            print("--- last commands of %s:" % name)
            for entry in t.log[-3:]:
                print(entry)
        t.cleanup(ok)
        sys.stdout.flush()
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    if failed:
        return 1
    if skipped and not passed:
        return htlib.SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
