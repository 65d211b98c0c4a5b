"""ctypes mirror of include/flashgen/flashgen.h.

The structs repeat the header's field order and C types exactly (tests compare
their offsets with a C compiler's); any change to the header must be repeated
here. Every entry point returns an fg_status, turned into a Python exception by
check() with the library's own message.
"""

from __future__ import annotations

import ctypes
import functools
import math
import struct
from ctypes import POINTER, c_char_p, c_double, c_int, c_int32, c_int64, c_size_t, c_void_p

from . import _library

# fg_status
FG_OK = 0
FG_INVALID_ARGUMENT = 1
FG_UNSUPPORTED = 2
FG_RUNTIME = 3

# fg_dtype
FG_F16 = 0
FG_BF16 = 1
FG_F32 = 2
FG_E4M3 = 3  # fp8: a KV cache's storage only

# fg_memory
FG_HOST = 0
FG_CUDA = 1

# fg_backend
FG_BACKEND_AUTO = 0
FG_BACKEND_CUDA = 1
FG_BACKEND_CPU = 2

# fg_causal_alignment
FG_CAUSAL_BOTTOM_RIGHT = 0
FG_CAUSAL_TOP_LEFT = 1

TENSOR_RANK = 4     # [batch, seq, heads, dim]
ROW_STATS_RANK = 3  # [batch, heads, seq]


class UnsupportedError(RuntimeError):
    """The problem is valid, but no backend can run it here (e.g. no GPU)."""

    __module__ = "flashgen"


class Tensor(ctypes.Structure):
    """fg_tensor: [batch, seq, heads, dim]; strides count elements."""

    _fields_ = [
        ("data", c_void_p),
        ("dtype", c_int32),
        ("memory", c_int32),
        ("device", c_int32),
        ("reserved", c_int32),
        ("shape", c_int64 * TENSOR_RANK),
        ("stride", c_int64 * TENSOR_RANK),
    ]


class RowStats(ctypes.Structure):
    """fg_row_stats: fp32 [batch, heads, seq]; strides count elements."""

    _fields_ = [
        ("data", c_void_p),  # float*; declared void* so any address converts
        ("memory", c_int32),
        ("device", c_int32),
        ("shape", c_int64 * ROW_STATS_RANK),
        ("stride", c_int64 * ROW_STATS_RANK),
    ]


class HeadVector(ctypes.Structure):
    """fg_head_vector: fp32 [heads_q] (rank 1) or [batch, heads_q] (rank 2)."""

    _fields_ = [
        ("data", c_void_p),  # float*; NULL = not given
        ("memory", c_int32),
        ("device", c_int32),
        ("rank", c_int32),
        ("reserved", c_int32),
        ("shape", c_int64 * 2),
        ("stride", c_int64 * 2),
    ]


class MaskTensor(ctypes.Structure):
    """fg_mask_tensor: a named 1-D int32 or fp32 array a mask expression reads."""

    _fields_ = [
        ("name", c_char_p),
        ("data", c_void_p),
        ("dtype", c_int32),  # FG_MASK_INT32, FG_MASK_FLOAT32; other values are refused
        ("memory", c_int32),
        ("device", c_int32),
        ("rank", c_int32),
        ("size", c_int64),
        ("stride", c_int64),
    ]


FG_MASK_INT32, FG_MASK_FLOAT32 = 0, 1
# A dtype the library does not take: passed so that its rule refuses it.
FG_MASK_OTHER = -1


class Options(ctypes.Structure):
    """fg_options."""

    _fields_ = [
        ("scale", c_double),
        ("has_scale", c_int32),
        ("causal", c_int32),
        ("backend", c_int32),
        ("deterministic", c_int32),
        ("stream", c_void_p),
        ("cpu_threads", c_int32),
        ("reserved", c_int32),
        ("window_left", c_int64),
        ("window_right", c_int64),
        ("softcap", c_double),
        ("causal_alignment", c_int32),
        ("reserved2", c_int32),
        ("alibi_slopes", HeadVector),
        ("sinks", HeadVector),
        ("grad_sinks", HeadVector),
        ("mask_mod", c_char_p),
        ("mask_tensors", POINTER(MaskTensor)),
        ("mask_tensor_count", c_int64),
    ]


_TensorP = POINTER(Tensor)
_RowStatsP = POINTER(RowStats)
_OptionsP = POINTER(Options)

# name -> (restype, argtypes), in the header's order.
_PROTOTYPES = {
    "fg_options_init": (None, [_OptionsP]),
    "fg_forward": (c_int, [_TensorP, _TensorP, _TensorP, _TensorP, _RowStatsP, _OptionsP]),
    "fg_backward": (c_int, [_TensorP, _TensorP, _TensorP, _TensorP, _TensorP, _RowStatsP,
                            _TensorP, _TensorP, _TensorP, c_void_p, c_size_t, _OptionsP]),
    "fg_backward_workspace_bytes": (c_int, [_TensorP, _TensorP, _TensorP, _TensorP, _TensorP,
                                            _RowStatsP, _TensorP, _TensorP, _TensorP,
                                            _OptionsP, POINTER(c_size_t)]),
    "fg_supports_forward": (c_int, [_TensorP, _TensorP, _TensorP, _TensorP, _RowStatsP,
                                    _OptionsP]),
    "fg_last_error": (c_char_p, []),
    "fg_version": (c_char_p, []),
    "fg_cuda_available": (c_int, []),
}


@functools.lru_cache(maxsize=None)
def lib() -> ctypes.CDLL:
    """The library with every prototype declared."""
    return declare(_library.load(), _PROTOTYPES)


def declare(library: ctypes.CDLL, prototypes: dict) -> ctypes.CDLL:
    """Sets each function's restype and argtypes from name -> (restype, argtypes)."""
    for name, (restype, argtypes) in prototypes.items():
        function = getattr(library, name)
        function.restype = restype
        function.argtypes = argtypes
    return library


def last_error() -> str:
    message = lib().fg_last_error()
    return message.decode("utf-8", "replace") if message else ""


def error_for(status: int, what: str) -> Exception:
    """The exception for a failing status; the message is fg_last_error()."""
    message = last_error() or f"{what} failed with status {status}"
    if status == FG_INVALID_ARGUMENT:
        return ValueError(message)
    if status == FG_UNSUPPORTED:
        return UnsupportedError(message)
    return RuntimeError(message)


def check(status: int, what: str) -> None:
    # fg_last_error() is per thread; ctypes runs the call and this read on
    # the same thread, so the message belongs to this call.
    if status != FG_OK:
        raise error_for(status, what)


# A view is made for every tensor of every call, so it is packed in one call
# (a third of the time of the ctypes constructor with its two arrays); the
# layouts are the structures' own, which the asserts below keep so.
_TENSOR_LAYOUT = struct.Struct(f"@Piiii{TENSOR_RANK}q{TENSOR_RANK}q")
_ROW_STATS_LAYOUT = struct.Struct(f"@Pii{ROW_STATS_RANK}q{ROW_STATS_RANK}q")
assert _TENSOR_LAYOUT.size == ctypes.sizeof(Tensor) and Tensor.shape.offset == 24
assert _ROW_STATS_LAYOUT.size == ctypes.sizeof(RowStats) and RowStats.shape.offset == 16


def make_tensor(data: int, dtype: int, memory: int, device: int, shape, stride) -> Tensor:
    if len(shape) != TENSOR_RANK or len(stride) != TENSOR_RANK:
        raise ValueError(f"a tensor view needs {TENSOR_RANK} dimensions, got shape {tuple(shape)}")
    return Tensor.from_buffer_copy(_TENSOR_LAYOUT.pack(data or 0, dtype, memory, device, 0, *shape,
                                                       *stride))


def make_row_stats(data: int, memory: int, device: int, shape, stride) -> RowStats:
    if len(shape) != ROW_STATS_RANK or len(stride) != ROW_STATS_RANK:
        raise ValueError(f"row statistics need {ROW_STATS_RANK} dimensions, got shape "
                         f"{tuple(shape)}")
    return RowStats.from_buffer_copy(_ROW_STATS_LAYOUT.pack(data or 0, memory, device, *shape,
                                                           *stride))


def make_head_vector(data: int, memory: int, device: int, shape, stride) -> HeadVector:
    """A per-head fp32 view; shape and stride of rank 1 or 2."""
    view = HeadVector()
    view.data = data
    view.memory = memory
    view.device = device
    view.rank = len(shape)
    view.shape[:len(shape)] = [int(n) for n in shape]
    view.stride[:len(stride)] = [int(s) for s in stride]
    return view


def make_options(*, scale=None, causal=False, backend=FG_BACKEND_AUTO, deterministic=True,
                 stream=None, cpu_threads=0, causal_alignment=FG_CAUSAL_BOTTOM_RIGHT,
                 window=(-1, -1), softcap=0.0, alibi_slopes: HeadVector | None = None,
                 sinks: HeadVector | None = None,
                 grad_sinks: HeadVector | None = None, mask_mod: str | None = None,
                 mask_tensors: list | None = None) -> Options:
    options = Options()
    lib().fg_options_init(ctypes.byref(options))
    if scale is not None:
        options.scale = float(scale)
        options.has_scale = 1
    options.causal = int(bool(causal))
    options.backend = backend
    options.deterministic = int(bool(deterministic))
    options.stream = stream
    options.cpu_threads = int(cpu_threads)
    options.causal_alignment = int(causal_alignment)
    options.window_left, options.window_right = int(window[0]), int(window[1])
    options.softcap = float(softcap)
    if alibi_slopes is not None:
        options.alibi_slopes = alibi_slopes
    if sinks is not None:
        options.sinks = sinks
    if grad_sinks is not None:
        options.grad_sinks = grad_sinks
    if mask_mod is not None or mask_tensors:
        set_mask(options, mask_mod, mask_tensors or [])
    return options


def mask_entry(name, data: int, dtype: int, memory: int, device: int, shape, strides) -> tuple:
    """One entry of set_mask's list for an array of `shape` and element
    `strides`: a rank-1 array as it is; another rank with its element count,
    for the library to refuse by its rank."""
    rank = len(shape)
    size = shape[0] if rank == 1 else math.prod(shape)
    stride = strides[0] if rank == 1 else 1
    return (name, data, dtype, memory, device, rank, size, stride)


def set_mask(options: Options, mask_mod, tensors: list) -> None:
    """options.mask_mod and mask_tensors from the expression and a list of
    (name, data, fg_mask_dtype, memory, device, rank, size, stride); the
    library checks every rule. The text and the array stay referenced by
    `options` for as long as it lives."""
    if mask_mod is not None and not isinstance(mask_mod, str):
        raise TypeError(f"mask_mod must be a str (a C expression) or None, got "
                        f"{type(mask_mod).__name__}")
    text = (mask_mod or "").encode("utf-8")
    array = (MaskTensor * max(len(tensors), 1))()
    names = []
    for i, (name, data, dtype, memory, device, rank, size, stride) in enumerate(tensors):
        if not isinstance(name, str):
            raise TypeError(f"mask_tensors' keys must be str (the names the expression uses), "
                            f"got {type(name).__name__}")
        names.append(name.encode("utf-8"))
        array[i] = MaskTensor(names[-1], data, dtype, memory, device, rank, size, stride)
    options.mask_mod = text
    options.mask_tensors = array
    options.mask_tensor_count = len(tensors)
    options._mask_references = (text, array, names)


def forward(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: RowStats | None,
            options: Options) -> None:
    lse_pointer = ctypes.byref(lse) if lse is not None else None
    check(lib().fg_forward(ctypes.byref(q), ctypes.byref(k), ctypes.byref(v), ctypes.byref(o),
                           lse_pointer, ctypes.byref(options)), "fg_forward")


def backward_workspace_bytes(q: Tensor, k: Tensor, v: Tensor, o: Tensor, grad_o: Tensor,
                             lse: RowStats, grad_q: Tensor, grad_k: Tensor, grad_v: Tensor,
                             options: Options) -> int:
    size = c_size_t(0)
    refs = [ctypes.byref(t) for t in (q, k, v, o, grad_o, lse, grad_q, grad_k, grad_v, options)]
    check(lib().fg_backward_workspace_bytes(*refs, ctypes.byref(size)),
          "fg_backward_workspace_bytes")
    return size.value


def backward(q: Tensor, k: Tensor, v: Tensor, o: Tensor, grad_o: Tensor, lse: RowStats,
             grad_q: Tensor, grad_k: Tensor, grad_v: Tensor, workspace: int | None,
             workspace_bytes: int, options: Options) -> None:
    refs = [ctypes.byref(t) for t in (q, k, v, o, grad_o, lse, grad_q, grad_k, grad_v)]
    check(lib().fg_backward(*refs, workspace, workspace_bytes, ctypes.byref(options)),
          "fg_backward")


def supports_forward(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: RowStats | None,
                     options: Options) -> tuple[bool, str]:
    lse_pointer = ctypes.byref(lse) if lse is not None else None
    status = lib().fg_supports_forward(ctypes.byref(q), ctypes.byref(k), ctypes.byref(v),
                                       ctypes.byref(o), lse_pointer, ctypes.byref(options))
    return status == FG_OK, ("" if status == FG_OK else last_error())


def version() -> str:
    return lib().fg_version().decode()


def cuda_available() -> bool:
    return lib().fg_cuda_available() == 1
