"""flashgen.numpy with the masks and score modifiers (window_size, causal
alignments, softcap, alibi_slopes, sinks) against a float64 numpy oracle,
and the argument checks of those keywords."""

from __future__ import annotations

import numpy as np
import pytest

import flashgen
import score_mods_reference as ref

# batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v
SHAPES = [(2, 37, 70, 4, 2, 40, 24), (1, 90, 33, 2, 1, 127, 127)]
KEYWORDS = [
    dict(window_size=(8, 0), causal=True),
    dict(window_size=(5, 3), causal="top_left"),
    dict(causal="top_left"),
    dict(causal="bottom_right", window_size=(-1, 4)),
    dict(softcap=1.5),
    dict(alibi_slopes="heads", softcap=2.0),
    dict(alibi_slopes="batch_heads"),
    dict(sinks=True),
    dict(sinks=True, window_size=(0, 0), alibi_slopes="heads", softcap=3.0, causal=True),
]


def _inputs(shape, seed=0):
    batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v = shape
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1, 1, (batch, seq_q, heads_q, dim_qk)).astype(np.float32)
    k = rng.uniform(-1, 1, (batch, seq_kv, heads_kv, dim_qk)).astype(np.float32)
    v = rng.uniform(-1, 1, (batch, seq_kv, heads_kv, dim_v)).astype(np.float32)
    do = rng.uniform(-1, 1, (batch, seq_q, heads_q, dim_v)).astype(np.float32)
    return q, k, v, do


def _keywords(spec: dict, shape) -> dict:
    """The test's spec as flashgen's keywords (arrays made for the shape)."""
    batch, heads_q = shape[0], shape[3]
    keywords = dict(spec)
    slopes = 2.0 ** -np.arange(1, heads_q + 1, dtype=np.float32)
    if spec.get("alibi_slopes") == "heads":
        keywords["alibi_slopes"] = slopes
    elif spec.get("alibi_slopes") == "batch_heads":
        keywords["alibi_slopes"] = np.stack([slopes * (1 + b) for b in range(batch)])
    if spec.get("sinks"):
        keywords["sinks"] = np.linspace(-1.0, 2.0, heads_q, dtype=np.float32)
    return keywords


def _reference_keywords(keywords: dict) -> dict:
    out = {key: value for key, value in keywords.items() if key != "window_size"}
    out["window"] = keywords.get("window_size", (-1, -1))
    return out


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("spec", KEYWORDS, ids=lambda s: "-".join(sorted(s)))
def test_forward_and_backward_match_float64(shape, spec):
    q, k, v, do = _inputs(shape)
    keywords = _keywords(spec, shape)
    o, lse = flashgen.numpy.forward(q, k, v, **keywords)
    grads = flashgen.numpy.backward(q, k, v, o, do, lse, **keywords)
    expected = ref.attention(q, k, v, do, **_reference_keywords(keywords))
    np.testing.assert_allclose(o, expected[0], atol=2e-5)
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(expected[1]))
    finite = np.isfinite(expected[1])
    np.testing.assert_allclose(lse[finite], expected[1][finite], atol=2e-5)
    assert len(grads) == (4 if "sinks" in keywords else 3)
    for got, want in zip(grads, expected[2:]):
        np.testing.assert_allclose(got, want, atol=5e-5 * max(1.0, np.abs(want).max()))


def test_true_is_bottom_right_and_differs_from_top_left():
    q, k, v, _ = _inputs((1, 5, 9, 1, 1, 8, 8))
    o_true, _ = flashgen.numpy.forward(q, k, v, causal=True)
    o_bottom_right, _ = flashgen.numpy.forward(q, k, v, causal="bottom_right")
    o_top_left, _ = flashgen.numpy.forward(q, k, v, causal="top_left")
    np.testing.assert_array_equal(o_true, o_bottom_right)
    assert not np.allclose(o_true, o_top_left)
    # top-left: query 0 sees key 0 alone, so o = v[key 0].
    np.testing.assert_allclose(o_top_left[0, 0, 0], v[0, 0, 0], atol=1e-6)


def test_rows_without_keys_give_zero_output_and_the_sink_or_minus_infinity():
    q, k, v, _ = _inputs((1, 6, 3, 2, 1, 8, 8))
    o, lse = flashgen.numpy.forward(q, k, v, window_size=(0, 0))
    assert np.all(o[0, :3] == 0) and np.all(np.isneginf(lse[0, :, :3]))
    sinks = np.array([0.5, -1.0], dtype=np.float32)
    o, lse = flashgen.numpy.forward(q, k, v, window_size=(0, 0), sinks=sinks)
    assert np.all(o[0, :3] == 0)
    np.testing.assert_array_equal(lse[0, :, :3], np.repeat(sinks[:, None], 3, axis=1))


@pytest.mark.parametrize("keywords, error, fragment", [
    (dict(causal="diagonal"), TypeError, 'causal must be a bool'),
    (dict(causal=1), TypeError, '"top_left": query i sees keys j <= i'),
    (dict(window_size=4), TypeError, "window_size must be a pair of ints"),
    (dict(window_size=(1.5, 0)), TypeError, "window_size must be a pair of ints"),
    (dict(window_size=(-2, 0)), ValueError, "options.window_left (-2) must be >= -1"),
    (dict(softcap="3"), TypeError, "softcap must be a real number"),
    (dict(softcap=-1.0), ValueError, "options.softcap (-1) must be finite and >= 0"),
    (dict(alibi_slopes=np.ones(2, dtype=np.float64)), TypeError, "alibi_slopes must be float32"),
    (dict(alibi_slopes=np.ones(3, dtype=np.float32)), ValueError,
     "options.alibi_slopes.shape[0] (heads_q = 3) must equal q.shape[2] (heads_q = 2)"),
    (dict(sinks=[0.0, 0.0]), TypeError, "sinks must be a numpy.ndarray or None"),
    (dict(sinks=np.ones((1, 2), dtype=np.float32)), ValueError, "options.sinks.rank (2)"),
])
def test_bad_keywords_are_refused_by_name(keywords, error, fragment):
    q, k, v, _ = _inputs((1, 4, 4, 2, 1, 8, 8))
    with pytest.raises(error) as raised:
        flashgen.numpy.forward(q, k, v, **keywords)
    assert fragment in str(raised.value)
