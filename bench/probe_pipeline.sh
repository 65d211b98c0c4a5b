#!/usr/bin/env bash
# On an sm_90a GPU: checks the wgmma kernels' pipeline variants that only a
# tuning selects (the forward's deeper K/V pipelines, stages=3 and 4; a
# producer warpgroup that copies while the others compute, producer=warp, in
# the forward and both backward kernels) with their forced GPU tests, then
# times each against the table's shape at a few head dimensions.
# Uses build-gpu/ (scripts/gpu_check.sh builds it); bench/NOTES.md keeps
# what the rows showed.
#
#   bash bench/probe_pipeline.sh
set -uo pipefail
cd "$(dirname "$0")/.."
bin=build-gpu/flashgen
[ -x "$bin" ] || { echo "probe_pipeline.sh: build-gpu/flashgen is missing (scripts/gpu_check.sh builds it)" >&2; exit 2; }

echo "== forced GPU tests"
(cd build-gpu && ctest -L gpu -R "WgmmaStages|Producer" --timeout 300 2>&1 | tail -n 4)

run() {  # run DIMS TUNING VARIANT...
  local dims=$1 tuning=$2
  shift 2
  for variant in "$@"; do
    echo "== D=$dims $tuning $variant"
    FLASHGEN_TUNING="forward: $tuning cache=none mma=wgmma $variant" "$bin" bench --backend cuda \
      --dims "$dims" --kinds forward --repeats 10 --warmup 3 2>&1 | grep -E "^ +[0-9]+ |refused|rror"
  done
}
producer="producer=warp"
run 64 "rows=192 cols=128 head=0 warps=12" "" "$producer" "$producer stages=4"
run 64 "rows=192 cols=96 head=0 warps=12" "" "$producer"
run 96 "rows=192 cols=64 head=0 warps=12" "" "$producer"
run 128 "rows=192 cols=64 head=0 warps=12" "" "stages=3" "$producer" "$producer stages=4"
run 128 "rows=128 cols=128 head=0 warps=8" "" "$producer"
run 192 "rows=192 cols=48 head=0 warps=12" "" "$producer"
run 256 "rows=128 cols=32 head=0 warps=8" "" "$producer"
run 384 "rows=128 cols=32 head=256 warps=8" "" "$producer"

run_backward() {  # run_backward KIND DIMS TUNING VARIANT...
  local kind=$1 dims=$2 tuning=$3
  shift 3
  for variant in "$@"; do
    echo "== D=$dims $kind $tuning $variant"
    FLASHGEN_TUNING="$kind: $tuning cache=none mma=wgmma $variant" "$bin" bench \
      --backend cuda --dims "$dims" --kinds backward --repeats 10 --warmup 3 2>&1 |
      grep -E "^ +[0-9]+ |refused|rror"
  done
}
run_backward backward_query 64 "rows=192 cols=80 head=0 warps=12" "" "$producer"
run_backward backward_query 96 "rows=192 cols=64 head=0 warps=12" "" "$producer"
run_backward backward_query 128 "rows=192 cols=48 head=0 warps=12" "" "$producer"
run_backward backward_query 128 "rows=128 cols=64 head=0 warps=8" "" "$producer"
run_backward backward_key_value 64 "rows=128 cols=96 head=0 warps=8" "" "$producer"
run_backward backward_key_value 64 "rows=128 cols=64 head=0 warps=8" "" "$producer"
run_backward backward_key_value 96 "rows=128 cols=64 head=0 warps=8" "" "$producer"
run_backward backward_key_value 128 "rows=128 cols=64 head=0 warps=8" ""
run_backward backward_key_value 128 "rows=128 cols=48 head=0 warps=8" "" "$producer"
run_backward backward_key_value 128 "rows=128 cols=32 head=0 warps=8" "" "$producer"
