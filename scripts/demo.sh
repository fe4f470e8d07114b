#!/usr/bin/env bash
# Builds heaptrail, records the bundled demo program and summarizes it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
cc -O1 -g -pthread -Iinclude -o build/demo examples/demo.c
build/heaptrail record -o build/demo.ht -- build/demo
build/heaptrail stats build/demo.ht
# the same with stacks: where the blocks still live at exit came from, and
# a flame graph of the allocations (open build/demo.svg in a browser)
build/heaptrail record --stacks -q -o build/demo-stacks.ht -- build/demo >/dev/null
build/heaptrail leaks --top 3 build/demo-stacks.ht
build/heaptrail flamegraph -o build/demo.svg build/demo-stacks.ht
