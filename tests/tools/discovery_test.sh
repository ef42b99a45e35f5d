#!/usr/bin/env bash
# Discovery across network namespaces (scripts/netsim.sh): two `weft worker
# --advertise --tls` processes, each in its own namespace behind a veth pair,
# broadcast beacons signed with the pool's token; this host (the root
# namespace) must hear both with `weft workers`, keep them only with the
# token, and `weft run --discover` must use them (over TLS, pinned by the
# signed beacons) and give the local text.
# Exits 77 (ctest's SKIP_RETURN_CODE) when not root or when this machine
# cannot make namespaces or veth pairs.
# Usage: discovery_test.sh WEFT_BINARY WRITE_TEST_MODEL_BINARY
set -euo pipefail
# shellcheck source=../lib/worker.sh
source "$(dirname "$0")/../lib/worker.sh"
# shellcheck source=../lib/netsim_env.sh
source "$(dirname "$0")/../lib/netsim_env.sh"
weft=$1
writer=$2
netsim=$(cd "$(dirname "$0")/../../scripts" && pwd)/netsim.sh
netsim_env "wd$$-" 200 254 2 1gbit

printf 'discovery-test-token\n' >"$dir/token"
chmod 600 "$dir/token"
# A UDP port of this run's own, so another tree's run is not heard.
port=$((40000 + $$ % 20000))

for i in 1 2; do
  addr=10.$NETSIM_NET.$i.2
  mkdir -p "$dir/w$i"
  cp "$dir/token" "$dir/w$i/token"  # each worker's certificate is made beside its token
  : >"$dir/worker$i.log"
  "$netsim" exec "$i" "$weft" worker --host "$addr" --port 0 --threads 1 --auth-token-file "$dir/w$i/token" --tls \
    --advertise --advertise-port "$port" >"$dir/worker$i.log" 2>&1 &
  pids+=($!)
  await_weft_worker "$dir/worker$i.log" "$addr" || die "worker $i did not start"
  eval "w$i=\$pinned_endpoint"
done
echo "workers: $w1 $w2"

"$weft" workers --seconds 3 --port "$port" --auth-token-file "$dir/token" >"$dir/heard.txt" 2>&1 || die "weft workers"
cat "$dir/heard.txt"
for w in "$w1" "$w2"; do
  grep -q "^$w .*(beacon signed with this token)" "$dir/heard.txt" || die "weft workers did not hear $w signed"
done
"$weft" workers --seconds 3 --port "$port" >"$dir/unsigned.txt" 2>&1 || die "weft workers without a token"
grep -q "not used by --discover" "$dir/unsigned.txt" || die "without the token the workers were not marked unusable"

"$writer" "$dir/model.gguf" --layers 3 --embd 64 --heads 4 --heads-kv 2 --ff 128 --vocab 600 --ctx 512
run() { "$weft" run -m "$dir/model.gguf" -p "The quick brown fox" -n 16 -t 1 "$@"; }
local_text=$(run 2>"$dir/local.err") || { cat "$dir/local.err"; die "local run"; }
found_text=$(run --discover --discover-port "$port" --auth-token-file "$dir/token" --split 1,1,1 2>"$dir/found.err") ||
  { cat "$dir/found.err"; die "run --discover"; }
cat "$dir/found.err" | grep -E "^discovered" || true
[[ $(grep -c "^discovered worker tls://10\.$NETSIM_NET\.[12]\.2:" "$dir/found.err") -eq 2 ]] ||
  { cat "$dir/found.err"; die "run --discover did not use both workers"; }
[[ $found_text == "$local_text" ]] || die "the text over discovered workers differs: '$found_text' vs '$local_text'"
echo "PASS"
