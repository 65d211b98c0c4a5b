"""The log-sum-exp merge and the ring schedule, checked with numpy alone.

Attention over key blocks (flashgen.numpy on each block), merged through the
blocks' lse, must equal attention over all keys: plain splits, causal splits
that leave rows without any key, and a simulated ring (every rank, every step,
as flashgen.ring_attention schedules it), forward and backward.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import attention_reference as ref
import flashgen
from flashgen import ring
from flashgen._merge import empty_partial, merge

# (batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v)
SHAPES = [
    (2, 24, 37, 4, 2, 40, 40),     # GQA
    (1, 19, 31, 2, 1, 127, 127),   # MQA, odd D
    (1, 16, 16, 2, 2, 40, 72),     # dim_v != dim_qk
]
# fp32 merge of fp32 block results against fp32 attention over all keys: a
# few rounding steps of fp32 values of magnitude ~1.
MERGE_ATOL = 2e-6


def _inputs(shape, seed=0):
    batch, seq_q, seq_kv, heads_q, heads_kv, dim_qk, dim_v = shape
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((batch, seq_q, heads_q, dim_qk)).astype(np.float32)
    k = rng.standard_normal((batch, seq_kv, heads_kv, dim_qk)).astype(np.float32)
    v = rng.standard_normal((batch, seq_kv, heads_kv, dim_v)).astype(np.float32)
    do = rng.standard_normal((batch, seq_q, heads_q, dim_v)).astype(np.float32)
    return q, k, v, do


def _assert_matches_full(name, merged, full, reference):
    """merged within MERGE_ATOL of flashgen on all keys, and as close to the
    float64 reference as that is (FlashAttention's rule)."""
    assert ref.max_error(merged, full) <= MERGE_ATOL, f"{name}: merged != attention over all keys"
    ref.assert_close(name, merged, reference, full, "float32")


def _merge_all(partials):
    o, lse = partials[0]
    for o_part, lse_part in partials[1:]:
        o, lse = merge(o, lse, o_part, lse_part)
    return o, lse


def _key_cuts(seq_kv: int, blocks: int) -> list:
    """Uneven cut points 0 = c0 < c1 < ... < c_blocks = seq_kv."""
    inner = sorted({max(1, (seq_kv * i) // blocks - i % 2) for i in range(1, blocks)})
    return [0] + inner + [seq_kv]


@pytest.mark.parametrize("blocks", [2, 3, 5])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_merged_key_blocks_equal_attention_over_all_keys(shape, blocks):
    q, k, v, _ = _inputs(shape)
    cuts = _key_cuts(k.shape[1], blocks)
    partials = [flashgen.numpy.forward(q, k[:, a:b], v[:, a:b]) for a, b in zip(cuts, cuts[1:])]
    # Any order gives the same result: ring ranks meet the blocks in different orders.
    o, lse = _merge_all(partials[::-1])
    o_full, lse_full = flashgen.numpy.forward(q, k, v)
    o_ref, lse_ref = ref.forward(q, k, v)
    assert o.dtype == np.float32 and lse.dtype == np.float32
    _assert_matches_full("o", o, o_full, o_ref)
    _assert_matches_full("lse", lse, lse_full, lse_ref)


def _causal_block(q, k, v, start: int, stop: int):
    """(o, lse) of all queries against keys [start, stop) under the causal
    mask of the whole problem (bottom-right: query i sees key j <= i + offset).

    flashgen's mask on the block is the whole problem's mask for the queries
    up to the block's last visible row, so those rows get one causal call and
    the rows after them, which see the whole block, a plain one. Rows before
    the block's first key see nothing: lse = -inf there.
    """
    offset = k.shape[1] - q.shape[1]
    split = min(max(stop - offset, 0), q.shape[1])  # first row that sees the whole block
    k_block, v_block = k[:, start:stop], v[:, start:stop]
    parts = []
    if split > 0:
        parts.append(flashgen.numpy.forward(q[:, :split], k_block, v_block, causal=True))
    if split < q.shape[1]:
        parts.append(flashgen.numpy.forward(q[:, split:], k_block, v_block))
    return (np.concatenate([p[0] for p in parts], axis=1),
            np.concatenate([p[1] for p in parts], axis=2))


@pytest.mark.parametrize("seq_q, seq_kv", [(24, 24), (30, 18), (13, 40)],
                         ids=["square", "rows_without_keys", "more_keys"])
def test_causal_splits_with_fully_masked_rows(seq_q, seq_kv):
    q, k, v, _ = _inputs((2, seq_q, seq_kv, 4, 2, 40, 40), seed=1)
    cuts = _key_cuts(seq_kv, 5)
    partials = [_causal_block(q, k, v, a, b) for a, b in zip(cuts, cuts[1:])]
    # Some rows see no key of some block (lse = -inf there) ...
    assert any(np.isneginf(lse).any() for _, lse in partials)
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")  # no inf - inf, no log(0)
        o, lse = _merge_all(partials)
    o_full, lse_full = flashgen.numpy.forward(q, k, v, causal=True)
    o_ref, lse_ref = ref.forward(q, k, v, causal=True)
    _assert_matches_full("o", o, o_full, o_ref)
    _assert_matches_full("lse", lse, lse_full, lse_ref)
    # ... and rows before the first key see none at all: o = 0, lse = -inf.
    unseen = max(seq_q - seq_kv, 0)
    assert np.isneginf(lse[:, :, :unseen]).all() and np.isfinite(lse[:, :, unseen:]).all()
    assert (o[:, :unseen] == 0).all()


def test_merge_identity_and_rows_masked_in_both_parts():
    rng = np.random.default_rng(2)
    o = rng.standard_normal((2, 5, 3, 7)).astype(np.float32)  # [b, s, h, d]
    lse = rng.standard_normal((2, 3, 5)).astype(np.float32)   # [b, h, s]
    lse[:, :, 1] = -np.inf
    o[:, 1] = 0  # a row without keys has o = 0, as flashgen returns it
    empty_o, empty_lse = empty_partial(o, lse)
    with np.errstate(all="raise"):
        for merged_o, merged_lse in (merge(empty_o, empty_lse, o, lse),
                                     merge(o, lse, empty_o, empty_lse)):
            np.testing.assert_array_equal(merged_o, o)
            np.testing.assert_array_equal(merged_lse, lse)
        both_o, both_lse = merge(empty_o, empty_lse, empty_o, empty_lse)
    assert (both_o == 0).all() and np.isneginf(both_lse).all()


def test_merge_is_symmetric_and_far_apart_lse_stay_finite():
    rng = np.random.default_rng(3)
    o_a, o_b = (rng.standard_normal((1, 4, 2, 8)).astype(np.float32) for _ in range(2))
    lse_a = np.array([[[0.0, 80.0, -80.0, 3.0]] * 2], dtype=np.float32)
    lse_b = np.array([[[0.0, -80.0, 80.0, 3.5]] * 2], dtype=np.float32)
    o_ab, lse_ab = merge(o_a, lse_a, o_b, lse_b)
    o_ba, lse_ba = merge(o_b, lse_b, o_a, lse_a)
    np.testing.assert_array_equal(o_ab, o_ba)
    np.testing.assert_array_equal(lse_ab, lse_ba)
    # exp(80) overflows nothing: the larger lse is the shift.
    expected_lse = np.logaddexp(lse_a.astype(np.float64), lse_b.astype(np.float64))
    np.testing.assert_allclose(lse_ab, expected_lse, rtol=1e-6)
    np.testing.assert_allclose(o_ab[:, 0], (o_a[:, 0] + o_b[:, 0]) / 2, rtol=1e-6)
    np.testing.assert_allclose(o_ab[:, 1], o_a[:, 1], rtol=1e-6)  # b's weight exp(-160)
    np.testing.assert_allclose(o_ab[:, 2], o_b[:, 2], rtol=1e-6)


# ---------------------------------------------------------------------------
# The ring layout and schedule, simulated in one process.
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_shard_unshard_round_trip_covers_every_position_once(world, causal):
    seq = 2 * world * 3
    x = np.arange(2 * seq).reshape(2, seq)  # [batch, seq]
    shards = [ring.ring_shard(x, r, world, causal) for r in range(world)]
    np.testing.assert_array_equal(ring.ring_unshard(shards, causal), x)
    positions = [p for r in range(world) for span in ring.ring_ranges(r, world, seq, causal)
                 for p in span]
    assert sorted(positions) == list(range(seq))
    for r, shard in enumerate(shards):
        held = [p for span in ring.ring_ranges(r, world, seq, causal) for p in span]
        np.testing.assert_array_equal(shard[0], held)  # local order = ranges' order


def test_layout_errors_name_the_rule():
    with pytest.raises(ValueError, match="multiple of 2·world = 6"):
        ring.ring_ranges(0, 3, 20, causal=True)
    with pytest.raises(ValueError, match="rank must be in"):
        ring.ring_ranges(3, 3, 12, causal=False)
    with pytest.raises(ValueError, match="must be even"):
        ring.ring_block(0, 1, 2, 7, causal=True)


def _computed_pairs(rank, source, world, chunk) -> list:
    """The global (query, key) position pairs rank computes on source's block."""
    seq = 2 * world * chunk
    positions = {r: [p for s in ring.ring_ranges(r, world, seq, True) for p in s]
                 for r in (rank, source)}
    block = ring.ring_block(rank, source, world, 2 * chunk, causal=True)
    queries, keys = positions[rank][block.queries], positions[source][block.keys]
    if block.causal:
        # The diagonal: flashgen masks local index j > i, which is the global
        # mask only because local order is global order.
        assert queries == keys == sorted(queries)
        return [(i, j) for i in queries for j in keys if j <= i]
    return [(i, j) for i in queries for j in keys]


@pytest.mark.parametrize("world", [2, 3, 5])
def test_causal_schedule_computes_every_visible_pair_once_with_even_load(world):
    chunk = 3
    seq = 2 * world * chunk
    per_step = [[_computed_pairs(r, ring.ring_source(r, step, world), world, chunk)
                 for r in range(world)] for step in range(world)]
    computed = [pair for step in per_step for pairs in step for pair in pairs]
    visible = [(i, j) for i in range(seq) for j in range(i + 1)]
    assert sorted(computed) == visible  # nothing masked, nothing twice, nothing missing
    for step, pairs in enumerate(per_step):
        loads = [len(p) for p in pairs]
        assert len(set(loads)) == 1, f"step {step}: uneven load {loads}"


def _simulate_ring(q, k, v, do, world: int, causal: bool):
    """Every rank's ring forward and backward, in fp32, with flashgen.numpy
    on each block; returns the unsharded o, lse, dq, dk, dv."""
    shard = [[ring.ring_shard(t, r, world, causal) for r in range(world)] for t in (q, k, v, do)]
    q_s, k_s, v_s, do_s = shard
    seq_local = q_s[0].shape[1]
    outputs = []
    for r in range(world):  # forward: merge each visiting block
        batch, _, heads, _ = q_s[r].shape
        o = np.zeros((batch, seq_local, heads, v.shape[3]), np.float32)  # merge's identity
        lse = np.full((batch, heads, seq_local), -np.inf, np.float32)
        for step in range(world):
            src = ring.ring_source(r, step, world)
            b = ring.ring_block(r, src, world, seq_local, causal)
            part = flashgen.numpy.forward(q_s[r][:, b.queries], k_s[src][:, b.keys],
                                          v_s[src][:, b.keys], causal=b.causal)
            o[:, b.queries], lse[:, :, b.queries] = merge(o[:, b.queries],
                                                          lse[:, :, b.queries], *part)
        outputs.append((o, lse))
    o_s = [o.astype(q.dtype) for o, _ in outputs]
    lse_s = [lse for _, lse in outputs]
    dq_s = [np.zeros(t.shape, np.float32) for t in q_s]
    dk_s = [np.zeros(t.shape, np.float32) for t in k_s]
    dv_s = [np.zeros(t.shape, np.float32) for t in v_s]
    for r in range(world):  # backward: global lse and final o make each block exact
        for step in range(world):
            src = ring.ring_source(r, step, world)
            b = ring.ring_block(r, src, world, seq_local, causal)
            rows, keys = b.queries, b.keys
            dq, dk, dv = flashgen.numpy.backward(
                q_s[r][:, rows], k_s[src][:, keys], v_s[src][:, keys], o_s[r][:, rows],
                do_s[r][:, rows], np.ascontiguousarray(lse_s[r][:, :, rows]), causal=b.causal)
            dq_s[r][:, rows] += dq
            dk_s[src][:, keys] += dk
            dv_s[src][:, keys] += dv
    return (ring.ring_unshard(o_s, causal), ring.ring_unshard(lse_s, causal, seq_dim=2),
            *(ring.ring_unshard(g, causal) for g in (dq_s, dk_s, dv_s)))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("world", [1, 2, 3])
def test_simulated_ring_equals_attention_over_the_whole_sequence(world, causal):
    seq = 2 * world * 5
    q, k, v, do = _inputs((2, seq, seq, 4, 2, 40, 40), seed=world)
    o, lse, dq, dk, dv = _simulate_ring(q, k, v, do, world, causal)
    o_full, lse_full = flashgen.numpy.forward(q, k, v, causal=causal)
    grads_full = flashgen.numpy.backward(q, k, v, o_full, do, lse_full, causal=causal)
    o_ref, lse_ref = ref.forward(q, k, v, causal=causal)
    grads_ref = ref.backward(q, k, v, do, causal=causal)
    _assert_matches_full("o", o, o_full, o_ref)
    _assert_matches_full("lse", lse, lse_full, lse_ref)
    for name, grad, full, grad_ref in zip(("dq", "dk", "dv"), (dq, dk, dv), grads_full,
                                          grads_ref):
        # Gradients add up `world` block results: one more rounding per block.
        assert ref.max_error(grad, full) <= MERGE_ATOL * world, f"{name} != whole sequence"
        ref.assert_close(name, grad, grad_ref, full, "float32")
