#!/bin/sh
# rate-net.sh - rate a net as docs/LEARNING.md's curve does: `koma` playing NET at its defaults
# (Threads=1) at byoyomi 200 ms a move against fixed third-party engines, 20 games each, every
# pair of games with its own random opening, colours swapped; prints each match's summary: the
# W/D/L, the Elo with its 95% interval, each side's clock (median and longest move, the most of a
# move's allowance used, games lost on time).
#
#   tools/rate-net.sh NET OUT_DIR [OPPONENT ...]
#
# OPPONENT: fs-5, fs0 or fs5 (fairy-stockfish at that Skill Level, --tolerance 0: a move over
# the clock by 1 ms loses), gpsusi (--tolerance 2000: it loads its books at its first move, and
# overruns later moves too; its clock line shows by how much), or
# the path of another net (koma against koma with that net, --tolerance 0). Default: fs-5 fs0
# fs5 gpsusi. Each match writes OUT_DIR/NAME.log (usi-match's output) and its games as CSA
# under OUT_DIR/NAME/ (NAME: the opponent, or vs-<file name> for a net); an existing NAME is
# refused, never overwritten. Exit status: 0 when every match played all its games, 1 when one
# did not, 2 for a bad command line or a missing engine (before any game).
# Environment: GAMES (20), BYOYOMI (200, ms), SEED (45), RANDOM_PLIES (8), KOMA (build/koma),
# USI_MATCH (build/tools/usi-match), FAIRY (/usr/games/fairy-stockfish), GPSUSI
# (/usr/games/gpsusi). Debian packages the two engines (fairy-stockfish, gpsshogi). Run it on an
# idle machine: the clock is part of what is measured.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
GAMES=${GAMES:-20} BYOYOMI=${BYOYOMI:-200} SEED=${SEED:-45} RANDOM_PLIES=${RANDOM_PLIES:-8}
KOMA=${KOMA:-$here/build/koma} USI_MATCH=${USI_MATCH:-$here/build/tools/usi-match}
FAIRY=${FAIRY:-/usr/games/fairy-stockfish} GPSUSI=${GPSUSI:-/usr/games/gpsusi}

die() { echo "rate-net.sh: $*" >&2; exit 2; }
[ $# -ge 2 ] || { sed -n '8,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
net=$1 out=$2
shift 2
[ $# -gt 0 ] || set -- fs-5 fs0 fs5 gpsusi
[ -f "$net" ] || die "$net: no such net file"
for v in GAMES BYOYOMI SEED RANDOM_PLIES; do
  eval "x=\$$v"
  case $x in '' | *[!0-9]*) die "$v=$x: not a whole number" ;; esac
done
need() { [ -x "$1" ] || command -v "$1" >/dev/null 2>&1 || die "$1: no such program ($2)"; }
need "$KOMA" "KOMA: build Koma first, or set KOMA"
need "$USI_MATCH" "USI_MATCH: build Koma first, or set USI_MATCH"
# Every opponent checked before the first game: a bad name costs no match.
for o in "$@"; do
  case $o in
    fs-5 | fs0 | fs5) need "$FAIRY" "FAIRY: apt-get install fairy-stockfish, or set FAIRY" ;;
    gpsusi) need "$GPSUSI" "GPSUSI: apt-get install gpsshogi, or set GPSUSI" ;;
    *) [ -f "$o" ] || die "$o: not fs-5, fs0, fs5, gpsusi or a net file" ;;
  esac
done
mkdir -p "$out" || die "$out: cannot make the folder"

status=0
for o in "$@"; do
  case $o in
    fs-5 | fs0 | fs5)
      name=$o skill=${o#fs}
      set -- --engine2 "$FAIRY" --option2 Threads=1 --option2 UCI_Variant=shogi --option2 "Skill Level=$skill" \
        --name2 "fairy-stockfish-skill$skill" --tolerance 0 ;;
    gpsusi)
      name=gpsusi
      set -- --engine2 "$GPSUSI" --name2 gpsusi --tolerance 2000 ;;
    *)
      base=$(basename "$o")
      name=vs-${base%.safetensors}
      set -- --engine2 "$KOMA" --option2 Threads=1 --option2 "Net=$o" --name2 "koma-${base%.safetensors}" --tolerance 0 ;;
  esac
  if [ -e "$out/$name.log" ] || [ -e "$out/$name" ]; then
    echo "rate-net.sh: $out/$name.log or $out/$name/ exists: $name skipped (a new OUT_DIR, or remove them)" >&2
    status=1
    continue
  fi
  echo "== $name: $GAMES games at byoyomi $BYOYOMI ms, seed $SEED, started $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
  "$USI_MATCH" --engine1 "$KOMA" --option1 Threads=1 --option1 "Net=$net" --name1 koma "$@" \
    --byoyomi "$BYOYOMI" --games "$GAMES" --random-plies "$RANDOM_PLIES" --seed "$SEED" --quiet \
    --csa-dir "$out/$name" > "$out/$name.log" 2>&1
  rc=$?
  # usi-match's summary: from its blank line to the end
  awk 'f; /^$/ {f = 1}' "$out/$name.log"
  [ $rc -eq 0 ] || { echo "rate-net.sh: $name: usi-match exit status $rc (see $out/$name.log)" >&2; status=1; }
done
exit $status
