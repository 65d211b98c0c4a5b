"""The two tensor layouts callers use, and how they map to the library's view.

The library reads every tensor as [batch, seq, heads, dim] with arbitrary
element strides, so a [batch, heads, seq, dim] tensor is the same memory seen
through swapped axes 1 and 2: nothing is ever copied.
"""

from __future__ import annotations

BSHD = "bshd"  # [batch, seq, heads, dim]: flash_attn_func
BHSD = "bhsd"  # [batch, heads, seq, dim]: torch.nn.functional.scaled_dot_product_attention
LAYOUTS = (BSHD, BHSD)

# Axis order that turns an array of the given layout into [batch, seq, heads, dim]
# (the permutation is its own inverse).
SEQ_HEADS_SWAP = (0, 2, 1, 3)


def check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def packed_shape(layout: str, batch: int, seq: int, heads: int, dim: int) -> tuple:
    """Shape of a packed array of this layout holding [batch, seq, heads, dim]."""
    if layout == BSHD:
        return (batch, seq, heads, dim)
    return (batch, heads, seq, dim)
