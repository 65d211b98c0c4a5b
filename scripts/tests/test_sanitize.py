"""The sanitizer sweep's reading of compute-sanitizer reports (scripts/sanitize.py)."""

from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[1] / "sanitize.py"
_SPEC = importlib.util.spec_from_file_location("sanitize", _PATH)
sanitize = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sanitize)

RUN_OUTPUT = """\
problem:        B=1 Hq=1 Hkv=1 Sq=130 Skv=130 Dqk=385 Dv=385 bf16 scale=0.05096
backend:        cuda
forward plan:   forward bf16 dqk=385 dv=385 causal=0 vec=1 sm_90a | rows=128 cols=32 head=256 warps=8 cache=none mma=wgmma
backward plan:  backward_query bf16 dqk=385 dv=385 causal=0 vec=1 sm_90a | rows=64 cols=32 head=0 warps=4 cache=none
                backward_key_value bf16 dqk=385 dv=385 causal=0 vec=1 sm_90a | rows=64 cols=32 head=0 warps=4 cache=none
  workspace:    768 bytes
forward:             0.100 ms      1.00 TFLOP/s   (first call 5.0 ms, with compilation)
PASS
"""

MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 16 bytes
=========     at flashgen_device::load_global_16(const void *)+0x60 in copy.cuh:38
=========     by thread (5,0,0) in block (0,0,0)
=========     Address 0x7f0000018720 is out of bounds
=========     Device Frame:flashgen_forward+0x1230 in forward_wgmma.cuh:110
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f2d4f] in libcuda.so.1
=========
========= Invalid __global__ read of size 16 bytes
=========     at flashgen_forward+0x1250 in copy.cuh:76
=========     by thread (6,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 2 errors
"""

RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at flashgen_backward_key_value+0x4f0 in row_stats.cuh:71
=========     and Read access at flashgen_backward_key_value+0x9a0 in softmax.cuh:110 [256 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""


def test_plans_are_read_per_kernel_entry():
    kernels = sanitize.plan_kernels(RUN_OUTPUT)
    assert set(kernels) == {"flashgen_forward", "flashgen_backward_query",
                            "flashgen_backward_key_value"}
    assert kernels["flashgen_backward_key_value"].startswith("backward_key_value bf16 dqk=385")


def test_memcheck_errors_are_attributed_to_the_kernel_that_made_them():
    case = ("d385", "--dim 385", {})
    result = sanitize.judge("memcheck", case, RUN_OUTPUT + MEMCHECK, 0)
    forward = sanitize.plan_kernels(RUN_OUTPUT)["flashgen_forward"]
    assert result["counts"][forward] == [2, 0]
    assert sum(e for e, _ in result["counts"].values()) == 2
    assert result["problems"] == []


def test_a_racecheck_report_counts_once_as_its_summary_does():
    case = ("d64", "--dim 64", {})
    result = sanitize.judge("racecheck", case, RUN_OUTPUT + RACECHECK, 0)
    key_value = sanitize.plan_kernels(RUN_OUTPUT)["flashgen_backward_key_value"]
    assert result["counts"][key_value] == [1, 0]
    assert result["problems"] == []


def test_documented_exceptions_count_as_explained(monkeypatch):
    monkeypatch.setattr(sanitize, "EXCEPTIONS", [(re.compile(r"row_stats\.cuh:71"), "here")])
    result = sanitize.judge("racecheck", ("d64", "", {}), RUN_OUTPUT + RACECHECK, 0)
    key_value = sanitize.plan_kernels(RUN_OUTPUT)["flashgen_backward_key_value"]
    assert result["counts"][key_value] == [0, 1]


def test_a_clean_run_has_zero_errors_per_kernel():
    output = RUN_OUTPUT + "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
    result = sanitize.judge("synccheck", ("d385", "", {}), output, 0)
    assert all(counts == [0, 0] for counts in result["counts"].values())
    assert len(result["counts"]) == 3 and result["problems"] == []


@pytest.mark.parametrize("output, problem", [
    (RUN_OUTPUT, "no summary line"),
    (RUN_OUTPUT.replace("forward plan", "x") .replace("backward plan", "y")
     + "========= ERROR SUMMARY: 0 errors\n", "no plan printed"),
    (RUN_OUTPUT + "========= ERROR SUMMARY: 3 errors\n", "summary says 3"),
])
def test_runs_that_cannot_be_judged_are_problems(output, problem):
    result = sanitize.judge("memcheck", ("d1", "", {}), output, 0)
    assert any(p.startswith(problem) for p in result["problems"]), result["problems"]


def test_a_refused_device_is_not_a_clean_sweep():
    output = ("========= COMPUTE-SANITIZER\n========= Error: Device not supported\n"
              "flashgen run: the CUDA backend cannot run here: error 999\n")
    result = sanitize.judge("memcheck", ("d1", "", {}), output, 1)
    assert result["refused"]
