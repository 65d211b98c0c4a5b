#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: C++ (CTest; GPU tests
# report SKIPPED where there is no GPU) and Python (pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure --parallel "$(nproc)")
FLASHGEN_LIBRARY="$PWD/build/libflashgen.so" PYTHONPATH="$PWD/python" \
  python3 -m pytest -q python/tests bench/tests
