"""bench/peers.py helpers that need no GPU: sweep, FLOP and instruction counts."""

import argparse
import pathlib
import subprocess
import sys

import pytest

import bench_peers as peers

PEERS_SCRIPT = pathlib.Path(peers.__file__)
DEFAULT_SHAPE = argparse.Namespace(batch=2, heads=16, seq=8192, causal=False, dtype="bf16")


def test_sweep_dims():
    dims = peers.sweep_dims()
    assert dims == sorted(set(dims))
    assert dims[:3] == [4, 8, 12] and dims[-3:] == [385, 448, 512]
    assert len(dims) == 24 + 8 + 6 + 4 + 6
    for odd in (127, 199, 257, 385):
        assert odd in dims
    assert 100 not in dims and 104 in dims and 168 not in dims and 176 in dims
    assert 272 not in dims and 288 in dims and 416 not in dims


def test_forward_and_backward_flops():
    # 4 * B * H * N^2 * D for B=2, H=16, N=8192, D=64.
    assert peers.forward_flops(2, 16, 8192, 64, False) == 4 * 2 * 16 * 8192 ** 2 * 64
    assert peers.forward_flops(2, 16, 8192, 64, True) == 2 * 2 * 16 * 8192 ** 2 * 64
    assert peers.backward_flops(1, 1, 128, 32, False) == 2.5 * peers.forward_flops(1, 1, 128, 32, False)
    assert peers.tflops(1e12, 1000.0) == pytest.approx(1.0)


def test_instruction_counts():
    assert peers.forward_instructions(1, 1, 10, 4, False) == (2 * 4 + 5) * 100
    assert peers.backward_instructions(1, 1, 10, 4, False) == ((3 * 4 + 5) + (4 * 4 + 5)) * 100
    assert peers.ginstrs(1e9, 1000.0) == pytest.approx(1.0)


def test_timing_fields_match_the_published_peer_sweep():
    # flash, D=4, from the shared H200 sweep (B=2, H=16, N=8192, non-causal).
    fwd = peers.timing_fields("fwd", 1.6028800010681152, 4, DEFAULT_SHAPE)
    bwd = peers.timing_fields("bwd", 4.190944194793701, 4, DEFAULT_SHAPE)
    assert fwd["fwd_tflops"] == pytest.approx(21.436251213505447, rel=1e-9)
    assert fwd["fwd_ginstrs"] == pytest.approx(17416.95411097318, rel=1e-9)
    assert bwd["bwd_tflops"] == pytest.approx(20.49641845069435, rel=1e-9)
    assert bwd["bwd_ginstrs"] == pytest.approx(19471.597528159633, rel=1e-9)


def test_causal_timing_matches_the_published_peer_sweep():
    # flash, D=64, causal: FLOPs halved, instruction count not.
    shape = argparse.Namespace(**{**vars(DEFAULT_SHAPE), "causal": True})
    fwd = peers.timing_fields("fwd", 1.01692795753479, 64, shape)
    assert fwd["fwd_tflops"] == pytest.approx(270.30224206870247, rel=1e-9)
    assert fwd["fwd_ginstrs"] == pytest.approx(280860.92339951114, rel=1e-9)


def test_input_sets_cover_l2():
    l2_bytes = 50 * 1024 * 1024
    assert peers.input_sets_needed(8 * 1024 * 1024, l2_bytes) == 13  # 2 * 50 / 8, rounded up
    assert peers.input_sets_needed(1 << 30, l2_bytes) == peers.MIN_INPUT_SETS
    assert peers.input_sets_needed(1, l2_bytes) == peers.MAX_INPUT_SETS


def test_one_line_error():
    text = peers.one_line_error(RuntimeError("No valid configs.\n  Required: 262144\n" + "x" * 500))
    assert text.startswith("RuntimeError: No valid configs. Required: 262144")
    assert "\n" not in text and len(text) == peers.ERROR_MESSAGE_CHARS


def test_parse_lists():
    assert peers.parse_int_list("64, 128,", "--dims") == [64, 128]
    with pytest.raises(ValueError, match="--dims"):
        peers.parse_int_list("64,0", "--dims")
    assert peers.parse_backends("flash,flex") == ["flash", "flex"]
    with pytest.raises(ValueError, match="math"):
        peers.parse_backends("flash,math")


def test_progress_line():
    row = {"fwd_ms": 0.98, "fwd_tflops": 300.2, "bwd_ms": 2.5, "bwd_tflops": 250.0}
    assert peers.progress_line(12, 48, 64, "flash", row) == \
        "[12/48] D=64 flash fwd 0.980 ms (300 TFLOP/s) bwd 2.500 ms (250 TFLOP/s)"
    assert peers.progress_line(1, 48, 4, "cudnn", {"error": "RuntimeError: x"}) == \
        "[1/48] D=4 cudnn refused: RuntimeError: x"


def test_parse_args_rejects_bad_input():
    with pytest.raises(SystemExit):
        peers.parse_args(["--sweep", "--dims", "64"])
    with pytest.raises(SystemExit):
        peers.parse_args(["--backends", "flash,nope"])
    args = peers.parse_args(["--dims", "40,127", "--causal"])
    assert args.dims == "40,127" and args.causal and args.repeats == 20


def test_help_runs_without_a_gpu():
    result = subprocess.run([sys.executable, str(PEERS_SCRIPT), "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "--sweep" in result.stdout and "--backends" in result.stdout


# ----------------------------------------------------------------------------
# Timing and error-handling control flow, with a fake torch.cuda whose clock
# advances only when a fake kernel runs.
# ----------------------------------------------------------------------------

class FakeClock:
    def __init__(self):
        self.now_s = 0.0

    def perf_counter(self):
        return self.now_s


class FakeEvent:
    clock = None

    def __init__(self, enable_timing=False):
        self.at_s = None

    def record(self):
        self.at_s = FakeEvent.clock.now_s

    def elapsed_time(self, end):
        return (end.at_s - self.at_s) * 1e3


@pytest.fixture
def fake_torch(monkeypatch):
    clock = FakeClock()
    FakeEvent.clock = clock
    cuda = argparse.Namespace(Event=FakeEvent, synchronize=lambda: None, empty_cache=lambda: None)
    fake = argparse.Namespace(cuda=cuda, autograd=argparse.Namespace(grad=None))
    monkeypatch.setattr(peers, "torch", fake)
    monkeypatch.setattr(peers, "time", clock)
    return fake, clock


def kernel(clock, seconds, calls):
    def call(i):
        clock.now_s += seconds
        calls.append(i)
    return call


def test_time_calls_fast_kernel_gets_all_repeats(fake_torch):
    _, clock = fake_torch
    calls = []
    ms = peers.time_calls(kernel(clock, 1e-3, calls), count=3, warmup=5, repeats=20, budget_s=1.0)
    assert ms == pytest.approx(1.0)
    assert len(calls) == 5 + 20  # warm-up (first call included) + repeats
    assert calls[5:11] == [0, 1, 2, 0, 1, 2]  # timed calls rotate over the input sets


def test_time_calls_slow_kernel_stops_at_budget(fake_torch):
    _, clock = fake_torch
    calls = []
    ms = peers.time_calls(kernel(clock, 0.4, calls), count=2, warmup=5, repeats=20, budget_s=1.0)
    assert ms == pytest.approx(400.0)
    # First call, warm-up until half the budget (2 more), then MIN_REPEATS timed.
    assert len(calls) == 3 + peers.MIN_REPEATS


def test_time_calls_unbounded_budget(fake_torch):
    _, clock = fake_torch
    calls = []
    peers.time_calls(kernel(clock, 0.5, calls), count=2, warmup=2, repeats=7, budget_s=float("inf"))
    assert len(calls) == 2 + 7


def test_measure_backend_records_refusal_as_one_line(fake_torch, monkeypatch):
    def refuse(dim, args):
        raise RuntimeError("CUDA out of memory.\nTried to allocate 2 GiB")
    monkeypatch.setattr(peers, "make_inputs", refuse)
    args = argparse.Namespace(**vars(DEFAULT_SHAPE), warmup=2, repeats=3, time_budget_s=1.0)
    row = peers.measure_backend("cudnn", 4, args)
    assert row == {"backend": "cudnn", "D": 4, "N": 8192, "B": 2, "H": 16, "causal": False,
                   "dtype": "bf16", "error": "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB"}


def test_measure_backend_keeps_forward_when_backward_fails(fake_torch, monkeypatch):
    fake, clock = fake_torch
    monkeypatch.setattr(peers, "make_inputs", lambda dim, args: [{"q": 0, "k": 0, "v": 0, "grad_out": 0}] * 2)

    def attention(q, k, v):
        clock.now_s += 2e-3
    monkeypatch.setattr(peers, "prepare_attention", lambda backend, first, row, args: attention)

    def no_backward(*args, **kwargs):
        raise NotImplementedError("no backward for this shape")
    fake.autograd.grad = no_backward
    args = argparse.Namespace(**vars(DEFAULT_SHAPE), warmup=2, repeats=3, time_budget_s=1.0)
    row = peers.measure_backend("efficient", 512, args)
    assert row["fwd_ms"] == pytest.approx(2.0)
    assert row["fwd_tflops"] == pytest.approx(peers.forward_flops(2, 16, 8192, 512, False) / 2e-3 / 1e12)
    assert row["bwd_error"] == "NotImplementedError: no backward for this shape"
    assert "bwd_ms" not in row and "error" not in row
