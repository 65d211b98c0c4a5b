#!/usr/bin/env bash
# On an sm_90a GPU: checks the wgmma kernels at fixed shapes (forced GPU
# tests), then times each against the mma.sync kernels on the shapes it is
# meant for (the run that made them defaults on 2026-12-03; with the table in
# force, "default" rows now show the table's choice). Run after `FLASHGEN_BUILD_ALL=1 bash scripts/gpu_check.sh`
# (it uses build-gpu/). Prints fixed-column bench rows; bench/NOTES.md keeps
# what they showed.
#
#   bash bench/probe_wgmma.sh
set -uo pipefail
cd "$(dirname "$0")/.."
bin=build-gpu/flashgen
[ -x "$bin" ] || { echo "probe_wgmma.sh: build-gpu/flashgen is missing (scripts/gpu_check.sh builds it)" >&2; exit 2; }

echo "== forced GPU tests"
(cd build-gpu && ctest -L gpu -R "Wgmma" --timeout 300 2>&1 | tail -n 8)

run() {  # run DIMS KINDS LABEL [FLASHGEN_TUNING]
  echo "== $3${4:+: FLASHGEN_TUNING='$4'}"
  FLASHGEN_TUNING="${4:-}" "$bin" bench --backend cuda --dims "$1" --kinds "$2" --repeats 10 \
    --warmup 3 2>&1 | grep -E "^ +[0-9]+ |refused|error"
}

W="head=0 cache=none mma=wgmma"
# Backward kernels on wgmma (Dqk <= 256 for the query kernel, Dqk + Dv <= 256 for key/value).
run 64,96,128 backward "default backward"
run 64,96,128 backward "wgmma query kernel" "backward_query: rows=128 cols=64 warps=8 $W"
run 64 backward "wgmma query kernel, 3 warpgroups" "backward_query: rows=192 cols=64 warps=12 $W"
run 64,96,128 backward "wgmma key/value kernel" "backward_key_value: rows=128 cols=32 warps=8 $W"
run 64 backward "wgmma key/value kernel, cols 64" "backward_key_value: rows=128 cols=64 warps=8 $W"
run 64,96,128 backward "both" \
  "backward_query: rows=128 cols=64 warps=8 $W; backward_key_value: rows=128 cols=32 warps=8 $W"
# The backward kernels on rows only 2-byte aligned (staged K and V, or Q and dO).
run 127,199 backward "default backward (odd D)"
run 127 backward "wgmma query kernel, staged rows" "backward_query: rows=128 cols=64 warps=8 $W"
run 127 backward "wgmma query kernel, staged rows, 3 warpgroups" \
  "backward_query: rows=192 cols=48 warps=12 $W"
run 199 backward "wgmma query kernel, staged rows" "backward_query: rows=128 cols=32 warps=8 $W"
run 127 backward "wgmma key/value kernel, staged rows" \
  "backward_key_value: rows=128 cols=64 warps=8 $W"
run 127 backward "both, staged rows" \
  "backward_query: rows=128 cols=64 warps=8 $W; backward_key_value: rows=128 cols=64 warps=8 $W"
# Forward past Dv = 256 (value columns split across CTAs) and on odd D (staged rows).
run 127,199,257,288,384,385,448,512 forward "default forward"
run 288,384,448,512 forward "wgmma, head=256" \
  "forward: rows=128 cols=32 head=256 warps=8 cache=none mma=wgmma"
run 384 forward "wgmma, head=256, 3 warpgroups" \
  "forward: rows=192 cols=32 head=256 warps=12 cache=none mma=wgmma"
run 127,199 forward "wgmma, staged rows" "forward: rows=192 cols=64 warps=12 $W"
run 127,199,257,385 forward "wgmma, staged rows, 2 warpgroups" \
  "forward: rows=128 cols=64 head=256 warps=8 cache=none mma=wgmma"
