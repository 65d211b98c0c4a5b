#!/usr/bin/env bash
# On a GPU machine: tunes the sequence buckets below the shipped 4097-8192
# rows for the common head dimensions, into a table of their rows (give it
# to `flashgen tune --merge`, or merge it into data/tuning/sm90.json).
# Each bucket is timed at its top length with 16k tokens per call (B = 16384 / N, H = 16),
# causal and not, forward and both backward kernels; f16 rows are copied from bf16.
#
#   bash bench/tune_short_buckets.sh OUT.json [DIMS (default 64,128,256)]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash bench/tune_short_buckets.sh OUT.json [DIMS]}
dims=${2:-64,128,256}
flashgen=${FLASHGEN_CLI:-build-gpu/flashgen}
for bucket in 3073,4096 1537,3072 769,1536 385,768 1,384; do
  seq=${bucket#*,}
  [ "$seq" = 384 ] && seq=256  # short sequences: a power of two, as vision models pad to
  "$flashgen" tune --dims "$dims" --causal both --seq "$seq" --batch $(( 16384 / seq )) --heads 16 \
    --seq-bucket "$bucket" --kinds forward,backward --top 10 --list-timed \
    --out "$out" --resume
done
