#!/usr/bin/env bash
# Times the key/value backward with split=dims (a dV and a dK CTA per block
# of 64 keys, two warpgroups splitting the head dims: five GEMMs, every
# accumulator in registers) against the tuning table's rows (mma.sync over
# column chunks that each recompute Sᵀ and dPᵀ), at D = 288-512. Runs the
# forced GPU tests of both split=dims backward kernels first and stops if
# they fail.
# Usage: bash bench/probe_key_value_dims.sh [--causal]
set -uo pipefail
cd "$(dirname "$0")/.."
(cd build-gpu && ctest -L gpu -R 'GpuBackwardWgmma(KeyValueDims|QuerySplit)' --parallel 6 \
  --timeout 120 --output-on-failure | tail -5) ||
  { echo "probe_key_value_dims.sh: the forced tests failed" >&2; exit 1; }
[ "${1:-}" = "--causal" ] && export BENCH_ARGS=--causal
export KINDS=backward
dims="rows=64 head=0 warps=8 cache=none mma=wgmma producer=warp copy=tma split=dims swizzle=32"
# 32-query blocks fit two stages deep to D = 384, 16-query blocks to 512.
bash bench/probe_tunings.sh 288,384 \
  "backward_key_value: cols=32 stages=2 $dims" "backward_key_value: cols=16 stages=3 $dims"
bash bench/probe_tunings.sh 448,512 "backward_key_value: cols=16 stages=2 $dims"
