#!/bin/sh
# test.sh - the README's second command: install missing packages, build with
# warnings as errors, and run the whole ctest suite (GPU tests skip, exit 77,
# where no device is present).
set -eu
cd "$(dirname "$0")/.."
tools/deps.sh --test
. tools/blas-env.sh
cmake -S . -B build -DKOMA_WERROR=ON
cmake --build build -j"$(nproc)"
cd build && ctest --output-on-failure -j"$(nproc)" "$@"
