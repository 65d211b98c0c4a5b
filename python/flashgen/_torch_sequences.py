"""flashgen.attention_varlen and flashgen.attention_with_kvcache for torch
tensors (flash-attn 2's layouts; see flashgen/_numpy_sequences.py). CPU
tensors run on the CPU backend. attention_varlen runs CUDA tensors on the
GPU: with cu_seqlens on the GPU each kernel runs once for the whole batch
and reads them itself (nothing waits); with cu_seqlens on the CPU a launch
per sequence (sinks' gradient is refused there);
attention_with_kvcache runs CUDA tensors in one forward that reads the cache
in place (cache_seqlens and block_table on the same device, read by the
kernels: nothing waits, so a decode step can be captured in a CUDA graph)."""

from __future__ import annotations

import torch

from . import _capi, _capi_sequences
from ._arguments import (check_bool, check_causal_mode, check_int, check_scale, check_softcap,
                         check_window)
from ._torch_views import (check_head_vector, check_inputs, head_vector_view, mask_lists,
                           memory_of, options_for, row_stats_view, tensor_view)

# fp8 KV caches (torch.float8_e4m3fn, where this torch has it).
_E4M3 = getattr(torch, "float8_e4m3fn", None)


def _index(name: str, tensor, rank: int) -> _capi_sequences.Index:
    if not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.int32 or tensor.dim() != rank:
        raise TypeError(f"{name} must be an int32 torch.Tensor of {rank} dimension(s), got "
                        f"{getattr(tensor, 'dtype', type(tensor).__name__)} of shape "
                        f"{tuple(getattr(tensor, 'shape', ()))}")
    memory, device = memory_of(tensor.device)
    return _capi_sequences.make_index(tensor.data_ptr(), memory, device, tensor.shape,
                                      tensor.stride())


def _fp8_view(name: str, cache, q) -> _capi.Tensor:
    """An fp8 cache's view: 4-D float8_e4m3fn on q's device (the library
    checks the rest)."""
    if not isinstance(cache, torch.Tensor) or cache.dtype != _E4M3 or cache.dim() != 4:
        raise TypeError(f"{name} must be a 4-D torch.float8_e4m3fn tensor with an fp8 k_cache, "
                        f"got {getattr(cache, 'dtype', type(cache).__name__)}")
    if cache.device != q.device:
        raise ValueError(f"{name} is on {cache.device} but q is on {q.device}; all must be on the "
                         f"same device")
    return tensor_view(cache)


def _packed(tensors: dict) -> dict:
    """[tokens, heads, dim] tensors as [1, tokens, heads, dim] views."""
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            raise ValueError(f"{name} must be a [tokens, heads, dim] tensor, got shape "
                             f"{tuple(getattr(t, 'shape', ()))}")
    unsqueezed = {name: t.unsqueeze(0) for name, t in tensors.items()}
    check_inputs(unsqueezed)
    return unsqueezed


class _Varlen(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, sinks, cu_q, cu_k, max_q, max_k, check_indices, causal, scale,
                deterministic, score, alibi_slopes, mask_mod, mask_names, *mask_values):
        t = _packed({"q": q, "k": k, "v": v})
        check_head_vector("alibi_slopes", alibi_slopes, q.device)
        check_head_vector("sinks", sinks, q.device)
        o = q.new_empty((q.shape[0], q.shape[1], v.shape[2]))
        lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
        indices = (_index("cu_seqlens_q", cu_q, 1), _index("cu_seqlens_k", cu_k, 1))
        sequences = _capi_sequences.varlen(*indices, max_q, max_k, check_indices)
        top_left, window, softcap = score
        options = options_for(q.device, causal=causal, scale=scale, deterministic=deterministic,
                              top_left=top_left, window=window, softcap=softcap,
                              alibi_slopes=alibi_slopes, sinks=sinks, mask_mod=mask_mod,
                              mask_names=mask_names, mask_values=mask_values)
        _capi_sequences.forward_varlen(tensor_view(t["q"]), tensor_view(t["k"]),
                                       tensor_view(t["v"]), tensor_view(o.unsqueeze(0)),
                                       row_stats_view(lse.unsqueeze(0)), sequences, options)
        ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k, alibi_slopes, sinks, *mask_values)
        ctx.max_q, ctx.max_k, ctx.mask, ctx.score = max_q, max_k, (mask_mod, mask_names), score
        ctx.check_indices = check_indices
        ctx.causal, ctx.scale, ctx.deterministic = causal, scale, deterministic
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, grad_o, grad_lse):
        q, k, v, o, lse, cu_q, cu_k, alibi_slopes, sinks, *mask_values = ctx.saved_tensors
        t = _packed({"q": q, "k": k, "v": v, "o": o, "grad_o": grad_o.contiguous()})
        grads = [torch.empty_like(x) for x in (q, k, v)]
        grad_sinks = None if sinks is None else torch.empty_like(sinks)
        indices = (_index("cu_seqlens_q", cu_q, 1), _index("cu_seqlens_k", cu_k, 1))
        sequences = _capi_sequences.varlen(*indices, ctx.max_q, ctx.max_k, ctx.check_indices)
        top_left, window, softcap = ctx.score
        options = options_for(q.device, causal=ctx.causal, scale=ctx.scale,
                              deterministic=ctx.deterministic, top_left=top_left, window=window,
                              softcap=softcap, alibi_slopes=alibi_slopes, sinks=sinks,
                              grad_sinks=grad_sinks, mask_mod=ctx.mask[0],
                              mask_names=ctx.mask[1], mask_values=mask_values)
        _capi_sequences.backward_varlen(*(tensor_view(t[n]) for n in ("q", "k", "v", "o", "grad_o")),
                                        row_stats_view(lse.unsqueeze(0)),
                                        *(tensor_view(g.unsqueeze(0)) for g in grads),
                                        sequences, options)
        return (*grads, grad_sinks, *[None] * (12 + len(mask_values)))


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     causal=False, scale=None, deterministic=True, return_lse=False,
                     window_size=(-1, -1), softcap=0.0, alibi_slopes=None, sinks=None,
                     mask_mod="", mask_tensors=None, check_indices=False):
    """Attention per sequence of a packed batch, differentiable.

    q [total_q, heads_q, dim_qk], k [total_k, heads_kv, dim_qk],
    v [total_k, heads_kv, dim_v]; cu_seqlens_* int32 [batch + 1] (0 first,
    non-decreasing, last = the packed length); max_seqlen_* at least the
    longest sequence. causal is bottom-right per sequence. Returns o
    [total_q, heads_q, dim_v], and lse float32 [heads_q, total_q] with
    return_lse=True. A row that sees no key gives o = 0, lse = -inf.
    causal="top_left", window_size, softcap, alibi_slopes (float32 [heads_q]
    or [batch, heads_q], a row per sequence; not differentiated) and sinks (float32 [heads_q]; its gradient sums every
    sequence's rows) as flashgen.attention's, per sequence.
    mask_mod / mask_tensors as flashgen.attention's, b being the sequence and
    q_idx, kv_idx positions within it.
    CUDA tensors with cu_seqlens on the GPU: each kernel runs once for the
    whole batch and reads the offsets itself (nothing waits, so a step can be
    captured in a CUDA graph); the offsets are not checked unless
    check_indices=True (which waits for the stream): the kernels clamp them
    to the packed tensors and cut a sequence longer than max_seqlen to it.
    """
    (causal, top_left), scale = check_causal_mode(causal), check_scale(scale)
    score = (top_left, check_window(window_size), check_softcap(softcap))
    deterministic = check_bool("deterministic", deterministic)
    return_lse = check_bool("return_lse", return_lse)
    mask_names, mask_values = mask_lists(mask_tensors)
    o, lse = _Varlen.apply(q, k, v, sinks, cu_seqlens_q, cu_seqlens_k,
                           check_int("max_seqlen_q", max_seqlen_q),
                           check_int("max_seqlen_k", max_seqlen_k),
                           check_bool("check_indices", check_indices), causal, scale,
                           deterministic, score, alibi_slopes, mask_mod or "", mask_names,
                           *mask_values)
    return (o, lse) if return_lse else o


def attention_with_kvcache(q, k_cache, v_cache, cache_seqlens, block_table=None, k=None, v=None,
                           causal=False, scale=None, return_lse=False, window_size=(-1, -1),
                           softcap=0.0, alibi_slopes=None, sinks=None, mask_mod="",
                           mask_tensors=None, check_indices=False, k_scale=None, v_scale=None):
    """Attention of q [batch, seq_q, heads_q, dim_qk] to each sequence's KV cache.

    k_cache / v_cache: [batch, seq_cache, heads_kv, dim] or, with block_table
    (int32 [batch, max_pages]), paged [num_pages, page_size, heads_kv, dim]
    (page_size a multiple of 16). cache_seqlens int32 [batch]. k / v
    [batch, seq_new, heads_kv, dim] are first written into the caches at
    cache_seqlens (the caches are modified in place), then attended; causal is
    bottom-right against the length after the append. mask_mod /
    mask_tensors as flashgen.attention's: b is the sequence, kv_idx the cache
    position, q_idx the query's position in the sequence. causal="top_left",
    window_size, softcap, alibi_slopes (float32 [heads_q] or [batch, heads_q])
    and sinks (float32 [heads_q]) as flashgen.attention's, against each
    sequence's keys after the append. Not differentiable.

    CUDA tensors: cache_seqlens and block_table on the same device; the
    kernels read them (no host synchronization: CUDA-graph capturable),
    clamp a length to what the cache holds and never dereference a
    block_table entry outside [0, num_pages) (CPU tensors: checked, with
    an error; check_indices=True checks CUDA ones too, waiting for the
    stream). float32 tensors and mask_mod run on the CPU only.

    fp8 caches: k_cache and v_cache of torch.float8_e4m3fn with float32
    k_scale / v_scale of [1] or [heads_kv] (None: 1), on q's device; a
    cached element is its value times its scale (rounded to q's dtype on
    the CPU), and an appended row is stored as k / k_scale rounded to e4m3.
    On the GPU the kernel converts the bytes to f16 exactly as it reads them
    (half the bytes of a 16-bit cache) and applies the scales to the scores
    and outputs in fp32.
    """
    (causal, top_left), scale = check_causal_mode(causal), check_scale(scale)
    window, softcap = check_window(window_size), check_softcap(softcap)
    return_lse = check_bool("return_lse", return_lse)
    check_indices = check_bool("check_indices", check_indices)
    if (k is None) != (v is None):
        raise ValueError("k and v are appended together: pass both or neither")
    fp8 = _E4M3 is not None and getattr(k_cache, "dtype", None) == _E4M3
    tensors = {"q": q} if fp8 else {"q": q, "k_cache": k_cache, "v_cache": v_cache}
    if k is not None:
        tensors.update(k=k, v=v)
    check_inputs(tensors)
    for name, vector in (("alibi_slopes", alibi_slopes), ("sinks", sinks), ("k_scale", k_scale),
                         ("v_scale", v_scale)):
        check_head_vector(name, vector, q.device)
    views = {name: tensor_view(t) for name, t in tensors.items()}
    if fp8:
        views.update(k_cache=_fp8_view("k_cache", k_cache, q),
                     v_cache=_fp8_view("v_cache", v_cache, q))
    seqlens = _index("cache_seqlens", cache_seqlens, 1)
    table = _index("block_table", block_table, 2) if block_table is not None else None
    cache = _capi_sequences.kvcache(views["k_cache"], views["v_cache"], seqlens, table,
                                    views.get("k"), views.get("v"), check_indices,
                                    head_vector_view(k_scale), head_vector_view(v_scale))
    batch, seq_q, heads_q, _ = q.shape
    o = q.new_empty((batch, seq_q, heads_q, v_cache.shape[3]))
    lse = torch.empty((batch, heads_q, seq_q), dtype=torch.float32, device=q.device)
    mask_names, mask_values = mask_lists(mask_tensors)
    options = options_for(q.device, causal=causal, scale=scale, deterministic=True,
                          top_left=top_left, window=window, softcap=softcap,
                          alibi_slopes=alibi_slopes, sinks=sinks, mask_mod=mask_mod or "",
                          mask_names=mask_names, mask_values=mask_values)
    with torch.no_grad():
        _capi_sequences.forward_with_kvcache(views["q"], cache, tensor_view(o),
                                             row_stats_view(lse), options)
    return (o, lse) if return_lse else o
