"""ctypes mirror of the ragged-batch and KV-cache part of flashgen.h.

fg_index, fg_varlen and fg_kvcache repeat the header's field order and C types
exactly (python/tests/test_capi.py compares their offsets with a C compiler's).
"""

from __future__ import annotations

import ctypes
import functools
from ctypes import POINTER, c_int, c_int32, c_int64, c_void_p

from . import _capi

INDEX_RANK = 2  # [n, 1] for a vector


class Index(ctypes.Structure):
    """fg_index: int32, rank 1 ([n], shape[1] = 1) or 2; strides count elements."""

    _fields_ = [
        ("data", c_void_p),  # const int32_t*
        ("memory", c_int32),
        ("device", c_int32),
        ("shape", c_int64 * INDEX_RANK),
        ("stride", c_int64 * INDEX_RANK),
    ]


_IndexP = POINTER(Index)
_TensorP = POINTER(_capi.Tensor)
_RowStatsP = POINTER(_capi.RowStats)
_OptionsP = POINTER(_capi.Options)


class Varlen(ctypes.Structure):
    """fg_varlen."""

    _fields_ = [
        ("cu_seqlens_q", _IndexP),
        ("cu_seqlens_k", _IndexP),
        ("max_seqlen_q", c_int64),
        ("max_seqlen_k", c_int64),
        ("check_indices", ctypes.c_int),
    ]


class KVCache(ctypes.Structure):
    """fg_kvcache."""

    _fields_ = [
        ("k_cache", _TensorP),
        ("v_cache", _TensorP),
        ("cache_seqlens", _IndexP),
        ("block_table", _IndexP),
        ("k_new", _TensorP),
        ("v_new", _TensorP),
        ("check_indices", ctypes.c_int),
        ("k_scale", _capi.HeadVector),
        ("v_scale", _capi.HeadVector),
    ]


_PROTOTYPES = {
    "fg_forward_varlen": (c_int, [_TensorP, _TensorP, _TensorP, _TensorP, _RowStatsP,
                                  POINTER(Varlen), _OptionsP]),
    "fg_backward_varlen": (c_int, [_TensorP, _TensorP, _TensorP, _TensorP, _TensorP, _RowStatsP,
                                   _TensorP, _TensorP, _TensorP, POINTER(Varlen), _OptionsP]),
    "fg_forward_with_kvcache": (c_int, [_TensorP, POINTER(KVCache), _TensorP, _RowStatsP,
                                        _OptionsP]),
}


@functools.lru_cache(maxsize=None)
def lib() -> ctypes.CDLL:
    """The library with these prototypes declared too."""
    return _capi.declare(_capi.lib(), _PROTOTYPES)


def make_index(data: int, memory: int, device: int, shape, stride) -> Index:
    """shape and stride of rank 1 or 2 (rank 1 becomes [n, 1])."""
    shape, stride = list(shape), list(stride)
    if len(shape) == 1:
        shape, stride = shape + [1], stride + [1]
    if len(shape) != INDEX_RANK:
        raise ValueError(f"an index array has 1 or 2 dimensions, got shape {tuple(shape)}")
    view = Index()
    view.data = data
    view.memory = memory
    view.device = device
    view.shape[:] = [int(n) for n in shape]
    view.stride[:] = [int(s) for s in stride]
    return view


def _ref(x):
    return ctypes.byref(x) if x is not None else None


def forward_varlen(q, k, v, o, lse, sequences: Varlen, options) -> None:
    _capi.check(lib().fg_forward_varlen(_ref(q), _ref(k), _ref(v), _ref(o), _ref(lse),
                                        ctypes.byref(sequences), ctypes.byref(options)),
                "fg_forward_varlen")


def backward_varlen(q, k, v, o, grad_o, lse, grad_q, grad_k, grad_v, sequences: Varlen,
                    options) -> None:
    refs = [_ref(t) for t in (q, k, v, o, grad_o, lse, grad_q, grad_k, grad_v)]
    _capi.check(lib().fg_backward_varlen(*refs, ctypes.byref(sequences), ctypes.byref(options)),
                "fg_backward_varlen")


def forward_with_kvcache(q, cache: KVCache, o, lse, options) -> None:
    _capi.check(lib().fg_forward_with_kvcache(_ref(q), ctypes.byref(cache), _ref(o), _ref(lse),
                                              ctypes.byref(options)),
                "fg_forward_with_kvcache")


def varlen(cu_seqlens_q: Index, cu_seqlens_k: Index, max_seqlen_q: int,
           max_seqlen_k: int, check_indices: bool = False) -> Varlen:
    """fg_varlen; keep the Index arguments alive while it is used."""
    s = Varlen()
    s.cu_seqlens_q = ctypes.pointer(cu_seqlens_q)
    s.cu_seqlens_k = ctypes.pointer(cu_seqlens_k)
    s.max_seqlen_q = int(max_seqlen_q)
    s.max_seqlen_k = int(max_seqlen_k)
    s.check_indices = 1 if check_indices else 0
    return s


def kvcache(k_cache, v_cache, cache_seqlens: Index, block_table: Index | None, k_new,
            v_new, check_indices: bool = False, k_scale=None, v_scale=None) -> KVCache:
    """fg_kvcache; None fields stay NULL (scales: not given). Keep the
    arguments alive while it is used."""
    c = KVCache()
    c.check_indices = int(check_indices)
    if k_scale is not None:
        c.k_scale = k_scale
    if v_scale is not None:
        c.v_scale = v_scale
    c.k_cache = ctypes.pointer(k_cache)
    c.v_cache = ctypes.pointer(v_cache)
    c.cache_seqlens = ctypes.pointer(cache_seqlens)
    if block_table is not None:
        c.block_table = ctypes.pointer(block_table)
    if k_new is not None:
        c.k_new = ctypes.pointer(k_new)
    if v_new is not None:
        c.v_new = ctypes.pointer(v_new)
    return c
