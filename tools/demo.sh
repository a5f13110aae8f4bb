#!/bin/sh
# demo.sh - the README's first command: install missing packages, build a
# Release binary tuned for this CPU, and run a short demo on the CPU.
set -eu
cd "$(dirname "$0")/.."
tools/deps.sh
. tools/blas-env.sh
cmake -S . -B build
cmake --build build -j"$(nproc)"
echo
echo "== perft: legal-move generation, start position, depth 5 =="
build/tools/perft 5
