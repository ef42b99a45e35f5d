#!/bin/bash
# Speed of one greedy /v1/completions request with and without a draft
# (docs/speculative.md, "Measured"): for each draft ("none" for none) starts
# `weft serve`, sends the request twice (the second one is reported: the
# first warms the caches; the prompt is the same, so the second reuses its
# slot's prompt), prints tokens/s from the response's timings, the draft's
# kept/judged counts, and whether the text equals the run without a draft.
#
#   scripts/serve_speculative_bench.sh WEFT TARGET.gguf [THREADS] [N] DRAFT...
#   scripts/serve_speculative_bench.sh build/release/tools/weft/weft target.gguf 2 64 none small.gguf target.gguf
#
# Needs curl and python3. Extra `weft serve` flags (workers, --split) go in
# WEFT_SERVE_ARGS; --draft-max is DRAFT_MAX (default 4).
set -euo pipefail

weft=$1 target=$2 threads=${3:-2} n=${4:-64}
shift 4
prompt="The quick brown fox jumps over the lazy dog. Once upon a time"  # weft::model::kDemoPrompt
work=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

body=$(python3 -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": int(sys.argv[2]),
  "temperature": 0, "ignore_eos": True}))' "$prompt" "$n")
reference=
for draft in "$@"; do
  flags=()
  [ "$draft" != none ] && flags=(--model-draft "$draft" --draft-max "${DRAFT_MAX:-4}")
  rm -f "$work/port"
  # shellcheck disable=SC2086
  "$weft" serve -m "$target" -t "$threads" -c 2048 --port 0 --port-file "$work/port" -q \
    ${WEFT_SERVE_ARGS:-} "${flags[@]}" 2> "$work/serve.log" &
  server=$!
  for _ in $(seq 600); do [ -s "$work/port" ] && break; sleep 0.1; done
  port=$(cat "$work/port")
  until curl -sf "http://127.0.0.1:$port/health" > /dev/null; do
    kill -0 "$server" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
    sleep 0.2
  done
  for _ in 1 2; do
    curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' -d "$body" > "$work/out.json"
  done
  line=$(python3 - "$work/out.json" "$draft" "$reference" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
t, text = r["timings"], r["choices"][0]["text"]
kept = f'{t["draft_n_accepted"]} of {t["draft_n"]}' if "draft_n" in t else "-"
same = "-" if not sys.argv[3] else ("same text" if text == open(sys.argv[3]).read() else "OTHER TEXT")
print(f'{sys.argv[2]:>16}  {t["predicted_per_second"]:7.1f} tokens/s  kept {kept:>10}  {same}')
if not sys.argv[3]:
    open(sys.argv[1] + ".text", "w").write(text)
EOF
)
  echo "$line"
  [ -z "$reference" ] && cp "$work/out.json.text" "$work/reference.text" && reference=$work/reference.text
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=
done
