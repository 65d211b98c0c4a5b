#!/usr/bin/env bash
# On an sm_90a GPU: checks the wgmma kernels' pipeline variants that only a
# tuning selects (the forward's deeper K/V pipelines, stages=3 and 4; a
# producer warpgroup that copies while the others compute, producer=warp, in
# the forward and both backward kernels, with cp.async (its four warps; on
# 8-byte aligned rows too) or TMA: copy=tma, swizzle=32) with their forced
# GPU tests, then times each against the table's shape at a few head
# dimensions.
# Uses build-gpu/ (scripts/gpu_check.sh builds it); docs/decisions.md and
# docs/experiments.md keep what the rows showed.
#
#   bash bench/lab/probe_pipeline.sh [--no-tests]    (--no-tests: timings only)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=build-gpu/flashgen
[ -x "$bin" ] || { echo "probe_pipeline.sh: build-gpu/flashgen is missing (scripts/gpu_check.sh builds it)" >&2; exit 2; }

[ "${1:-}" = "--no-tests" ] ||
  bash bench/lab/forced_tests.sh "WgmmaStages|Producer|Tma" probe_pipeline.sh || exit 1

run() {  # run KIND DIMS TUNING VARIANT...: one bench row per variant
  local kind=$1 dims=$2 tuning=$3
  shift 3
  local bench_kind=backward
  [ "$kind" = forward ] && bench_kind=forward
  for variant in "$@"; do
    echo "== D=$dims $kind $tuning $variant"
    FLASHGEN_TUNING="$kind: $tuning cache=none mma=wgmma $variant" timeout 60 "$bin" bench \
      --backend cuda --dims "$dims" --kinds "$bench_kind" --repeats 10 --warmup 3 2>&1 |
      grep -E "^ +[0-9]+ |refused|rror"
  done
}
P="producer=warp"
T="producer=warp copy=tma swizzle=32"
run forward 64 "rows=192 cols=128 head=0 warps=12" "" "$T"
run forward 64 "rows=128 cols=128 head=0 warps=8" "$T"
run forward 128 "rows=192 cols=64 head=0 warps=12" "" "$P" "$T" "$T stages=4"
run forward 128 "rows=128 cols=128 head=0 warps=8" "$T"
# Rows 8-byte aligned (no TMA): all warps copying, or the producer's four.
run forward 68 "rows=192 cols=64 head=0 warps=12" "" "$P" "$P stages=4"
run forward 76 "rows=192 cols=64 head=0 warps=12" "" "$P" "$P stages=4"
run backward_query 76 "rows=192 cols=64 head=0 warps=12" "" "$P"
run backward_key_value 76 "rows=128 cols=64 head=0 warps=8" "" "$P"
run forward 128 "rows=128 cols=64 head=0 warps=8" "$T"
run forward 256 "rows=128 cols=32 head=0 warps=8" "" "$T"
run forward 384 "rows=128 cols=32 head=256 warps=8" "" "$T"
run forward 512 "rows=128 cols=32 head=256 warps=8" ""
run backward_query 64 "rows=192 cols=64 head=0 warps=12" "" "$T"
run backward_query 128 "rows=128 cols=64 head=0 warps=8" "" "$P" "$T"
run backward_key_value 64 "rows=128 cols=64 head=0 warps=8" "" "$T"
run backward_key_value 128 "rows=128 cols=64 head=0 warps=8" "" "$P" "$T"
run backward_key_value 128 "rows=128 cols=32 head=0 warps=8" "" "$T"
run backward_key_value 128 "rows=128 cols=48 head=0 warps=8" "$T"
