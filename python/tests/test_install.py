"""`pip install .` builds the wheel and the installed package finds its own library."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
# A cold build on two cores takes well under this; more means something hangs.
BUILD_TIMEOUT_S = 300
# manylinux_2_28: the newest glibc symbol version the wheel's binaries may need.
GLIBC_FLOOR = (2, 28)


def newest_glibc_version(binary: pathlib.Path) -> tuple[int, ...]:
    """The newest GLIBC_x.y version among the dynamic symbols `binary` needs."""
    symbols = subprocess.run(["objdump", "-T", str(binary)], check=True, capture_output=True,
                             text=True).stdout
    versions = {tuple(int(part) for part in found.split("."))
                for found in re.findall(r"GLIBC_([0-9.]+)\)?\s", symbols)}
    assert versions, f"no GLIBC symbol versions in {binary}"
    return max(versions)


@pytest.mark.slow
def test_pip_install_builds_a_working_package(tmp_path):
    pytest.importorskip("scikit_build_core",
                        reason="scikit-build-core is not installed (pip install scikit-build-core)")
    target = tmp_path / "site"
    # No build isolation and no dependencies: nothing is downloaded, so the
    # test measures the project's own build.
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation",
                    "--no-deps", "--target", str(target), str(REPO)],
                   check=True, timeout=BUILD_TIMEOUT_S, cwd=tmp_path)
    code = ("import numpy as np, flashgen\n"
            "from flashgen import _library\n"
            "print(_library.find_library())\n"
            "q = np.ones((1, 3, 2, 5), np.float32)\n"
            "o, lse = flashgen.numpy.forward(q, q, q)\n"
            "print(flashgen.version(), float(abs(o - 1).max()))\n")
    env = {key: value for key, value in os.environ.items() if key != "FLASHGEN_LIBRARY"}
    env["PYTHONPATH"] = str(target)
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, check=True,
                            capture_output=True, text=True)
    library_path, summary = result.stdout.splitlines()
    assert pathlib.Path(library_path).is_relative_to(target), library_path
    version, error = summary.split()
    cmake_version = next(line for line in (REPO / "CMakeLists.txt").read_text().splitlines()
                         if line.startswith("project(flashgen VERSION"))
    assert f"VERSION {version} " in cmake_version
    assert float(error) == 0.0  # equal values give the value back

    # The `flashgen` console command runs the CLI built into the package.
    cli = subprocess.run([sys.executable, "-m", "flashgen._cli", "run", "--help"], env=env,
                         cwd=tmp_path, check=True, capture_output=True, text=True)
    assert cli.stdout.startswith("usage: flashgen run "), cli.stdout
    assert (target / "flashgen" / "_lib" / "bin" / "flashgen").is_file()
    entry_points = next(target.glob("flashgen-*.dist-info")) / "entry_points.txt"
    assert "flashgen = flashgen._cli:main" in entry_points.read_text()

    # A bad argument raises through the library (its unwinder) and the CLI.
    refused = subprocess.run([sys.executable, "-m", "flashgen._cli", "run", "--dim", "0"], env=env,
                             cwd=tmp_path, capture_output=True, text=True)
    assert refused.returncode == 2 and "--dim must be in" in refused.stderr, refused.stderr

    if shutil.which("objdump"):
        for binary in (pathlib.Path(library_path), target / "flashgen" / "_lib" / "bin" / "flashgen"):
            assert newest_glibc_version(binary) <= GLIBC_FLOOR, binary
