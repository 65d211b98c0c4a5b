"""The torch operators flashgen::attention_forward / attention_backward.

They are torch.library custom ops with fake (shape-only) implementations and a
registered autograd formula, so torch.compile traces them as single nodes
without graph breaks and autograd calls the library's backward. Every output
and the backward's scratch are allocated with torch in the op, on the inputs'
device, so the caching allocator and CUDA graph capture see them.

Tensors come in the caller's layout: [batch, seq, heads, dim], or [batch,
heads, seq, dim] where heads_major is set; the library's views swap the two
axes' sizes and strides (no torch view is made for it), and o and the
gradients are made in the same layout.

Both ops take the masks and score modifiers as nine trailing arguments, in
this order (SCORE_OPTIONS_OFF turns them all off): top_left (causal
alignment), window_left, window_right, softcap, alibi_slopes (fp32 or None),
sinks (fp32 [heads_q] or None), mask_mod (a C expression, "" = off),
mask_names and mask_values (mask_tensors as two lists). The backward
returns a fourth tensor, the sinks' gradient (empty without sinks), which
autograd hands to `sinks`.
"""

# No `from __future__ import annotations`: torch.library reads the operator
# schema from these annotations as real types.
from typing import List, Optional, Tuple

import torch

from . import _capi, _prepared_calls
from ._torch_views import check_head_vector, check_inputs, options_for

# top_left, window_left, window_right, softcap, alibi_slopes, sinks, mask_mod,
# mask_names, mask_values: the mask_tensors dict as its names joined by ","
# (an operator schema takes no list of str; names are identifiers) and a
# list of tensors
SCORE_OPTIONS_OFF = (False, -1, -1, 0.0, None, None, "", "", [])
# The five trailing score arguments that are tensors or a mask, all off.
_NO_SCORE_TENSORS = SCORE_OPTIONS_OFF[4:]


def _check_score_tensors(q, alibi_slopes, sinks) -> None:
    check_head_vector("alibi_slopes", alibi_slopes, q.device)
    check_head_vector("sinks", sinks, q.device)


def _score_keywords(top_left, window_left, window_right, softcap, alibi_slopes, sinks,
                    mask_mod, mask_names, mask_values) -> dict:
    """The trailing score arguments as options_for's keywords."""
    return dict(top_left=top_left, window=(window_left, window_right), softcap=softcap,
                alibi_slopes=alibi_slopes, sinks=sinks, mask_mod=mask_mod,
                mask_names=mask_names, mask_values=mask_values)


_HAS_CUSTOM_OP = hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_fake")


def _on_device(device: torch.device, call) -> None:
    """call() with the tensors' GPU current, as CUDA extensions do, so a
    caller on another current device still works."""
    if device.type == "cuda" and device.index is not None and \
            device.index != torch.cuda.current_device():
        with torch.cuda.device(device):
            call()
    else:
        call()


def _allocate_forward(q: torch.Tensor, v: torch.Tensor, heads_major: bool):
    """o (packed, in the caller's layout) and lse [b, h, s]. new_empty takes
    q's device (and dtype) as they are: torch.empty's keywords cost a small
    call more than the allocation."""
    batch, rows, columns, _ = q.shape  # (seq, heads), or (heads, seq) heads-major
    o = q.new_empty((batch, rows, columns, v.shape[3]))
    heads_q, seq_q = (rows, columns) if heads_major else (columns, rows)
    lse = q.new_empty((batch, heads_q, seq_q), dtype=torch.float32)
    return o, lse


def _allocate_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads_major: bool,
                       sinks):
    # empty_like keeps the input's strides when it is dense, so each gradient
    # has the memory layout of the tensor it belongs to. The sinks' gradient
    # is fp32 [heads_q], or empty without sinks.
    heads_q = q.shape[1] if heads_major else q.shape[2]
    grad_sinks = q.new_empty((heads_q,) if sinks is not None else (0,), dtype=torch.float32)
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), grad_sinks


def _is_plain(score) -> bool:
    """No per-head tensors (ALiBi slopes, sinks) and no mask take part."""
    return score[4] is None and score[5] is None and not score[6] and not score[7]


def _signature(causal, scale, deterministic, heads_major, score):
    """What besides the tensors decides a call's options, for
    _prepared_calls; None where per-head tensors or a mask take part."""
    return (causal, scale, deterministic, heads_major, score[:4]) if _is_plain(score) else None


def _forward_impl(q, k, v, causal, scale, deterministic, heads_major, *score, checked=False):
    """checked: the public function has checked q, k, v already."""
    if not checked:
        check_inputs({"q": q, "k": k, "v": v})
    _check_score_tensors(q, score[4], score[5])
    o, lse = _allocate_forward(q, v, heads_major)
    _on_device(q.device, lambda: _prepared_calls.forward(
        q, k, v, o, lse, heads_major,
        _signature(causal, scale, deterministic, heads_major, score),
        lambda: options_for(q.device, causal=causal, scale=scale,
                            deterministic=deterministic, **_score_keywords(*score))))
    return o, lse


def _backward_impl(grad_o, q, k, v, o, lse, causal, scale, deterministic, heads_major, *score):
    check_inputs({"q": q, "k": k, "v": v, "o": o, "grad_o": grad_o})
    _check_score_tensors(q, score[4], score[5])
    grad_q, grad_k, grad_v, grad_sinks = _allocate_backward(q, k, v, heads_major, score[5])
    _on_device(q.device, lambda: _prepared_calls.backward(
        q, k, v, o, grad_o, lse, grad_q, grad_k, grad_v, heads_major,
        _signature(causal, scale, deterministic, heads_major, score),
        lambda: options_for(q.device, causal=causal, scale=scale, deterministic=deterministic,
                            grad_sinks=grad_sinks if score[5] is not None else None,
                            **_score_keywords(*score))))
    return grad_q, grad_k, grad_v, grad_sinks


def _save(ctx, q, k, v, o, lse, causal, scale, deterministic, heads_major, score) -> None:
    """What the backward needs; the score tensors travel as saved tensors."""
    top_left, window_left, window_right, softcap, alibi_slopes, sinks, mask_mod, mask_names, \
        mask_values = score
    ctx.save_for_backward(q, k, v, o, lse, alibi_slopes, sinks, *mask_values)
    ctx.causal, ctx.scale, ctx.deterministic = causal, scale, deterministic
    ctx.heads_major = heads_major
    # lse takes no gradient: without this, autograd would make a tensor of
    # zeros for it on every backward (an allocation and a fill).
    ctx.set_materialize_grads(False)
    ctx.score_scalars = (top_left, window_left, window_right, softcap)
    ctx.mask = (mask_mod, mask_names)


def _gradients(ctx, backward_op, grad_o, op_structure=False):
    """The forward inputs' gradients: q, k, v, and the sinks' when given.
    op_structure: the custom op's autograd wants a list (of None) for the
    list of mask tensors, the autograd function a None."""
    q, k, v, o, lse, alibi_slopes, sinks, *mask_values = ctx.saved_tensors
    mask_mod, mask_names = ctx.mask
    if grad_o is None:  # grads are not materialized (_save): o took none either
        grad_o = torch.zeros_like(o)
    grad_q, grad_k, grad_v, grad_sinks = backward_op(
        grad_o, q, k, v, o, lse, ctx.causal, ctx.scale, ctx.deterministic, ctx.heads_major,
        *ctx.score_scalars, alibi_slopes, sinks, mask_mod, mask_names, mask_values)
    # causal, scale, deterministic, heads_major, the score scalars and the
    # slopes have none; sinks come sixth of the score arguments, the mask's
    # three after them have none either.
    return (grad_q, grad_k, grad_v, *[None] * (4 + 5),
            grad_sinks if sinks is not None else None, None, None,
            [None] * len(mask_values) if op_structure else None)


class _Attention(torch.autograd.Function):
    """The op as a plain autograd function: eager calls take this path, which
    skips the custom-op dispatcher (tens of microseconds a call on small
    problems); torch.compile traces the custom op."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, deterministic, heads_major, *score):
        o, lse = _forward_impl(q, k, v, causal, scale, deterministic, heads_major, *score,
                              checked=True)
        _save(ctx, q, k, v, o, lse, causal, scale, deterministic, heads_major, score)
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, grad_o, grad_lse):
        return _gradients(ctx, _backward_impl, grad_o)


class _PlainAttention(torch.autograd.Function):
    """_Attention for a call without per-head tensors or a mask (most
    calls): q, k, v and one tuple of the options (causal, scale,
    deterministic, heads_major, then the score scalars) instead of sixteen
    inputs, which autograd's apply takes in about 10 us less on a small
    problem."""

    @staticmethod
    def forward(ctx, q, k, v, options):
        causal, scale, deterministic, heads_major, *scalars = options
        score = (*scalars, *_NO_SCORE_TENSORS)
        o, lse = _forward_impl(q, k, v, causal, scale, deterministic, heads_major, *score,
                               checked=True)
        _save(ctx, q, k, v, o, lse, causal, scale, deterministic, heads_major, score)
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, grad_o, grad_lse):
        # q, k and v's gradients of _Attention's; options takes none.
        return (*_gradients(ctx, _backward_impl, grad_o)[:3], None)


def _apply_autograd(q, k, v, causal, scale, deterministic, heads_major, score):
    """(o, lse) through the autograd function that fits the call."""
    if _is_plain(score):
        return _PlainAttention.apply(q, k, v, (causal, scale, deterministic, heads_major,
                                               *score[:4]))
    return _Attention.apply(q, k, v, causal, scale, deterministic, heads_major, *score)


def _needs_gradient(q, k, v, sinks) -> bool:
    """Whether autograd would record the call: without it (inference, or
    torch.no_grad()) the forward runs without the autograd function's
    bookkeeping, tens of microseconds on a small problem."""
    return torch.is_grad_enabled() and (
        q.requires_grad or k.requires_grad or v.requires_grad
        or (sinks is not None and sinks.requires_grad))


# Whether torch.compile is tracing (resolved once: a lookup per call cost
# as much as the call).
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)


if _HAS_CUSTOM_OP:

    @torch.library.custom_op("flashgen::attention_forward", mutates_args=())
    def attention_forward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                             scale: Optional[float], deterministic: bool, heads_major: bool,
                             top_left: bool, window_left: int, window_right: int, softcap: float,
                             alibi_slopes: Optional[torch.Tensor], sinks: Optional[torch.Tensor],
                             mask_mod: str, mask_names: str,
                             mask_values: List[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        return _forward_impl(q, k, v, causal, scale, deterministic, heads_major, top_left,
                             window_left, window_right, softcap, alibi_slopes, sinks, mask_mod,
                             mask_names, mask_values)

    @attention_forward_op.register_fake
    def _(q, k, v, causal, scale, deterministic, heads_major, *score):
        check_inputs({"q": q, "k": k, "v": v})
        _check_score_tensors(q, score[4], score[5])
        return _allocate_forward(q, v, heads_major)

    @torch.library.custom_op("flashgen::attention_backward", mutates_args=())
    def attention_backward_op(grad_o: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
                              v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, causal: bool,
                              scale: Optional[float], deterministic: bool, heads_major: bool,
                              top_left: bool,
                              window_left: int, window_right: int, softcap: float,
                              alibi_slopes: Optional[torch.Tensor], sinks: Optional[torch.Tensor],
                              mask_mod: str, mask_names: str,
                              mask_values: List[torch.Tensor]
                              ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        return _backward_impl(grad_o, q, k, v, o, lse, causal, scale, deterministic,
                              heads_major, top_left, window_left, window_right, softcap,
                              alibi_slopes, sinks, mask_mod, mask_names, mask_values)

    @attention_backward_op.register_fake
    def _(grad_o, q, k, v, o, lse, causal, scale, deterministic, heads_major, *score):
        check_inputs({"q": q, "k": k, "v": v, "o": o, "grad_o": grad_o})
        return _allocate_backward(q, k, v, heads_major, score[5])

    def _setup_context(ctx, inputs, output):
        q, k, v, causal, scale, deterministic, heads_major = inputs[:7]
        o, lse = output
        _save(ctx, q, k, v, o, lse, causal, scale, deterministic, heads_major, inputs[7:])
        # lse is a statistic for the backward, not a differentiable output.
        ctx.mark_non_differentiable(lse)

    def _backward(ctx, grad_o, grad_lse):
        return _gradients(ctx, attention_backward_op, grad_o, op_structure=True)

    attention_forward_op.register_autograd(_backward, setup_context=_setup_context)

    def attention_forward(q, k, v, causal, scale, deterministic, heads_major, *score):
        """(o, lse) with autograd through the library's backward: the custom op
        while torch.compile traces, the autograd function otherwise."""
        if _is_compiling():
            return attention_forward_op(q, k, v, causal, scale, deterministic, heads_major,
                                        *score)
        if not _needs_gradient(q, k, v, score[5]):
            return _forward_impl(q, k, v, causal, scale, deterministic, heads_major, *score,
                                 checked=True)
        return _apply_autograd(q, k, v, causal, scale, deterministic, heads_major, score)

else:  # PyTorch before 2.4: plain autograd, no torch.compile support.

    def attention_forward(q, k, v, causal, scale, deterministic, heads_major, *score):
        """(o, lse) with autograd through the library's backward."""
        if not _needs_gradient(q, k, v, score[5]):
            return _forward_impl(q, k, v, causal, scale, deterministic, heads_major, *score,
                                 checked=True)
        return _apply_autograd(q, k, v, causal, scale, deterministic, heads_major, score)
