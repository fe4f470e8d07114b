#!/usr/bin/env bash
# bench/run_analyze.sh — how fast the analyzers read a big trace, and in how
# much memory (see bench/README.md, "Analyzers"):
#   1. records bench/malloc_loop.c into a trace of at least 100 million
#      events per workload (2 threads x 25M malloc/free pairs by default, and
#      one thread x 50M pairs), timing the recording and the compaction
#      separately (record --no-compact, then heaptrail compact);
#   2. runs every analyzer command of the list REPS times on each trace,
#      with -j 1 (one thread: the figures per core are those of one core;
#      by default stats and timeline read in time slices and report reads
#      glibc's heap model beside the rest, which step 4 times),
#      output to a scratch directory, and reports wall time, CPU time
#      (user+sys of the child), Max RSS, and events per second per core
#      (events / CPU seconds);
#   3. runs each command once more on a trace of a tenth of the events and
#      compares Max RSS: memory bounded by the live set does not grow with
#      the trace (malloc_loop keeps one block live per thread);
#   4. every core on one trace: the commands of PAR_CMDS again on one core
#      (taskset -c 0: the serial reader, the default), REPS times, against
#      as many runs with -j 0 (all the CPUs: the reader's decoding threads,
#      docs/FORMAT.md "Reading with several threads"), and what
#      the machine gives two independent serial readers at once (two
#      `stats -j 1` side by side: the most any split of the work can win).
# Medians of REPS runs; a PASS/FAIL line per target.
#
#   bench/run_analyze.sh [--write] [--keep] [COMMAND...]
#
# COMMAND is an analyzer subcommand, with options if it needs them, as one
# argument ("stats", "timeline --bins 500"); the trace is appended.  By
# default: stats, and timeline and report when `heaptrail help` lists them.
#
# Environment (defaults in brackets):
#   BUILD=[/work/main/build]  where the heaptrail binary is
#   WORKLOADS=[2x25000000 1x50000000]
#                             traces to record, THREADSxPAIRS_PER_THREAD each
#                             (malloc_loop THREADS PAIRS SEED; 2 events a pair)
#   REPS=[3]                  timed runs of every command on every trace
#   SEED=[1]                  seed of malloc_loop's sizes
#   TARGET_EPS=[20000000]     events per second per core a command must reach
#   RSS_SLACK_KB=[2048]       Max RSS growth from the tenth trace to the full
#                             one that still counts as bounded (plus 10%)
#   PAR_CMDS=[stats timeline report]
#                             commands timed on one core against all of them
#   TARGET_SPEEDUP=[1.7]      wall time on one core / on all, at least
#   CC=[gcc]                  compiler for malloc_loop
# --write puts the results in bench/RESULTS.md, between the "analyze"
# markers; --keep (or KEEP=1) keeps the work directory with its traces
# (big: about 1 byte per event), which is removed otherwise.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BENCH_TAKES_ARGS=1 bench_args "$@"
CMDS=("${BENCH_ARGS[@]}")

T_START=$(date +%s)
START_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${BUILD:-/work/main/build}
WORKLOADS=${WORKLOADS:-2x25000000 1x50000000}
REPS=${REPS:-3}
SEED=${SEED:-1}
TARGET_EPS=${TARGET_EPS:-20000000}
RSS_SLACK_KB=${RSS_SLACK_KB:-2048}
PAR_CMDS=${PAR_CMDS:-stats timeline report}
TARGET_SPEEDUP=${TARGET_SPEEDUP:-1.7}
NCPU=$(nproc)
CC=${CC:-gcc}

for v in REPS SEED TARGET_EPS RSS_SLACK_KB; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
((REPS >= 1)) || die "REPS must be >= 1"
for w in $WORKLOADS; do
	[[ $w =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || die "WORKLOADS: '$w' is not THREADSxPAIRS (e.g. 2x25000000)"
done

HT=$BUILD/heaptrail
[[ -x $HT ]] || die "no $HT: build heaptrail first (cmake -S . -B build && cmake --build build -j2)"
TIME=/usr/bin/time
[[ -x $TIME ]] || die "no $TIME (GNU time, Debian package 'time'): it gives the child's CPU time and Max RSS"

if ((${#CMDS[@]} == 0)); then
	CMDS=(stats)
	HELP=$("$HT" help 2>&1 || true)
	for c in timeline report; do
		grep -qE "^  $c " <<<"$HELP" && CMDS+=("$c")
	done
fi
for c in "${CMDS[@]}"; do
	"$HT" ${c%% *} --help >/dev/null 2>&1 || die "$HT has no '${c%% *}' command"
done

bench_workdir "-analyze"

# ---------------------------------------------------------------- helpers


# timed OUT CMD...: runs CMD in the scratch directory, stdout to a file;
# writes "wall user sys maxrss_kb rc" to OUT
timed() {
	local out=$1 rc=0
	shift
	(cd "$WORK/scratch" && "$TIME" -f '%e %U %S %M' -o "$out.time" "$@" >"$out.stdout" 2>"$out.stderr") || rc=$?
	echo "$(tail -n 1 "$out.time") $rc" >"$out"
}

# ---------------------------------------------------------------- traces

CFLAGS=(-std=gnu11 -O2 -Wall -Wextra -Wshadow -Wstrict-prototypes -Werror -pthread)
$CC "${CFLAGS[@]}" -o "$WORK/malloc_loop" "$HERE/malloc_loop.c" || die "cannot build malloc_loop"
mkdir -p "$WORK/scratch"

declare -A EV REC_S COMPACT_S SIZE_B
# make_trace NAME THREADS PAIRS: records NAME.ht, timing record and compaction
make_trace() {
	local name=$1 th=$2 pairs=$3 t
	timed "$WORK/$name.rec" "$HT" record -q --no-compact -o "$WORK/$name.ht" -- \
		"$WORK/malloc_loop" "$th" "$pairs" "$SEED"
	read -r t _ _ _ rc <"$WORK/$name.rec"
	((rc == 0)) || { cat "$WORK/$name.rec.stderr" >&2; die "heaptrail record failed ($name)"; }
	REC_S[$name]=$t
	timed "$WORK/$name.cmp" "$HT" compact -q "$WORK/$name.ht"
	read -r t _ _ _ rc <"$WORK/$name.cmp"
	((rc == 0)) || { cat "$WORK/$name.cmp.stderr" >&2; die "heaptrail compact failed ($name)"; }
	COMPACT_S[$name]=$t
	SIZE_B[$name]=$(stat -c %s "$WORK/$name.ht")
	EV[$name]=$("$HT" stats --json "$WORK/$name.ht" | sed -n 's/^  "events": \([0-9]*\).*/\1/p')
	[[ -n ${EV[$name]} ]] || die "no event count from heaptrail stats --json ($name)"
}

declare -A S # "workload,command,metric" -> space-separated samples
add() { S[$1]+="$2 "; }

W0=$(cpu_wait_us)
T0=$(date +%s%N)
for w in $WORKLOADS; do
	th=${w%x*}
	pairs=${w#*x}
	note "recording $w (malloc_loop $th $pairs $SEED) and a tenth of it"
	make_trace "$w" "$th" "$pairs"
	make_trace "$w-tenth" "$th" $(((pairs + 9) / 10))
	for ((rep = 1; rep <= REPS; rep++)); do
		for c in "${CMDS[@]}"; do
			note "$w: $c (run $rep of $REPS)"
			# shellcheck disable=SC2086
			timed "$WORK/run" "$HT" $c -j 1 "$WORK/$w.ht"
			read -r wall user sys rss rc <"$WORK/run"
			if ((rc != 0)); then
				note "$c failed on $w (exit $rc):"
				tail -n 5 "$WORK/run.stderr" | sed 's/^/    /' >&2
				add "$w,$c,failed" 1
				continue
			fi
			add "$w,$c,wall" "$wall"
			add "$w,$c,cpu" "$(calc %.3f "$user + $sys")"
			add "$w,$c,rss" "$rss"
			rm -f "$WORK"/scratch/* "$WORK"/*-timeline.* "$WORK"/*.html 2>/dev/null || true
		done
	done
	for c in "${CMDS[@]}"; do
		# shellcheck disable=SC2086
		timed "$WORK/run" "$HT" $c -j 1 "$WORK/$w-tenth.ht"
		read -r _ _ _ rss rc <"$WORK/run"
		((rc == 0)) && add "$w,$c,rss10" "$rss"
		rm -f "$WORK"/scratch/* "$WORK"/*-timeline.* "$WORK"/*.html 2>/dev/null || true
	done
	# 4. one core against all of them, and two serial readers side by side
	for ((rep = 1; rep <= REPS; rep++)); do
		for c in $PAR_CMDS; do
			note "$w: $c on one core (run $rep of $REPS)"
			timed "$WORK/run" taskset -c 0 "$HT" "$c" "$WORK/$w.ht"
			read -r wall user sys rss rc <"$WORK/run"
			((rc == 0)) && add "$w,$c,wall1" "$wall" && add "$w,$c,cpu1" "$(calc %.3f "$user + $sys")"
			rm -f "$WORK"/scratch/* 2>/dev/null || true
			note "$w: $c with -j 0, one thread per CPU (run $rep of $REPS)"
			timed "$WORK/run" "$HT" "$c" -j 0 "$WORK/$w.ht"
			read -r wall user sys rss rc <"$WORK/run"
			((rc == 0)) && add "$w,$c,walln" "$wall" && add "$w,$c,cpun" "$(calc %.3f "$user + $sys")"
			rm -f "$WORK"/scratch/* 2>/dev/null || true
		done
		note "$w: two serial stats side by side (run $rep of $REPS)"
		t0=$(date +%s%N)
		(cd "$WORK/scratch" && "$HT" stats -j 1 "$WORK/$w.ht" >/dev/null & cd "$WORK/scratch" &&
			"$HT" stats -j 1 "$WORK/$w.ht" >/dev/null; wait)
		add "$w,pair" "$(calc %.3f "($(date +%s%N) - $t0) / 1e9")"
		timed "$WORK/run" "$HT" stats -j 1 "$WORK/$w.ht"
		read -r wall _ _ _ rc <"$WORK/run"
		((rc == 0)) && add "$w,alone" "$wall"
	done
	((KEEP)) || rm -f "$WORK/$w.ht" "$WORK/$w-tenth.ht"
done
W1=$(cpu_wait_us)
ELAPSED_NS=$(($(date +%s%N) - T0))
CONTENTION=
if [[ -n $W0 && -n $W1 ]] && ((ELAPSED_NS > 0)); then
	CONTENTION=$(calc %.1f "($W1 - $W0) * 1000 * 100 / $ELAPSED_NS")
fi

# ---------------------------------------------------------------- report

med() { median ${S[$1]}; }

TABLE=$WORK/table
CHECKS=$WORK/checks
RAW=$WORK/raw
TRACES=$WORK/traces
{
	echo "| trace | events | loop threads | recording (record --no-compact) | compaction (compact) | size | bytes/event |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	for w in $WORKLOADS; do
		# shellcheck disable=SC2016
		printf '| `malloc_loop %s %s %s` | %s | %s | %.1f s | %.1f s | %.1f MiB | %.2f |\n' \
			"${w%x*}" "${w#*x}" "$SEED" "${EV[$w]}" "${w%x*}" "${REC_S[$w]}" "${COMPACT_S[$w]}" \
			"$(calc %.3f "${SIZE_B[$w]} / 1048576")" "$(calc %.4f "${SIZE_B[$w]} / ${EV[$w]}")"
	done
} >"$TRACES"
{
	echo "| trace | command | wall s | CPU s (user+sys) | cores used (CPU / wall) | M events/s per core | M events/s (wall) | Max RSS | Max RSS, a tenth of the events |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
	for w in $WORKLOADS; do
		for c in "${CMDS[@]}"; do
			if [[ -z ${S[$w,$c,cpu]:-} ]]; then
				echo "| $w | \`$c\` | failed | | | | | | |"
				continue
			fi
			wall=$(med "$w,$c,wall")
			cpu=$(med "$w,$c,cpu")
			rss=$(med "$w,$c,rss")
			r10=${S[$w,$c,rss10]:-}
			# shellcheck disable=SC2016
			printf '| %s | `%s` | %.2f | %.2f | %.2f | %.1f | %.1f | %.1f MiB | %s |\n' \
				"$w" "$c" "$wall" "$cpu" "$(calc %.3f "$cpu / ($wall > 0 ? $wall : 1)")" \
				"$(calc %.3f "${EV[$w]} / ($cpu > 0 ? $cpu : 0.001) / 1e6")" \
				"$(calc %.3f "${EV[$w]} / ($wall > 0 ? $wall : 0.001) / 1e6")" \
				"$(calc %.3f "$rss / 1024")" \
				"$([[ -n $r10 ]] && calc '%.1f MiB' "$r10 / 1024" || echo failed)"
		done
	done
} >"$TABLE"
PARTABLE=$WORK/partable
{
	echo "| trace | command | wall s, one core (taskset -c 0) | wall s, all $NCPU CPUs (-j 0) | speed-up | CPU s, one core | CPU s, all CPUs | two serial \`stats\` side by side: throughput vs one |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|"
	for w in $WORKLOADS; do
		ceil=
		if [[ -n ${S[$w,pair]:-} && -n ${S[$w,alone]:-} ]]; then
			ceil=$(calc %.2f "2 * $(med "$w,alone") / $(med "$w,pair")")
		fi
		for c in $PAR_CMDS; do
			if [[ -z ${S[$w,$c,wall1]:-} || -z ${S[$w,$c,walln]:-} ]]; then
				echo "| $w | \`$c\` | failed | | | | | |"
				continue
			fi
			w1=$(med "$w,$c,wall1")
			wn=$(med "$w,$c,walln")
			printf '| %s | `%s` | %.2f | %.2f | %.2fx | %.2f | %.2f | %sx |\n' "$w" "$c" "$w1" "$wn" \
				"$(calc %.3f "$w1 / ($wn > 0 ? $wn : 0.001)")" "$(med "$w,$c,cpu1")" \
				"$(med "$w,$c,cpun")" "${ceil:-?}"
		done
	done
} >"$PARTABLE"
{
	for w in $WORKLOADS; do
		for c in $PAR_CMDS; do
			[[ -n ${S[$w,$c,wall1]:-} && -n ${S[$w,$c,walln]:-} ]] || continue
			w1=$(med "$w,$c,wall1")
			wn=$(med "$w,$c,walln")
			c1=$(med "$w,$c,cpu1")
			echo "- \`$c\` on $w, one core (the serial reader): $(calc %.1f "${EV[$w]} / ($c1 > 0 ? $c1 : 0.001) / 1e6") M events/s per core (events / CPU time; target >= $(calc %.0f "$TARGET_EPS / 1e6") M): $(verdict "${EV[$w]} / ($c1 > 0 ? $c1 : 0.001) >= $TARGET_EPS")"
			echo "- \`$c\` on $w: $(calc %.2f "$w1 / ($wn > 0 ? $wn : 0.001)")x faster in wall time on all $NCPU CPUs than on one (target >= ${TARGET_SPEEDUP}x): $(verdict "$w1 >= $TARGET_SPEEDUP * $wn")"
		done
	done
} >"$WORK/parchecks"
{
	for w in $WORKLOADS; do
		for c in "${CMDS[@]}"; do
			if [[ -z ${S[$w,$c,cpu]:-} ]]; then
				echo "- \`$c\` on $w: the command failed: FAIL"
				continue
			fi
			cpu=$(med "$w,$c,cpu")
			eps=$(calc %.1f "${EV[$w]} / ($cpu > 0 ? $cpu : 0.001) / 1e6")
			echo "- \`$c\` on $w (${EV[$w]} events): $eps M events/s per core (events / CPU time; target >= $(calc %.0f "$TARGET_EPS / 1e6") M): $(verdict "${EV[$w]} / ($cpu > 0 ? $cpu : 0.001) >= $TARGET_EPS")"
			rss=$(med "$w,$c,rss")
			r10=${S[$w,$c,rss10]:-}
			if [[ -n $r10 ]]; then
				echo "- \`$c\` on $w: Max RSS $(calc %.1f "$rss / 1024") MiB, $(calc %.1f "$r10 / 1024") MiB on a tenth of the events (bounded by the live set, not the trace length: at most 10% + $RSS_SLACK_KB KiB more): $(verdict "$rss <= $r10 * 1.1 + $RSS_SLACK_KB")"
			else
				echo "- \`$c\` on $w: no Max RSS on a tenth of the events (the run failed): FAIL"
			fi
		done
	done
	cat "$WORK/parchecks"
	if [[ -n $CONTENTION ]]; then
		echo "- CPU contention from other processes: some task waited for a CPU ${CONTENTION}% of the time (Linux PSI; above ~5% expect noisy wall times, CPU times suffer less)"
	fi
	echo "- the whole run took $(($(date +%s) - T_START)) s (build, recordings and compactions included)"
} >"$CHECKS"
{
	for w in $WORKLOADS; do
		for c in "${CMDS[@]}"; do
			line=
			for k in wall cpu rss rss10 wall1 cpu1 walln cpun; do
				[[ -n ${S[$w,$c,$k]:-} ]] && line+="; $k ${S[$w,$c,$k]% }"
			done
			[[ -n $line ]] && echo "- $w \`$c\`${line}"
		done
		[[ -n ${S[$w,pair]:-} ]] && echo "- $w two \`stats -j 1\` side by side: wall ${S[$w,pair]% }; one alone: ${S[$w,alone]% }"
	done
} >"$RAW"

echo
cat "$TRACES"
echo
cat "$TABLE"
echo
cat "$PARTABLE"
echo
cat "$CHECKS"

# ---------------------------------------------------------------- RESULTS.md

if ((WRITE)); then
	R=$HERE/RESULTS.md
	cmd="BUILD=$BUILD WORKLOADS='$WORKLOADS' REPS=$REPS SEED=$SEED TARGET_EPS=$TARGET_EPS bench/run_analyze.sh ${ORIG_ARGS[*]}"
	results_header "$CC"
	SECTION=$WORK/section
	{
		results_head analyze "analyzers: events per second per core and Max RSS on 100M-event traces" "$cmd"
		echo "- each command run $REPS time(s) on each trace with \`-j 1\` (one thread), output to a scratch directory; medians. CPU time and Max RSS are"
		echo "  the child's (GNU time: user+sys, ru_maxrss); events/s per core = the trace's events / CPU seconds"
		echo
		echo "### Traces"
		echo
		cat "$TRACES"
		echo
		echo "### Commands"
		echo
		cat "$TABLE"
		echo
		echo "### One core against all of them"
		echo
		echo "- one core: \`taskset -c 0 heaptrail CMD\` (the reader sees one CPU and decodes serially, as with -j 1);"
		echo "  all CPUs: \`heaptrail CMD -j 0\`: \`stats\` and \`timeline\` read the trace in $NCPU time slices, one thread each, and add"
		echo "  them up (docs/FORMAT.md \"Time slices\"); \`report\` reads glibc's heap model on a thread of its own, with a reader"
		echo "  of its own, beside the rest (docs/FORMAT.md \"What report in slices still needs\"); other commands merge and analyse"
		echo "  on the caller's thread while $((NCPU - 1)) decoding thread(s) decode ahead. The last column is the ceiling any split of the work can reach here:"
		echo "  two independent \`stats -j 1\` on the trace at once, their throughput against one alone"
		echo
		cat "$PARTABLE"
		echo
		echo "### Targets"
		echo
		cat "$CHECKS"
		echo
		echo "### Raw samples"
		echo
		cat "$RAW"
		echo "<!-- analyze:end -->"
	} >"$SECTION"
	results_write analyze "$SECTION" "$R"
	note "wrote $R"
fi
