"""flashgen.numpy with user masks (mask_mod, mask_tensors) against the
float64 numpy oracle given the same mask as a boolean array: document masks
of packed sequences, prefix-LM, float arrays, with causal and GQA, forward
and backward, varlen and the KV cache; and the refusals, which come from the
library with its words."""

from __future__ import annotations

import numpy as np
import pytest

import flashgen
import score_mods_reference as ref

DOC = np.repeat(np.arange(5, dtype=np.int32), [9, 1, 30, 20, 40])  # 100 positions


def _inputs(batch, seq_q, seq_kv, heads_q, heads_kv, dim, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1, 1, (batch, seq_q, heads_q, dim)).astype(np.float32)
    k = rng.uniform(-1, 1, (batch, seq_kv, heads_kv, dim)).astype(np.float32)
    v = rng.uniform(-1, 1, (batch, seq_kv, heads_kv, dim)).astype(np.float32)
    do = rng.uniform(-1, 1, (batch, seq_q, heads_q, dim)).astype(np.float32)
    return q, k, v, do


def _check(got, expected):
    o, lse, *grads = got
    np.testing.assert_allclose(o, expected[0], atol=2e-5)
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(expected[1]))
    finite = np.isfinite(expected[1])
    np.testing.assert_allclose(lse[finite], expected[1][finite], atol=2e-5)
    for g, want in zip(grads, expected[2:]):
        np.testing.assert_allclose(g, want, atol=5e-5 * max(1.0, np.abs(want).max()))


i = np.arange(100)[:, None]
j = np.arange(100)[None, :]
CASES = {
    "document": ("doc[kv_idx] == doc[q_idx]", {"doc": DOC}, DOC[j] == DOC[i], False),
    "document_causal": ("doc[kv_idx] == doc[q_idx]", {"doc": DOC}, DOC[j] == DOC[i], True),
    "prefix_lm": ("kv_idx < prefix[b] || kv_idx <= q_idx",
                  {"prefix": np.array([7, 41], dtype=np.int32)},
                  (j < np.array([7, 41])[:, None, None, None]) | (j <= i), False),
    "float_per_head": ("bias[h] > 0.0 || kv_idx % 2 == 0",
                       {"bias": np.array([1.0, -1.0, 0.5, -2.0], dtype=np.float32)},
                       (np.array([1.0, -1.0, 0.5, -2.0])[None, :, None, None] > 0) | (j % 2 == 0),
                       True),
    "no_key_rows": ("q_idx >= 90 && kv_idx < 3", {}, (i >= 90) & (j < 3), False),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dim", [40, 127])
def test_forward_and_backward_match_float64(name, dim):
    expression, tensors, attended, causal = CASES[name]
    q, k, v, do = _inputs(2, 100, 100, 4, 2, dim)
    keywords = dict(mask_mod=expression, mask_tensors=tensors, causal=causal)
    o, lse = flashgen.numpy.forward(q, k, v, **keywords)
    grads = flashgen.numpy.backward(q, k, v, o, do, lse, **keywords)
    expected = ref.attention(q, k, v, do, causal=causal, attended=attended)
    _check((o, lse, *grads), expected)


def test_the_arrays_are_not_modified_and_views_are_read_in_place():
    q, k, v, _ = _inputs(1, 100, 100, 2, 1, 16)
    doc = np.repeat(DOC, 2)[::2]  # a strided view
    before = doc.copy()
    o, _ = flashgen.numpy.forward(q, k, v, mask_mod="doc[kv_idx] == doc[q_idx]",
                                  mask_tensors={"doc": doc})
    np.testing.assert_array_equal(doc, before)
    _check((o, _), ref.attention(q, k, v, attended=DOC[j] == DOC[i]))


def test_varlen_sees_each_sequence_as_b_with_its_own_positions():
    lengths = [30, 50, 20]
    cu = np.array([0, 30, 80, 100], dtype=np.int32)
    q, k, v, do = _inputs(1, 100, 100, 2, 1, 24)
    prefix = np.array([5, 0, 12], dtype=np.int32)
    keywords = dict(mask_mod="kv_idx < prefix[b] || kv_idx <= q_idx", mask_tensors={"prefix": prefix})
    o, lse = flashgen.numpy.forward_varlen(q[0], k[0], v[0], cu, cu, 50, 50, **keywords)
    grads = flashgen.numpy.backward_varlen(q[0], k[0], v[0], o, do[0], lse, cu, cu, 50, 50, **keywords)
    for b, (start, n) in enumerate(zip(cu[:-1], lengths)):
        rows = slice(start, start + n)
        a, c = np.arange(n)[:, None], np.arange(n)[None, :]
        expected = ref.attention(q[:, rows], k[:, rows], v[:, rows], do[:, rows],
                                 attended=(c < prefix[b]) | (c <= a))
        _check((o[None, rows], lse[None, :, rows], *(g[None, rows] for g in grads)), expected)


def test_kvcache_kv_idx_counts_cache_positions():
    q, k, v, _ = _inputs(2, 3, 40, 2, 1, 16)
    seqlens = np.array([25, 40], dtype=np.int32)
    window = np.array([4, 9], dtype=np.int32)
    o, lse = flashgen.numpy.forward_with_kvcache(
        q, k, v, seqlens, mask_mod="kv_idx >= seqlen[b] - window[b] || kv_idx == 0",
        mask_tensors={"seqlen": seqlens, "window": window})
    for b in range(2):
        n = seqlens[b]
        c = np.arange(n)[None, :]
        expected = ref.attention(q[b:b + 1], k[b:b + 1, :n], v[b:b + 1, :n],
                                 attended=(c >= n - window[b]) | (c == 0))
        _check((o[b:b + 1], lse[b:b + 1]), expected)


def test_q_idx_is_the_query_position_among_the_keys():
    # kv_idx <= q_idx is bottom-right causal on every path: a plain call with
    # fewer queries than keys, and decoding against a KV cache.
    q, k, v, _ = _inputs(2, 3, 40, 2, 1, 16)
    masked = flashgen.numpy.forward(q, k, v, mask_mod="kv_idx <= q_idx")
    causal = flashgen.numpy.forward(q, k, v, causal=True)
    np.testing.assert_array_equal(masked[0], causal[0])
    seqlens = np.array([25, 40], dtype=np.int32)
    o, _ = flashgen.numpy.forward_with_kvcache(q, k, v, seqlens, mask_mod="kv_idx <= q_idx")
    expected, _ = flashgen.numpy.forward_with_kvcache(q, k, v, seqlens, causal=True)
    np.testing.assert_array_equal(o, expected)


@pytest.mark.parametrize("keywords, error, fragment", [
    (dict(mask_mod="doc[kv_idx] == foo", mask_tensors={"doc": DOC}), ValueError,
     'mask_mod: unknown name "foo" at column 16; the names are b, h, q_idx, kv_idx and the '
     'mask_tensors (doc)'),
    (dict(mask_mod="abs(q_idx) < 3"), ValueError, "calls are not allowed"),
    (dict(mask_mod="q_idx = 1"), ValueError, "assignment is not allowed"),
    (dict(mask_mod=3), TypeError, "mask_mod must be a str"),
    (dict(mask_mod="doc[0]", mask_tensors=[DOC]), TypeError, "mask_tensors must be a dict"),
    (dict(mask_mod="doc[0]", mask_tensors={"doc": [1, 2]}), TypeError,
     "mask_tensors['doc'] must be a numpy.ndarray"),
    (dict(mask_mod="doc[0]", mask_tensors={"doc": DOC.astype(np.int64)}), ValueError,
     'options.mask_tensors["doc"].dtype (-1) must be int32 (0) or float32 (1)'),
    (dict(mask_mod="doc[0]", mask_tensors={"doc": DOC.reshape(10, 10)}), ValueError,
     'options.mask_tensors["doc"].rank (2) must be 1'),
    (dict(mask_mod="q_idx[0]", mask_tensors={"q_idx": DOC}), ValueError, "the name is taken"),
    (dict(mask_mod="doc[kv_idx + 95] == 0", mask_tensors={"doc": DOC}), ValueError,
     'index 100 of "doc" is outside [0, 100)'),
])
def test_bad_masks_are_refused_with_the_library_words(keywords, error, fragment):
    q, k, v, _ = _inputs(1, 8, 8, 2, 1, 8)
    with pytest.raises(error) as raised:
        flashgen.numpy.forward(q, k, v, **keywords)
    assert fragment in str(raised.value)
