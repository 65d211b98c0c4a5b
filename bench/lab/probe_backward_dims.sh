#!/usr/bin/env bash
# Times the backward kernels whose two warpgroups split the head dims
# (split=dims) at D = 288-512 under forced tunings, the first run of each
# group being the tuning table's row: the query kernel (64 query rows) with
# Q and dO in shared memory or held in registers (cache=), then the
# key/value kernel (a dV and a dK CTA per block of 64 keys) with K and V so,
# 16 or 32 queries a block, two or three stages deep. Runs the forced GPU
# tests of both kernels first and stops if they fail.
# Usage: bash bench/lab/probe_backward_dims.sh [--causal]
set -uo pipefail
cd "$(dirname "$0")/../.."
bash bench/lab/forced_tests.sh 'GpuBackwardWgmma(KeyValueDims|QuerySplit)' probe_backward_dims.sh ||
  exit 1
[ "${1:-}" = "--causal" ] && export BENCH_ARGS=--causal
export KINDS=backward
dims="rows=64 head=0 warps=8 mma=wgmma producer=warp copy=tma split=dims swizzle=32"
q="backward_query:"
kv="backward_key_value:"
# Q and dO both held spill past 352 columns at 32 keys and at 512 at 16 keys
# (tests/codegen/compile_spread_test.cpp lists the shapes that compile clean).
bash bench/lab/probe_tunings.sh 288,384 "$q cols=16 stages=3 cache=none $dims" \
  "$q cols=16 stages=3 cache=Q,dO $dims" "$q cols=32 stages=3 cache=Q $dims"
bash bench/lab/probe_tunings.sh 448,512 "$q cols=16 stages=3 cache=none $dims" \
  "$q cols=16 stages=3 cache=Q $dims" "$q cols=16 stages=3 cache=dO $dims"
# Three stages of 32-query blocks fit to D = 384 with V held, 16-query ones
# to 512; past 448 columns 32-query blocks spill.
bash bench/lab/probe_tunings.sh 288,384 "$kv cols=32 stages=2 cache=none $dims" \
  "$kv cols=32 stages=3 cache=V $dims" "$kv cols=32 stages=3 cache=K,V $dims"
bash bench/lab/probe_tunings.sh 448 "$kv cols=16 stages=3 cache=none $dims" \
  "$kv cols=32 stages=2 cache=K,V $dims" "$kv cols=16 stages=3 cache=K,V $dims"
bash bench/lab/probe_tunings.sh 512 "$kv cols=16 stages=2 cache=none $dims" \
  "$kv cols=16 stages=3 cache=V $dims" "$kv cols=16 stages=3 cache=K,V $dims"
