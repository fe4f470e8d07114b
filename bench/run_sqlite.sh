#!/usr/bin/env bash
# bench/run_sqlite.sh — a real program under the whole `heaptrail record`:
# Debian's sqlite3 binary loading ROWS rows into a new database file in
# one transaction (.import of a generated CSV file), side by side in one
# run: no tracer, `heaptrail record` (default: the writer compresses while
# the program runs, record compresses what it wrote raw at the end),
# `heaptrail record --no-compact` (the trace as the writer left it, no end
# step), `heaptrail record --compact` (column coding at the end) and
# heaptrack.  Every variant is timed as a whole process, from its start
# until it exits with the trace final; medians of REPS interleaved runs.
#
#   bench/run_sqlite.sh [--write] [--keep]
#
# Environment (defaults in brackets):
#   BUILD=[/work/main/build]  where the heaptrail binary is
#   SQLITE=[sqlite3]          the sqlite3 binary
#   ROWS=[200000]             rows loaded (about 12 heap events a row)
#   REPS=[5]                  timed repetitions per variant (interleaved)
#   WARMUP=[1]                untimed rounds before the timed ones
#   VARIANTS=["none heaptrail heaptrail-nocompact heaptrail-compact heaptrack"]
# --write puts the results in bench/RESULTS.md, between the "sqlite" markers.
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bench_args "$@"

START_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${BUILD:-/work/main/build}
SQLITE=${SQLITE:-sqlite3}
ROWS=${ROWS:-200000}
REPS=${REPS:-5}
WARMUP=${WARMUP:-1}
VARIANTS=${VARIANTS:-none heaptrail heaptrail-nocompact heaptrail-compact heaptrack}
for v in ROWS REPS WARMUP; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
((REPS >= 1 && ROWS >= 1)) || die "REPS and ROWS must be >= 1"
HT=$BUILD/heaptrail
SQ=$(command -v "$SQLITE" || true)
[[ -n $SQ ]] || die "no $SQLITE (apt-get install sqlite3)"
read -r -a VARS <<<"$VARIANTS"
for v in "${VARS[@]}"; do
	case $v in
	none) ;;
	heaptrail*) [[ -x $HT ]] || die "no $HT: build heaptrail first (or set BUILD=...)" ;;
	heaptrack) command -v heaptrack >/dev/null || die "heaptrack not installed (drop it from VARIANTS)" ;;
	*) die "VARIANTS may list none, heaptrail, heaptrail-nocompact, heaptrail-compact, heaptrack; got '$v'" ;;
	esac
done
[[ " ${VARS[*]} " == *" none "* ]] || die "VARIANTS must list none (the baseline)"
SQ_VERSION=$("$SQ" --version | cut -d' ' -f1)
HK_VERSION=$(heaptrack --version 2>/dev/null | head -n 1 || echo "heaptrack not installed")

bench_workdir -sqlite

# The load: ROWS rows of CSV imported into a new table in one transaction
# (sqlite3's .import: about 12 heap events a row).
CSV=$WORK/rows.csv
SQL=$WORK/load.sql
awk -v n="$ROWS" 'BEGIN {
	x = 12345
	for (i = 1; i <= n; i++) {
		x = (x * 1103515245 + 12345) % 2147483648
		printf "%d,name-%d,%.3f,tag%d\n", i, x % 100000, (x % 10000) / 7.0, i % 24
	}
}' >"$CSV"
{
	echo "PRAGMA journal_mode=OFF;"
	echo "PRAGMA synchronous=OFF;"
	echo "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score REAL, tag TEXT);"
	echo "BEGIN;"
	echo ".import --csv $CSV t"
	echo "COMMIT;"
	echo "SELECT count(*) FROM t;"
} >"$SQL"

declare -A MS BYTES EVENTS FAILED

# run VARIANT REP: one whole run, timed from start to exit
run_one() {
	local v=$1 rep=$2 db=$WORK/db.sqlite trace=$WORK/$1.ht log=$WORK/$1.log t0 t1 ok=1
	rm -f "$db" "$trace" "$WORK"/hk.*
	t0=$(now_ns)
	case $v in
	none) "$SQ" "$db" <"$SQL" >"$log" 2>&1 || ok=0 ;;
	heaptrail) "$HT" record -o "$trace" -- "$SQ" "$db" <"$SQL" >"$log" 2>&1 || ok=0 ;;
	heaptrail-nocompact) "$HT" record --no-compact -o "$trace" -- "$SQ" "$db" <"$SQL" >"$log" 2>&1 || ok=0 ;;
	heaptrail-compact) "$HT" record --compact -o "$trace" -- "$SQ" "$db" <"$SQL" >"$log" 2>&1 || ok=0 ;;
	heaptrack) heaptrack -o "$WORK/hk" "$SQ" "$db" <"$SQL" >"$log" 2>&1 || ok=0 ;;
	esac
	t1=$(now_ns)
	if ((!ok)); then
		note "$v failed (rep $rep):"
		tail -n 5 "$log" | sed 's/^/    /' >&2
		FAILED[$v]=1
		return 0
	fi
	((rep > 0)) || return 0
	MS[$v]+="$(calc %.1f "($t1 - $t0) / 1e6") "
	case $v in
	heaptrail*)
		BYTES[$v]+="$(stat -c %s "$trace") "
		[[ -n ${EVENTS[$v]:-} ]] ||
			EVENTS[$v]=$("$HT" stats --json "$trace" | sed -n 's/^  "events": \([0-9]*\),/\1/p')
		;;
	heaptrack)
		local f
		for f in "$WORK"/hk.zst "$WORK"/hk.gz; do [[ -f $f ]] && BYTES[$v]+="$(stat -c %s "$f") "; done
		if [[ -z ${EVENTS[$v]:-} && -f $WORK/hk.zst ]]; then
			EVENTS[$v]=$(zstd -dc "$WORK/hk.zst" | LC_ALL=C grep -c '^[+-]' || true)
		fi
		;;
	esac
}

W0=$(cpu_wait_us)
T0=$(now_ns)
note "variants: ${VARS[*]}; $ROWS rows; reps: $REPS (+$WARMUP warm-up)"
for ((rep = 1 - WARMUP; rep <= REPS; rep++)); do
	r=$rep
	((r < 0)) && r=0
	for v in "${VARS[@]}"; do
		[[ -n ${FAILED[$v]:-} ]] || run_one "$v" "$r"
	done
	((rep > 0)) && note "rep $rep/$REPS done"
done
CONTENTION=
W1=$(cpu_wait_us)
if [[ -n $W0 && -n $W1 ]]; then
	CONTENTION=$(calc %.1f "100 * ($W1 - $W0) * 1000 / ($(now_ns) - $T0)")
fi

TABLE=$WORK/table
CHECKS=$WORK/checks
RAW=$WORK/raw
# shellcheck disable=SC2086
BASE=$(median ${MS[none]})
{
	echo "| variant | whole run ms (median) | min..max | slowdown | trace bytes | events | bytes/event |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	for v in "${VARS[@]}"; do
		if [[ -n ${FAILED[$v]:-} || -z ${MS[$v]:-} ]]; then
			echo "| $v | failed | | | | | |"
			continue
		fi
		# shellcheck disable=SC2086
		m=$(median ${MS[$v]})
		# shellcheck disable=SC2086
		rg=$(range ${MS[$v]})
		b="—" e="—" bpe="—"
		if [[ -n ${BYTES[$v]:-} ]]; then
			# shellcheck disable=SC2086
			b=$(median ${BYTES[$v]})
			b=${b%.*}
			e=${EVENTS[$v]:-}
			[[ $e =~ ^[0-9]+$ ]] && ((e > 0)) && bpe=$(calc %.2f "$b / $e") || e="—"
		fi
		printf '| %s | %.0f | %s | %s | %s | %s | %s |\n' "$v" "$m" "$rg" "$(calc %.2fx "$m / $BASE")" "$b" "$e" "$bpe"
	done
} >"$TABLE"
{
	if [[ -n ${MS[heaptrail]:-} ]]; then
		# shellcheck disable=SC2086
		s=$(calc %.2f "$(median ${MS[heaptrail]}) / $BASE")
		echo "- whole \`heaptrail record\` (default) ${s}x the untraced sqlite3 (target <= 1.3x): $(verdict "$s <= 1.3")"
	fi
	if [[ -n ${MS[heaptrack]:-} && -n ${MS[heaptrail]:-} ]]; then
		# shellcheck disable=SC2086
		echo "- heaptrack $(calc %.2fx "$(median ${MS[heaptrack]}) / $BASE") the untraced sqlite3; heaptrail is $(calc %.1fx "$(median ${MS[heaptrack]}) / $(median ${MS[heaptrail]})") faster, whole"
	fi
	[[ -n $CONTENTION ]] && echo "- CPU contention: some task waited for a CPU ${CONTENTION}% of the time during the whole run (Linux PSI; above ~5% expect noisy numbers; the traced variants add their own)"
} >"$CHECKS"
{
	for v in "${VARS[@]}"; do
		[[ -n ${MS[$v]:-} ]] && echo "- $v: whole run ms ${MS[$v]% }${BYTES[$v]:+; trace bytes ${BYTES[$v]% }}"
	done
} >"$RAW"
echo
cat "$TABLE"
echo
cat "$CHECKS"

if ((WRITE)); then
	R=$HERE/RESULTS.md
	cmd="BUILD=$BUILD ROWS=$ROWS REPS=$REPS WARMUP=$WARMUP"
	[[ $VARIANTS != "none heaptrail heaptrail-nocompact heaptrail-compact heaptrack" ]] && cmd+=" VARIANTS=\"$VARIANTS\""
	cmd+=" bench/run_sqlite.sh ${ORIG_ARGS[*]}"
	results_header gcc
	SECTION=$WORK/section
	{
		results_head sqlite "sqlite3: the whole \`heaptrail record\` on a real program" "$cmd"
		echo "- workload: \`sqlite3 DB < load.sql\` ($SQ_VERSION): \`.import --csv\` of $ROWS rows (4 columns, generated by the"
		echo "  script) into a new table of a new database file in one transaction (journal off, synchronous off), then a"
		echo "  SELECT count(*); $HK_VERSION"
		echo "- whole run: the command from its start until it exits with the trace final (for \`heaptrail record\`: the"
		echo "  writer's last chunks and record's end step included); medians of $REPS interleaved runs after $WARMUP warm-up"
		echo
		cat "$TABLE"
		echo
		cat "$CHECKS"
		echo
		echo "Raw samples:"
		echo
		cat "$RAW"
		echo "<!-- sqlite:end -->"
	} >"$SECTION"
	results_write sqlite "$SECTION" "$R"
	note "wrote $R"
fi
