# bench/lib.sh — helpers the benchmark scripts share (sourced, not run).

# messages, prefixed with the script's name
die() { echo "${0##*/}: $*" >&2; exit 1; }
note() { echo "${0##*/}: $*" >&2; }

# usage: the script's leading comment, up to "set -euo", without the #s
usage() {
	sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

# bench_args "$@": the options every script takes: --write (WRITE=1),
# --keep (KEEP=1), -h/--help; ORIG_ARGS keeps them for the command line
# RESULTS.md shows.  Other arguments land in BENCH_ARGS when the script
# takes some (BENCH_TAKES_ARGS=1; options still refused), else are refused.
bench_args() {
	WRITE=0
	KEEP=${KEEP:-0}
	ORIG_ARGS=("$@")
	BENCH_ARGS=()
	while [[ $# -gt 0 ]]; do
		case $1 in
		--write) WRITE=1 ;;
		--keep) KEEP=1 ;;
		-h | --help) usage; exit 0 ;;
		-*) die "unknown option '$1' (try --help)" ;;
		*) ((${BENCH_TAKES_ARGS:-0})) || die "unknown argument '$1' (try --help)"
		   BENCH_ARGS+=("$1") ;;
		esac
		shift
	done
}

# bench_workdir TAG: a scratch directory in WORK, removed at exit unless
# KEEP=1 (then its path is said)
bench_workdir() {
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/heaptrail-bench$1.XXXXXX")
	trap bench_cleanup EXIT
}
bench_cleanup() {
	if ((${KEEP:-0})); then
		note "kept work directory $WORK"
	else
		rm -rf "$WORK"
	fi
}

# "min..max" of the numbers given as arguments, RANGE_FMT (default %.1f) each
range() {
	local f=${RANGE_FMT:-%.1f}
	printf '%s\n' "$@" | sort -g | awk -v f="$f" 'NR == 1 { lo = $1 } { hi = $1 }
		END { printf f ".." f "\n", lo, hi }'
}

# value of key=... in a program's output line
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" | tail -n 1; }

# wall clock in ns
now_ns() {
	if [[ -n ${EPOCHREALTIME:-} ]]; then
		local s=${EPOCHREALTIME/[.,]/}
		echo "${s}000"
	else
		date +%s%N
	fi
}

# median of the numbers given as arguments
median() {
	printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 }
		END { if (NR == 0) print "nan";
		      else if (NR % 2) print a[(NR + 1) / 2];
		      else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# calc FORMAT EXPR: EXPR evaluated by awk, printed with FORMAT
calc() { awk "BEGIN { printf \"$1\n\", $2 }"; }

# PASS if the awk condition holds, else FAIL
verdict() { if awk "BEGIN { exit !($1) }"; then echo PASS; else echo FAIL; fi; }

# microseconds during which some task waited for a CPU (Linux PSI), or empty
cpu_wait_us() {
	[[ -r /proc/pressure/cpu ]] || return 0
	sed -n 's/^some .*total=\([0-9]*\).*/\1/p' /proc/pressure/cpu
}

# results_header CC: the "heaptrail at REV" and "machine: ..." lines'
# values, as HT_REV and HT_MACHINE
results_header() {
	local cc=$1 here cpu glibc ccv
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	# (|| true: with pipefail, head closing the pipe early fails the pipeline)
	cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1 || true)
	glibc=$(ldd --version 2>/dev/null | head -n 1 | sed 's/.* //' || true)
	ccv=$($cc --version | head -n 1 || true)
	HT_REV=$(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo "no commit")
	if [[ -n $(git -C "$here/.." status --porcelain -- src include 2>/dev/null) ]]; then
		HT_REV+=" (with uncommitted changes in src/ or include/)"
	fi
	HT_MACHINE="nproc=$(nproc), CPU: ${cpu:-unknown}, kernel: $(uname -r) ($(uname -m)); glibc $glibc, $ccv"
}

# results_head NAME TITLE CMD: the first lines of a RESULTS.md section
# (marker, title, command, date and revision, machine); results_header first
results_head() {
	echo "<!-- $1:begin (bench/run_$1.sh --write) -->"
	echo "## $2"
	echo
	echo "- command: \`$3\`"
	echo "- date: $START_DATE, heaptrail at $HT_REV"
	echo "- machine: $HT_MACHINE"
}

# results_write NAME SECTION RESULTS: puts the file SECTION (which starts
# with "<!-- NAME:begin" and ends with "<!-- NAME:end -->") in place of the
# NAME section of RESULTS, or at its end if it has none
results_write() {
	local name=$1 section=$2 r=$3 tmp
	if [[ -f $r ]] && grep -q "<!-- $name:begin" "$r"; then
		tmp=$(mktemp "$r.XXXXXX")
		awk -v f="$section" -v b="<!-- $name:begin" -v e="<!-- $name:end -->" '
			index($0, b) == 1 { while ((getline l < f) > 0) print l; skip = 1; next }
			index($0, e) == 1 { skip = 0; next }
			!skip' "$r" >"$tmp" && cp "$tmp" "$r"
		rm -f "$tmp"
	else
		{ echo; cat "$section"; } >>"$r"
	fi
}
