#!/usr/bin/env bash
# gpu-checks.sh - every GPU check of Koma in a few calls on a lent GPU machine
# (no network, no apt; CUDA toolkit, PyTorch and compute-sanitizer installed).
#
#   tools/gpu-checks.sh STAGE...     stages, run in the order given:
#     build     configure build-gpu (Release, CUDA arch native, else 90; Ninja when there)
#               and build it; fails unless the configure report says "CUDA backend: built"
#     test      nvidia-smi -L; ctest -L gpu; then every other non-slow test (ctest -j8)
#     sanitize  compute-sanitizer memcheck (+leaks), racecheck, synccheck, initcheck on
#               tests/nn/test_nn_cuda_gpu with its `quick` set, as the time budget permits
#     bench     bench/bench_nn_gpu, docs/BENCHMARKS.md's command (6x64,10x128 x tf32,bf16)
#     torch     bench/torch_bench.py eager (the same command), then --compile on 5 batch
#               sizes (torch.compile recompiles per batch size and stops compiling after 8)
#     selfplay  bench/bench_selfplay --config configs/gpu.ini --seconds 60 while
#               nvidia-smi samples utilization; then --threads 15 if time is left
#     profile   device time by op (KOMA_CUDA_OPTIME) of bench_nn_gpu 10x128 B1024 forward +
#               training, bf16 then tf32 (PROFILE_MODES); nsys's top 30 kernels where installed
#     merge     bench_nn_gpu 6x64,10x128 x tf32,bf16 (B256, B1024) with the policy/legal head
#               convolutions merged (the default) and apart (KOMA_MERGE_HEADS=0), two interleaved
#               rounds; each run also gives training with nn_train_step (`train`), one step
#               late (`train late`, the training loop's way) and on a batch staged on the device
#               (`train staged`: the resident window's route, steps recorded as CUDA graphs)
#     fuse      bench_nn_gpu 6x64,10x128 x tf32,bf16 inference (B64, B256, B1024) three ways, two
#               interleaved rounds: fused units + CUDA graphs (the default), graphs off
#               (KOMA_CUDA_GRAPHS=0), neither (KOMA_CUDA_NO_FUSE=1 too: the route before them)
#     loop      the real loop (issue 32): from nothing, selfplay --config configs/gpu.ini
#               (LOOP_CONFIG) with the trainer on the same GPU for LOOP_MINUTES (default 4;
#               `loop=MIN` sets it; cut to the budget), stopped by SIGINT (selfplay commits its
#               finished games and exits 130); then tools/loop-summary's figures (cycles
#               published, positions/s, evals/s, batch, trainer samples/s, samples per position
#               against the configured value, inference vs training device time from CUDA
#               events, the run left committed) into loop-summary.txt and summary.txt, and
#               under OUT, each at most 16 MiB (GPU_CHECKS_FILE_CAP bytes; a log over it is cut
#               to its end, anything else gzipped or left out, with a line saying so): the
#               newest model as weights only (loop-model.safetensors, ship-net), loop-koma.db
#               and the run's log (loop-run.log)
#     quick     for a 15-minute device session, in one call: ctest -L gpu, the loop (4 minutes),
#               then as the budget permits memcheck, 10x128 tf32,bf16 B256/B1024 inference +
#               training three ways side by side (Koma's default route; unfused:
#               KOMA_CUDA_GRAPHS=0 KOMA_CUDA_NO_FUSE=1 KOMA_MERGE_HEADS=0; PyTorch eager), then
#               bench_selfplay gpu.ini 30 s
#     all       build test sanitize bench torch selfplay (over 10 minutes: raise the budget)
#   test, sanitize, bench, selfplay, loop and quick build first when build-gpu is not built yet.
#
# One call for a lent device (build ~1.5 min, GPU tests up to 3 min, the loop 4 min + ~1 min to
# stop and collect; what time is left goes to memcheck and the benchmarks):
#   command "GPU_CHECKS_BUDGET=510 tools/gpu-checks.sh build quick"   carry [".gpudeps"]   timeout_s 570
# It returns build.log, quick.log, summary.txt and the loop's four files (7 of the 8 a call
# brings back). LOOP_MINUTES=0 leaves the loop out of quick.
#
# The loop's settings: LOOP_CONFIG, LOOP_ARGS (flags after it; default "--games-per-cycle 256":
# gpu.ini's 12 x 256 games in flight take minutes a game, so a 1024-game cycle would not close
# in 4 minutes; LOOP_ARGS= runs gpu.ini as it is), LOOP_RUN (the run folder, empty or absent;
# default a new /tmp/koma-loop.XXXXXX, removed after), LOOP_STOP_CYCLES (also stop once this
# many models are published), LOOP_GRACE (seconds to stop after SIGINT before SIGKILL, 60),
# LOOP_RESERVE (seconds of the budget kept for stopping and collecting, 45), LOOP_COLLECT=1
# (no selfplay: the summary and files of the run LOOP_RUN; LOOP_EXIT its exit status).
# Its CPU twin, which the test suite runs (tests/tools/test_loop_stage.c): GPU_CHECKS_CPU=1
# BUILD_DIR=build tools/gpu-checks.sh loop  (no CUDA, no build: the binaries of BUILD_DIR,
# configs/cpu.ini with a tiny net and cycles; only the loop stage).
#
# Here (a Debian/Ubuntu box with apt), once: tools/gpu-deps.sh (fills .gpudeps/, ~15 MB).
# Then three calls of the device tool `run` (kind left out), each ending in its summary:
#   call 1  command "tools/gpu-checks.sh build test sanitize"   carry [".gpudeps"]  timeout_s 600
#           build ~1 min, test ~2 min, sanitize the rest of 9.5 min (memcheck 180 s,
#           racecheck 120 s, synccheck and initcheck 45 s each at most, cut to the budget)
#   call 2  command "tools/gpu-checks.sh build bench selfplay"  carry [".gpudeps"]  timeout_s 600
#           build ~1 min, bench ~2 min, selfplay ~1.5 min + ~1 min for the --threads 15 run
#   call 3  command "tools/gpu-checks.sh torch"                  timeout_s 600 (no build, no carry)
#           eager ~2 min, --compile up to 5 min (compilation dominates; partial tables kept)
# Estimates from a 2-core box scaled to 16 cores and from the programs' timed loops:
# the build (two CPU minutes here, of which 14 s for nvcc on nn/*.cu), the CPU
# tests (5 CPU minutes here), bench_nn_gpu and torch_bench (4 tables x 11 batch sizes x
# 2 timed loops x BENCH_SECONDS, + training). About 22 minutes of commands, plus a
# machine start per call (a minute or more): they fit in a session's 30 minutes of device
# time, with little to spare; GPU_CHECKS_BUDGET=300 (seconds) shortens a call.
# Each call rebuilds (~1 min): a machine stays warm for 30 s only, and carrying
# "build-gpu" from here does not help (a CMake tree holds absolute source paths and this
# box's -march=native code; the script starts afresh a tree configured elsewhere; and
# build-gpu, 48 MB here, with .gpudeps and the tree makes 63 of the 64 MiB a call carries).
#
# Logs: ${OUT:-./gpu-out}/<stage>.log (whole output) and summary.txt (one line per step:
# PASS / FAIL / TIMEOUT / SKIP (budget) / NODEV (exit 77), seconds, figures), at most 7
# files; the summary is also printed at the end. Exit status 1 when a step failed; the
# later steps of the same call still run.
#
# Environment: OUT (log folder), JOBS (build jobs, default nproc), GPU_CHECKS_BUDGET
# (seconds for the whole call, default 570: steps are cut to fit or skipped),
# BUILD_DIR (default build-gpu), CUDA_ARCH (instead of native), CUDNN_ROOT (a cuDNN
# tree: include/, lib/ or lib64/), PYTHON (default python3, else /opt/torch/.venv/bin/python3),
# BENCH_SECONDS (timed seconds per table row, default 1; docs/BENCHMARKS.md's commands say 2:
# set 2 when device time allows), KOMA_DEPS_PREFIX (default /tmp/koma-deps), KOMA_CUDA_LINKS
# (default /tmp/koma-cuda-links), GPU_CHECKS_FORCE_PIP=1 (cuDNN and cuBLAS from the pip
# wheels even where the toolkit has them) and GPU_CHECKS_OWN_PKGCONFIG=1 (.gpudeps'
# pkgconf and .pc files even where the system has its own): to test those routes on a
# machine that has everything.
#
# Owns: the private dependency prefix (.gpudeps unpacked with dpkg -x, .pc files
# rewritten to it), the cuDNN/cuBLAS link folder, build-gpu, the logs. Does not
# install anything into /, and does not touch other build trees.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$ROOT" || exit 1
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
OUTDIR=${OUT:-$ROOT/gpu-out}
JOBS=${JOBS:-$(nproc)}
BUDGET=${GPU_CHECKS_BUDGET:-570}
P=${KOMA_DEPS_PREFIX:-/tmp/koma-deps}
LINKS=${KOMA_CUDA_LINKS:-/tmp/koma-cuda-links} # libcudnn.so / libcublas.so links for pip wheels
BENCH_SECONDS=${BENCH_SECONDS:-1}
STATE=$(mktemp -d /tmp/gpu-checks.XXXXXX)
mkdir -p "$OUTDIR"
SUMMARY=$OUTDIR/summary.txt
: >"$SUMMARY"
trap 'rm -rf "$STATE"' EXIT

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
[ $# -gt 0 ] || { usage; exit 2; }
stages=()
for s in "$@"; do
  case "$s" in
    build | test | sanitize | bench | torch | selfplay | profile | merge | fuse | quick | loop) stages+=("$s") ;;
    loop=*) LOOP_MINUTES=${s#loop=}; stages+=(loop) ;;
    all) stages+=(build test sanitize bench torch selfplay) ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu-checks.sh: unknown stage '$s' (build test sanitize bench torch selfplay profile merge fuse quick loop loop=MINUTES all)" >&2; exit 2 ;;
  esac
done
# the loop stage (stage_loop below) and its CPU twin
CPU_MODE=${GPU_CHECKS_CPU:-0}
CAP=${GPU_CHECKS_FILE_CAP:-16777216} # bytes a file under $OUT may have (the device tool's 16 MiB)
LOOP_GRACE=${LOOP_GRACE:-60}         # seconds selfplay has to stop after SIGINT
LOOP_RESERVE=${LOOP_RESERVE:-45}     # seconds of the budget kept for the stop, the summary and the files
if [ "$CPU_MODE" = 1 ]; then
  for s in "${stages[@]}"; do
    [ "$s" = loop ] || { echo "gpu-checks.sh: GPU_CHECKS_CPU=1 runs the loop stage only, not '$s'" >&2; exit 2; }
  done
  LOOP_CONFIG=${LOOP_CONFIG:-configs/cpu.ini}
  LOOP_ARGS=${LOOP_ARGS-"--net 2x16 --games-per-cycle 4 --shard-games 0 --threads 1 --games-per-thread 4 --visits 8 --visits-fast 4 --max-ply 48 --eval-every 0 --min-steps-per-cycle 4 --progress 0"}
else
  LOOP_CONFIG=${LOOP_CONFIG:-configs/gpu.ini}
  # 256 games a cycle, not gpu.ini's 1024: 12 x 256 games are in flight, so at ~2000 positions/s
  # a game takes minutes and a 1024-game cycle would not close in a 4-minute loop
  LOOP_ARGS=${LOOP_ARGS-"--games-per-cycle 256"}
fi

# ---- bookkeeping ----------------------------------------------------------------
left() { echo $((BUDGET - SECONDS)); }
say() { echo "== gpu-checks: $*"; }
# result NAME STATUS SECONDS [FIGURES]: one summary line
result() {
  [ "$2" = NODEV ] && [ -z "${4:-}" ] && set -- "$1" "$2" "$3" "exit 77: no CUDA device"
  [ "$2" = SKIP ] && [ -z "${4:-}" ] && set -- "$1" "$2" "$3" "too little of the budget left"
  printf '%-8s %-28s %5ss  %s\n' "$2" "$1" "$3" "${4:-}" >>"$SUMMARY"
  say "$2 $1 (${3}s) ${4:-}"
}
# step NAME MAX_S MIN_S CMD...: runs CMD under timeout min(MAX_S, budget left - 15);
# skips it when fewer than MIN_S seconds would be left. Sets RC (124: timed out, 200:
# skipped) and DT; the caller writes the result line (it knows the figures).
step() {
  local name=$1 max=$2 min=$3 t
  shift 3
  t=$(($(left) - 15))
  [ "$t" -gt "$max" ] && t=$max
  if [ "$t" -lt "$min" ]; then
    RC=200 DT=0
    say "skip $name: ${t}s left of the budget, needs $min"
    return
  fi
  say "$name (limit ${t}s): $*"
  # `timeout` runs programs, not shell functions: krun becomes env
  if [ "$1" = krun ]; then
    shift
    set -- env "LD_LIBRARY_PATH=${KOMA_LD}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
  fi
  local t0=$SECONDS
  timeout -k 10 "$t" "$@"
  RC=$?
  DT=$((SECONDS - t0))
}
# status RC: PASS / FAIL / TIMEOUT / SKIP (budget) / NODEV (exit 77: no CUDA device) for an exit code
status() {
  case "$1" in
    0) echo PASS ;;
    77) echo NODEV ;;
    124 | 137) echo TIMEOUT ;;
    200) echo SKIP ;;
    *) echo FAIL ;;
  esac
}
# krun CMD...: runs one of our binaries with the private library folders first
krun() { LD_LIBRARY_PATH="${KOMA_LD}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
KOMA_LD=""
CUDA_HOME=${CUDA_HOME:-}
DEPS_CMAKE_ARGS=()
ld_add() { case ":$KOMA_LD:" in *":$1:"*) ;; *) KOMA_LD=${KOMA_LD:+$KOMA_LD:}$1 ;; esac; }

# ---- dependencies: SQLite, xxHash, cJSON, inih, OpenBLAS from .gpudeps ----------
deb_unpack() { # DEB DIR: dpkg -x, or ar + tar where dpkg is missing
  if command -v dpkg >/dev/null; then
    dpkg -x "$1" "$2"
  else
    local m
    m=$(ar t "$1" | grep '^data\.tar')
    case "$m" in
      *.xz) ar p "$1" "$m" | tar -xJ -C "$2" ;;
      *.zst) ar p "$1" "$m" | tar --zstd -x -C "$2" ;;
      *.gz) ar p "$1" "$m" | tar -xz -C "$2" ;;
      *) ar p "$1" "$m" | tar -x -C "$2" ;;
    esac
  fi
}

setup_deps() {
  local have_pc=1 missing=() m
  command -v pkg-config >/dev/null || have_pc=0
  [ "${GPU_CHECKS_OWN_PKGCONFIG:-0}" = 0 ] || have_pc=0
  for m in sqlite3 libxxhash libcjson inih; do
    if [ $have_pc = 0 ] || ! pkg-config --exists "$m"; then missing+=("$m"); fi
  done
  local blas_missing=0
  if [ $have_pc = 0 ] || ! pkg-config --exists openblas; then blas_missing=1; fi
  if [ ${#missing[@]} = 0 ] && [ $have_pc = 1 ]; then
    say "deps: the system's pkg-config finds sqlite3, libxxhash, libcjson, inih"
    [ $blas_missing = 0 ] || say "deps: no openblas.pc: CBLAS only if CMake's FindBLAS finds one, else the built-in GEMM"
    return 0
  fi
  say "deps: missing from pkg-config: ${missing[*]:-none}$([ $have_pc = 1 ] || echo ' (no pkg-config at all)')"
  local debs=("$ROOT"/.gpudeps/*.deb)
  if [ ! -e "${debs[0]}" ]; then
    say "deps: FAIL: no .gpudeps/*.deb; run tools/gpu-deps.sh on a machine with apt and carry \".gpudeps\""
    return 1
  fi
  local stamp
  stamp=$(ls -l "${debs[@]}" | awk '{print $5, $NF}' | md5sum | cut -c1-32)
  if [ "$(cat "$P/.stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$P"
    mkdir -p "$P"
    local d
    for d in "${debs[@]}"; do deb_unpack "$d" "$P" || { say "deps: FAIL: cannot unpack $d"; return 1; }; done
    echo "$stamp" >"$P/.stamp"
  fi
  # Debian's links are relative today; an absolute one would point into the
  # device's own /usr: re-point it into the prefix. Then every link must resolve
  # to a file inside the prefix.
  local l tgt bad=0 nlinks=0
  while IFS= read -r l; do
    tgt=$(readlink "$l")
    case "$tgt" in /*) ln -sfn "$P$tgt" "$l" ;; esac
    nlinks=$((nlinks + 1))
    case "$(readlink -f "$l")" in
      "$P"/*) [ -e "$l" ] || { say "deps: broken link $l -> $tgt"; bad=1; } ;;
      *) say "deps: link leaves the prefix: $l -> $tgt"; bad=1 ;;
    esac
  done < <(find "$P/usr/lib" -type l)
  [ $bad = 0 ] || { say "deps: FAIL: links"; return 1; }
  # .pc copies for what the system lacks, with /usr rewritten to the prefix
  # (prefix=, libdir=, includedir= lines; some files spell out /usr without ${prefix})
  local arch=x86_64-linux-gnu want=("${missing[@]}") pc
  [ $blas_missing = 1 ] && want+=(openblas)
  mkdir -p "$P/pkgconfig"
  rm -f "$P"/pkgconfig/*.pc
  for m in "${want[@]}"; do
    pc=$(find "$P/usr/lib/$arch" -name "$m.pc" | head -1)
    if [ -z "$pc" ]; then
      [ "$m" = openblas ] && { say "deps: no openblas in .gpudeps: the built-in GEMM"; continue; }
      say "deps: FAIL: $m.pc is not in .gpudeps"
      return 1
    fi
    sed -E "s#^([A-Za-z_]+)=/usr([/ ]|\$)#\\1=$P/usr\\2#" "$pc" >"$P/pkgconfig/$m.pc"
  done
  export PKG_CONFIG_PATH="$P/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  # CMake tries find_package(SQLite3) before pkg-config: point it at the prefix too,
  # or it takes a system header with no library to match (or the reverse)
  case " ${missing[*]} " in
    *" sqlite3 "*) DEPS_CMAKE_ARGS+=(-DSQLite3_INCLUDE_DIR="$P/usr/include"
                                     -DSQLite3_LIBRARY="$P/usr/lib/$arch/libsqlite3.so") ;;
  esac
  if [ $have_pc = 0 ]; then # Debian's pkgconf, through a wrapper that finds its library
    mkdir -p "$P/bin"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/usr/lib/%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s/usr/bin/pkgconf "$@"\n' \
      "$P" "$arch" "$P" >"$P/bin/pkg-config"
    chmod +x "$P/bin/pkg-config"
    export PATH="$P/bin:$PATH"
  fi
  # every module must now give -I/-L folders that exist, with its header and library in them
  local hdr lib flags f ok=1
  for m in "${want[@]}"; do
    [ -f "$P/pkgconfig/$m.pc" ] || continue
    case "$m" in
      sqlite3) hdr=sqlite3.h lib=libsqlite3.so ;;
      libxxhash) hdr=xxhash.h lib=libxxhash.so ;;
      libcjson) hdr=cJSON.h lib=libcjson.so ;;
      inih) hdr=ini.h lib=libinih.so ;;
      openblas) hdr=cblas.h lib=libopenblas.so ;;
    esac
    flags=$(pkg-config --cflags --libs "$m") || { ok=0; continue; }
    local fh=0 fl=0
    for f in $flags; do
      case "$f" in
        -I*) [ -d "${f#-I}" ] || { say "deps: $m: no folder ${f#-I}"; ok=0; }
             [ -f "${f#-I}/$hdr" ] && fh=1 ;;
        -L*) [ -d "${f#-L}" ] || { say "deps: $m: no folder ${f#-L}"; ok=0; }
             [ -e "${f#-L}/$lib" ] && fl=1 && ld_add "${f#-L}" ;;
      esac
    done
    [ $fh = 1 ] && [ $fl = 1 ] || { say "deps: $m: $hdr or $lib not under its flags: $flags"; ok=0; }
    say "deps: $m: $flags"
  done
  ld_add "$P/usr/lib/$arch" # libgfortran, libquadmath (OpenBLAS's own needs)
  [ $ok = 1 ] || { say "deps: FAIL: pkg-config flags"; return 1; }
}

# ---- CUDA: nvcc, cuDNN, cuBLAS ----------------------------------------------------
# first_of PATH...: the first that exists
first_of() {
  local f
  for f in "$@"; do [ -e "$f" ] && { echo "$f"; return 0; }; done
  return 1
}

PY=""
find_python() {
  local c
  for c in "${PYTHON:-}" python3 /opt/torch/.venv/bin/python3; do
    [ -n "$c" ] && command -v "$c" >/dev/null && { PY=$c; return 0; }
  done
  return 1
}
# pip_root MODULE: the folder of an installed (namespace) package, or nothing
pip_root() {
  [ -n "$PY" ] || find_python || return 1
  "$PY" - "$1" 2>/dev/null <<'EOF'
import importlib, os, sys
m = importlib.import_module(sys.argv[1])
f = getattr(m, "__file__", None)
print(os.path.dirname(f) if f else list(m.__path__)[0])
EOF
}
# link_libs SRCDIR NAME...: links SRCDIR/libNAME.so* into $LINKS/lib, plus an
# unversioned libNAME.so when the wheel ships only libNAME.so.N
link_libs() {
  local src=$1 n f
  shift
  mkdir -p "$LINKS/lib"
  for n in "$@"; do
    for f in "$src"/lib"$n".so*; do [ -e "$f" ] && ln -sfn "$f" "$LINKS/lib/${f##*/}"; done
    if [ ! -e "$LINKS/lib/lib$n.so" ]; then
      f=$(ls "$src"/lib"$n".so.[0-9]* 2>/dev/null | sort -V | head -1)
      [ -n "$f" ] && ln -sfn "$f" "$LINKS/lib/lib$n.so"
    fi
  done
}

CMAKE_CUDA_ARGS=()
CUDA_INC_FLAGS=""
CUDNN_DESC="no cuDNN"
setup_cuda() {
  local nvcc=${CUDACXX:-}
  [ -n "$nvcc" ] || nvcc=$(command -v nvcc || true)
  [ -n "$nvcc" ] || nvcc=$(ls -d /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc 2>/dev/null | sort -V | tail -1)
  if [ -z "$nvcc" ] || [ ! -x "$nvcc" ]; then say "cuda: FAIL: no nvcc (set CUDACXX)"; return 1; fi
  export CUDACXX=$nvcc
  CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  PATH="$(dirname "$nvcc"):$PATH"
  say "cuda: $nvcc ($("$nvcc" --version | grep -o 'release [0-9.]*')), toolkit $CUDA_HOME"
  rm -rf "$LINKS"
  mkdir -p "$LINKS/lib" "$LINKS/include"
  find_python # here, not in pip_root's subshell: PY is kept
  local force=${GPU_CHECKS_FORCE_PIP:-0} inc="" lib="" root d
  # cuDNN: CUDNN_ROOT, else beside the toolkit / in the system, else the pip wheel
  if [ -n "${CUDNN_ROOT:-}" ]; then
    root=$CUDNN_ROOT
  elif [ "$force" = 0 ] &&
       inc=$(first_of "$CUDA_HOME"/include/cudnn.h /usr/include/cudnn.h /usr/include/x86_64-linux-gnu/cudnn.h) &&
       lib=$(first_of "$CUDA_HOME"/lib64/libcudnn.so "$CUDA_HOME"/lib/libcudnn.so \
             "$CUDA_HOME"/targets/x86_64-linux/lib/libcudnn.so /usr/lib/x86_64-linux-gnu/libcudnn.so); then
    root=""
    inc=$(dirname "$inc")
    ld_add "$(dirname "$(readlink -f "$lib")")"
    say "cudnn: the system's ($inc, $lib)"
  else
    root=$(pip_root nvidia.cudnn)
    [ -n "$root" ] && say "cudnn: pip wheel at $root" || say "cudnn: not beside the toolkit, and $PY has no nvidia.cudnn"
  fi
  if [ -n "$root" ]; then
    inc=$root/include
    for d in "$root/lib64" "$root/lib"; do
      if ls "$d"/libcudnn.so* >/dev/null 2>&1; then
        link_libs "$d" cudnn cudnn_adv cudnn_cnn cudnn_engines_precompiled cudnn_engines_runtime_compiled \
          cudnn_graph cudnn_heuristic cudnn_ops
        ld_add "$d"
        break
      fi
    done
    lib=$LINKS/lib/libcudnn.so
  fi
  if [ ! -f "$inc/cudnn.h" ] || [ ! -e "$lib" ]; then
    say "cudnn: FAIL: no cudnn.h ($inc) or libcudnn.so ($lib)"
    return 1
  fi
  ld_add "$LINKS/lib"
  local v
  v=$(awk '/#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) /{printf "%s%s", sep, $3; sep="."}' "$inc/cudnn_version.h" 2>/dev/null)
  say "cudnn: $v, include $inc, library $lib -> $(readlink -f "$lib")"
  CMAKE_CUDA_ARGS+=(-DCUDNN_INCLUDE_DIR="$inc" -DCUDNN_LIBRARY="$lib")
  CUDNN_DESC="cuDNN $v ($lib)"
  [ -n "${CUDNN_ROOT:-}" ] && CMAKE_CUDA_ARGS+=(-DCUDNN_ROOT="$CUDNN_ROOT")
  # cuBLAS: the toolkit's, else the pip wheel (nvidia/cu13 for CUDA 13, nvidia/cublas before)
  local tk
  if [ "$force" = 0 ] &&
     tk=$(first_of "$CUDA_HOME"/lib64/libcublas.so "$CUDA_HOME"/targets/x86_64-linux/lib/libcublas.so \
          "$CUDA_HOME"/lib/libcublas.so) &&
     first_of "$CUDA_HOME"/include/cublas_v2.h "$CUDA_HOME"/targets/x86_64-linux/include/cublas_v2.h >/dev/null; then
    say "cublas: the toolkit's ($tk)"
  else
    root=""
    for m in nvidia.cu13 nvidia.cublas; do
      root=$(pip_root $m) && [ -n "$root" ] && ls "$root"/lib/libcublas.so* >/dev/null 2>&1 && break
      root=""
    done
    if [ -z "$root" ] || [ ! -f "$root/include/cublas_v2.h" ]; then
      say "cublas: FAIL: not in the toolkit ($CUDA_HOME) and no pip nvidia-cublas"
      return 1
    fi
    link_libs "$root/lib" cublas cublasLt
    ld_add "$root/lib"
    for d in "$root"/include/cublas*.h; do ln -sfn "$d" "$LINKS/include/${d##*/}"; done
    CUDA_INC_FLAGS="-I$LINKS/include" # only cuBLAS's headers: the wheel's other CUDA headers stay out
    CMAKE_CUDA_ARGS+=(-DCUDA_cublas_LIBRARY="$LINKS/lib/libcublas.so" -DCUDA_cublasLt_LIBRARY="$LINKS/lib/libcublasLt.so")
    say "cublas: pip wheel at $root"
  fi
}

SETUP_DONE=0
SETUP_RC=0
setup() {
  [ $SETUP_DONE = 0 ] || return $SETUP_RC
  SETUP_DONE=1
  local t0=$SECONDS
  local why
  if ! setup_deps; then
    SETUP_RC=1 why="dependencies: see 'deps:' above"
  elif ! setup_cuda; then
    SETUP_RC=1 why="CUDA: see 'cuda:', 'cudnn:', 'cublas:' above"
  else
    SETUP_RC=0 why="$([ -f "$P/.stamp" ] && [ -n "${PKG_CONFIG_PATH:-}" ] && echo "private deps in $P; ")$CUDNN_DESC"
  fi
  say "runtime library path for Koma's programs: $KOMA_LD"
  result setup "$(status $SETUP_RC)" $((SECONDS - t0)) "$why"
  return $SETUP_RC
}

# ---- stages -----------------------------------------------------------------------
BUILT=0
stage_build() {
  [ $BUILT = 0 ] || return 0
  BUILT=2 # tried
  setup || { result build FAIL 0 "setup failed (see above)"; return 1; }
  local gen=() genname="Unix Makefiles"
  command -v ninja >/dev/null && gen=(-G Ninja) genname=Ninja
  # A tree configured elsewhere, with another generator or other dependency paths
  # (CMake keeps what it found in its cache) starts afresh.
  local route="${CMAKE_CUDA_ARGS[*]} ${DEPS_CMAKE_ARGS[*]} $CUDA_INC_FLAGS ${PKG_CONFIG_PATH:-}"
  if [ -f "$BUILD/CMakeCache.txt" ]; then
    local home g
    home=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")
    g=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$BUILD/CMakeCache.txt")
    if [ "$(cd "$home" 2>/dev/null && pwd -P)" != "$ROOT" ] || [ "$g" != "$genname" ]; then
      say "build: $BUILD was configured for $home ($g): starting it afresh"
      rm -rf "$BUILD"
    elif [ "$(cat "$BUILD/gpu-checks.route" 2>/dev/null)" != "$route" ]; then
      say "build: $BUILD was configured with other dependency paths: starting it afresh"
      rm -rf "$BUILD"
    fi
  fi
  # CUDA_ARCH, else the arch of a tree configured before (no rebuild), else native, else 90
  local cached="" archs arch t0=$SECONDS log=$STATE/configure.log ok=0
  [ -f "$BUILD/CMakeCache.txt" ] && cached=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
  if [ -n "${CUDA_ARCH:-}" ]; then archs=("$CUDA_ARCH")
  elif [ -n "$cached" ] && [ "$cached" != native ]; then archs=("$cached" native 90)
  else archs=(native 90)
  fi
  for arch in "${archs[@]}"; do
    step "configure (arch $arch)" 240 30 cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES="$arch" ${CUDA_INC_FLAGS:+"-DCMAKE_CUDA_FLAGS=$CUDA_INC_FLAGS"} \
      "${CMAKE_CUDA_ARGS[@]}" "${DEPS_CMAKE_ARGS[@]}" > >(tee "$log") 2>&1
    wait $! 2>/dev/null
    if [ $RC = 0 ] && grep -q 'CUDA backend: built' "$log"; then ok=1; break; fi
    say "configure with CUDA arch $arch: $([ $RC = 0 ] && echo 'the CUDA backend is not built' || echo "failed ($RC)")"
    rm -rf "$BUILD"
  done
  if [ $ok = 0 ]; then
    grep -E '✓|✗|->' "$log"
    result configure FAIL $((SECONDS - t0)) "CUDA backend not built (report above)"
    return 1
  fi
  echo "$route" >"$BUILD/gpu-checks.route"
  result configure PASS $((SECONDS - t0)) "$genname, CUDA arch $arch, $(grep -c '✓' "$log")/4 optional parts"
  step build 540 60 cmake --build "$BUILD" -j"$JOBS"
  local st
  st=$(status $RC)
  result build "$st" "$DT" "$(du -sm "$BUILD" | cut -f1) MiB in ${BUILD#"$ROOT"/}, -j$JOBS"
  [ $RC = 0 ] || return 1
  # the programs must load with the private libraries (no "not found"), from where we say;
  # selfplay links every library but CUDA's, the CUDA module (loaded by the programs when the cuda
  # backend is chosen) links cuDNN, cuBLAS, the runtime and NCCL, the GPU test is what compute-sanitizer runs
  local lines
  lines=$(for b in "$BUILD/selfplay" "$BUILD/lib/libkoma_cuda.so" "$BUILD/tests/nn/test_nn_cuda_gpu"; do
            krun ldd "$b"; done |
          grep -E 'sqlite|xxhash|cjson|inih|openblas|gfortran|cudnn|cublas|cudart|not found' | sed 's/ (0x.*//' | sort -u)
  echo "$lines"
  if grep -q 'not found' <<<"$lines"; then
    result ldd FAIL 0 "$(grep 'not found' <<<"$lines" | awk '{print $1}' | tr '\n' ' ')not found"
    return 1
  fi
  result ldd PASS 0 "$(grep -c "$P/" <<<"$lines") libraries from $P, cudnn $(grep -o 'libcudnn.so[^ ]* => [^ ]*' <<<"$lines" | awk '{print $3}')"
  BUILT=1
}

need_build() {
  [ $BUILT = 1 ] && return 0
  [ $BUILT = 2 ] && return 1
  stage_build
}

# gpu_ctest LIMIT SMI: ctest -L gpu (-V: the per-op differences against the CPU
# are the record of a run on a GPU) and its result line; skipped tests fail
# where nvidia-smi (SMI = 1) lists a GPU
gpu_ctest() {
  local log=$STATE/ctest.log st fig
  step "ctest -L gpu" "$1" 60 krun ctest --test-dir "$BUILD" -L gpu -V --timeout $(($1 - 20)) > >(tee "$log") 2>&1
  wait $! 2>/dev/null
  st=$(status $RC)
  fig=$(grep -E 'tests passed|checks,' "$log" | tr '\n' ' ')
  if [ $RC = 0 ] && grep -qE 'Skipped|Not Run' "$log"; then
    st=SKIP fig="$(grep -oE '[A-Za-z0-9_]+ [.]+[*]+Skipped' "$log" | awk '{print $1}' | tr '\n' ' ')skipped (exit 77: no device)"
    [ "$2" = 1 ] && st=FAIL fig="$fig although nvidia-smi lists a GPU"
  fi
  result "ctest -L gpu" "$st" "$DT" "$fig"
}

# sanitize_one TOOL MAX MIN ARGS...: one compute-sanitizer tool on test_nn_cuda_gpu ARGS
sanitize_one() {
  local tool=$1 max=$2 min=$3 cs log=$STATE/cs.log extra=()
  shift 3
  cs=$(command -v compute-sanitizer || first_of "$CUDA_HOME"/bin/compute-sanitizer \
       "$CUDA_HOME"/compute-sanitizer/compute-sanitizer /usr/local/cuda*/bin/compute-sanitizer)
  if [ -z "$cs" ]; then result "sanitize $tool" FAIL 0 "no compute-sanitizer"; return 1; fi
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  step "compute-sanitizer $tool" "$max" "$min" krun "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 99 \
    --print-limit 50 "$BUILD/tests/nn/test_nn_cuda_gpu" "$@" > >(tee "$log") 2>&1
  wait $! 2>/dev/null
  result "sanitize $tool" "$(status $RC)" "$DT" "$*: $(grep -o 'ERROR SUMMARY: .*' "$log" | tail -1)$(grep -o 'LEAK SUMMARY: .*' "$log" | tail -1) $(grep -oE '[0-9]+ checks, [0-9]+ failed|skipped.*' "$log" | tail -1)"
}

stage_test() {
  local smi=0
  step nvidia-smi 30 5 nvidia-smi -L
  if [ $RC = 0 ]; then
    smi=1
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
    result nvidia-smi PASS "$DT" "$(nvidia-smi -L | head -1 | cut -c1-60)"
  else
    result nvidia-smi FAIL "$DT" "no GPU visible (rc $RC)"
  fi
  need_build || { result tests FAIL 0 "no build"; return 1; }
  gpu_ctest 420 $smi
  local log=$STATE/ctest.log fig
  local j=$((JOBS < 8 ? JOBS : 8))
  step "ctest -LE slow|gpu" 480 60 krun ctest --test-dir "$BUILD" -LE 'slow|gpu' -j"$j" --output-on-failure \
    --timeout 300 > >(tee "$log") 2>&1
  wait $! 2>/dev/null
  fig="$(grep -E 'tests passed' "$log") $(grep -cE '\*\*\*Skipped|Not Run' "$log") skipped"
  grep -qE 'tests FAILED' "$log" && fig="$fig; failed: $(sed -n '/tests FAILED/,$p' "$log" | grep -oE 'test_[A-Za-z0-9_]+|fuzz_[A-Za-z0-9_]+' | sort -u | tr '\n' ' ')"
  result "ctest -LE slow|gpu" "$(status $RC)" "$DT" "$fig"
}

stage_sanitize() {
  need_build || { result sanitize FAIL 0 "no build"; return 1; }
  local tool max min args
  # tool      limit  min  test arguments
  while read -r tool max min args; do
    sanitize_one "$tool" "$max" "$min" $args || return 1
  done <<'EOF'
memcheck   180 60 fp32 tf32 bf16 quick
racecheck  120 45 tf32 bf16 quick
synccheck   45 20 tf32 quick
initcheck   45 20 tf32 quick
EOF
}

# best_rows LOG: per "## NET MODE" section, the best device evals/s (batch) and training samples/s
best_rows() {
  awk -F'|' '
    /^## / { key = $0; sub(/^## /, "", key); sub(/ \(.*/, "", key); if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
    /^\| *[0-9]+ *\|/ { b = $2 + 0; d = $5 + 0; if (d > best[key]) { best[key] = d; bb[key] = b; pk[key] = $8 } }
    /^\| train \|/ { s = $4; sub(/samples.*/, "", s); if (s + 0 > tr[key]) { tr[key] = s + 0; tb[key] = $3 + 0 } }
    END { for (i = 1; i <= n; i++) { k = order[i]; gsub(/ +/, "", pk[k]);
            printf "%s %.0f/s (B%d, %s peak), train %.0f/s (B%d); ", k, best[k], bb[k], pk[k], tr[k], tb[k] } }' "$1"
}

stage_bench() {
  need_build || { result bench FAIL 0 "no build"; return 1; }
  local log=$STATE/bench.log
  step bench_nn_gpu 360 90 krun "$BUILD/bench/bench_nn_gpu" --nets 6x64,10x128 --modes tf32,bf16 \
    --batches 1,2,4,8,16,32,64,128,256,512,1024 --train-batches 256,1024 --seconds "$BENCH_SECONDS" > >(tee "$log") 2>&1
  wait $! 2>/dev/null
  result bench_nn_gpu "$(status $RC)" "$DT" "$(best_rows "$log")"
}

# train_rows LOG: per "## NET MODE" section, the training rows "B256 train/late B1024 train/late" in samples/s
train_rows() {
  awk -F'|' '
    /^## / { key = $0; sub(/^## /, "", key); sub(/ \(.*/, "", key); if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
    /^\| train( late)? \|/ { s = $4; sub(/samples.*/, "", s); r[key] = r[key] sprintf(" %s%s %.0f", ($2 ~ /late/) ? "late" : "B", ($2 ~ /late/) ? "" : $3 + 0, s + 0) }
    END { for (i = 1; i <= n; i++) printf "%s:%s; ", order[i], r[order[i]] }' "$1"
}

stage_merge() {
  need_build || { result merge FAIL 0 "no build"; return 1; }
  local round m log
  for round in 1 2; do
    for m in 1 0; do
      log=$STATE/merge-$round-$m.log
      step "merge=$m round $round" 150 60 krun env KOMA_MERGE_HEADS=$m "$BUILD/bench/bench_nn_gpu" --nets 6x64,10x128 \
        --modes tf32,bf16 --batches 256,1024 --train-batches 256,1024 --seconds "$BENCH_SECONDS" > >(tee "$log") 2>&1
      wait $! 2>/dev/null
      result "merge=$m round $round" "$(status $RC)" "$DT" "$(best_rows "$log") | $(train_rows "$log")"
    done
  done
}

stage_fuse() {
  need_build || { result fuse FAIL 0 "no build"; return 1; }
  local round v log
  for round in 1 2; do
    for v in default nographs unfused; do
      log=$STATE/fuse-$round-$v.log
      local envs=()
      case $v in
        nographs) envs=(KOMA_CUDA_GRAPHS=0) ;;
        unfused) envs=(KOMA_CUDA_GRAPHS=0 KOMA_CUDA_NO_FUSE=1) ;;
      esac
      step "fuse $v round $round" 120 60 krun env "${envs[@]}" "$BUILD/bench/bench_nn_gpu" --nets 6x64,10x128 \
        --modes tf32,bf16 --batches 64,256,1024 --train-batches none --seconds "$BENCH_SECONDS" > >(tee "$log") 2>&1
      wait $! 2>/dev/null
      result "fuse $v round $round" "$(status $RC)" "$DT" "$(best_rows "$log")"
    done
  done
}

stage_torch() {
  find_python || { result torch FAIL 0 "no python3"; return 1; }
  "$PY" -c 'import torch' 2>/dev/null || { [ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3; }
  say "torch: $PY"
  local log=$STATE/torch.log
  export PYTHONUNBUFFERED=1
  step "torch_bench eager" 240 90 "$PY" bench/torch_bench.py --nets 6x64,10x128 --modes tf32,bf16 \
    --seconds "$BENCH_SECONDS" > >(tee "$log") 2>&1
  wait $! 2>/dev/null
  result "torch_bench eager" "$(status $RC)" "$DT" "$(best_rows "$log")"
  # dynamic=False compiles once per batch size, and torch.compile gives up (runs
  # eagerly) after 8 recompilations of a model: 5 sizes keep every row compiled
  step "torch_bench --compile" 300 90 "$PY" bench/torch_bench.py --nets 6x64,10x128 --modes tf32,bf16 \
    --batches 1,16,128,512,1024 --seconds "$BENCH_SECONDS" --compile > >(tee "$log") 2>&1
  wait $! 2>/dev/null
  result "torch_bench --compile" "$(status $RC)" "$DT" "$(best_rows "$log")"
}

# selfplay_run LABEL MAX ARGS...: bench_selfplay with nvidia-smi sampling once a second
selfplay_run() {
  local label=$1 max=$2 log=$STATE/sp.log smi=$STATE/smi.csv pid=""
  shift 2
  : >"$smi"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used,power.draw,clocks.sm \
      --format=csv,noheader,nounits -lms 1000 >"$smi" 2>/dev/null &
    pid=$!
  fi
  step "$label" "$max" "$((max < 90 ? max : 90))" krun "$BUILD/bench/bench_selfplay" --config configs/gpu.ini "$@" > >(tee "$log") 2>&1
  wait $! 2>/dev/null
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  local util
  util=$(awk -F', *' 'NF >= 6 && $2 ~ /^[0-9]+$/ { n++; s += $2; if ($2 > m) m = $2; if ($4 > mem) mem = $4 }
                     END { if (n) printf "GPU util mean %.0f%% max %d%% over %d samples, %d MiB", s / n, m, n, mem }' "$smi")
  echo "nvidia-smi samples (timestamp, util %, mem util %, MiB, W, SM MHz):"
  cat "$smi"
  result "$label" "$(status $RC)" "$DT" "$(grep '^positions/s' "$log" | sed 's/ | games\/s.*//') ${util:-no nvidia-smi samples}"
}

stage_selfplay() {
  need_build || { result selfplay FAIL 0 "no build"; return 1; }
  selfplay_run "bench_selfplay gpu.ini" 180 --seconds 60
  [ $RC = 0 ] || return 1
  # docs/BENCHMARKS.md: busy < 90% with a full batch -> more tree threads (cores less one)
  selfplay_run "bench_selfplay --threads 15" 150 --threads 15 --seconds 45
}

# Where the device time of a 10x128 training step and a B1024 forward goes:
# Koma's own per-op table (KOMA_CUDA_OPTIME, CUDA events), then, where nsys is
# installed, its per-kernel summary (top 30 by total time); bf16 then tf32.
stage_profile() {
  need_build || { result profile FAIL 0 "no build"; return 1; }
  local nsys mode
  nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  for mode in ${PROFILE_MODES:-bf16 tf32}; do
    step "optime $mode" 120 30 krun env KOMA_CUDA_OPTIME=1 "$BUILD/bench/bench_nn_gpu" --nets 10x128 --modes "$mode" \
      --batches 1024 --train-batches 1024 --seconds 2
    result "optime $mode" "$(status $RC)" "$DT" "op table in profile.log"
    [ -n "$nsys" ] || continue
    step "nsys $mode" 150 40 krun "$nsys" profile --trace=cuda --force-overwrite=true -o "$STATE/prof-$mode" \
      "$BUILD/bench/bench_nn_gpu" --nets 10x128 --modes "$mode" --batches 1024 --train-batches 1024 --seconds 2
    local rc=$RC dt=$DT csv
    "$nsys" stats --report cuda_gpu_kern_sum --format csv --output "$STATE/kern-$mode" "$STATE/prof-$mode.nsys-rep" >/dev/null 2>&1
    csv=$(ls "$STATE"/kern-"$mode"*.csv 2>/dev/null | head -1)
    if [ -n "$csv" ]; then
      echo "## 10x128 $mode, bench_nn_gpu B1024 forward + training: kernels by total time"
      python3 - "$csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = rows[0]
col = {n.split(" (")[0]: i for i, n in enumerate(head)}
for r in rows[1:31]:
    print("%6s%% %10.2f ms %8s x  %s" % (r[col["Time"]], float(r[col["Total Time"]]) / 1e6, r[col["Instances"]], r[col["Name"]][:110]))
PY
    fi
    result "nsys $mode" "$(status $rc)" "$dt" "${csv:+kernel table in profile.log}"
  done
}

# One call of a 15-minute device session: correctness first, then the real loop
# (issue 32), then the figures that decide issue 10's targets, each next to its
# alternative in the same call, as the budget permits.
stage_quick() {
  need_build || { result quick FAIL 0 "no build"; return 1; }
  gpu_ctest 180 1
  loop_run 300
  sanitize_one memcheck 90 30 tf32 bf16 quick
  local log v envs
  for v in default before; do
    envs=()
    [ $v = before ] && envs=(KOMA_CUDA_GRAPHS=0 KOMA_CUDA_NO_FUSE=1 KOMA_MERGE_HEADS=0)
    log=$STATE/quick-$v.log
    step "bench_nn_gpu $v" 90 30 krun env "${envs[@]}" "$BUILD/bench/bench_nn_gpu" --nets 10x128 --modes tf32,bf16 \
      --batches 256,1024 --train-batches 256,1024 --seconds "$BENCH_SECONDS" > >(tee "$log") 2>&1
    wait $! 2>/dev/null
    result "bench_nn_gpu $v" "$(status $RC)" "$DT" "$(best_rows "$log") | $(train_rows "$log")"
  done
  find_python && { "$PY" -c 'import torch' 2>/dev/null || { [ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3; }; }
  log=$STATE/quick-torch.log
  step "torch_bench eager" 90 30 env PYTHONUNBUFFERED=1 "$PY" bench/torch_bench.py --nets 10x128 --modes tf32,bf16 \
    --batches 256,1024 --seconds "$BENCH_SECONDS" > >(tee "$log") 2>&1
  wait $! 2>/dev/null
  result "torch_bench eager" "$(status $RC)" "$DT" "$(best_rows "$log")"
  selfplay_run "bench_selfplay gpu.ini" 60 --seconds 30
}

# ---- the loop: selfplay with the trainer on the same device, for minutes -------------
# put_file SRC NAME: copies SRC to $OUTDIR/NAME when it is at most CAP bytes; else a
# log is cut to its last CAP bytes, anything else gzipped when that fits, else left
# out; each with a line saying so. Echoes what came of it for the summary.
put_file() {
  local src=$1 name=$2 dst=$OUTDIR/$2 size
  if [ ! -f "$src" ]; then echo "$name: not there ($src)"; return 1; fi
  size=$(wc -c <"$src")
  if [ "$size" -le "$CAP" ]; then
    cp "$src" "$dst" && echo "$name: $size bytes" && return 0
    echo "$name: cannot copy $src"; return 1
  fi
  case "$name" in
    *.log | *.txt)
      tail -c "$CAP" "$src" >"$dst"
      echo "$name: $size bytes is over the cap of $CAP: only its last $CAP bytes came back"
      return 0 ;;
  esac
  if command -v gzip >/dev/null && gzip -c "$src" >"$dst.gz" && [ "$(wc -c <"$dst.gz")" -le "$CAP" ]; then
    echo "$name: $size bytes is over the cap of $CAP: gzipped to $(wc -c <"$dst.gz") bytes as $name.gz"
    return 0
  fi
  rm -f "$dst.gz"
  echo "$name: $size bytes is over the cap of $CAP (gzipped too): left out"
  return 1
}

# loop_run MAX_S: from nothing, $LOOP_CONFIG for LOOP_MINUTES (cut to MAX_S and the
# budget), stopped by SIGINT at the deadline (or once LOOP_STOP_CYCLES models are
# published), then loop-summary and the files under $OUTDIR. LOOP_COLLECT=1: no
# selfplay, only the summary and the files of the run LOOP_RUN.
loop_run() {
  local max=$1 bin=$BUILD run=${LOOP_RUN:-} minutes=${LOOP_MINUTES:-4} want secs rc=0 t0 wall="" made=0
  local sp=$bin/selfplay sum=$bin/tools/loop-summary ship=$bin/tools/ship-net b
  for b in "$sp" "$sum" "$ship"; do
    [ -x "$b" ] || { result loop FAIL 0 "no $b (build the targets selfplay loop-summary ship-net)"; return 1; }
  done
  if [ "${LOOP_COLLECT:-0}" = 1 ]; then
    [ -n "$run" ] && [ -f "$run/koma.db" ] || { result loop FAIL 0 "LOOP_COLLECT=1: LOOP_RUN '$run' is not a run"; return 1; }
    rc=${LOOP_EXIT:-0}
  else
    if [ -n "$run" ] && [ -e "$run" ] && [ -n "$(ls -A "$run" 2>/dev/null)" ]; then
      result loop FAIL 0 "LOOP_RUN $run is not empty: the loop starts from nothing (remove it or name another)"
      return 1
    fi
    want=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
    secs=$(($(left) - 15 - LOOP_RESERVE))
    [ "$secs" -gt "$max" ] && secs=$max
    [ "$secs" -gt "$want" ] && secs=$want
    if [ "$secs" -lt "${LOOP_MIN_S:-60}" ]; then
      say "skip loop: ${secs}s of the budget for it, needs ${LOOP_MIN_S:-60} (LOOP_MINUTES=$minutes)"
      result loop SKIP 0
      return 0
    fi
    if [ -z "$run" ]; then
      run=$(mktemp -d /tmp/koma-loop.XXXXXX) || { result loop FAIL 0 "mktemp"; return 1; }
      made=1
    fi
    local smi=$STATE/loop-smi.csv spid="" pid stop_why="deadline (${secs}s)"
    : >"$smi"
    if [ "$CPU_MODE" = 0 ] && command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used,power.draw,clocks.sm \
        --format=csv,noheader,nounits -lms 1000 >"$smi" 2>/dev/null &
      spid=$!
    fi
    # shellcheck disable=SC2086 # LOOP_ARGS is a list of flags
    say "loop: ${secs}s of selfplay --config $LOOP_CONFIG --run $run $LOOP_ARGS"
    t0=$SECONDS
    env "LD_LIBRARY_PATH=${KOMA_LD}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$sp" --config "$LOOP_CONFIG" --run "$run" $LOOP_ARGS &
    pid=$!
    # wait for an event: selfplay's end, the deadline, or LOOP_STOP_CYCLES models published
    while kill -0 "$pid" 2>/dev/null; do
      if [ $((SECONDS - t0)) -ge "$secs" ]; then break; fi
      if [ -n "${LOOP_STOP_CYCLES:-}" ] &&
         [ "$(grep -cE '^[0-9: -]+model [0-9]+/[0-9]+ published' "$run/log" 2>/dev/null)" -ge "$LOOP_STOP_CYCLES" ]; then
        stop_why="$LOOP_STOP_CYCLES model(s) published"
        break
      fi
      sleep 1
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "loop: $stop_why: SIGINT to selfplay (it commits finished games and stops)"
      kill -INT "$pid"
      local g=0
      while kill -0 "$pid" 2>/dev/null && [ $g -lt "$LOOP_GRACE" ]; do sleep 1; g=$((g + 1)); done
      if kill -0 "$pid" 2>/dev/null; then
        say "loop: selfplay still running ${LOOP_GRACE}s after SIGINT: SIGKILL (a restart would resume it)"
        kill -KILL "$pid"
      fi
    else
      stop_why="selfplay ended by itself"
    fi
    wait "$pid"
    rc=$?
    wall=$((SECONDS - t0))
    [ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null
    say "loop: selfplay exit $rc after ${wall}s ($stop_why)"
    local util
    util=$(awk -F', *' 'NF >= 6 && $2 ~ /^[0-9]+$/ { n++; s += $2; if ($4 > mem) mem = $4 }
                       END { if (n) printf "GPU util mean %.0f%% over %d samples, %d MiB", s / n, n, mem }' "$smi")
    [ -n "$util" ] && echo "$util" >"$STATE/loop-util"
  fi
  # the figures
  local s=$STATE/loop-summary.txt
  krun "$sum" "$run" ${wall:+--wall "$wall"} --exit "$rc" >"$s" 2>&1
  local src=$?
  [ -f "$STATE/loop-util" ] && echo "nvidia-smi: $(cat "$STATE/loop-util")" >>"$s"
  # the files: newest model (weights only: a 10x128 with its optimizer state is over 16 MiB), koma.db, log
  local newest msgs=$STATE/loop-files.txt
  : >"$msgs"
  newest=$(ls "$run"/models/[0-9]*.safetensors 2>/dev/null | sort | tail -1)
  if [ -n "$newest" ] && krun "$ship" "$newest" "$STATE/loop-model.safetensors" \
       --meta "loop=selfplay --config ${LOOP_CONFIG##*/} $LOOP_ARGS, ${wall:-?} s, commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" >/dev/null; then
    echo "model: ${newest#"$run"/} as weights only (ship-net)" >>"$msgs"
    put_file "$STATE/loop-model.safetensors" loop-model.safetensors >>"$msgs"
  elif [ -z "$newest" ]; then
    echo "model: none in $run/models" >>"$msgs"
  else
    echo "model: ${newest#"$run"/}: ship-net could not make it weights only; the file as it is" >>"$msgs"
    put_file "$newest" loop-model.safetensors >>"$msgs"
  fi
  put_file "$run/koma.db" loop-koma.db >>"$msgs"
  if [ -s "$run/koma.db-wal" ]; then
    echo "koma.db-wal: $(wc -c <"$run/koma.db-wal") bytes not checkpointed (selfplay was killed): left out, the run is at $run" >>"$msgs"
  fi
  put_file "$run/log" loop-run.log >>"$msgs"
  { echo "files under ${OUTDIR}:"; sed 's/^/  /' "$msgs"; } >>"$s"
  put_file "$s" loop-summary.txt >/dev/null
  cat "$s"
  { echo "---- loop summary ($run)"; cat "$s"; echo "----"; } >>"$SUMMARY"
  # the result line: figures from the summary
  local st=PASS
  v() { awk -v k="$1" '$1 == k { print $2; exit }' "$s"; } # a figure of the summary
  [ $src = 0 ] || st=FAIL
  case $rc in 0 | 130) ;; *) st=FAIL ;; esac
  [ "$(v run_committed)" = yes ] || st=FAIL
  result loop $st "${wall:-0}" "exit $rc, cycles $(v cycles_published), $(v positions_per_s) pos/s, $(v evals_per_s) evals/s, batch $(v avg_batch), trainer $(v trainer_samples_per_s) samples/s, samples/position $(v samples_per_position) of $(v samples_per_position_configured), device inference $(v device_split_inference_pct)% training $(v device_split_training_pct)%"
  # a run made here goes, unless selfplay was killed (its -wal holds what the copy lacks)
  [ $made = 1 ] && [ ! -s "$run/koma.db-wal" ] && rm -rf "$run"
  [ $st = PASS ]
}

stage_loop() {
  if [ "$CPU_MODE" = 0 ]; then need_build || { result loop FAIL 0 "no build"; return 1; }; fi
  loop_run 600
}

# ---- main: each stage's output goes to its log and to stdout ------------------------
for s in "${stages[@]}"; do : >"$OUTDIR/$s.log"; done
. "$ROOT/tools/blas-env.sh" # OpenBLAS's AVX-512 kernels where Debian's 0.3.21 misdetects the CPU
say "stages: ${stages[*]}; budget ${BUDGET}s; jobs $JOBS; logs in $OUTDIR; $(uname -m), $(nproc) CPUs"
for s in "${stages[@]}"; do
  exec 3>&1 4>&2
  exec > >(tee -a "$OUTDIR/$s.log") 2>&1
  tee_pid=$!
  say "stage $s ($(left)s of the budget left)"
  "stage_$s"
  exec 1>&3 2>&4 3>&- 4>&-
  wait $tee_pid 2>/dev/null
done
echo
echo "== gpu-checks summary ($(date -u +%FT%TZ), ${SECONDS}s):"
cat "$SUMMARY"
! grep -qE '^(FAIL|TIMEOUT|NODEV) ' "$SUMMARY"
