"""Hugging Face transformers on flashgen: attn_implementation="fgen".

    import flashgen.integrations.transformers
    flashgen.integrations.transformers.register()
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="fgen")

register() adds "fgen" to transformers' AttentionInterface (the attention
itself) and AttentionMaskInterface (which masks the model builds for it).
Every model whose attention goes through AttentionInterface then runs on
flashgen: prefill, generate() with a KV cache, and training (the backward is
flashgen's).

The name is not "flashgen" because transformers takes any implementation
whose name contains "flash" for a Flash Attention kernel: it tries to load
one of that name from the Hub, and models switch to code paths written for
flash-attn. register() refuses such a name.

What the model passes is mapped onto flashgen.attention's keywords: the
module's causal flag (bottom-right aligned, which is what a decoder means
both in prefill and in decode against a cache), sliding_window (a key at
most sliding_window - 1 positions back, transformers' convention), softcap
(Gemma 2), s_aux (gpt-oss's per-head sinks) and scaling. Grouped-query
attention stays grouped: key and value are read as they are, never repeated.

attention_mask: the mask function registered with register() builds no mask
when the pattern is exactly the causal (and sliding-window) one over every
key, which flashgen applies itself. A mask the attention is given is compared
with that pattern; keys that no query attends at the end of the cache (a
static cache's unfilled slots) are left out. Any other boolean mask
(padding, packed sequences, a model's own mask) runs in flashgen through a
mask expression over the mask, on CPU and CUDA tensors. A bias, or a masked
call the backend refuses (flashgen.UnsupportedError), runs in torch instead
(SDPA, or plain torch operations when softcap or sinks are on), with a
FallbackWarning once.

Refused with ValueError naming the argument: dropout > 0 (a model's
attention_dropout in training mode) and position_bias (T5-style additive
biases).
"""

from __future__ import annotations

import warnings

try:
    import torch
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
except ImportError as error:
    raise ImportError("flashgen.integrations.transformers needs PyTorch and transformers "
                      "(pip install torch transformers)") from error

from .._capi import UnsupportedError
from .._torch_attention import attention
from .._torch_sdpa import boolean_attn_mask

__all__ = ["NAME", "FallbackWarning", "attention_forward", "mask_for_flashgen", "register"]


class FallbackWarning(UserWarning):
    """A call ran in torch rather than in flashgen (see attention_forward)."""


NAME = "fgen"


def register(name: str = NAME) -> str:
    """Makes attn_implementation=name (default "fgen") run on flashgen.

    Registers attention_forward with transformers' AttentionInterface and
    mask_for_flashgen with its AttentionMaskInterface, for every model of the
    process; calling it again changes nothing. Both are needed: without a
    mask function of its own, transformers builds no mask at all for an
    implementation it does not know, so padding would be lost. Returns name,
    for attn_implementation=flashgen.integrations.transformers.register().
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    if "flash" in name.lower():
        raise ValueError(f"name must not contain \"flash\", got {name!r}: transformers takes "
                         f"such an attn_implementation for a Flash Attention kernel and tries "
                         f"to load it from the Hub; the default is {NAME!r}")
    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, mask_for_flashgen)
    return name


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                      value: torch.Tensor, attention_mask: torch.Tensor | None,
                      scaling: float | None = None, dropout: float = 0.0, **kwargs):
    """The attention function transformers calls for attn_implementation="fgen".

    query [batch, heads_q, seq_q, dim_qk], key / value [batch, heads_kv,
    seq_kv, dim] -> (output [batch, seq_q, heads_q, dim_v], None); no
    attention weights are formed, so none are returned.

    Read from the call: kwargs is_causal, else module.is_causal (default
    True, as transformers' SDPA path), causal bottom-right aligned: query i
    sees keys j <= i + seq_kv - seq_q, so a decode step sees the whole cache
    and a prefill with seq_q == seq_kv is the usual triangle;
    sliding_window=w: keys at most w - 1 back (|i - j| <= w without causal,
    as transformers' bidirectional window); softcap (None or 0 = off);
    s_aux: sinks [heads_q], any float dtype, differentiable; scaling.

    attention_mask None means the pattern above. A mask (boolean, True =
    attended, or additive with 0 and -inf / the dtype's minimum) that is
    that pattern on its leading keys, with nothing attended after them,
    runs on flashgen over those keys. Any other boolean mask runs on
    flashgen through a mask expression; a bias, or a masked call the backend
    refuses, runs in torch, with a FallbackWarning the first time (Python's
    warning filters decide after).
    dropout != 0 and position_bias raise ValueError.
    """
    if dropout:
        raise ValueError(f"dropout: flashgen's attention in transformers has no dropout, "
                         f"got {dropout} (the model's attention_dropout, used in training "
                         f"mode); set config.attention_dropout = 0.0, or use \"sdpa\" or "
                         f"\"eager\" for this model")
    if kwargs.get("position_bias") is not None:
        raise ValueError("position_bias: additive position biases (T5-style) are not supported "
                         "by flashgen's attention in transformers; use \"sdpa\" or \"eager\" "
                         "for this model")
    causal = kwargs.get("is_causal")
    if causal is None:
        causal = getattr(module, "is_causal", True)
    causal = bool(causal)
    window = _window(kwargs.get("sliding_window"), causal)
    softcap = kwargs.get("softcap") or 0.0
    sinks = kwargs.get("s_aux")
    if sinks is not None:
        sinks = sinks.float()  # flashgen takes float32 sinks; autograd passes the gradient back

    if attention_mask is not None:
        keys = _keys_of_pattern(attention_mask, query.shape[2], key.shape[2], causal, window)
        attended = _as_bool(attention_mask) if keys is None else None
        if attended is not None:
            # Padding and any other boolean pattern: the mask itself, read by
            # the kernels through a mask expression.
            try:
                output = attention(query.transpose(1, 2), key.transpose(1, 2),
                                   value.transpose(1, 2), scale=scaling, softcap=softcap,
                                   sinks=sinks, **boolean_attn_mask(attended, query, key, False))
                return output, None
            except UnsupportedError:
                pass  # in torch below
        if keys is None:
            warnings.warn("flashgen.integrations.transformers: an attention_mask that is not only "
                          "the causal / sliding-window pattern (padding, packed sequences, a "
                          "model's own mask) that flashgen's backend refuses here, or a bias, ran "
                          "in torch, not in flashgen", FallbackWarning, stacklevel=2)
            return _attention_in_torch(query, key, value, attention_mask, scaling, softcap,
                                       sinks), None
        key, value = key[:, :, :keys], value[:, :, :keys]

    # [batch, heads, seq, dim] views read as [batch, seq, heads, dim]: flashgen takes any
    # strides, and its output is the packed [batch, seq_q, heads_q, dim_v] transformers wants.
    output = attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                       causal=causal, scale=scaling, window_size=window, softcap=softcap,
                       sinks=sinks)
    return output, None


def mask_for_flashgen(**arguments):
    """The mask function transformers calls for attn_implementation="fgen".

    Takes the keywords of transformers' sdpa_mask. None when the mask would
    be exactly what attention_forward applies without one: the causal
    pattern, no padding, and the queries ending at the last key (a dynamic
    cache; a static cache's unfilled slots need a mask). With local_size (a
    sliding window or Llama 4's chunks, which this function cannot tell
    apart) only while every position is inside the first window, where both
    are plain causal. Otherwise the boolean mask of sdpa_mask, which
    attention_forward checks.
    """
    if _needs_no_mask(**arguments):
        return None
    return sdpa_mask(**{**arguments, "allow_is_causal_skip": False})


def _needs_no_mask(q_length=None, kv_length=None, q_offset=0, kv_offset=0, attention_mask=None,
                   local_size=None, allow_is_causal_skip=False, **others) -> bool:
    """mask_for_flashgen's test. Anything it does not recognise (a static
    cache's offset tensor, another transformers version's keywords) builds
    the mask, which attention_forward compares with its pattern: slower,
    never wrong."""
    lengths = (q_length, kv_length, q_offset, kv_offset)
    if not allow_is_causal_skip or not all(isinstance(n, int) for n in lengths):
        return False  # or/and masks and packed sequences turn allow_is_causal_skip off
    end = kv_offset + kv_length
    return (q_offset + q_length == end and (local_size is None or end <= local_size)
            and (attention_mask is None or bool(attention_mask.all())))


def _window(sliding_window: int | None, causal: bool) -> tuple:
    """transformers' sliding_window as flashgen's window_size (left, right)."""
    if sliding_window is None:
        return (-1, -1)
    if causal:  # transformers: kv_idx > q_idx - sliding_window
        return (sliding_window - 1, -1)
    return (sliding_window, sliding_window)  # transformers: |q_idx - kv_idx| <= sliding_window


def _allowed(seq_q: int, seq_kv: int, causal: bool, window: tuple, device) -> torch.Tensor:
    """[seq_q, seq_kv] bool: what flashgen.attention lets each query see."""
    diagonal = torch.arange(seq_q, device=device)[:, None] + (seq_kv - seq_q)  # bottom-right
    j = torch.arange(seq_kv, device=device)[None, :]
    allowed = torch.ones(seq_q, seq_kv, dtype=torch.bool, device=device)
    left, right = window
    if causal:
        allowed &= j <= diagonal
    if left >= 0:
        allowed &= j >= diagonal - left
    if right >= 0:
        allowed &= j <= diagonal + right
    return allowed


def _as_bool(mask: torch.Tensor) -> torch.Tensor | None:
    """True where attended, or None for an additive mask with other values than
    0 and a blocking one (a bias flashgen cannot add)."""
    if mask.dtype == torch.bool:
        return mask
    if not mask.is_floating_point():
        return None
    attended = mask == 0
    # transformers blocks with the dtype's minimum, others with -inf.
    blocked = mask <= torch.finfo(mask.dtype).min / 2
    return attended if bool((attended | blocked).all()) else None


def _keys_of_pattern(mask, seq_q: int, seq_kv: int, causal: bool, window: tuple) -> int | None:
    """n when `mask` is attention_forward's own pattern over the first n keys
    and attends no later key; None when it masks anything else."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"attention_mask must be a torch.Tensor or None, got "
                        f"{type(mask).__name__} (was the attn_implementation registered with "
                        f"flashgen.integrations.transformers.register(), which sets its mask "
                        f"function?)")
    attended = _as_bool(mask)
    if attended is None or attended.dim() != 4 or tuple(attended.shape[-2:]) != (seq_q, seq_kv):
        return None
    columns = attended.reshape(-1, seq_kv).any(0).nonzero()
    if columns.numel() == 0:
        return None
    keys = int(columns[-1]) + 1
    expected = _allowed(seq_q, keys, causal, window, mask.device)
    return keys if torch.equal(attended[..., :keys], expected.expand(*attended.shape[:-1], keys)) \
        else None


def _attention_in_torch(query, key, value, mask, scale, softcap, sinks) -> torch.Tensor:
    """What a model's eager attention computes, for masks flashgen does not take:
    -> [batch, seq_q, heads_q, dim_v]. The mask is the whole pattern, as in
    eager attention (no causal flag is added to it)."""
    batch, heads_q, seq_q, _ = query.shape
    heads_kv = key.shape[1]
    if not softcap and sinks is None:
        if mask.dtype != torch.bool:
            mask = mask.to(query.dtype)  # SDPA takes a bool mask or one of the query's dtype
        output = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=mask, scale=scale, enable_gqa=heads_q != heads_kv)
        return output.transpose(1, 2).contiguous()
    # Query head h uses key/value head h // group (transformers' repeat_kv): grouping the
    # query heads lets one key/value head broadcast over its group without copies.
    group = heads_q // heads_kv
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    q = query.float().reshape(batch, heads_kv, group, seq_q, -1)
    scores = (q @ key.float().unsqueeze(2).transpose(-1, -2)) * scale
    scores = scores.reshape(batch, heads_q, seq_q, -1)
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    if mask.dtype == torch.bool:  # the float32 minimum rather than -inf: no NaN in empty rows
        scores = scores.masked_fill(~mask, torch.finfo(torch.float32).min)
    else:
        scores = scores + mask.float()
    if sinks is not None:
        sink_column = sinks.float().reshape(1, heads_q, 1, 1).expand(batch, heads_q, seq_q, 1)
        scores = torch.cat([scores, sink_column], dim=-1)
    probabilities = torch.softmax(scores, dim=-1)
    if sinks is not None:
        probabilities = probabilities[..., :-1]  # the sink's column carries no value
    probabilities = probabilities.reshape(batch, heads_kv, group, seq_q, -1)
    output = (probabilities @ value.float().unsqueeze(2)).reshape(batch, heads_q, seq_q, -1)
    return output.to(query.dtype).transpose(1, 2).contiguous()
