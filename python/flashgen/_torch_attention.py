"""flashgen.attention for torch tensors."""

from __future__ import annotations

import torch

from ._arguments import check_bool, check_causal_mode, check_scale, check_softcap, check_window
from ._layout import BHSD, BSHD, check_layout
from ._torch_ops import attention_forward
from ._torch_views import check_inputs, mask_lists


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
              causal: bool | str = False, scale: float | None = None,
              deterministic: bool = True, return_lse: bool = False, layout: str = BSHD,
              window_size: tuple = (-1, -1), softcap: float = 0.0,
              alibi_slopes: torch.Tensor | None = None, sinks: torch.Tensor | None = None,
              mask_mod: str = "", mask_tensors: dict | None = None):
    """Exact attention O = softmax(scale · Q·Kᵀ) · V, differentiable.

    layout="bshd" (flash_attn_func):
        q [batch, seq_q, heads_q, dim_qk], k [batch, seq_kv, heads_kv, dim_qk],
        v [batch, seq_kv, heads_kv, dim_v] -> o [batch, seq_q, heads_q, dim_v]
    layout="bhsd" (torch.nn.functional.scaled_dot_product_attention): the same
        with the seq and heads axes swapped.
    heads_q must be a multiple of heads_kv (GQA/MQA); dim_v may differ from
    dim_qk. Tensors are float16, bfloat16 or float32, all of one dtype on one
    device, with any strides: they are read in place, never copied. CUDA
    tensors run on their GPU on its current stream; CPU tensors on the CPU
    backend.

    scale defaults to 1/sqrt(dim_qk). causal=True (or "bottom_right") masks
    keys after the query's position aligned to the bottom-right corner
    (query i sees keys j <= i + seq_kv - seq_q, as flash-attn);
    causal="top_left" aligns it to the top-left corner (j <= i, as SDPA's
    is_causal). A row that sees no key gives o = 0, lse = -inf.
    deterministic=False lets the backward use atomics when that is faster.

    Masks and score modifiers, flash-attn 2's keywords (CPU and CUDA tensors):
    window_size=(left, right): query i sees keys j with
        i + seq_kv - seq_q - left <= j <= i + seq_kv - seq_q + right;
        -1 = unbounded. Combines with causal.
    softcap: s <- softcap * tanh(s / softcap) on the scaled scores; 0 = off.
    alibi_slopes: float32 [heads_q] or [batch, heads_q]:
        s <- s - slope * |i + seq_kv - seq_q - j|, after the soft cap.
    sinks: float32 [heads_q], a per-head logit in each row's softmax
        denominator with no value (gpt-oss); lse includes it. When sinks
        requires grad, autograd gives it
        d sinks[h] = -sum over batches and rows of exp(sinks[h] - lse) * rowsum(dO * O).
    mask_mod: a user mask, a C expression over b, h, q_idx, kv_idx and the
        1-D int32/float32 tensors of mask_tensors ({name: tensor}, on q's
        device), nonzero = attended, e.g. mask_mod="doc[kv_idx] == doc[q_idx]",
        mask_tensors={"doc": doc_ids}; q_idx is the query's position among
        the keys (i + seq_kv - seq_q). The README's "Mask expressions" has
        the language; CUDA tensors take up to 8 mask tensors.
    return_lse=True returns (o, lse) with lse the float32 natural-log row
    log-sum-exp [batch, heads_q, seq_q] (not differentiable).

    o is a new tensor packed in the given layout. Raises TypeError for dtype
    problems, ValueError for shapes, devices and other bad arguments
    (before anything runs), flashgen.UnsupportedError when no backend can run
    the problem here. causal takes a bool, "bottom_right" or "top_left",
    deterministic and return_lse bools, scale a real number or None,
    window_size a pair of ints, softcap a real number: anything else raises
    TypeError.
    """
    (causal, top_left), scale = check_causal_mode(causal), check_scale(scale)
    window_left, window_right = check_window(window_size)
    softcap = check_softcap(softcap)
    deterministic = check_bool("deterministic", deterministic)
    return_lse = check_bool("return_lse", return_lse)
    check_layout(layout)
    check_inputs({"q": q, "k": k, "v": v})
    mask_names, mask_values = mask_lists(mask_tensors)
    # The tensors as they are: the library's views read either layout.
    o, lse = attention_forward(q, k, v, causal, scale, deterministic, layout == BHSD, top_left,
                               window_left, window_right, softcap, alibi_slopes, sinks,
                               mask_mod or "", mask_names, mask_values)
    return (o, lse) if return_lse else o
