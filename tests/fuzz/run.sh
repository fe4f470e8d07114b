#!/bin/sh
# Builds a fuzzer with clang (libFuzzer + ASan + UBSan) and runs it.
#
#   tests/fuzz/run.sh [TARGET] [SECONDS]   fuzz for SECONDS (default 60)
#   tests/fuzz/run.sh [TARGET] --coverage  line coverage of the target's sources
#                                     over its corpus, its regressions and
#                                     the working corpus of earlier runs
#
# TARGET is one of
#   reader     (the default) the trace reader, src/trace/reader.c, columns.c, ...
#              (fuzz_reader.c; corpus/, regressions/, ht.dict)
#   workload   the workload loader, src/replay/workload.c (fuzz_workload.c;
#              corpus_workload/, regressions_workload/, wl.dict)
#   smaps      the smaps parser and classification of heaptrail maps,
#              src/analyze/smaps.c, mapkinds.c (fuzz_smaps.c; corpus_smaps/,
#              regressions_smaps/, smaps.dict)
#   convert    the converter of heaptrail convert, src/replay/converter.c,
#              with the reader and the workload loader that checks its
#              output (fuzz_convert.c; corpus_convert/, regressions_convert/,
#              ht.dict)
#   jsonread   the JSON reader of heaptrail report --compare,
#              src/common/jsonread.c, with the writer json.c it writes the
#              trees back with (fuzz_jsonread.c; corpus_jsonread/,
#              regressions_jsonread/, json.dict)
#   perfmap    the perf map parser, src/symbols/perfmap.c: the names of a
#              JIT's code (fuzz_perfmap.c; corpus_perfmap/,
#              regressions_perfmap/, perfmap.dict)
#   suppressions
#              the leak suppressions parser of heaptrail leaks
#              --suppressions, src/analyze/suppressions.c
#              (fuzz_suppressions.c; corpus_suppressions/,
#              regressions_suppressions/, suppressions.dict)
#
# Inputs that crash, hang (> 10 s) or run out of memory (> 2 GiB) are
# written to the target's regressions directory (tests/fuzz/regressions/,
# regressions_workload/, regressions_smaps/, regressions_convert/,
# regressions_jsonread/, regressions_perfmap/ or regressions_suppressions/) as crash-*, timeout-*, oom-*; rename
# each after what it triggers once it is understood.  Every file there is
# replayed by the corpus regression tests (tests/fuzz/run_corpus.c).
#
# Environment:
#   FUZZ_BUILD_DIR   where the binaries and the working corpora live
#                    (default ${TMPDIR:-/tmp}/heaptrail-fuzz; the working
#                    corpus is work/ for the reader, work_workload/ for the
#                    workload loader, work_smaps/ for the smaps parser,
#                    work_convert/, work_jsonread/, work_suppressions/); the working corpus grows from run to
#                    run, the seed corpus in tests/fuzz/ is never written
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
TARGET=reader
case "${1:-}" in
reader | workload | smaps | convert | jsonread | perfmap | suppressions)
	TARGET=$1
	shift
	;;
esac
case "${1:-}" in
--coverage) MODE=coverage ;;
-h | --help)
	sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 0
	;;
'') ;;
*[!0-9]*)
	echo "usage: $0 [reader|workload|smaps|convert|jsonread|perfmap|suppressions] [SECONDS|--coverage]" >&2
	exit 2
	;;
*) SECONDS_=$1 ;;
esac

if [ "$TARGET" = suppressions ]; then
	FUZZER=fuzz_suppressions
	TARGET_SOURCES="$SRC/src/analyze/suppressions.c $SRC/src/common/util.c"
	MAIN_SOURCE="$SRC/src/analyze/suppressions.c"
	CORPUS="$HERE/corpus_suppressions"
	REGRESSIONS="$HERE/regressions_suppressions"
	DICT="$HERE/suppressions.dict"
	WORK="$BUILD/work_suppressions"
	LIBS=""
elif [ "$TARGET" = perfmap ]; then
	FUZZER=fuzz_perfmap
	TARGET_SOURCES="$SRC/src/symbols/perfmap.c"
	MAIN_SOURCE="$SRC/src/symbols/perfmap.c"
	CORPUS="$HERE/corpus_perfmap"
	REGRESSIONS="$HERE/regressions_perfmap"
	DICT="$HERE/perfmap.dict"
	WORK="$BUILD/work_perfmap"
	LIBS=""
elif [ "$TARGET" = jsonread ]; then
	FUZZER=fuzz_jsonread
	TARGET_SOURCES="$SRC/src/common/jsonread.c $SRC/src/common/json.c $SRC/src/common/markup.c"
	MAIN_SOURCE="$SRC/src/common/jsonread.c"
	CORPUS="$HERE/corpus_jsonread"
	REGRESSIONS="$HERE/regressions_jsonread"
	DICT="$HERE/json.dict"
	WORK="$BUILD/work_jsonread"
	LIBS="-lm"
elif [ "$TARGET" = convert ]; then
	FUZZER=fuzz_convert
	TARGET_SOURCES="$SRC/src/replay/converter.c $SRC/src/replay/workload.c $SRC/src/common/outfile.c $SRC/src/common/livemap.c $SRC/src/analyze/analyze.c $SRC/src/common/json.c $SRC/src/common/markup.c $SRC/src/common/util.c $SRC/src/trace/reader.c $SRC/src/trace/reader_decode.c $SRC/src/trace/reader_merge.c $SRC/src/trace/reader_par.c $SRC/src/trace/modmap.c $SRC/src/trace/record.c $SRC/src/trace/columns.c $SRC/src/trace/kinds.c"
	MAIN_SOURCE="$SRC/src/replay/converter.c"
	CORPUS="$HERE/corpus_convert"
	REGRESSIONS="$HERE/regressions_convert"
	DICT="$HERE/ht.dict"
	WORK="$BUILD/work_convert"
	LIBS="-lzstd -lm -pthread"
elif [ "$TARGET" = smaps ]; then
	FUZZER=fuzz_smaps
	TARGET_SOURCES="$SRC/src/analyze/smaps.c $SRC/src/analyze/mapkinds.c $SRC/src/common/json.c $SRC/src/common/markup.c $SRC/src/common/util.c"
	MAIN_SOURCE="$SRC/src/analyze/smaps.c"
	CORPUS="$HERE/corpus_smaps"
	REGRESSIONS="$HERE/regressions_smaps"
	DICT="$HERE/smaps.dict"
	WORK="$BUILD/work_smaps"
	LIBS=""
elif [ "$TARGET" = workload ]; then
	FUZZER=fuzz_workload
	TARGET_SOURCES="$SRC/src/replay/workload.c $SRC/src/common/outfile.c $SRC/src/common/util.c"
	MAIN_SOURCE="$SRC/src/replay/workload.c"
	CORPUS="$HERE/corpus_workload"
	REGRESSIONS="$HERE/regressions_workload"
	DICT="$HERE/wl.dict"
	WORK="$BUILD/work_workload"
	LIBS="-lm"
else
	FUZZER=fuzz_reader
	TARGET_SOURCES="$SRC/src/trace/reader.c $SRC/src/trace/reader_decode.c $SRC/src/trace/reader_merge.c $SRC/src/trace/reader_par.c $SRC/src/trace/modmap.c $SRC/src/trace/record.c $SRC/src/trace/columns.c $SRC/src/trace/kinds.c $SRC/src/common/util.c"
	MAIN_SOURCE="$SRC/src/trace/reader.c"
	CORPUS="$HERE/corpus"
	REGRESSIONS="$HERE/regressions"
	DICT="$HERE/ht.dict"
	WORK="$BUILD/work"
	LIBS="-lzstd -lm -pthread"
fi
mkdir -p "$WORK" "$REGRESSIONS"
SOURCES="$HERE/$FUZZER.c $TARGET_SOURCES"
INC="-I$SRC/src -I$SRC/include"
NOSAN_FLAG=
[ -n "$NO_SAN" ] && NOSAN_FLAG="-fno-sanitize=$NO_SAN"

if [ "$MODE" = coverage ]; then
	# A plain (not libFuzzer) build with clang's source-based coverage,
	# driven by run_corpus.
	COVBIN="$BUILD/run_corpus_cov_$TARGET"
	$CC -g -O0 -fprofile-instr-generate -fcoverage-mapping $INC \
		-o "$COVBIN" "$HERE/run_corpus.c" $SOURCES $LIBS
	rm -f "$BUILD"/cov-*.profraw
	LLVM_PROFILE_FILE="$BUILD/cov-%p.profraw" "$COVBIN" \
		"$CORPUS" "$REGRESSIONS" "$WORK" 2>/dev/null | tail -1
	PROFDATA=$(command -v llvm-profdata || command -v llvm-profdata-14)
	COV=$(command -v llvm-cov || command -v llvm-cov-14)
	"$PROFDATA" merge -sparse "$BUILD"/cov-*.profraw -o "$BUILD/cov.profdata"
	"$COV" report "$COVBIN" -instr-profile="$BUILD/cov.profdata" $TARGET_SOURCES
	ANNOTATED="$BUILD/$(basename "$MAIN_SOURCE").cov.txt"
	"$COV" show "$COVBIN" -instr-profile="$BUILD/cov.profdata" \
		"$MAIN_SOURCE" -format=text >"$ANNOTATED"
	echo "annotated source: $ANNOTATED (lines marked 0 never ran)"
	exit 0
fi

echo "building $BUILD/$FUZZER with $CC"
$CC -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined,float-cast-overflow \
	-fno-sanitize-recover=all $NOSAN_FLAG $INC \
	-o "$BUILD/$FUZZER" $SOURCES $LIBS

LOG="$BUILD/$FUZZER-$(date +%Y%m%d-%H%M%S).log"
before=$(ls "$REGRESSIONS" | wc -l)
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
"$BUILD/$FUZZER" $MODEFLAGS \
	-max_total_time="$SECONDS_" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	-dict="$DICT" -artifact_prefix="$REGRESSIONS/" -print_final_stats=1 \
	${FUZZ_ARGS:-} "$WORK" "$CORPUS" "$REGRESSIONS" >"$LOG" 2>&1 || true

echo "last status (executions, coverage): $(grep -E '^#[0-9]+.*cov: ' "$LOG" | tail -1)"
after=$(ls "$REGRESSIONS" | wc -l)
crashes=$(grep -c -E '^==[0-9]+==ERROR|runtime error|ERROR: libFuzzer' "$LOG" || true)
echo "reports in the log: $crashes; files in tests/fuzz/$(basename "$REGRESSIONS"): $before -> $after"
if [ "$after" -gt "$before" ]; then
	echo "new inputs (stack traces in $LOG):"
	ls -t "$REGRESSIONS" | head -n $((after - before)) | head -n 20
	exit 1
fi
