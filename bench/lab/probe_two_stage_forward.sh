#!/usr/bin/env bash
# Times the TMA forward with K and V two stages deep (each in a pipeline of
# its own), which leaves room for wider key blocks than three shared stages,
# against the table's tuning at the head dimensions where the shared memory
# is what limits the key block: D = 224 and 256 (all of Dv in one CTA), 384
# and 512 (chunks of 256 or 192 value columns recomputing S).
# Usage: bash bench/lab/probe_two_stage_forward.sh [--causal]
set -uo pipefail
cd "$(dirname "$0")/../.."
export KINDS=forward
[ "${1:-}" = "--causal" ] && export BENCH_ARGS=--causal
tma="cache=none mma=wgmma stages=2 producer=warp copy=tma"
bash bench/lab/probe_tunings.sh 224 \
  "forward: rows=128 cols=64 head=0 warps=8 $tma" "forward: rows=128 cols=80 head=0 warps=8 $tma"
bash bench/lab/probe_tunings.sh 256 \
  "forward: rows=128 cols=48 head=0 warps=8 $tma" "forward: rows=128 cols=64 head=0 warps=8 $tma" \
  "forward: rows=128 cols=80 head=0 warps=8 $tma"
bash bench/lab/probe_tunings.sh 384 \
  "forward: rows=192 cols=32 head=256 warps=12 $tma" "forward: rows=128 cols=48 head=256 warps=8 $tma" \
  "forward: rows=192 cols=32 head=192 warps=12 $tma" "forward: rows=128 cols=48 head=192 warps=8 $tma"
bash bench/lab/probe_tunings.sh 512 "forward: rows=128 cols=32 head=256 warps=8 $tma"
