#!/bin/sh
# deps.sh - install what Koma needs from Debian/Ubuntu packages, if missing.
#   tools/deps.sh            build dependencies (compiler, CMake, SQLite, xxHash, cJSON, inih, OpenBLAS,
#                            oneDNN for the fast CPU convolutions)
#   tools/deps.sh --test     plus what the test suite uses (python3-torch for the PyTorch
#                            reference check, gpsshogi for a match against a third-party engine,
#                            Open MPI for the data-parallel train test under mpirun, Slurm and
#                            munge for test_dist_slurm's one-node cluster, iproute2 for
#                            test_dist_hosts' network namespaces: about 13 MB; the system's
#                            slurmd/slurmctld never start (no /etc/slurm/slurm.conf is
#                            written), the package's munged may; the test runs its own
#                            daemons with their own key, socket, folders and free ports; python3-onnx for
#                            onnx.checker in test_onnx_export, whose ONNX Runtime comes from npm:
#                            not installed here, see docs/ONNX.md; chromium for test_report_board,
#                            which loads the report's board in it, headless: about 140 MB to download)
# Runs apt-get through sudo when not root. Installs nothing that is already there.
set -eu
pkgs="build-essential cmake pkg-config git libsqlite3-dev sqlite3 libxxhash-dev libcjson-dev libinih-dev libopenblas-dev libdnnl-dev"
if [ "${1:-}" = "--test" ]; then
  pkgs="$pkgs python3 python3-numpy python3-torch python3-onnx gpsshogi openmpi-bin libopenmpi-dev slurm-wlm munge iproute2 chromium"
fi
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps.sh: installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
