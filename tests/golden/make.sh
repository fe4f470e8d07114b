#!/usr/bin/env bash
# tests/golden/make.sh BUILD — records the golden traces again (tests/golden/README.md).
# Not part of the test run: the traces are committed, so that the expected
# outputs stay the same on every machine.  Run it only to add or replace a
# trace, then tests/golden/update.sh BUILD, and read the diff of expected/.
set -euo pipefail
BUILD=$(cd "${1:?usage: tests/golden/make.sh BUILD}" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
HT=$BUILD/heaptrail
P=$BUILD/tests/progs
cd "$HERE"
rm -f ./*.ht ./*.ht.*
rec() { local out=$1; shift; "$HT" record -q -o "$out" "$@"; }
rec threads.ht -- "$P/threads" 3 300
rec stacks.ht --stacks -- "$P/leaky"
rec sampled.ht --sample-bytes 4096 -- "$P/randloop" 20000
head -c 16384 /dev/zero > /tmp/heaptrail-golden-map.$$
rec memsys.ht --stacks -- "$P/memcalls" /tmp/heaptrail-golden-map.$$ > /dev/null
rm -f /tmp/heaptrail-golden-map.$$
rec marks.ht -- "$P/api_marks" marks
rec fork.ht -- "$P/forker"
mv fork.ht.* fork-child.ht
ls -l ./*.ht
