#!/usr/bin/env bash
# Installs what flashgen needs to build and test, only what is missing
# (Debian packages and PyPI). Safe to run again; does nothing when all is there.
set -euo pipefail

debian_packages=(cmake ninja-build g++ libgtest-dev nlohmann-json3-dev)
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

# import name:PyPI name (matplotlib draws the benchmark graph; scikit-build-core
# builds the Python package in its install test).
python_packages=(numpy:numpy pytest:pytest matplotlib:matplotlib scikit_build_core:scikit-build-core)
for entry in "${python_packages[@]}"; do
  module=${entry%%:*}
  package=${entry#*:}
  python3 -c "import $module" >/dev/null 2>&1 || {
    echo "setup: pip install $package"
    python3 -m pip install -q --root-user-action=ignore "$package"
  }
done
