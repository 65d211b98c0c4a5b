#!/usr/bin/env bash
# Times the TMA forward copying whole 32-byte sectors into 32-byte-swizzled
# tiles (swizzle=32: 16-column boxes) against the same shapes copying
# 8-column slices into the core-matrix layout (the table's rows), at
# D = 64, 128, 256, 384 and 512. Runs the forced GPU tests of the swizzled
# forward first and stops if they fail.
# Usage: bash bench/probe_swizzled_forward.sh [--causal]
set -uo pipefail
cd "$(dirname "$0")/.."
(cd build-gpu && ctest -L gpu -R GpuForwardWgmmaSwizzled --parallel 8 --timeout 120 \
  --output-on-failure | tail -5) || { echo "probe_swizzled_forward.sh: the forced tests failed" >&2; exit 1; }
export KINDS=forward
[ "${1:-}" = "--causal" ] && export BENCH_ARGS=--causal
tma="cache=none mma=wgmma producer=warp copy=tma"
probe() {  # D, then the table's tuning at D
  bash bench/probe_tunings.sh "$1" "forward: $2" "forward: $2 swizzle=32"
}
probe 64 "rows=192 cols=128 head=0 warps=12 $tma"
probe 128 "rows=192 cols=64 head=0 warps=12 cache=none mma=wgmma stages=4 producer=warp copy=tma"
probe 256 "rows=128 cols=80 head=0 warps=8 cache=none mma=wgmma stages=2 producer=warp copy=tma"
probe 384 "rows=128 cols=48 head=256 warps=8 cache=none mma=wgmma stages=2 producer=warp copy=tma"
probe 512 "rows=128 cols=32 head=256 warps=8 cache=none mma=wgmma stages=2 producer=warp copy=tma"
