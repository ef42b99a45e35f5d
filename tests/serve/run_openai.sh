#!/usr/bin/env bash
# `weft serve` end to end through the official `openai` npm client
# (tests/serve/openai.test.mjs): writes a tiny random-weight model, starts
# three servers on free loopback ports --
#   main:  --parallel 4 --ctx-size 16384 --alias weft-test (with --workers: its
#          layers split over this CPU and two `weft worker`s on loopback)
#   queue: --parallel 1 --max-queue 1 (the 429 checks; and, never split, the
#          reference the main server's greedy text must equal)
#   auth:  --host 0.0.0.0 --api-key-file KEY --max-tokens 64 (reached at 127.0.0.1)
#   tools: --parallel 2 --chat-template chat_templates/qwen2_5.jinja (a real
#          template that renders tools; its prompts checked against
#          tool_prompts/tool_prompts.json)
# -- waits for each one's /health, runs the test from NODE_DIR (its Node
# packages installed there by `make deps`, which runs
# scripts/install-test-node.sh) and always stops every process it started.
# Exit status: the test's.
#
#   run_openai.sh WEFT_BINARY WRITE_TEST_MODEL NODE_DIR [--workers]
#
# Needs node (18 or newer). Environment: KEEP_LOGS=DIR copies the servers'
# and workers' logs there; WEFT_NODE_TEST=FILE runs tests/serve/FILE instead
# of openai.test.mjs (compat.test.mjs: the Ollama and Anthropic clients), with
# the same arguments.
set -euo pipefail
if (($# < 3 || $# > 4)) || { (($# == 4)) && [[ $4 != --workers ]]; }; then
  echo "usage: $0 WEFT_BINARY WRITE_TEST_MODEL NODE_DIR [--workers]" >&2
  exit 2
fi
abs() { [[ $1 == /* ]] && echo "$1" || echo "$PWD/$1"; }
weft=$(abs "$1")  # the test runs from NODE_DIR and starts weft itself
writer=$2
node_dir=$3
with_workers=$([[ ${4:-} == --workers ]] && echo 1 || echo 0)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=$(mktemp -d)
pids=()
start_time=$SECONDS

cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [[ -n ${KEEP_LOGS:-} ]]; then
    mkdir -p "$KEEP_LOGS" && cp "$dir"/*.log "$KEEP_LOGS"/ 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
logs_tail() {
  local f
  for f in "$dir"/*.log; do
    [[ -s $f ]] || continue
    echo "--- last 30 lines of $(basename "$f"):"
    tail -n 30 "$f"
  done
}
fail() {
  echo "FAIL: $*"
  logs_tail
  exit 1
}

command -v node >/dev/null || fail "node not found (install Node.js 18 or newer)"
[[ -x $weft ]] || fail "no weft binary at $weft"
"$writer" "$dir/model.gguf" --layers 4 --embd 128 --heads 4 --heads-kv 2 --ff 256 --vocab 1000 --ctx 4096 >/dev/null ||
  fail "$writer could not write the model"
# Installed by `make deps` (scripts/install-deps.sh); checked here, never
# fetched: the test runs offline.
"$root/scripts/install-test-node.sh" --check "$node_dir" || fail "no up-to-date Node packages in $node_dir (above)"
test_file=${WEFT_NODE_TEST:-openai.test.mjs}
[[ $test_file =~ ^[a-z_]+\.test\.mjs$ && -f $here/$test_file ]] || fail "no test tests/serve/$test_file"
cp "$here/$test_file" "$here/harness.mjs" "$node_dir/"

# A free loopback port (for the workers, which have no --port-file).
free_port() {
  node -e 'const s = require("net").createServer(); s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

# Starts a worker on a free port; prints the port once it listens. A port
# taken between free_port and the worker's bind means another try.
start_worker() {
  local name=$1 port pid deadline
  for _ in 1 2 3; do
    port=$(free_port)
    "$weft" worker --port "$port" -t 1 >"$dir/$name.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
      if grep -q "listening on" "$dir/$name.log"; then
        echo "$port"
        return 0
      fi
      sleep 0.05
    done
    kill "$pid" 2>/dev/null || true
  done
  return 1
}

worker_args=()
workers_flag=()
if ((with_workers)); then
  # Not in a command substitution: pids+=() must reach this shell.
  start_worker worker1 >"$dir/w1port" || fail "weft worker 1 did not start"
  start_worker worker2 >"$dir/w2port" || fail "weft worker 2 did not start"
  worker_args=(--worker "127.0.0.1:$(<"$dir/w1port")" --worker "127.0.0.1:$(<"$dir/w2port")" --split 1,1,1)
  workers_flag=(--workers 2)
fi

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/api.key"

start_server() {
  local name=$1
  shift
  "$weft" serve -m "$dir/model.gguf" -t 1 --port 0 --port-file "$dir/$name.port" "$@" >"$dir/$name.log" 2>&1 &
  pids+=("$!")
  eval "${name}_pid=$!"
}
start_server main --ctx-size 16384 --parallel 4 --alias weft-test "${worker_args[@]}"
start_server queue --ctx-size 4096 --parallel 1 --max-queue 1
start_server auth --ctx-size 1024 --parallel 1 --host 0.0.0.0 --api-key-file "$dir/api.key" --max-tokens 64
start_server tools --ctx-size 8192 --parallel 2 --chat-template "$here/chat_templates/qwen2_5.jinja"

# Each server's port, once it listens; then its /health answering 200.
health='fetch(process.argv[1] + "/health").then((r) => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1))'
wait_ready() {
  local name=$1 pid_var=${1}_pid port= deadline=$((SECONDS + 60))
  until [[ $port =~ ^[0-9]+$ ]]; do
    kill -0 "${!pid_var}" 2>/dev/null || fail "weft serve ($name) exited before listening"
    ((SECONDS < deadline)) || fail "weft serve ($name) wrote no port file in 60 s"
    sleep 0.05
    [[ -s $dir/$name.port ]] && port=$(tr -d "[:space:]" <"$dir/$name.port")
  done
  until node -e "$health" "http://127.0.0.1:$port"; do
    kill -0 "${!pid_var}" 2>/dev/null || fail "weft serve ($name) exited while loading"
    ((SECONDS < deadline)) || fail "http://127.0.0.1:$port/health ($name) did not answer 200 in 60 s"
    sleep 0.1
  done
  eval "${name}_url=http://127.0.0.1:$port"
}
# Not in a command substitution: fail must end this shell, its message shown.
wait_ready main
wait_ready queue
wait_ready auth
wait_ready tools
echo "weft serve is up: main $main_url$( ((with_workers)) && echo " (over 2 workers)"), queue $queue_url," \
  "auth $auth_url, tools $tools_url ($((SECONDS - start_time)) s)"

# In the background, so that a signal to this script ends it at once
# (cleanup stops it with the servers).
rc=0
(cd "$node_dir" && exec timeout 300 node "$test_file" --base "$main_url" "${workers_flag[@]}" \
  --queue-base "$queue_url" --auth-base "$auth_url" --key-file "$dir/api.key" \
  --tools-base "$tools_url" --tool-prompts "$here/tool_prompts/tool_prompts.json" \
  --weft "$weft" --model "$dir/model.gguf") &
test_pid=$!
pids+=("$test_pid")
wait "$test_pid" || rc=$?
for name in main queue auth tools; do
  pid_var=${name}_pid
  kill -0 "${!pid_var}" 2>/dev/null || { echo "FAIL: weft serve ($name) died during the test"; rc=1; }
done
if ((rc != 0)); then
  echo "FAIL: $test_file (exit $rc)"
  logs_tail
fi
echo "run_openai.sh: $((SECONDS - start_time)) s in all"
exit "$rc"
