#!/bin/bash
# suite-under-load.sh - look for tests that depend on timing (maintenance: the
# method of issue 36's "a suite that never flakes"): the whole ctest suite run
# ROUNDS times in each of SUITES clones of this checkout's HEAD at once, beside
# `stress-ng --cpu STRESS` (when installed; 0: none), one line per run.
#
#   tools/suite-under-load.sh [ROUNDS [SUITES [STRESS [DIR]]]]    (default 5 2 4 /tmp/koma-load)
#
# Each clone builds as tools/test.sh does (-DKOMA_WERROR=ON, packages not
# installed here: run tools/deps.sh --test first). The lines go to DIR/runs.log
# (begun anew each time) and each run's ctest output to DIR/ctest-S-R.log.
# KOMA_LOAD_TESTS=REGEX runs only the tests it matches (ctest -R), to repeat a
# suspect many times. Exits 1 when a clone, a build or a run failed, naming
# the failed tests. A 2-core machine takes about 6 minutes a round with two
# suites and a 4-thread load beside (load 8-12).
set -u
cd "$(dirname "$0")/.." || exit 2
rounds=${1:-5} suites=${2:-2} stress=${3:-4} dir=${4:-/tmp/koma-load}
mkdir -p "$dir" || exit 2
head=$(git rev-parse --short HEAD) || exit 2
log=$dir/runs.log
: > "$log"
src=$(pwd)
stress_pid=""
cleanup() { [ -n "$stress_pid" ] && kill "$stress_pid" 2>/dev/null; }
trap cleanup EXIT
trap 'exit 130' INT TERM

suite() { # suite S: clone, build, ROUNDS runs
  local s=$1 d=$dir/clone-$1
  rm -rf "$d" && git clone -q "$src" "$d" && git -C "$d" checkout -q "$head" || { echo "suite $s: clone failed" >> "$log"; return 1; }
  (cd "$d" && . tools/blas-env.sh && cmake -S . -B build -DKOMA_WERROR=ON > "$dir/build-$s.log" 2>&1 &&
    cmake --build build -j"$(nproc)" >> "$dir/build-$s.log" 2>&1) || { echo "suite $s: build failed ($dir/build-$s.log)" >> "$log"; return 1; }
  for r in $(seq 1 "$rounds"); do
    local out=$dir/ctest-$s-$r.log t0 rc failed
    t0=$(date +%s)
    (cd "$d/build" && ctest --output-on-failure -j"$(nproc)" ${KOMA_LOAD_TESTS:+-R "$KOMA_LOAD_TESTS"} > "$out" 2>&1)
    rc=$?
    failed=$(grep -E '\((Failed|Timeout|SEGFAULT|Exception|Child aborted)' "$out" | awk '{print $3}' | tr '\n' ' ')
    echo "$(date +%H:%M) suite $s run $r commit $head rc $rc $(( $(date +%s) - t0 ))s load $(cut -d' ' -f1 /proc/loadavg) failed: ${failed:-none}" >> "$log"
  done
}

if [ "$stress" -gt 0 ] && command -v stress-ng > /dev/null; then
  stress-ng --cpu "$stress" --quiet > /dev/null 2>&1 &
  stress_pid=$!
elif [ "$stress" -gt 0 ]; then
  echo "suite-under-load.sh: stress-ng is not installed: no load beside the suites but their own" >&2
fi
echo "suite-under-load.sh: $suites suite(s) x $rounds run(s) of $head, stress-ng --cpu $stress; lines in $log"
pids=()
for s in $(seq 1 "$suites"); do suite "$s" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p"; done
runs=$(grep -c " rc " "$log")
bad=$(grep -E " rc [1-9]|: (clone|build) failed" "$log")
echo "suite-under-load.sh: $runs run(s) of $head logged in $log"
[ -z "$bad" ] || { echo "$bad"; exit 1; }
