#!/usr/bin/env bash
# bench/run_attach.sh — what `heaptrail attach` costs the process it traces
# (see bench/README.md, "attach"): the malloc/free loop (bench/malloc_loop.c,
# one thread) run
#   - with no tracer,
#   - under `heaptrail attach -c` at --sample 1, 10 and 100 (uprobes on
#     malloc/free and the rest of the family, user stacks of the traced calls),
#     and at --sample 1 with --at-entry (the probes on the functions' first
#     instructions, as other tools place them),
#   - under bpftrace doing what BCC's memleak does with full tracing: uprobe
#     and uretprobe on malloc keeping size and user stack by address, uprobe
#     on free deleting them,
# interleaved (none, attach -s1, -s10, -s100, --at-entry, bpftrace, none,
# ...) REPS times,
# medians.  The slowdown is the loop's ns per malloc/free pair under the
# tracer over the same without; CPU ns per pair (the process's, which
# includes the uprobe traps) is given too.  Needs root and BPF.
#
#   bench/run_attach.sh [--write] [--keep]
#
# Environment (defaults in brackets):
#   BUILD=[/work/main/build]  where the heaptrail binary is
#   PAIRS=[100000]            malloc/free pairs per run (a uprobe hit costs
#                             microseconds: full tracing takes seconds)
#   REPS=[3]                  timed rounds
#   SAMPLES=[1 10 100]        attach --sample rates
#   SEED=[1]                  seed of malloc_loop's sizes
#   TRACERS=[attach bpftrace] which tracers to run next to no tracer
#   CC=[gcc]                  compiler for malloc_loop (built with frame
#                             pointers, so that both tracers get whole stacks)
# --write puts the results in bench/RESULTS.md, between the "attach"
# markers; --keep (or KEEP=1) keeps the work directory.
set -euo pipefail

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bench_args "$@"

T_START=$(date +%s)
START_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${BUILD:-/work/main/build}
PAIRS=${PAIRS:-100000}
REPS=${REPS:-3}
SAMPLES=${SAMPLES:-1 10 100}
SEED=${SEED:-1}
TRACERS=${TRACERS:-attach bpftrace}
CC=${CC:-gcc}

for v in PAIRS REPS SEED; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
((REPS >= 1 && PAIRS >= 1)) || die "REPS and PAIRS must be >= 1"
for s in $SAMPLES; do
	[[ $s =~ ^[1-9][0-9]*$ ]] || die "SAMPLES: '$s' is not a positive integer"
done

HT=$BUILD/heaptrail
[[ -x $HT ]] || die "no $HT: build heaptrail first (cmake -S . -B build && cmake --build build -j2)"
"$HT" attach --check >/dev/null || die "heaptrail attach cannot use BPF here (its message is above)"
if [[ " $TRACERS " == *" bpftrace "* ]]; then
	command -v bpftrace >/dev/null || die "no bpftrace (Debian package bpftrace; or TRACERS=attach)"
fi

bench_workdir "-attach"

CFLAGS=(-std=gnu11 -O2 -fno-omit-frame-pointer -Wall -Wextra -Wshadow -Wstrict-prototypes -Werror -pthread)
$CC "${CFLAGS[@]}" -o "$WORK/malloc_loop" "$HERE/malloc_loop.c" || die "cannot build malloc_loop"
LOOP="$WORK/malloc_loop 1 $PAIRS $SEED"
LIBC=$(ldd "$WORK/malloc_loop" | awk '$1 ~ /^libc\.so/ { print $3 }')
[[ -f $LIBC ]] || die "cannot find the libc malloc_loop uses (ldd)"

# memleak-style full tracing: every malloc's size and user stack kept by
# address until its free (BCC's memleak without -s)
BT_PROG="uprobe:$LIBC:malloc /pid == cpid/ { @size[tid] = arg0; }
uretprobe:$LIBC:malloc /pid == cpid && @size[tid]/ { @addr[retval] = @size[tid]; @stack[retval] = ustack; delete(@size[tid]); }
uprobe:$LIBC:free /pid == cpid/ { delete(@addr[arg0]); delete(@stack[arg0]); }
END { clear(@addr); clear(@stack); clear(@size); }"

VARIANTS=(none)
for t in $TRACERS; do
	case $t in
	attach) for s in $SAMPLES; do VARIANTS+=("attach-s$s"); done
		VARIANTS+=(attach-entry) ;;
	bpftrace) VARIANTS+=(bpftrace) ;;
	*) die "TRACERS: unknown tracer '$t' (attach, bpftrace)" ;;
	esac
done

# run VARIANT: runs the loop under it; prints its "pairs=..." line
run() {
	local v=$1 out=$WORK/out
	case $v in
	none) $LOOP >"$out" 2>"$out.err" ;;
	attach-s*) "$HT" attach --sample "${v#attach-s}" -c "$LOOP" >"$out" 2>"$out.err" ;;
	attach-entry) "$HT" attach --at-entry -c "$LOOP" >"$out" 2>"$out.err" ;;
	bpftrace) ulimit -l unlimited 2>/dev/null || true
		bpftrace -c "$LOOP" -e "$BT_PROG" >"$out" 2>"$out.err" ;;
	esac || { cat "$out.err" >&2; die "$v: the run failed"; }
	grep -m 1 '^pairs=' "$out" || { cat "$out" "$out.err" >&2; die "$v: no result line"; }
}

declare -A S # "variant,metric" -> samples
W0=$(cpu_wait_us)
T0=$(date +%s%N)
for ((rep = 0; rep <= REPS; rep++)); do
	for v in "${VARIANTS[@]}"; do
		((rep == 0)) && note "warm-up: $v" || note "round $rep of $REPS: $v"
		line=$(run "$v")
		((rep == 0)) && continue # the warm-up round is not timed
		ns=$(sed -n 's/.* ns_per_pair=\([0-9.]*\).*/\1/p' <<<"$line")
		cpu=$(sed -n 's/.* cpu_ns_per_pair=\([0-9.]*\).*/\1/p' <<<"$line")
		S[$v,ns]+="$ns "
		S[$v,cpu]+="$cpu "
	done
done
W1=$(cpu_wait_us)
ELAPSED_NS=$(($(date +%s%N) - T0))
CONTENTION=
if [[ -n $W0 && -n $W1 ]] && ((ELAPSED_NS > 0)); then
	CONTENTION=$(calc %.1f "($W1 - $W0) * 1000 * 100 / $ELAPSED_NS")
fi

# ---------------------------------------------------------------- report

describe() {
	case $1 in
	none) echo "no tracer" ;;
	attach-s1) echo "\`heaptrail attach -c\` (every call traced)" ;;
	attach-s*) echo "\`heaptrail attach -c --sample ${1#attach-s}\`" ;;
	attach-entry) echo "\`heaptrail attach -c --at-entry\` (every call traced, probes on the first instruction)" ;;
	bpftrace) echo "bpftrace, memleak-style full tracing (size and ustack by address)" ;;
	esac
}

BASE_NS=$(median ${S[none,ns]})
BASE_CPU=$(median ${S[none,cpu]})
TABLE=$WORK/table
{
	echo "| tracer | ns per malloc/free pair | slowdown | CPU ns per pair | CPU slowdown |"
	echo "|---|---:|---:|---:|---:|"
	for v in "${VARIANTS[@]}"; do
		ns=$(median ${S[$v,ns]})
		cpu=$(median ${S[$v,cpu]})
		printf '| %s | %.1f | %.1fx | %.1f | %.1fx |\n' "$(describe "$v")" "$ns" \
			"$(calc %.3f "$ns / $BASE_NS")" "$cpu" "$(calc %.3f "$cpu / $BASE_CPU")"
	done
} >"$TABLE"
CHECKS=$WORK/checks
{
	if [[ -n ${S[attach-s1,ns]:-} && -n ${S[bpftrace,ns]:-} ]]; then
		a=$(median ${S[attach-s1,ns]})
		b=$(median ${S[bpftrace,ns]})
		echo "- every call traced, attach (all nine functions probed, stacks, events to user space) against bpftrace (malloc and free only, stacks kept in a map): $(calc %.2f "$a / $b")x the time per pair (below 1: attach is cheaper)"
	fi
	for s in $SAMPLES; do
		[[ $s == 1 || -z ${S[attach-s$s,ns]:-} || -z ${S[attach-s1,ns]:-} ]] && continue
		a=$(median ${S[attach-s$s,ns]})
		f=$(median ${S[attach-s1,ns]})
		echo "- --sample $s costs $(calc %.1f "($a - $BASE_NS) * 100 / ($f - $BASE_NS)")% of full tracing's added time per pair (every call still takes the uprobes; only the traced ones send an event and a stack)"
	done
	if [[ -n $CONTENTION ]]; then
		echo "- CPU contention from other processes: some task waited for a CPU ${CONTENTION}% of the time (Linux PSI; above ~5% expect noisy wall times, CPU times suffer less)"
	fi
	echo "- raw ns per pair: $(for v in "${VARIANTS[@]}"; do printf '%s: %s; ' "$v" "${S[$v,ns]% }"; done)"
	echo "- the whole run took $(($(date +%s) - T_START)) s"
} >"$CHECKS"

echo
cat "$TABLE"
echo
cat "$CHECKS"

if ((WRITE)); then
	R=$HERE/RESULTS.md
	cmd="BUILD=$BUILD PAIRS=$PAIRS REPS=$REPS SAMPLES='$SAMPLES' SEED=$SEED TRACERS='$TRACERS' bench/run_attach.sh ${ORIG_ARGS[*]}"
	results_header "$CC"
	SECTION=$WORK/section
	{
		results_head attach "attach: slowdown of the malloc/free loop under uprobes, against bpftrace" "$cmd"
		echo "- workload: \`malloc_loop 1 $PAIRS $SEED\` (one thread, sizes 16..4096, built with frame pointers), started by each"
		echo "  tracer (\`-c\`) once its probes are in; $REPS interleaved rounds after one untimed, medians"
		echo
		cat "$TABLE"
		echo
		cat "$CHECKS"
		echo "<!-- attach:end -->"
	} >"$SECTION"
	results_write attach "$SECTION" "$R"
	note "wrote the attach section of $R"
fi
