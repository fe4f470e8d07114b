#!/usr/bin/env bash
# bench/run_realstacks.sh — the cost of `record --stacks` on real programs
# built without frame pointers (Debian's): gcc's cc1 -O2 compiling a
# generated C file (bench/gen_csource.py), Debian's /usr/bin/python3
# running bench/alloc_heavy.py, and Debian's node running
# bench/alloc_heavy.js (stacks through V8's JIT code and builtins, which
# no unwind information covers).  Side by side in one run, interleaved: no
# tracer, heaptrail record, heaptrail record --stacks, heaptrack (which
# always records stacks).  Whole process, start to exit with the trace
# final; medians of REPS runs.  Also each variant's user+system CPU time,
# and the system calls of a `record --stacks` run (strace -c -f), if
# strace is installed.
#
#   bench/run_realstacks.sh [--write] [--keep]
#
# Environment (defaults in brackets):
#   BUILD=[/work/main/build]  where heaptrail is built
#   REPS=[5]                  timed repetitions per variant
#   CC1=[gcc's cc1]           the compiler proper (gcc -print-prog-name=cc1)
#   FUNCS=[200]               function pairs in the generated C file (~22 lines each)
#   PYROUNDS=[150000]         rounds of bench/alloc_heavy.py
#   PYTHON=[/usr/bin/python3] the interpreter (Debian's, not a pyenv shim)
#   NODE=[/usr/bin/node]      Node.js (Debian's nodejs)
#   NODEROUNDS=[200000]       rounds of bench/alloc_heavy.js
#   WORKLOADS=["cc1 python3 node"] which to run (node left out if not installed)
# --write puts the results in bench/RESULTS.md, between the "realstacks" markers.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
bench_args "$@"
ms_now() { local s=${EPOCHREALTIME/[.,]/}; echo "${s:0:-3}"; }
BUILD=${BUILD:-/work/main/build}
REPS=${REPS:-5}
CC1=${CC1:-$(gcc -print-prog-name=cc1)}
FUNCS=${FUNCS:-200}
PYROUNDS=${PYROUNDS:-150000}
PYTHON=${PYTHON:-/usr/bin/python3}
NODE=${NODE:-/usr/bin/node}
NODEROUNDS=${NODEROUNDS:-200000}
if [[ -z ${WORKLOADS:-} ]]; then
	WORKLOADS="cc1 python3"
	if [[ -x $NODE ]]; then WORKLOADS+=" node"; else note "no $NODE (scripts/deps.sh bench): node left out"; fi
fi
HT=$BUILD/heaptrail
[[ -x $HT ]] || die "no $HT: build heaptrail first"
[[ -x $CC1 ]] || die "no cc1 at '$CC1' (set CC1)"
[[ -x $PYTHON ]] || die "no $PYTHON (set PYTHON)"
HK=$(command -v heaptrack || true)
[[ -n $HK ]] || note "heaptrack not installed (scripts/deps.sh bench): its column stays empty"
bench_workdir -realstacks
START_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
results_header gcc
PSI0=$(cpu_wait_us)
T0=$(ms_now)

"$PYTHON" "$HERE/gen_csource.py" "$FUNCS" >"$WORK/gen.c"
LINES=$(wc -l <"$WORK/gen.c")
declare -A CMD
CMD[cc1]="$CC1 -O2 -quiet $WORK/gen.c -o /dev/null"
CMD[python3]="$PYTHON $HERE/alloc_heavy.py $PYROUNDS"
CMD[node]="$NODE $HERE/alloc_heavy.js $NODEROUNDS"

# timed KEY CMD...: appends the whole run's wall ms to WALL[KEY] and its
# user+system CPU ms (children included) to CPU[KEY]
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
declare -A WALL CPU EVENTS
timed() {
	local key=$1 t0 t1
	shift
	t0=$(ms_now)
	/usr/bin/time -f "%U %S" -o "$WORK/cpu" "$@" >/dev/null 2>"$WORK/err" || { cat "$WORK/err" >&2; die "failed: $*"; }
	t1=$(ms_now)
	WALL[$key]+=" $((t1 - t0))"
	CPU[$key]+=" $(awk '{printf "%d", ($1 + $2) * 1000}' "$WORK/cpu")"
}
VARIANTS="none record stacks heaptrack"
[[ -n $HK ]] || VARIANTS="none record stacks"
for w in $WORKLOADS; do
	read -r -a cmd <<<"${CMD[$w]}"
	for ((r = 1; r <= REPS; r++)); do
		for v in $VARIANTS; do
			case $v in
			none) timed "$w,$v" "${cmd[@]}" ;;
			record) timed "$w,$v" "$HT" record -q -o "$WORK/r.ht" -- "${cmd[@]}" ;;
			stacks) timed "$w,$v" "$HT" record -q --stacks -o "$WORK/s.ht" -- "${cmd[@]}" ;;
			heaptrack) rm -f "$WORK"/hk.*; timed "$w,$v" "$HK" -o "$WORK/hk" "${cmd[@]}" ;;
			esac
		done
		note "$w rep $r done"
	done
	EVENTS[$w]=$("$HT" stats --json "$WORK/s.ht" | sed -n 's/^  "events": \([0-9]*\),/\1/p')
	if command -v strace >/dev/null; then
		strace -f -c -o "$WORK/strace-$w" "$HT" record -q --stacks -o "$WORK/st.ht" -- "${cmd[@]}" >/dev/null 2>&1 || true
	fi
done

PSI1=$(cpu_wait_us)
T1=$(ms_now)
CONTENTION=
if [[ -n $PSI0 && -n $PSI1 ]]; then
	CONTENTION=$(awk "BEGIN {printf \"%.0f\", ($PSI1 - $PSI0) / 10 / ($T1 - $T0)}")
fi
# ratio ADDED_A ADDED_B: "A/B PASS|FAIL" against the target of 1/3
ratio() { awk "BEGIN {if ($2 <= 0) {print \"—\"; exit} r = $1 / $2; printf \"%.2f %s\", r, (r <= 1 / 3 + 0.005 ? \"PASS\" : \"FAIL\")}"; }
TABLE=$WORK/table
{
	echo "| program | events | none ms | record ms | added | record --stacks ms | added | heaptrack ms | added | --stacks added / heaptrack added, wall (target <= 0.33) | CPU ms: none / record / --stacks / heaptrack | --stacks added / heaptrack added, CPU |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
	for w in $WORKLOADS; do
		n=$(echo "${WALL[$w,none]}" | median)
		rc=$(echo "${WALL[$w,record]}" | median)
		s=$(echo "${WALL[$w,stacks]}" | median)
		cn=$(echo "${CPU[$w,none]}" | median)
		cr=$(echo "${CPU[$w,record]}" | median)
		cs=$(echo "${CPU[$w,stacks]}" | median)
		k=— ka=— wr=— kc=— cratio=—
		if [[ -n $HK ]]; then
			k=$(echo "${WALL[$w,heaptrack]}" | median)
			ka=+$((k - n))
			wr=$(ratio $((s - n)) $((k - n)))
			kc=$(echo "${CPU[$w,heaptrack]}" | median)
			cratio=$(ratio $((cs - cn)) $((kc - cn)))
		fi
		echo "| $w | ${EVENTS[$w]} | $n | $rc | +$((rc - n)) | $s | +$((s - n)) | $k | $ka | $wr | $cn / $cr / $cs / $kc | $cratio |"
	done
	echo
	echo "Raw samples, in run order (wall ms; CPU ms), so that a median moved by a host's hiccup shows (a negative \"added\" is such noise):"
	echo
	for w in $WORKLOADS; do
		for v in none record stacks heaptrack; do
			[[ -n ${WALL[$w,$v]:-} ]] || continue
			echo "- $w, $v: wall${WALL[$w,$v]}; CPU${CPU[$w,$v]}"
		done
	done
} >"$TABLE"
STRACE=$WORK/strace
: >"$STRACE"
for w in $WORKLOADS; do
	[[ -s $WORK/strace-$w ]] || continue
	{
		echo
		echo "\`strace -f -c heaptrail record --stacks -- $w ...\` (${EVENTS[$w]} events; the recorder, its writer thread and the program):"
		echo
		echo '```'
		grep -v '^$' "$WORK/strace-$w" | head -n 14
		tail -n 1 "$WORK/strace-$w"
		echo '```'
	} >>"$STRACE"
done

cat "$TABLE" "$STRACE"

if ((WRITE)); then
	SECTION=$WORK/section
	{
		results_head realstacks "Stacks on real programs without frame pointers: record --stacks vs heaptrack" \
			"REPS=$REPS FUNCS=$FUNCS PYROUNDS=$PYROUNDS NODEROUNDS=$NODEROUNDS bench/run_realstacks.sh --write"
		echo "- peer: $($HK --version 2>/dev/null | head -n 1 || true)"
		[[ -n $CONTENTION ]] && echo "- CPU contention: some task waited for a CPU ${CONTENTION}% of the time during the whole run (Linux PSI; above ~5% expect noisy wall times: the CPU columns are steadier)"
		echo "- workloads: \`$(basename "$CC1") -O2\` (Debian's gcc 12, built without frame pointers) on a generated C file of $LINES lines (\`bench/gen_csource.py $FUNCS\`); Debian's \`$PYTHON\` running \`bench/alloc_heavy.py $PYROUNDS\`; Debian's \`$NODE\` running \`bench/alloc_heavy.js $NODEROUNDS\` (V8's JIT code and builtins: no unwind information).  Whole process, start to exit with the trace final, medians of $REPS interleaved runs (wall ms; CPU = user + system of the process tree)"
		echo
		cat "$TABLE" "$STRACE"
		echo "<!-- realstacks:end -->"
	} >"$SECTION"
	results_write realstacks "$SECTION" "$HERE/RESULTS.md"
	note "wrote $HERE/RESULTS.md"
fi
