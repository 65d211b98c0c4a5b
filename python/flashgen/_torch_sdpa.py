"""flashgen.scaled_dot_product_attention: torch's SDPA signature and meaning."""

from __future__ import annotations

import torch

from ._arguments import check_bool
from ._torch_attention import attention


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention, computed by flashgen.

    query [batch, heads_q, seq_q, dim_qk], key [batch, heads_kv, seq_kv, dim_qk],
    value [batch, heads_kv, seq_kv, dim_v] (or the same without batch) ->
    [batch, heads_q, seq_q, dim_v], differentiable. As in torch: is_causal is
    top-left aligned (query i sees keys j <= i, also when seq_q != seq_kv),
    scale defaults to 1/sqrt(dim_qk), and heads_q != heads_kv needs
    enable_gqa=True. A row that sees no key gives 0 (torch gives NaN there).

    Not taken yet, each refused with ValueError: attn_mask (masks other than
    the causal one) and dropout_p > 0.
    """
    is_causal = check_bool("is_causal", is_causal)
    enable_gqa = check_bool("enable_gqa", enable_gqa)
    if attn_mask is not None:
        raise ValueError("attn_mask: not supported by flashgen.scaled_dot_product_attention yet; "
                         "pass None (is_causal=True for the causal mask), or use "
                         "flashgen.attention's window_size / causal keywords")
    if not isinstance(dropout_p, (int, float)) or isinstance(dropout_p, bool) or dropout_p != 0:
        raise ValueError(f"dropout_p must be 0 (flashgen has no dropout), got {dropout_p!r}")
    tensors = {"query": query, "key": key, "value": value}
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    ranks = {tensor.dim() for tensor in tensors.values()}
    if ranks not in ({3}, {4}):
        raise ValueError("query, key and value must all be [batch, heads, seq, dim] or all "
                         "[heads, seq, dim], got shapes " +
                         ", ".join(str(tuple(t.shape)) for t in tensors.values()))
    unbatched = ranks == {3}
    if unbatched:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
    if query.shape[1] != key.shape[1] and not enable_gqa:
        raise ValueError(f"query has {query.shape[1]} heads and key {key.shape[1]}: pass "
                         f"enable_gqa=True for grouped-query attention (as torch requires)")
    o = attention(query, key, value, causal="top_left" if is_causal else False, scale=scale,
                  layout="bhsd")
    return o.squeeze(0) if unbatched else o
