#!/usr/bin/env bash
# Times the tuning table's TMA rows, which copy whole 32-byte sectors into
# 32-byte-swizzled tiles (swizzle=32: 16-column boxes), against the same
# shapes copying 8-column slices into the core-matrix layout: the forward at
# D = 64, 128, 256, 384 and 512, the backward (its query kernel, and the
# key/value kernel at D = 64) at D = 64, 128 and 256. Runs the forced GPU
# tests of the swizzled kernels first and stops if they fail.
# Usage: bash bench/lab/probe_swizzle.sh [--causal] [--backward-only]
set -uo pipefail
cd "$(dirname "$0")/../.."
causal=0 backward_only=0
for arg in "$@"; do
  case "$arg" in
    --causal) causal=1 ;;
    --backward-only) backward_only=1 ;;
    *) echo "probe_swizzle.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done
bash bench/lab/forced_tests.sh 'GpuForwardWgmmaSwizzled|GpuBackwardWgmma.*Tma' probe_swizzle.sh || exit 1
[ "$causal" = 1 ] && export BENCH_ARGS=--causal
tma="cache=none mma=wgmma producer=warp copy=tma"
# D, then the 8-column-slice tunings of the table's rows at D (the table's own
# rows, timed first, are swizzled).
probe() {
  local d=$1
  shift
  bash bench/lab/probe_tunings.sh "$d" "$@"
}
if [ "$backward_only" = 0 ]; then
  export KINDS=forward
  probe 64 "forward: rows=192 cols=128 head=0 warps=12 $tma"
  probe 128 "forward: rows=192 cols=64 head=0 warps=12 cache=none mma=wgmma stages=4 producer=warp copy=tma"
  probe 256 "forward: rows=128 cols=80 head=0 warps=8 cache=none mma=wgmma stages=2 producer=warp copy=tma"
  probe 384 "forward: rows=128 cols=48 head=256 warps=8 cache=none mma=wgmma stages=2 producer=warp copy=tma"
  probe 512 "forward: rows=128 cols=32 head=256 warps=8 cache=none mma=wgmma stages=2 producer=warp copy=tma"
fi
export KINDS=backward
probe 64 "backward_query: rows=192 cols=80 head=0 warps=12 $tma; backward_key_value: rows=128 cols=96 head=0 warps=8 $tma"
probe 128 "backward_query: rows=192 cols=48 head=0 warps=12 $tma"
probe 256 "backward_query: rows=128 cols=32 head=0 warps=8 $tma"
