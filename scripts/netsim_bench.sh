#!/usr/bin/env bash
# Decode (tg) and prompt (pp) speed of a model split over this host and two
# `weft worker` processes, against the speed of the links between them
# (docs/performance.md, "Over slower links (simulated)").
#
# Rows: the workers on loopback (no namespace, no limit); then the workers in
# network namespaces behind veth pairs (scripts/netsim.sh) with no limit and
# at each RATE (RATE:BURST: with that tbf burst in bytes instead of netsim.sh's,
# e.g. 10mbit:4096, so that a small message waits size / rate as on a real
# link). Each row is one `weft bench model --split 0,1,1` (all layers on the
# workers, this host the embedding and the output); the whole set of rows is
# run ROUNDS times, interleaved, and each speed is given as the median
# (lowest-highest) of the rounds.
#
# Bytes per token per hop, in each namespace row: the bytes the two veth pairs
# carried (the host ends' tx_bytes + rx_bytes: Ethernet frames, so TCP/IP
# headers and retransmissions count), by `weft run` differences that cancel
# loading and setup:
#   prompt: (run with a ~500-token prompt, -n 1) - (run with a 1-token prompt,
#           -n 1), divided by the difference in prompt tokens;
#   decode: (1-token prompt, -n 1+G) - (1-token prompt, -n 1), divided by the
#           G extra tokens;
# then divided by the link crossings of one token: decode 4, host -> worker
# 1, worker 1 -> this namespace -> worker 2 (a peer link is forwarded here,
# so it crosses both pairs: two crossings for one hop), worker 2 -> host;
# prompt 3, the same less the last (only the last position's row comes back).
# When each hop carries the same bytes this is the bytes of one hop; n_embd *
# 4 (f32 activations) is the payload.
#
# Usage: netsim_bench.sh [--weft BIN] [--writer BIN] [--model FILE]
#                        [--rates "RATE[:BURST] ..."] [--rounds N] [--reps N]
#                        [-p N] [-n N] [--keep DIR]
#        netsim_bench.sh --report DIR [--rates ...] [-p N]   (the tables again, from --keep's DIR)
# Defaults: the release tree's binaries; the model in ~/.cache/weft (written
# on first use); --rates "1gbit 100mbit 10mbit 100mbit:4096 10mbit:4096"
# --rounds 5 --reps 2 -p 512 -n 64. --keep DIR keeps each bench's JSON and
# the byte counts. About 23 minutes on a 2-core VM.
# Needs root (network namespaces, tc). Uses namespaces weft-ns1, weft-ns2
# (NETSIM_PREFIX, NETSIM_NET as netsim.sh) and removes them at the end.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../tests/lib/worker.sh
source "$here/../tests/lib/worker.sh"
netsim=$here/netsim.sh
weft=$here/../build/release/tools/weft/weft
writer=$here/../build/release/tests/weft_write_test_model
model=${XDG_CACHE_HOME:-$HOME/.cache}/weft/netsim-bench-8x2048.gguf
rates="1gbit 100mbit 10mbit 100mbit:4096 10mbit:4096"
rounds=5
reps=2
n_prompt=512
n_gen=64
keep=
report_dir=

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
  exit "${1:-2}"
}
die() {
  echo "netsim_bench: $*" >&2
  exit 1
}

while (($# > 0)); do
  case $1 in
    --weft) weft=$2; shift 2 ;;
    --writer) writer=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --report) report_dir=$2; shift 2 ;;
    -h | --help) usage 0 ;;
    *) usage ;;
  esac
done
python=$(command -v python3) || die "needs python3 (to read the JSON reports)"

# The tables, from DIR's bench-ROW-ROUND.json, traffic.tsv and loads.tsv.
report() {
  "$python" - "$1" "$n_prompt" "loopback none $rates" <<'PY'
import json, os, re, sys

d, n_prompt, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def rate_bits(r):
    m = re.fullmatch(r"(\d+)(bit|kbit|mbit|gbit)(:\d+)?", r)
    return int(m.group(1)) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[m.group(2)] if m else None
bench = {}  # row -> round -> report
for f in os.listdir(d):
    m = re.fullmatch(r"bench-(.+)-(\d+)\.json", f)
    if m:
        bench.setdefault(m.group(1), {})[int(m.group(2))] = json.load(open(os.path.join(d, f)))
runs = {}
for line in open(os.path.join(d, "traffic.tsv")):
    row, name, pt, gt, *c = line.split("\t")
    runs[(row, name)] = (int(pt), int(gt), [int(x) for x in c])
def per_token(row, name):
    pt0, gt0, c0 = runs[(row, "base")]
    pt, gt, c = runs[(row, name)]
    n = pt - pt0 if name == "prompt" else gt - gt0
    return [(b - a) / n for a, b in zip(c0, c)], n
def span(xs, fmt="%.1f"):
    xs = sorted(xs)
    lo, hi, mid = xs[0], xs[-1], xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2
    return fmt % mid if fmt % lo == fmt % hi else "%s (%s-%s)" % (fmt % mid, fmt % lo, fmt % hi)
def label(r):
    if ":" in r:
        return "%s, burst %s B" % tuple(r.split(":"))
    return {"loopback": "loopback (no namespace, no limit)", "none": "veth, no limit"}.get(r, r)

rounds = sorted(bench["loopback"])
tg = {r: [bench[r][k]["tg"]["tokens_per_s"]["mean"] for k in rounds] for r in rows}
pp = {r: [bench[r][k]["pp"]["tokens_per_s"]["mean"] for k in rounds] for r in rows}
local_tg = [1e3 / bench[r][k]["tg"]["local_ms_per_token"] for r in rows for k in rounds]
# Each round's speed over the loopback row's in the same round (minutes apart).
ratio = lambda xs, base: [x / b for x, b in zip(xs, base)]
print("| link | decode tokens/s | prompt tokens/s (pp%d) | bytes/token/hop decode | bytes/token/hop prompt | decode vs loopback | prompt vs loopback |" % n_prompt)
print("|---|---|---|---|---|---|---|")
for r in rows:
    if r == "loopback":
        bd = bp = "(as veth)"
    else:
        bd = "%.0f" % (sum(per_token(r, "decode")[0]) / 4)
        bp = "%.0f" % (sum(per_token(r, "prompt")[0]) / 3)
    print("| %s | %s | %s | %s | %s | %s | %s |" % (label(r), span(tg[r]), span(pp[r]), bd, bp,
          span(ratio(tg[r], tg["loopback"]), "%.2f"), span(ratio(pp[r], pp["loopback"]), "%.2f")))
print()
print("this host alone (-t 1, every layer; the generation test of each bench above): %s decode tokens/s" % span(local_tg))
print()
print("Bytes per token on each limiter (host ends' counters; tx1 = host -> worker 1, rx1 = worker 1 -> host and")
print("worker 2, tx2 = host and worker 1 -> worker 2, rx2 = worker 2 -> host), and the prompt's transfer bound:")
print("the busiest limiter's bytes for a %d-token prompt at the rate, against the measured prompt time." % n_prompt)
print()
print("| link | phase | tokens | tx1 | rx1 | tx2 | rx2 | busiest, per pp%d | bound s | measured s |" % n_prompt)
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows[1:]:
    for name in ("prompt", "decode"):
        c, n = per_token(r, name)
        line = "| %s | %s | %d | %s |" % (label(r), name, n, " | ".join("%.0f" % x for x in c))
        if name == "prompt":
            busiest = max(c) * n_prompt
            bits = rate_bits(r)
            bound = "%.2f" % (busiest * 8 / bits) if bits else "-"
            line += " %.2f MiB | %s | %s |" % (busiest / 2**20, bound, span([n_prompt / x for x in pp[r]], "%.2f"))
        else:
            line += " | | |"
        print(line)
print()
print("load average (1 min) after each bench: " + ", ".join(
    "%s %s" % (l.split("\t")[0], l.split("\t")[2].strip()) for l in open(os.path.join(d, "loads.tsv"))))
PY
}

if [[ -n $report_dir ]]; then
  report "$report_dir"
  exit 0
fi
((EUID == 0)) || die "needs root (network namespaces, tc)"
[[ -x $weft ]] || die "no weft binary at $weft (--weft)"

dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  "$netsim" down || true
  if [[ -n $keep ]]; then
    mkdir -p "$keep"
    cp "$dir"/*.json "$dir"/*.tsv "$dir"/*.err "$keep"/ 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # through cleanup

if [[ ! -f $model ]]; then
  [[ -x $writer ]] || die "no model at $model and no writer at $writer (--writer)"
  mkdir -p "$(dirname "$model")"
  # 8 layers of n_embd 2048 (16 heads, 8 KV heads), n_ff 5632, vocab 32000:
  # 443 M parameters, 450 MiB in q8_0; 8 KiB of f32 activations per token.
  "$writer" "$model.tmp" --layers 8 --embd 2048 --heads 16 --heads-kv 8 --ff 5632 --vocab 32000 --ctx 1024
  mv "$model.tmp" "$model"
fi

printf 'netsim-bench-token\n' >"$dir/token"
chmod 600 "$dir/token"
mkdir "$dir/cache1" "$dir/cache2"

# Worker I (1 or 2) listening on ADDR, in namespace I when NS is 1; sets $endpoint.
# Its tensor cache is shared by the loopback and namespace workers of the same
# index, so only the first load uploads the weights.
start_worker() {
  local i=$1 addr=$2 ns=$3 log=$dir/worker-$1-$2.log
  local cmd=("$weft" worker --host "$addr" --port 0 --threads 1 --auth-token-file "$dir/token"
    --cache-dir "$dir/cache$i")
  ((ns == 0)) || cmd=("$netsim" exec "$i" "${cmd[@]}")
  # One core per worker where there are two; this host's process is not
  # pinned. Every wrapper execs the next, so $! is the worker's pid.
  (($(nproc) < i)) || cmd=(taskset -c $((i - 1)) "${cmd[@]}")
  : >"$log"
  "${cmd[@]}" >"$log" 2>&1 &
  pids+=($!)
  await_weft_worker "$log" "$addr" || die "worker $i on $addr did not start"
}

load() { cut -d' ' -f1 /proc/loadavg; }

# bench ROW ROUND ENDPOINT1 ENDPOINT2: one `weft bench model`, its JSON kept.
bench() {
  local out=$dir/bench-$1-$2
  echo "[$1, round $2] weft bench model -p $n_prompt -n $n_gen -r $reps (load $(load))" >&2
  "$weft" bench model -m "$model" -t 1 -p "$n_prompt" -n "$n_gen" -r "$reps" --worker "$3" --worker "$4" \
    --split 0,1,1 --auth-token-file "$dir/token" --json >"$out.json" 2>"$out.err" ||
    { cat "$out.err"; die "weft bench model ($1)"; }
  printf '%s\t%s\t%s\n' "$1" "$2" "$(load)" >>"$dir/loads.tsv"
}

# The host ends' byte counters, both pairs: "tx1 rx1 tx2 rx2".
counters() {
  local i f out=""
  for i in 1 2; do
    for f in tx_bytes rx_bytes; do
      out+="$(cat "/sys/class/net/${NETSIM_PREFIX:-weft-ns}${i}h/statistics/$f") "
    done
  done
  echo "$out"
}

# traffic ROW ENDPOINT1 ENDPOINT2 NAME PROMPT TOKENS: one `weft run`; appends
# NAME, the prompt and generated token counts and the four counters' growth
# to traffic.tsv.
traffic() {
  local before after err=$dir/run-$1-$4.err
  before=$(counters)
  "$weft" run -m "$model" -t 1 -p "$5" -n "$6" --worker "$2" --worker "$3" --split 0,1,1 \
    --auth-token-file "$dir/token" --stats >/dev/null 2>"$err" || { cat "$err"; die "weft run ($1, $4)"; }
  after=$(counters)
  local pt gt
  pt=$(sed -n 's/^prompt: \([0-9]*\) tokens.*/\1/p' "$err")
  gt=$(sed -n 's/^generation: \([0-9]*\) tokens.*/\1/p' "$err")
  printf '%s\t%s\t%s\t%s' "$1" "$4" "$pt" "$gt" >>"$dir/traffic.tsv"
  local b a k
  read -ra b <<<"$before"
  read -ra a <<<"$after"
  for k in 0 1 2 3; do printf '\t%s' $((a[k] - b[k])) >>"$dir/traffic.tsv"; done
  printf '\n' >>"$dir/traffic.tsv"
}

long_prompt=$(for _ in $(seq 50); do printf 'The quick brown fox jumps over the lazy dog. '; done)

start_worker 1 127.0.0.1 0; lo1=$endpoint
start_worker 2 127.0.0.1 0; lo2=$endpoint
"$netsim" up 2 none
net=${NETSIM_NET:-77}
start_worker 1 "10.$net.1.2" 1; ns1=$endpoint
start_worker 2 "10.$net.2.2" 1; ns2=$endpoint

# The first load uploads the weights into both caches (over loopback).
"$weft" run -m "$model" -t 1 -p "Hello" -n 1 --worker "$lo1" --worker "$lo2" --split 0,1,1 \
  --auth-token-file "$dir/token" >/dev/null 2>"$dir/prime.err" || { cat "$dir/prime.err"; die "priming the caches"; }

for ((round = 1; round <= rounds; round++)); do
  bench loopback "$round" "$lo1" "$lo2"
  for rate in none $rates; do
    if [[ $rate == *:* ]]; then
      NETSIM_BURST=${rate#*:} "$netsim" rate "${rate%%:*}" >&2
    else
      NETSIM_BURST='' "$netsim" rate "$rate" >&2
    fi
    bench "$rate" "$round" "$ns1" "$ns2"
    if ((round == 1)); then
      traffic "$rate" "$ns1" "$ns2" base "Hello" 1
      traffic "$rate" "$ns1" "$ns2" prompt "$long_prompt" 1
      traffic "$rate" "$ns1" "$ns2" decode "Hello" $((n_gen + 1))
    fi
  done
done

report "$dir"
