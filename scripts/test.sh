#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: C++ (CTest) and
# Python (pytest, in the project's .venv). CTest prints failures (with their
# output), skips and the summary, not a line per passing test. Without a
# usable GPU the GPU suite (label gpu) is not run: one line says how many
# tests that leaves out and why.
set -euo pipefail
cd "$(dirname "$0")/.."
# PyTorch too (the tests of the PyTorch API), unless FLASHGEN_TEST_WITHOUT_TORCH=1.
if [ "${FLASHGEN_TEST_WITHOUT_TORCH:-0}" = 1 ]; then
  bash scripts/setup.sh
else
  bash scripts/setup.sh --torch
fi
bash scripts/build.sh
python=.venv/bin/python

cd build
cuda_status=$(./flashgen info --json | "../$python" -c \
  'import json, sys; info = json.load(sys.stdin); print("" if info["cuda_available"] else info["cuda_status"])')
labels=()
[ -n "$cuda_status" ] && labels=(-LE gpu)
# Each passing test's two lines ("Start", "Passed") are dropped; the rest stays.
set +e
ctest --output-on-failure --parallel "$(nproc)" "${labels[@]}" 2>&1 |
  grep -v -E '^ *Start +[0-9]+: |^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed +[0-9.]+ sec$'
ctest_status=${PIPESTATUS[0]}
set -e
if [ -n "$cuda_status" ]; then
  gpu_tests=$(ctest -N -L gpu | sed -n 's/^Total Tests: //p')
  # The reason without the loader's per-file details.
  echo "GPU tests: ${gpu_tests} not run, no usable GPU here (${cuda_status%% (*}); on a GPU machine: bash scripts/gpu_check.sh"
fi
[ "$ctest_status" -eq 0 ] || exit "$ctest_status"
cd ..

FLASHGEN_LIBRARY="$PWD/build/libflashgen.so" PYTHONPATH="$PWD/python" \
  "$python" -m pytest -q python/tests bench/tests
