#!/usr/bin/env bash
# Times the key/value backward with split=dims issuing the next block's
# GEMMs ahead of this block's exchanges (ahead=1) against the tuning table's
# rows (the first run of each group) at D = 288-448: 32-query blocks where
# the second set of score registers fits beside K and V held (to 352
# columns), 16-query ones past that (three and four stages deep). Runs the
# kernel's forced GPU tests first and stops if they fail.
# Usage: bash bench/probe_key_value_ahead.sh [--causal]
set -uo pipefail
cd "$(dirname "$0")/.."
bash bench/forced_tests.sh 'GpuBackwardWgmmaKeyValueDims' probe_key_value_ahead.sh || exit 1
[ "${1:-}" = "--causal" ] && export BENCH_ARGS=--causal
export KINDS=backward
dims="rows=64 head=0 warps=8 mma=wgmma producer=warp copy=tma split=dims swizzle=32"
kv="backward_key_value:"
bash bench/probe_tunings.sh 288,320,352 "$kv cols=32 stages=3 cache=K,V $dims ahead=1"
bash bench/probe_tunings.sh 288,320 "$kv cols=32 stages=3 cache=V $dims ahead=1"
bash bench/probe_tunings.sh 384,448 "$kv cols=16 stages=3 cache=K,V $dims ahead=1" \
  "$kv cols=16 stages=3 cache=K,V $dims" "$kv cols=16 stages=4 cache=K,V $dims ahead=1" \
  "$kv cols=16 stages=4 cache=V $dims ahead=1"
