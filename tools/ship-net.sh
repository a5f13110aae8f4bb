#!/bin/sh
# ship-net.sh - make nets/koma-default.safetensors, the net `koma` plays by
# default, from one of a self-play run's models (maintenance: run by whoever
# replaces the shipped net with a stronger one, measured as the README says).
#
#   tools/ship-net.sh RUN_DIR CYCLE CPU_MINUTES COMMIT 'COMMAND THAT TRAINED IT' [STRENGTH]
#
# The file keeps the weights only (no optimizer state) and records in its
# metadata (koma.shipped.*): the run's command, the selfplay CPU-minutes that
# produced the cycle, the cycle, the commit of the build that trained it (the
# runs table does not hold it: `selfplay --version` of that build names it),
# Koma's version from the run's first invocation, the date, and the measured strength.
# `build/tools/inspect --shard` is not for nets: read the metadata with
#   python3 -c "import json,struct,sys; f=open(sys.argv[1],'rb'); n=struct.unpack('<Q',f.read(8))[0]; print(json.dumps(json.loads(f.read(n))['__metadata__'],indent=1))" nets/koma-default.safetensors
set -eu
cd "$(dirname "$0")/.."
[ $# -ge 5 ] || { sed -n '2,10p' "$0"; exit 2; }
run=$1 cycle=$2 cpu=$3 commit=$4 cmd=$5 strength=${6:-not measured}
model=$(printf '%s/models/%04d.safetensors' "$run" "$cycle")
[ -f "$model" ] || { echo "ship-net.sh: $model: no such model" >&2; exit 1; }
version=$(sqlite3 "$run/koma.db" "SELECT koma_version FROM runs ORDER BY id LIMIT 1" 2>/dev/null || true)
mkdir -p nets
build/tools/ship-net "$model" nets/koma-default.safetensors \
  --meta "command=$cmd" --meta "cpu_minutes=$cpu" --meta "cycle=$cycle" \
  --meta "trained_by=koma selfplay ${version:-}" --meta "commit=$commit" \
  --meta "date=$(date -u +%Y-%m-%d)" --meta "strength=$strength"
ls -l nets/koma-default.safetensors
