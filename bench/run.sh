#!/usr/bin/env bash
# bench/run.sh — overhead of heaptrail next to heaptrack and no tracer, measured
# side by side in one run on bench/malloc_loop.c (see bench/README.md).
#
#   bench/run.sh [--write] [--keep]
#
# Environment (defaults in brackets):
#   BUILD=[/work/main/build]  where libheaptrail.so and the heaptrail binary are
#   REPS=[5]                  timed repetitions per variant (interleaved)
#   PAIRS=[3000000]           malloc/free pairs per thread
#   HEAPTRACK_PAIRS=[PAIRS]   pairs per thread for the heaptrack runs
#   THREADS=["0 1 2"]         thread counts to measure; 0 = the loop runs in
#                             main and the process never creates a thread
#   SEED=[1]                  seed of the size sequence
#   WARMUP=[1]                untimed rounds before the timed ones
#   CC=[gcc]                  compiler for malloc_loop
#   TRACERS=["heaptrail heaptrack"]  tracers to run next to "none"
#   RECORD_ARGS=[]            extra options of the `heaptrail record` runs,
#                             e.g. RECORD_ARGS="--zstd-level=3" or "--compact"
#   HEAPTRAIL_ENV=[]          extra VAR=value words for the heaptrail runs, for
#                             variables record does not set (record sets those
#                             of its options), e.g. "HEAPTRAIL_FAST_PATH=0"
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bench_args "$@"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${BUILD:-/work/main/build}
REPS=${REPS:-5}
PAIRS=${PAIRS:-3000000}
HEAPTRACK_PAIRS=${HEAPTRACK_PAIRS:-$PAIRS}
THREADS=${THREADS:-0 1 2}
SEED=${SEED:-1}
WARMUP=${WARMUP:-1}
CC=${CC:-gcc}
TRACERS=${TRACERS-heaptrail heaptrack}
for w in $TRACERS; do
	[[ $w == heaptrail || $w == heaptrack ]] || die "TRACERS may list heaptrail and heaptrack, got '$w'"
done
HEAPTRAIL_ENV=${HEAPTRAIL_ENV:-}
read -r -a HT_ENV <<<"$HEAPTRAIL_ENV"
RECORD_ARGS=${RECORD_ARGS:-}
read -r -a HT_RECARGS <<<"$RECORD_ARGS"
for w in "${HT_ENV[@]}"; do
	[[ $w == *=* ]] || die "HEAPTRAIL_ENV must hold VAR=value words, got '$w'"
done

for v in REPS PAIRS HEAPTRACK_PAIRS SEED WARMUP; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
((REPS >= 1)) || die "REPS must be >= 1"
((PAIRS >= 1 && HEAPTRACK_PAIRS >= 1)) || die "PAIRS and HEAPTRACK_PAIRS must be >= 1"
for t in $THREADS; do
	[[ $t =~ ^[0-9]+$ ]] || die "THREADS must list integers >= 0, got '$t'"
done

bench_workdir ""

# ---------------------------------------------------------------- helpers

filesize() { stat -c %s "$1"; }

# ---------------------------------------------------------------- build

BIN=$WORK/malloc_loop
$CC -std=gnu11 -O2 -Wall -Wextra -Wshadow -Wstrict-prototypes -Werror -pthread \
	-o "$BIN" "$HERE/malloc_loop.c" || die "cannot build malloc_loop"

# ---------------------------------------------------------------- tracers

VARIANTS=(none)

HT_LIB=$BUILD/libheaptrail.so
HT_CLI=$BUILD/heaptrail
HT_COMPACT=0
if [[ " $TRACERS " != *" heaptrail "* ]]; then
	:
elif [[ -f $HT_LIB && -x $HT_CLI ]]; then
	VARIANTS+=(heaptrail)
	# The whole `heaptrail record` is timed, end step included; then (not
	# timed with it) `heaptrail compact` on a copy, for its size.
	if "$HT_CLI" compact --help >/dev/null 2>&1; then
		HT_COMPACT=1
	else
		note "no 'heaptrail compact': no compacted sizes"
	fi
else
	note "heaptrail not built ($HT_LIB or $HT_CLI missing; set BUILD=...): skipping the heaptrail column"
fi

HK=
HK_VERSION="heaptrack not run"
if [[ " $TRACERS " == *" heaptrack "* ]]; then
	HK=$(command -v heaptrack || true)
	if [[ -z $HK && $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
		note "heaptrack missing, installing it with apt-get"
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y -q heaptrack >&2 ||
			{ apt-get update -q >&2 && apt-get install -y -q heaptrack >&2; } ||
			note "apt-get install heaptrack failed"
		HK=$(command -v heaptrack || true)
	fi
	if [[ -n $HK ]]; then
		VARIANTS+=(heaptrack)
		HK_VERSION=$("$HK" --version 2>/dev/null | head -n 1 || echo heaptrack)
	else
		note "heaptrack not found (and not installable here): skipping the heaptrack column"
		HK_VERSION="heaptrack not installed"
	fi
fi

# ---------------------------------------------------------------- one run

declare -A NS CPU RUNMS POSTMS CBYTES BYTES EVENTS EVSRC FAILED NPAIRS DROPPED

pairs_for() { if [[ $1 == heaptrack ]]; then echo "$HEAPTRACK_PAIRS"; else echo "$PAIRS"; fi; }

# heaptrail's exact event count, from `heaptrail stats --json FILE` key
# "events"; prints "EVENTS DROPPED" (DROPPED from key "dropped", or 0)
heaptrail_events() {
	local json ev
	[[ -x $HT_CLI ]] || return 1
	json=$("$HT_CLI" stats --json "$1" 2>/dev/null) || return 1
	if command -v python3 >/dev/null; then
		python3 -c 'import json,sys
d = json.load(sys.stdin)
v = d.get("events") if isinstance(d, dict) else None
if isinstance(v, dict):
    v = v.get("total")
if not isinstance(v, int):
    sys.exit(1)
dr = d.get("dropped", 0)
print(v, dr if isinstance(dr, int) else 0)' <<<"$json" 2>/dev/null && return 0
	fi
	ev=$(grep -o '"events"[[:space:]]*:[[:space:]]*[0-9]\+' <<<"$json" | head -n 1 | grep -o '[0-9]\+$') || return 1
	echo "$ev 0"
}

# heaptrack's event count: its '+' (allocation) and '-' (free) lines
heaptrack_events() {
	local dec
	case $1 in
	*.zst) dec="zstd -dc" ;;
	*.gz) dec="gzip -dc" ;;
	*) return 1 ;;
	esac
	$dec "$1" 2>/dev/null | LC_ALL=C grep -c '^[+-]'
}

# run VARIANT THREADS REP: run once, record the results under "VARIANT,THREADS"
# (REP 0 is a warm-up and is not recorded).
run_one() {
	local v=$1 t=$2 rep=$3 key="$1,$2" n log trace t0 t1 ns ok=1
	n=$(pairs_for "$v")
	log=$WORK/$v-$t-$rep.log
	trace=
	local w0 w1
	w0=$(cpu_wait_us)
	t0=$(now_ns)
	case $v in
	none)
		"$BIN" "$t" "$n" "$SEED" >"$log" 2>&1 || ok=0
		w1=$(cpu_wait_us)
		if [[ -n $w0 && -n $w1 ]] && ((rep > 0)); then
			NONE_WAIT_US=$((NONE_WAIT_US + w1 - w0))
			NONE_RUN_NS=$((NONE_RUN_NS + $(now_ns) - t0))
		fi
		;;
	heaptrail)
		trace=$WORK/$v-$t-$rep.ht
		env "${HT_ENV[@]}" "$HT_CLI" record "${HT_RECARGS[@]}" -o "$trace" -- \
			"$BIN" "$t" "$n" "$SEED" >"$log" 2>&1 || ok=0
		if [[ ! -f $trace ]]; then
			# tolerate a suffix added by the recorder (e.g. NAME.PID)
			local f
			for f in "$trace".*; do [[ -f $f ]] && trace=$f && break; done
		fi
		;;
	heaptrack)
		"$HK" -o "$WORK/$v-$t-$rep" "$BIN" "$t" "$n" "$SEED" >"$log" 2>&1 || ok=0
		trace=
		local f
		for f in "$WORK/$v-$t-$rep".zst "$WORK/$v-$t-$rep".gz; do
			[[ -f $f ]] && trace=$f && break
		done
		;;
	esac
	t1=$(now_ns)
	local post_ms='' cbytes=''
	if [[ $v == heaptrail && -n $trace && -f $trace ]] && ((HT_COMPACT)) && ((rep > 0)); then
		local c0
		cp "$trace" "$trace.c"
		c0=$(now_ns)
		if ! "$HT_CLI" compact -q "$trace.c" >>"$log" 2>&1; then
			note "heaptrail compact failed on the $t-thread trace (rep $rep); output:"
			tail -n 5 "$log" | sed 's/^/    /' >&2
			FAILED[$key]=1
			return 0
		fi
		post_ms=$(calc %.1f "($(now_ns) - $c0) / 1e6")
		cbytes=$(filesize "$trace.c")
		rm -f "$trace.c"
	fi
	ns=$(field ns_per_pair <"$log")
	if ((!ok)) || [[ -z $ns ]]; then
		note "$v with $t thread(s) failed (rep $rep); output:"
		tail -n 20 "$log" | sed 's/^/    /' >&2
		FAILED[$key]=1
		return 0
	fi
	if [[ $v != none && ( -z $trace || ! -f $trace ) ]]; then
		note "$v with $t thread(s) left no trace file (rep $rep)"
		FAILED[$key]=1
		return 0
	fi
	((rep > 0)) || return 0

	NS[$key]+="$ns "
	CPU[$key]+="$(field cpu_ns_per_pair <"$log") "
	RUNMS[$key]+="$(calc %.1f "($t1 - $t0) / 1e6") "
	NPAIRS[$key]=$n
	[[ -n $post_ms ]] && POSTMS[$key]+="$post_ms "
	[[ -n $cbytes ]] && CBYTES[$key]+="$cbytes "
	if [[ -n $trace ]]; then
		BYTES[$key]+="$(filesize "$trace") "
		if [[ -z ${EVENTS[$key]:-} ]]; then # count once per variant
			local ev='' dropped=0
			case $v in
			heaptrail)
				read -r ev dropped < <(heaptrail_events "$trace" || true) || true
				if [[ ${dropped:-0} =~ ^[1-9][0-9]*$ ]]; then
					note "heaptrail dropped $dropped events with $t thread(s): its trace is incomplete"
					DROPPED[$key]=$dropped
				fi
				;;
			heaptrack) ev=$(heaptrack_events "$trace") || ev= ;;
			esac
			if [[ $ev =~ ^[0-9]+$ ]] && ((ev > 0)); then
				EVENTS[$key]=$ev
				EVSRC[$key]=counted
			else
				EVENTS[$key]=$((2 * n * (t ? t : 1)))
				EVSRC[$key]=estimated
			fi
		fi
	fi
	if ((!KEEP)) && [[ -n $trace ]]; then rm -f "$trace"; fi
}

# ---------------------------------------------------------------- measure

START_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
# CPU contention while the untraced runs ran: with THREADS <= nproc they leave
# a CPU free for everybody, so any wait for a CPU is somebody else's load.
NONE_WAIT_US=0
NONE_RUN_NS=0
note "variants: ${VARIANTS[*]}; threads: $THREADS; reps: $REPS (+$WARMUP warm-up); pairs/thread: $PAIRS (heaptrack: $HEAPTRACK_PAIRS)"
for t in $THREADS; do
	for ((rep = 1 - WARMUP; rep <= REPS; rep++)); do
		r=$rep
		((r < 0)) && r=0
		for v in "${VARIANTS[@]}"; do
			[[ -n ${FAILED["$v,$t"]:-} ]] && continue
			run_one "$v" "$t" "$r"
		done
		if ((rep > 0)); then note "threads=$t rep $rep/$REPS done"; fi
	done
done

# share of the untraced runs' time during which some task waited for a CPU
CONTENTION=
if ((NONE_RUN_NS > 0)) && [[ -r /proc/pressure/cpu ]]; then
	CONTENTION=$(calc %.1f "100 * $NONE_WAIT_US * 1000 / $NONE_RUN_NS")
	if awk "BEGIN { exit !($CONTENTION > 5) }"; then
		note "CPU contention: some task waited for a CPU ${CONTENTION}% of the time during the untraced runs: expect noisy numbers"
	fi
fi

# ---------------------------------------------------------------- report

declare -A MED WMED
TABLE=$WORK/table.md
CHECKS=$WORK/checks.md
RAW=$WORK/raw.md
# medians of the whole-process times first: the table's rows need none's
for t in $THREADS; do
	for v in "${VARIANTS[@]}"; do
		key="$v,$t"
		# shellcheck disable=SC2086
		[[ -n ${RUNMS[$key]:-} ]] && WMED[$key]=$(median ${RUNMS[$key]})
	done
done
{
	echo "| threads | tracer | pairs/thread | ns/pair (median) | min..max | added ns/pair | slowdown in the loop | CPU ns/pair | whole run ms | whole slowdown | trace bytes | events | bytes/event | after \`heaptrail compact\` | compact ms |"
	echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for t in $THREADS; do
		for v in "${VARIANTS[@]}"; do
			key="$v,$t"
			if [[ -n ${FAILED[$key]:-} || -z ${NS[$key]:-} ]]; then
				echo "| $t | $v | | failed | | | | | | | | | | | |"
				continue
			fi
			# shellcheck disable=SC2086
			m=$(median ${NS[$key]})
			MED[$key]=$m
			# shellcheck disable=SC2086
			rg=$(range ${NS[$key]})
			rms=${WMED[$key]}
			# shellcheck disable=SC2086
			cpu=$(median ${CPU[$key]})
			added="—" slow="1.00x" wslow="1.00x" bytes="—" ev="—" bpe="—" post="—" cbpe="—"
			if [[ -n ${POSTMS[$key]:-} ]]; then
				# shellcheck disable=SC2086
				post=$(calc %.0f "$(median ${POSTMS[$key]})")
			fi
			if [[ $v != none && -n ${MED["none,$t"]:-} ]]; then
				added=$(calc %+.1f "$m - ${MED["none,$t"]}")
				slow=$(calc %.2fx "$m / ${MED["none,$t"]}")
			fi
			if [[ $v != none && -n ${WMED["none,$t"]:-} ]]; then
				wslow=$(calc %.2fx "$rms / ${WMED["none,$t"]}")
			fi
			if [[ -n ${BYTES[$key]:-} ]]; then
				# shellcheck disable=SC2086
				bytes=$(median ${BYTES[$key]})
				bytes=${bytes%.*}
				ev=${EVENTS[$key]}
				[[ ${EVSRC[$key]} == estimated ]] && ev="~$ev"
				bpe=$(calc %.2f "$bytes / ${EVENTS[$key]}")
			fi
			if [[ -n ${CBYTES[$key]:-} ]]; then
				# shellcheck disable=SC2086
				cbpe=$(calc %.2f "$(median ${CBYTES[$key]}) / ${EVENTS[$key]}")
			fi
			printf '| %s | %s | %s | %.1f | %s | %s | %s | %.1f | %.0f | %s | %s | %s | %s | %s | %s |\n' \
				"$t" "$v" "${NPAIRS[$key]}" "$m" "$rg" "$added" "$slow" "$cpu" "$rms" "$wslow" "$bytes" "$ev" "$bpe" "$cbpe" "$post"
		done
	done
} >"$TABLE"

# target_of KIND THREADS: the issue's slowdown targets (issue 16): in the
# loop 1.5x with one thread, 1.7x with two (1.6x for the main-thread-only
# row, the earlier target); the whole `record` 1.6x with one thread, 2.5x
# with two (none for the main-thread-only row)
target_of() {
	case $1,$2 in
	loop,0) echo 1.6 ;;
	loop,1) echo 1.5 ;;
	loop,*) echo 1.7 ;;
	whole,1) echo 1.6 ;;
	whole,2) echo 2.5 ;;
	*) echo "" ;;
	esac
}

{
	if [[ -z ${MED["none,1"]:-}${MED["none,0"]:-}${MED["none,2"]:-} ]]; then
		echo "- no baseline, no checks"
	elif [[ " ${VARIANTS[*]} " != *" heaptrail "* ]]; then
		echo "- heaptrail was not measured (not built, or not in TRACERS), no checks"
	else
		for t in $THREADS; do
			m=${MED["heaptrail,$t"]:-}
			b=${MED["none,$t"]:-}
			[[ -n $m && -n $b ]] || { echo "- $t thread(s): heaptrail failed, no checks"; continue; }
			a=$(calc %.1f "$m - $b")
			s=$(calc %.2f "$m / $b")
			ws=$(calc %.2f "${WMED["heaptrail,$t"]} / ${WMED["none,$t"]}")
			tl="$t thread(s)"
			((t == 0)) && tl="main thread only"
			echo "- $tl: heaptrail adds $a ns/pair in the loop"
			x=$(target_of loop "$t")
			echo "- $tl: slowdown in the loop ${s}x (target <= ${x}x): $(verdict "$s <= $x")"
			x=$(target_of whole "$t")
			if [[ -n $x ]]; then
				echo "- $tl: whole \`heaptrail record\` ${ws}x the untraced process (target <= ${x}x): $(verdict "$ws <= $x")"
			else
				echo "- $tl: whole \`heaptrail record\` ${ws}x the untraced process"
			fi
			if [[ -n ${MED["heaptrack,$t"]:-} ]]; then
				k=${MED["heaptrack,$t"]}
				echo "- $tl: heaptrack slowdown $(calc %.1fx "$k / $b") in the loop, $(calc %.1fx "${WMED["heaptrack,$t"]} / ${WMED["none,$t"]}") whole; heaptrail is $(calc %.1fx "$k / $m") faster in the loop, $(calc %.1fx "${WMED["heaptrack,$t"]} / ${WMED["heaptrail,$t"]}") whole"
			fi
			if [[ -n ${BYTES["heaptrail,$t"]:-} ]]; then
				# shellcheck disable=SC2086
				x=$(calc %.3f "$(median ${BYTES["heaptrail,$t"]}) / ${EVENTS["heaptrail,$t"]}")
				echo "- $tl: heaptrail's trace as \`record\` leaves it: $x bytes/event (target <= 2): $(verdict "$x <= 2")"
			fi
			if [[ -n ${CBYTES["heaptrail,$t"]:-} ]]; then
				# shellcheck disable=SC2086
				x=$(calc %.3f "$(median ${CBYTES["heaptrail,$t"]}) / ${EVENTS["heaptrail,$t"]}")
				# shellcheck disable=SC2086
				echo "- $tl: after \`heaptrail compact\`: $x bytes/event, the default trace is $(calc %.2fx "$(median ${BYTES["heaptrail,$t"]}) / $(median ${CBYTES["heaptrail,$t"]})") that size"
				if [[ -n ${BYTES["heaptrack,$t"]:-} ]]; then
					# shellcheck disable=SC2086
					y=$(calc %.3f "$(median ${BYTES["heaptrack,$t"]}) / ${EVENTS["heaptrack,$t"]}")
					echo "- $tl: compacted $x bytes/event vs heaptrack $y (target <=): $(verdict "$x <= $y")"
				fi
			fi
		done
	fi
	if [[ -n $CONTENTION ]]; then
		echo "- CPU contention from other processes: during the untraced runs some task waited for a CPU ${CONTENTION}% of the time (Linux PSI; above ~5% expect noisy numbers)"
	fi
	if [[ -n ${MED["none,1"]:-} && -n ${MED["none,2"]:-} ]]; then
		echo "- native scaling on this machine: $(calc %.1f "${MED["none,1"]}") ns/pair with 1 thread, $(calc %.1f "${MED["none,2"]}") with 2 (per-thread latency; equal values mean perfect scaling)"
	fi
	for t in $THREADS; do
		if [[ -n ${DROPPED["heaptrail,$t"]:-} ]]; then
			echo "- $t thread(s): heaptrail reported ${DROPPED["heaptrail,$t"]} dropped events: its numbers are not valid"
		fi
	done
	if ((HEAPTRACK_PAIRS != PAIRS)) && [[ " ${VARIANTS[*]} " == *" heaptrack "* ]]; then
		echo "- heaptrack ran $HEAPTRACK_PAIRS pairs/thread instead of $PAIRS (HEAPTRACK_PAIRS); its per-pair and per-event numbers are comparable, its trace bytes are not"
	fi
} >"$CHECKS"

{
	for t in $THREADS; do
		for v in "${VARIANTS[@]}"; do
			key="$v,$t"
			[[ -n ${NS[$key]:-} ]] || continue
			echo "- $v, $t thread(s): ns/pair ${NS[$key]% }; CPU ns/pair ${CPU[$key]% }; whole run ms ${RUNMS[$key]% }${BYTES[$key]:+; trace bytes ${BYTES[$key]% }}${CBYTES[$key]:+; compacted bytes ${CBYTES[$key]% }}${POSTMS[$key]:+; compact ms ${POSTMS[$key]% }}"
		done
	done
} >"$RAW"

echo
cat "$TABLE"
echo
cat "$CHECKS"

# ---------------------------------------------------------------- RESULTS.md

if ((WRITE)); then
	cmd="BUILD=$BUILD REPS=$REPS PAIRS=$PAIRS"
	((HEAPTRACK_PAIRS != PAIRS)) && cmd+=" HEAPTRACK_PAIRS=$HEAPTRACK_PAIRS"
	cmd+=" THREADS=\"$THREADS\" SEED=$SEED WARMUP=$WARMUP"
	[[ $TRACERS != "heaptrail heaptrack" ]] && cmd+=" TRACERS=\"$TRACERS\""
	[[ -n $HEAPTRAIL_ENV ]] && cmd+=" HEAPTRAIL_ENV=\"$HEAPTRAIL_ENV\""
	[[ -n $RECORD_ARGS ]] && cmd+=" RECORD_ARGS=\"$RECORD_ARGS\""
	cmd+=" bench/run.sh ${ORIG_ARGS[*]}"
	# (|| true: with pipefail, head closing the pipe early fails the
	# pipeline with SIGPIPE and set -e would end the script here)
	cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1 || true)
	glibc=$(ldd --version 2>/dev/null | head -n 1 | sed 's/.* //' || true)
	ccv=$($CC --version | head -n 1 || true)
	rev=$(git -C "$HERE/.." rev-parse --short HEAD 2>/dev/null || echo "no commit")
	if [[ -n $(git -C "$HERE/.." status --porcelain -- src include 2>/dev/null) ]]; then
		rev+=" (with uncommitted changes in src/ or include/)"
	fi
	{
		echo "# heaptrail overhead — results"
		echo
		echo "Produced by \`bench/run.sh --write\` (see bench/README.md for what is measured)."
		echo "Regenerate with the same command; the file is overwritten."
		echo
		echo "- command: \`$cmd\`"
		echo "- date: $START_DATE"
		echo "- machine: nproc=$(nproc), CPU: ${cpu:-unknown}, kernel: $(uname -r) ($(uname -m))"
		echo "- software: glibc $glibc, $ccv, $HK_VERSION, heaptrail at $rev"
		echo "- workload: bench/malloc_loop.c, plain malloc(size)/free pairs, sizes uniform in 16..4096, seed $SEED, gcc -O2"
		echo
		echo "## malloc/free loop"
		echo
		echo "ns/pair is the per-thread latency of one malloc+free pair (wall time of the timed loop divided by pairs per thread),"
		echo "median of $REPS interleaved runs (none, heaptrail, heaptrack, none, ...); min..max is the spread over those runs."
		echo "CPU ns/pair is the CPU time of the traced process (all its threads; not heaptrail's writer process nor heaptrack's"
		echo "separate interpreter process) over the timed loop, divided by all pairs of all threads."
		echo "\"whole run\" is the whole process as seen from the shell: for heaptrail, \`heaptrail record ${RECORD_ARGS:+$RECORD_ARGS }-o FILE -- ./malloc_loop ...\`"
		echo "from its start until it exits with the trace final (start-up, the loop, the writer's last chunks, record's end step"
		echo "and its summary line); for heaptrack, \`heaptrack -o FILE ./malloc_loop ...\` with its interpreter and compressor."
		echo "Trace bytes are the trace as the tracer leaves it; \"after \`heaptrail compact\`\" is the same trace compacted"
		echo "afterwards (column coding, not part of the whole run), and \"compact ms\" what that took."
		echo "Events per trace are counted from the trace"
		echo "(heaptrail: \`heaptrail stats --json\`; heaptrack: its + and - lines) where possible; \`~\` marks an estimate of 2 x pairs x threads."
		echo
		cat "$TABLE"
		echo
		echo "## Targets"
		echo
		cat "$CHECKS"
		echo
		echo "## Raw samples"
		echo
		cat "$RAW"
	} >"$WORK/results.md"
	# keep every section the other scripts write (<!-- NAME:begin ... NAME:end -->)
	if [[ -f $HERE/RESULTS.md ]]; then
		awk '/^<!-- [a-z_]+:begin/ { keep = 1; print "" } keep { print } /^<!-- [a-z_]+:end -->/ { keep = 0 }' \
			"$HERE/RESULTS.md" >>"$WORK/results.md"
	fi
	cp "$WORK/results.md" "$HERE/RESULTS.md"
	note "wrote $HERE/RESULTS.md"
fi
