#!/bin/sh
# Runs the project's Python (.venv, made by scripts/setup.sh, which has numpy)
# when it exists, else the system's python3. Looked up when a test runs, not
# when the build is configured, so a build configured before the .venv
# existed uses it once it does.
venv_python="$(dirname "$0")/../.venv/bin/python3"
if [ -x "$venv_python" ]; then
  exec "$venv_python" "$@"
fi
exec python3 "$@"
