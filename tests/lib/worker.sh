# Sourced by the shell tests that start `weft worker` processes.
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
  endpoint=
  for _ in $(seq 200); do
    endpoint=$(sed -n 's/.*listening on \(127\.0\.0\.1:[0-9][0-9]*\).*/\1/p' "$log")
    [[ -n $endpoint ]] && return 0
    sleep 0.05
  done
  cat "$log"
  return 1
}
