"""bench/plot.py: loading, normalising, the markdown table and the PNG."""

import json
import struct

import pytest

import bench_plot as plot

SHAPE = {"N": 8192, "B": 2, "H": 16, "causal": False}
GEMM_TFLOPS = 751.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def row(backend, dim, fwd=None, bwd=None, error=None, dtype="bf16", **extra):
    fields = {"backend": backend, "D": dim, "dtype": dtype, **SHAPE, **extra}
    if error is not None:
        fields["error"] = error
    if fwd is not None:
        fields["fwd_tflops"] = fwd
    if bwd is not None:
        fields["bwd_tflops"] = bwd
    return fields


def write_json(path, rows, **header):
    path.write_text(json.dumps({"device": "NVIDIA H200", **header, "rows": rows}))
    return str(path)


@pytest.fixture
def sample_files(tmp_path):
    """A flashgen file (with atomic backward) and a peers file in the shared
    file's style (dtype 'torch.bfloat16', ceiling as 'gemm_bf16_tflops')."""
    flashgen = write_json(tmp_path / "flashgen.json", [
        row("flashgen", 64, 400.0, 300.0, bwd_atomic_tflops=320.0),
        row("flashgen", 127, 350.0, 260.0, bwd_atomic_tflops=270.0),
        row("flashgen", 512, 300.0, 200.0, bwd_atomic_tflops=210.0),
    ], tool="flashgen", gemm_tflops=GEMM_TFLOPS)
    peers = write_json(tmp_path / "peers.json", [
        row("cudnn", 64, 468.0, 436.0, dtype="torch.bfloat16"),
        row("cudnn", 127, error="RuntimeError: No available kernel.", dtype="torch.bfloat16"),
        row("cudnn", 512, error="RuntimeError: No available kernel.", dtype="torch.bfloat16"),
        row("flash", 64, 300.0, 267.0, dtype="torch.bfloat16"),
        row("flash", 127, 317.0, 277.0, dtype="torch.bfloat16"),
        row("efficient", 512, 136.0, dtype="torch.bfloat16", bwd_error="OutOfMemoryError: CUDA"),
        # Another shape: must not leak into the non-causal plot or table.
        row("flash", 64, 999.0, 999.0, dtype="torch.bfloat16", **{"causal": True}),
    ], gemm_bf16_tflops=GEMM_TFLOPS - 1)
    return [flashgen, peers]


def png_size(path):
    """(width, height) from the PNG header, without an image library."""
    data = open(path, "rb").read(24)
    assert data[:8] == PNG_SIGNATURE, "not a PNG file"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("name, expected", [
    ("torch.bfloat16", "bf16"), ("bfloat16", "bf16"), ("BF16", "bf16"), ("bf16", "bf16"),
    ("torch.float16", "fp16"), ("half", "fp16"), ("float32", "fp32"), (None, None),
])
def test_normalise_dtype(name, expected):
    assert plot.normalise_dtype(name) == expected


def test_load_results_normalises_dtype_and_finds_ceiling(sample_files):
    results = plot.load_results(sample_files)
    assert {r["dtype"] for result in results for r in result["rows"]} == {"bf16"}
    assert results[0]["ceiling"] == GEMM_TFLOPS
    assert results[1]["ceiling"] == GEMM_TFLOPS - 1  # from "gemm_bf16_tflops"
    assert plot.find_ceiling(results) == GEMM_TFLOPS
    assert plot.find_ceiling(results, override=500.0) == 500.0


def test_load_results_rejects_rows_without_backend(tmp_path):
    path = write_json(tmp_path / "bad.json", [{"D": 64}])
    with pytest.raises(ValueError, match="no 'backend'"):
        plot.load_results([path])


def test_select_shape_defaults_to_non_causal(sample_files):
    results = plot.load_results(sample_files)
    assert plot.select_shape(results) == (2, 16, 8192, False)
    assert plot.select_shape(results, causal=True) == (2, 16, 8192, True)


def test_series_leaves_refused_shapes_out_and_splits_atomic(sample_files):
    results = plot.load_results(sample_files)
    series = plot.collect_series(results, plot.select_shape(results), "bf16")
    assert list(series) == ["flashgen", "flashgen_atomic", "cudnn", "flash", "efficient"]
    assert series["cudnn"][127] == {"refused": True}
    assert series["cudnn"][64] == {"fwd": 468.0, "bwd": 436.0}
    assert series["flash"][64]["fwd"] == 300.0  # the causal 999 stays out
    assert series["flashgen_atomic"][127] == {"bwd": 270.0}
    assert series["efficient"][512] == {"fwd": 136.0}  # backward refused alone


def test_measured_value_wins_over_refusal_from_another_file(tmp_path):
    first = write_json(tmp_path / "a.json", [row("flash", 64, 300.0, 250.0)])
    second = write_json(tmp_path / "b.json", [row("flash", 64, error="RuntimeError: x")])
    series = plot.collect_series(plot.load_results([first, second]))
    assert series["flash"][64] == {"fwd": 300.0, "bwd": 250.0}


def test_table_marks_refused_with_dash_and_unmeasured_with_na(sample_files):
    results = plot.load_results(sample_files)
    series = plot.collect_series(results, plot.select_shape(results), "bf16")
    table = plot.markdown_table(series, dims=(64, 127, 512, 40))
    lines = table.strip().splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == ["D", "flashgen", "flashgen (atomic dQ), bwd", "cuDNN (SDPA)", "FA2 (SDPA FLASH)",
                      "SDPA EFFICIENT", "best fwd", "best bwd"]
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
             for line in lines[2:]}
    assert cells["64"] == ["64", "400/300", "320", "468/436", "300/267", "n/a",
                           "cuDNN (SDPA): 468", "cuDNN (SDPA): 436"]
    assert cells["127"][3] == "-"
    assert cells["512"][3] == "-"
    assert cells["512"][5] == "136/-"
    assert cells["512"][6:] == ["flashgen: 300", "flashgen (atomic dQ): 210"]
    assert cells["40"][1:] == ["n/a"] * 5 + ["-", "-"]


def test_main_prints_table_to_stdout(sample_files, capsys):
    plot.main(sample_files + ["--table"])
    out = capsys.readouterr().out
    assert "NVIDIA H200: bf16, B=2, H=16, N=8192, non-causal" in out
    assert "| 127 | 350/260 | 270 | - | 317/277 | n/a |" in out


def test_main_requires_an_output(sample_files):
    with pytest.raises(SystemExit):
        plot.main(sample_files)


def test_renders_png(sample_files, tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib not installed: PNG rendering not tested")
    output = tmp_path / "sweep.png"
    plot.main(sample_files + ["-o", str(output)])
    width, height = png_size(output)
    assert (width, height) == (plot.FIGURE_SIZE_IN[0] * plot.FIGURE_DPI,
                               plot.FIGURE_SIZE_IN[1] * plot.FIGURE_DPI)


def test_renders_png_without_ceiling_or_flashgen(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib not installed: PNG rendering not tested")
    only_refusals = write_json(tmp_path / "p.json", [row("cudnn", 4, error="RuntimeError: x"),
                                                     row("flex", 257, 28.0, 23.0)])
    output = tmp_path / "peers.png"
    plot.main([only_refusals, "-o", str(output)])
    assert png_size(output)[0] > 0


def test_one_gpu_named_with_and_without_its_arch_is_named_once():
    results = [{"device": "NVIDIA H200 (sm_90a)"}, {"device": "NVIDIA H200"}]
    assert plot.find_device(results) == "NVIDIA H200 (sm_90a)"
    results.append({"device": "NVIDIA H100"})
    assert plot.find_device(results) == "NVIDIA H100 / NVIDIA H200 (sm_90a)"
