#!/bin/sh
# ci-windows.sh - the Windows CI job: cross-build Koma for Windows with
# tools/cross-windows.sh, then run the test suite's Windows executables under
# Debian's wine (64-bit), through ctest (CMAKE_CROSSCOMPILING_EMULATOR).
#
#   ci/ci-windows.sh [ctest args...]
#
# Runs every test except `slow` ones; GPU tests skip (exit 77) as on Linux.
# Tests that need a Linux program (python3 + torch, gpsusi) skip under wine
# with exit 77, as they do where the program is missing. KOMA_WINE_EXCLUDE (a
# ctest -E regex, empty by default) leaves more tests out.
# The tests run with KOMA_TEST_SCALE=0.1 (as the sanitizer jobs; set it to 1
# for the full counts): loops that only repeat code already run take a tenth
# of their counts and skip the assertions that need them (tests/koma_test.h),
# which the Linux job (tools/test.sh) keeps, on the same code. Under wine,
# test_bootstrap's 300 training steps took 90 s of its 110 (loaded machine);
# that test was 253 s of the 340 s ctest run after session 22.
# The wine prefix lives in BUILD_DIR/wineprefix (created on the first run,
# ~15 s) and its wineserver is stopped at the end.
# Environment: KOMA_JOBS (default 2), KOMA_MINGW_BUILD (default build-mingw).
set -eu
cd "$(dirname "$0")/.."
B=${KOMA_MINGW_BUILD:-build-mingw}
JOBS=${KOMA_JOBS:-2}
# test_usi_limits was left out here from session 4 to 27: under `ctest -j2`
# its run stayed open after "0 failed" (a child held ctest's pipe through a
# handle it inherited). Since session 28 a child inherits its three standard
# handles only and ends with its parent (compat/compat_win32.c), and the test
# runs here again (3 of 3 beside test_usi_busy and test_usi_stop at -j2).
EXCLUDE=${KOMA_WINE_EXCLUDE-}
start=$(date +%s)

# wine first: the configure step below looks for it and makes it ctest's
# emulator (on a machine without it, the .exe files would be run as scripts)
if ! command -v wine >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "ci-windows: installing wine"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends wine wine64
fi

tools/cross-windows.sh "$B"
built=$(date +%s)


WINEPREFIX="$(pwd)/$B/wineprefix"
export WINEPREFIX WINEARCH=win64 WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
KOMA_TEST_SCALE=${KOMA_TEST_SCALE:-0.1}
export KOMA_TEST_SCALE
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  echo "ci-windows: creating the wine prefix $WINEPREFIX"
  wine wineboot -i >/dev/null 2>&1 || true
  wineserver -w
fi
trap 'wineserver -k 2>/dev/null || true' EXIT

# wine_lost_failures LOG KIND: the names of the failed tests in a ctest
# --output-on-failure LOG whose output is empty or wine's client error
# (KIND=lost), or of the others (KIND=real).
wine_lost_failures() {
  awk -v kind="$2" '
    function close_test() {
      if (name == "") return
      lost = !timeout && (text == "" || text ~ /wine client error/)
      if ((kind == "lost") == lost) print name
      name = ""
    }
    /Test +#[0-9]+: .*\*\*\*(Failed|Exception|Timeout)/ {
      close_test(); name = $0; sub(/.*Test +#[0-9]+: /, "", name); sub(/ .*/, "", name)
      timeout = ($0 ~ /\*\*\*Timeout/); text = ""; next
    }
    /^ *Start +[0-9]+:|Test +#[0-9]+: |tests passed|tests failed/ { close_test(); next }
    name != "" && $0 !~ /^[ \t]*$/ { text = text $0 }
    END { close_test() }' "$1"
}

set -- -LE slow "$@"
[ -n "$EXCLUDE" ] && set -- -E "$EXCLUDE" "$@"
status=0
log="$B/ctest-wine.log"
(cd "$B" && ctest --output-on-failure -j "$JOBS" --timeout 1200 "$@") 2>&1 | tee "$log" || true
grep -q "100% tests passed" "$log" || status=1
# wine itself can fail to run a program: its client loses its server
# connection ("wine client error:0: recvmsg: Connection reset by peer", a test
# failed after 0.03 s, session 11, under load), or the program exits at once
# having printed nothing (test_sfen, 0.00 s, no output, CI after session 22; it
# passed 40 of 40 runs under wine here and prints its check count whenever its
# main runs). Only when every failure is one of these are the failed tests run
# once more, and the rerun decides; a failure with output is never rerun.
if [ $status = 1 ] && [ -z "$(wine_lost_failures "$log" real)" ]; then
  echo "ci-windows: wine did not run $(wine_lost_failures "$log" lost | tr '\n' ' ')- running the failed tests once more"
  status=0
  (cd "$B" && ctest --rerun-failed --output-on-failure --timeout 1200) || status=1
fi
end=$(date +%s)
echo "ci-windows: build $((built - start)) s, tests under wine $((end - built)) s"
exit $status
