#!/bin/sh
# gpu-deps.sh - fetch, on a Debian/Ubuntu machine with apt, the .deb files that a
# GPU machine without network or apt needs to build Koma, into .gpudeps/ at the
# repository root (git-ignored). tools/gpu-checks.sh unpacks them there with
# `dpkg -x` into a private prefix, never into /.
#
#   tools/gpu-deps.sh            SQLite, xxHash, cJSON, inih (+ runtime libs), pkgconf,
#                                and OpenBLAS with its Fortran runtime (~15 MB in all)
#   tools/gpu-deps.sh --no-blas  without OpenBLAS: the CPU reference backend then uses
#                                Koma's built-in GEMM (nn/gemm.c), slower CPU tests
#
# Downloads only (no install, no root needed beyond apt's lists). Prints the total
# size and the `carry` argument of the device tool. Owns nothing else: building and
# running are tools/gpu-checks.sh's job.
set -eu
cd "$(dirname "$0")/.."

blas=1
case "${1:-}" in
  --no-blas) blas=0 ;;
  "") ;;
  *) echo "usage: $0 [--no-blas]" >&2; exit 2 ;;
esac

# Build-time dev packages and the shared libraries they link against; pkgconf in
# case the device image has no pkg-config (CMake's FindPkgConfig needs one).
pkgs="libsqlite3-dev libsqlite3-0 libxxhash-dev libxxhash0 libcjson-dev libcjson1
      libinih-dev libinih1 libinireader0 pkgconf-bin libpkgconf3"
if [ "$blas" = 1 ]; then
  pkgs="$pkgs libopenblas-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev
        libgfortran5 libquadmath0"
fi

command -v apt-get >/dev/null || { echo "gpu-deps.sh: needs apt-get (Debian/Ubuntu)" >&2; exit 1; }
rm -rf .gpudeps
mkdir -p .gpudeps
# apt-get download fails on an unknown package name or stale lists: say which.
if ! (cd .gpudeps && apt-get download $pkgs); then
  echo "gpu-deps.sh: apt-get download failed (stale lists? try: apt-get update)" >&2
  exit 1
fi
bytes=$(du -cb .gpudeps/*.deb | tail -1 | cut -f1)
limit=$((30 * 1024 * 1024))
if [ "$bytes" -gt "$limit" ]; then
  echo "gpu-deps.sh: $((bytes / 1048576)) MiB is over 30 MiB; run with --no-blas" >&2
  exit 1
fi
ls -1 .gpudeps
echo "gpu-deps.sh: $(ls .gpudeps/*.deb | wc -l) packages, $((bytes / 1024)) KiB in .gpudeps/$([ "$blas" = 1 ] || echo ' (no OpenBLAS: built-in GEMM on the CPU)')"
echo "device tool: carry [\".gpudeps\"]  (add \"build-gpu\" to skip the rebuild when it fits in 64 MiB)"
