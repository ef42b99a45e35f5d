#!/usr/bin/env bash
# `weft` on a split model end to end: `weft quantize --split-max-size` and
# `--split-max-tensors` write parts named as llama-gguf-split names them;
# `weft run` and `weft perplexity` from the first part give what the single
# file gives; `weft gguf info` lists the parts; a non-first part or a missing
# part is refused with an error naming the file, not a crash.
# Usage: split_run.sh WEFT_BINARY WRITE_TEST_MODEL_BINARY
set -euo pipefail
weft=$1
writer=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
die() { echo "FAIL: $*"; exit 1; }

"$writer" "$dir/model.gguf" --layers 3 --embd 64 --heads 4 --heads-kv 2 --ff 128 --vocab 600 --ctx 512
q=(Q8_0 --allow-requantize -t 1)
"$weft" quantize "$dir/model.gguf" "$dir/one.gguf" "${q[@]}" >/dev/null
"$weft" quantize "$dir/model.gguf" "$dir/bysize.gguf" "${q[@]}" --split-max-size 40K >"$dir/q.out"
"$weft" quantize "$dir/model.gguf" "$dir/bycount.gguf" "${q[@]}" --split-max-tensors 7 >/dev/null
cat "$dir/q.out"
[[ ! -e $dir/bysize.gguf ]] || die "an unsplit bysize.gguf was written"

for set in bysize bycount; do
  parts=("$dir/$set"-*-of-*.gguf)
  n=${#parts[@]}
  ((n >= 2)) || die "$set: $n parts"
  for ((i = 1; i <= n; i++)); do
    name=$(printf '%s-%05d-of-%05d.gguf' "$set" "$i" "$n")
    [[ -e $dir/$name ]] || die "$set: no part $name"
  done
  echo "$set: $n parts"
done
bysize=("$dir"/bysize-*.gguf)
first=$(printf '%s/bysize-00001-of-%05d.gguf' "$dir" "${#bysize[@]}")
grep -q "and $((${#bysize[@]} - 1)) more parts" "$dir/q.out" || die "quantize's summary lacks the parts"

"$weft" gguf info "$first" >"$dir/info.txt"
grep -q "^parts (a split model" "$dir/info.txt" || die "gguf info lists no parts"
for p in "$dir"/bysize-*.gguf; do grep -q "  $p: " "$dir/info.txt" || die "gguf info lacks $p"; done

prompt="The quick brown fox jumps over the lazy dog"
one_text=$("$weft" run -m "$dir/one.gguf" -p "$prompt" -n 16 -t 1 2>/dev/null)
for set in bysize bycount; do
  f=("$dir/$set"-00001-of-*.gguf)
  text=$("$weft" run -m "${f[0]}" -p "$prompt" -n 16 -t 1 2>"$dir/run.err") || { cat "$dir/run.err"; die "run $set"; }
  [[ -n $text && $text == "$one_text" ]] || die "$set: '$text' differs from the single file's '$one_text'"
done
echo "run: identical: $(printf '%s' "$one_text" | cat -v)"

printf '%s\n' "$prompt. The five boxing wizards jump quickly. Pack my box with five dozen liquor jugs." >"$dir/text.txt"
ppl() { "$weft" perplexity -m "$1" -f "$dir/text.txt" -c 16 -t 1 2>/dev/null | grep -i "perplexity"; }
[[ $(ppl "$dir/one.gguf") == "$(ppl "$first")" ]] || die "perplexity differs: $(ppl "$dir/one.gguf") / $(ppl "$first")"
echo "perplexity: identical: $(ppl "$first")"

# Refusals: an error naming the file, exit status 1.
refused() {  # refused NEEDLE weft-args...
  local needle=$1 rc=0
  shift
  "$weft" "$@" >/dev/null 2>"$dir/err" || rc=$?
  ((rc == 1)) || { cat "$dir/err"; die "'$*' exited $rc, expected 1"; }
  grep -qF -- "$needle" "$dir/err" || { cat "$dir/err"; die "'$*' did not say '$needle'"; }
}
second=${first/-00001-of-/-00002-of-}
refused "open $first instead" run -m "$second" -p hi -n 1
refused "is not a positive size" quantize "$dir/model.gguf" "$dir/x.gguf" "${q[@]}" --split-max-size 12X
mv "$second" "$dir/aside.gguf"
refused "$second: part 2 of" run -m "$first" -p hi -n 1
refused "is missing" gguf info "$first"
echo "refusals: ok"
