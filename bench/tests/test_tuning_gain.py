"""bench/tuning_gain.py: tuned against untuned runs of flashgen bench."""

import json

import bench_tuning_gain as gain


def write_run(path, tflops_by_dim, causal=False):
    rows = [
        {"backend": "flashgen", "D": dim, "causal": causal, "fwd_tflops": fwd, "bwd_tflops": bwd}
        for dim, (fwd, bwd) in tflops_by_dim.items()
    ]
    rows.append({"backend": "cudnn", "D": 64, "causal": causal, "fwd_tflops": 999.0})
    path.write_text(json.dumps({"device": "NVIDIA H200", "rows": rows}))
    return str(path)


def test_gains_per_dim_and_kind(tmp_path, capsys):
    tuned = write_run(tmp_path / "tuned.json", {64: (420.0, 300.0), 128: (460.0, 305.0)})
    default = write_run(tmp_path / "default.json", {64: (400.0, 300.0), 128: (460.0, 310.0)})
    assert gain.main([tuned, default]) == 0
    out = capsys.readouterr().out
    assert "D=64" in out and "fwd  420.0/ 400.0 ( +5.0%)" in out
    assert "no head dimension is slower" in out  # 128's bwd loses 1.6%: within the noise


def test_losses_beyond_the_tolerance_fail(tmp_path, capsys):
    tuned = write_run(tmp_path / "tuned.json", {256: (250.0, 150.0)})
    default = write_run(tmp_path / "default.json", {256: (280.0, 150.0)})
    assert gain.main([tuned, default, "--tolerance", "2"]) == 1
    assert "D=256 fwd: 250.0 against 280.0 (-10.7%)" in capsys.readouterr().out


def test_only_the_asked_mask_and_flashgen_rows(tmp_path):
    tuned = write_run(tmp_path / "tuned.json", {64: (420.0, 300.0)}, causal=True)
    default = write_run(tmp_path / "default.json", {64: (400.0, 300.0)}, causal=True)
    assert gain.main([tuned, default]) == 2  # no non-causal rows
    assert gain.main([tuned, default, "--causal"]) == 0
