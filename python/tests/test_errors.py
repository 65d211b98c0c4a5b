"""Bad input raises TypeError / ValueError with a message that names the problem."""

from __future__ import annotations

import numpy as np
import pytest

import flashgen


def _arrays(dtype=np.float32, heads_q=4, heads_kv=2, seq_q=8, seq_kv=8, dim=16):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, seq_q, heads_q, dim)).astype(dtype)
    k = rng.standard_normal((1, seq_kv, heads_kv, dim)).astype(dtype)
    v = rng.standard_normal((1, seq_kv, heads_kv, dim)).astype(dtype)
    return q, k, v


def test_float64_is_a_type_error():
    q, k, v = _arrays(np.float64)
    with pytest.raises(TypeError, match=r"q: dtype float64 is not supported"):
        flashgen.numpy.forward(q, k, v)


def test_mixed_dtypes_are_a_type_error():
    q, k, v = _arrays()
    with pytest.raises(TypeError, match=r"k has dtype float16 but q has float32"):
        flashgen.numpy.forward(q, k.astype(np.float16), v)


def test_non_arrays_are_a_type_error():
    q, k, v = _arrays()
    with pytest.raises(TypeError, match=r"v must be a numpy.ndarray, got list"):
        flashgen.numpy.forward(q, k, v.tolist())


def test_wrong_rank_is_a_value_error():
    q, k, v = _arrays()
    with pytest.raises(ValueError, match=r"q must have 4 dimensions, got shape \(8, 4, 16\)"):
        flashgen.numpy.forward(q[0], k, v)


def test_unknown_layout_is_a_value_error():
    q, k, v = _arrays()
    with pytest.raises(ValueError, match=r"layout must be one of"):
        flashgen.numpy.forward(q, k, v, layout="sbhd")


def test_byte_strides_that_split_elements_are_a_value_error():
    q, k, v = _arrays()
    raw = np.zeros(q.nbytes * 2, dtype=np.uint8)
    # 6-byte row steps over 4-byte floats: no element stride describes this.
    odd = np.lib.stride_tricks.as_strided(raw.view(np.float32), shape=q.shape,
                                          strides=(q.strides[0], q.strides[1], q.strides[2], 6))
    with pytest.raises(ValueError, match=r"q: stride of 6 bytes along axis 3 is not a multiple "
                                         r"of the element size \(4 bytes\)"):
        flashgen.numpy.forward(odd, k, v)


def test_heads_that_do_not_divide_are_a_value_error_from_the_library():
    q, k, v = _arrays(heads_q=4, heads_kv=3)
    with pytest.raises(ValueError, match=r"heads_kv = 3\) must divide q.shape\[2\] \(heads_q = 4\)"):
        flashgen.numpy.forward(q, k, v)


def test_mismatched_head_dims_are_a_value_error_from_the_library():
    q, k, v = _arrays()
    with pytest.raises(ValueError, match=r"k.shape\[3\]"):
        flashgen.numpy.forward(q, k[..., :8], v)


def test_negative_strides_are_a_value_error_from_the_library():
    q, k, v = _arrays()
    with pytest.raises(ValueError, match=r"negative strides"):
        flashgen.numpy.forward(q[:, ::-1], k, v)


def test_bad_scale_is_a_value_error_from_the_library():
    q, k, v = _arrays()
    with pytest.raises(ValueError, match=r"options.scale"):
        flashgen.numpy.forward(q, k, v, scale=float("nan"))


def test_lse_must_be_float32():
    q, k, v = _arrays()
    o, lse = flashgen.numpy.forward(q, k, v)
    with pytest.raises(TypeError, match=r"lse must be float32, got float64"):
        flashgen.numpy.backward(q, k, v, o, o, lse.astype(np.float64))


def test_lse_of_the_wrong_shape_is_a_value_error_from_the_library():
    q, k, v = _arrays()
    o, lse = flashgen.numpy.forward(q, k, v)
    with pytest.raises(ValueError, match=r"lse.shape"):
        flashgen.numpy.backward(q, k, v, o, o, lse[:, :2])


@pytest.mark.parametrize("causal", ["False", 1, 0.0, None])
def test_causal_of_another_type_is_a_type_error(causal):
    q, k, v = _arrays()
    with pytest.raises(TypeError, match=r"causal must be a bool"):
        flashgen.numpy.forward(q, k, v, causal=causal)
    o, lse = flashgen.numpy.forward(q, k, v)
    with pytest.raises(TypeError, match=r"causal must be a bool"):
        flashgen.numpy.backward(q, k, v, o, o, lse, causal=causal)


@pytest.mark.parametrize("scale", ["0.1", True, 1j])
def test_scale_of_another_type_is_a_type_error(scale):
    q, k, v = _arrays()
    with pytest.raises(TypeError, match=r"scale must be a real number or None"):
        flashgen.numpy.forward(q, k, v, scale=scale)


def test_numpy_bools_and_numbers_are_accepted():
    q, k, v = _arrays()
    o, _ = flashgen.numpy.forward(q, k, v, causal=np.bool_(True), scale=np.float32(0.25))
    expected, _ = flashgen.numpy.forward(q, k, v, causal=True, scale=0.25)
    np.testing.assert_array_equal(o, expected)


def test_cpu_threads_of_another_type_is_a_type_error():
    q, k, v = _arrays()
    with pytest.raises(TypeError, match=r"cpu_threads must be an int"):
        flashgen.numpy.forward(q, k, v, cpu_threads=2.0)
