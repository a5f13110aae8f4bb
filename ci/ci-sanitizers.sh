#!/bin/sh
# ci-sanitizers.sh - the sanitizer CI job (CMakePresets.json: asan, tsan).
#
#   ci/ci-sanitizers.sh [asan|tsan ...]      (default: asan tsan)
#
# asan: builds build-asan-ci (ASan + UBSan, -fno-sanitize-recover, warnings
#       as errors, CPU only) and runs every `cpu` test except `slow` ones.
# tsan: builds build-tsan-ci (TSan) and runs the tests that start threads,
#       selected by name: compat|dist|server|fault|db|shard|writer|selfplay|train|mcts|usi|eval|referee|match|record
#       (override with KOMA_TSAN_TESTS=<ctest -R regex>), except the tests
#       that start no thread, where TSan has nothing to check (the corpus
#       replays fuzz_*; test_selfplay_dfpn, test_usi_mate, test_usi_tsume: no
#       clone(2) under strace -f), test_koma_shards (its subject is the
#       Python reader; the selfplay run it reads runs the threads of
#       test_selfplay_e2e), test_selfplay_tty (its subject is the status
#       line on a terminal, a pipe and in the log; its selfplay runs the
#       threads of test_selfplay_e2e, and under TSan at load 10 it ran past
#       ctest's 300 s limit), and test_selfplay_kill/_sigint/_fault and
#       test_eval_kill: they
#       kill and restart the real `selfplay` binary under wall-clock limits
#       (240 s for the resumed run) that a TSan build (5-15x slower) misses
#       on a 2-core machine; the same threads run under TSan in
#       test_selfplay_e2e and test_selfplay_game.
# Each job builds only what its tests run (the test programs and the programs
# they start, from <build>/koma_test_targets.txt: no benchmarks, and for tsan
# none of the tests it leaves out), and its tests run with KOMA_TEST_SCALE=0.1
# (the presets): loops that only repeat code already run take a tenth of their
# counts there (tests/koma_test.h, t_scaled); the normal job (tools/test.sh)
# runs the full counts and the assertions that need them.
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
. tools/blas-env.sh # the OpenBLAS kernels the programs pick for themselves (tools/test.sh does the same)
JOBS=${KOMA_JOBS:-2}
TSAN_TESTS=${KOMA_TSAN_TESTS:-'compat|dist|server|fault|db|shard|writer|selfplay|train|mcts|usi|eval|referee|match|record'}
[ $# -gt 0 ] || set -- asan tsan

tools/deps.sh
status=0
for job in "$@"; do
  start=$(date +%s)
  echo "== ci-sanitizers: $job"
  case "$job" in
    asan) select="" ;;
    tsan) select="$TSAN_TESTS" ;; # preset filter plus the overridable name regex
    *)
      echo "ci-sanitizers: unknown job '$job' (asan, tsan)" >&2
      exit 2
      ;;
  esac
  cmake --preset "$job" >/dev/null
  # Build only what the job's tests run: their programs and the programs they
  # start (<build>/koma_test_targets.txt, written by configure: koma_test_needs
  # in CMakeLists.txt), not the benchmarks, nor the tests and tools the job
  # does not run. A test missing from that list builds everything.
  targets=$(ctest --preset "$job" -N ${select:+-R "$select"} | sed -n 's/^ *Test *#[0-9]*: *//p' |
    awk -v list="build-$job-ci/koma_test_targets.txt" '
      BEGIN { while ((getline line < list) > 0) { split(line, f, " "); needs[f[1]] = (f[1] in needs) ? needs[f[1]] " " line : line } }
      !($1 in needs) { print "ci-sanitizers: " $1 " not in " list ": building all" > "/dev/stderr"; all = 1; next }
      { n = split(needs[$1], f, " "); for (i = 2; i <= n; i++) if (!(f[i] in seen)) { seen[f[i]] = 1; print f[i] } }
      END { if (all) print "all" }')
  case " $(echo $targets) " in
    *" all "*) cmake --build --preset "$job" -j "$JOBS" ;;
    *) echo "== ci-sanitizers: $job builds $(echo $targets | wc -w) targets" &&
       cmake --preset "$job" -DKOMA_CI_TARGETS="$(echo $targets | tr ' ' ';')" >/dev/null &&
       cmake --build --preset "$job" -j "$JOBS" --target koma_ci_targets ;;
  esac
  ctest --preset "$job" -j "$JOBS" ${select:+-R "$select"} || status=1
  echo "== ci-sanitizers: $job took $(( $(date +%s) - start )) s"
done
exit $status
