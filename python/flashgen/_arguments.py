"""Checks of the plain (non-tensor) arguments every call shares.

A value of the wrong type is refused with a TypeError that names the
argument and what it accepts, never coerced: bool("False") is True, so a
string for `causal` would silently run causal attention.
"""

from __future__ import annotations

import numbers

import numpy as np


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))  # numpy's bool is no subclass of bool


def check_bool(name: str, value) -> bool:
    """`value` as a bool; TypeError for anything but True or False."""
    if not _is_bool(value):
        raise TypeError(f"{name} must be a bool (True or False), got {type(value).__name__} "
                        f"{value!r}")
    return bool(value)


def check_causal(value) -> bool:
    """causal: True (bottom-right aligned, as flash-attn) or False."""
    if not _is_bool(value):
        raise TypeError(f"causal must be a bool: True (the causal mask, bottom-right aligned: "
                        f"query i sees keys j <= i + seq_kv - seq_q) or False, got "
                        f"{type(value).__name__} {value!r}")
    return bool(value)


def check_scale(value) -> float | None:
    """scale: a real number, or None for 1/sqrt(dim_qk)."""
    if value is None:
        return None
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise TypeError(f"scale must be a real number or None (1/sqrt(dim_qk)), got "
                        f"{type(value).__name__} {value!r}")
    return float(value)


def check_int(name: str, value) -> int:
    """`value` as an int; TypeError for floats, strings and bools."""
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    return int(value)
