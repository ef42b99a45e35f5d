#!/usr/bin/env bash
# `weft run` over rate-limited links (scripts/netsim.sh): two `weft worker`
# processes, each in its own network namespace behind a veth pair limited to
# 100 Mbit/s each way by `tc tbf`, hold the layers after this host's; the
# greedy text must be the local text, with peer links (worker 1 pushes to
# worker 2 through both limiters) and without (--no-peer-links), and the
# limiters must have carried the traffic and held it back (tbf overlimits).
# Exits 77 (ctest's SKIP_RETURN_CODE) when not root or when this machine
# cannot make namespaces, veth pairs or tbf qdiscs.
# Usage: netsim_test.sh WEFT_BINARY WRITE_TEST_MODEL_BINARY
set -euo pipefail
# shellcheck source=../lib/worker.sh
source "$(dirname "$0")/../lib/worker.sh"
# shellcheck source=../lib/netsim_env.sh
source "$(dirname "$0")/../lib/netsim_env.sh"
weft=$1
writer=$2
netsim=$(cd "$(dirname "$0")/../../scripts" && pwd)/netsim.sh
# Names and addresses of this run's own (10.78-199; the bench uses 10.77).
netsim_env "wt$$-" 78 199 2 100mbit

# Off loopback a worker needs a token (docs/security.md).
printf 'netsim-test-token\n' >"$dir/token"
chmod 600 "$dir/token"

# Worker I in namespace I on a free port; sets $endpoint.
start_worker() {
  local i=$1 log=$dir/worker$1.log addr=10.$NETSIM_NET.$1.2
  : >"$log"
  "$netsim" exec "$i" "$weft" worker --host "$addr" --port 0 --threads 1 --auth-token-file "$dir/token" \
    >"$log" 2>&1 &
  pids+=($!)
  await_weft_worker "$log" "$addr" || die "worker $i did not start"
}
start_worker 1; w1=$endpoint
start_worker 2; w2=$endpoint

"$writer" "$dir/model.gguf" --layers 4 --embd 256 --heads 4 --heads-kv 4 --ff 512 --vocab 600 --ctx 512
# Over 64 tokens, so the prompt flows through the workers in micro-batches.
prompt=$(for _ in $(seq 8); do printf 'The quick brown fox jumps over the lazy dog. '; done)
run() { "$weft" run -m "$dir/model.gguf" -p "$prompt" -n 32 -t 1 "$@"; }
local_text=$(run 2>"$dir/local.err") || { cat "$dir/local.err"; die "local run"; }
[[ -n $local_text ]] || die "no text generated"
for links in "" --no-peer-links; do
  split_text=$(run --worker "$w1" --worker "$w2" --split 1,1,1 --auth-token-file "$dir/token" --stats $links \
    2>"$dir/split.err") || { cat "$dir/split.err"; die "split run ${links:-with peer links}"; }
  grep -E '^(prompt|generation|worker)' "$dir/split.err"
  [[ $local_text == "$split_text" ]] ||
    die "split text ${links:-with peer links} differs: local '$local_text', split '$split_text'"
  echo "run over 100mbit links ${links:-with peer links}: identical: $(printf '%s' "$split_text" | cat -v)"
done

# Every limiter carried bytes, and the weights' upload went over the rate at
# least once on each host end (overlimits: packets tbf held back).
for i in 1 2; do
  for end in "tc -s qdisc show dev ${NETSIM_PREFIX}${i}h" \
    "tc -n ${NETSIM_PREFIX}$i -s qdisc show dev ${NETSIM_PREFIX}${i}n"; do
    stats=$($end)
    grep -q 'tbf .*rate 100Mbit' <<<"$stats" || die "no 100mbit tbf: $stats"
    sent=$(sed -n 's/.*Sent \([0-9]*\) bytes.*/\1/p' <<<"$stats")
    over=$(sed -n 's/.*overlimits \([0-9]*\).*/\1/p' <<<"$stats")
    echo "$end: sent $sent bytes, overlimits $over"
    ((sent > 10000)) || die "$end carried $sent bytes"
    [[ $end == *"${i}n" ]] || ((over > 0)) || die "$end never held a packet back"
  done
done
echo "PASS"
