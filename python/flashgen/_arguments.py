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


# causal= as a string: where the diagonal sits when seq_q != seq_kv.
CAUSAL_ALIGNMENTS = {
    "bottom_right": "query i sees keys j <= i + seq_kv - seq_q (flash-attn; what True means)",
    "top_left": "query i sees keys j <= i (torch SDPA's is_causal)",
}


def check_causal_mode(value) -> tuple:
    """causal: False, True (= "bottom_right"), "bottom_right" or "top_left".

    Returns (causal, top_left) as bools."""
    if _is_bool(value):
        return bool(value), False
    if isinstance(value, str) and value in CAUSAL_ALIGNMENTS:
        return True, value == "top_left"
    modes = "; ".join(f'"{name}": {rule}' for name, rule in CAUSAL_ALIGNMENTS.items())
    raise TypeError(f"causal must be a bool (True = bottom-right aligned, as flash-attn; False) "
                    f"or a string, {modes}; got {type(value).__name__} {value!r}")


def check_window(value) -> tuple:
    """window_size: (left, right) ints, -1 = unbounded on that side."""
    if type(value) is tuple and len(value) == 2 and type(value[0]) is int \
            and type(value[1]) is int:  # the common case, without the ABC checks below
        return value
    if (not isinstance(value, (tuple, list)) or len(value) != 2
            or any(_is_bool(x) or not isinstance(x, numbers.Integral) for x in value)):
        raise TypeError(f"window_size must be a pair of ints (left, right), -1 = unbounded: "
                        f"query i sees keys j with i + seq_kv - seq_q - left <= j <= "
                        f"i + seq_kv - seq_q + right; got {value!r}")
    return int(value[0]), int(value[1])


def check_softcap(value) -> float:
    """softcap: a real number, 0 = off (the library refuses a negative one)."""
    if type(value) is float:
        return value
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise TypeError(f"softcap must be a real number (0 = off), got "
                        f"{type(value).__name__} {value!r}")
    return float(value)


def check_scale(value) -> float | None:
    """scale: a real number, or None for 1/sqrt(dim_qk)."""
    if value is None or type(value) is float:
        return value
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise TypeError(f"scale must be a real number or None (1/sqrt(dim_qk)), got "
                        f"{type(value).__name__} {value!r}")
    return float(value)


def check_int(name: str, value) -> int:
    """`value` as an int; TypeError for floats, strings and bools."""
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    return int(value)
