"""Attention on numpy arrays with the CPU backend.

    o, lse = flashgen.numpy.forward(q, k, v, causal=True)
    dq, dk, dv = flashgen.numpy.backward(q, k, v, o, do, lse, causal=True)

Arrays are float16, float32 or ml_dtypes.bfloat16 (numpy has no bfloat16 of
its own), all inputs of one dtype, with any strides (views are read in place,
never copied):
    q  [batch, seq_q,  heads_q,  dim_qk]     (layout="bshd", the default)
    k  [batch, seq_kv, heads_kv, dim_qk]     heads_q a multiple of heads_kv
    v  [batch, seq_kv, heads_kv, dim_v]
    lse float32 [batch, heads_q, seq_q], the natural-log row log-sum-exp
With layout="bhsd" the arrays are [batch, heads, seq, dim] instead. Outputs
are packed arrays of the same layout and dtype.

Masks and score modifiers (flash-attn 2's keywords and conventions):
    causal       False, True or "bottom_right" (query i sees keys
                 j <= i + seq_kv - seq_q, flash-attn), "top_left" (j <= i,
                 torch SDPA's is_causal)
    window_size  (left, right): query i sees keys j with
                 i + seq_kv - seq_q - left <= j <= i + seq_kv - seq_q + right;
                 -1 = unbounded. Combines with causal.
    softcap      s <- softcap * tanh(s / softcap) on the scaled scores; 0 = off
    alibi_slopes float32 [heads_q] or [batch, heads_q]:
                 s <- s - slope * |i + seq_kv - seq_q - j|, after the soft cap
    sinks        float32 [heads_q]: a per-head logit in each row's softmax
                 denominator, with no value (gpt-oss). lse includes it; the
                 backward then also returns d sinks.
    mask_mod     a C expression over b, h, q_idx, kv_idx and the arrays of
                 mask_tensors, nonzero = attended, e.g.
                 mask_mod="doc[kv_idx] == doc[q_idx]", mask_tensors={"doc": ids}
                 (1-D int32 or float32 arrays). README: "Mask expressions".
"""

from __future__ import annotations

import numpy as np

from . import _capi
from ._arguments import (check_causal_mode, check_int, check_scale, check_softcap,
                         check_window)
from ._layout import BSHD, SEQ_HEADS_SWAP, check_layout, packed_shape

__all__ = ["forward", "backward", "forward_varlen", "backward_varlen", "forward_with_kvcache"]


def _bfloat16():
    """ml_dtypes.bfloat16 when ml_dtypes is installed, else None."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


def _fg_dtype(name: str, array: np.ndarray) -> int:
    dtype = array.dtype
    if dtype == np.float16:
        return _capi.FG_F16
    if dtype == np.float32:
        return _capi.FG_F32
    bfloat16 = _bfloat16()
    if bfloat16 is not None and dtype == bfloat16:
        return _capi.FG_BF16
    raise TypeError(f"{name}: dtype {dtype} is not supported; use float16, float32 "
                    f"or ml_dtypes.bfloat16")


def _element_strides(name: str, array: np.ndarray) -> tuple:
    """numpy's byte strides as the element strides the library counts."""
    itemsize = array.itemsize
    for axis, stride in enumerate(array.strides):
        if stride % itemsize != 0:
            raise ValueError(f"{name}: stride of {stride} bytes along axis {axis} is not a "
                             f"multiple of the element size ({itemsize} bytes)")
    if array.size > 0 and array.ctypes.data % itemsize != 0:
        raise ValueError(f"{name}: data address is not aligned to the element size "
                         f"({itemsize} bytes)")
    return tuple(stride // itemsize for stride in array.strides)


def _check_array(name: str, array, rank: int) -> None:
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(array).__name__}")
    if array.ndim != rank:
        raise ValueError(f"{name} must have {rank} dimensions, got shape {array.shape}")


def _to_bshd(name: str, array, layout: str) -> np.ndarray:
    _check_array(name, array, _capi.TENSOR_RANK)
    return array if layout == BSHD else array.transpose(SEQ_HEADS_SWAP)


def _check_same_dtype(arrays: dict) -> int:
    """The fg_dtype shared by every array; TypeError naming the odd one out."""
    names = list(arrays)
    first = names[0]
    fg_dtype = _fg_dtype(first, arrays[first])
    for name in names[1:]:
        if arrays[name].dtype != arrays[first].dtype:
            raise TypeError(f"{name} has dtype {arrays[name].dtype} but {first} has "
                            f"{arrays[first].dtype}; all must have the same dtype")
    return fg_dtype


def _tensor(name: str, array: np.ndarray, fg_dtype: int) -> _capi.Tensor:
    return _capi.make_tensor(array.ctypes.data, fg_dtype, _capi.FG_HOST, 0, array.shape,
                             _element_strides(name, array))


def _row_stats(name: str, array) -> _capi.RowStats:
    _check_array(name, array, _capi.ROW_STATS_RANK)
    if array.dtype != np.float32:
        raise TypeError(f"{name} must be float32, got {array.dtype}")
    return _capi.make_row_stats(array.ctypes.data, _capi.FG_HOST, 0, array.shape,
                                _element_strides(name, array))


def _empty(layout: str, dtype, batch: int, seq: int, heads: int, dim: int) -> tuple:
    """A packed output array of this layout and its [batch, seq, heads, dim] view."""
    array = np.empty(packed_shape(layout, batch, seq, heads, dim), dtype=dtype)
    return array, (array if layout == BSHD else array.transpose(SEQ_HEADS_SWAP))


def _head_vector(name: str, array) -> _capi.HeadVector | None:
    """A float32 [heads_q] or [batch, heads_q] array as the library's view."""
    if array is None:
        return None
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray or None, got {type(array).__name__}")
    if array.dtype != np.float32:
        raise TypeError(f"{name} must be float32, got {array.dtype}")
    return _capi.make_head_vector(array.ctypes.data, _capi.FG_HOST, 0, array.shape,
                                  _element_strides(name, array))


def _mask_tensors(mask_tensors) -> list:
    """{name: 1-D int32 or float32 array} as the library's views (read in
    place); the library checks names, dtypes and ranks."""
    if mask_tensors is None:
        return []
    if not isinstance(mask_tensors, dict):
        raise TypeError(f"mask_tensors must be a dict of name -> numpy.ndarray or None, got "
                        f"{type(mask_tensors).__name__}")
    views = []
    for name, array in mask_tensors.items():
        if not isinstance(array, np.ndarray):
            raise TypeError(f"mask_tensors[{name!r}] must be a numpy.ndarray, got "
                            f"{type(array).__name__}")
        dtype = {np.dtype(np.int32): _capi.FG_MASK_INT32,
                 np.dtype(np.float32): _capi.FG_MASK_FLOAT32}.get(array.dtype, _capi.FG_MASK_OTHER)
        strides = [s // array.itemsize for s in array.strides]
        views.append(_capi.mask_entry(name, array.ctypes.data, dtype, _capi.FG_HOST, 0,
                                      array.shape, strides))
    return views


def _options(causal, scale, cpu_threads: int, window_size=(-1, -1), softcap=0.0,
             alibi_slopes=None, sinks=None, grad_sinks=None, mask_mod=None,
             mask_tensors=None) -> _capi.Options:
    """The call's options; TypeError for an argument of the wrong type."""
    causal, top_left = check_causal_mode(causal)
    return _capi.make_options(
        scale=check_scale(scale), causal=causal, backend=_capi.FG_BACKEND_CPU,
        cpu_threads=check_int("cpu_threads", cpu_threads),
        causal_alignment=_capi.FG_CAUSAL_TOP_LEFT if top_left else _capi.FG_CAUSAL_BOTTOM_RIGHT,
        window=check_window(window_size), softcap=check_softcap(softcap),
        alibi_slopes=_head_vector("alibi_slopes", alibi_slopes),
        sinks=_head_vector("sinks", sinks), grad_sinks=_head_vector("grad_sinks", grad_sinks),
        mask_mod=mask_mod, mask_tensors=_mask_tensors(mask_tensors))


def forward(q, k, v, causal: bool | str = False, scale: float | None = None, *,
            layout: str = BSHD, cpu_threads: int = 0, window_size=(-1, -1),
            softcap: float = 0.0, alibi_slopes=None, sinks=None, mask_mod: str | None = None,
            mask_tensors: dict | None = None) -> tuple:
    """O = softmax(scale · Q·Kᵀ) · V and the row log-sum-exp.

    scale defaults to 1/sqrt(dim_qk); causal=True masks keys after the
    query's position aligned to the bottom-right corner (query i sees keys
    j <= i + seq_kv - seq_q), causal="top_left" aligned to the top-left
    (j <= i); window_size, softcap, alibi_slopes and sinks as the module
    says. Returns (o, lse): o like q's layout and dtype with v's dim, lse
    float32 [batch, heads_q, seq_q]. A row that sees no key gives o = 0 and
    lse = -inf (lse = the head's sink with sinks). cpu_threads = 0 uses every
    hardware thread.
    """
    options = _options(causal, scale, cpu_threads, window_size, softcap, alibi_slopes, sinks,
                       mask_mod=mask_mod, mask_tensors=mask_tensors)
    check_layout(layout)
    q, k, v = (_to_bshd(name, a, layout) for name, a in (("q", q), ("k", k), ("v", v)))
    fg_dtype = _check_same_dtype({"q": q, "k": k, "v": v})
    batch, seq_q, heads_q, _ = q.shape
    o, o_bshd = _empty(layout, q.dtype, batch, seq_q, heads_q, v.shape[3])
    lse = np.empty((batch, heads_q, seq_q), dtype=np.float32)
    _capi.forward(_tensor("q", q, fg_dtype), _tensor("k", k, fg_dtype),
                  _tensor("v", v, fg_dtype), _tensor("o", o_bshd, fg_dtype),
                  _row_stats("lse", lse), options)
    return o, lse


def backward(q, k, v, o, do, lse, causal: bool | str = False, scale: float | None = None, *,
             layout: str = BSHD, cpu_threads: int = 0, window_size=(-1, -1),
             softcap: float = 0.0, alibi_slopes=None, sinks=None, mask_mod: str | None = None,
             mask_tensors: dict | None = None) -> tuple:
    """Gradients (dq, dk, dv) of the forward's o given do = dLoss/dO.

    o and lse are the forward's outputs for the same q, k, v and keywords;
    do is shaped like o. Gradients are packed arrays of the inputs' layout and
    dtype, shaped like q, k and v. With sinks the result is
    (dq, dk, dv, dsinks), dsinks float32 [heads_q]:
    dsinks[h] = -sum over batches and rows of exp(sinks[h] - lse) * rowsum(do * o).
    """
    grad_sinks = None if sinks is None else np.empty(np.shape(sinks), dtype=np.float32)
    options = _options(causal, scale, cpu_threads, window_size, softcap, alibi_slopes, sinks,
                       grad_sinks, mask_mod, mask_tensors)
    check_layout(layout)
    named = (("q", q), ("k", k), ("v", v), ("o", o), ("do", do))
    q, k, v, o, do = (_to_bshd(name, a, layout) for name, a in named)
    fg_dtype = _check_same_dtype({"q": q, "k": k, "v": v, "o": o, "do": do})
    lse_view = _row_stats("lse", lse)
    dq, dq_bshd = _empty(layout, q.dtype, *q.shape)
    dk, dk_bshd = _empty(layout, k.dtype, *k.shape)
    dv, dv_bshd = _empty(layout, v.dtype, *v.shape)
    views = [_tensor(name, a, fg_dtype) for name, a in
             (("q", q), ("k", k), ("v", v), ("o", o), ("do", do))]
    grads = [_tensor(name, a, fg_dtype) for name, a in
             (("dq", dq_bshd), ("dk", dk_bshd), ("dv", dv_bshd))]
    # The CPU backend needs no device scratch, but ask: the library says.
    workspace_bytes = _capi.backward_workspace_bytes(*views, lse_view, *grads, options)
    workspace = np.empty(workspace_bytes, dtype=np.uint8) if workspace_bytes else None
    _capi.backward(*views, lse_view, *grads,
                   workspace.ctypes.data if workspace is not None else None,
                   workspace_bytes, options)
    return (dq, dk, dv) if grad_sinks is None else (dq, dk, dv, grad_sinks)


# Ragged batches and KV caches (defined beside, on the helpers above).
from ._numpy_sequences import backward_varlen, forward_varlen, forward_with_kvcache  # noqa: E402
