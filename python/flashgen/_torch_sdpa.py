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
    enable_gqa=True. attn_mask may be a boolean mask (True = attended)
    broadcastable to [batch, heads_q, seq_q, seq_kv]; the kernels read it
    through a mask expression over an int32 copy of it. A row that sees no
    key gives 0 (torch gives NaN there).

    Not taken yet, each refused with ValueError: a float (additive)
    attn_mask and dropout_p > 0.
    """
    is_causal = check_bool("is_causal", is_causal)
    enable_gqa = check_bool("enable_gqa", enable_gqa)
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
    mask = boolean_attn_mask(attn_mask, query, key, unbatched)
    o = attention(query, key, value, causal="top_left" if is_causal else False, scale=scale,
                  layout="bhsd", **mask)
    return o.squeeze(0) if unbatched else o


def boolean_attn_mask(attn_mask, query: torch.Tensor, key: torch.Tensor, unbatched: bool) -> dict:
    """attn_mask as flashgen.attention's mask keywords: an int32 copy of the
    boolean mask, kept at its own broadcast extents along batch and heads,
    read by an expression whose index undoes the broadcast. q_idx is the
    query's position among the keys (i + seq_kv - seq_q), so row i is
    q_idx - (seq_kv - seq_q)."""
    if attn_mask is None:
        return {}
    if not isinstance(attn_mask, torch.Tensor) or attn_mask.dtype != torch.bool:
        got = attn_mask.dtype if isinstance(attn_mask, torch.Tensor) else type(attn_mask).__name__
        raise ValueError(f"attn_mask: only a boolean mask (True = attended) is supported, got "
                         f"{got}; an additive float mask is not (yet)")
    batch, heads, seq_q = query.shape[0], query.shape[1], query.shape[2]
    seq_kv = key.shape[2]
    full = (batch, heads, seq_q, seq_kv)
    mask = attn_mask.unsqueeze(0) if unbatched else attn_mask
    if mask.dim() > 4:
        raise ValueError(f"attn_mask must broadcast to {full}, got shape {tuple(attn_mask.shape)}")
    mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
    try:
        torch.broadcast_shapes(mask.shape, full)
    except RuntimeError:
        raise ValueError(f"attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to "
                         f"{tuple(full[1:] if unbatched else full)}") from None
    mask_batch, mask_heads = mask.shape[0], mask.shape[1]
    values = mask.expand(mask_batch, mask_heads, seq_q, seq_kv).to(
        device=query.device, dtype=torch.int32).contiguous().reshape(-1)
    b = "b" if mask_batch > 1 else "0"
    h = "h" if mask_heads > 1 else "0"
    row = f"(q_idx - {seq_kv - seq_q})"
    expression = (f"attn_mask[(({b} * {mask_heads} + {h}) * {seq_q} + {row}) * {seq_kv} + "
                  f"kv_idx] != 0")
    return {"mask_mod": expression, "mask_tensors": {"attn_mask": values}}
