#!/bin/sh
# The per-type table of docs/performance.md: a TinyLlama-shaped 1.1 B model
# (random weights: speed depends on shapes and types, not values) in each
# weight type, a 512-token prompt and 64 generated tokens at 1 and 2
# threads, at this CPU's widest SIMD level and at AVX2 (WEFT_CPU_SIMD=avx2),
# each as a fraction of the FMA peak and the memory read bandwidth that
# `weft bench model` measures in the same run. Run it on a quiet machine.
#
#   scripts/bench_types.sh [DIR]     # model files made once in DIR
#                                    # (default ~/.cache/weft/bench-types)
#   TYPES="Q8_0 Q4_0" THREADS="1" scripts/bench_types.sh
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
weft="$root/build/release/tools/weft/weft"
writer="$root/build/release/tests/weft_write_test_model"
dir=${1:-$HOME/.cache/weft/bench-types}
types=${TYPES:-"Q8_0 Q4_0 Q4_K_M F16"}
threads=${THREADS:-"1 2"}
prompt=${PROMPT:-512}
gen=${GEN:-64}

for tool in "$weft" "$writer"; do
  [ -x "$tool" ] || { echo "bench_types: $tool is missing (make build first)" >&2; exit 1; }
done
mkdir -p "$dir"
source_file="$dir/tl_q8_0.gguf"
if [ ! -f "$source_file" ]; then
  "$writer" "$source_file" --layers 22 --embd 2048 --heads 32 --heads-kv 4 --ff 5632 --vocab 32000 \
    --ctx 2048 --untied >/dev/null
fi

levels="native"
grep -q avx512f /proc/cpuinfo && levels="native avx2"

echo "| type | SIMD | threads | pp$prompt tokens/s | of FMA peak | tg$gen tokens/s | of read bandwidth |"
echo "|---|---|---|---|---|---|---|"
for type in $types; do
  file="$dir/tl_$(echo "$type" | tr 'A-Z' 'a-z').gguf"
  if [ ! -f "$file" ]; then
    "$weft" quantize --allow-requantize "$source_file" "$file" "$type" >/dev/null
  fi
  for level in $levels; do
    for t in $threads; do
      simd=""
      [ "$level" = avx2 ] && simd=avx2
      out=$(WEFT_CPU_SIMD=$simd "$weft" bench model -m "$file" -p "$prompt" -n "$gen" -t "$t" -r 1 2>&1)
      kernels=$(echo "$out" | sed -n 's/.*CPU kernels: \([a-z0-9-]*\).*/\1/p')
      pp=$(echo "$out" | sed -n "s/^pp$prompt: \([0-9.]*\) .* tokens\/s$/\1/p")
      pp_frac=$(echo "$out" | sed -n "s/^pp$prompt: .* = \([0-9.]*\) of the FMA peak.*/\1/p")
      tg=$(echo "$out" | sed -n "s/^tg$gen: \([0-9.]*\) .* tokens\/s$/\1/p")
      tg_frac=$(echo "$out" | sed -n "s/^tg$gen: .* = \([0-9.]*\) of the memory read bandwidth.*/\1/p")
      echo "| $type | $kernels | $t | $pp | $pp_frac | $tg | $tg_frac |"
    done
  done
done
