"""Ragged batches and KV caches on numpy arrays with the CPU backend
(flashgen.numpy re-exports these). Layouts follow flash-attn 2:

    varlen: q [total_q, heads_q, dim_qk], k [total_k, heads_kv, dim_qk],
            v [total_k, heads_kv, dim_v], cu_seqlens_* int32 [batch + 1]
            -> o [total_q, heads_q, dim_v], lse float32 [heads_q, total_q]
    kv cache: q [batch, seq_q, heads_q, dim_qk]; k_cache / v_cache
            [batch, seq_cache, heads_kv, dim] or paged [num_pages, page_size,
            heads_kv, dim] with block_table int32 [batch, max_pages];
            cache_seqlens int32 [batch]; k / v [batch, seq_new, heads_kv, dim]
            -> o [batch, seq_q, heads_q, dim_v], lse float32 [batch, heads_q, seq_q]
"""

from __future__ import annotations

import numpy as np

from . import _capi, _capi_sequences
from ._arguments import check_int
from .numpy import _check_array, _check_same_dtype, _element_strides, _options, _row_stats, _tensor

__all__ = ["forward_varlen", "backward_varlen", "forward_with_kvcache"]

_PACKED_RANK = 3  # [tokens, heads, dim]


def _index(name: str, array, rank: int) -> _capi_sequences.Index:
    _check_array(name, array, rank)
    if array.dtype != np.int32:
        raise TypeError(f"{name} must be int32, got {array.dtype}")
    return _capi_sequences.make_index(array.ctypes.data, _capi.FG_HOST, 0, array.shape,
                                      _element_strides(name, array))


def _packed(name: str, array) -> np.ndarray:
    """[tokens, heads, dim] as the library's [1, tokens, heads, dim]."""
    _check_array(name, array, _PACKED_RANK)
    return array[np.newaxis]


def _sequences(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k) -> tuple:
    """(fg_varlen, the index views it points to, kept alive by the caller)."""
    indices = (_index("cu_seqlens_q", cu_seqlens_q, 1), _index("cu_seqlens_k", cu_seqlens_k, 1))
    return _capi_sequences.varlen(*indices, check_int("max_seqlen_q", max_seqlen_q),
                                  check_int("max_seqlen_k", max_seqlen_k)), indices


def forward_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int, max_seqlen_k: int,
                   causal: bool | str = False, scale: float | None = None, *,
                   cpu_threads: int = 0, window_size=(-1, -1), softcap: float = 0.0,
                   alibi_slopes=None, sinks=None, mask_mod: str | None = None,
                   mask_tensors: dict | None = None) -> tuple:
    """Attention per sequence of a packed batch: (o, lse).

    Sequence b is rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of q and rows
    [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of k and v; causal is aligned
    bottom-right per sequence (causal="top_left": top-left). A row that sees
    no key gives o = 0, lse = -inf. window_size, softcap, alibi_slopes
    ([heads_q] or [batch, heads_q]: a row per sequence) and sinks as
    flashgen.numpy.forward's, applied per sequence.
    mask_mod sees b as the sequence and q_idx, kv_idx as positions within it.
    """
    options = _options(causal, scale, cpu_threads, window_size, softcap, alibi_slopes, sinks,
                       mask_mod=mask_mod, mask_tensors=mask_tensors)
    q, k, v = _packed("q", q), _packed("k", k), _packed("v", v)
    fg_dtype = _check_same_dtype({"q": q, "k": k, "v": v})
    sequences, _keep = _sequences(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    _, total_q, heads_q, _ = q.shape
    o = np.empty((total_q, heads_q, v.shape[3]), dtype=q.dtype)
    lse = np.empty((heads_q, total_q), dtype=np.float32)
    _capi_sequences.forward_varlen(_tensor("q", q, fg_dtype), _tensor("k", k, fg_dtype),
                                   _tensor("v", v, fg_dtype), _tensor("o", o[np.newaxis], fg_dtype),
                                   _row_stats("lse", lse[np.newaxis]), sequences, options)
    return o, lse


def backward_varlen(q, k, v, o, do, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int,
                    max_seqlen_k: int, causal: bool | str = False, scale: float | None = None, *,
                    cpu_threads: int = 0, window_size=(-1, -1), softcap: float = 0.0,
                    alibi_slopes=None, sinks=None, mask_mod: str | None = None,
                    mask_tensors: dict | None = None) -> tuple:
    """Gradients (dq, dk, dv) of forward_varlen's o given do = dLoss/dO, with
    the same keywords. With sinks the result is (dq, dk, dv, dsinks), dsinks
    float32 [heads_q] summed over every sequence's rows."""
    grad_sinks = None if sinks is None else np.empty(np.shape(sinks), dtype=np.float32)
    options = _options(causal, scale, cpu_threads, window_size, softcap, alibi_slopes, sinks,
                       grad_sinks, mask_mod=mask_mod, mask_tensors=mask_tensors)
    named = (("q", q), ("k", k), ("v", v), ("o", o), ("do", do))
    q, k, v, o, do = (_packed(name, a) for name, a in named)
    fg_dtype = _check_same_dtype({"q": q, "k": k, "v": v, "o": o, "do": do})
    _check_array("lse", lse, 2)
    sequences, _keep = _sequences(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    grads = [np.empty(t.shape[1:], dtype=t.dtype) for t in (q, k, v)]
    views = [_tensor(name, a, fg_dtype) for name, a in
             (("q", q), ("k", k), ("v", v), ("o", o), ("do", do))]
    grad_views = [_tensor(name, g[np.newaxis], fg_dtype) for name, g in zip(("dq", "dk", "dv"), grads)]
    _capi_sequences.backward_varlen(*views, _row_stats("lse", lse[np.newaxis]), *grad_views,
                                    sequences, options)
    return tuple(grads) if grad_sinks is None else (*grads, grad_sinks)


def forward_with_kvcache(q, k_cache, v_cache, cache_seqlens, block_table=None, k=None, v=None,
                         causal: bool | str = False, scale: float | None = None, *,
                         cpu_threads: int = 0, window_size=(-1, -1), softcap: float = 0.0,
                         alibi_slopes=None, sinks=None, mask_mod: str | None = None,
                         mask_tensors: dict | None = None) -> tuple:
    """Attention of q to each sequence's cache: (o, lse).

    With k and v, their rows are first written into k_cache / v_cache at
    cache_seqlens (the caches are modified in place, as flash-attn does;
    cache_seqlens is not), then attended. causal is aligned bottom-right
    against the sequence's length after the append. mask_mod sees b as the
    sequence, kv_idx as the cache position and q_idx as the query's position
    in the sequence (a decoded token's is the cache length before it).
    window_size, softcap, alibi_slopes ([heads_q] or [batch, heads_q]) and
    sinks as flashgen.numpy.forward's, against the sequence's keys after the
    append.
    """
    options = _options(causal, scale, cpu_threads, window_size, softcap, alibi_slopes, sinks,
                       mask_mod=mask_mod, mask_tensors=mask_tensors)
    if (k is None) != (v is None):
        raise ValueError("k and v are appended together: pass both or neither")
    arrays = {"q": q, "k_cache": k_cache, "v_cache": v_cache}
    if k is not None:
        arrays.update(k=k, v=v)
    for name, array in arrays.items():
        _check_array(name, array, _capi.TENSOR_RANK)
    for name in ("k_cache", "v_cache") if k is not None else ():
        if not arrays[name].flags.writeable:
            raise ValueError(f"{name} must be writable: the call appends k and v to it")
    fg_dtype = _check_same_dtype(arrays)
    views = {name: _tensor(name, array, fg_dtype) for name, array in arrays.items()}
    seqlens = _index("cache_seqlens", cache_seqlens, 1)
    table = _index("block_table", block_table, 2) if block_table is not None else None
    cache = _capi_sequences.kvcache(views["k_cache"], views["v_cache"], seqlens, table,
                                    views.get("k"), views.get("v"))
    batch, seq_q, heads_q, _ = q.shape
    o = np.empty((batch, seq_q, heads_q, v_cache.shape[3]), dtype=q.dtype)
    lse = np.empty((batch, heads_q, seq_q), dtype=np.float32)
    _capi_sequences.forward_with_kvcache(views["q"], cache, _tensor("o", o, fg_dtype),
                                         _row_stats("lse", lse), options)
    return o, lse
