"""flashgen.numpy (CPU backend) against the float64 numpy reference."""

from __future__ import annotations

import numpy as np
import pytest

import attention_reference as ref
import flashgen

# (batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v)
SHAPES = [
    (2, 37, 50, 4, 2, 1, 1),        # D = 1, GQA, seq_q < seq_kv
    (2, 37, 50, 4, 2, 40, 40),
    (1, 29, 33, 2, 1, 127, 127),    # MQA
    (1, 21, 19, 2, 2, 199, 199),
    (1, 64, 64, 2, 2, 40, 72),      # dim_v != dim_qk
    (2, 50, 20, 4, 1, 32, 32),      # seq_q > seq_kv: causal leaves rows fully masked
    (1, 1, 70, 2, 2, 64, 64),       # a single query (decoding)
]
DTYPES = ["float32", "float16"]


def _numpy_dtype(name: str):
    if name == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes", reason="numpy bfloat16 needs ml_dtypes")
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


# How each storage kind allocates memory for a [b, s, h, d] array, and the
# [b, s, h, d] view of that memory the test passes in.
STORAGES = {
    "packed": (lambda b, s, h, d: (b, s, h, d), lambda a, d: a),
    # [b, h, s, d] memory, the layout of scaled_dot_product_attention
    "heads_major": (lambda b, s, h, d: (b, h, s, d), lambda a, d: a.transpose(0, 2, 1, 3)),
    # rows longer than d: a slice of a wider buffer
    "padded_dim": (lambda b, s, h, d: (b, s, h, d + 5), lambda a, d: a[..., :d]),
    "every_other_seq": (lambda b, s, h, d: (b, 2 * s, h, d), lambda a, d: a[:, ::2]),
}


def _random(rng, shape, dtype, storage: str = "packed"):
    """A [b, s, h, d] array of dtype whose memory is laid out as `storage` says."""
    memory_shape, view_of = STORAGES[storage]
    memory = rng.standard_normal(memory_shape(*shape)).astype(dtype)
    view = view_of(memory, shape[3])
    assert view.shape == shape
    return view


def _inputs(shape, dtype, storage="packed", seed=0):
    batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v = shape
    rng = np.random.default_rng(seed)
    q = _random(rng, (batch, seq_q, heads_q, dim_qk), dtype, storage)
    k = _random(rng, (batch, seq_kv, heads_kv, dim_qk), dtype, storage)
    v = _random(rng, (batch, seq_kv, heads_kv, dim_v), dtype, storage)
    do = _random(rng, (batch, seq_q, heads_q, dim_v), dtype, storage)
    return q, k, v, do


def _check_forward(q, k, v, causal, scale, dtype_name, o, lse):
    expected_o, expected_lse = ref.forward(q, k, v, causal, scale)
    naive_o, naive_lse = ref.forward(q, k, v, causal, scale, ref.rounding_to(q.dtype))
    assert o.dtype == q.dtype
    assert lse.dtype == np.float32
    assert lse.shape == (q.shape[0], q.shape[2], q.shape[1])
    ref.assert_close("o", o, expected_o, naive_o, dtype_name)
    ref.assert_close("lse", lse, expected_lse, naive_lse, dtype_name)


def _check_backward(q, k, v, do, causal, scale, dtype_name, grads):
    expected = ref.backward(q, k, v, do, causal, scale)
    naive = ref.backward(q, k, v, do, causal, scale, ref.rounding_to(q.dtype))
    for name, out, exp, nai, like in zip(("dq", "dk", "dv"), grads, expected, naive, (q, k, v)):
        assert out.shape == like.shape and out.dtype == like.dtype, name
        ref.assert_close(name, out, exp, nai, dtype_name)


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "b{}_sq{}_skv{}_hq{}_hkv{}_d{}_dv{}".format(*s))
def test_forward_and_backward_match_reference(shape, causal, dtype_name):
    dtype = _numpy_dtype(dtype_name)
    q, k, v, do = _inputs(shape, dtype)
    o, lse = flashgen.numpy.forward(q, k, v, causal=causal)
    _check_forward(q, k, v, causal, None, dtype_name, o, lse)
    grads = flashgen.numpy.backward(q, k, v, o, do, lse, causal=causal)
    _check_backward(q, k, v, do, causal, None, dtype_name, grads)


@pytest.mark.parametrize("storage", ["heads_major", "padded_dim", "every_other_seq"])
def test_strided_views_are_read_in_place(storage):
    shape = (2, 23, 31, 4, 2, 40, 40)
    q, k, v, do = _inputs(shape, np.float16, storage)
    assert not q.flags.c_contiguous
    o, lse = flashgen.numpy.forward(q, k, v, causal=True)
    _check_forward(q, k, v, True, None, "float16", o, lse)
    grads = flashgen.numpy.backward(q, k, v, o, do, lse, causal=True)
    _check_backward(q, k, v, do, True, None, "float16", grads)


def test_bhsd_layout_gives_bhsd_outputs():
    shape = (2, 17, 24, 4, 2, 40, 24)
    q, k, v, do = _inputs(shape, np.float32)
    swap = (0, 2, 1, 3)
    q_h, k_h, v_h, do_h = (np.ascontiguousarray(t.transpose(swap)) for t in (q, k, v, do))
    o_h, lse_h = flashgen.numpy.forward(q_h, k_h, v_h, causal=True, layout="bhsd")
    assert o_h.shape == (2, 4, 17, 24) and o_h.flags.c_contiguous
    _check_forward(q, k, v, True, None, "float32", o_h.transpose(swap), lse_h)
    grads_h = flashgen.numpy.backward(q_h, k_h, v_h, o_h, do_h, lse_h, causal=True, layout="bhsd")
    for grad, like in zip(grads_h, (q_h, k_h, v_h)):
        assert grad.shape == like.shape and grad.flags.c_contiguous
    _check_backward(q, k, v, do, True, None, "float32", [g.transpose(swap) for g in grads_h])


def test_explicit_scale():
    shape = (1, 19, 19, 2, 2, 40, 40)
    q, k, v, do = _inputs(shape, np.float32)
    o, lse = flashgen.numpy.forward(q, k, v, scale=0.3)
    _check_forward(q, k, v, False, 0.3, "float32", o, lse)
    default_o, _ = flashgen.numpy.forward(q, k, v)
    assert not np.allclose(o, default_o), "scale was ignored"
    grads = flashgen.numpy.backward(q, k, v, o, do, lse, scale=0.3)
    _check_backward(q, k, v, do, False, 0.3, "float32", grads)


def test_fully_masked_rows_give_zero_output_and_minus_infinity():
    shape = (1, 12, 4, 2, 2, 8, 8)  # causal, seq_q > seq_kv: rows 0..7 see no key
    q, k, v, do = _inputs(shape, np.float32)
    o, lse = flashgen.numpy.forward(q, k, v, causal=True)
    assert np.all(o[:, :8] == 0)
    assert np.all(np.isneginf(lse[:, :, :8]))
    assert np.all(np.isfinite(lse[:, :, 8:]))
    dq, _, _ = flashgen.numpy.backward(q, k, v, o, do, lse, causal=True)
    assert np.all(dq[:, :8] == 0)


def test_bfloat16_with_ml_dtypes():
    dtype = _numpy_dtype("bfloat16")
    shape = (1, 21, 30, 4, 2, 72, 72)
    q, k, v, do = _inputs(shape, dtype)
    o, lse = flashgen.numpy.forward(q, k, v, causal=True)
    _check_forward(q, k, v, True, None, "bfloat16", o, lse)
    grads = flashgen.numpy.backward(q, k, v, o, do, lse, causal=True)
    _check_backward(q, k, v, do, True, None, "bfloat16", grads)


def test_backward_is_bit_identical_run_to_run():
    shape = (2, 40, 40, 4, 1, 64, 64)
    q, k, v, do = _inputs(shape, np.float16)
    o, lse = flashgen.numpy.forward(q, k, v, causal=True)
    first = flashgen.numpy.backward(q, k, v, o, do, lse, causal=True)
    second = flashgen.numpy.backward(q, k, v, o, do, lse, causal=True)
    for a, b in zip(first, second):
        assert np.array_equal(a.view(np.uint16), b.view(np.uint16))


def test_inputs_are_not_modified():
    q, k, v, do = _inputs((1, 9, 9, 2, 2, 16, 16), np.float32)
    copies = [t.copy() for t in (q, k, v, do)]
    o, lse = flashgen.numpy.forward(q, k, v)
    flashgen.numpy.backward(q, k, v, o, do, lse)
    for before, after in zip(copies, (q, k, v, do)):
        assert np.array_equal(before, after)


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_batch_zero_gives_empty_outputs(layout):
    rng = np.random.default_rng(5)

    def empty(seq, heads, dim):
        shape = (0, seq, heads, dim) if layout == "bshd" else (0, heads, seq, dim)
        return rng.standard_normal(shape).astype(np.float32)

    q, k, v = empty(9, 4, 16), empty(11, 2, 16), empty(11, 2, 24)
    o, lse = flashgen.numpy.forward(q, k, v, layout=layout)
    assert o.shape == (q.shape[:3] + (24,)) and lse.shape == (0, 4, 9)
    dq, dk, dv = flashgen.numpy.backward(q, k, v, o, o, lse, layout=layout)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape


def test_no_query_heads_gives_zero_key_and_value_gradients():
    rng = np.random.default_rng(6)
    q = rng.standard_normal((2, 9, 0, 16)).astype(np.float32)
    k = rng.standard_normal((2, 11, 2, 16)).astype(np.float32)
    v = rng.standard_normal((2, 11, 2, 24)).astype(np.float32)
    o, lse = flashgen.numpy.forward(q, k, v)
    assert o.shape == (2, 9, 0, 24) and lse.shape == (2, 0, 9)
    dq, dk, dv = flashgen.numpy.backward(q, k, v, o, o, lse)
    assert dq.shape == q.shape
    assert np.all(dk == 0) and np.all(dv == 0)
