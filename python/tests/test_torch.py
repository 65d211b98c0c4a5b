"""flashgen.attention on torch tensors against F.scaled_dot_product_attention in
float64. Skipped where PyTorch is missing; CUDA cases skipped without a GPU."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import flashgen  # noqa: E402
from flashgen._torch_ops import SCORE_OPTIONS_OFF  # noqa: E402
from torch_reference import (CUDA, DEVICES, check_against_reference, cuda_ready,  # noqa: E402
                             random_inputs)

HEAD_DIMS = [1, 40, 127, 199, 257, 385, 512]
# Sequence lengths per device: the GPU gets several tiles with ragged edges.
SEQ = {"cpu": (37, 50), "cuda": (257, 301)}
DTYPES = {"cpu": [torch.float32, torch.float16, torch.bfloat16],
          "cuda": [torch.float16, torch.bfloat16]}


def _dtype_cases():
    for device in DEVICES:
        name = device if isinstance(device, str) else device.values[0]
        marks = () if isinstance(device, str) else device.marks
        for dtype in DTYPES[name]:
            yield pytest.param(name, dtype, marks=marks, id=f"{name}-{str(dtype)[6:]}")


DTYPE_CASES = list(_dtype_cases())


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dim", HEAD_DIMS, ids=lambda d: f"d{d}")
@pytest.mark.parametrize("device, dtype", DTYPE_CASES)
def test_head_dims_forward_and_backward(device, dtype, dim, causal):
    seq_q, seq_kv = SEQ[device]
    shape = (2, seq_q, seq_kv, 4, 2, dim, dim)  # GQA: 2 query heads per kv head
    check_against_reference(*random_inputs(shape, dtype, device), causal=causal)


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("device, dtype", DTYPE_CASES)
def test_layouts_mqa_and_distinct_value_dim(device, dtype, layout):
    seq_q, seq_kv = SEQ[device]
    shape = (2, seq_q, seq_kv, 6, 1, 72, 40)  # MQA, dim_v != dim_qk
    q, k, v, do = random_inputs(shape, dtype, device, layout)
    o, grads = check_against_reference(q, k, v, do, causal=True, scale=0.2, layout=layout)
    # Outputs are packed in the caller's layout; gradients like their inputs.
    assert o.is_contiguous()
    for grad, leaf in zip(grads, (q, k, v)):
        assert grad.stride() == leaf.stride()


@pytest.mark.parametrize("device", DEVICES)
def test_nondeterministic_backward_is_still_correct(device):
    """deterministic=False lets the planner pick the atomic backward on a GPU."""
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    seq_q, seq_kv = SEQ[device]
    q, k, v, do = random_inputs((2, seq_q, seq_kv, 8, 2, 96, 96), dtype, device)
    check_against_reference(q, k, v, do, causal=True, deterministic=False)


class _CopyWatcher(TorchDispatchMode):
    """Records every aten op that copies tensor data."""

    COPYING = ("copy", "clone", "contiguous", "_to_copy", "cat", "stack", "pad")

    def __init__(self):
        super().__init__()
        self.copies = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__
        if any(name.startswith(prefix) for prefix in self.COPYING):
            self.copies.append(name)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("device", DEVICES)
def test_strided_inputs_are_read_in_place(device):
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    seq_q, seq_kv = SEQ[device]
    batch, heads_q, heads_kv, dim = 2, 4, 2, 40
    generator = torch.Generator().manual_seed(1)

    def rand(*shape):
        return torch.randn(shape, generator=generator).to(device, dtype)

    # q: rows longer than dim; k: every other position; v: heads-major memory.
    q = rand(batch, seq_q, heads_q, dim + 24)[..., :dim].requires_grad_()
    k = rand(batch, 2 * seq_kv, heads_kv, dim)[:, ::2].requires_grad_()
    v = rand(batch, heads_kv, seq_kv, dim).transpose(1, 2).requires_grad_()
    do = rand(batch, heads_q, seq_q, dim).transpose(1, 2)
    assert not any(t.is_contiguous() for t in (q, k, v, do))
    with _CopyWatcher() as watcher:
        flashgen.attention(q, k, v, causal=True)
    assert watcher.copies == [], f"inputs were copied: {watcher.copies}"
    check_against_reference(q, k, v, do, causal=True)


@pytest.mark.parametrize("device", DEVICES)
def test_fully_masked_rows_and_empty_problems(device):
    dtype = torch.float32 if device == "cpu" else torch.float16
    # causal with seq_q > seq_kv: the first seq_q - seq_kv rows see no key
    q, k, v, do = random_inputs((1, 12, 4, 2, 2, 16, 16), dtype, device)
    o, lse = flashgen.attention(q, k, v, causal=True, return_lse=True)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    assert torch.all(o[:, :8] == 0) and torch.all(torch.isneginf(lse[:, :, :8]))
    assert torch.all(torch.isfinite(o)) and torch.all(torch.isfinite(lse[:, :, 8:]))
    assert torch.all(dq[:, :8] == 0)
    assert all(torch.isfinite(g).all() for g in (dq, dk, dv))

    q, k, v, _ = random_inputs((1, 5, 0, 2, 2, 16, 16), dtype, device)  # no keys at all
    o, lse = flashgen.attention(q, k, v, return_lse=True)
    assert torch.all(o == 0) and torch.all(torch.isneginf(lse))


@pytest.mark.parametrize("device", DEVICES)
def test_repeated_calls_read_each_calls_tensors(device):
    # A repeated signature reuses its prepared views: each call must still
    # read its own tensors and write its own outputs, with and without
    # autograd, and a call with other strides must not take the same views.
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    seq_q, seq_kv = SEQ[device]
    shape = (2, seq_q, seq_kv, 4, 2, 40, 40)
    for seed in (1, 2):
        q, k, v, do = random_inputs(shape, dtype, device, seed=seed)
        check_against_reference(q, k, v, do, causal=True)
        with torch.no_grad():
            o_inference = flashgen.attention(q, k, v, causal=True)
        assert not o_inference.requires_grad
        assert torch.equal(o_inference, flashgen.attention(q, k, v, causal=True).detach())
    q, k, v, do = random_inputs(shape, dtype, device, seed=3)
    heads_major = [t.detach().transpose(1, 2).contiguous().transpose(1, 2).requires_grad_()
                   for t in (q, k, v)]
    assert heads_major[0].stride() != q.stride()
    check_against_reference(*heads_major, do, causal=True)


@pytest.mark.parametrize("device", DEVICES)
def test_backward_is_bit_identical_run_to_run(device):
    dtype = torch.float16
    seq_q, seq_kv = SEQ[device]
    q, k, v, do = random_inputs((2, seq_q, seq_kv, 8, 2, 64, 64), dtype, device)
    o = flashgen.attention(q, k, v, causal=True)
    first = torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
    second = torch.autograd.grad(o, (q, k, v), do)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_custom_ops_pass_opcheck(device):
    opcheck = getattr(torch.library, "opcheck", None)
    if opcheck is None or not hasattr(torch.ops.flashgen, "attention_forward"):
        pytest.skip("PyTorch without torch.library.custom_op / opcheck")
    q, k, v, do = random_inputs((1, 9, 13, 4, 2, 24, 16), torch.float16, device)
    off = SCORE_OPTIONS_OFF  # no mask or score modifier
    opcheck(torch.ops.flashgen.attention_forward.default, (q, k, v, True, None, True, False, *off))
    o, lse = torch.ops.flashgen.attention_forward(q, k, v, True, None, True, False, *off)
    opcheck(torch.ops.flashgen.attention_backward.default,
            (do, q.detach(), k.detach(), v.detach(), o.detach(), lse, True, None, True, False,
             *off))


@CUDA.marks[0]
@pytest.mark.skipif(not cuda_ready(), reason="no CUDA GPU that flashgen can use")
def test_runs_on_the_current_stream_and_device():
    q, k, v, do = random_inputs((2, 300, 300, 4, 4, 64, 64), torch.bfloat16, "cuda")
    expected = flashgen.attention(q, k, v)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        on_side = flashgen.attention(q, k, v)
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(on_side, expected)


@CUDA.marks[0]
@pytest.mark.skipif(not cuda_ready(), reason="no CUDA GPU that flashgen can use")
def test_float32_on_cuda_runs_or_says_unsupported():
    q, k, v, _ = random_inputs((1, 64, 64, 2, 2, 64, 64), torch.float32, "cuda")
    try:
        flashgen.attention(q, k, v)
    except flashgen.UnsupportedError as error:
        assert "f32" in str(error)


# --- bad input: raised before anything runs -------------------------------------------------

def _small(dtype=torch.float32, device="cpu", heads_kv=2):
    return random_inputs((1, 8, 8, 4, heads_kv, 16, 16), dtype, device, requires_grad=False)[:3]


def test_float64_is_a_type_error():
    q, k, v = _small(torch.float64)
    with pytest.raises(TypeError, match=r"q: dtype torch.float64 is not supported"):
        flashgen.attention(q, k, v)


def test_mixed_dtypes_are_a_type_error():
    q, k, v = _small()
    with pytest.raises(TypeError, match=r"v has dtype torch.float16 but q has torch.float32"):
        flashgen.attention(q, k, v.half())


def test_wrong_rank_layout_and_device_are_value_errors():
    q, k, v = _small()
    with pytest.raises(ValueError, match=r"k must have 4 dimensions"):
        flashgen.attention(q, k[0], v)
    with pytest.raises(ValueError, match=r"layout must be one of"):
        flashgen.attention(q, k, v, layout="sbhd")
    with pytest.raises(ValueError, match=r"flashgen runs on CPU and CUDA tensors"):
        flashgen.attention(q.to("meta"), k.to("meta"), v.to("meta"))


@CUDA.marks[0]
@pytest.mark.skipif(not cuda_ready(), reason="no CUDA GPU that flashgen can use")
def test_device_mismatch_is_a_value_error():
    q, k, v = _small(torch.float16)
    with pytest.raises(ValueError, match=r"k is on cuda:0 but q is on cpu"):
        flashgen.attention(q, k.cuda(), v.cuda())


@pytest.mark.parametrize("name, value, message", [
    ("causal", "False", r"causal must be a bool"),
    ("causal", 1, r"causal must be a bool"),
    ("scale", "0.1", r"scale must be a real number or None"),
    ("deterministic", "yes", r"deterministic must be a bool"),
    ("return_lse", 1, r"return_lse must be a bool"),
])
def test_arguments_of_another_type_are_type_errors(name, value, message):
    q, k, v = _small()
    with pytest.raises(TypeError, match=message):
        flashgen.attention(q, k, v, **{name: value})


@pytest.mark.parametrize("device", DEVICES)
def test_batch_and_heads_zero_give_empty_outputs(device):
    dtype = torch.float32 if device == "cpu" else torch.float16
    for shape in [(0, 9, 11, 4, 2, 16, 24), (2, 9, 11, 0, 2, 16, 24)]:
        q, k, v, do = random_inputs(shape, dtype, device)
        o, lse = flashgen.attention(q, k, v, causal=True, return_lse=True)
        assert o.shape == q.shape[:3] + (24,) and lse.shape == (shape[0], shape[3], 9)
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), do, allow_unused=True)
        assert dq.shape == q.shape and torch.all(dk == 0) and torch.all(dv == 0)
    q, k, v, _ = random_inputs((0, 9, 11, 4, 2, 16, 16), dtype, device, layout="bhsd",
                               requires_grad=False)
    assert flashgen.attention(q, k, v, layout="bhsd").shape == (0, 4, 9, 16)


def test_library_rules_are_value_errors():
    q, k, v = _small(heads_kv=3)
    with pytest.raises(ValueError, match=r"must divide q.shape\[2\]"):
        flashgen.attention(q, k, v)


def test_autograd_function_fallback_for_pytorch_without_custom_op():
    """Before PyTorch 2.4 (no torch.library.custom_op) a plain autograd.Function runs."""
    code = ("import torch\n"
            "del torch.library.custom_op\n"
            "import flashgen\n"
            "from flashgen import _torch_ops\n"
            "assert not _torch_ops._HAS_CUSTOM_OP\n"
            "torch.manual_seed(0)\n"
            "q, k, v = (torch.randn(1, 9, 2, 16, requires_grad=True) for _ in range(3))\n"
            "o = flashgen.attention(q, k, v, causal=True)\n"
            "ref = torch.nn.functional.scaled_dot_product_attention(\n"
            "    *(t.transpose(1, 2) for t in (q, k, v)), is_causal=True).transpose(1, 2)\n"
            "grads = torch.autograd.grad(o.sum(), (q, k, v))\n"
            "grads_ref = torch.autograd.grad(ref.sum(), (q, k, v))\n"
            "assert (o - ref).abs().max() < 1e-5\n"
            "assert all((a - b).abs().max() < 1e-5 for a, b in zip(grads, grads_ref))\n"
            "print('ok')\n")
    package_dir = str(pathlib.Path(flashgen.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package_dir, *filter(None, [os.environ.get("PYTHONPATH")])]))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_cpu_calls_follow_torch_thread_count():
    from flashgen._torch_views import options_for

    before = torch.get_num_threads()
    try:
        for threads in (1, 3):
            torch.set_num_threads(threads)
            options = options_for(torch.device("cpu"), causal=False, scale=None,
                                  deterministic=True)
            assert options.cpu_threads == threads
    finally:
        torch.set_num_threads(before)
