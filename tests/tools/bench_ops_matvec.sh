#!/usr/bin/env bash
# `weft bench ops --filter "matvec q4_K"`: the decode product from memory
# and again from L2 each print a row of positive figures, the L2 row over
# weights no larger than the level-2 cache it names. Not the speed.
# Usage: bench_ops_matvec.sh WEFT_BINARY
set -euo pipefail
weft=$1
out=$("$weft" bench ops -t 1 --filter "matvec q4_K" --min-time 0.01 2>&1) || { echo "$out"; echo "FAIL: weft bench ops"; exit 1; }
echo "$out"
die() { echo "FAIL: $*"; exit 1; }
l2_kib=$(echo "$out" | sed -n 's/.*weights in L2 (\([0-9]*\) KiB per core).*/\1/p')
[ -n "$l2_kib" ] && [ "$l2_kib" -gt 0 ] || die "no L2 size in the header"
mem=$(echo "$out" | grep -E '^matvec q4_K \[4096,[0-9]+\] [0-9]+ MiB ' || true)
l2=$(echo "$out" | grep -E '^matvec q4_K in L2 \[4096,[0-9]+\] [0-9]+ KiB ' || true)
[ -n "$mem" ] || die "no row from memory"
[ -n "$l2" ] || die "no row from L2"
# Columns after the name: time, "us", GFLOP/s, GB/s, fraction of the read bandwidth.
for row in "$mem" "$l2"; do
  echo "$row" | awk '{ n = NF; if (!($(n-4) > 0 && $(n-2) > 0 && $(n-1) > 0 && $n > 0)) exit 1 }' ||
    die "a figure is not positive: $row"
done
kib=$(echo "$l2" | sed -n 's/.*\] \([0-9]*\) KiB.*/\1/p')
# One thread: half of L2 (at least 8 rows, 18 KiB for q4_K).
[ "$kib" -le "$l2_kib" ] || die "L2 row over $kib KiB, more than the $l2_kib KiB cache"
echo "PASS"
