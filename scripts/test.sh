#!/usr/bin/env bash
# Builds heaptrail with warnings as errors and runs the whole test suite:
# the normal build, then the tools again under ASan+UBSan (the preload
# library is never sanitized: it is injected into other programs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEAPTRAIL_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs" --timeout 300)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DHEAPTRAIL_WERROR=ON -DHEAPTRAIL_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
# allocator_may_return_null: replay makes the calls that failed in the trace
# (an overflowing reallocarray) on purpose
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
   ctest --output-on-failure -j"$jobs" --timeout 300 -L analyzers --no-tests=error)
# ThreadSanitizer on the replay engine: the heaptrail binary alone built
# with -fsanitize=thread, replaying multi-threaded workloads (with their
# threads and --threads-as-one); tests/sanitize/replay_tsan.py
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEAPTRAIL_WERROR=ON -DHEAPTRAIL_TSAN=ON \
  -DBUILD_TESTING=OFF >/dev/null
cmake --build build-tsan -j"$jobs" --target heaptrail
python3 tests/sanitize/replay_tsan.py build build-tsan
# ... and on the trace reader's decoding threads (src/trace/reader_par.c):
# stats, dump, leaks, flamegraph, timeline and report with 2, 3 and 8
# threads, stats and timeline in time slices, report with its heap model
# beside, the same output as the serial reader; tests/sanitize/reader_tsan.py
python3 tests/sanitize/reader_tsan.py build build-tsan
# libFuzzer (clang): a bounded run of each target, HT_FUZZ_SECONDS each (a
# crash fails the run and lands in tests/fuzz/regressions*/); the longer
# runs are done by hand (tests/fuzz/README.md)
for target in reader workload smaps convert jsonread perfmap suppressions; do
  FUZZ_BUILD_DIR=$PWD/build-fuzz tests/fuzz/run.sh "$target" "${HT_FUZZ_SECONDS:-10}"
done
