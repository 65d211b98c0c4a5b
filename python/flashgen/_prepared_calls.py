"""The C API's arguments prepared once per call signature.

A training step or a decode loop makes the same call again and again: the
same shapes, strides, dtype, device and options, with new tensors. Building
the views and options (ctypes structures) and asking the library for the
backward's workspace size costs more host time than a small problem's
kernels take, so the first call of a signature builds them and a repeated
call only writes the tensors' addresses, the stream and the thread count
into them. Only plain calls are kept: per-head tensors and masks add views
of more tensors, and those calls build everything each time (through the
same code).

The prepared structures are per thread (two threads never write into the
same one) and only live for the library call that reads them.
"""

from __future__ import annotations

import ctypes
import threading

import torch

from . import _capi
from ._torch_views import row_stats_view, tensor_view

# Signatures kept per thread before the cache starts over: a process that
# sweeps many shapes stays bounded, a loop's few shapes stay prepared.
_LIMIT = 256
_local = threading.local()


def _cache() -> dict:
    try:
        return _local.cache
    except AttributeError:
        _local.cache = {}
        return _local.cache


def _remember(cache: dict, key, prepared):
    if len(cache) >= _LIMIT:
        cache.clear()
    cache[key] = prepared
    return prepared


def _stream_through_torch_cuda(index: int) -> int:
    return torch.cuda.current_stream(index).cuda_stream


# The device's current stream as an address: torch's raw getter, a few times
# cheaper than a torch.cuda.Stream object, where this torch build has it.
_current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", _stream_through_torch_cuda)


def _placement(device: torch.device) -> tuple:
    """(stream, cpu_threads) of a call on `device`, as options_for sets them."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return _current_raw_stream(index), 0
    return None, torch.get_num_threads()


class _Prepared:
    """Views of a call's tensors, its options, and the call's arguments
    (references to them, built once)."""

    __slots__ = ("views", "options", "arguments", "workspace_bytes")

    def __init__(self, views, options, arguments, workspace_bytes=0):
        self.views, self.options, self.arguments = views, options, arguments
        self.workspace_bytes = workspace_bytes

    def bind(self, tensors, device: torch.device) -> None:
        """The new call's tensors (in the views' order), stream and threads."""
        for view, tensor in zip(self.views, tensors):
            view.data = tensor.data_ptr()
        self.options.stream, threads = _placement(device)
        if threads:
            self.options.cpu_threads = threads


def _prepare(cache, key, views, make_options, workspace_size=None):
    """A _Prepared for these views; kept under `key` unless key is None.
    A kept one owns a copy of the options (options_for's structs are shared
    by other callers); one that is not kept holds the struct itself, and
    with it the arrays a mask's options reference."""
    options = make_options()
    if key is not None:
        options = _capi.Options.from_buffer_copy(options)
    workspace_bytes = workspace_size(views, options) if workspace_size else 0
    arguments = [ctypes.byref(x) for x in views]
    if workspace_size:
        arguments += [None, workspace_bytes]
    arguments.append(ctypes.byref(options))
    prepared = _Prepared(views, options, arguments, workspace_bytes)
    return _remember(cache, key, prepared) if key is not None else prepared


def forward(q, k, v, o, lse, heads_major, signature, make_options) -> None:
    """fg_forward. heads_major: q, k, v and o are [batch, heads, seq, dim]
    (else [batch, seq, heads, dim]). signature: what besides the tensors'
    shapes, strides, dtype and device decides the options and the views
    (None: prepare nothing, the call has per-head tensors or a mask);
    make_options() builds the options."""
    key = None if signature is None else \
        (q.shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(), o.stride(), q.dtype,
         q.device, signature)
    cache = _cache()
    prepared = cache.get(key) if key is not None else None
    if prepared is None:
        views = [tensor_view(t, heads_major) for t in (q, k, v, o)] + [row_stats_view(lse)]
        prepared = _prepare(cache, key, views, make_options)
    prepared.bind((q, k, v, o, lse), q.device)
    _capi.check(_capi.lib().fg_forward(*prepared.arguments), "fg_forward")


def _workspace_size(views, options) -> int:
    # The CPU backend takes no workspace; on CUDA the size depends on the
    # signature only (shapes, dtype, deterministic).
    memory = views[0].memory
    return _capi.backward_workspace_bytes(*views, options) if memory == _capi.FG_CUDA else 0


def backward(q, k, v, o, grad_o, lse, grad_q, grad_k, grad_v, heads_major, signature,
             make_options) -> None:
    """fg_backward, as forward(); its workspace comes from torch's allocator
    on the current stream (reused across calls, capturable in a CUDA graph,
    unlike a library-side malloc)."""
    key = None if signature is None else \
        (q.shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(), o.stride(),
         grad_o.stride(), lse.stride(), grad_q.stride(), grad_k.stride(), grad_v.stride(),
         q.dtype, q.device, signature)
    tensors = (q, k, v, o, grad_o, lse, grad_q, grad_k, grad_v)
    cache = _cache()
    prepared = cache.get(key) if key is not None else None
    if prepared is None:
        views = [tensor_view(t, heads_major) for t in (q, k, v, o, grad_o)] + \
            [row_stats_view(lse)] + [tensor_view(t, heads_major) for t in (grad_q, grad_k, grad_v)]
        prepared = _prepare(cache, key, views, make_options, _workspace_size)
    prepared.bind(tensors, q.device)
    if prepared.workspace_bytes:
        workspace = torch.empty(prepared.workspace_bytes, dtype=torch.uint8, device=q.device)
        prepared.arguments[9] = workspace.data_ptr()
    _capi.check(_capi.lib().fg_backward(*prepared.arguments), "fg_backward")
