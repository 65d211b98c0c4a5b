"""Exact merge of attention outputs computed over disjoint sets of keys.

Attention over keys K = K_a ∪ K_b, written with each part's row log-sum-exp
lse_x = log Σ_{j in K_x} exp(s_j) and output O_x = Σ_{j in K_x} exp(s_j - lse_x) v_j:

    lse = log(exp(lse_a) + exp(lse_b))
    O   = exp(lse_a - lse) · O_a + exp(lse_b - lse) · O_b

so partial results (one per key block: ring attention, split-K decoding)
combine into the exact result in any order. Works on numpy arrays and torch
tensors alike (the array module is taken from the inputs), in at least fp32.

Shapes follow flashgen's outputs: o [..., seq, heads, dim] and
lse [..., heads, seq] (natural log, -inf for a row that saw no key).
"""

from __future__ import annotations

__all__ = ["merge", "empty_partial"]


class _NumpyOps:
    """The handful of array operations the merge needs, for numpy."""

    def __init__(self):
        import numpy as np

        self.np = np

    def float_dtype(self, x):
        return self.np.result_type(x.dtype, self.np.float32)

    def at_least_float32(self, x):
        return self.np.asarray(x).astype(self.float_dtype(x), copy=False)

    def errstate(self):
        # exp(-inf) = 0 is intended; log(0) is never reached (see merge).
        return self.np.errstate(under="ignore")

    def __getattr__(self, name):  # exp, log, maximum, where, isneginf, *_like
        return getattr(self.np, name)


class _TorchOps:
    """The same operations for torch tensors (any device)."""

    def __init__(self):
        import torch

        self.torch = torch

    def float_dtype(self, x):
        return self.torch.promote_types(x.dtype, self.torch.float32)

    def at_least_float32(self, x):
        return x.to(self.float_dtype(x))

    def errstate(self):
        import contextlib

        return contextlib.nullcontext()

    def __getattr__(self, name):
        return getattr(self.torch, name)


def _ops_for(x):
    """numpy's or torch's operations, chosen by the type of x; torch is only
    imported when it is already in use, so numpy callers never need it."""
    if type(x).__module__.split(".")[0] == "torch":
        return _TorchOps()
    return _NumpyOps()


def _rows_last(lse):
    """lse [..., heads, seq] seen as [..., seq, heads, 1], to scale o row-wise."""
    return lse.swapaxes(-1, -2)[..., None]


def merge(o_a, lse_a, o_b, lse_b):
    """(o, lse) of attention over the union of two disjoint key sets.

    o_a, o_b [..., seq, heads, dim]; lse_a, lse_b [..., heads, seq]. Returns o
    and lse in float32 (float64 inputs stay float64). A row whose lse is -inf
    in both parts (it saw no key at all) gives o = 0 and lse = -inf, without
    evaluating -inf - (-inf). Inputs are not modified.
    """
    ops = _ops_for(o_a)
    o_a, o_b, lse_a, lse_b = (ops.at_least_float32(x) for x in (o_a, o_b, lse_a, lse_b))
    with ops.errstate():
        # Shift by the larger lse so the larger term is exp(0) = 1: the sum
        # lies in [1, 2] and its log cannot overflow or lose the small term's
        # leading digits. A row that is -inf in both parts shifts by 0 instead,
        # so both terms are exp(-inf) = 0, and its lse is set to -inf directly.
        larger = ops.maximum(lse_a, lse_b)
        no_key = ops.isneginf(larger)
        shift = ops.where(no_key, ops.zeros_like(larger), larger)
        total = ops.exp(lse_a - shift) + ops.exp(lse_b - shift)
        safe_total = ops.where(no_key, ops.ones_like(total), total)
        lse = ops.where(no_key, larger, shift + ops.log(safe_total))
        # Weights exp(lse_x - lse) <= 1; where lse = -inf both weights are
        # exp(-inf - 0) = 0, so o = 0 exactly.
        safe_lse = ops.where(no_key, ops.zeros_like(lse), lse)
        weight_a = ops.exp(_rows_last(lse_a - safe_lse))
        weight_b = ops.exp(_rows_last(lse_b - safe_lse))
    return weight_a * o_a + weight_b * o_b, lse


def empty_partial(o_like, lse_like):
    """The merge's identity: o = 0 and lse = -inf, float32 (or wider), shaped
    like o_like and lse_like. merge(empty, x) == x for every partial x."""
    ops = _ops_for(o_like)
    o = ops.zeros_like(o_like, dtype=ops.float_dtype(o_like))
    lse = ops.full_like(lse_like, float("-inf"), dtype=ops.float_dtype(lse_like))
    return o, lse
