"""bench/workloads.py without a GPU: the suite, FLOP and pair counts, the report."""

import json

import pytest

import bench_workloads as workloads


def test_suite_loads_and_filters():
    rows, host = workloads.load_suite(workloads.DEFAULT_SUITE)
    assert len(rows) >= 20 and len(host) >= 1
    names = [w.name for w in rows]
    assert len(names) == len(set(names))
    assert any(w.heads_q != w.heads_kv and w.causal for w in rows)      # GQA causal
    assert any(w.seq_q != w.seq_kv for w in rows)                       # chunked prefill
    assert any(w.dim_v != w.dim_qk for w in rows)
    assert {127, 199, 257, 385, 512} <= {w.dim_qk for w in rows}
    decode = [w for w in rows if w.seq_q == 1]
    assert decode and all(not w.backward and w.heads_q > w.heads_kv for w in decode)
    assert all("backward" not in w.shape() for w in rows)
    only, _ = workloads.load_suite(workloads.DEFAULT_SUITE, only="D=127")
    assert [w.dim_qk for w in only] == [127, 127]


def test_probe_rows_load():
    """bench/lab/probe_rows.json (bench/kernel_times.py --suite) holds valid rows."""
    path = workloads.DEFAULT_SUITE.parent / "lab" / "probe_rows.json"
    rows, host = workloads.load_suite(path)
    assert rows and not host
    assert any(w.window != (-1, -1) for w in rows) and any(w.documents for w in rows)


def test_workload_defaults_and_errors():
    w = workloads.Workload(name="x", batch=1, heads_q=4, seq_q=10, dim_qk=8, causal=False)
    assert (w.heads_kv, w.seq_kv, w.dim_v) == (4, 10, 8)
    with pytest.raises(ValueError, match="heads_kv"):
        workloads.Workload(name="x", batch=1, heads_q=4, heads_kv=3, seq_q=10, dim_qk=8, causal=False)
    with pytest.raises(ValueError, match="seq_q"):
        workloads.Workload(name="x", batch=1, heads_q=4, seq_q=0, dim_qk=8, causal=False)


def test_attended_pairs_bottom_right():
    assert workloads.attended_pairs(4, 4, False) == 16
    assert workloads.attended_pairs(4, 4, True) == 4 + 3 + 2 + 1
    # 2 queries over 5 keys: the last sees all 5, the one before 4.
    assert workloads.attended_pairs(2, 5, True) == 9
    # More queries than keys: the first rows see nothing.
    assert workloads.attended_pairs(5, 2, True) == 0 + 0 + 0 + 1 + 2


def test_attended_pairs_with_a_window():
    # Query i's diagonal is key i + (Skv - Sq); left 1: the diagonal and the key before it.
    assert workloads.attended_pairs(4, 4, True, (1, 0)) == 1 + 2 + 2 + 2
    assert workloads.attended_pairs(4, 4, False, (0, 1)) == 2 + 2 + 2 + 1
    assert workloads.attended_pairs(2, 5, False, (-1, 0)) == 4 + 5
    assert workloads.attended_pairs(3, 3, True, (-1, 5)) == workloads.attended_pairs(3, 3, True)


def test_attended_pairs_of_packed_documents():
    assert workloads.attended_pairs(7, 7, False, documents=(3, 4)) == 9 + 16
    assert workloads.attended_pairs(7, 7, True, documents=(3, 4)) == 6 + 10
    packed = workloads.Workload("docs", 1, 2, 7, 64, True, documents=[3, 4])
    assert packed.modified and packed.shape()["documents"] == [3, 4]
    priced = workloads.Workload("decode", 1, 2, 1, 64, False, seq_kv=100, mask_every_pair=True)
    assert priced.modified and priced.shape()["mask_every_pair"] is True
    with pytest.raises(ValueError, match="documents must sum"):
        workloads.Workload("bad", 1, 2, 8, 64, True, documents=[3, 4])


def test_modified_workloads_report_their_modifiers():
    plain = workloads.Workload("plain", 1, 2, 16, 64, True)
    assert "window" not in plain.shape() and not plain.modified
    gemma = workloads.Workload("gemma", 1, 2, 16, 256, True, window=[4, 0], softcap=50.0)
    assert gemma.modified and gemma.shape()["window"] == [4, 0] and gemma.shape()["softcap"] == 50.0
    with pytest.raises(ValueError, match="window must be"):
        workloads.Workload("bad", 1, 2, 16, 64, True, window=(-2, 0))


def test_kv_cache_rows_name_their_layout():
    plain = workloads.Workload("plain", 1, 2, 1, 64, False, seq_kv=256)
    assert "kv_cache" not in plain.shape() and "page_size" not in plain.shape()
    paged = workloads.Workload("paged", 1, 2, 1, 64, False, seq_kv=256, kv_cache=True, page_size=16)
    assert paged.shape()["kv_cache"] and paged.shape()["page_size"] == 16
    with pytest.raises(ValueError, match="page_size"):
        workloads.Workload("bad", 1, 2, 1, 64, False, seq_kv=250, kv_cache=True, page_size=16)
    fp8 = workloads.Workload("fp8", 1, 2, 1, 64, False, seq_kv=256, kv_cache=True, kv_fp8=True)
    assert fp8.shape()["kv_fp8"] and "kv_fp8" not in paged.shape()
    # q and o of 2 heads (2 bytes each), k and v of 256 rows of 2 heads (a byte each)
    assert workloads.io_bytes(fp8) == 2 * 128 * 2 + 256 * 2 * 128
    with pytest.raises(ValueError, match="kv_fp8 is a KV cache's storage"):
        workloads.Workload("bad", 1, 2, 1, 64, False, seq_kv=256, kv_fp8=True)
    with pytest.raises(NotImplementedError, match="flashgen-only"):
        workloads.system_call("cudnn", paged)
    rows, _ = workloads.load_suite(workloads.DEFAULT_SUITE, only="KV cache")
    assert {w.page_size for w in rows} >= {0, 16, 64}


def test_flops_follow_the_flashattention_convention():
    w = workloads.Workload(name="x", batch=2, heads_q=16, seq_q=1024, dim_qk=64, causal=False)
    assert workloads.forward_flops(w) == 4 * 2 * 16 * 1024 ** 2 * 64
    assert workloads.backward_flops(w) == 2.5 * workloads.forward_flops(w)
    mixed = workloads.Workload(name="y", batch=1, heads_q=1, seq_q=8, dim_qk=192, dim_v=128, causal=False)
    assert workloads.forward_flops(mixed) == 2 * 64 * (192 + 128)
    assert workloads.io_bytes(mixed) == 2 * (8 * (192 + 128) * 2)


def synthetic_result():
    shape = {"batch": 1}
    rows = [{"workload": "a", "system": "flashgen", "shape": shape, "fwd_tflops": 500.0, "bwd_tflops": 300.0},
            {"workload": "a", "system": "flashgen atomic", "shape": shape, "bwd_tflops": 420.0},
            {"workload": "a", "system": "cudnn", "shape": shape, "fwd_tflops": 625.0, "bwd_tflops": 400.0},
            {"workload": "a", "system": "flash", "shape": shape, "error": "RuntimeError: no"},
            {"workload": "b", "system": "flashgen", "shape": shape, "fwd_tflops": 100.0, "bwd_tflops": 50.0},
            {"workload": "host: t", "system": "flashgen", "shape": shape, "fwd_wall_us": 40.0,
             "fwd_bwd_wall_us": 300.0}]
    return {"device": "GPU", "date": "2026-12-05", "rows": rows}


def test_summary_ratios_against_the_best_peer():
    summary = {line["workload"]: line for line in workloads.summarize(synthetic_result())}
    assert summary["a"]["fwd"]["ratio"] == pytest.approx(0.8)
    assert summary["a"]["bwd"]["ratio"] == pytest.approx(0.75)
    assert summary["a"]["bwd_any"]["ratio"] == pytest.approx(1.05)
    assert summary["a"]["fwd"]["peer"] == "cudnn"
    assert summary["b"]["fwd"]["ratio"] is None  # no peer ran it
    assert "host: t" not in summary


def test_report_from_json(tmp_path, capsys):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(synthetic_result()))
    workloads.main(["--report", str(path)])
    out = capsys.readouterr().out
    assert "| a | 500 | cuDNN 625 | 0.80 |" in out
    assert "| host: t | flashgen | 40 | 300 |" in out


def test_report_merges_runs_workload_by_workload(tmp_path, capsys):
    """Several files: each workload's forward and backward from the last file that timed it."""
    older = synthetic_result()
    newer = {"device": "d", "date": "later",
             "rows": [{"workload": "a", "system": "flashgen", "fwd_tflops": 700.0},
                      {"workload": "a", "system": "cudnn", "fwd_tflops": 600.0}]}
    paths = []
    for i, result in enumerate((older, newer)):
        paths.append(tmp_path / f"w{i}.json")
        paths[-1].write_text(json.dumps(result))
    merged = workloads.merge_results([older, newer])
    summary = {line["workload"]: line for line in workloads.summarize(merged)}
    assert summary["a"]["fwd"]["ratio"] == pytest.approx(700.0 / 600.0)
    assert summary["a"]["bwd"] == {line["workload"]: line for line in
                                   workloads.summarize(older)}["a"]["bwd"]  # the older run's backward
    assert summary["b"] == {line["workload"]: line for line in workloads.summarize(older)}["b"]
    workloads.main(["--report"] + [str(p) for p in paths])
    assert "| a | 700 | cuDNN 600 | 1.17 |" in capsys.readouterr().out
