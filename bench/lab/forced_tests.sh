#!/usr/bin/env bash
# Runs the GPU tests whose names match REGEX and not EXCLUDE (`ctest -L gpu`
# in build-gpu) and prints the summary; exits 1, naming CALLER, if any fails.
# The probes run their kernels' forced tests with it before timing them.
# Usage: bash bench/lab/forced_tests.sh REGEX CALLER [EXCLUDE]
set -uo pipefail
cd "$(dirname "$0")/../.."
(cd build-gpu && ctest -L gpu -R "$1" ${3:+-E "$3"} --parallel 8 --timeout 120 --output-on-failure |
  tail -5) || { echo "$2: the forced tests failed" >&2; exit 1; }
