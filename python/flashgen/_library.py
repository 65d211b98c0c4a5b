"""Finds and loads libflashgen.so, the shared library behind the C API.

Lookup order, first hit wins:
  1. $FLASHGEN_LIBRARY (a path to the file; an error if it does not exist),
  2. the copy installed inside the package (flashgen/_lib/),
  3. the development build of this source tree (<repo>/build/libflashgen.so).
The library is loaded on first use, so `import flashgen` works even before it
is built; the first call then says every place it looked.
"""

from __future__ import annotations

import ctypes
import os
import pathlib
import threading

LIBRARY_NAME = "libflashgen.so"
ENVIRONMENT_VARIABLE = "FLASHGEN_LIBRARY"

_package_dir = pathlib.Path(__file__).resolve().parent
# A wheel places the library in _lib/ or, when CMake installs into
# <prefix>/lib, in _lib/lib/; both are ours.
_packaged_candidates = (
    _package_dir / "_lib" / LIBRARY_NAME,
    _package_dir / "_lib" / "lib" / LIBRARY_NAME,
)
# python/flashgen/ -> the repository root -> build/
_development_candidate = _package_dir.parent.parent / "build" / LIBRARY_NAME

# The command-line tool: a wheel installs it as _lib/bin/flashgen (pyproject.toml),
# a CMake build of the source tree as build/flashgen.
CLI_NAME = "flashgen"
_cli_candidates = (_package_dir / "_lib" / "bin" / CLI_NAME,
                   _package_dir.parent.parent / "build" / CLI_NAME)

_lock = threading.Lock()
_loaded: ctypes.CDLL | None = None


def candidate_paths() -> list[pathlib.Path]:
    """Where the library is looked for, in order."""
    explicit = os.environ.get(ENVIRONMENT_VARIABLE)
    if explicit:
        return [pathlib.Path(explicit).resolve()]
    return [*_packaged_candidates, _development_candidate]


def find_library() -> pathlib.Path:
    paths = candidate_paths()
    for path in paths:
        if path.is_file():
            return path
    if os.environ.get(ENVIRONMENT_VARIABLE):
        raise OSError(f"{ENVIRONMENT_VARIABLE}={os.environ[ENVIRONMENT_VARIABLE]!r} "
                      f"does not name a file ({paths[0]})")
    tried = ", ".join(str(p) for p in paths)
    raise OSError(f"{LIBRARY_NAME} not found (looked at {tried}); install the package "
                  f"with `pip install .`, build it with scripts/build.sh, or set "
                  f"{ENVIRONMENT_VARIABLE} to its path")


def find_cli() -> pathlib.Path:
    """The flashgen executable shipped with the package (or of the source tree's build)."""
    for path in _cli_candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    tried = ", ".join(str(p) for p in _cli_candidates)
    raise OSError(f"the {CLI_NAME} executable was not found (looked at {tried}); install the "
                  f"package with `pip install .` or build it with scripts/build.sh")


def load() -> ctypes.CDLL:
    """The loaded library (loaded once per process)."""
    global _loaded
    with _lock:
        if _loaded is None:
            # ctypes.CDLL releases the GIL around each call, so CPU work in the
            # library runs while other Python threads go on.
            _loaded = ctypes.CDLL(str(find_library()))
        return _loaded
