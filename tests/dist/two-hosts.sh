#!/bin/bash
# two-hosts.sh - two "hosts" on this machine for as long as one command runs:
# two network namespaces joined by a veth pair, for test_dist_hosts.c.
#
#   tests/dist/two-hosts.sh COMMAND [ARGS...]
#
# Host A is namespace koma-PID-a at 10.77.0.1/24, host B koma-PID-b at
# 10.77.0.2/24 (addresses inside the namespaces only: nothing is added to the
# machine's own network, and no traffic leaves the pair). Each host also has
# its own name (a UTS namespace: koma-host-a, koma-host-b), and host B does
# not see the folder KOMA_HIDE (a tmpfs is mounted over it in B's mount
# namespace): what host A writes there, host B cannot read.
#
# The command runs with, in its environment:
#   KOMA_TWO_HOSTS   the temporary folder (hostfile, agent)
#   KOMA_HOST_A      the command prefix that runs a program on host A
#                    ("ip netns exec koma-PID-a unshare --uts sh -c ...": use
#                    "$KOMA_HOST_A" PROGRAM ARGS, one word)
#   KOMA_RSH_AGENT   Open MPI's remote launcher for the pair
#                    (mpirun --mca plm_rsh_agent "$KOMA_RSH_AGENT"): what ssh
#                    would do, with `ip netns exec` instead
#   KOMA_NETNS_A, KOMA_NETNS_B   the namespaces' names (ip netns pids)
# and exits with its status. Whatever happens (its end, an error, Ctrl-C,
# SIGTERM) every process left in either namespace is killed and the
# namespaces and the folder are removed (trap).
#
# Exit 77 with the reason where the namespaces cannot be had (not root, no
# CAP_NET_ADMIN, no `ip`, `unshare` or veth, no mount or hostname in a new
# namespace): the test is then skipped.
set -u

skip() { echo "two-hosts.sh: $*: skipped" >&2; exit 77; }

[ $# -ge 1 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
PATH=$PATH:/usr/sbin:/sbin
for p in ip unshare mount hostname; do
  command -v "$p" >/dev/null 2>&1 || skip "$p not found (apt-get install iproute2 util-linux)"
done
[ "$(id -u)" -eq 0 ] || skip "not root (network namespaces need CAP_NET_ADMIN)"

NA=koma-$$-a
NB=koma-$$-b
DIR=$(mktemp -d "${TMPDIR:-/tmp}/koma-hosts.XXXXXX") || skip "cannot make a temporary folder"

stop() {
  local rc=$?
  trap - EXIT INT TERM HUP
  for ns in "$NB" "$NA"; do
    ip netns list 2>/dev/null | grep -qw "$ns" || continue
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null)
    # shellcheck disable=SC2086
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$DIR"
  exit $rc
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

ip netns add "$NA" 2>"$DIR/ip.err" || skip "ip netns add failed: $(cat "$DIR/ip.err")"
ip netns add "$NB" 2>"$DIR/ip.err" || skip "ip netns add failed: $(cat "$DIR/ip.err")"
ip -n "$NA" link add veth-a type veth peer name veth-b netns "$NB" 2>"$DIR/ip.err" ||
  skip "no veth pair: $(cat "$DIR/ip.err")"
ip -n "$NA" addr add 10.77.0.1/24 dev veth-a && ip -n "$NB" addr add 10.77.0.2/24 dev veth-b &&
  ip -n "$NA" link set lo up && ip -n "$NB" link set lo up &&
  ip -n "$NA" link set veth-a up && ip -n "$NB" link set veth-b up || skip "cannot set up the veth pair"
ip netns exec "$NA" unshare --uts true 2>"$DIR/ip.err" || skip "ip netns exec / unshare --uts failed: $(cat "$DIR/ip.err")"

# Host A: its namespace and name. Host B, through the agent: its namespace,
# its name, and KOMA_HIDE hidden.
cat >"$DIR/host-a" <<EOF
#!/bin/sh
exec ip netns exec $NA unshare --uts sh -c 'hostname koma-host-a && exec "\$@"' sh "\$@"
EOF
cat >"$DIR/rsh-agent" <<EOF
#!/bin/sh
# Open MPI's plm_rsh agent: called as ssh is ("agent [-x] HOST COMMAND..."),
# runs COMMAND (a shell command line, as ssh hands it to the remote shell) on
# host B (10.77.0.2; 10.77.0.1 is host A).
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
host=\$1
shift
case \$host in
  10.77.0.2|koma-host-b) ns=$NB; name=koma-host-b ;;
  10.77.0.1|koma-host-a) ns=$NA; name=koma-host-a ;;
  *) echo "rsh-agent: unknown host \$host" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$1" || exit 255
if [ "\$1" = koma-host-b ] && [ -n "\${KOMA_HIDE:-}" ]; then mount -t tmpfs -o size=1m koma-hidden "\$KOMA_HIDE" || exit 255; fi
exec sh -c "\$2"' sh "\$name" "\$*"
EOF
chmod +x "$DIR/host-a" "$DIR/rsh-agent"
ip -n "$NA" route get 10.77.0.2 2>/dev/null | grep -q "dev veth-a" || skip "host A has no route to host B over the veth pair"

mkdir "$DIR/probe"
KOMA_HIDE=$DIR/probe "$DIR/rsh-agent" 10.77.0.2 true 2>"$DIR/ip.err" ||
  skip "cannot start a program on host B (ip netns exec, unshare --uts, hostname, mount -t tmpfs): $(cat "$DIR/ip.err")"
"$DIR/host-a" true 2>"$DIR/ip.err" || skip "cannot start a program on host A: $(cat "$DIR/ip.err")"

export KOMA_TWO_HOSTS=$DIR KOMA_HOST_A=$DIR/host-a KOMA_RSH_AGENT=$DIR/rsh-agent KOMA_NETNS_A=$NA KOMA_NETNS_B=$NB
echo "two-hosts.sh: hosts koma-host-a (10.77.0.1, namespace $NA) and koma-host-b (10.77.0.2, $NB)" >&2
"$@"
