#!/usr/bin/env bash
# Simulated links for weft workers: each worker runs in a Linux network
# namespace joined to this (the root) namespace by a veth pair whose two ends
# are rate-limited with `tc tbf`, so a host here and workers there talk over
# links of a chosen speed (docs/performance.md, "Over slower links").
#
#   netsim.sh up N RATE     namespaces ${NETSIM_PREFIX}1..N; pair i: 10.${NETSIM_NET}.i.1 here,
#                           10.${NETSIM_NET}.i.2 in namespace i; RATE as tc writes it
#                           (100mbit, 1gbit, 500kbit, ...) or "none" (veth, no limit)
#   netsim.sh down          remove every namespace of the prefix (and with it its veth pair
#                           and qdiscs); nothing to remove is not an error
#   netsim.sh rate RATE     change the limit of the links that are up (their workers keep
#                           running and connected)
#   netsim.sh exec I CMD... run CMD in namespace I (the process keeps its pid: `ip netns exec`
#                           execs it)
#   netsim.sh status        the namespaces of the prefix and their qdiscs
#
# Environment: NETSIM_PREFIX (default weft-ns; at most 10 characters, so that
# interface names fit in 15) and NETSIM_NET (default 77: addresses 10.77.i.x),
# so that a test can run beside a bench without touching its namespaces;
# NETSIM_LATENCY (tbf latency, default 50ms) and NETSIM_BURST (bytes; default:
# burst_bytes below).
#
# Routing: namespace i routes 10.NET.0.0/16 through 10.NET.i.1, and the host
# end of each pair forwards (per interface: net.ipv4.conf.IF.forwarding; the
# global ip_forward is left alone), so worker i reaches worker j (peer links)
# through this namespace: out of i's limited end, into j's limited host end.
# A peer hop thus crosses two limiters of the same rate in series (its rate is
# still RATE), a host <-> worker hop one.
#
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN for `ip netns`). Exits 2 on a
# usage error, 3 when namespaces or qdiscs cannot be made here (not root, no
# netns support, no sch_tbf), 1 on anything else.
set -euo pipefail

prefix=${NETSIM_PREFIX:-weft-ns}
net=${NETSIM_NET:-77}
# Queue time tbf allows before it drops (its `latency`): long enough that a
# TCP stream filling the link is slowed by the rate, not by drops.
latency=${NETSIM_LATENCY:-50ms}

usage() {
  cat <<EOF
usage: $0 up N RATE      make N namespaces ${prefix}1..N linked to this one at RATE
                         (tc rate: 100mbit, 1gbit, ...; or none for no limit)
       $0 down           remove them (idempotent)
       $0 rate RATE      change the links' limit in place (RATE or none)
       $0 exec I CMD...  run CMD in namespace ${prefix}I
       $0 status         list them and their qdiscs
environment: NETSIM_PREFIX=$prefix NETSIM_NET=$net NETSIM_LATENCY=$latency NETSIM_BURST=${NETSIM_BURST:-(by rate)}
EOF
  exit "${1:-2}"
}

die() {
  echo "netsim: $*" >&2
  exit 1
}

cannot() {
  echo "netsim: $*" >&2
  exit 3
}

[[ $prefix =~ ^[a-zA-Z0-9-]{1,10}$ ]] || die "NETSIM_PREFIX '$prefix': 1-10 letters, digits or '-'"
if ! [[ $net =~ ^[0-9]+$ ]] || ((net > 255)); then
  die "NETSIM_NET '$net': a number 0-255"
fi

# The tbf burst (bucket size, bytes) for RATE: 10 ms of traffic, at least
# 64 KiB. tbf refills its bucket when its timer fires, so the bucket must
# hold at least what the link sends in one timer tick (rate / HZ: 1.25 MB at
# 1 Gbit/s and HZ 100, 500 KB at HZ 250) or the qdisc cannot reach its rate;
# 10 ms covers HZ 100 and up. (Its timer is a high-resolution one now, but
# the rule still holds in spirit: on a busy 2-core VM a 4 KiB bucket kept
# 100mbit at 94 Mbit/s yet let 1gbit reach only 213-349 Mbit/s.) The 64 KiB floor: veth hands tbf GSO packets of
# up to 64 KiB (tbf splits a larger one, but one per bucket is wasteful), and
# a bucket smaller than a packet would stall it. Prints nothing and returns 1
# for a rate it cannot read.
#
# A consequence: a message shorter than the burst that finds the bucket full
# (a link idle since the last one) passes at memory speed, with none of the
# size / rate delay a real link of that rate adds. Set NETSIM_BURST lower to
# see that delay on small messages.
burst_bytes() {
  local rate=$1 n unit mult bits
  [[ $rate =~ ^([0-9]+)([a-z]*)$ ]] || return 1
  n=${BASH_REMATCH[1]}
  unit=${BASH_REMATCH[2]}
  case $unit in
    bit) mult=1 ;;
    kbit) mult=1000 ;;
    mbit) mult=1000000 ;;
    gbit) mult=1000000000 ;;
    *) return 1 ;;
  esac
  bits=$((n * mult))
  ((bits > 0)) || return 1
  if [[ -n ${NETSIM_BURST:-} ]]; then
    [[ $NETSIM_BURST =~ ^[0-9]+$ ]] || return 1
    echo "$NETSIM_BURST"
    return 0
  fi
  local burst=$((bits / 8 / 100))
  ((burst >= 65536)) || burst=65536
  echo "$burst"
}

# Sets $burst for RATE ("" for none); dies on a rate it cannot read.
parse_rate() {
  burst=""
  [[ $1 == none ]] && return 0
  burst=$(burst_bytes "$1") ||
    die "RATE '$1': a number and bit, kbit, mbit or gbit (e.g. 100mbit), or none; NETSIM_BURST: bytes"
}

# Limits (or, for none, frees) both ends of pair I: limit I RATE.
limit() {
  local i=$1 rate=$2 ns=$prefix$1 host=${prefix}$1h peer=${prefix}$1n
  # Both directions: what this side sends to the namespace leaves through
  # the host end, what the namespace sends leaves through its end.
  tc qdisc del dev "$host" root 2>/dev/null || true
  tc -n "$ns" qdisc del dev "$peer" root 2>/dev/null || true
  [[ -n $burst ]] || return 0
  tc qdisc add dev "$host" root tbf rate "$rate" burst "$burst" latency "$latency" &&
    tc -n "$ns" qdisc add dev "$peer" root tbf rate "$rate" burst "$burst" latency "$latency"
}

require_root() {
  ((EUID == 0)) || cannot "needs root (ip netns, tc); running as uid $EUID"
  command -v ip >/dev/null || cannot "no 'ip' command (iproute2)"
  command -v tc >/dev/null || cannot "no 'tc' command (iproute2)"
}

namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}[0-9]+$" || true
}

cmd_down() {
  require_root
  local ns
  for ns in $(namespaces); do
    # Deleting the namespace destroys its veth end, which destroys the pair
    # and the qdiscs on both ends. Processes still inside keep it alive
    # (unnamed) until they exit: the caller stops its workers first.
    ip netns delete "$ns" || die "ip netns delete $ns failed"
  done
  # A host end left by an interrupted `up` (its peer never moved).
  local dev
  for dev in $(ip -o link show 2>/dev/null | sed -n "s/^[0-9]*: \(${prefix}[0-9]*h\)[@:].*/\1/p"); do
    ip link delete "$dev" 2>/dev/null || true
  done
}

cmd_up() {
  (($# == 2)) || usage
  local n=$1 rate=$2
  if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 1 || n > 250)); then
    die "N '$n': 1-250 namespaces"
  fi
  parse_rate "$rate"
  require_root
  [[ -z $(namespaces) ]] || die "namespaces ${prefix}* exist already ($(namespaces | tr '\n' ' ')); run '$0 down' first"
  # Half-made links are removed on any failure below.
  trap 'cmd_down >/dev/null 2>&1 || true' ERR
  local i ns host peer err
  for ((i = 1; i <= n; i++)); do
    ns=$prefix$i
    host=${prefix}${i}h
    peer=${prefix}${i}n
    err=$(ip netns add "$ns" 2>&1) || { cmd_down; cannot "ip netns add $ns failed: $err"; }
    err=$(ip link add "$host" type veth peer name "$peer" 2>&1) ||
      { cmd_down; cannot "cannot make a veth pair ($host, $peer): $err"; }
    ip link set "$peer" netns "$ns"
    ip addr add "10.$net.$i.1/24" dev "$host"
    ip link set "$host" up
    sysctl -q -w "net.ipv4.conf.$host.forwarding=1"
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "10.$net.$i.2/24" dev "$peer"
    ip -n "$ns" link set "$peer" up
    ip -n "$ns" route add "10.$net.0.0/16" via "10.$net.$i.1"
    limit "$i" "$rate" || { cmd_down; cannot "tc qdisc add ... tbf rate $rate failed on pair $i (no sch_tbf?)"; }
  done
  trap - ERR
  echo "netsim: $n namespaces ${prefix}1..$n, 10.$net.I.1 <-> 10.$net.I.2, rate $rate${burst:+, burst $burst bytes, latency $latency}"
}

cmd_rate() {
  (($# == 1)) || usage
  local rate=$1 ns i
  parse_rate "$rate"
  require_root
  [[ -n $(namespaces) ]] || die "no namespaces ${prefix}*: run '$0 up N RATE' first"
  for ns in $(namespaces); do
    i=${ns#"$prefix"}
    limit "$i" "$rate" || die "tc qdisc add ... tbf rate $rate failed on pair $i"
  done
  echo "netsim: $(namespaces | wc -l) links now at rate $rate${burst:+, burst $burst bytes, latency $latency}"
}

cmd_exec() {
  (($# >= 2)) || usage
  local i=$1
  shift
  [[ $i =~ ^[0-9]+$ ]] || die "I '$i': a namespace number"
  require_root
  exec ip netns exec "$prefix$i" "$@"
}

cmd_status() {
  require_root
  local ns i
  for ns in $(namespaces); do
    i=${ns#"$prefix"}
    echo "$ns: $(ip -n "$ns" -o -4 addr show dev "${prefix}${i}n" | awk '{print $4}')"
    tc qdisc show dev "${prefix}${i}h" | sed 's/^/  host end: /'
    tc -n "$ns" qdisc show dev "${prefix}${i}n" | sed 's/^/  ns end:   /'
  done
}

(($# >= 1)) || usage
sub=$1
shift
case $sub in
  up) cmd_up "$@" ;;
  down) (($# == 0)) || usage; cmd_down ;;
  rate) cmd_rate "$@" ;;
  exec) cmd_exec "$@" ;;
  status) (($# == 0)) || usage; cmd_status ;;
  -h | --help | help) usage 0 ;;
  *) usage ;;
esac
