"""flashgen: exact attention (FlashAttention) for any head dimension.

    import flashgen
    o = flashgen.attention(q, k, v, causal=True)         # torch tensors, autograd
    o = flashgen.scaled_dot_product_attention(q, k, v, is_causal=True)  # SDPA's signature
    o, lse = flashgen.numpy.forward(q, k, v)              # numpy arrays, CPU

The library is reached through its C API (ctypes), so the package does not
depend on the PyTorch version; PyTorch is optional.
"""

from . import numpy
from .ring import ring_attention, ring_ranges, ring_shard, ring_unshard  # context parallelism
from ._capi import UnsupportedError
from . import _capi

__all__ = ["attention", "attention_varlen", "attention_with_kvcache", "cuda_available", "numpy",
           "ring_attention", "ring_ranges", "ring_shard", "ring_unshard",
           "scaled_dot_product_attention", "UnsupportedError", "version"]


def version() -> str:
    """The library's version string."""
    return _capi.version()


def cuda_available() -> bool:
    """True when a CUDA device can run flashgen kernels in this process."""
    return _capi.cuda_available()


try:
    import torch as _torch  # noqa: F401  (optional)
except ImportError:
    _torch = None

if _torch is not None:
    from ._torch_attention import attention
    from ._torch_sequences import attention_varlen, attention_with_kvcache
    from ._torch_sdpa import scaled_dot_product_attention
else:

    def attention(*args, **kwargs):
        """Needs PyTorch; see flashgen.numpy for arrays."""
        raise ImportError("flashgen.attention needs PyTorch (pip install torch); "
                          "flashgen.numpy works on numpy arrays without it")

    def attention_varlen(*args, **kwargs):
        """Needs PyTorch; see flashgen.numpy.forward_varlen for arrays."""
        raise ImportError("flashgen.attention_varlen needs PyTorch (pip install torch)")

    def attention_with_kvcache(*args, **kwargs):
        """Needs PyTorch; see flashgen.numpy.forward_with_kvcache for arrays."""
        raise ImportError("flashgen.attention_with_kvcache needs PyTorch (pip install torch)")

    def scaled_dot_product_attention(*args, **kwargs):
        """Needs PyTorch."""
        raise ImportError("flashgen.scaled_dot_product_attention needs PyTorch (pip install torch)")
