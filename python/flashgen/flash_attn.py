"""flash-attn 2's functions on flashgen, so that a model switches by its import line:

    from flashgen.flash_attn import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache

Argument names, defaults and layouts are flash-attn's (softmax_scale, causal,
bottom-right; [batch, seq, heads, dim]; varlen [total, heads, dim] with
cu_seqlens; flash_attn_with_kvcache's k=, v= appended into the caches in
place). window_size, softcap and alibi_slopes work as flash-attn's:
flash_attn_func on CPU and CUDA tensors; the varlen function on CPU and CUDA tensors, per sequence
(alibi_slopes of shape [heads_q] or [batch, heads_q]); the KV-cache function on CPU tensors and
on CUDA tensors (16-bit, read in place by one forward, CUDA-graph
capturable). What flashgen does not do
is refused with ValueError, never ignored: dropout_p other than 0,
return_attn_probs=True, rotary embeddings, cache_batch_idx and
cache_leftpad.
"""

from __future__ import annotations

import torch

from ._torch_attention import attention
from ._torch_sequences import attention_varlen, attention_with_kvcache

__all__ = ["flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache"]


def _refuse(function: str, dropout_p=0.0, return_attn_probs=False, **unsupported) -> None:
    """ValueError for what `function` does not take: dropout, the attention
    probabilities, and each keyword of `unsupported` given as other than None."""
    if dropout_p != 0.0:
        raise ValueError(f"{function}: dropout_p must be 0 (flashgen has no dropout), got {dropout_p}")
    if return_attn_probs:
        raise ValueError(f"{function}: return_attn_probs=True is not supported (flashgen never "
                         f"forms the attention matrix)")
    for name, value in unsupported.items():
        if value is not None:
            raise ValueError(f"{function}: {name} is not supported; pass None")


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                    return_attn_probs=False):
    """q [batch, seq_q, heads_q, dim], k / v [batch, seq_k, heads_kv, dim] -> o."""
    _refuse("flash_attn_func", dropout_p, return_attn_probs)
    return attention(q, k, v, causal=bool(causal), scale=softmax_scale,
                     deterministic=bool(deterministic), window_size=tuple(window_size),
                     softcap=softcap, alibi_slopes=alibi_slopes)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                           softcap=0.0, alibi_slopes=None, deterministic=False,
                           return_attn_probs=False, block_table=None):
    """q [total_q, heads_q, dim], k / v [total_k, heads_kv, dim], cu_seqlens int32 [batch + 1] -> o."""
    _refuse("flash_attn_varlen_func", dropout_p, return_attn_probs, block_table=block_table)
    return attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q),
                            int(max_seqlen_k), causal=bool(causal), scale=softmax_scale,
                            deterministic=bool(deterministic), window_size=tuple(window_size),
                            softcap=softcap, alibi_slopes=alibi_slopes)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None,
                            block_table=None, softmax_scale=None, causal=False,
                            window_size=(-1, -1), softcap=0.0, rotary_interleaved=True,
                            alibi_slopes=None, num_splits=0, return_softmax_lse=False):
    """Decoding against a KV cache; k / v (if given) are written into the caches first.

    cache_seqlens: int32 [batch], an int for every sequence, or None for a
    full cache (contiguous caches only). Returns o, or (o, lse) with
    return_softmax_lse=True.
    """
    _refuse("flash_attn_with_kvcache", 0.0, False, rotary_cos=rotary_cos, rotary_sin=rotary_sin, cache_batch_idx=cache_batch_idx,
            cache_leftpad=cache_leftpad)
    batch = q.shape[0]
    if cache_seqlens is None:
        if block_table is not None:
            raise ValueError("flash_attn_with_kvcache: cache_seqlens is required with block_table")
        cache_seqlens = k_cache.shape[1] - (0 if k is None else k.shape[1])
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((batch,), cache_seqlens, dtype=torch.int32, device=q.device)
    return attention_with_kvcache(q, k_cache, v_cache, cache_seqlens, block_table=block_table,
                                  k=k, v=v, causal=bool(causal), scale=softmax_scale,
                                  return_lse=bool(return_softmax_lse),
                                  window_size=tuple(window_size), softcap=softcap,
                                  alibi_slopes=alibi_slopes)
