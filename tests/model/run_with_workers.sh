#!/usr/bin/env bash
# `weft run` and `weft perplexity` end to end: a small model with a
# vocabulary, generated on this CPU alone and split 1,1,1 over this CPU and
# two `weft worker` processes, must give the same text (greedy, and sampled
# with a seed) and the same perplexity, as must the default placement by
# speed, whose plan shows predicted times, and a mixture-of-experts model's
# experts cut over the three (--experts-split); --stats must report each
# worker; a killed worker must end `weft run` with a clear error, not a crash.
# Usage: run_with_workers.sh WEFT_BINARY WRITE_TEST_MODEL_BINARY
set -euo pipefail
# shellcheck source=../lib/worker.sh
source "$(dirname "$0")/../lib/worker.sh"
weft=$1
writer=$2
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
die() { echo "FAIL: $*"; exit 1; }

# A worker on a free loopback port: start_worker NAME [WORKER_ARGS...]; sets $endpoint.
start_worker() {
  local started=0
  start_weft_worker "$weft" "$dir/worker$1.log" "${@:2}" || started=1
  pids+=("$worker_pid")
  ((started == 0)) || die "worker $1 did not start"
}

"$writer" "$dir/model.gguf" --layers 3 --embd 64 --heads 4 --heads-kv 2 --ff 128 --vocab 600 --ctx 512
start_worker 1; w1=$endpoint
start_worker 2; w2=$endpoint
split=(--worker "$w1" --worker "$w2" --split 1,1,1)
prompt="The quick brown fox jumps over the lazy dog"

# Greedy, then sampled: the same text either way.
for sampling in "" "--temp 1.5 --seed 7"; do
  # shellcheck disable=SC2086
  local_text=$("$weft" run -m "$dir/model.gguf" -p "$prompt" -n 24 -t 1 $sampling 2>"$dir/local.err") ||
    { cat "$dir/local.err"; die "local run ($sampling)"; }
  # shellcheck disable=SC2086
  split_text=$("$weft" run -m "$dir/model.gguf" -p "$prompt" -n 24 -t 1 $sampling "${split[@]}" --stats \
    2>"$dir/split.err") || { cat "$dir/split.err"; die "split run ($sampling)"; }
  [[ -n $local_text ]] || die "no text generated ($sampling)"
  [[ $local_text == "$split_text" ]] ||
    die "split text differs ($sampling): local '$local_text', split '$split_text'"
  echo "run ${sampling:-greedy}: identical: $(printf '%s' "$split_text" | cat -v)"
done
cat "$dir/split.err"
for w in "$w1" "$w2"; do
  grep -q "^worker $w: .* sent, .* received, [0-9]* round trips, [0-9.]* s waiting" "$dir/split.err" || die "--stats lacks worker $w"
  grep -q "^$w (.*): layers \[[0-9]*, [0-9]*), .* weights + .* KV cache (.* positions), .* free" "$dir/split.err" ||
    die "plan lacks worker $w"
  grep -q "^stage $w: measured [0-9.e+-]* ms/token computing ([0-9]* graphs)" "$dir/split.err" ||
    die "--stats lacks worker $w's measured time per token"
done
grep -q "^stage host: measured [0-9.e+-]* ms/token computing" "$dir/split.err" || die "--stats lacks the host's stage time"

# Several sequences decoded together (--parallel, --prompts), pipelined over
# the two workers: each sequence's text is its own local run's.
sequence() { awk -v n="$2" '/^--- sequence / { on = ($3 == n) ; next } on' "$1"; }
"$weft" run -m "$dir/model.gguf" -p "$prompt" -n 24 -t 1 --parallel 3 "${split[@]}" --stats >"$dir/par.out" \
  2>"$dir/par.err" || { cat "$dir/par.err"; die "run --parallel 3"; }
greedy_text=$("$weft" run -m "$dir/model.gguf" -p "$prompt" -n 24 -t 1 2>/dev/null)
for n in 0 1 2; do
  [[ $(sequence "$dir/par.out" "$n") == "$greedy_text" ]] ||
    die "sequence $n of --parallel 3 differs: '$(sequence "$dir/par.out" "$n")' vs '$greedy_text'"
done
grep -q "^generation: 72 tokens in all; .* tokens/s aggregate" "$dir/par.err" || { cat "$dir/par.err"; die "--parallel --stats"; }
printf '%s\n\nOnce upon a time\n' "$prompt" >"$dir/prompts.txt"
"$weft" run -m "$dir/model.gguf" --prompts "$dir/prompts.txt" -n 16 -t 1 "${split[@]}" >"$dir/prompts.out" \
  2>"$dir/prompts.err" || { cat "$dir/prompts.err"; die "run --prompts"; }
n=0
for p in "$prompt" "Once upon a time"; do
  alone=$("$weft" run -m "$dir/model.gguf" -p "$p" -n 16 -t 1 2>/dev/null)
  [[ $(sequence "$dir/prompts.out" "$n") == "$alone" ]] || die "--prompts sequence $n differs from its own run"
  n=$((n + 1))
done
[[ $(grep -c '^--- sequence' "$dir/prompts.out") -eq 2 ]] || die "--prompts: want 2 sequences (the empty line is none)"
echo "run --parallel 3 and --prompts: every sequence equals its own local run"

# Over TLS: two `weft worker --tls` (each makes its certificate on first
# start, kept in its own config folder), this host trusting each on first
# use (recorded in a known-workers file), the workers linked to each other
# over TLS with this host's pins: the same text. A wrong pin is refused.
XDG_CONFIG_HOME="$dir/tls3" start_worker 3 --tls; t3=$endpoint
XDG_CONFIG_HOME="$dir/tls4" start_worker 4 --tls; t4=$endpoint; t4_pinned=$pinned_endpoint
[[ $t3 == tls://* && $t4_pinned == "$t4#sha256:"* ]] || die "a --tls worker does not say tls://HOST:PORT#FINGERPRINT: $t3, $t4_pinned"
tls_text=$(WEFT_KNOWN_WORKERS="$dir/known_workers" "$weft" run -m "$dir/model.gguf" -p "$prompt" -n 24 -t 1 \
  --worker "$t3" --worker "$t4" --split 1,1,1 --stats 2>"$dir/tls.err") || { cat "$dir/tls.err"; die "run over TLS"; }
[[ $tls_text == "$greedy_text" ]] || die "the text over TLS differs: '$tls_text' vs '$greedy_text'"
grep -q "first TLS connection to $t3" "$dir/tls.err" || { cat "$dir/tls.err"; die "no trust-on-first-use message"; }
grep -q "copies through this host" "$dir/tls.err" && { cat "$dir/tls.err"; die "the TLS workers did not link to each other"; }
[[ $(wc -l <"$dir/known_workers") -eq 2 ]] || die "known_workers should list both TLS workers"
wrong_pin="$t4#sha256:$(printf '0%.0s' $(seq 64))"
if WEFT_KNOWN_WORKERS="$dir/known_workers" "$weft" run -m "$dir/model.gguf" -p "$prompt" -n 2 -t 1 \
  --worker "$wrong_pin" 2>"$dir/tls.err" >/dev/null; then die "a wrong pin was accepted"; fi
grep -q "not the pinned" "$dir/tls.err" || { cat "$dir/tls.err"; die "the wrong pin's error"; }
echo "run over TLS: identical, pins checked"

# Without --split: placed by speed (each device probed at connect); the plan
# shows each stage's predicted time and what the probe measured, and the
# text is the same. --placement memory: the old policy, no probe.
num='[0-9.e+-]*'
greedy_text=$("$weft" run -m "$dir/model.gguf" -p "$prompt" -n 24 -t 1 2>/dev/null)
speed_text=$("$weft" run -m "$dir/model.gguf" -p "$prompt" -n 24 -t 1 --worker "$w1" --worker "$w2" --stats \
  2>"$dir/speed.err") || { cat "$dir/speed.err"; die "run placed by speed"; }
cat "$dir/speed.err"
[[ $speed_text == "$greedy_text" ]] || die "the text placed by speed differs: '$speed_text' vs '$greedy_text'"
grep -q "^placement: by speed; predicted $num ms/token ($num ms compute, $num ms links)$" "$dir/speed.err" ||
  die "the plan lacks the predicted time per token"
grep -q "^host (.*): layers .* free, predicted $num ms/token.*; measured: matvec $num GB/s$" "$dir/speed.err" ||
  die "the plan lacks the host's predicted time"
for w in "$w1" "$w2"; do
  grep -q "^$w (.*): layers .* free, predicted $num ms/token.*; measured: matvec $num GB/s, round trip $num ms, link $num GB/s$" \
    "$dir/speed.err" || die "the plan lacks worker $w's predicted time"
done
"$weft" run -m "$dir/model.gguf" -p "$prompt" -n 4 -t 1 --worker "$w1" --worker "$w2" --placement memory >/dev/null \
  2>"$dir/memory.err" || { cat "$dir/memory.err"; die "run placed by free memory"; }
grep -q "^placement: by free memory$" "$dir/memory.err" || die "--placement memory is not by free memory"
grep -q "predicted" "$dir/memory.err" && die "--placement memory predicted times"

# A mixture-of-experts model (4 experts, 2 per token), every device holding a layer.
"$writer" "$dir/moe.gguf" --layers 3 --embd 64 --heads 4 --heads-kv 2 --ff 128 --vocab 600 --ctx 512 --experts 4 \
  --experts-used 2
moe_local=$("$weft" run -m "$dir/moe.gguf" -p "$prompt" -n 24 -t 1 2>"$dir/moe.err") || { cat "$dir/moe.err"; die "local MoE run"; }
moe_split=$("$weft" run -m "$dir/moe.gguf" -p "$prompt" -n 24 -t 1 "${split[@]}" 2>"$dir/moe.err") ||
  { cat "$dir/moe.err"; die "split MoE run"; }
[[ $moe_local == "$moe_split" ]] || die "split MoE text differs: local '$moe_local', split '$moe_split'"
echo "run MoE: identical: $(printf '%s' "$moe_split" | cat -v)"
# The same model's experts cut over this host and both workers (every layer
# here): the same text, the plan shows each device's experts, and --stats
# each worker's round trips (a layer's slice is one).
moe_experts=$("$weft" run -m "$dir/moe.gguf" -p "$prompt" -n 24 -t 1 --worker "$w1" --worker "$w2" \
  --experts-split 2,1,1 --stats 2>"$dir/moe.err") || { cat "$dir/moe.err"; die "MoE run with --experts-split"; }
[[ $moe_local == "$moe_experts" ]] || die "--experts-split text differs: local '$moe_local', split '$moe_experts'"
grep -q "^placement: layers on host; experts 2 + 1 + 1 of 4 per layer (--experts-split 2,1,1); predicted .* of it at once)$" "$dir/moe.err" ||
  { cat "$dir/moe.err"; die "--experts-split plan line"; }
for w in "$w1" "$w2"; do
  grep -q "^$w (.*): layers \[3, 3), 1 experts of each layer, " "$dir/moe.err" || die "plan lacks worker $w's experts"
  grep -q "^worker $w: .* [0-9]* round trips" "$dir/moe.err" || die "--stats lacks worker $w"
done
echo "run MoE --experts-split 2,1,1: identical"

# Perplexity over a text of a few chunks: equal to 4 decimals.
for _ in $(seq 40); do echo "Once upon a time, a quick brown fox met a lazy dog by the river. 1234, 5678!"; done >"$dir/text.txt"
ppl_local=$("$weft" perplexity -m "$dir/model.gguf" -f "$dir/text.txt" -c 128 -t 1 2>"$dir/ppl.err" | grep '^perplexity:') ||
  { cat "$dir/ppl.err"; die "local perplexity"; }
ppl_split=$("$weft" perplexity -m "$dir/model.gguf" -f "$dir/text.txt" -c 128 -t 1 "${split[@]}" 2>"$dir/ppl.err" |
  grep '^perplexity:') || { cat "$dir/ppl.err"; die "split perplexity"; }
echo "local: $ppl_local"
echo "split: $ppl_split"
[[ $ppl_local == "$ppl_split" ]] || die "perplexity differs"

# Quantized copies made by `weft quantize` (rows of 256 and 512 values, so
# the K-quants apply): each runs the same split as local and its perplexity
# stays near the source model's (q8_0; each limit is 3-4 times the distance
# measured when this test was written: Q4_K_M 1.4%, Q2_K 9.1%, IQ4_XS 2.1%,
# Q5_1 0.8%).
"$writer" "$dir/wide.gguf" --layers 3 --embd 256 --heads 4 --heads-kv 2 --ff 512 --vocab 600 --ctx 512
ppl_of() { grep '^perplexity:' | sed 's/^perplexity: \([0-9.]*\).*/\1/'; }
ppl_wide=$("$weft" perplexity -m "$dir/wide.gguf" -f "$dir/text.txt" -c 128 -t 1 2>"$dir/ppl.err" | ppl_of) ||
  { cat "$dir/ppl.err"; die "perplexity of the q8_0 model"; }
for mix_limit in Q4_K_M:0.05 Q2_K:0.30 IQ4_XS:0.08 Q5_1:0.03; do
  mix=${mix_limit%%:*}
  limit=${mix_limit#*:}
  q=$dir/wide-$mix.gguf
  "$weft" quantize "$dir/wide.gguf" "$q" "$mix" --allow-requantize -t 2 >"$dir/quantize.out" 2>&1 ||
    { cat "$dir/quantize.out"; die "weft quantize $mix"; }
  q_local=$("$weft" run -m "$q" -p "$prompt" -n 24 -t 1 2>"$dir/q.err") || { cat "$dir/q.err"; die "local run $mix"; }
  q_split=$("$weft" run -m "$q" -p "$prompt" -n 24 -t 1 "${split[@]}" 2>"$dir/q.err") ||
    { cat "$dir/q.err"; die "split run $mix"; }
  [[ $q_local == "$q_split" ]] || die "split text differs for $mix: local '$q_local', split '$q_split'"
  p_local=$("$weft" perplexity -m "$q" -f "$dir/text.txt" -c 128 -t 1 2>"$dir/ppl.err" | ppl_of) ||
    { cat "$dir/ppl.err"; die "local perplexity $mix"; }
  p_split=$("$weft" perplexity -m "$q" -f "$dir/text.txt" -c 128 -t 1 "${split[@]}" 2>"$dir/ppl.err" | ppl_of) ||
    { cat "$dir/ppl.err"; die "split perplexity $mix"; }
  [[ $p_local == "$p_split" ]] || die "perplexity of $mix differs: local $p_local, split $p_split"
  awk -v a="$p_local" -v b="$ppl_wide" -v l="$limit" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; exit !(d <= l) }' ||
    die "perplexity of $mix $p_local is more than $limit (relative) from the source's $ppl_wide"
  echo "$mix: $(tail -1 "$dir/quantize.out"); run identical; perplexity $p_local (source $ppl_wide)"
done

# A worker whose memory budget cannot hold its share: refused at the plan,
# naming the worker, before anything is uploaded. (1 MiB, the smallest
# budget a worker accepts, against a model whose layers are ~2.5 MB each.)
"$writer" "$dir/wide.gguf" --layers 2 --embd 512 --heads 8 --heads-kv 4 --ff 1024 --vocab 600 --ctx 512 >/dev/null
start_worker small --mem 1MiB; small=$endpoint
grep -q "memory budget 1 MiB;" "$dir/workersmall.log" || { cat "$dir/workersmall.log"; die "the worker's log does not state its 1 MiB budget"; }
status=0
"$weft" run -m "$dir/wide.gguf" -p "$prompt" -n 4 -t 1 --worker "$small" --split 1,1 >/dev/null 2>"$dir/small.err" ||
  status=$?
cat "$dir/small.err"
[[ $status -eq 1 ]] || die "a plan over the worker's budget: exit status $status (want 1)"
grep -q "out of memory error: \[run\] $small has [0-9.]* [KM]iB free but its share needs" "$dir/small.err" ||
  die "the refusal does not name the worker and the sizes"
grep -q "^loaded" "$dir/small.err" && die "weights were loaded despite the refusal"

# A worker killed while tokens stream: `weft run` ends with a clear error
# naming the worker, exit status 1 (not a signal, not a hang).
"$writer" "$dir/long.gguf" --layers 3 --embd 64 --heads 4 --heads-kv 2 --ff 128 --vocab 600 --ctx 65536
"$weft" run -m "$dir/long.gguf" -p "$prompt" -n 60000 -t 1 "${split[@]}" >"$dir/dead.out" 2>"$dir/dead.err" &
run_pid=$!
for _ in $(seq 600); do
  [[ -s $dir/dead.out ]] && break  # generation has started
  sleep 0.05
done
[[ -s $dir/dead.out ]] || { cat "$dir/dead.err"; die "no tokens streamed before the kill"; }
kill -9 "${pids[1]}"
wait "${pids[1]}" 2>/dev/null || true
status=0
wait "$run_pid" || status=$?
cat "$dir/dead.err"
[[ $status -eq 1 ]] || die "with a worker killed during generation, exit status $status (want 1)"
grep -q "disconnected error: \[rpc\] $w2 " "$dir/dead.err" || die "the error does not name the dead worker $w2"

# A worker that stops answering (SIGSTOP: TCP still sees it alive) while
# tokens stream: with --worker-timeout, `weft run` gives up with a clear error.
start_worker stopped; stopped=$endpoint
stopped_pid=${pids[-1]}
"$weft" run -m "$dir/long.gguf" -p "$prompt" -n 60000 -t 1 --worker "$stopped" --split 1,1 --worker-timeout 1 \
  >"$dir/stopped.out" 2>"$dir/stopped.err" &
run_pid=$!
for _ in $(seq 600); do
  [[ -s $dir/stopped.out ]] && break
  sleep 0.05
done
[[ -s $dir/stopped.out ]] || { cat "$dir/stopped.err"; die "no tokens streamed before the stop"; }
kill -STOP "$stopped_pid"
status=0
wait "$run_pid" || status=$?
kill -CONT "$stopped_pid"
cat "$dir/stopped.err"
[[ $status -eq 1 ]] || die "with a stopped worker and --worker-timeout 1, exit status $status (want 1)"
grep -q "disconnected error: \[rpc\] $stopped .*no data for 1000 ms" "$dir/stopped.err" ||
  die "the error does not name the silent worker and the deadline"

# A worker that requires a token: `weft run --auth-token-file` reaches it
# (named as a --device spec) and gives the local text; without the token the
# run is refused.
printf '  s3cret-token\n' >"$dir/token"
chmod 600 "$dir/token"
start_worker token --auth-token-file "$dir/token"; tokened=$endpoint
greedy_local=$("$weft" run -m "$dir/model.gguf" -p "$prompt" -n 8 -t 1 2>/dev/null)
token_text=$("$weft" run -m "$dir/model.gguf" -p "$prompt" -n 8 -t 1 --device "rpc://$tokened" --split 1,1 \
  --auth-token-file "$dir/token" 2>"$dir/token.err") || { cat "$dir/token.err"; die "run with --auth-token-file"; }
[[ $token_text == "$greedy_local" ]] || die "the run through the token worker differs: '$token_text' vs '$greedy_local'"
status=0
"$weft" run -m "$dir/model.gguf" -p "$prompt" -n 8 -t 1 --device "rpc://$tokened" >/dev/null 2>"$dir/notoken.err" ||
  status=$?
[[ $status -eq 1 ]] || die "a run without the worker's token: exit status $status (want 1)"
echo "token worker: identical text; refused without the token: $(head -1 "$dir/notoken.err")"

# With --recover, a worker killed mid-generation: the run goes on over the
# devices left, says what it did, and prints the local run's text
# (docs/recovery.md). The run is paused for the kill, so it happens
# mid-generation however fast this machine is.
start_worker r1; r1=$endpoint
start_worker r2; r2=$endpoint
r2_pid=${pids[-1]}
recover_local=$("$weft" run -m "$dir/long.gguf" -p "$prompt" -n 1500 -t 1 2>/dev/null)
"$weft" run -m "$dir/long.gguf" -p "$prompt" -n 1500 -t 1 --worker "$r1" --worker "$r2" --split 1,1,1 --recover \
  >"$dir/recover.out" 2>"$dir/recover.err" &
run_pid=$!
for _ in $(seq 3000); do
  [[ -s $dir/recover.out ]] && break
  sleep 0.01
done
kill -STOP "$run_pid"
kill -9 "$r2_pid"
wait "$r2_pid" 2>/dev/null || true
kill -CONT "$run_pid"
status=0
wait "$run_pid" || status=$?
[[ $status -eq 0 ]] || { cat "$dir/recover.err"; die "--recover with a worker killed: exit status $status (want 0)"; }
grep -q "^\[recovered\] lost $r2; now host layers 0-[0-9], $r1 layers [0-9]-3; reloaded in" "$dir/recover.err" ||
  { cat "$dir/recover.err"; die "--recover printed no notice naming the lost worker and the new placement"; }
[[ $(cat "$dir/recover.out") == "$recover_local" ]] || die "--recover: the text differs from the local run's"
echo "recover: $(grep '^\[recovered\]' "$dir/recover.err"); identical text"

# The surviving workers stop cleanly on SIGTERM, and no worker reported a
# sanitizer error (a sanitizer build's report would not stop a worker).
for i in 0 2 3 4; do  # workers 1, small, stopped and token (worker 2 was killed)
  kill -TERM "${pids[$i]}"
  status=0
  wait "${pids[$i]}" || status=$?
  [[ $status -eq 0 ]] || die "worker $i exited with status $status after SIGTERM"
done
if grep -l -E "Sanitizer|runtime error" "$dir"/worker*.log; then
  cat "$dir"/worker*.log
  die "a worker reported a sanitizer error"
fi
echo "PASS"
