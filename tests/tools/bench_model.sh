#!/usr/bin/env bash
# `weft bench model` end to end on a tiny model: the JSON report has every
# field, the counts follow the model's shape (the prompt's flops exactly),
# and the figures are sane (positive, fractions in range). Not the speed:
# that is what the tool is for (docs/performance.md).
# Usage: bench_model.sh WEFT_BINARY WRITE_TEST_MODEL_BINARY PYTHON3
set -euo pipefail
weft=$1
writer=$2
python=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
die() { echo "FAIL: $*"; exit 1; }

# 3 layers of width 64 (4 heads of 16, 2 KV heads), feed-forward 128, a
# separate output matrix over 600 tokens.
"$writer" "$dir/model.gguf" --layers 3 --embd 64 --heads 4 --heads-kv 2 --ff 128 --vocab 600 --ctx 512 --untied
"$weft" bench model -m "$dir/model.gguf" -p 16 -n 4 -d 6 -r 2 -t 1 --parallel 3 --json >"$dir/out.json" 2>"$dir/err.txt" ||
  { cat "$dir/err.txt"; die "weft bench model"; }
cat "$dir/out.json"

"$python" - "$dir/out.json" "$(stat -c %s "$dir/model.gguf")" <<'PY'
import json, sys

r = json.load(open(sys.argv[1]))
file_bytes = int(sys.argv[2])
fail = []
def check(ok, what):
    if not ok:
        fail.append(what)
def spread(obj, key):
    s = obj[key]
    check(isinstance(s["mean"], (int, float)) and isinstance(s["stddev"], (int, float)), key + " is not numbers")
    check(s["stddev"] >= 0, key + ".stddev < 0")
    return s["mean"]

check(r["threads"] == 1 and r["reps"] == 2 and r["devices"] == 1, "threads, reps or devices")
check(r["n_layer"] == 3 and r["host_layers"] == 3, "layers")
check(r["cpu_kernels"].startswith(("avx2", "avx512")), "cpu_kernels " + r["cpu_kernels"])
lim = r["limits"]
check(lim["memory_read_gb_per_s"] > 0, "memory bandwidth")
check(lim["fma_isa"] in ("avx2", "avx512"), "fma_isa")
check(lim["fma_peak_gflop_per_s"] > 0 and lim["fma_avx2_gflop_per_s"] > 0, "FMA peak")
check(lim["fma_peak_gflop_per_s"] >= max(lim["fma_avx2_gflop_per_s"], lim["fma_avx512_gflop_per_s"]), "peak < an ISA's")

pp = r["pp"]
check(pp["tokens"] == 16, "pp tokens")
check(spread(pp, "tokens_per_s") > 0, "pp tokens/s")
check(spread(pp, "gflop_per_s") > 0, "pp GFLOP/s")
check(spread(pp, "host_ms_per_prompt") >= 0, "pp host time")
# 2 flops per weight per token: per layer q 64x64, k and v 64x32, o 64x64,
# gate, up and down 64x128; the output 64x600 for the last token only.
# Attention: 4 * 64 per (token, visible position) pair, 16 * 17 / 2 pairs,
# in each of 3 layers.
layer_params = 3 * (64 * 64 * 2 + 64 * 32 * 2 + 64 * 128 * 3)
want = (2 * (layer_params * 16 + 64 * 600) + 4 * 64 * (16 * 17 // 2) * 3) * 1e-9
check(abs(pp["gflop_per_prompt"] - want) <= 1e-5 * want, "pp GFLOP per prompt %g, want %g" % (pp["gflop_per_prompt"], want))
check(0 < pp["fraction_of_fma_peak"] <= 1.5, "pp fraction of the FMA peak %g" % pp["fraction_of_fma_peak"])

tg = r["tg"]
check(tg["tokens"] == 4 and tg["depth"] == 6, "tg tokens and depth")
check(spread(tg, "tokens_per_s") > 0, "tg tokens/s")
check(spread(tg, "gb_per_s") > 0, "tg GB/s")
# Every weight once (the file holds them and the vocabulary), a few KV rows.
check(0.5 * (layer_params + 64 * 600) * 1e-6 < tg["mb_per_token"] < file_bytes * 1e-6, "tg MB per token %g" % tg["mb_per_token"])
# Above 1 only from cache: a tiny model fits in it.
check(0 < tg["fraction_of_memory_bandwidth"] < 20, "tg fraction %g" % tg["fraction_of_memory_bandwidth"])
wall = spread(tg, "ms_per_token")
kernel = spread(tg, "kernel_ms_per_token")
host = spread(tg, "host_us_per_token")
check(0 < kernel <= wall, "kernel time %g of wall %g ms" % (kernel, wall))
check(0 <= host <= wall * 1e3, "host time %g us of wall %g ms" % (host, wall))
check(abs(host * 1e-3 - (wall - kernel)) <= 1e-3 * wall + 1e-6, "host != wall - kernel")
check(tg["parallel"] == 3 and spread(tg, "parallel_tokens_per_s") > 0, "tg over 3 sequences")
if fail:
    print("FAIL: " + "; ".join(fail))
    sys.exit(1)
print("fields and figures sane")
PY

# Nothing to measure, or a bad count: refused before anything is measured.
for bad in "-p 0 -n 0" "-r 0" "-p -1" "-d -1"; do
  status=0
  # shellcheck disable=SC2086
  "$weft" bench model -m "$dir/model.gguf" $bad >/dev/null 2>"$dir/bad.txt" || status=$?
  [[ $status -ne 0 ]] || die "weft bench model $bad succeeded"
  grep -q "measuring" "$dir/bad.txt" && die "weft bench model $bad measured before refusing"
done
echo "PASS"
