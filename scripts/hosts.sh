#!/usr/bin/env bash
# Test hosts on one machine (issue 20): N network namespaces joined by veth pairs to a bridge,
# each entered with its own hostname, so OpenMPI sees N nodes and sends everything between them
# over TCP. Links are capped with tc's token-bucket filter (tbf; this kernel has no netem, so
# no added delay). Needs root (CAP_NET_ADMIN); where namespaces cannot be made, `up` says so in
# one line and exits 77 (CTest's skip code).
#
#   scripts/hosts.sh up N [RATE]     make hosts zt-host1..N (2 slots each); RATE: 1gbit, 10gbit, none
#   scripts/hosts.sh down [--force]  remove them (also whatever a killed run left)
#   scripts/hosts.sh with N RATE -- CMD...   up, run CMD, down (also when CMD fails)
#   scripts/hosts.sh mpirun ARGS...  OpenMPI across the hosts (hostfile, this script as rsh agent)
#   scripts/hosts.sh exec HOST CMD.. run CMD (as ssh would: one shell line) inside HOST
#   scripts/hosts.sh kill HOST       kill -9 everything running inside HOST (a host that dies)
#   scripts/hosts.sh stop HOST       SIGSTOP everything running inside HOST (a host that freezes)
#   scripts/hosts.sh bytes           per host: bytes its link sent and received (the veth counters)
#   scripts/hosts.sh status          exit 0 with the hosts listed if they are up, else 1
#
# The hosts are one per machine, so they have an owner: the process that ran `up` (for CTest's
# fixture, ctest itself; for `with`, this script), or ZT_HOSTS_OWNER's pid. While it lives, `up`
# by anyone else waits for it (up to ZT_HOSTS_WAIT_S, default 900 s) and `down` refuses without
# --force; an owner that died leaves hosts anyone may take once nothing runs inside them.
#
# On real hosts none of this is needed: see docs/multihost.md.
set -euo pipefail

PREFIX=zt-host
BRIDGE=zt-br0
NET=10.231.0
STATE=${ZT_HOSTS_STATE:-/run/zt-hosts}
SELF=$(readlink -f "$0")

die() { echo "hosts.sh: $*" >&2; exit 1; }
skip() { echo "hosts.sh: skipped: $*" >&2; exit 77; }

LOCK=${ZT_HOSTS_LOCK:-/run/lock/zt-hosts.lock}

# "PID START": a pid and its start time (so a reused pid is not mistaken for the owner).
ident() { local st; st=$(cut -d' ' -f22 "/proc/$1/stat" 2>/dev/null) || return 1; echo "$1 $st"; }
# The live owner's identity, or nothing (no owner, or it has ended).
live_owner() {
  local o pid
  o=$(cat "$STATE/owner" 2>/dev/null) || return 0
  pid=${o%% *}
  [[ $pid =~ ^[0-9]+$ ]] && [ "$(ident "$pid" || true)" = "$o" ] && echo "$o"
  return 0
}
# A job still running inside a host (started with `exec`, or left by a run), as "PID START": its
# hosts are in use even after the process that made them has ended.
live_job() {
  local h pid
  for h in $(hosts); do
    for pid in $(ip netns pids "$h" 2>/dev/null); do
      ident "$pid" && return 0
    done
  done
  return 0
}
describe_owner() { local pid=${1%% *}; echo "pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-80))"; }

# Claims the hosts for pid $1, waiting while another live owner holds them.
claim() {
  local me waited=0 limit=${ZT_HOSTS_WAIT_S:-900} o
  me=$(ident "$1") || die "owner pid $1 is not running"
  mkdir -p "$(dirname "$LOCK")" "$STATE"
  while :; do
    exec 9>"$LOCK"
    flock 9
    o=$(live_owner)
    [ -n "$o" ] || o=$(live_job)
    if [ -z "$o" ] || [ "$o" = "$me" ]; then
      echo "$me" >"$STATE/owner"
      flock -u 9
      return 0
    fi
    flock -u 9
    [ "$waited" -ge "$limit" ] && die "the test hosts are held by $(describe_owner "$o"); waited ${limit} s (ZT_HOSTS_WAIT_S)"
    [ "$waited" = 0 ] && echo "hosts.sh: the test hosts are held by $(describe_owner "$o"); waiting" >&2
    sleep 2
    waited=$((waited + 2))
  done
}

hosts() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}[0-9]+$" | sort -V || true; }

# The namespace of a hostfile entry: zt-hostK, or its address 10.231.0.K.
ns_of() {
  case $1 in
    "$NET".*) echo "$PREFIX${1##*.}" ;;
    "$PREFIX"*) echo "$1" ;;
    *) die "unknown host '$1' (hosts: $(hosts | tr '\n' ' '))" ;;
  esac
}

down() {
  local h
  for h in $(hosts); do
    ip netns pids "$h" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$h" 2>/dev/null || true
  done
  for h in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^zt-v[0-9]+$" || true); do
    ip link del "$h" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  # Only what this script wrote: the folder may hold a user's own files.
  rm -f "$STATE/hostfile" "$STATE/rate" "$STATE/owner" "$STATE/agent"
  rmdir "$STATE" 2>/dev/null || true
}

# `down` from the command line: the owner's (or a dead owner's) hosts, or anyone's with --force.
down_checked() {
  local o me
  o=$(live_owner)
  me=$(ident "${ZT_HOSTS_OWNER:-$PPID}" || true)
  if [ -n "$o" ] && [ "$o" != "$me" ] && [ "${1:-}" != --force ]; then
    die "the test hosts are held by $(describe_owner "$o"); 'down --force' removes them anyway"
  fi
  down
}

# tbf needs a bucket of at least one packet burst per timer tick: 10 ms of the rate, >= 256 KiB.
cap() {  # cap NETNS_OR_EMPTY DEV RATE
  local rate=$3 bytes burst
  [ "$rate" = none ] && return 0
  case $rate in
    *gbit) bytes=$(( ${rate%gbit} * 125000000 )) ;;
    *mbit) bytes=$(( ${rate%mbit} * 125000 )) ;;
    *) die "rate '$rate' is not NNmbit, NNgbit or none" ;;
  esac
  burst=$(( bytes / 100 > 262144 ? bytes / 100 : 262144 ))
  ${1:+ip netns exec "$1"} tc qdisc replace dev "$2" root tbf rate "$rate" burst "$burst" latency 100ms
}

up() {  # up OWNER_PID N [RATE]
  local owner=$1 n=${2:-2} rate=${3:-none} i ns
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 16 ] || die "host count '$n' is not 1 to 16"
  # Checked before anything is made, so a bad rate leaves no half-made hosts.
  [[ $rate == none || $rate =~ ^[1-9][0-9]{0,5}(mbit|gbit)$ ]] ||
    die "rate '$rate' is not a whole number of mbit or gbit above 0 (e.g. 100mbit, 1gbit) or none"
  [ "$(id -u)" = 0 ] || skip "network namespaces need root"
  command -v ip >/dev/null && command -v tc >/dev/null && command -v unshare >/dev/null && command -v flock >/dev/null ||
    skip "ip, tc, unshare and flock are needed (apt-get install iproute2 util-linux)"
  claim "$owner"
  down
  mkdir -p "$STATE"
  ident "$owner" >"$STATE/owner"
  ip netns add zt-probe$$ 2>/dev/null || skip "this machine does not let us make network namespaces"
  ip netns del zt-probe$$
  trap 'down' ERR
  ip link add "$BRIDGE" type bridge
  ip addr add "$NET.254/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  mkdir -p "$STATE"
  : >"$STATE/hostfile"
  for i in $(seq 1 "$n"); do
    ns=$PREFIX$i
    ip netns add "$ns"
    ip link add "zt-v$i" type veth peer name eth0 netns "$ns"
    ip link set "zt-v$i" master "$BRIDGE" up
    ip netns exec "$ns" ip addr add "$NET.$i/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" ip link set lo up
    cap "$ns" eth0 "$rate"  # what the host sends
    cap "" "zt-v$i" "$rate" # what it receives
    echo "$NET.$i slots=2" >>"$STATE/hostfile"
  done
  echo "$rate" >"$STATE/rate"
  trap - ERR
  echo "hosts.sh: $n hosts up (${PREFIX}1..$n at $NET.1..$n, links: $([ "$rate" = none ] && echo uncapped || echo "$rate tbf"))" >&2
}

# As ssh runs a remote command: the words joined into one line for a shell, here inside the
# host's namespace with its own hostname (a UTS namespace), so OpenMPI counts it as a node.
exec_in() {
  local ns
  ns=$(ns_of "$1")
  shift
  exec ip netns exec "$ns" unshare --uts -- /bin/sh -c 'hostname "$0" && exec /bin/sh -c "$*"' "$ns" "$@"
}

run_mpirun() {
  [ -s "$STATE/hostfile" ] || die "no hosts are up (scripts/hosts.sh up N)"
  # OpenMPI splits the agent at spaces: through a link of ours when the clone's path has any.
  local agent=$SELF
  if [[ $SELF == *[[:space:]]* ]]; then
    agent=$STATE/agent
    ln -sfn "$SELF" "$agent"
  fi
  # A rank that ends the job calls MPI_Abort; mpirun then waits for every host's daemon to kill its
  # ranks, and a host that does not answer (stopped, frozen) would keep it waiting forever (issue
  # 31, probe case 6). So mpirun's stderr is watched: still alive ZT_HOSTS_ABORT_GRACE_S (default
  # 10) seconds after an abort, it gets two SIGINTs, mpirun's own "forcibly terminate".
  local log pid rc waited=0 grace=${ZT_HOSTS_ABORT_GRACE_S:-10}
  log=$(mktemp "${TMPDIR:-/tmp}/zt-hosts-mpirun.XXXXXX")
  mpirun --hostfile "$STATE/hostfile" --mca plm_rsh_agent "$agent exec" --mca plm_rsh_no_tree_spawn 1 \
    --mca btl self,vader,tcp --mca btl_tcp_if_include "$NET.0/24" --mca oob_tcp_if_include "$NET.0/24" \
    -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM "$@" 2> >(tee -a "$log" >&2) &
  pid=$!
  trap 'kill -TERM "$pid" 2>/dev/null' INT TERM
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if grep -q "MPI_ABORT was invoked" "$log" && [ $((++waited)) -ge "$grace" ]; then
      echo "hosts.sh: mpirun still waits ${grace} s after MPI_Abort (a host that does not answer: stopped?); ending it" >&2
      kill -INT "$pid" 2>/dev/null
      sleep 1
      kill -INT "$pid" 2>/dev/null
      break
    fi
  done
  wait "$pid"
  rc=$?
  rm -f "$log"
  return "$rc"
}

bytes() {
  local h i
  for h in $(hosts); do
    i=${h#"$PREFIX"}
    # The bridge side's counters: what the host sent is what zt-vK received.
    echo "$h tx $(cat /sys/class/net/zt-v$i/statistics/rx_bytes) rx $(cat /sys/class/net/zt-v$i/statistics/tx_bytes)"
  done
}

case ${1:-} in
  up) shift; up "${ZT_HOSTS_OWNER:-$PPID}" "$@" ;;
  down) shift; down_checked "$@" ;;
  with)
    shift
    [ $# -ge 2 ] || die "usage: hosts.sh with N RATE -- CMD..."
    n=$1 rate=$2
    shift 2
    [ "${1:-}" = -- ] && shift
    trap down EXIT
    up $$ "$n" "$rate"
    "$@"
    ;;
  mpirun) shift; run_mpirun "$@" ;;
  exec) shift; exec_in "$@" ;;
  kill) [ $# -ge 2 ] || die "usage: hosts.sh kill HOST"; ns=$(ns_of "$2"); ip netns pids "$ns" | xargs -r kill -9 ;;
  stop) [ $# -ge 2 ] || die "usage: hosts.sh stop HOST"; ns=$(ns_of "$2"); ip netns pids "$ns" | xargs -r kill -STOP ;;
  bytes) bytes ;;
  status) [ -s "$STATE/hostfile" ] && [ -n "$(hosts)" ] && hosts || exit 1 ;;
  *) sed -n '2,22p' "$SELF" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
