#!/usr/bin/env bash
# Installs the Debian packages heaptrail needs to build and test, if missing.
# Usage: scripts/deps.sh [build|test|bench]   (default: build)
set -euo pipefail
what=${1:-build}
pkgs=(gcc g++ make cmake pkg-config libzstd-dev libunwind-dev libdw-dev libelf-dev zlib1g-dev
  clang bpftool libbpf-dev xz-utils  # these four: the eBPF probes (docs/probes.md)
  libncurses-dev)  # heaptrail live (docs/live.md)
case "$what" in
  test) pkgs+=(python3 libpython3.11-testsuite perl clang libclang-rt-14-dev valgrind sqlite3 git zstd xz-utils coreutils util-linux bsdutils libjemalloc2 libtcmalloc-minimal4
        libc6-dev libcap2-bin
        libmimalloc2.0 chromium golang-go procps tmux strace nodejs
        heaptrack) ;;  # heaptrack: top_temporary_heaptrack_rule compares with heaptrack_print
  bench) pkgs+=(python3 heaptrack bpftrace time strace nodejs) ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "heaptrail: missing Debian packages: ${missing[*]}" >&2
  echo "heaptrail: run as root, or: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "heaptrail: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
