#!/usr/bin/env bash
# On a GPU machine: build (no package installs) and run the GPU test suite.
# Usage: bash scripts/gpu_check.sh [ctest -R regex]
# Environment: FLASHGEN_BUILD_ALL=1 builds every target (the CLI and the
# Python module's library too), FLASHGEN_TEST_EXCLUDE=regex leaves tests out
# (ctest -E), FLASHGEN_TEST_TIMEOUT=seconds per test (default 300; a kernel
# that never finishes fails its test instead of stalling the suite).
# Each test's line is printed as it finishes.
set -uo pipefail
cd "$(dirname "$0")/.."
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
cmake -S . -B build-gpu "${generator[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 1
targets=(--target flashgen_gpu_tests)
[ -n "${FLASHGEN_BUILD_ALL:-}" ] && targets=()
cmake --build build-gpu --parallel "$(nproc)" "${targets[@]}" 2>&1 | grep -E "error|warning" -A3 | head -30
cmake --build build-gpu --parallel "$(nproc)" "${targets[@]}" >/dev/null || exit 1
cd build-gpu
filter=()
[ $# -gt 0 ] && filter=(-R "$1")
[ -n "${FLASHGEN_TEST_EXCLUDE:-}" ] && filter+=(-E "$FLASHGEN_TEST_EXCLUDE")
ctest -L gpu --parallel "$(nproc)" --timeout "${FLASHGEN_TEST_TIMEOUT:-300}" \
  --output-on-failure "${filter[@]}" 2>&1
