"""The ctypes mirror of flashgen.h, the library lookup and the error mapping."""

from __future__ import annotations

import ctypes
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import flashgen
from flashgen import _capi, _capi_sequences, _library

REPO = pathlib.Path(__file__).resolve().parents[2]
HEADER_DIR = REPO / "include"

# Every field of the structs, as `struct.field`, in declaration order.
FIELDS = {
    "fg_tensor": ("Tensor", [name for name, _ in _capi.Tensor._fields_]),
    "fg_row_stats": ("RowStats", [name for name, _ in _capi.RowStats._fields_]),
    "fg_head_vector": ("HeadVector", [name for name, _ in _capi.HeadVector._fields_]),
    "fg_mask_tensor": ("MaskTensor", [name for name, _ in _capi.MaskTensor._fields_]),
    "fg_options": ("Options", [name for name, _ in _capi.Options._fields_]),
    "fg_index": ("Index", [name for name, _ in _capi_sequences.Index._fields_]),
    "fg_varlen": ("Varlen", [name for name, _ in _capi_sequences.Varlen._fields_]),
    "fg_kvcache": ("KVCache", [name for name, _ in _capi_sequences.KVCache._fields_]),
}
ENUMS = ["FG_OK", "FG_INVALID_ARGUMENT", "FG_UNSUPPORTED", "FG_RUNTIME", "FG_F16", "FG_BF16",
         "FG_F32", "FG_HOST", "FG_CUDA", "FG_BACKEND_AUTO", "FG_BACKEND_CUDA", "FG_BACKEND_CPU",
         "FG_CAUSAL_BOTTOM_RIGHT", "FG_CAUSAL_TOP_LEFT", "FG_MASK_INT32", "FG_MASK_FLOAT32"]


def _layout_program() -> str:
    """C that prints `name value` for each struct's size, each field's offset
    and size, and each enum value, as the compiler sees flashgen.h."""
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include \"flashgen/flashgen.h\"",
             "int main(void) {"]
    for struct, (_, fields) in FIELDS.items():
        lines.append(f'  printf("{struct} %zu\\n", sizeof({struct}));')
        for field in fields:
            lines.append(f'  printf("{struct}.{field} %zu %zu\\n", offsetof({struct}, {field}), '
                         f'sizeof((({struct}*)0)->{field}));')
    for enum in ENUMS:
        lines.append(f'  printf("{enum} %d\\n", (int){enum});')
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


def test_structs_and_enums_match_the_header(tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to read flashgen.h with")
    source = tmp_path / "layout.c"
    source.write_text(_layout_program())
    binary = tmp_path / "layout"
    subprocess.run([compiler, f"-I{HEADER_DIR}", str(source), "-o", str(binary)], check=True)
    facts = {}
    for line in subprocess.run([str(binary)], check=True, capture_output=True,
                               text=True).stdout.splitlines():
        name, *numbers = line.split()
        facts[name] = tuple(int(n) for n in numbers)
    for struct, (python_name, fields) in FIELDS.items():
        mirror = getattr(_capi, python_name, None) or getattr(_capi_sequences, python_name)
        assert facts[struct] == (ctypes.sizeof(mirror),), f"sizeof({struct})"
        for field in fields:
            descriptor = getattr(mirror, field)
            assert facts[f"{struct}.{field}"] == (descriptor.offset, descriptor.size), \
                f"{struct}.{field} (offset, size)"
    for enum in ENUMS:
        assert facts[enum] == (getattr(_capi, enum),), enum


def test_version_and_cuda_available():
    assert flashgen.version()[0].isdigit()
    assert isinstance(flashgen.cuda_available(), bool)


def test_error_mapping():
    for status, kind in ((_capi.FG_INVALID_ARGUMENT, ValueError),
                         (_capi.FG_UNSUPPORTED, flashgen.UnsupportedError),
                         (_capi.FG_RUNTIME, RuntimeError)):
        error = _capi.error_for(status, "fg_forward")
        assert type(error) is kind
    assert issubclass(flashgen.UnsupportedError, RuntimeError)


def test_cuda_memory_without_a_gpu_is_unsupported():
    if flashgen.cuda_available():
        pytest.skip("a GPU is here")
    q = np.zeros((1, 4, 2, 8), np.float16)
    o = np.zeros_like(q)
    lse = np.zeros((1, 2, 4), np.float32)

    def cuda_view(a):  # a host address labelled cuda: the planner refuses before any access
        return _capi.make_tensor(a.ctypes.data, _capi.FG_F16, _capi.FG_CUDA, 0, a.shape,
                                 [s // a.itemsize for s in a.strides])

    lse_view = _capi.make_row_stats(lse.ctypes.data, _capi.FG_CUDA, 0, lse.shape, (8, 4, 1))
    with pytest.raises(flashgen.UnsupportedError, match=r"CUDA"):
        _capi.forward(cuda_view(q), cuda_view(q), cuda_view(q), cuda_view(o), lse_view,
                      _capi.make_options())


def test_library_lookup_order(monkeypatch, tmp_path):
    monkeypatch.setenv(_library.ENVIRONMENT_VARIABLE, str(tmp_path / "missing.so"))
    assert _library.candidate_paths() == [tmp_path / "missing.so"]
    with pytest.raises(OSError, match=r"FLASHGEN_LIBRARY=.*does not name a file"):
        _library.find_library()
    monkeypatch.delenv(_library.ENVIRONMENT_VARIABLE)
    paths = _library.candidate_paths()
    package = pathlib.Path(flashgen.__file__).resolve().parent
    assert paths[0] == package / "_lib" / "libflashgen.so"
    assert paths[-1] == REPO / "build" / "libflashgen.so"


def test_import_without_the_library_then_a_clear_error(tmp_path):
    """`import flashgen` needs no library; the first call says where it looked."""
    code = ("import flashgen\n"
            "try:\n"
            "    flashgen.version()\n"
            "except OSError as e:\n"
            "    print('OSError', e)\n")
    env = dict(os.environ, FLASHGEN_LIBRARY=str(tmp_path / "nowhere" / "libflashgen.so"),
               PYTHONPATH=str(REPO / "python"))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, check=True)
    assert "OSError FLASHGEN_LIBRARY=" in result.stdout, result.stdout + result.stderr


def test_attention_without_torch_says_what_it_needs():
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"flashgen.attention needs PyTorch"):
            flashgen.attention(None, None, None)
    else:
        pytest.skip("PyTorch is installed: test_torch.py covers flashgen.attention")
