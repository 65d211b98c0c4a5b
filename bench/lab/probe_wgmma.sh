#!/usr/bin/env bash
# On an sm_90a GPU: checks the wgmma kernels at fixed shapes (forced GPU
# tests), then times each against the mma.sync kernels on the shapes it is
# meant for (the run that made them defaults on 2026-12-03; with the table in
# force, "default" rows now show the table's choice). Run after `FLASHGEN_BUILD_ALL=1 bash scripts/gpu_check.sh`
# (it uses build-gpu/). Prints fixed-column bench rows; docs/decisions.md
# keeps what they showed.
#
#   bash bench/lab/probe_wgmma.sh [--no-tests]    (--no-tests: timings only)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=build-gpu/flashgen
[ -x "$bin" ] || { echo "probe_wgmma.sh: build-gpu/flashgen is missing (scripts/gpu_check.sh builds it)" >&2; exit 2; }

if [ "${1:-}" != "--no-tests" ]; then
  echo "== forced GPU tests"
  (cd build-gpu && ctest -L gpu -R "Wgmma" -E "Producer" --timeout 120 2>&1 | tail -n 8)
fi

run() {  # run DIMS KINDS LABEL [FLASHGEN_TUNING]
  echo "== $3${4:+: FLASHGEN_TUNING='$4'}"
  FLASHGEN_TUNING="${4:-}" timeout 60 "$bin" bench --backend cuda --dims "$1" --kinds "$2" \
    --repeats 10 --warmup 3 2>&1 | grep -E "^ +[0-9]+ |refused|error"
}

# The wgmma backward kernels on rows only 2-byte aligned (odd D): the
# traversed tiles staged and shifted into the core-matrix layout.
W="head=0 cache=none mma=wgmma"
run 127,199 backward "default backward (odd D)"
run 127 backward "wgmma query kernel, staged rows" "backward_query: rows=128 cols=64 warps=8 $W"
run 127 backward "wgmma query kernel, staged rows, 3 warpgroups" \
  "backward_query: rows=192 cols=48 warps=12 $W"
run 199 backward "wgmma query kernel, staged rows" "backward_query: rows=128 cols=32 warps=8 $W"
run 127 backward "wgmma key/value kernel, staged rows" \
  "backward_key_value: rows=128 cols=64 warps=8 $W"
run 127 backward "wgmma key/value kernel, staged rows, cols 32" \
  "backward_key_value: rows=128 cols=32 warps=8 $W"
run 127 backward "both, staged rows" \
  "backward_query: rows=128 cols=64 warps=8 $W; backward_key_value: rows=128 cols=64 warps=8 $W"
