#!/usr/bin/env bash
# On an sm_90a GPU: the wgmma backward kernels on rows only 2-byte aligned
# (odd D: the traversed tiles staged and shifted into the core-matrix
# layout) against the tuning table's choice (the mma.sync kernels when this
# made them the defaults on 2-byte rows, 2026-12-03), after the forced GPU
# tests of the wgmma kernels without a producer. Uses build-gpu/
# (`FLASHGEN_BUILD_ALL=1 bash scripts/gpu_check.sh` builds it);
# docs/decisions.md keeps what the rows showed.
#
#   bash bench/lab/probe_wgmma.sh [--no-tests]    (--no-tests: timings only)
set -uo pipefail
cd "$(dirname "$0")/../.."
[ "${1:-}" = "--no-tests" ] || bash bench/lab/forced_tests.sh Wgmma probe_wgmma.sh Producer || exit 1
export KINDS=backward
W="head=0 cache=none mma=wgmma"
bash bench/lab/probe_tunings.sh 127 "backward_query: rows=128 cols=64 warps=8 $W" \
  "backward_query: rows=192 cols=48 warps=12 $W" "backward_key_value: rows=128 cols=64 warps=8 $W" \
  "backward_key_value: rows=128 cols=32 warps=8 $W" \
  "backward_query: rows=128 cols=64 warps=8 $W; backward_key_value: rows=128 cols=64 warps=8 $W"
bash bench/lab/probe_tunings.sh 199 "backward_query: rows=128 cols=32 warps=8 $W"
