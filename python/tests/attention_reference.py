"""Plain numpy attention, the oracle of the Python tests.

Computed in float64 it is the reference; with every intermediate rounded to a
low dtype it is the "naive same-dtype" computation whose error sets the
tolerance (FlashAttention's rule): max |out - ref| <= 2 * max |naive - ref| + atol.

All arrays are [batch, seq, heads, dim] (bshd); lse is [batch, heads, seq].
"""

from __future__ import annotations

import numpy as np

# atol of the tolerance rule, by dtype name: the error floor of the output's
# own rounding where the naive error happens to be near zero.
ATOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


def no_rounding(x):
    return x


def rounding_to(dtype):
    """Rounds float64 values to dtype and back: one low-precision store."""
    return lambda x: np.asarray(x).astype(dtype).astype(np.float64)


def _expand_heads(t, group: int):
    # [b, s, heads_kv, d] -> [b, s, heads_kv * group, d]; query head h reads kv head h // group
    return np.repeat(t, group, axis=2)


def _sum_groups(t, heads_kv: int):
    # [b, s, heads_kv * group, d] -> [b, s, heads_kv, d]
    b, s, h, d = t.shape
    return t.reshape(b, s, heads_kv, h // heads_kv, d).sum(axis=3)


def _probabilities(q, k, causal: bool, scale: float, rnd):
    """P [b, h, i, j] and natural-log lse [b, h, i]; masked-out rows give P = 0, lse = -inf."""
    group = q.shape[2] // k.shape[2]
    seq_q, seq_kv = q.shape[1], k.shape[1]
    s = rnd(np.einsum("bihd,bjhd->bhij", q, _expand_heads(k, group)) * scale)  # [b, h, i, j]
    if causal:
        i = np.arange(seq_q)[:, None]
        j = np.arange(seq_kv)[None, :]
        s = np.where(j <= i + seq_kv - seq_q, s, -np.inf)  # bottom-right aligned
    row_max = s.max(axis=-1, keepdims=True) if seq_kv else np.full(s.shape[:-1] + (1,), -np.inf)
    masked_row = np.isneginf(row_max)
    safe_max = np.where(masked_row, 0.0, row_max)
    e = np.exp(s - safe_max)  # exp(-inf) = 0 for masked scores
    z = e.sum(axis=-1, keepdims=True)
    p = rnd(np.where(masked_row, 0.0, e / np.where(masked_row, 1.0, z)))
    lse = np.where(masked_row, -np.inf, safe_max + np.log(np.where(masked_row, 1.0, z)))
    return p, lse[..., 0]


def forward(q, k, v, causal: bool = False, scale: float | None = None, rnd=no_rounding):
    """(o [b, i, h, dv], lse [b, h, i]) in float64."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    scale = 1.0 / np.sqrt(q.shape[3]) if scale is None else scale
    group = q.shape[2] // k.shape[2]
    p, lse = _probabilities(q, k, causal, scale, rnd)
    o = rnd(np.einsum("bhij,bjhd->bihd", p, _expand_heads(v, group)))
    return o, lse


def backward(q, k, v, do, causal: bool = False, scale: float | None = None, rnd=no_rounding):
    """(dq, dk, dv) in float64 for dLoss/dO = do."""
    q, k, v, do = (np.asarray(t, dtype=np.float64) for t in (q, k, v, do))
    scale = 1.0 / np.sqrt(q.shape[3]) if scale is None else scale
    heads_kv = k.shape[2]
    group = q.shape[2] // heads_kv
    kx, vx = _expand_heads(k, group), _expand_heads(v, group)
    p, _ = _probabilities(q, k, causal, scale, rnd)
    o = rnd(np.einsum("bhij,bjhd->bihd", p, vx))
    dv = rnd(_sum_groups(np.einsum("bhij,bihd->bjhd", p, do), heads_kv))
    dp = rnd(np.einsum("bihd,bjhd->bhij", do, vx))                    # [b, h, i, j]
    d_term = np.einsum("bihd,bihd->bhi", do, o)[..., None]            # rowsum(dO * O)
    ds = rnd(p * (dp - d_term))
    dq = rnd(scale * np.einsum("bhij,bjhd->bihd", ds, kx))
    dk = rnd(_sum_groups(scale * np.einsum("bhij,bihd->bjhd", ds, q), heads_kv))
    return dq, dk, dv


def max_error(out, ref) -> float:
    """max |out - ref|, with NaN or a mismatched infinity counting as infinite."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert out.shape == ref.shape, f"shape {out.shape} != reference {ref.shape}"
    if out.size == 0:
        return 0.0
    same_infinity = np.isinf(ref) & (out == ref)
    with np.errstate(invalid="ignore"):  # inf - inf where both are -inf
        diff = np.where(same_infinity, 0.0, np.abs(out - ref))
    return float(np.inf if np.isnan(diff).any() else diff.max())


def assert_close(name: str, out, ref, naive, dtype_name: str) -> None:
    """FlashAttention's rule against the float64 reference."""
    error = max_error(out, ref)
    naive_error = max_error(naive, ref)
    bound = 2 * naive_error + ATOL[dtype_name]
    assert error <= bound, (f"{name}: max error {error:.3g} > bound {bound:.3g} "
                            f"(naive {dtype_name} error {naive_error:.3g})")
