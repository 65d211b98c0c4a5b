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


def test_adopt_defaults_rewrites_only_the_losing_rows(tmp_path):
    def run(path, bq, tuning):
        row = {"backend": "flashgen", "D": 192, "N": 8192, "causal": False, "bq_tflops": bq,
               "bwd_tflops": 200.0,
               "kernels": ["backward_query bf16 dqk=192 dv=192 causal=0 vec=8 sm_90a | " + tuning]}
        path.write_text(json.dumps({"device": "NVIDIA H200 (sm_90a)", "driver": "13.0",
                                    "rows": [row]}))
        return str(path)

    def table_row(kind, dim, causal=False):
        return json.dumps({"kind": kind, "dtype": "bf16", "dim_qk_min": dim, "dim_qk_max": dim,
                           "dim_v_min": dim, "dim_v_max": dim, "causal": causal,
                           "seq_min": 4097, "seq_max": 8192, "tuning": "rows=64 old",
                           "tflops": 1.0, "default_tflops": 1.0})

    lines = [table_row("backward_query", 192), table_row("backward_query", 192, True),
             table_row("forward", 192), table_row("backward_query", 176)]
    table = tmp_path / "table.json"
    table.write_text('{\n "rows": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n")
    tuned = run(tmp_path / "tuned.json", 400.0, "rows=64 old")
    default = run(tmp_path / "default.json", 500.0, "rows=128 new")
    assert gain.main([tuned, default, "--adopt-defaults", str(table)]) == 1
    rows = json.loads(table.read_text())["rows"]
    assert rows[0]["tuning"] == "rows=128 new" and rows[0]["tflops"] == 200.0
    assert rows[0]["gpu"] == "NVIDIA H200"
    assert [r["tuning"] for r in rows[1:]] == ["rows=64 old"] * 3  # causal, other kind, other D
