#!/usr/bin/env bash
# bench/run_stacks.sh — the cost of recording stacks: bench/stack_loop.c
# (the malloc/free loop at the bottom of a call chain DEPTH frames deep),
# side by side in one run: no tracer, heaptrail record --stacks, heaptrack
# (which always records stacks).  Medians of REPS interleaved runs.  Also
# the traces' sizes, and the time and memory heaptrail's analyzers take on
# the deepest trace (symbolization included).
#
#   bench/run_stacks.sh [--write]
#
# Environment (defaults in brackets):
#   BUILD=[/work/main/build]  where heaptrail is built
#   REPS=[3]                  timed repetitions per variant
#   PAIRS=[1000000]           malloc/free pairs per run
#   DEPTHS=["10 30 60"]       stack depths measured
#   TREE_LEVELS=["16 20"]     depths of bench/stack_tree.c's call tree (2^N stacks)
#   CC=[gcc]                  compiler for stack_loop (-O2 -fno-omit-frame-pointer)
# --write puts the results in bench/RESULTS.md, between the "stacks" markers.
set -euo pipefail

die() { echo "run_stacks.sh: $*" >&2; exit 1; }
WRITE=0
for a in "$@"; do
	case $a in
	--write) WRITE=1 ;;
	-h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$a' (try --help)" ;;
	esac
done
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${BUILD:-/work/main/build}
REPS=${REPS:-3}
PAIRS=${PAIRS:-1000000}
DEPTHS=${DEPTHS:-10 30 60}
CC=${CC:-gcc}
HT=$BUILD/heaptrail
[[ -x $HT ]] || die "no $HT: build heaptrail first (cmake -S . -B build && make -C build)"
HK=$(command -v heaptrack || true)
[[ -n $HK ]] || echo "run_stacks.sh: heaptrack not installed (scripts/deps.sh bench): its column stays empty" >&2

WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaptrail-bench-stacks.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
$CC -O2 -fno-omit-frame-pointer -o "$WORK/stack_loop" "$HERE/stack_loop.c"
$CC -O2 -g -fno-omit-frame-pointer -o "$WORK/stack_tree" "$HERE/stack_tree.c"

ns_of() { sed -n 's/.*ns_per_pair=\([0-9.]*\).*/\1/p'; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

ms_now() { local s=${EPOCHREALTIME/[.,]/}; echo "${s:0:-3}"; } # wall clock, ms
# whole VAR CMD...: runs CMD, its output on stdout, and appends its whole
# run time (ms, start to exit) to the variable VAR
whole() {
	local var=$1 t0 t1
	shift
	t0=$(ms_now)
	"$@"
	t1=$(ms_now)
	printf -v "$var" '%s %s' "${!var}" "$((t1 - t0))"
}
declare -A NS SIZE CSIZE EV WHOLE
for d in $DEPTHS; do
	for ((r = 1; r <= REPS; r++)); do
		w=
		NS[none,$d]+=" $(whole w "$WORK/stack_loop" "$d" "$PAIRS" >"$WORK/o"; ns_of <"$WORK/o"; echo "w$w" >"$WORK/w")"
		WHOLE[none,$d]+=" $(sed 's/^w//' "$WORK/w")"
		out=$WORK/ht-$d.ht
		NS[heaptrail,$d]+=" $(whole w "$HT" record -q --stacks -o "$out" -- "$WORK/stack_loop" "$d" "$PAIRS" >"$WORK/o"; ns_of <"$WORK/o"; echo "w$w" >"$WORK/w")"
		WHOLE[heaptrail,$d]+=" $(sed 's/^w//' "$WORK/w")"
		SIZE[heaptrail,$d]=$(stat -c %s "$out")
		cp "$out" "$out.c" && "$HT" compact -q "$out.c" && CSIZE[heaptrail,$d]=$(stat -c %s "$out.c")
		rm -f "$out.c"
		EV[heaptrail,$d]=$("$HT" stats --json "$out" | sed -n 's/^  "events": \([0-9]*\),/\1/p')
		if [[ -n $HK ]]; then
			rm -f "$WORK"/hk-$d.*
			NS[heaptrack,$d]+=" $(whole w "$HK" -o "$WORK/hk-$d" "$WORK/stack_loop" "$d" "$PAIRS" 2>/dev/null >"$WORK/o"; ns_of <"$WORK/o"; echo "w$w" >"$WORK/w")"
			WHOLE[heaptrack,$d]+=" $(sed 's/^w//' "$WORK/w")"
			SIZE[heaptrack,$d]=$(stat -c %s "$WORK"/hk-$d.* | head -n 1)
		fi
		echo "run_stacks.sh: depth $d rep $r done" >&2
	done
done

TABLE=$WORK/table
{
	echo "| depth | none ns/pair | heaptrail ns/pair | added | heaptrack ns/pair | added | heaptrack added / heaptrail added | none whole ms | heaptrail whole ms | added | heaptrack whole ms | added | heaptrail added / heaptrack added, whole (target <= 0.20) | heaptrail trace | after \`heaptrail compact\` | heaptrack trace |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for d in $DEPTHS; do
		n=$(echo "${NS[none,$d]}" | median)
		h=$(echo "${NS[heaptrail,$d]}" | median)
		ha=$(awk "BEGIN {printf \"%.1f\", $h - $n}")
		if [[ -n $HK ]]; then
			k=$(echo "${NS[heaptrack,$d]}" | median)
			ka=$(awk "BEGIN {printf \"%.1f\", $k - $n}")
			ratio=$(awk "BEGIN {printf \"%.1fx\", ($k - $n) / ($h - $n)}")
			ks="${SIZE[heaptrack,$d]} B"
		else
			k=—; ka=—; ratio=—; ks=—
		fi
		wn=$(echo "${WHOLE[none,$d]}" | median)
		wh=$(echo "${WHOLE[heaptrail,$d]}" | median)
		wha=$(awk "BEGIN {printf \"%.0f\", $wh - $wn}")
		wk=— wka=— wr=—
		if [[ -n $HK ]]; then
			wk=$(echo "${WHOLE[heaptrack,$d]}" | median)
			wka=$(awk "BEGIN {printf \"%.0f\", $wk - $wn}")
			wr=$(awk "BEGIN {r = ($wh - $wn) / ($wk - $wn); printf \"%.3f %s\", r, (r <= 0.2 ? \"PASS\" : \"FAIL\")}")
		fi
		echo "| $d | $n | $h | +$ha | $k | +$ka | $ratio | $wn | $wh | +$wha | $wk | +$wka | $wr | ${SIZE[heaptrail,$d]} B (${EV[heaptrail,$d]} events) | ${CSIZE[heaptrail,$d]:-—} B | $ks |"
	done
} >"$TABLE"

# the analyzers on the deepest trace
deep=${DEPTHS##* }
ANALYZE=$WORK/analyze
{
	for cmd in "leaks" "top" "flamegraph --folded" "flamegraph -o $WORK/fg.svg"; do
		/usr/bin/time -f "%e %M" -o "$WORK/t" "$HT" $cmd "$WORK/ht-$deep.ht" >/dev/null 2>&1 || true
		read -r secs kb <"$WORK/t"
		echo "- \`heaptrail ${cmd/$WORK\//}\` on the depth-$deep trace (${EV[heaptrail,$deep]} events): $secs s, max RSS $((kb / 1024)) MiB"
	done
	# many distinct stacks: 2^LEVELS paths through a binary call tree
	for levels in ${TREE_LEVELS:-16 20}; do
		"$HT" record -q --stacks -o "$WORK/tree-$levels.ht" -- "$WORK/stack_tree" "$levels" 2 >/dev/null
		for cmd in "leaks" "top" "flamegraph --folded"; do
			/usr/bin/time -f "%e %M" -o "$WORK/t" "$HT" $cmd "$WORK/tree-$levels.ht" >/dev/null 2>&1 || true
			read -r secs kb <"$WORK/t"
			echo "- \`heaptrail $cmd\` on a trace of $((1 << levels)) distinct stacks (bench/stack_tree.c $levels 2, $((2 << levels)) allocations): $secs s, max RSS $((kb / 1024)) MiB"
		done
	done
} >"$ANALYZE"

cat "$TABLE"
echo
cat "$ANALYZE"

if ((WRITE)); then
	R=$HERE/RESULTS.md
	rev=$(git -C "$HERE/.." rev-parse --short HEAD 2>/dev/null || echo "no commit")
	SECTION=$WORK/section
	{
		echo "<!-- stacks:begin (bench/run_stacks.sh --write) -->"
		echo "## Stacks: record --stacks vs heaptrack"
		echo
		echo "- command: \`REPS=$REPS PAIRS=$PAIRS DEPTHS=\"$DEPTHS\" bench/run_stacks.sh --write\`"
		echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), heaptrail at $rev, $($HK --version 2>/dev/null | head -n 1 || true)"
		echo "- workload: bench/stack_loop.c, $PAIRS malloc/free pairs (sizes 16..4096) at the bottom of a call chain DEPTH frames deep (built with frame pointers; glibc's start-up frames without), two call paths; heaptrail \`record --stacks\` (depth 64, default unwinder) vs heaptrack (always full stacks); medians of $REPS runs; \"whole\" is the whole process from its start until it exits with the trace final (\`heaptrail record --stacks\` with its end step; heaptrack with its interpreter and compressor); traces as left on disk by default, and heaptrail's after \`heaptrail compact\` (not timed)"
		echo
		cat "$TABLE"
		echo
		cat "$ANALYZE"
		echo "<!-- stacks:end -->"
	} >"$SECTION"
	if grep -q '<!-- stacks:begin' "$R"; then
		awk -v f="$SECTION" '/<!-- stacks:begin/ {while ((getline l < f) > 0) print l; skip=1; next}
			/<!-- stacks:end -->/ {skip=0; next} !skip' "$R" >"$WORK/r" && cp "$WORK/r" "$R"
	else
		{ echo; cat "$SECTION"; } >>"$R"
	fi
	echo "run_stacks.sh: wrote $R" >&2
fi
