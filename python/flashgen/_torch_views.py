"""torch.Tensor -> the C API's views, and the checks made before any launch.

Views carry the tensor's own data pointer (storage offset included) and
element strides, so the library reads the caller's memory in place.
"""

from __future__ import annotations

import torch

from . import _capi

_FG_DTYPES = {
    torch.float16: _capi.FG_F16,
    torch.bfloat16: _capi.FG_BF16,
    torch.float32: _capi.FG_F32,
}
# What a view may carry besides: fp8, the storage of a KV cache only (the
# library refuses it by name anywhere else).
_VIEW_DTYPES = dict(_FG_DTYPES)
if hasattr(torch, "float8_e4m3fn"):
    _VIEW_DTYPES[torch.float8_e4m3fn] = _capi.FG_E4M3
_DEVICE_TYPES = ("cpu", "cuda")


def check_inputs(tensors: dict) -> None:
    """TypeError for a dtype problem, ValueError for a rank or device problem.

    tensors maps argument names to tensors that must share dtype and device.
    Runs on real and fake tensors alike, so torch.compile reports the same
    errors at trace time.
    """
    if _same_kind_tensors(tensors.values()):
        return
    first_name = None
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dim() != _capi.TENSOR_RANK:
            raise ValueError(f"{name} must have {_capi.TENSOR_RANK} dimensions, got shape "
                             f"{tuple(tensor.shape)}")
        if tensor.dtype not in _FG_DTYPES:
            raise TypeError(f"{name}: dtype {tensor.dtype} is not supported; use "
                            f"torch.float16, torch.bfloat16 or torch.float32")
        if tensor.device.type not in _DEVICE_TYPES:
            raise ValueError(f"{name} is on device {tensor.device}; flashgen runs on CPU "
                             f"and CUDA tensors")
        if first_name is None:
            first_name = name
            continue
        first = tensors[first_name]
        if tensor.dtype != first.dtype:
            raise TypeError(f"{name} has dtype {tensor.dtype} but {first_name} has "
                            f"{first.dtype}; all must have the same dtype")
        if tensor.device != first.device:
            raise ValueError(f"{name} is on {tensor.device} but {first_name} is on "
                             f"{first.device}; all must be on the same device")


def _same_kind_tensors(tensors) -> bool:
    """True when check_inputs has nothing to say: torch tensors of the
    rank, one supported dtype and one CPU or CUDA device (the common case,
    checked without building messages)."""
    first = None
    for tensor in tensors:
        if type(tensor) is not torch.Tensor and not isinstance(tensor, torch.Tensor):
            return False
        if first is None:
            first = tensor
            if tensor.dtype not in _FG_DTYPES or tensor.device.type not in _DEVICE_TYPES:
                return False
        elif tensor.dtype != first.dtype or tensor.device != first.device:
            return False
        if tensor.dim() != _capi.TENSOR_RANK:
            return False
    return True


def memory_of(device: torch.device) -> tuple:
    """(memory kind, CUDA ordinal) of a torch device, as the C API takes them."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return _capi.FG_CUDA, index
    return _capi.FG_HOST, 0


def tensor_view(tensor: torch.Tensor, heads_major: bool = False) -> _capi.Tensor:
    """[batch, seq, heads, dim] view of a 4-D tensor; heads_major: the tensor
    is [batch, heads, seq, dim], its two middle axes swapped in the view."""
    memory, device = memory_of(tensor.device)
    shape, stride = tensor.shape, tensor.stride()
    if heads_major:
        shape = (shape[0], shape[2], shape[1], shape[3])
        stride = (stride[0], stride[2], stride[1], stride[3])
    return _capi.make_tensor(tensor.data_ptr(), _VIEW_DTYPES[tensor.dtype], memory, device,
                             shape, stride)


def row_stats_view(tensor: torch.Tensor) -> _capi.RowStats:
    """fp32 [batch, heads, seq] view."""
    if tensor.dtype != torch.float32 or tensor.dim() != _capi.ROW_STATS_RANK:
        raise TypeError(f"lse must be a float32 tensor of {_capi.ROW_STATS_RANK} dimensions, "
                        f"got {tensor.dtype} of shape {tuple(tensor.shape)}")
    memory, device = memory_of(tensor.device)
    return _capi.make_row_stats(tensor.data_ptr(), memory, device, tensor.shape,
                                tensor.stride())


def check_head_vector(name: str, tensor, device: torch.device) -> None:
    """TypeError unless None or a float32 tensor on `device` (the library
    checks its shape: [heads_q], or [batch, heads_q] for alibi_slopes)."""
    if tensor is None:
        return
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(tensor).__name__}")
    if tensor.dtype != torch.float32:
        raise TypeError(f"{name} must be float32, got {tensor.dtype}")
    if tensor.device != device:
        raise ValueError(f"{name} is on {tensor.device} but q is on {device}; all must be on "
                         f"the same device")


def head_vector_view(tensor) -> _capi.HeadVector | None:
    """fp32 [heads_q] or [batch, heads_q] view; None stays None (not given)."""
    if tensor is None:
        return None
    memory, device = memory_of(tensor.device)
    return _capi.make_head_vector(tensor.data_ptr(), memory, device, tensor.shape,
                                  tensor.stride())


# Options without per-head vectors, by everything that sets them: a repeated
# call reuses its ctypes struct (the library only reads it). Bounded, since
# a stream or a scale may change from call to call.
_OPTIONS_CACHE: dict = {}
_OPTIONS_CACHE_LIMIT = 256


def mask_lists(mask_tensors) -> tuple:
    """mask_tensors ({name: tensor} or None) as the ops' arguments: the names
    joined by "," and the tensors."""
    if mask_tensors is None:
        return "", []
    if not isinstance(mask_tensors, dict):
        raise TypeError(f"mask_tensors must be a dict of name -> torch.Tensor or None, got "
                        f"{type(mask_tensors).__name__}")
    for name in mask_tensors:
        if not isinstance(name, str):
            raise TypeError(f"mask_tensors' keys must be str (the names the expression uses), "
                            f"got {type(name).__name__}")
        if "," in name or not name:  # the library's rule, which the joined form needs first
            raise ValueError(f"mask_tensors' name {name!r} must be an identifier "
                             f"([A-Za-z_][A-Za-z0-9_]*)")
    return ",".join(mask_tensors), list(mask_tensors.values())


def mask_tensor_views(names: str, values) -> list:
    """The mask arrays (the i-th of the ","-joined names -> values[i], 1-D
    tensors read in place) as the library's views; the library checks names,
    dtypes, ranks and memory."""
    views = []
    for name, tensor in zip(names.split(",") if names else [], values):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"mask_tensors[{name!r}] must be a torch.Tensor, got "
                            f"{type(tensor).__name__}")
        dtype = {torch.int32: _capi.FG_MASK_INT32,
                 torch.float32: _capi.FG_MASK_FLOAT32}.get(tensor.dtype, _capi.FG_MASK_OTHER)
        memory, device = memory_of(tensor.device)
        views.append(_capi.mask_entry(name, tensor.data_ptr(), dtype, memory, device,
                                      tensor.shape, tensor.stride()))
    return views


def options_for(device: torch.device, *, causal: bool, scale, deterministic: bool,
                top_left: bool = False, window=(-1, -1), softcap: float = 0.0,
                alibi_slopes=None, sinks=None, grad_sinks=None, mask_mod: str = "",
                mask_names: str = "", mask_values=()) -> _capi.Options:
    """Options that run on the tensors' device: CUDA tensors on the current
    stream of their device (so CUDA graphs capture the launches), CPU tensors
    on the CPU backend with torch.get_num_threads() threads."""
    if device.type == "cuda":
        placement = (_capi.FG_BACKEND_CUDA, torch.cuda.current_stream(device).cuda_stream, 0)
    else:  # as torch's own CPU operators do: the thread count the caller gave torch
        placement = (_capi.FG_BACKEND_CPU, None, torch.get_num_threads())
    plain = alibi_slopes is None and sinks is None and grad_sinks is None and not mask_mod \
        and not mask_names
    key = (placement, causal, scale, deterministic, top_left, tuple(window), softcap)
    if plain and key in _OPTIONS_CACHE:
        return _OPTIONS_CACHE[key]
    backend, stream, threads = placement
    options = _capi.make_options(
        scale=scale, causal=causal, backend=backend, deterministic=deterministic, stream=stream,
        cpu_threads=threads,
        causal_alignment=_capi.FG_CAUSAL_TOP_LEFT if top_left else _capi.FG_CAUSAL_BOTTOM_RIGHT,
        window=window, softcap=softcap, alibi_slopes=head_vector_view(alibi_slopes),
        sinks=head_vector_view(sinks), grad_sinks=head_vector_view(grad_sinks),
        mask_mod=mask_mod or None, mask_tensors=mask_tensor_views(mask_names, mask_values))
    if plain:
        if len(_OPTIONS_CACHE) >= _OPTIONS_CACHE_LIMIT:
            _OPTIONS_CACHE.clear()
        _OPTIONS_CACHE[key] = options
    return options
