"""flashgen.numpy's varlen and KV-cache calls against plain attention per
sequence (flashgen.numpy.forward on each sequence's slice, itself checked
against the fp64 reference by the C++ tests)."""

from __future__ import annotations

import numpy as np
import pytest

import flashgen
from flashgen import numpy as fgn


def _random(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _cumulative(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


@pytest.mark.parametrize("causal", [False, True])
def test_forward_and_backward_varlen_match_per_sequence_calls(causal):
    rng = np.random.default_rng(0)
    lengths_q, lengths_k = [5, 0, 1, 40], [7, 3, 1, 33]
    cu_q, cu_k = _cumulative(lengths_q), _cumulative(lengths_k)
    q, k, v = _random(rng, cu_q[-1], 4, 24), _random(rng, cu_k[-1], 2, 24), _random(rng, cu_k[-1], 2, 16)
    o, lse = fgn.forward_varlen(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), causal)
    assert o.shape == (cu_q[-1], 4, 16) and lse.shape == (4, cu_q[-1])
    do = _random(rng, *o.shape)
    dq, dk, dv = fgn.backward_varlen(q, k, v, o, do, lse, cu_q, cu_k, max(lengths_q),
                                     max(lengths_k), causal)
    for b in range(len(lengths_q)):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        o_b, lse_b = fgn.forward(q[None, qs], k[None, ks], v[None, ks], causal)
        np.testing.assert_array_equal(o[qs], o_b[0])
        np.testing.assert_array_equal(lse[:, qs], lse_b[0])
        dq_b, dk_b, dv_b = fgn.backward(q[None, qs], k[None, ks], v[None, ks], o_b, do[None, qs],
                                        lse_b, causal)
        np.testing.assert_array_equal(dq[qs], dq_b[0])
        np.testing.assert_array_equal(dk[ks], dk_b[0])
        np.testing.assert_array_equal(dv[ks], dv_b[0])
    assert np.all(o[cu_q[1]:cu_q[1]] == 0)


SCORE_KEYWORDS = [
    dict(causal="top_left", window_size=(6, 0)),
    dict(causal=True, softcap=2.0, alibi_slopes=np.array([0.5, 0.25, 0.125, 0.0625], np.float32)),
    dict(sinks=np.array([-1.0, 0.5, 1.5, 0.0], np.float32), window_size=(10, 3)),
]


def test_varlen_slopes_of_rank_two_have_a_row_per_sequence():
    rng = np.random.default_rng(3)
    lengths = [9, 0, 1, 30]
    cu = _cumulative(lengths)
    q, k, v = (_random(rng, cu[-1], 4, 16) for _ in range(3))
    slopes = rng.random((len(lengths), 4)).astype(np.float32)
    o, lse = fgn.forward_varlen(q, k, v, cu, cu, 30, 30, causal=True, alibi_slopes=slopes)
    for b in range(len(lengths)):
        rows = slice(cu[b], cu[b + 1])
        o_b, lse_b = fgn.forward(q[None, rows], k[None, rows], v[None, rows], causal=True,
                                 alibi_slopes=slopes[b])
        np.testing.assert_array_equal(o[rows], o_b[0])
        np.testing.assert_array_equal(lse[:, rows], lse_b[0])
    with pytest.raises(ValueError, match=r"the number of sequences \(4"):
        fgn.forward_varlen(q, k, v, cu, cu, 30, 30, alibi_slopes=slopes[:3])


@pytest.mark.parametrize("keywords", SCORE_KEYWORDS, ids=lambda k: "-".join(sorted(k)))
def test_varlen_score_keywords_apply_per_sequence(keywords):
    rng = np.random.default_rng(2)
    lengths_q, lengths_k = [9, 0, 1, 30], [12, 3, 1, 30]
    cu_q, cu_k = _cumulative(lengths_q), _cumulative(lengths_k)
    q, k, v = _random(rng, cu_q[-1], 4, 16), _random(rng, cu_k[-1], 2, 16), _random(rng, cu_k[-1], 2, 16)
    args = (cu_q, cu_k, max(lengths_q), max(lengths_k))
    o, lse = fgn.forward_varlen(q, k, v, *args, **keywords)
    do = _random(rng, *o.shape)
    grads = fgn.backward_varlen(q, k, v, o, do, lse, *args, **keywords)
    dsinks = np.zeros(4, np.float64)
    for b in range(len(lengths_q)):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        o_b, lse_b = fgn.forward(q[None, qs], k[None, ks], v[None, ks], **keywords)
        np.testing.assert_array_equal(o[qs], o_b[0])
        np.testing.assert_array_equal(lse[:, qs], lse_b[0])
        grads_b = fgn.backward(q[None, qs], k[None, ks], v[None, ks], o_b, do[None, qs], lse_b,
                               **keywords)
        np.testing.assert_array_equal(grads[0][qs], grads_b[0][0])
        np.testing.assert_array_equal(grads[1][ks], grads_b[1][0])
        np.testing.assert_array_equal(grads[2][ks], grads_b[2][0])
        if "sinks" in keywords:
            dsinks += grads_b[3]
    if "sinks" in keywords:  # every sequence's share, summed
        np.testing.assert_allclose(grads[3], dsinks, rtol=1e-5, atol=1e-6)
    else:
        assert len(grads) == 3


def test_kvcache_takes_the_score_keywords():
    rng = np.random.default_rng(3)
    k_cache, v_cache = _random(rng, 2, 40, 1, 24), _random(rng, 2, 40, 1, 24)
    q = _random(rng, 2, 2, 4, 24)
    seqlens = np.array([30, 7], np.int32)
    keywords = dict(causal=True, window_size=(8, 0), softcap=1.5,
                    alibi_slopes=np.array([0.5, 0.25, 0.125, 0.0625], np.float32),
                    sinks=np.array([-1.0, 0.5, 1.5, 0.0], np.float32))
    o, lse = fgn.forward_with_kvcache(q, k_cache, v_cache, seqlens, **keywords)
    for b in range(2):
        n = seqlens[b]
        o_b, lse_b = fgn.forward(q[b:b + 1], k_cache[b:b + 1, :n], v_cache[b:b + 1, :n], **keywords)
        np.testing.assert_allclose(o[b], o_b[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(lse[b], lse_b[0], rtol=1e-5, atol=1e-6)


def test_varlen_refuses_bad_offsets_naming_the_rule():
    q = np.zeros((4, 1, 8), np.float32)
    with pytest.raises(ValueError, match="cu_seqlens_q must be non-decreasing"):
        fgn.forward_varlen(q, q, q, np.array([0, 3, 2, 4], np.int32),
                           np.array([0, 1, 2, 4], np.int32), 4, 4)
    with pytest.raises(TypeError, match="cu_seqlens_q must be int32"):
        fgn.forward_varlen(q, q, q, np.array([0, 4]), np.array([0, 4], np.int32), 4, 4)


def test_kvcache_paged_append_matches_attention_to_the_gathered_rows():
    rng = np.random.default_rng(1)
    batch, page_size, pages, heads_kv, dim = 2, 16, 6, 1, 40
    k_cache, v_cache = _random(rng, pages, page_size, heads_kv, dim), _random(rng, pages, page_size, heads_kv, dim)
    block_table = np.array([[4, 1, 0], [2, 5, 3]], np.int32)
    cache_seqlens = np.array([17, 0], np.int32)
    q, k, v = _random(rng, batch, 3, 8, dim), _random(rng, batch, 3, heads_kv, dim), _random(rng, batch, 3, heads_kv, dim)
    seqlens_before = cache_seqlens.copy()
    expect_k, expect_v = [], []
    for b in range(batch):
        rows = [k_cache[block_table[b, t // page_size], t % page_size] for t in range(cache_seqlens[b])]
        expect_k.append(np.concatenate([np.array(rows, np.float32).reshape(-1, heads_kv, dim), k[b]]))
        rows = [v_cache[block_table[b, t // page_size], t % page_size] for t in range(cache_seqlens[b])]
        expect_v.append(np.concatenate([np.array(rows, np.float32).reshape(-1, heads_kv, dim), v[b]]))
    o, lse = fgn.forward_with_kvcache(q, k_cache, v_cache, cache_seqlens, block_table, k, v,
                                      causal=True)
    np.testing.assert_array_equal(cache_seqlens, seqlens_before)
    for b in range(batch):
        o_b, lse_b = fgn.forward(q[b:b + 1], expect_k[b][None], expect_v[b][None], True)
        np.testing.assert_allclose(o[b], o_b[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(lse[b], lse_b[0], rtol=1e-5, atol=1e-6)
        t = cache_seqlens[b] + 2  # the last appended row
        np.testing.assert_array_equal(k_cache[block_table[b, t // page_size], t % page_size], k[b, 2])


def test_kvcache_empty_cache_gives_zeros_and_minus_infinity():
    q = np.ones((1, 1, 2, 16), np.float32)
    cache = np.zeros((1, 32, 1, 16), np.float32)
    o, lse = fgn.forward_with_kvcache(q, cache, cache, np.array([0], np.int32))
    assert np.all(o == 0) and np.all(lse == -np.inf)


def test_kvcache_refuses_a_bad_block_table_entry():
    q = np.ones((1, 1, 1, 16), np.float32)
    cache = np.zeros((2, 16, 1, 16), np.float32)
    with pytest.raises(ValueError, match=r"block_table\[0\]\[0\] \(7\) must be in \[0, num_pages = 2\)"):
        fgn.forward_with_kvcache(q, cache, cache, np.array([3], np.int32),
                                 np.array([[7]], np.int32))
    with pytest.raises(ValueError, match="page_size = 8"):
        fgn.forward_with_kvcache(q, cache[:, :8], cache[:, :8], np.array([3], np.int32),
                                 np.array([[0]], np.int32))
    assert flashgen.numpy.forward_with_kvcache is fgn.forward_with_kvcache
