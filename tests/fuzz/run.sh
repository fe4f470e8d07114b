#!/bin/sh
# Builds the reader fuzzer with clang (libFuzzer + ASan + UBSan) and runs it.
#
#   tests/fuzz/run.sh [SECONDS]       fuzz for SECONDS (default 60)
#   tests/fuzz/run.sh --coverage      line coverage of the reader (src/trace/reader.c, columns.c, ...)
#                                     over the corpus, the regressions and
#                                     the working corpus of earlier runs
#
# Inputs that crash, hang (> 10 s) or run out of memory (> 2 GiB) are
# written to tests/fuzz/regressions/ as crash-*, timeout-*, oom-*; rename
# each after what it triggers once it is understood.  Every file there is
# replayed by the corpus regression test (tests/fuzz/run_corpus.c).
#
# Environment:
#   FUZZ_BUILD_DIR   where the binary and the working corpus live
#                    (default ${TMPDIR:-/tmp}/heaptrail-fuzz); the working
#                    corpus grows from run to run, the seed corpus in
#                    tests/fuzz/corpus/ is never written
#   FUZZ_JOBS        parallel fuzzing processes (default 1)
#   FUZZ_KEEP_GOING=1
#                    go on after a crash (libFuzzer's -ignore_crashes and
#                    friends) instead of stopping at the first one; beware
#                    that a shallow bug is then saved again and again
#   FUZZ_ARGS        more libFuzzer options
#   HT_FUZZ_NO_SANITIZE
#                    sanitizer checks to leave out, comma-separated (none
#                    by default); for keeping a known report quiet while
#                    it is being fixed
#   HT_FUZZ_STRICT_COUNT=0
#                    do not treat events dropped without an error or a
#                    warning as a failure (fuzz_reader.c); on by default
#   CC               the compiler (default clang)
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
CC=${CC:-clang}
BUILD=${FUZZ_BUILD_DIR:-${TMPDIR:-/tmp}/heaptrail-fuzz}
JOBS=${FUZZ_JOBS:-1}
NO_SAN=${HT_FUZZ_NO_SANITIZE-}
export HT_FUZZ_STRICT_COUNT=${HT_FUZZ_STRICT_COUNT-1}
MODE=fuzz
SECONDS_=60
case "${1:-}" in
--coverage) MODE=coverage ;;
-h | --help)
	sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 0
	;;
'') ;;
*) SECONDS_=$1 ;;
esac

mkdir -p "$BUILD/work" "$HERE/regressions"
READER_SOURCES="$SRC/src/trace/reader.c $SRC/src/trace/record.c $SRC/src/trace/columns.c $SRC/src/trace/kinds.c"
SOURCES="$HERE/fuzz_reader.c $READER_SOURCES"
INC="-I$SRC/src -I$SRC/include"
NOSAN_FLAG=
[ -n "$NO_SAN" ] && NOSAN_FLAG="-fno-sanitize=$NO_SAN"

if [ "$MODE" = coverage ]; then
	# A plain (not libFuzzer) build with clang's source-based coverage,
	# driven by run_corpus.
	$CC -g -O0 -fprofile-instr-generate -fcoverage-mapping $INC \
		-o "$BUILD/run_corpus_cov" "$HERE/run_corpus.c" $SOURCES -lzstd -lm
	rm -f "$BUILD"/cov-*.profraw
	LLVM_PROFILE_FILE="$BUILD/cov-%p.profraw" "$BUILD/run_corpus_cov" \
		"$HERE/corpus" "$HERE/regressions" "$BUILD/work" 2>/dev/null | tail -1
	PROFDATA=$(command -v llvm-profdata || command -v llvm-profdata-14)
	COV=$(command -v llvm-cov || command -v llvm-cov-14)
	"$PROFDATA" merge -sparse "$BUILD"/cov-*.profraw -o "$BUILD/cov.profdata"
	"$COV" report "$BUILD/run_corpus_cov" -instr-profile="$BUILD/cov.profdata" \
		$READER_SOURCES
	"$COV" show "$BUILD/run_corpus_cov" -instr-profile="$BUILD/cov.profdata" \
		"$SRC/src/trace/reader.c" -format=text >"$BUILD/reader.c.cov.txt"
	echo "annotated source: $BUILD/reader.c.cov.txt (lines marked 0 never ran)"
	exit 0
fi

echo "building $BUILD/fuzz_reader with $CC"
$CC -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined,float-cast-overflow \
	-fno-sanitize-recover=all $NOSAN_FLAG $INC \
	-o "$BUILD/fuzz_reader" $SOURCES -lzstd -lm

LOG="$BUILD/fuzz-$(date +%Y%m%d-%H%M%S).log"
before=$(ls "$HERE/regressions" | wc -l)
echo "fuzzing for ${SECONDS_}s with $JOBS job(s); log: $LOG"
# One job: plain libFuzzer, which stops at the first crash.  More: fork
# mode (which saves every crashing seed of the corpus as well).
MODEFLAGS=
[ "$JOBS" -gt 1 ] && MODEFLAGS="-fork=$JOBS"
[ "${FUZZ_KEEP_GOING:-0}" = 1 ] &&
	MODEFLAGS="-fork=$JOBS -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1"
# shellcheck disable=SC2086
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
"$BUILD/fuzz_reader" $MODEFLAGS \
	-max_total_time="$SECONDS_" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	-dict="$HERE/ht.dict" -artifact_prefix="$HERE/regressions/" -print_final_stats=1 \
	${FUZZ_ARGS:-} "$BUILD/work" "$HERE/corpus" "$HERE/regressions" >"$LOG" 2>&1 || true

echo "last status (executions, coverage): $(grep -E '^#[0-9]+.*cov: ' "$LOG" | tail -1)"
after=$(ls "$HERE/regressions" | wc -l)
crashes=$(grep -c -E '^==[0-9]+==ERROR|runtime error|ERROR: libFuzzer' "$LOG" || true)
echo "reports in the log: $crashes; files in tests/fuzz/regressions: $before -> $after"
if [ "$after" -gt "$before" ]; then
	echo "new inputs (stack traces in $LOG):"
	ls -t "$HERE/regressions" | head -n $((after - before)) | head -n 20
	exit 1
fi
