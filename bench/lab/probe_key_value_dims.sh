#!/usr/bin/env bash
# Times the key/value backward with split=dims (a dV and a dK CTA per block
# of 64 keys, two warpgroups splitting the head dims) at D = 288-512 under
# forced tunings: K and V in shared memory or held in registers (cache=),
# 16 or 32 queries a block, two or three stages; the first run of each
# group is the tuning table's row. Runs the forced GPU tests of both
# split=dims backward kernels first and stops if they fail.
# Usage: bash bench/lab/probe_key_value_dims.sh [--causal]
set -uo pipefail
cd "$(dirname "$0")/../.."
bash bench/lab/forced_tests.sh 'GpuBackwardWgmma(KeyValueDims|QuerySplit)' probe_key_value_dims.sh || exit 1
[ "${1:-}" = "--causal" ] && export BENCH_ARGS=--causal
export KINDS=backward
dims="rows=64 head=0 warps=8 mma=wgmma producer=warp copy=tma split=dims swizzle=32"
kv="backward_key_value:"
# Three stages of 32-query blocks fit to D = 384 with V held, 16-query ones
# to 512; past 448 columns 32-query blocks spill.
bash bench/lab/probe_tunings.sh 288,384 "$kv cols=32 stages=2 cache=none $dims" \
  "$kv cols=32 stages=3 cache=V $dims" "$kv cols=32 stages=3 cache=K,V $dims"
bash bench/lab/probe_tunings.sh 448 "$kv cols=16 stages=3 cache=none $dims" \
  "$kv cols=32 stages=2 cache=K,V $dims" "$kv cols=16 stages=3 cache=K,V $dims"
bash bench/lab/probe_tunings.sh 512 "$kv cols=16 stages=2 cache=none $dims" \
  "$kv cols=16 stages=3 cache=V $dims" "$kv cols=16 stages=3 cache=K,V $dims"
