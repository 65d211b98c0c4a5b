#!/usr/bin/env bash
# Times the key/value backward with split=dims in pairs (cluster=2: the dV
# and the dK CTA of a key block in a cluster, Q and dO copied once for both
# by TMA multicast), with and without the dV CTA handing Pᵀ over
# (handoff=1), against the tuning table's rows (the first run of each
# group) at D = 288-512. Runs the kernel's forced GPU tests first and stops
# if they fail.
# Usage: bash bench/probe_key_value_pairs.sh [--causal]
set -uo pipefail
cd "$(dirname "$0")/.."
bash bench/forced_tests.sh 'GpuBackwardWgmmaKeyValueDims' probe_key_value_pairs.sh || exit 1
[ "${1:-}" = "--causal" ] && export BENCH_ARGS=--causal
export KINDS=backward
dims="rows=64 head=0 warps=8 mma=wgmma producer=warp copy=tma split=dims swizzle=32"
kv="backward_key_value:"
bash bench/probe_tunings.sh 288,384 "$kv cols=32 stages=3 cache=K,V $dims cluster=2" \
  "$kv cols=32 stages=3 cache=K,V $dims cluster=2 handoff=1"
bash bench/probe_tunings.sh 448,512 "$kv cols=16 stages=3 cache=K,V $dims cluster=2" \
  "$kv cols=16 stages=3 cache=K,V $dims cluster=2 handoff=1"
