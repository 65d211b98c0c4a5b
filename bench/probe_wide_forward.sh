#!/usr/bin/env bash
# Times the forward past 256 value columns under the tunings that split the
# value columns across two warpgroups (split=values), alone and in clusters
# of two, against the default (256-column chunks), at D = 256, 320, 384 and
# 512 (bench/probe_tunings.sh per D: the tunings' shapes differ by D).
# Usage: bash bench/probe_wide_forward.sh [--causal]
set -uo pipefail
cd "$(dirname "$0")/.."
export KINDS=forward
[ "${1:-}" = "--causal" ] && export BENCH_ARGS=--causal
values="head=0 warps=8 cache=none mma=wgmma producer=warp copy=tma split=values"
# D, then "cols stages" pairs that fit the shared memory there.
probe() {
  local dim=$1
  shift
  local tunings=()
  for shape in "$@"; do
    set -- $shape
    tunings+=("forward: rows=64 cols=$1 $values stages=$2" "forward: rows=64 cols=$1 $values stages=$2 cluster=2")
  done
  bash bench/probe_tunings.sh "$dim" "${tunings[@]}"
}
probe 512 "32 2" "16 4"
probe 384 "32 3" "48 2"
probe 320 "32 3" "64 2"
probe 256 "64 2" "32 3"
