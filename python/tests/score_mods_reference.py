"""Plain float64 numpy attention with flashgen's masks and score modifiers,
the oracle of the Python tests of those keywords (flash-attn 2 conventions):

    x = scale * q.k;  x <- softcap * tanh(x / softcap);  x <- x - slope * |i + Skv - Sq - j|
    mask: window (left, right) around key i + Skv - Sq, -1 unbounded; causal
          j <= i + Skv - Sq ("bottom_right") or j <= i ("top_left"); and a
          user mask given as a boolean array (mask_mod's meaning)
    sinks: a column of logit sinks[h] in each row's softmax, no value

All arrays are [batch, seq, heads, dim]; lse is [batch, heads, seq].
"""

from __future__ import annotations

import numpy as np


def _scores(q, k, scale, causal, window, softcap, alibi_slopes, attended=None):
    """Modified scores x [b, h, i, j] (-inf where masked) and d x / d (scale q.k)."""
    batch, seq_q, heads_q, _ = q.shape
    seq_kv, heads_kv = k.shape[1], k.shape[2]
    kx = np.repeat(k, heads_q // heads_kv, axis=2)
    x = np.einsum("bihd,bjhd->bhij", q, kx) * scale
    slope = np.ones_like(x)
    if softcap:
        t = np.tanh(x / softcap)
        x, slope = softcap * t, 1.0 - t * t
    i = np.arange(seq_q)[:, None]
    j = np.arange(seq_kv)[None, :]
    diagonal = i + seq_kv - seq_q
    if alibi_slopes is not None:
        slopes = np.broadcast_to(np.asarray(alibi_slopes, np.float64), (batch, heads_q))
        x = x - slopes[:, :, None, None] * np.abs(diagonal - j)
    visible = np.ones((seq_q, seq_kv), dtype=bool)
    left, right = window
    if left >= 0:
        visible &= j >= diagonal - left
    if right >= 0:
        visible &= j <= diagonal + right
    if causal:
        visible &= j <= (i if causal == "top_left" else diagonal)
    if attended is not None:  # a user mask, broadcast to [b, h, i, j]
        visible = visible & np.asarray(attended, dtype=bool)
    return np.where(visible, x, -np.inf), slope


def attention(q, k, v, do=None, *, causal=False, scale=None, window=(-1, -1), softcap=0.0,
              alibi_slopes=None, sinks=None, attended=None):
    """(o, lse) and, with do, (dq, dk, dv, dsinks) in float64; `attended`
    (bool, broadcast to [batch, heads_q, seq_q, seq_kv]) is a user mask."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    heads_q, heads_kv = q.shape[2], k.shape[2]
    group = heads_q // heads_kv
    scale = 1.0 / np.sqrt(q.shape[3]) if scale is None else scale
    x, slope = _scores(q, k, scale, causal, window, softcap, alibi_slopes, attended)
    sink = (np.full(heads_q, -np.inf) if sinks is None
            else np.asarray(sinks, np.float64))[None, :, None, None]
    row_max = np.maximum(x.max(axis=-1, keepdims=True, initial=-np.inf), sink)
    safe = np.where(np.isneginf(row_max), 0.0, row_max)
    e, e_sink = np.exp(x - safe), np.exp(sink - safe)
    z = e.sum(axis=-1, keepdims=True) + e_sink
    p = np.where(z > 0, e / np.where(z > 0, z, 1.0), 0.0)
    p_sink = np.where(z > 0, e_sink / np.where(z > 0, z, 1.0), 0.0)
    lse = np.where(z > 0, safe + np.log(np.where(z > 0, z, 1.0)), -np.inf)[..., 0]
    vx = np.repeat(v, group, axis=2)
    o = np.einsum("bhij,bjhd->bihd", p, vx)
    if do is None:
        return o, lse
    do = np.asarray(do, dtype=np.float64)
    d_term = np.einsum("bihd,bihd->bhi", do, o)[..., None]
    dp = np.einsum("bihd,bjhd->bhij", do, vx)
    dx = p * (dp - d_term) * slope                      # through the soft cap
    kx = np.repeat(k, group, axis=2)
    dq = scale * np.einsum("bhij,bjhd->bihd", dx, kx)
    b, s, _, d = k.shape
    dk = scale * np.einsum("bhij,bihd->bjhd", dx, q).reshape(b, s, heads_kv, group, d).sum(3)
    dv = np.einsum("bhij,bihd->bjhd", p, do).reshape(b, s, heads_kv, group, -1).sum(3)
    dsinks = -(p_sink * d_term).sum(axis=(0, 2, 3))
    return o, lse, dq, dk, dv, dsinks
