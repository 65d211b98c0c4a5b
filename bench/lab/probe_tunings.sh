#!/usr/bin/env bash
# Times `flashgen bench` under several forced tunings (FLASHGEN_TUNING), to
# compare candidates by hand before they become tuning-table rows.
# Usage: bash bench/lab/probe_tunings.sh "64,128" "forward: rows=128 ..." ["..."]
# KINDS (default forward,backward,backward_atomic) picks what is timed;
# BENCH_ARGS adds options of `flashgen bench` (e.g. "--causal").
set -uo pipefail
cd "$(dirname "$0")/../.."
dims=$1
shift
for tuning in "" "$@"; do
  echo "== FLASHGEN_TUNING='${tuning}'"
  FLASHGEN_TUNING="$tuning" build-gpu/flashgen bench --backend cuda --dims "$dims" \
    --kinds "${KINDS:-forward,backward,backward_atomic}" --repeats 10 --warmup 3 ${BENCH_ARGS:-} \
    2>&1 | tail -n +3
done
