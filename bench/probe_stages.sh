#!/usr/bin/env bash
# On an sm_90a GPU: checks the wgmma forward with deeper K/V pipelines
# (tuning stages=3, 4; forced GPU tests), then times each against two stages
# at the shapes the tuning table picks. Uses build-gpu/ (scripts/gpu_check.sh
# builds it); bench/NOTES.md keeps what the rows showed.
#
#   bash bench/probe_stages.sh
set -uo pipefail
cd "$(dirname "$0")/.."
bin=build-gpu/flashgen
[ -x "$bin" ] || { echo "probe_stages.sh: build-gpu/flashgen is missing (scripts/gpu_check.sh builds it)" >&2; exit 2; }

echo "== forced GPU tests"
(cd build-gpu && ctest -L gpu -R "WgmmaStages" --timeout 300 2>&1 | tail -n 4)

run() {  # run DIMS TUNING
  for stages in 2 3 4; do
    echo "== D=$1 $2 stages=$stages"
    FLASHGEN_TUNING="forward: $2 cache=none mma=wgmma stages=$stages" "$bin" bench --backend cuda \
      --dims "$1" --kinds forward --repeats 10 --warmup 3 2>&1 | grep -E "^ +[0-9]+ |refused|rror"
  done
}
run 64 "rows=192 cols=128 head=0 warps=12"
run 96 "rows=192 cols=64 head=0 warps=12"
run 128 "rows=192 cols=64 head=0 warps=12"
run 128 "rows=128 cols=128 head=0 warps=8"
run 192 "rows=192 cols=48 head=0 warps=12"
run 256 "rows=128 cols=32 head=0 warps=8"
run 384 "rows=128 cols=32 head=256 warps=8"
