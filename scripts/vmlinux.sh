#!/bin/sh
# vmlinux.h for the BPF programs (src/probes/*.bpf.c): the kernel's types,
# dumped from its BTF by bpftool.
#
#   scripts/vmlinux.sh BPFTOOL TARBALL OUT   (the build) OUT from
#       /sys/kernel/btf/vmlinux when this kernel has BTF, else extracted from
#       TARBALL, the copy checked in (src/probes/vmlinux/vmlinux.h.tar.xz)
#   scripts/vmlinux.sh --regenerate [BPFTOOL]   rewrites that checked-in copy
#       from this machine's /sys/kernel/btf/vmlinux
#
# The programs are CO-RE (libbpf relocates field offsets at load time), so
# a vmlinux.h from any recent kernel builds programs that run on others.
set -eu
btf=/sys/kernel/btf/vmlinux
if [ "${1:-}" = "--regenerate" ]; then
	bpftool=${2:-bpftool}
	top=$(cd "$(dirname "$0")/.." && pwd)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	"$bpftool" btf dump file "$btf" format c >"$tmp/vmlinux.h"
	(cd "$tmp" && tar cf - vmlinux.h | xz -9 >vmlinux.h.tar.xz)
	mv "$tmp/vmlinux.h.tar.xz" "$top/src/probes/vmlinux/vmlinux.h.tar.xz"
	echo "src/probes/vmlinux/vmlinux.h.tar.xz: from $btf ($(uname -r))"
	exit 0
fi
[ $# -eq 3 ] || { echo "usage: $0 BPFTOOL TARBALL OUT | --regenerate [BPFTOOL]" >&2; exit 2; }
bpftool=$1 out=$3
tarball=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
dir=$(dirname "$out")
mkdir -p "$dir"
if [ -r "$btf" ] && "$bpftool" btf dump file "$btf" format c >"$out.tmp" 2>/dev/null; then
	mv "$out.tmp" "$out"
	echo "vmlinux.h: from $btf"
else
	rm -f "$out.tmp"
	(cd "$dir" && xz -dc "$tarball" | tar xf - vmlinux.h)
	echo "vmlinux.h: no BTF dump of $btf (missing, unreadable, or bpftool failed): from the checked-in $tarball"
fi
