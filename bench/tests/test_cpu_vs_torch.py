"""bench/cpu_vs_torch.py: one small run writes the JSON the issue's table is
read from (skipped where PyTorch is missing)."""

import importlib.util
import json
import pathlib

import pytest

pytest.importorskip("torch", reason="PyTorch is not installed")

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "cpu_vs_torch.py"


def load_script():
    spec = importlib.util.spec_from_file_location("bench_cpu_vs_torch", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_writes_a_row_per_system_dtype_and_dim(tmp_path):
    out = tmp_path / "result.json"
    load_script().main(["--seq", "48", "--heads", "2", "--dims", "16", "23", "--threads", "2",
                        "--warmup", "0", "--repeats", "1", "--out", str(out)])
    result = json.loads(out.read_text())
    assert result["threads"] == 2 and result["torch"] and result["cpu"]
    assert result["settle_ms"] == 100.0
    rows = result["rows"]
    assert {(r["system"], r["dtype"], r["D"]) for r in rows} == {
        (system, dtype, dim) for system in ("flashgen", "torch") for dtype in ("f32", "bf16")
        for dim in (16, 23)}
    for row in rows:
        assert row["threads"] == 2
        assert row["fwd_tflops"] > 0 and row["bwd_tflops"] > 0
