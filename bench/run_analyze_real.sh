#!/usr/bin/env bash
# bench/run_analyze_real.sh — the analyzers on a real program's stacks
# (issue 21): gcc's cc1 (Debian's, without frame pointers) compiling a
# generated C file, recorded once with `heaptrail record --stacks` and once
# with heaptrack; then REPS rounds, each running every command below once
# on heaptrail's trace (with the default, serial reader and with -j 0, one
# thread per CPU), beside `heaptrail stats` on the same trace and
# `heaptrack_print` on heaptrack's trace of the same run of the same
# program.  Wall time, CPU time
# (user+sys) and Max RSS of each; medians; each stacked command's ratio to
# stats (target: at most 1.5) and to heaptrack_print (target: at most 1).
#
#   bench/run_analyze_real.sh [--write] [--keep]
#
# Environment (defaults in brackets):
#   BUILD=[/work/main/build]  where the heaptrail binary is
#   REPS=[5]                  timed runs of every command
#   FUNCS=[2500]              functions in the generated C file (about 2 lines each)
#   CC1=[the newest /usr/lib/gcc/x86_64-linux-gnu/*/cc1]
# --write puts the results in bench/RESULTS.md, between the "analyze_real"
# markers.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench_args "$@"
BUILD=${BUILD:-/work/main/build}
REPS=${REPS:-5}
FUNCS=${FUNCS:-2500}
CC1=${CC1:-$(ls /usr/lib/gcc/x86_64-linux-gnu/*/cc1 2>/dev/null | sort -V | tail -n 1)}
HT=$BUILD/heaptrail
[[ -x $HT ]] || die "no $HT: build heaptrail first"
[[ -x $CC1 ]] || die "no cc1 (apt-get install gcc)"
HK=$(command -v heaptrack || true)
HKP=$(command -v heaptrack_print || true)
[[ -n $HK && -n $HKP ]] || die "heaptrack and heaptrack_print are needed (scripts/deps.sh bench)"
START_DATE=$(date -u +%Y-%m-%dT%H:%MZ)
bench_workdir -areal

# the C file: FUNCS functions, each with a struct, a loop and a switch
python3 - "$FUNCS" >"$WORK/gen.c" <<'PY'
import sys
n = int(sys.argv[1])
for i in range(n):
    print(f"struct s{i} {{ int a; double b[{i % 7 + 1}]; }};")
    print(f"static int f{i}(int x) {{ struct s{i} v = {{x, {{0}}}}; int r = 0; "
          f"for (int k = 0; k < x; k++) {{ r += v.a * k + (int)v.b[0]; if (r > {i}) r -= {i * 3 + 1}; "
          f"switch (k & 3) {{ case 0: r ^= {i}; break; case 1: r += k * {i % 13}; break; "
          f"default: r -= 1; }} }} return r + f{max(i - 1, 0)}(x - 1); }}")
print(f"int main(void) {{ return f{n - 1}(3) & 1; }}")
PY
COMPILE=("$CC1" -O2 -quiet "$WORK/gen.c" -o /dev/null)
note "recording ${COMPILE[*]} with heaptrail record --stacks and with heaptrack"
"$HT" record -q --stacks -o "$WORK/cc1.ht" -- "${COMPILE[@]}"
(cd "$WORK" && "$HK" -o "$WORK/hk" "${COMPILE[@]}" >/dev/null 2>&1)
HKF=$(ls "$WORK"/hk*.zst "$WORK"/hk*.gz 2>/dev/null | head -n 1 || true)
[[ -n $HKF ]] || die "heaptrack wrote no trace"
EVENTS=$("$HT" stats --json "$WORK/cc1.ht" | python3 -c 'import json,sys; print(json.load(sys.stdin)["events"])')
# distinct stacks as the flame graph sees them (by function and line)
STACKS=$("$HT" flamegraph -q --folded "$WORK/cc1.ht" 2>/dev/null | wc -l)

# once NAME CMD...: one timed run; appends "NAME wall cpu rss" to $RAW
RAW=$WORK/raw
: >"$RAW"
once() {
	local name=$1
	shift
	/usr/bin/time -f "%e %U %S %M" -o "$WORK/t" "$@" >/dev/null 2>"$WORK/err" ||
		die "$name failed: $(tail -n 3 "$WORK/err")"
	read -r wall user sys rss <"$WORK/t"
	echo "$name $wall $(calc %.2f "$user + $sys") $rss" >>"$RAW"
}
# REPS rounds, each running every command once (interleaved, so that a
# slow spell of the host hits them all alike): heaptrail's with the default
# reader (serial) and with -j 0 (decoding threads, one per CPU), then
# heaptrack_print
CMDS=("stats" "top" "leaks" "flamegraph --folded" "report" "export -f pprof")
CPU_WAIT0=$(cpu_wait_us)
START_S=$(date +%s)
for ((i = 0; i < REPS; i++)); do
	for c in "${CMDS[@]}"; do
		read -ra argv <<<"$c"
		out=()
		[[ $c == report* || $c == export* ]] && out=(-o "$WORK/out")
		rm -f "$WORK/out"
		once "heaptrail $c" "$HT" "${argv[@]}" "${out[@]}" "$WORK/cc1.ht"
		rm -f "$WORK/out"
		once "heaptrail $c -j 0" "$HT" "${argv[@]}" -j 0 "${out[@]}" "$WORK/cc1.ht"
	done
	once "heaptrack_print" "$HKP" "$HKF"
done
CPU_WAIT1=$(cpu_wait_us)

col() { awk -v n="$1" -v k="$2" '{ name = $1; for (i = 2; i <= NF - 3; i++) name = name " " $i }
	name == n { print $(NF - 3 + k) }' "$RAW"; }
# shellcheck disable=SC2046
med() { median $(col "$1" "$2"); }
STATS_WALL=$(med "heaptrail stats" 1)
STATS1_WALL=$(med "heaptrail stats -j 0" 1)
HKP_WALL=$(med "heaptrack_print" 1)
TABLE=$WORK/table
{
	echo "| command | wall s | CPU s | wall s, -j 0 | CPU s, -j 0 | Max RSS MiB | wall / stats | wall / heaptrack_print | -j 0: wall / stats (-j 0) | -j 0: wall / heaptrack_print | targets (<= 1.5x stats, <= heaptrack_print), default / -j 0 |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
	for c in "${CMDS[@]}"; do
		n="heaptrail $c"
		w=$(med "$n" 1) cpu=$(med "$n" 2) rss=$(med "$n" 3)
		w1=$(med "$n -j 0" 1) cpu1=$(med "$n -j 0" 2)
		v="-"
		if [[ $c != stats ]]; then
			v="$(verdict "$w <= 1.5 * $STATS_WALL") $(verdict "$w <= $HKP_WALL") / $(verdict "$w1 <= 1.5 * $STATS1_WALL") $(verdict "$w1 <= $HKP_WALL")"
		else
			v="- $(verdict "$w <= $HKP_WALL") / - $(verdict "$w1 <= $HKP_WALL")"
		fi
		echo "| \`$n\` | $w | $cpu | $w1 | $cpu1 | $(calc %.0f "$rss / 1024") | $(calc %.2f "$w / $STATS_WALL") | $(calc %.2f "$w / $HKP_WALL") | $(calc %.2f "$w1 / $STATS1_WALL") | $(calc %.2f "$w1 / $HKP_WALL") | $v |"
	done
	w=$(med "heaptrack_print" 1) cpu=$(med "heaptrack_print" 2) rss=$(med "heaptrack_print" 3)
	echo "| \`heaptrack_print\` | $w | $cpu | - | - | $(calc %.0f "$rss / 1024") | $(calc %.2f "$w / $STATS_WALL") | 1.00 | $(calc %.2f "$w / $STATS1_WALL") | 1.00 | - |"
} >"$TABLE"
cat "$TABLE"
ELAPSED_S=$(( $(date +%s) - START_S ))
# Linux PSI: the share of the timed runs some task waited for a CPU
WAIT_PCT="?"
if [[ -n $CPU_WAIT0 && -n $CPU_WAIT1 ]] && ((ELAPSED_S > 0)); then
	WAIT_PCT=$(calc %.1f "($CPU_WAIT1 - $CPU_WAIT0) / 10000 / $ELAPSED_S")
fi

if ((WRITE)); then
	results_header gcc
	SECTION=$WORK/section
	{
		results_head analyze_real "analyzers on a real program's stacks (cc1 --stacks) beside heaptrack_print" \
			"BUILD=$BUILD REPS=$REPS FUNCS=$FUNCS bench/run_analyze_real.sh ${ORIG_ARGS[*]}"
		echo "- program: \`${COMPILE[*]}\` (a generated file of $FUNCS functions); heaptrail's trace: $EVENTS events,"
		echo "  $STACKS distinct stacks (folded); heaptrack's trace of the same compilation for heaptrack_print"
		echo "- $REPS rounds, each running every command once (interleaved); medians (wall, user+sys, ru_maxrss);"
		echo "  each heaptrail command with the default reader (serial) and with -j 0 (decoding threads, one per CPU)"
		echo "- CPU contention from other processes: some task waited for a CPU $WAIT_PCT% of the time (Linux PSI; above ~5% expect noisy wall times)"
		echo
		cat "$TABLE"
		echo
		echo "Raw samples (wall s per round):"
		echo
		for n in "${CMDS[@]}" heaptrack_print; do
			[[ $n == heaptrack_print ]] || n="heaptrail $n"
			echo "- \`$n\`: $(col "$n" 1 | tr '\n' ' ')"
			[[ $n == heaptrack_print ]] || echo "- \`$n -j 0\`: $(col "$n -j 0" 1 | tr '\n' ' ')"
		done
		echo
		echo "<!-- analyze_real:end -->"
	} >"$SECTION"
	results_write analyze_real "$SECTION" "$HERE/RESULTS.md"
	note "wrote $HERE/RESULTS.md"
fi
