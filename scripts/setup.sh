#!/usr/bin/env bash
# Installs what flashgen needs to build and test, only what is missing: the
# Debian packages (apt), and the Python packages from PyPI into the project's
# virtual environment .venv (Debian 12+ and Ubuntu 24.04 refuse pip installs
# into the system's Python, PEP 668). Safe to run again; does nothing when
# all is there.
#
#   bash scripts/setup.sh [--torch]
#
# --torch also installs PyTorch and transformers (about 5 GB with PyTorch's
# CUDA libraries, a minute or two), which the tests of the PyTorch API and of
# the transformers integration need; they run on the CPU where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
with_torch=0
for option in "$@"; do
  case "$option" in
    --torch) with_torch=1 ;;
    *) echo "setup.sh: unknown option $option (known: --torch)" >&2; exit 2 ;;
  esac
done

debian_packages=(cmake ninja-build g++ libgtest-dev nlohmann-json3-dev)
# Debian's Python makes virtual environments only with python3-venv (ensurepip).
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  debian_packages+=(python3-venv)
fi
missing=()
if command -v dpkg >/dev/null 2>&1; then
  for pkg in "${debian_packages[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating the virtual environment $venv"
  python3 -m venv "$venv"
fi

# import name:PyPI name (matplotlib draws the benchmark graph; scikit-build-core
# builds the Python package in its install test).
python_packages=(numpy:numpy pytest:pytest matplotlib:matplotlib scikit_build_core:scikit-build-core)
# The versions the PyTorch tests and the transformers integration were
# checked with; ml_dtypes gives numpy its bfloat16 (flashgen.numpy's bf16 test).
if [ "$with_torch" = 1 ]; then
  python_packages+=("torch:torch==2.11.*" "transformers:transformers==5.25.*" ml_dtypes:ml_dtypes)
fi
wanted=()
for entry in "${python_packages[@]}"; do
  "$venv/bin/python" -c "import ${entry%%:*}" >/dev/null 2>&1 || wanted+=("${entry#*:}")
done
if [ ${#wanted[@]} -gt 0 ]; then
  echo "setup: pip install ${wanted[*]} (into $venv)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${wanted[@]}"
fi
