#!/bin/sh
# demo.sh - the README's first command: install missing packages, build a
# Release binary tuned for this CPU, and run a short self-play + training demo
# on the CPU in runs/demo (two cycles: games with the current net, training,
# a new published net; selfplay keeps runs/demo/report.html current), then
# print the run's summary.
set -eu
cd "$(dirname "$0")/.."
tools/deps.sh
. tools/blas-env.sh
cmake -S . -B build
cmake --build build -j"$(nproc)"
run=runs/demo
echo
echo "== self-play + training demo in $run (Ctrl-C stops cleanly; the same command resumes) =="
build/selfplay --run "$run" --cycles 2 --games-per-cycle 16 --backend cpu
echo
build/tools/inspect "$run"
echo
echo "Results: $run/ (koma.db, shards/, models/, log); its games on a board and its charts: $run/report.html"
echo "Continue the run:  build/selfplay --run $run --cycles 10"
echo "Play it in a GUI:  register build/koma, set its Net option to $run"
