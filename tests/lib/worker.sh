# Sourced by the shell tests (and scripts/netsim_bench.sh) that start
# `weft worker` processes.
#
#   start_weft_worker WEFT_BINARY LOG [WORKER_ARGS...]
#
# Starts WEFT_BINARY worker on a free loopback port (127.0.0.1, port 0,
# one thread unless WORKER_ARGS say otherwise), its output in LOG, and waits
# up to 10 s for it to listen. Sets $worker_pid and $endpoint (HOST:PORT);
# returns 1 after printing LOG when it does not start. The caller stops the
# process.
start_weft_worker() {
  local weft=$1 log=$2
  : >"$log"  # exists before the background process opens it, for the polls below
  "$weft" worker --host 127.0.0.1 --port 0 --threads 1 "${@:3}" >"$log" 2>&1 &
  worker_pid=$!
  await_weft_worker "$log" 127.0.0.1
}

#   await_weft_worker LOG HOST
#
# Waits up to 10 s for the worker writing LOG (which must exist already) to
# say it listens on HOST (an IPv4 address). Sets $endpoint (HOST:PORT, or
# tls://HOST:PORT for a --tls worker, whose pinned form goes in
# $pinned_endpoint); returns 1 after printing LOG when it does not.
await_weft_worker() {
  local log=$1 host=${2//./\\.}
  endpoint=
  for _ in $(seq 200); do
    endpoint=$(sed -n "s/.*listening on \(\(tls:\/\/\)\{0,1\}$host:[0-9][0-9]*\).*/\1/p" "$log")
    pinned_endpoint=$(sed -n "s/.*listening on \(tls:\/\/$host:[0-9][0-9]*#sha256:[0-9a-f]*\).*/\1/p" "$log")
    [[ -n $endpoint ]] && return 0
    sleep 0.05
  done
  cat "$log"
  return 1
}
