#!/bin/bash
# local-cluster.sh - a one-node Slurm cluster on this machine, for as long as
# one command runs: try tools/slurm/selfplay.sbatch without a cluster, and
# the test that does (tests/dist/test_dist_slurm.c).
#
#   tools/slurm/local-cluster.sh bash             # a shell with the cluster: sbatch, squeue, scancel ...
#   tools/slurm/local-cluster.sh build/tests/dist/test_dist_slurm
#
# Needs root (slurmd starts jobs as their owner) and Debian's packages:
# apt-get install slurm-wlm munge. It starts munged (a key generated for it),
# slurmctld and slurmd (slurm.conf generated: the node is this host at
# 127.0.0.1 with 8 CPUs whatever it has, so 3 ranks fit on 2 cores; its own
# state and spool folders; ports chosen free), all in a new temporary folder,
# none of the system's files used or changed (the system's munged and Slurm,
# if any, are left alone). It waits until the node takes jobs, then runs the
# command with SLURM_CONF set (and KOMA_LOCAL_CLUSTER, the folder), and exits
# with its status. Whatever happens (the command's end, an error, Ctrl-C,
# SIGTERM) its jobs are cancelled, the daemons stopped and the folder
# removed (trap); the daemons also get SIGTERM if this script is killed with
# SIGKILL (setpriv --pdeathsig). KOMA_KEEP_CLUSTER=1 keeps the folder (logs).
#
# Exit 77 with the reason on stderr where the cluster cannot be had (not
# root, a package missing, a daemon that does not start, `srun true` that
# fails): the test is then skipped.
set -u

skip() { echo "local-cluster.sh: $*: skipped" >&2; exit 77; }

[ $# -ge 1 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || skip "not root (slurmd must run as root to start jobs)"
for p in munged slurmctld slurmd sbatch squeue scontrol scancel sinfo setpriv ss; do
  command -v "$p" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
  command -v "$p" >/dev/null 2>&1 || skip "$p not found (apt-get install slurm-wlm munge iproute2 util-linux)"
done

DIR=$(mktemp -d "${TMPDIR:-/tmp}/koma-slurm.XXXXXX") || skip "cannot make a temporary folder"
chmod 0700 "$DIR"
PIDS=()

stop() {
  local rc=$?
  trap - EXIT INT TERM HUP
  if [ -f "$DIR/slurm.conf" ] && [ -n "${SLURMCTLD_PID:-}" ] && kill -0 "$SLURMCTLD_PID" 2>/dev/null; then
    # Jobs first: slurmstepd and the job's processes outlive slurmd.
    SLURM_CONF=$DIR/slurm.conf scancel --full --quiet --user=root >/dev/null 2>&1
    for _ in $(seq 1 300); do
      [ -z "$(SLURM_CONF=$DIR/slurm.conf squeue --noheader 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  # slurmd, slurmctld, then munged (each given 10 s before SIGKILL).
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill -TERM "${PIDS[i]}" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "${PIDS[i]}" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "${PIDS[i]}" 2>/dev/null
    wait "${PIDS[i]}" 2>/dev/null
  done
  if [ "${KOMA_KEEP_CLUSTER:-0}" = 1 ]; then
    echo "local-cluster.sh: kept $DIR" >&2
  else
    rm -rf "$DIR"
  fi
  exit $rc
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Starts a daemon in the foreground (its stderr to NAME.stderr), as a child
# of this shell that gets SIGTERM when the shell dies.
start() {
  setpriv --pdeathsig TERM "$@" 2>>"$DIR/$1.stderr" &
  PIDS+=($!)
  LAST_PID=$!
}

# A TCP port nobody listens on (the daemons fail at start-up if it is taken
# meanwhile; the caller then reports it).
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 40000))
    ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return 0; }
  done
  return 1
}

# Waits until cmd succeeds or the daemon with pid has gone or 30 s passed.
wait_for() {
  local what=$1 pid=$2
  shift 2
  for _ in $(seq 1 300); do
    "$@" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$DIR"/*.log "$DIR"/*.stderr >&2; skip "$what exited at start-up (logs above)"; }
    sleep 0.1
  done
  tail -n 20 "$DIR"/*.log "$DIR"/*.stderr >&2
  skip "$what did not come up within 30 s (logs above)"
}

mkdir -p "$DIR/munge" "$DIR/state" "$DIR/spool"
chmod 0755 "$DIR/munge"
if command -v mungekey >/dev/null 2>&1; then
  mungekey --create --keyfile="$DIR/munge/munge.key" 2>"$DIR/mungekey.log" || skip "mungekey failed: $(cat "$DIR/mungekey.log")"
else # munge before 0.5.14
  head -c 1024 /dev/urandom >"$DIR/munge/munge.key" || skip "cannot write a munge key"
fi
chmod 0600 "$DIR/munge/munge.key"
start munged --foreground --force --socket="$DIR/munge/munge.socket" --key-file="$DIR/munge/munge.key" \
  --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munged.log" --seed-file="$DIR/munge/munged.seed"
MUNGED_PID=$LAST_PID
wait_for munged "$MUNGED_PID" test -S "$DIR/munge/munge.socket"

HOST=$(hostname -s)
CTLD_PORT=$(free_port) || skip "no free TCP port"
SLURMD_PORT=$(free_port) || skip "no free TCP port"
while [ "$SLURMD_PORT" = "$CTLD_PORT" ]; do SLURMD_PORT=$(free_port); done
FIRST_JOB=$(( ($$ % 600000) * 100 + 1 ))  # below Slurm's MaxJobId (67,043,328); live PIDs differ
cat >"$DIR/slurm.conf" <<EOF
# Generated by tools/slurm/local-cluster.sh: one node, this host, for one command.
ClusterName=koma-local
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
KillWait=10
# Job ids of their own: two of these clusters on one host (two test suites at
# once) must not both run job 2's step 0, whose PMIx folder in /tmp
# (spmix_appdir_UID_JOB.STEP) is named by them (srun: task launch failed).
FirstJobId=$FIRST_JOB
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=local Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$DIR/slurm.conf
export KOMA_LOCAL_CLUSTER=$DIR

start slurmctld -D -i -f "$SLURM_CONF"
SLURMCTLD_PID=$LAST_PID
wait_for slurmctld "$SLURMCTLD_PID" scontrol ping
start slurmd -D -N "$HOST" -f "$SLURM_CONF"
SLURMD_PID=$LAST_PID
node_idle() { sinfo --noheader --nodes="$HOST" --format=%t | grep -qx idle; }
wait_for slurmd "$SLURMD_PID" node_idle
timeout 120 srun --nodes=1 --ntasks=1 --quiet true 2>"$DIR/srun.err" ||
  { tail -n 20 "$DIR"/*.log "$DIR"/*.stderr >&2; skip "the cluster cannot run a job (srun true: $(tail -n 3 "$DIR/srun.err"); logs above)"; }
echo "local-cluster.sh: Slurm $(sinfo --version | cut -d' ' -f2) up in $DIR (node $HOST, ports $CTLD_PORT/$SLURMD_PORT)" >&2

"$@"
