#!/bin/sh
# ci-sanitizers.sh - the sanitizer CI job (CMakePresets.json: asan, tsan).
#
#   ci/ci-sanitizers.sh [asan|tsan ...]      (default: asan tsan)
#
# asan: builds build-asan-ci (ASan + UBSan, -fno-sanitize-recover, warnings
#       as errors, CPU only) and runs every `cpu` test except `slow` ones.
# tsan: builds build-tsan-ci (TSan) and runs the tests that start threads,
#       selected by name: compat|dist|server|fault|db|shard|writer|selfplay|train|mcts|usi|eval|referee|match|record
#       (override with KOMA_TSAN_TESTS=<ctest -R regex>), except the corpus
#       replays (fuzz_*: one thread) and test_selfplay_kill/_sigint/_fault and
#       test_eval_kill: they
#       kill and restart the real `selfplay` binary under wall-clock limits
#       (240 s for the resumed run) that a TSan build (5-15x slower) misses
#       on a 2-core machine; the same threads run under TSan in
#       test_selfplay_e2e and test_selfplay_game.
# Any sanitizer report fails its test (halt_on_error, a distinct exit code:
# ASan 23, UBSan 24, TSan 66), and any failed test fails the job.
# OPENBLAS_NUM_THREADS=1: OpenBLAS's own (uninstrumented) thread pool would
# give TSan false reports and adds nothing to what is checked; where Koma
# sets OpenBLAS's thread count itself, ci/tsan.supp silences the reports
# whose stacks run through libopenblas.
# Environment: KOMA_JOBS (default 2). Needs gcc (or clang) with libasan,
# libubsan and libtsan: Debian's gcc has them.
set -eu
cd "$(dirname "$0")/.."
JOBS=${KOMA_JOBS:-2}
TSAN_TESTS=${KOMA_TSAN_TESTS:-'compat|dist|server|fault|db|shard|writer|selfplay|train|mcts|usi|eval|referee|match|record'}
[ $# -gt 0 ] || set -- asan tsan

tools/deps.sh
status=0
for job in "$@"; do
  start=$(date +%s)
  echo "== ci-sanitizers: $job"
  cmake --preset "$job" >/dev/null
  cmake --build --preset "$job" -j "$JOBS"
  case "$job" in
    asan)
      ctest --preset asan -j "$JOBS" || status=1
      ;;
    tsan)
      # Preset filter plus the overridable name regex.
      ctest --preset tsan -j "$JOBS" -R "$TSAN_TESTS" || status=1
      ;;
    *)
      echo "ci-sanitizers: unknown job '$job' (asan, tsan)" >&2
      exit 2
      ;;
  esac
  echo "== ci-sanitizers: $job took $(( $(date +%s) - start )) s"
done
exit $status
