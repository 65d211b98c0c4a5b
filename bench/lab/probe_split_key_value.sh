#!/usr/bin/env bash
# Times the key/value backward whose two warpgroups share 64 keys and split
# dK and dV (split=outputs: Sᵀ and dPᵀ computed once however wide the head)
# against the tuning table's rows (column chunks that each recompute them),
# at D = 136, 160, 192, 224 and 256, 48- and 64-query blocks. Runs its forced
# GPU tests first and stops if they fail.
# Usage: bash bench/lab/probe_split_key_value.sh [--causal]
set -uo pipefail
cd "$(dirname "$0")/../.."
bash bench/lab/forced_tests.sh 'GpuBackwardWgmmaKeyValueSplit' probe_split_key_value.sh || exit 1
[ "${1:-}" = "--causal" ] && export BENCH_ARGS=--causal
export KINDS=backward
split="head=0 warps=8 cache=none mma=wgmma producer=warp copy=tma split=outputs swizzle=32"
bash bench/lab/probe_tunings.sh 136,160,192,224,256 \
  "backward_key_value: rows=64 cols=64 $split" "backward_key_value: rows=64 cols=48 $split"
