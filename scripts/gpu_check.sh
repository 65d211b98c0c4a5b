#!/usr/bin/env bash
# On a GPU machine: build (no package installs) and run the GPU test suite.
# Usage: bash scripts/gpu_check.sh [ctest -R regex]
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
ctest -L gpu --parallel "$(nproc)" --timeout 500 "${filter[@]}" 2>&1 | tail -n 60
