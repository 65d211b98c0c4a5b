#!/usr/bin/env bash
# Installs what is missing, builds, and runs `flashgen run` on the default
# problem (the GPU if there is one, else the CPU backend). Extra arguments go
# to `flashgen run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
exec build/flashgen run "$@"
