#!/usr/bin/env bash
# bench/run_live.sh — how fast `heaptrail live` reads a trace, and in how much
# memory (see bench/README.md, "Live"):
#   1. records bench/malloc_loop.c into traces of 20 million events
#      (WORKLOADS), left as the recorder writes them while the program runs
#      (record --no-compact: what live follows), and a tenth of each;
#   2. runs `heaptrail live --batch` (the display's reading and model, one
#      screen drawn at the end) and, for reference, `heaptrail stats`,
#      REPS times each, and reports wall time, CPU time (user+sys), Max RSS
#      and events per second per core (events / CPU seconds);
#   3. compares Max RSS on the full and the tenth trace: the display's
#      memory follows the live set, not the length of the run.
# Medians of REPS runs; a PASS/FAIL line per target.
#
#   bench/run_live.sh [--write] [--keep]
#
# Environment (defaults in brackets):
#   BUILD=[/work/main/build]  where the heaptrail binary is
#   WORKLOADS=[1x10000000 2x5000000 1x10000000s]
#                             traces to record, THREADSxPAIRS_PER_THREAD each;
#                             a trailing s records with --stacks (the table
#                             by stack, and the symbols of the stacks shown)
#   REPS=[3]                  timed runs of every command on every trace
#   SEED=[1]                  seed of malloc_loop's sizes
#   TARGET_EPS=[20000000]     events per second per core live must reach
#   RSS_SLACK_KB=[2048]       Max RSS growth from the tenth trace to the full
#                             one that still counts as bounded
#   CC=[gcc]                  compiler for malloc_loop
# --write puts the results in bench/RESULTS.md, between the "live" markers.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bench_args "$@"

START_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${BUILD:-/work/main/build}
WORKLOADS=${WORKLOADS:-1x10000000 2x5000000 1x10000000s}
REPS=${REPS:-3}
SEED=${SEED:-1}
TARGET_EPS=${TARGET_EPS:-20000000}
RSS_SLACK_KB=${RSS_SLACK_KB:-2048}
CC=${CC:-gcc}
for v in REPS SEED TARGET_EPS RSS_SLACK_KB; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
((REPS >= 1)) || die "REPS must be >= 1"
for w in $WORKLOADS; do
	[[ $w =~ ^[1-9][0-9]*x[1-9][0-9]*s?$ ]] || die "WORKLOADS: '$w' is not THREADSxPAIRS[s] (e.g. 1x10000000)"
done
HT=$BUILD/heaptrail
[[ -x $HT ]] || die "no $HT: build heaptrail first (cmake -S . -B build && cmake --build build -j2)"
"$HT" live --help >/dev/null 2>&1 || die "$HT has no 'live' command"
TIME=/usr/bin/time
[[ -x $TIME ]] || die "no $TIME (GNU time, Debian package 'time'): it gives the child's CPU time and Max RSS"

bench_workdir "-live"
CFLAGS=(-std=gnu11 -O2 -Wall -Wextra -Wshadow -Wstrict-prototypes -Werror -pthread)
$CC "${CFLAGS[@]}" -o "$WORK/malloc_loop" "$HERE/malloc_loop.c" || die "cannot build malloc_loop"

# timed OUT CMD...: "wall user sys maxrss_kb" of CMD into OUT
timed() {
	local out=$1
	shift
	"$TIME" -f '%e %U %S %M' -o "$out" "$@" >/dev/null 2>"$out.stderr" ||
		{ cat "$out.stderr" >&2; die "failed: $*"; }
}

TABLE=$WORK/table
CHECKS=$WORK/checks
echo "| trace | events | command | wall s | CPU s | events/s per core | Max RSS KiB | Max RSS on a tenth |" >"$TABLE"
echo "|---|---:|---|---:|---:|---:|---:|---:|" >>"$TABLE"
: >"$CHECKS"
for w in $WORKLOADS; do
	th=${w%x*}
	pairs=${w#*x}
	stacks=()
	if [[ $pairs == *s ]]; then
		pairs=${pairs%s}
		stacks=(--stacks)
	fi
	for part in full tenth; do
		p=$pairs
		[[ $part == tenth ]] && p=$((pairs / 10))
		"$HT" record -q --no-compact "${stacks[@]}" -o "$WORK/$w.$part.ht" -- "$WORK/malloc_loop" "$th" "$p" "$SEED" \
			>/dev/null || die "record failed ($w)"
	done
	ev=$("$HT" stats --json "$WORK/$w.full.ht" | sed -n 's/^  "events": \([0-9]*\).*/\1/p')
	for cmd in "live --batch" "stats"; do
		walls=() cpus=() rss=() rss10=()
		for ((i = 0; i < REPS; i++)); do
			# shellcheck disable=SC2086
			timed "$WORK/t" "$HT" $cmd "$WORK/$w.full.ht"
			read -r wall u s m <"$WORK/t"
			walls+=("$wall")
			cpus+=("$(calc %.3f "$u + $s")")
			rss+=("$m")
			# shellcheck disable=SC2086
			timed "$WORK/t" "$HT" $cmd "$WORK/$w.tenth.ht"
			read -r _ _ _ m <"$WORK/t"
			rss10+=("$m")
		done
		W=$(median "${walls[@]}")
		C=$(median "${cpus[@]}")
		M=$(median "${rss[@]}")
		M10=$(median "${rss10[@]}")
		eps=$(calc %.0f "$ev / $C")
		echo "| $w | $ev | \`$cmd\` | $W | $C | $(calc %.1f "$eps / 1e6")M | $M | $M10 |" >>"$TABLE"
		if [[ $cmd == live* ]]; then
			echo "- $w: live reads $(calc %.1f "$eps / 1e6")M events/s per core (target $(calc %.0f "$TARGET_EPS / 1e6")M): $(verdict "$eps >= $TARGET_EPS")" >>"$CHECKS"
			echo "- $w: live's Max RSS $M KiB on the trace, $M10 KiB on a tenth of it (bounded: at most +$RSS_SLACK_KB KiB): $(verdict "$M <= $M10 + $RSS_SLACK_KB")" >>"$CHECKS"
		fi
	done
done
cat "$TABLE"
echo
cat "$CHECKS"

if ((WRITE)); then
	R=$HERE/RESULTS.md
	cmd="BUILD=$BUILD WORKLOADS='$WORKLOADS' REPS=$REPS SEED=$SEED bench/run_live.sh ${ORIG_ARGS[*]}"
	results_header "$CC"
	SECTION=$WORK/section
	{
		results_head live "live: the display's reading speed and memory (heaptrail live --batch)" "$cmd"
		echo "- traces as the recorder writes them (record --no-compact), which is what live follows; each command"
		echo "  run $REPS time(s); medians. CPU time and Max RSS are the child's (GNU time); events/s per core ="
		echo "  events / CPU seconds; stats for reference (the same reader and pass)."
		echo
		cat "$TABLE"
		echo
		cat "$CHECKS"
		echo "<!-- live:end -->"
	} >"$SECTION"
	results_write live "$SECTION" "$R"
	note "wrote $R"
fi
