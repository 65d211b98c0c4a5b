#!/usr/bin/env bash
# Times `flashgen bench` under several forced tunings (FLASHGEN_TUNING), to
# compare candidates by hand before they become tuning-table rows.
# Usage: bash bench/probe_tunings.sh "64,128" "forward: rows=128 ..." ["..."]
set -uo pipefail
cd "$(dirname "$0")/.."
dims=$1
shift
for tuning in "" "$@"; do
  echo "== FLASHGEN_TUNING='${tuning}'"
  FLASHGEN_TUNING="$tuning" build-gpu/flashgen bench --backend cuda --dims "$dims" \
    --kinds forward,backward,backward_atomic --repeats 10 --warmup 3 2>&1 | tail -n +3
done
