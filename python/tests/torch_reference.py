"""References and helpers for the PyTorch tests (imported only after torch is).

The reference is F.scaled_dot_product_attention on float64 inputs with the
math backend. The naive same-dtype computation (FlashAttention's attention_ref
with upcast=False: matmuls in the low dtype, softmax in fp32 then rounded)
sets the tolerance: max |out - ref| <= 2 * max |naive - ref| + atol.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F

import flashgen
from attention_reference import ATOL

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # PyTorch < 2.3: float64 SDPA runs the math backend anyway
    SDPBackend = None

DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}


def cuda_ready() -> bool:
    return torch.cuda.is_available() and flashgen.cuda_available()


CUDA = pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not cuda_ready(), reason="no CUDA GPU that flashgen can use")])
DEVICES = ["cpu", CUDA]


def math_backend():
    return sdpa_kernel(SDPBackend.MATH) if SDPBackend is not None else contextlib.nullcontext()


def to_bhsd(t: torch.Tensor, layout: str) -> torch.Tensor:
    return t if layout == "bhsd" else t.transpose(1, 2)


def from_bhsd(t: torch.Tensor, layout: str) -> torch.Tensor:
    return t if layout == "bhsd" else t.transpose(1, 2)


def causal_mask(seq_q: int, seq_kv: int, device) -> torch.Tensor:
    """[seq_q, seq_kv] True where query i may see key j (bottom-right aligned)."""
    i = torch.arange(seq_q, device=device)[:, None]
    j = torch.arange(seq_kv, device=device)[None, :]
    return j <= i + seq_kv - seq_q


def _expand_kv(q, k, v):
    """Repeats kv heads ([b, h, s, d]) so query head h reads kv head h // group."""
    group = q.shape[1] // k.shape[1]
    return k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)


def sdpa_reference(q, k, v, *, causal: bool, scale, layout: str):
    """(o, lse) in float64, o in the given layout, lse [b, h, s_q]."""
    q, k, v = (to_bhsd(t, layout).double() for t in (q, k, v))
    k, v = _expand_kv(q, k, v)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    mask = causal_mask(q.shape[2], k.shape[2], q.device) if causal else None
    with math_backend():
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    scores = scale * q @ k.transpose(-1, -2)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return from_bhsd(o, layout), torch.logsumexp(scores, dim=-1)


def naive_attention(q, k, v, *, causal: bool, scale, layout: str):
    """(o, lse) computed in q's dtype the plain way, differentiable."""
    q, k, v = (to_bhsd(t, layout) for t in (q, k, v))
    k, v = _expand_kv(q, k, v)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-1, -2)) * scale  # [b, h, s_q, s_kv] in the low dtype
    if causal:
        scores = scores.masked_fill(~causal_mask(q.shape[2], k.shape[2], q.device),
                                    float("-inf"))
    p = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    return from_bhsd(p @ v, layout), torch.logsumexp(scores.float(), dim=-1)


def max_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref|; NaN or a mismatched infinity counts as infinite."""
    assert out.shape == ref.shape, f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    if out.numel() == 0:
        return 0.0
    out, ref = out.double(), ref.double()
    diff = torch.where(torch.isinf(ref) & (out == ref), torch.zeros_like(ref), (out - ref).abs())
    return float("inf") if torch.isnan(diff).any() else diff.max().item()


def assert_close(name: str, out, ref, naive, dtype: torch.dtype) -> None:
    dtype_name = DTYPE_NAMES[dtype]
    error, naive_error = max_error(out, ref), max_error(naive, ref)
    bound = 2 * naive_error + ATOL[dtype_name]
    assert error <= bound, (f"{name}: max error {error:.3g} > bound {bound:.3g} "
                            f"(naive {dtype_name} error {naive_error:.3g})")


def random_inputs(shape, dtype, device, layout="bshd", seed=0, requires_grad=True):
    """q, k, v, do packed in `layout` for (batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v)."""
    batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v = shape
    generator = torch.Generator(device="cpu").manual_seed(seed)

    def make(seq, heads, dim, grad):
        dims = (batch, seq, heads, dim) if layout == "bshd" else (batch, heads, seq, dim)
        t = torch.randn(dims, generator=generator, dtype=torch.float32).to(device, dtype)
        return t.requires_grad_(grad)

    return (make(seq_q, heads_q, dim_qk, requires_grad), make(seq_kv, heads_kv, dim_qk, requires_grad),
            make(seq_kv, heads_kv, dim_v, requires_grad), make(seq_q, heads_q, dim_v, False))


def check_against_reference(q, k, v, do, *, causal=False, scale=None, layout="bshd",
                            deterministic=True):
    """Runs flashgen forward + backward and checks o, lse, dq, dk, dv."""
    o, lse = flashgen.attention(q, k, v, causal=causal, scale=scale, layout=layout,
                                deterministic=deterministic, return_lse=True)
    grads = torch.autograd.grad(o, (q, k, v), do)

    leaves64 = [t.detach().double().requires_grad_() for t in (q, k, v)]
    o_ref, lse_ref = sdpa_reference(*leaves64, causal=causal, scale=scale, layout=layout)
    grads_ref = torch.autograd.grad(o_ref, leaves64, do.double())

    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    o_naive, lse_naive = naive_attention(*leaves, causal=causal, scale=scale, layout=layout)
    grads_naive = torch.autograd.grad(o_naive, leaves, do)

    assert o.shape == o_ref.shape and o.dtype == q.dtype and o.device == q.device
    assert lse.dtype == torch.float32 and not lse.requires_grad
    assert_close("o", o, o_ref, o_naive, q.dtype)
    assert_close("lse", lse, lse_ref, lse_naive, q.dtype)
    for name, grad, grad_ref, grad_naive in zip(("dq", "dk", "dv"), grads, grads_ref, grads_naive):
        assert_close(name, grad, grad_ref, grad_naive, q.dtype)
    return o, grads
