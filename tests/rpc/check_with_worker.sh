#!/usr/bin/env bash
# Starts `weft worker` on a free loopback port, runs `weft check` with the
# given backend list (PORT replaced by the worker's port), stops the worker.
# Usage: check_with_worker.sh WEFT_BINARY BACKENDS
set -euo pipefail
weft=$1
log=$(mktemp)
"$weft" worker --host 127.0.0.1 --port 0 >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
port=
for _ in $(seq 200); do
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$log")
  [[ -n $port ]] && break
  sleep 0.05
done
[[ -n $port ]] || { echo "worker did not start:"; cat "$log"; exit 1; }
"$weft" check --backend "${2//PORT/$port}" --quiet
