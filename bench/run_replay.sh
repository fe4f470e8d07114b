#!/usr/bin/env bash
# bench/run_replay.sh — what `heaptrail replay` costs and how faithful it is,
# measured side by side in one run (see bench/README.md, "Replay"):
#   1. the engine's overhead per op (wall time minus the timed calls, per
#      op) replaying bench/malloc_loop.c with one thread (in main) and with
#      two independent threads, next to the program run natively;
#   2. the cost of a hand-off between threads: the replay of
#      tests/progs/handoff next to bench/handoff_cost.c's mutex+condvar and
#      atomic-counter ping-pongs;
#   3. the replay's Max RSS under glibc against the traced program's own
#      peak RSS (bench/replay_loop.c, a ~RSS_MB MiB written heap);
#   4. the floor under 1.: bench/timer_floor.c times malloc_loop's calls
#      with the engine's rdtsc..rdtscp and no engine at all (in main, and
#      in two threads at once), so the time outside its windows is the
#      timer's alone.
# Medians of REPS interleaved runs, after WARMUP untimed rounds.
#
#   bench/run_replay.sh [--write] [--keep]
#
# Environment (defaults in brackets):
#   BUILD=[/work/main/build]  where the heaptrail binary and tests/progs/handoff are
#   REPS=[5]                  timed repetitions of every measurement (interleaved)
#   PAIRS=[2000000]           malloc/free pairs per thread of the malloc_loop workloads
#   HANDOFFS=[100000]         rounds of tests/progs/handoff (2 hand-offs a round)
#   HANDOFF_ROUNDS=[20000]    rounds per scheme of bench/handoff_cost (a mutex+condvar
#                             hand-off takes ~20 us on this VM: keep it modest)
#   RSS_MB=[128]              live heap bench/replay_loop builds, in MiB
#   SEED=[1]                  seed of malloc_loop's and replay_loop's sizes
#   WARMUP=[1]                untimed rounds before the timed ones
#   CC=[gcc]                  compiler for the bench programs
# --write puts the results in bench/RESULTS.md, between the "replay" markers;
# --keep keeps the work directory (traces, workloads, JSON of every replay).
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bench_args "$@"

T_START=$(date +%s%N)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${BUILD:-/work/main/build}
REPS=${REPS:-5}
PAIRS=${PAIRS:-2000000}
HANDOFFS=${HANDOFFS:-100000}
HANDOFF_ROUNDS=${HANDOFF_ROUNDS:-20000}
RSS_MB=${RSS_MB:-128}
SEED=${SEED:-1}
WARMUP=${WARMUP:-1}
CC=${CC:-gcc}

for v in REPS PAIRS HANDOFFS HANDOFF_ROUNDS RSS_MB SEED WARMUP; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
((REPS >= 1)) || die "REPS must be >= 1"
((PAIRS >= 1 && HANDOFFS >= 1 && HANDOFF_ROUNDS >= 1 && RSS_MB >= 1)) ||
	die "PAIRS, HANDOFFS, HANDOFF_ROUNDS and RSS_MB must be >= 1"

HT=$BUILD/heaptrail
HANDOFF=$BUILD/tests/progs/handoff
[[ -x $HT ]] || die "no $HT: build heaptrail first (cmake -S . -B build && cmake --build build -j2)"
[[ -x $HANDOFF ]] || die "no $HANDOFF: build the tests' programs (cmake --build build -j2)"
"$HT" replay --help >/dev/null 2>&1 || die "$HT has no replay command"

bench_workdir "-replay"

# ---------------------------------------------------------------- helpers


# The numbers of `heaptrail replay --json` output FILE as key=value lines;
# keys of nested objects as OBJECT.key (avg_cycles.malloc).
jflat() {
	awk '
	/^  "[A-Za-z0-9_]+": \{/ { match($0, /"[^"]+"/); sec = substr($0, RSTART + 1, RLENGTH - 2) "."; next }
	/^  \}/ { sec = ""; next }
	/^ +"[A-Za-z0-9_]+": -?[0-9]/ {
		match($0, /"[^"]+"/); k = substr($0, RSTART + 1, RLENGTH - 2)
		v = $0; sub(/^[^:]*: */, "", v); sub(/,$/, "", v)
		print sec k "=" v
	}' "$1"
}

# ---------------------------------------------------------------- build

CFLAGS=(-std=gnu11 -O2 -Wall -Wextra -Wshadow -Wstrict-prototypes -Werror -pthread)
$CC "${CFLAGS[@]}" -o "$WORK/malloc_loop" "$HERE/malloc_loop.c" || die "cannot build malloc_loop"
$CC "${CFLAGS[@]}" -o "$WORK/handoff_cost" "$HERE/handoff_cost.c" || die "cannot build handoff_cost"
$CC "${CFLAGS[@]}" -o "$WORK/replay_loop" "$HERE/replay_loop.c" || die "cannot build replay_loop"
$CC "${CFLAGS[@]}" -o "$WORK/timer_floor" "$HERE/timer_floor.c" || die "cannot build timer_floor"

TIME=$(command -v /usr/bin/time || true) # for the native program's ru_maxrss

# ---------------------------------------------------------------- workloads

# record NAME CMD...: trace the command, convert the trace to NAME.wl
record() {
	local name=$1
	shift
	"$HT" record -q -o "$WORK/$name.ht" -- "$@" >"$WORK/$name.record.log" 2>&1 ||
		{ tail -n 20 "$WORK/$name.record.log" >&2; die "heaptrail record failed on: $*"; }
	"$HT" convert --json "$WORK/$name.wl" "$WORK/$name.ht" >"$WORK/$name.convert.json" 2>&1 ||
		{ cat "$WORK/$name.convert.json" >&2; die "heaptrail convert failed on the trace of: $*"; }
}

ST_CMD="malloc_loop 0 $PAIRS $SEED"
MT_CMD="malloc_loop 2 $PAIRS $SEED"
HO_CMD="handoff $HANDOFFS"
RL_CMD="replay_loop $RSS_MB $SEED"
note "recording and converting the workloads"
record st "$WORK/malloc_loop" 0 "$PAIRS" "$SEED"
record mt "$WORK/malloc_loop" 2 "$PAIRS" "$SEED"
record ho "$HANDOFF" "$HANDOFFS"
record rl "$WORK/replay_loop" "$RSS_MB" "$SEED"
((KEEP)) || rm -f "$WORK"/*.ht

# ---------------------------------------------------------------- one run

declare -A S    # "WHAT,metric" -> space-separated samples
declare -A FAILED
declare -A CW CR # per workload (st, mt, ho): PSI wait (us) and run time (ns) of its timed runs

# cont_add NAME W0 T0: a timed run of workload NAME that began at PSI wait
# W0 and time T0 has ended
cont_add() {
	local w1
	w1=$(cpu_wait_us)
	[[ -n $2 && -n $w1 ]] || return 0
	CW[$1]=$((${CW[$1]:-0} + w1 - $2))
	CR[$1]=$((${CR[$1]:-0} + $(now_ns) - $3))
}

add() { S[$1]+="$2 "; }

# replay NAME TOUCH REP: replay NAME.wl, keep its numbers under NAME
replay() {
	local name=$1 touch=$2 rep=$3 out w0 t0
	out=$WORK/$name-replay-$rep.json
	w0=$(cpu_wait_us)
	t0=$(now_ns)
	if ! "$HT" replay --touch "$touch" --json "$WORK/$name.wl" >"$out" 2>"$out.err"; then
		note "replay of $name failed (rep $rep):"
		tail -n 5 "$out.err" | sed 's/^/    /' >&2
		FAILED[$name]=1
		return 0
	fi
	((rep > 0)) || return 0
	cont_add "$name" "$w0" "$t0"
	declare -A J=()
	local k v
	while IFS='=' read -r k v; do J[$k]=$v; done < <(jflat "$out")
	local tsc=${J[tsc_per_ns]:-0} thr=${J[threads]:-1} ops=${J[ops]:-0}
	if ! awk "BEGIN { exit !($tsc > 0 && $ops > 0) }"; then
		note "replay of $name printed no usable numbers (rep $rep)"
		FAILED[$name]=1
		return 0
	fi
	local wallc
	wallc=$(calc %.0f "${J[wall_usec]} * 1000 * $tsc")
	add "$name,bk" "${J[bookkeeping_ns_per_op]}"
	# the issue's figure: wall time minus call time, per op, with the wall
	# counted once per thread that runs the program's work: all threads but
	# main when there are others (main only starts them, makes a few calls
	# and waits), else main; waits count as overhead
	local loopthr=$thr
	((thr > 1)) && loopthr=$((thr - 1))
	add "$name,bkwall" "$(calc %.3f "($wallc * $loopthr - ${J[total_call_cycles]}) / $tsc / $ops")"
	add "$name,wall_ms" "$(calc %.3f "${J[wall_usec]} / 1000")"
	add "$name,malloc_cyc" "${J[avg_cycles.malloc]}"
	add "$name,free_cyc" "${J[avg_cycles.free]}"
	add "$name,malloc_ns" "$(calc %.2f "${J[avg_cycles.malloc]} / $tsc")"
	add "$name,free_ns" "$(calc %.2f "${J[avg_cycles.free]} / $tsc")"
	add "$name,call_ms" "$(calc %.1f "${J[total_call_cycles]} / $tsc / 1e6")"
	add "$name,wait_ms" "$(calc %.1f "${J[wait_cycles]} / $tsc / 1e6")"
	add "$name,tsc" "$tsc"
	add "$name,waits_blocked" "${J[waits_blocked]}"
	add "$name,max_rss_kb" "${J[max_rss_kb]}"
	add "$name,max_rss_start_kb" "${J[max_rss_start_kb]}"
	add "$name,rss_start_kb" "${J[rss_start_kb]}"
	add "$name,rss_peak_kb" "${J[rss_peak_kb]}"
	S[$name,ops]=$ops
	S[$name,threads]=$thr
	S[$name,waits]=${J[waits]}
	S[$name,calls]=$(calc %.0f "${J[calls.malloc]:-0} + ${J[calls.free]:-0} + ${J[calls.calloc]:-0} + ${J[calls.realloc]:-0}")
	S[$name,ideal]=${J[max_ideal_rss_bytes]:-0}
	if [[ ${J[slot_errors]:-0} != 0 ]]; then
		note "replay of $name reported ${J[slot_errors]} slot errors (rep $rep)"
		S[$name,slot_errors]=${J[slot_errors]}
	fi
	if [[ $name == ho ]]; then
		local waits=${J[waits]} blk=${J[waits_blocked]}
		if ((waits > 0)); then
			# the two threads that hand blocks to each other each spend the
			# whole wall time; what is not a timed call is sync + bookkeeping
			add ho,sync_ns "$(calc %.1f "($wallc * 2 - ${J[total_call_cycles]}) / $tsc / $waits")"
			add ho,wait_per_wait_ns "$(calc %.1f "${J[wait_cycles]} / $tsc / $waits")"
			add ho,blocked_pct "$(calc %.1f "100 * $blk / $waits")"
			if ((blk > 0)); then
				add ho,wait_per_blocked_ns "$(calc %.1f "${J[wait_cycles]} / $tsc / $blk")"
			fi
		fi
	fi
	((KEEP)) || rm -f "$out" "$out.err"
}

# native_loop NAME THREADS REP: malloc_loop natively
native_loop() {
	local name=$1 t=$2 rep=$3 log w0 t0 ns
	log=$WORK/$name-native-$rep.log
	w0=$(cpu_wait_us)
	t0=$(now_ns)
	if ! "$WORK/malloc_loop" "$t" "$PAIRS" "$SEED" >"$log" 2>&1; then
		note "malloc_loop $t failed (rep $rep)"
		FAILED[$name-native]=1
		return 0
	fi
	((rep > 0)) || return 0
	cont_add "$name" "$w0" "$t0"
	ns=$(field ns_per_pair <"$log")
	[[ -n $ns ]] && add "$name,native_ns" "$ns"
}

# timer_floor KEY THREADS REP: the timed loop without the engine (st's
# sizes in main for THREADS 0, mt's in 2 threads at once for 2)
timer_floor() {
	local key=$1 t=$2 rep=$3 line
	if ! line=$("$WORK/timer_floor" "$PAIRS" "$SEED" "$t" 2>&1); then
		note "timer_floor $t failed (rep $rep): $line"
		FAILED[$key]=1
		return 0
	fi
	((rep > 0)) || return 0
	add "$key,outside_ns" "$(field outside_ns <<<"$line")"
	add "$key,outside_cyc" "$(field outside_cyc <<<"$line")"
	add "$key,window_cyc" "$(field window_cyc <<<"$line")"
	add "$key,untimed_cyc" "$(field untimed_cyc <<<"$line")"
}

# handoff_cost MODE REP
handoff_cost() {
	local m=$1 rep=$2 line
	if ! line=$("$WORK/handoff_cost" "$m" "$HANDOFF_ROUNDS" 2>&1); then
		note "handoff_cost $m failed (rep $rep): $line"
		FAILED[hc-$m]=1
		return 0
	fi
	((rep > 0)) || return 0
	add "hc-$m,ns" "$(field ns_per_handoff <<<"$line")"
	add "hc-$m,blocked_pct" "$(calc %.1f "100 * $(field blocked <<<"$line") / $(field handoffs <<<"$line")")"
	add "hc-$m,sleeps_pct" "$(calc %.1f "100 * $(field sleeps <<<"$line") / $(field handoffs <<<"$line")")"
}

# native_handoff REP: the traced program itself, timed from the shell
native_handoff() {
	local rep=$1 t0 t1 w0
	w0=$(cpu_wait_us)
	t0=$(now_ns)
	"$HANDOFF" "$HANDOFFS" >/dev/null 2>&1 || { FAILED[ho-native]=1; return 0; }
	t1=$(now_ns)
	((rep > 0)) || return 0
	cont_add ho "$w0" "$t0"
	add ho,native_ms "$(calc %.1f "($t1 - $t0) / 1e6")"
}

# native_rss REP: replay_loop's own peak RSS, as its parent sees it
native_rss() {
	local rep=$1 log=$WORK/rl-native-$1.log kb
	if [[ -n $TIME ]]; then
		"$TIME" -f 'child_maxrss_kb=%M' "$WORK/replay_loop" "$RSS_MB" "$SEED" >"$log" 2>&1 ||
			{ note "replay_loop failed (rep $rep)"; FAILED[rl-native]=1; return 0; }
		kb=$(field child_maxrss_kb <"$log")
	else
		"$WORK/replay_loop" "$RSS_MB" "$SEED" >"$log" 2>&1 ||
			{ note "replay_loop failed (rep $rep)"; FAILED[rl-native]=1; return 0; }
		kb=$(field maxrss_kb <"$log") # its own getrusage, the same number
	fi
	((rep > 0)) || return 0
	add rl,native_maxrss_kb "$kb"
	add rl,native_base_kb "$(field maxrss_base_kb <"$log")"
	S[rl,native_live]=$(field peak_live_bytes <"$log")
}

# ---------------------------------------------------------------- measure

START_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
note "reps: $REPS (+$WARMUP warm-up); pairs/thread: $PAIRS; handoff rounds: $HANDOFFS; handoff_cost rounds: $HANDOFF_ROUNDS; heap: $RSS_MB MiB"
for ((rep = 1 - WARMUP; rep <= REPS; rep++)); do
	r=$rep
	((r < 0)) && r=0
	native_loop st 0 "$r"
	[[ -n ${FAILED[st]:-} ]] || replay st none "$r"
	[[ -n ${FAILED[tf]:-} ]] || timer_floor tf 0 "$r"
	native_loop mt 2 "$r"
	[[ -n ${FAILED[mt]:-} ]] || replay mt none "$r"
	[[ -n ${FAILED[tf2]:-} ]] || timer_floor tf2 2 "$r"
	native_handoff "$r"
	[[ -n ${FAILED[ho]:-} ]] || replay ho none "$r"
	for m in mutex mutex1 counter; do
		[[ -n ${FAILED[hc-$m]:-} ]] || handoff_cost "$m" "$r"
	done
	native_rss "$r"
	[[ -n ${FAILED[rl]:-} ]] || replay rl page "$r"
	if ((rep > 0)); then note "rep $rep/$REPS done"; fi
done
ELAPSED_S=$(calc %.0f "($(now_ns) - $T_START) / 1e9")

# CPU contention per workload: the share of its timed runs' time during
# which some task waited for a CPU (Linux PSI "some"); for st one busy
# thread on 2 CPUs, for mt and ho two, so any other busy task shows
declare -A CONTENTION
for w in st mt ho; do
	((${CR[$w]:-0} > 0)) || continue
	CONTENTION[$w]=$(calc %.1f "100 * ${CW[$w]} * 1000 / ${CR[$w]}")
	if awk "BEGIN { exit !(${CONTENTION[$w]} > 5) }"; then
		note "CPU contention: some task waited for a CPU ${CONTENTION[$w]}% of the time during the $w runs: expect noisy numbers"
	fi
done

# ---------------------------------------------------------------- report

# med KEY: median of the samples of KEY (empty if none)
# shellcheck disable=SC2086  # the samples are space-separated words
med() { [[ -n ${S[$1]:-} ]] || return 0; median ${S[$1]}; }
# shellcheck disable=SC2086
rng() { [[ -n ${S[$1]:-} ]] || return 0; range ${S[$1]}; }

OVERHEAD=$WORK/overhead.md
HANDOFF_T=$WORK/handoff.md
RSS_T=$WORK/rss.md
CHECKS=$WORK/checks.md
RAW=$WORK/raw.md

{
	echo "| workload | threads replayed | ops | waits (blocked) | native ns/pair | replay ns/pair (wall) | malloc: avg cycles (ns) | free: avg cycles (ns) | bookkeeping_ns_per_op (engine) | min..max | (wall x loop threads - call time) / ops, ns | min..max |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for w in st mt; do
		if [[ $w == st ]]; then label="single thread (\`$ST_CMD\`)"; else label="2 threads (\`$MT_CMD\`)"; fi
		if [[ -n ${FAILED[$w]:-} || -z ${S[$w,bk]:-} ]]; then
			echo "| $label | | | | $(med "$w,native_ns") | failed | | | | | | |"
			continue
		fi
		thr=${S[$w,threads]}
		[[ $w == mt ]] && thr="$thr (main + 2)"
		# the replay's own per-thread time per pair, like malloc_loop's ns_per_pair
		rpp=$(calc %.1f "$(med "$w,wall_ms") * 1e6 / $PAIRS")
		printf '| %s | %s | %s | %s (%.0f) | %.1f | %s | %.1f (%.1f) | %.1f (%.1f) | %.1f | %s | %.1f | %s |\n' \
			"$label" "$thr" "${S[$w,ops]}" "${S[$w,waits]}" "$(med "$w,waits_blocked")" "$(med "$w,native_ns")" "$rpp" \
			"$(med "$w,malloc_cyc")" "$(med "$w,malloc_ns")" "$(med "$w,free_cyc")" "$(med "$w,free_ns")" \
			"$(med "$w,bk")" "$(rng "$w,bk")" "$(med "$w,bkwall")" "$(rng "$w,bkwall")"
	done
} >"$OVERHEAD"

{
	echo "| hand-off | hand-offs per run | ns per hand-off (median) | min..max | found the value not there yet | slept (futex / cond_wait) | mutex+condvar / this |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	mx=$(med hc-mutex,ns)
	if [[ -n ${S[ho,sync_ns]:-} ]]; then
		h=$(med ho,sync_ns)
		ratio="—"
		[[ -n $mx ]] && ratio=$(calc %.1fx "$mx / $h")
		# shellcheck disable=SC2016  # backquotes are Markdown here
		printf '| replay of `%s` (engine: (2 x wall - call time) / waits) | %s | %.0f | %s | %s%% | — | %s |\n' \
			"$HO_CMD" "${S[ho,waits]}" "$h" "$(RANGE_FMT=%.0f rng ho,sync_ns)" "$(med ho,blocked_pct)" "$ratio"
	else
		echo "| replay of \`$HO_CMD\` | | failed | | | | |"
	fi
	for m in counter mutex mutex1; do
		case $m in
		counter) label="handoff_cost counter: the engine's scheme alone (atomic counter, spin, futex)" ;;
		mutex) label="handoff_cost mutex: a mutex + condvar pair per hand-off (trace_run)" ;;
		mutex1) label="handoff_cost mutex1: one mutex + condvar pair per direction, reused" ;;
		esac
		if [[ -z ${S[hc-$m,ns]:-} ]]; then
			echo "| $label | | failed | | | | |"
			continue
		fi
		x=$(med "hc-$m,ns")
		ratio="—"
		[[ -n $mx ]] && ratio=$(calc %.1fx "$mx / $x")
		printf '| %s | %s | %.0f | %s | %s%% | %s%% | %s |\n' "$label" "$((2 * HANDOFF_ROUNDS))" "$x" \
			"$(RANGE_FMT=%.0f rng "hc-$m,ns")" "$(med "hc-$m,blocked_pct")" "$(med "hc-$m,sleeps_pct")" "$ratio"
	done
} >"$HANDOFF_T"

RSS_RATIO=
{
	echo "| program | native peak RSS (ru_maxrss) | native RSS before the heap | replay max_rss_kb | replay max_rss_start_kb | replay growth + native baseline | compared: that / native peak | raw: max_rss_kb / native peak | peak live bytes |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	if [[ -n ${S[rl,max_rss_kb]:-} && -n ${S[rl,native_maxrss_kb]:-} ]]; then
		nat=$(med rl,native_maxrss_kb)
		base=$(med rl,native_base_kb)
		rmax=$(med rl,max_rss_kb)
		rst=$(med rl,max_rss_start_kb)
		adj=$(calc %.0f "$rmax - $rst + $base")
		RSS_RATIO=$(calc %.3f "$adj / $nat")
		RSS_RAW=$(calc %.3f "$rmax / $nat")
		# shellcheck disable=SC2016
		printf '| `%s` | %.0f KiB | %.0f KiB | %.0f KiB | %.0f KiB | %s KiB | %s | %s | %s (%.0f KiB) |\n' \
			"$RL_CMD" "$nat" "$base" "$rmax" "$rst" "$adj" "$RSS_RATIO" "$RSS_RAW" \
			"${S[rl,native_live]:-?}" "$(calc %.0f "${S[rl,native_live]:-0} / 1024")"
	else
		echo "| \`$RL_CMD\` | failed | | | | | | | |"
	fi
} >"$RSS_T"

{
	for w in st mt; do
		[[ -n ${S[$w,bkwall]:-} ]] || { echo "- $w: replay failed, no check"; continue; }
		if [[ $w == st ]]; then tl="single thread"; else tl="2 threads"; fi
		b=$(calc %.1f "$(med "$w,bkwall")")
		e=$(calc %.1f "$(med "$w,bk")")
		echo "- $tl: replay overhead $b ns/op ((wall x loop threads - call time) / ops; the engine's bookkeeping_ns_per_op: $e) (target <= 10): $(verdict "$b <= 10")"
	done
	for w in st mt; do
		k=tf
		[[ $w == mt ]] && k=tf2
		[[ -n ${S[$k,outside_ns]:-} ]] || continue
		if [[ $w == st ]]; then tl="single thread"; tc="in main"; else tl="2 threads"; tc="in 2 threads at once"; fi
		f=$(med "$k,outside_ns")
		line="- $tl: the timer's floor (bench/timer_floor.c $tc: the same calls and clock reads, no engine) is $(calc %.1f "$f") ns/op outside the windows ($(calc %.1f "$(med "$k,outside_cyc")") cycles; $(RANGE_FMT=%.1f rng "$k,outside_ns") ns), with calls of $(calc %.1f "$(med "$k,window_cyc")") cycles inside them ($(calc %.1f "$(med "$k,untimed_cyc")") untimed)"
		[[ -n ${S[$w,bkwall]:-} ]] && line+="; the replay's overhead above it, the engine's own work and (2 threads) the threads' unequal starts and ends: $(calc %.1f "$(med "$w,bkwall") - $f") ns/op (engine figure: $(calc %.1f "$(med "$w,bk") - $f"))"
		echo "$line"
	done
	# independent threads: only the main thread should wait (for the
	# workers' last ops, before its own frees at exit)
	if [[ -n ${S[mt,waits]:-} ]] && ((S[mt,waits] > 10)); then
		echo "- 2 threads: the workload has ${S[mt,waits]} waits although its threads share no block: \`heaptrail convert\` gave a slot one thread freed to the other (bench/README.md, \"Replay\", anomalies); they are in the overhead"
	fi
	if [[ -n ${S[st,malloc_cyc]:-} && -n ${S[mt,malloc_cyc]:-} ]]; then
		x=$(calc %.2f "($(med mt,malloc_cyc) + $(med mt,free_cyc)) / ($(med st,malloc_cyc) + $(med st,free_cyc))")
		if awk "BEGIN { exit !($x > 1.3) }"; then
			echo "- 2 threads: a timed malloc+free takes ${x}x the cycles it takes with one thread, though natively 2 threads scale like one: other processes on the CPUs (see the contention line), or the threads' slots sharing a cache line of the engine's slot table (bench/README.md, \"Replay\", anomalies)"
		fi
	fi
	for w in st mt; do
		[[ -n ${S[$w,malloc_ns]:-} && -n ${S[$w,native_ns]:-} ]] || continue
		if [[ $w == st ]]; then tl="single thread"; else tl="2 threads"; fi
		echo "- $tl: a timed malloc+free pair takes $(calc %.1f "$(med "$w,malloc_ns") + $(med "$w,free_ns")") ns in the replay (timer included) vs $(calc %.1f "$(med "$w,native_ns")") ns natively; the whole replay $(calc %.1f "$(med "$w,wall_ms") * 1e6 / $PAIRS") ns a pair"
	done
	if [[ -n ${S[ho,sync_ns]:-} && -n ${S[hc-mutex,ns]:-} ]]; then
		h=$(med ho,sync_ns)
		mx=$(med hc-mutex,ns)
		x=$(calc %.1f "$mx / $h")
		echo "- hand-off: the replay engine takes $(calc %.0f "$h") ns per hand-off, a mutex+condvar hand-off $(calc %.0f "$mx") ns: ${x}x cheaper (target >= 5x): $(verdict "$x >= 5")"
		if [[ -n ${S[hc-counter,ns]:-} ]]; then
			echo "- hand-off: the engine's scheme alone (handoff_cost counter) takes $(calc %.0f "$(med hc-counter,ns)") ns; mutex+condvar / that = $(calc %.1fx "$mx / $(med hc-counter,ns)")"
		fi
		wb="—"
		[[ -n ${S[ho,wait_per_blocked_ns]:-} ]] && wb=$(calc %.0f "$(med ho,wait_per_blocked_ns)")
		echo "- hand-off replay: $(med ho,blocked_pct)% of the ${S[ho,waits]} waits found the other thread behind; wait_cycles: $(calc %.0f "$(med ho,wait_per_wait_ns)") ns per wait, $wb ns per blocked wait; replay wall $(med ho,wall_ms) ms vs $(med ho,native_ms) ms for the program itself (whole process)"
	else
		echo "- hand-off: a measurement failed, no check"
	fi
	if [[ -n $RSS_RATIO ]]; then
		echo "- Max RSS under glibc: replay growth + native baseline / native peak = $RSS_RATIO (target within 10%): $(verdict "$RSS_RATIO >= 0.9 && $RSS_RATIO <= 1.1"); raw max_rss_kb / native peak = $RSS_RAW"
	else
		echo "- Max RSS: a measurement failed, no check"
	fi
	for w in st mt ho rl; do
		[[ -n ${S[$w,slot_errors]:-} ]] && echo "- $w: the replay reported ${S[$w,slot_errors]} slot errors: its numbers are suspect"
	done
	if ((${#CONTENTION[@]})); then
		line="- CPU contention from other processes: some task waited for a CPU"
		sep=" "
		for w in st mt ho; do
			[[ -n ${CONTENTION[$w]:-} ]] || continue
			case $w in st) wl="the single-thread runs" ;; mt) wl="the 2-thread runs" ;; ho) wl="the hand-off runs" ;; esac
			line+="$sep${CONTENTION[$w]}% of the time during $wl"
			sep=", "
		done
		echo "$line (native and replay; Linux PSI; above ~5% expect noisy numbers)"
	fi
	echo "- the whole run took ${ELAPSED_S} s (builds, recordings and conversions included)"
} >"$CHECKS"

{
	for w in st mt ho rl; do
		line=
		for k in native_ns native_ms native_maxrss_kb native_base_kb wall_ms bk bkwall malloc_cyc free_cyc call_ms wait_ms waits_blocked sync_ns wait_per_wait_ns wait_per_blocked_ns max_rss_kb max_rss_start_kb rss_start_kb rss_peak_kb tsc; do
			[[ -n ${S[$w,$k]:-} ]] && line+="; $k ${S[$w,$k]% }"
		done
		[[ -n $line ]] && echo "- $w${line}"
	done
	for k in tf tf2; do
		[[ -n ${S[$k,outside_ns]:-} ]] && echo "- timer_floor ($k); outside_ns ${S[$k,outside_ns]% }; outside_cyc ${S[$k,outside_cyc]% }; window_cyc ${S[$k,window_cyc]% }; untimed_cyc ${S[$k,untimed_cyc]% }"
	done
	for m in mutex mutex1 counter; do
		[[ -n ${S[hc-$m,ns]:-} ]] && echo "- handoff_cost $m: ns/hand-off ${S[hc-$m,ns]% }; blocked % ${S[hc-$m,blocked_pct]% }; slept % ${S[hc-$m,sleeps_pct]% }"
	done
} >"$RAW"

echo
cat "$OVERHEAD"
echo
cat "$HANDOFF_T"
echo
cat "$RSS_T"
echo
cat "$CHECKS"

# ---------------------------------------------------------------- RESULTS.md

if ((WRITE)); then
	R=$HERE/RESULTS.md
	cmd="BUILD=$BUILD REPS=$REPS PAIRS=$PAIRS HANDOFFS=$HANDOFFS HANDOFF_ROUNDS=$HANDOFF_ROUNDS RSS_MB=$RSS_MB SEED=$SEED WARMUP=$WARMUP bench/run_replay.sh ${ORIG_ARGS[*]}"
	results_header "$CC"
	SECTION=$WORK/section
	{
		results_head replay "replay: engine overhead, hand-off cost, Max RSS" "$cmd"
		echo "- workloads: recorded with \`heaptrail record\` and converted with \`heaptrail convert\` once, then each measurement run $REPS time(s), interleaved (native, replay, ...), after $WARMUP untimed round(s); medians, min..max over the runs"
		echo
		echo "### Replay overhead per op (\`replay --touch none\`)"
		echo
		echo "ops are the workload's ops (calls, waits, spawns). bookkeeping_ns_per_op is the engine's own figure: the threads' busy time"
		echo "(waits excluded) minus the timed calls, per op. The next column is the issue's definition (checked against the target), from"
		echo "the same JSON: wall time, once per thread that runs the loop (1; 2: the main thread only starts the workers), minus the"
		echo "call time, per op; it also counts waits, the release of the worker threads (created before the run, parked) and the"
		echo "threads' unequal ends."
		echo "Call times are rdtsc..rdtscp around each call, so they include the timer's own cost; \"replay ns/pair (wall)\" is the"
		echo "replay's wall time per pair of one thread, comparable with the native ns/pair (bench/malloc_loop.c's per-thread latency)."
		echo
		cat "$OVERHEAD"
		echo
		echo "### Hand-off cost"
		echo
		echo "Time per hand-off that one of the two threads spends, calls excluded: for the replay (2 x wall - call time) / waits"
		echo "(each hand-off of \`handoff\` is one wait: a free of the block the other thread allocated; the engine's bookkeeping of"
		echo "the hand-off's 3 ops is included), for bench/handoff_cost.c wall / rounds, in the same pattern with no heap calls."
		echo
		cat "$HANDOFF_T"
		echo
		echo "### Max RSS under glibc (\`replay --touch page\`, the default)"
		echo
		echo "The native peak is replay_loop's ru_maxrss as its parent sees it. The compared figure is the replay's growth of"
		echo "ru_maxrss over the run (max_rss_kb - max_rss_start_kb) plus the native program's own RSS before its heap: the"
		echo "replay process's baseline (heaptrail itself and the workload's op streams, locked in memory) is not the program's."
		echo
		cat "$RSS_T"
		echo
		echo "### Targets"
		echo
		cat "$CHECKS"
		echo
		echo "### Raw samples"
		echo
		cat "$RAW"
		echo "<!-- replay:end -->"
	} >"$SECTION"
	results_write replay "$SECTION" "$R"
	note "wrote $R"
fi
