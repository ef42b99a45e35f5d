#!/usr/bin/env bash
# The chat page of `weft serve` end to end in headless Chromium
# (tests/serve/chat_page.test.mjs): writes a tiny random-weight model, starts
# the server on a free loopback port, waits for /health, runs the test from
# NODE_DIR (its Node packages installed there by `make deps`, which runs
# scripts/install-test-node.sh) and always stops the server. Exit status: the
# test's.
#
#   run_chat_page.sh WEFT_BINARY WRITE_TEST_MODEL NODE_DIR OUT_DIR
#
# OUT_DIR receives the screenshot chat_page.png and the server's log
# chat_page_server.log. Needs node (18 or newer) and Chromium (CHROMIUM,
# default /usr/bin/chromium).
set -euo pipefail
source "$(dirname "$0")/../lib/shell_helpers.sh"
expect_args 4 "WEFT_BINARY WRITE_TEST_MODEL NODE_DIR OUT_DIR" "$@"
weft=$1
writer=$2
node_dir=$3
out_dir=$4
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=$(mktemp -d)
server_pid=

stop_server() {
  [[ -n $server_pid ]] || return 0
  kill "$server_pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}
cleanup() {
  stop_server
  [[ -f $dir/server.log ]] && cp "$dir/server.log" "$out_dir/chat_page_server.log" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
log_tail() {
  if [[ -s $dir/server.log ]]; then
    echo "--- last 40 lines of the server's log ($out_dir/chat_page_server.log):"
    tail -n 40 "$dir/server.log"
  fi
}
on_fail() { log_tail; }  # called by fail (shell_helpers.sh)

command -v node >/dev/null || fail "node not found (install Node.js 18 or newer)"
[[ -x ${CHROMIUM:-/usr/bin/chromium} ]] || fail "no Chromium at ${CHROMIUM:-/usr/bin/chromium} (apt-get install chromium)"
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)

# 2048 positions per slot: the third message carries the stopped reply (up
# to STOP_MAX_TOKENS, re-tokenized) as context, however late a loaded
# machine lets the page's Stop arrive.
"$writer" "$dir/tiny-llama.gguf" --layers 2 --embd 64 --ctx 4096 >/dev/null || fail "$writer could not write the model"
# Installed by `make deps` (scripts/install-deps.sh); checked here, never
# fetched: the test runs offline.
"$root/scripts/install-test-node.sh" --check "$node_dir" || fail "no up-to-date Node packages in $node_dir (above)"
cp "$here/chat_page.test.mjs" "$node_dir/"

"$weft" serve -m "$dir/tiny-llama.gguf" -t 1 --port 0 --port-file "$dir/port" --ctx-size 4096 --parallel 2 \
  >"$dir/server.log" 2>&1 &
server_pid=$!

# The port, once the server listens; then /health answering 200.
deadline=$((SECONDS + 60))
port=
until [[ $port =~ ^[0-9]+$ ]]; do
  kill -0 "$server_pid" 2>/dev/null || fail "weft serve exited before listening"
  ((SECONDS < deadline)) || fail "weft serve wrote no port file in 60 s"
  sleep 0.1
  [[ -s $dir/port ]] && port=$(tr -d "[:space:]" <"$dir/port")
done
base=http://127.0.0.1:$port
health='fetch(process.argv[1] + "/health").then((r) => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1))'
until node -e "$health" "$base"; do
  kill -0 "$server_pid" 2>/dev/null || fail "weft serve exited while loading"
  ((SECONDS < deadline)) || fail "$base/health did not answer 200 in 60 s"
  sleep 0.2
done
echo "weft serve is up at $base"

rc=0
(cd "$node_dir" && STOP_MAX_TOKENS=${STOP_MAX_TOKENS:-1000} node chat_page.test.mjs "$base" "$out_dir") || rc=$?
kill -0 "$server_pid" 2>/dev/null || { echo "FAIL: weft serve died during the test"; rc=1; }
if ((rc != 0)); then
  echo "FAIL: chat page test (exit $rc)"
  log_tail
fi
exit "$rc"
