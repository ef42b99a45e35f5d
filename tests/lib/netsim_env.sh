# Sourced by the tests that run workers in network namespaces
# (scripts/netsim.sh): netsim_test.sh and discovery_test.sh.
#
#   netsim_env PREFIX FIRST LAST N RATE
#
# Exits 77 (ctest's SKIP_RETURN_CODE) unless root. Exports NETSIM_PREFIX
# (PREFIX) and NETSIM_NET (the first of FIRST..LAST with no 10.NET.0.0/16
# address here, so a bench's namespaces or another tree's run are left
# alone), makes $dir (a scratch folder) and $pids (processes to stop),
# installs the cleanup (stop $pids, take the links down, remove $dir), and
# brings up N namespaces at RATE: exits 77 when this machine cannot make
# them. Defines skip and die. Needs $netsim (scripts/netsim.sh).
skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

netsim_env() {
  local prefix=$1 first=$2 last=$3 n=$4 rate=$5 status=0
  ((EUID == 0)) || skip "network namespaces need root (uid $EUID)"
  export NETSIM_PREFIX=$prefix
  NETSIM_NET=
  for net in $(seq "$first" "$last"); do
    if ! ip -o -4 addr show | grep -q " 10\.$net\."; then NETSIM_NET=$net; break; fi
  done
  [[ -n $NETSIM_NET ]] || skip "no free 10.N.0.0/16 for the links"
  export NETSIM_NET
  dir=$(mktemp -d)
  pids=()
  trap netsim_cleanup EXIT
  trap 'exit 143' TERM INT  # through the cleanup
  "$netsim" up "$n" "$rate" >"$dir/up.log" 2>&1 || status=$?
  cat "$dir/up.log"
  ((status != 3)) || skip "cannot make the links here"
  ((status == 0)) || die "netsim.sh up: exit status $status"
}

netsim_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  "$netsim" down || true
  rm -rf "$dir"
}
