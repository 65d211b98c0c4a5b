#!/usr/bin/env bash
# Times the query backward with split=dims (two warpgroups over 64 query
# rows splitting the head dims) at D = 288-512 with Q and dO in shared
# memory or held in registers (cache=), against the tuning table's rows (the
# first run of each group). Runs the kernel's forced GPU tests first (the
# held variants among them) and stops if they fail.
# Usage: bash bench/lab/probe_query_held.sh [--causal]
set -uo pipefail
cd "$(dirname "$0")/../.."
bash bench/lab/forced_tests.sh 'GpuBackwardWgmmaQuerySplit' probe_query_held.sh || exit 1
[ "${1:-}" = "--causal" ] && export BENCH_ARGS=--causal
export KINDS=backward
dims="rows=64 head=0 warps=8 mma=wgmma producer=warp copy=tma split=dims swizzle=32"
q="backward_query:"
# Both held spill past 352 columns at 32 keys and at 512 at 16 keys
# (tests/codegen/compile_spread_test.cpp lists the shapes that compile clean).
bash bench/lab/probe_tunings.sh 288,384 "$q cols=16 stages=3 cache=none $dims" \
  "$q cols=16 stages=3 cache=Q,dO $dims" "$q cols=32 stages=3 cache=Q $dims"
bash bench/lab/probe_tunings.sh 448,512 "$q cols=16 stages=3 cache=none $dims" \
  "$q cols=16 stages=3 cache=Q $dims" "$q cols=16 stages=3 cache=dO $dims"
