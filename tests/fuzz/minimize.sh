#!/bin/sh
# minimize.sh - shrink a fuzzer's corpus to the few dozen files that keep
# its edge coverage, for tests/data/fuzz/<name>/.
#
#   tests/fuzz/minimize.sh build-fuzz/tests/fuzz/fuzz_<name> OUT_DIR IN_DIR...
#
# 1. libFuzzer -merge=1 over IN_DIRs keeps the inputs that add coverage
#    (edges only: -use_counters=0) - usually a few hundred;
# 2. each of those is measured alone (a one-file merge: its control file's FT
#    line then holds all of the input's features, not only the ones new to
#    the process) and a greedy set cover picks inputs until every feature is
#    covered (largest gain first, the smaller file on ties);
# 3. the picks are copied to OUT_DIR named by their SHA-1 (libFuzzer's
#    naming), after OUT_DIR's old SHA-1-named files are removed. Files with
#    other names (regress-*: past findings, kept whatever their coverage)
#    stay; pass OUT_DIR among the IN_DIRs to keep what it already covers.
# Needs python3.
set -eu
[ $# -ge 3 ] || { echo "usage: $0 FUZZER OUT_DIR IN_DIR..." >&2; exit 2; }
fuzzer=$1
out=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/merged" "$out"
"$fuzzer" -merge=1 -use_counters=0 "$work/merged" "$@" >"$work/merge.log" 2>&1 ||
  { tail -20 "$work/merge.log" >&2; exit 1; }
i=0
for f in "$work"/merged/*; do
  i=$((i + 1))
  mkdir -p "$work/one/$i" "$work/one-out"
  cp "$f" "$work/one/$i/"
  "$fuzzer" -merge=1 -use_counters=0 -merge_control_file="$work/control.$i" "$work/one-out" "$work/one/$i" \
    >"$work/one.log" 2>&1 || { tail -20 "$work/one.log" >&2; exit 1; }
  rm -rf "$work/one-out"
done
cat >"$work/cover.py" <<'PY'
import glob, hashlib, os, shutil, sys
work, out = sys.argv[1], sys.argv[2]
files, feats = [], []
for control in glob.glob(os.path.join(work, "control.*")):
    lines = open(control).read().split("\n")
    ft = set()
    for line in lines[3:]:
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "FT":
            ft = set(parts[2:])
    files.append(lines[2])
    feats.append(ft)
todo = set().union(*feats) if feats else set()
total = len(todo)
picked = []
while todo:
    best = max(range(len(files)), key=lambda i: (len(feats[i] & todo), -os.path.getsize(files[i])))
    gain = feats[best] & todo
    if not gain:
        break
    picked.append(best)
    todo -= gain
for f in os.listdir(out):
    if len(f) == 40 and all(c in "0123456789abcdef" for c in f):
        os.remove(os.path.join(out, f))
for i in picked:
    data = open(files[i], "rb").read()
    shutil.copyfile(files[i], os.path.join(out, hashlib.sha1(data).hexdigest()))
print("minimize: %d of %d inputs keep all %d features (edges)" % (len(picked), len(files), total))
PY
python3 "$work/cover.py" "$work" "$out"
