#!/usr/bin/env bash
# bench_data.sh - issue 44's data benchmark: N seeded hcpe positions generated
# (build/bench/bench_data), imported (build/tools/import), measured on disk,
# trained from (`build/train --from-games`) beside bench_train on the same net
# and batch, and the Python route (bench/bench_data_torch.py: PyTorch fed by
# cshogi's hcpe reader and dlshogi features) on the same net, batch and data.
# Prints a table; docs/BENCHMARKS.md "Data at the field's scale (issue 44)".
#
#   PYTHONPATH=/work/cshogi-build bench/bench_data.sh [--scratch DIR] [--positions 40000000]
#       [--python-positions 4000000] [--nets 4x32,10x128] [--batch 256] [--steps 30]
#       [--threads 1] [--keep-data] [--skip PHASES]
#
# Run from the repository root after building bench_data, import, train and
# bench_train. --scratch (default /work/koma-bench-data; never inside the
# repository) gets hcpe/ (the generated files, reused by the next run when
# all are there and --keep-data) and run/ (the imported run, made anew).
# --skip takes a comma list of gen,import,train,torch,read (e.g. --skip gen
# with files already there). Every phase's command is printed before it runs.
# The Python route needs /usr/bin/python3 with torch and numpy and cshogi
# on PYTHONPATH (built from source: docs/BENCHMARKS.md says how); without
# them it is skipped with a line saying so.
set -euo pipefail

SCRATCH=/work/koma-bench-data
POSITIONS=40000000
PY_POSITIONS=4000000
NETS=4x32,10x128
BATCH=256
STEPS=30
THREADS=1
PER_FILE=100000
SEED=1
KEEP=0
SKIP=
while [ $# -gt 0 ]; do
  case "$1" in
    --scratch) SCRATCH=$2; shift 2 ;;
    --positions) POSITIONS=$2; shift 2 ;;
    --python-positions) PY_POSITIONS=$2; shift 2 ;;
    --nets) NETS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --per-file) PER_FILE=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --keep-data) KEEP=1; shift ;;
    --skip) SKIP=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "bench_data.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/build
case "$(cd "$(dirname "$SCRATCH")" 2>/dev/null && pwd)/" in
  "$ROOT"/*) echo "bench_data.sh: --scratch $SCRATCH is inside the repository; give a directory outside it" >&2; exit 2 ;;
esac
for bin in bench/bench_data tools/import train bench/bench_train; do
  [ -x "$B/$bin" ] || { echo "bench_data.sh: $B/$bin missing: cmake --build build --target bench_data import train bench_train" >&2; exit 2; }
done
skip() { case ",$SKIP," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
say() { echo "$@"; }
run() { echo "\$ $*"; "$@"; }
# usage: timev LOG CMD...: /usr/bin/time -v into LOG; prints wall, CPU and max RSS afterwards
timev() { local log=$1; shift; echo "\$ $*"; /usr/bin/time -v -o "$log" "$@"; }
tv_wall() { awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$1"; }
tv_cpu() { awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {print u+s}' "$1"; }
tv_rss() { awk -F': ' '/Maximum resident set size/ {print $2}' "$1"; }
# usage: stamped OUT CMD...: runs CMD (/usr/bin/time -v PROG ...) with each output line prefixed by
# the seconds since its start and PROG's CPU seconds so far (user + system, all threads, /proc);
# OUT.threads gets, at each progress line ("step N/M ..."), every thread of PROG: seconds, tid, name, CPU seconds
stamped() {
  local out=$1; shift; echo "\$ $*"
  /usr/bin/python3 -u -c '
import os, subprocess, sys, time
t0 = time.monotonic()
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
tick = os.sysconf("SC_CLK_TCK")
def stat(path):
    head, tail = open(path).read().rsplit(")", 1)
    f = tail.split()
    return head.split("(", 1)[1].replace(" ", "_"), (int(f[11]) + int(f[12])) / tick
def child():
    try:  # the child of /usr/bin/time
        return open("/proc/%d/task/%d/children" % (p.pid, p.pid)).read().split()[0]
    except (OSError, IndexError):
        return None
with open(sys.argv[1], "w") as f, open(sys.argv[1] + ".threads", "w") as th:
    for line in p.stdout:
        t, c, kid = time.monotonic() - t0, -1.0, child()
        try:
            c = stat("/proc/%s/stat" % kid)[1] if kid else -1.0
            if kid and line.startswith("step "):
                for tid in os.listdir("/proc/%s/task" % kid):
                    name, tc = stat("/proc/%s/task/%s/stat" % (kid, tid))
                    th.write("%.3f %s %s %.2f\n" % (t, tid, name, tc))
        except (OSError, ValueError, IndexError):
            pass
        f.write("%.3f %.2f %s" % (t, c, line))
        f.flush()
sys.exit(p.wait())' "$out" "$@"
}
# usage: thread_split LOG S0: CPU seconds of each thread of PROG between the line of step S0 and the last step line;
# the threads that ended in between (train/loop.c's prefetch thread, one a step) as the process's rest
thread_split() {
  /usr/bin/python3 -c '
import sys
log = sys.argv[1]
steps = [l.split() for l in open(log) if l.split()[2:3] == ["step"]]
t5 = next(float(l[0]) for l in steps if l[3].startswith(sys.argv[2] + "/"))
tl = float(steps[-1][0])
at = {}
for l in open(log + ".threads"):
    t, tid, name, c = l.split()
    at.setdefault(float(t), {})[(tid, name)] = float(c)
a, b = at.get(t5, {}), at.get(tl, {})
d = {k: b[k] - a.get(k, 0.0) for k in b}
proc = {float(l[0]): float(l[1]) for l in steps}
total = (proc[tl] - proc[t5]) or 1.0  # the process: its live threads and those that ended (the per-step prefetch)
d[("ended", "threads that ended (prefetch)")] = total - sum(d.values())
print(" ".join("%s/%s=%.2fs(%.1f%%)" % (k[1].replace(" ", "_"), k[0], v, 100 * v / total)
               for k, v in sorted(d.items(), key=lambda x: -x[1]) if v > 0.005))
' "$1" "$2"
}

mkdir -p "$SCRATCH"
RES=$SCRATCH/results.txt
[ -n "$SKIP" ] || : > "$RES" # a run with --skip adds to the figures of the run before
rec() { echo "$1=$2" >> "$RES"; echo "  $1 = $2"; }
NFILES=$(( (POSITIONS + PER_FILE - 1) / PER_FILE ))
say "# bench_data.sh $(date -u '+%F %T') UTC on $(uname -n): $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
say "# $POSITIONS positions in $NFILES files of $PER_FILE, seed $SEED; nets $NETS, batch $BATCH, $STEPS steps, $THREADS trainer thread(s); load $(load)"
df -h "$SCRATCH" | tail -1

# ---- 1. generate -------------------------------------------------------------------------
HCPE=$SCRATCH/hcpe
have=$(ls "$HCPE" 2>/dev/null | grep -c '\.hcpe$' || true)
if skip gen || { [ "$KEEP" = 1 ] && [ "$have" = "$NFILES" ]; }; then
  say "## generate: kept $have files in $HCPE"
else
  say "## generate (load $(load))"
  rm -rf "$HCPE"
  half=$(( NFILES / 2 ))
  t0=$(date +%s.%N)
  "$B/bench/bench_data" --out "$HCPE" --positions "$POSITIONS" --per-file "$PER_FILE" --seed "$SEED" --first 0 --count "$half" &
  p1=$!
  run "$B/bench/bench_data" --out "$HCPE" --positions "$POSITIONS" --per-file "$PER_FILE" --seed "$SEED" --first "$half"
  wait $p1
  rec gen_wall_s "$(echo "$(date +%s.%N) - $t0" | bc)"
fi
fsum() { find "$@" -type f -printf '%s\n' | awk '{s += $1} END {printf "%d", s}'; }
HCPE_BYTES=$(fsum "$HCPE" -name '*.hcpe')
rec hcpe_bytes_per_position "$(echo "scale=2; $HCPE_BYTES / $POSITIONS" | bc)"

# ---- 2. import ---------------------------------------------------------------------------
RUN=$SCRATCH/run
if ! skip import; then
  say "## import (load $(load))"
  rm -rf "$RUN"
  timev "$SCRATCH/import.time" "$B/tools/import" --run "$RUN" --quiet "$HCPE" | tail -5
  w=$(tv_wall "$SCRATCH/import.time"); c=$(tv_cpu "$SCRATCH/import.time")
  rec import_wall_s "$w"; rec import_cpu_s "$c"; rec import_rss_kb "$(tv_rss "$SCRATCH/import.time")"
  rec import_positions_per_cpu_s "$(echo "$POSITIONS / $c" | bc)"
  rec import_positions_per_wall_s "$(echo "$POSITIONS / $w" | bc)"
  rec load_after_import "$(load)"
fi
SH=$(fsum "$RUN/shards")
DB=$(fsum "$RUN" -maxdepth 1 -name 'koma.db*')
NSH=$(ls "$RUN/shards" | wc -l)
rec shard_files "$NSH"
rec shards_bytes "$SH"; rec db_bytes "$DB"
rec koma_bytes_per_position "$(echo "scale=2; ($SH + $DB) / $POSITIONS" | bc)"
rec koma_disk_kb "$(du -sk "$RUN" | cut -f1)"

# ---- 3. train --from-games beside bench_train --------------------------------------------
# the first STEPS steps of an epoch (each position once, in a shuffled order) where train has --epochs:
# E = STEPS x BATCH / POSITIONS epochs; else STEPS steps drawn with replacement
LEN="--steps $STEPS"
if "$B/train" --help 2>&1 | grep -c -- '--epochs' > /dev/null; then LEN="--epochs $(echo "scale=12; $STEPS * $BATCH / $POSITIONS" | bc)"; fi
for net in ${NETS//,/ }; do
  skip train && break
  say "## train $net (load $(load))"
  rm -rf "$RUN/train"
  stamped "$SCRATCH/train-$net.log" /usr/bin/time -v -o "$SCRATCH/train-$net.time" "$B/train" --from-games \
    --run "$RUN" --net "$net" --batch "$BATCH" $LEN --train-threads "$THREADS" --fresh \
    --progress 0.0001 --checkpoint-every 1000000 --out "$SCRATCH/net-$net.safetensors"
  grep -v '^[0-9.]* [0-9.-]* step [0-9]' "$SCRATCH/train-$net.log" | tail -3
  first=$(awk '$3 == "step" && $4 ~ /^1\// {print $1; exit}' "$SCRATCH/train-$net.log")
  # steady samples/s and samples per CPU-second: from the line of step S0 = STEPS / 2 to the last step
  # line (the first steps of a lazily opened window open its shards: at 400 shards, steps 1-4 open most,
  # and the chance that a shard is still unopened after 14 batches of 256 is e^-9)
  S0=$(( STEPS / 2 > 5 ? STEPS / 2 : 5 ))
  steady() {
    awk -v b="$BATCH" -v col="$1" -v s0="$S0" '$3 == "step" {split($4, a, "/"); s = a[1] + 0; if (s == s0) {t5 = $col} if (s > s0) {tl = $col; sl = s}}
                                   END {if (tl > t5) printf "%.1f", (sl - s0) * b / (tl - t5)}' "$SCRATCH/train-$net.log"
  }
  rec "train_${net}_first_step_s" "$first"
  rec "train_${net}_samples_per_s" "$(steady 1)"
  rec "train_${net}_samples_per_cpu_s" "$(steady 2)"
  rec "train_${net}_thread_cpu" "$(thread_split "$SCRATCH/train-$net.log" "$S0" || echo -)"
  rec "train_${net}_rss_kb" "$(tv_rss "$SCRATCH/train-$net.time")"
  rec "train_${net}_load" "$(load)"
  say "## bench_train $net (load $(load))"
  run "$B/bench/bench_train" --net "$net" --batch "$BATCH" --steps "$STEPS" --train-threads "$THREADS" --cpu-time | tee "$SCRATCH/bench_train-$net.log"
  whole=$(sed -n 's/.*steps by hand: \([0-9.]*\) samples\/s.*/\1/p' "$SCRATCH/bench_train-$net.log")
  stepms=$(sed -n 's/.*train step \([0-9.]*\) ms\/step.*/\1/p' "$SCRATCH/bench_train-$net.log")
  rec "bench_train_${net}_samples_per_s" "$whole"
  rec "bench_train_${net}_samples_per_cpu_s" "$(sed -n 's/.*, \([0-9.]*\) samples per CPU-second.*/\1/p' "$SCRATCH/bench_train-$net.log")"
  rec "bench_train_${net}_step_only_samples_per_s" "$(echo "scale=1; $BATCH * 1000 / $stepms" | bc)"
done

# ---- 4. the Python route ------------------------------------------------------------------
if ! skip torch; then
  if /usr/bin/python3 -c 'import torch, numpy, cshogi.dlshogi' 2>/dev/null; then
    npy=$(( (PY_POSITIONS + PER_FILE - 1) / PER_FILE ))
    files=$(ls "$HCPE"/*.hcpe | sed -n "1,${npy}p")
    for net in ${NETS//,/ }; do
      say "## python route $net on $PY_POSITIONS positions (load $(load))"
      echo "\$ /usr/bin/python3 bench/bench_data_torch.py --net $net --batch $BATCH --steps $STEPS --threads $THREADS $HCPE/<first $npy files>"
      OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} /usr/bin/python3 "$ROOT/bench/bench_data_torch.py" --net "$net" \
        --batch "$BATCH" --steps "$STEPS" --threads "$THREADS" $files | tee "$SCRATCH/torch-$net.log"
      rec "torch_${net}_samples_per_s" "$(sed -n 's/.*after main began), \([0-9.]*\) samples\/s.*/\1/p' "$SCRATCH/torch-$net.log")"
      rec "torch_${net}_samples_per_cpu_s" "$(sed -n 's/.* \([0-9.]*\) samples per CPU-second.*/\1/p' "$SCRATCH/torch-$net.log")"
      rec "torch_${net}_first_step_s" "$(sed -n 's/.*first step at \([0-9.]*\) s.*/\1/p' "$SCRATCH/torch-$net.log")"
      rec "torch_${net}_load" "$(load)"
    done
  else
    say "## python route: skipped (needs /usr/bin/python3 with torch, numpy and cshogi on PYTHONPATH)"
  fi
fi

# ---- 5. reading speed: import beside cshogi (tests/data/formats/bench_read.py) -------------
if ! skip read && /usr/bin/python3 -c 'import cshogi' 2>/dev/null; then
  say "## bench_read.py (load $(load))"
  run /usr/bin/python3 "$ROOT/tests/data/formats/bench_read.py" "$B" | tee "$SCRATCH/bench_read.log"
  # the same generated files: cshogi's reading loop (bench_read.py's) beside import --check
  nread=$(( NFILES < 10 ? NFILES : 10 ))
  files=$(ls "$HCPE"/*.hcpe | sed -n "1,${nread}p")
  say "## cshogi's reader and import --check on the first $nread generated files (load $(load))"
  rec cshogi_read_positions_per_cpu_s "$(PYTHONPATH="$ROOT/tests/data/formats:${PYTHONPATH:-}" /usr/bin/python3 -c '
import sys
from bench_read import cshogi_positions
n = cpu = bad = 0
for p in sys.argv[1:]:
    k, _, c, b = cshogi_positions(p, "hcpe")
    n, cpu, bad = n + k, cpu + c, bad + b
assert bad == 0, bad
print("%.0f" % (n / cpu))' $files)"
  timev "$SCRATCH/check.time" "$B/tools/import" --check --quiet $files | tail -1
  rec import_check_positions_per_cpu_s "$(echo "$nread * $PER_FILE / $(tv_cpu "$SCRATCH/check.time")" | bc)"
fi

# ---- table ---------------------------------------------------------------------------------
say
say "## results (load at the end $(load))"
g() { sed -n "s/^$1=//p" "$RES" | tail -1; }
mb() { local v=$1; echo $(( ${v:-0} / 1024 )); }
ratio() { if [ -n "$1" ] && [ -n "$2" ]; then echo "scale=2; $1 / $2" | bc; else echo "-"; fi; }
say "| figure | value | goal |"
say "|---|---:|---|"
say "| hcpe bytes a position | $(g hcpe_bytes_per_position) | (38) |"
say "| Koma bytes a position (shards + koma.db) | $(g koma_bytes_per_position) | <= 48 |"
say "| shard files | $(g shard_files) | |"
say "| import wall s / CPU s | $(g import_wall_s) / $(g import_cpu_s) | |"
say "| import positions per CPU-second | $(g import_positions_per_cpu_s) | >= cshogi's reading (bench_read.py) |"
say "| cshogi's reader on the same files, positions per CPU-second | $(g cshogi_read_positions_per_cpu_s) | |"
say "| import --check on the same files, positions per CPU-second | $(g import_check_positions_per_cpu_s) | |"
say "| import max RSS | $(mb "$(g import_rss_kb)") MB | |"
for net in ${NETS//,/ }; do
  t=$(g "train_${net}_samples_per_s"); bt=$(g "bench_train_${net}_samples_per_s"); bs=$(g "bench_train_${net}_step_only_samples_per_s")
  tc=$(g "train_${net}_samples_per_cpu_s"); btc=$(g "bench_train_${net}_samples_per_cpu_s")
  py=$(g "torch_${net}_samples_per_s"); pyc=$(g "torch_${net}_samples_per_cpu_s")
  say "| $net: train first step after | $(g "train_${net}_first_step_s") s | <= 30 s |"
  say "| $net: train max RSS | $(mb "$(g "train_${net}_rss_kb")") MB | <= 4096 MB |"
  say "| $net: train samples/s (per CPU-second) | $t ($tc) | |"
  say "| $net: bench_train samples/s whole step (per CPU-second) / step alone | $bt ($btc) / $bs | |"
  say "| $net: train / bench_train step alone, wall | $(ratio "$t" "$bs") | >= 0.95 (loader <= 5%) |"
  say "| $net: train / bench_train whole step, per CPU-second | $(ratio "$tc" "$btc") | |"
  say "| $net: Python route samples/s (per CPU-second; first step after) | $py ($pyc; $(g "torch_${net}_first_step_s") s) | |"
  say "| $net: Koma train / Python route, wall (per CPU-second) | $(ratio "$t" "$py") ($(ratio "$tc" "$pyc")) | >= 2 |"
done
say "results: $RES"
