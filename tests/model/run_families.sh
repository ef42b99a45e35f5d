#!/usr/bin/env bash
# `weft run` and `weft gguf info` on every model-family test file
# (tests/model/families/make_family.py): each generates on this CPU alone and
# split over this CPU and a `weft worker` process, with identical text; `weft
# gguf info` names the family.
# Usage: run_families.sh WEFT_BINARY PYTHON3
set -euo pipefail
weft=$1
python=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/worker.sh
source "$here/../lib/worker.sh"
dir=$(mktemp -d)
worker_pid=
cleanup() {
  [[ -n $worker_pid ]] && { kill "$worker_pid" 2>/dev/null || true; wait "$worker_pid" 2>/dev/null || true; }
  rm -rf "$dir"
}
trap cleanup EXIT
die() { echo "FAIL: $*"; exit 1; }

"$python" "$here/families/make_family.py" "$dir"
start_weft_worker "$weft" "$dir/worker.log" || die "the worker did not start"

declare -A family=([llama]=llama [qwen2]=qwen2 [llama3_freqs]=llama [llama3_keys]=llama [qwen3]=qwen3
  [qwen3moe]=qwen3moe [qwen2moe]=qwen2moe [phi3_short]=phi3 [phi3_long]=phi3 [gemma2]=gemma2 [gemma3]=gemma3
  [phi3_window_big]=phi3 [phi3_window]=phi3 [phi3_unfused]=phi3 [llama_window]=llama [qwen2_window_pattern]=qwen2
  [qwen2_tied]=qwen2 [qwen3_linear]=qwen3 [qwen3moe_window_big]=qwen3moe [qwen2moe_window]=qwen2moe
  [gemma2_nowindow]=gemma2 [gemma2_window_big]=gemma2 [gemma3_window_list]=gemma3 [gemma3_nowindow]=gemma3
  [qwen3_yarn]=qwen3 [llama_yarn]=llama [gptoss]=gpt-oss [gptoss_mxfp4]=gpt-oss [deepseek2]=deepseek2
  [deepseek2_lite]=deepseek2)
for name in "${!family[@]}"; do
  f=$dir/$name.gguf
  "$weft" gguf info "$f" >"$dir/info.txt" || die "gguf info $name"
  grep -q "^model: ${family[$name]} (" "$dir/info.txt" || { tail -8 "$dir/info.txt"; die "gguf info $name: no family line"; }
  local_text=$("$weft" run -m "$f" -p "Once upon a time" -n 12 -t 1 2>"$dir/err") || { cat "$dir/err"; die "local run $name"; }
  split_text=$("$weft" run -m "$f" -p "Once upon a time" -n 12 -t 1 --worker "$endpoint" --split 1,1 2>"$dir/err") ||
    { cat "$dir/err"; die "split run $name"; }
  [[ $local_text == "$split_text" ]] || die "$name: split text differs: local '$local_text', split '$split_text'"
  echo "$name: identical: $(printf '%s' "$split_text" | cat -v)"
done

# Quantized copies (`weft quantize`, rows of 64 so q8_0 applies): the same
# text split as local.
for name in qwen3 llama3_keys; do
  q=$dir/$name-q8.gguf
  "$weft" quantize "$dir/$name.gguf" "$q" Q8_0 -t 1 >"$dir/quantize.out" 2>&1 || { cat "$dir/quantize.out"; die "quantize $name"; }
  local_text=$("$weft" run -m "$q" -p "Once upon a time" -n 12 -t 1 2>"$dir/err") || { cat "$dir/err"; die "local run $q"; }
  split_text=$("$weft" run -m "$q" -p "Once upon a time" -n 12 -t 1 --worker "$endpoint" --split 1,1 2>"$dir/err") ||
    { cat "$dir/err"; die "split run $q"; }
  [[ $local_text == "$split_text" ]] || die "$q: split text differs"
  echo "$name Q8_0: $(tail -1 "$dir/quantize.out"); identical"
done
