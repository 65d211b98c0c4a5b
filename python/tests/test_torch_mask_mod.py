"""flashgen.attention's mask_mod on torch CPU tensors, against torch's SDPA
given the same mask as a boolean attn_mask: outputs and gradients, GQA, the
query's position among the keys, and the custom op under torch.compile."""

from __future__ import annotations

import pytest

import flashgen

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
F = torch.nn.functional

DOC = torch.repeat_interleave(torch.arange(4, dtype=torch.int32),
                              torch.tensor([7, 20, 1, 12]))  # 40 positions


def _inputs(heads_q, heads_kv, seq_q, seq_kv, dim):
    generator = torch.Generator().manual_seed(11)

    def tensor(*shape):
        return torch.randn(shape, generator=generator, dtype=torch.float64).float().requires_grad_()
    return (tensor(2, heads_q, seq_q, dim), tensor(2, heads_kv, seq_kv, dim),
            tensor(2, heads_kv, seq_kv, dim))


def _expected(q, k, v, attended):
    """torch's SDPA with the mask as a boolean attn_mask [batch, 1, seq_q, seq_kv]."""
    group = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1),
                                          v.repeat_interleave(group, 1),
                                          attn_mask=attended[:, None])


def _close(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("heads_q, heads_kv, seq_q, dim", [(4, 4, 40, 40), (8, 2, 40, 24),
                                                           (4, 2, 25, 127)])
def test_document_and_prefix_masks_match_sdpa_with_the_same_mask(heads_q, heads_kv, seq_q, dim):
    seq_kv = 40
    q, k, v = _inputs(heads_q, heads_kv, seq_q, seq_kv, dim)
    prefix = torch.tensor([9, 0], dtype=torch.int32)
    # q_idx is row i's position among the keys: i + seq_kv - seq_q.
    position = torch.arange(seq_q)[:, None] + seq_kv - seq_q
    key = torch.arange(seq_kv)[None, :]
    cases = [
        ("doc[kv_idx] == doc[q_idx]", {"doc": DOC},
         (DOC[key] == DOC[position]).expand(2, seq_q, seq_kv)),
        ("kv_idx < prefix[b] || kv_idx <= q_idx", {"prefix": prefix},
         (key < prefix[:, None, None]) | (key <= position)),
    ]
    for mask_mod, tensors, attended in cases:
        o = flashgen.attention(q, k, v, layout="bhsd", mask_mod=mask_mod, mask_tensors=tensors)
        expected = _expected(q, k, v, attended)
        _close(o, expected)
        grad_o = torch.randn_like(o)
        grads = torch.autograd.grad(o, (q, k, v), grad_o)
        expected_grads = torch.autograd.grad(expected, (q, k, v), grad_o)
        for actual, wanted in zip(grads, expected_grads):
            _close(actual, wanted)


def test_kv_idx_le_q_idx_is_bottom_right_causal():
    q, k, v = _inputs(4, 4, 13, 40, 16)
    masked = flashgen.attention(q, k, v, layout="bhsd", mask_mod="kv_idx <= q_idx")
    _close(masked, flashgen.attention(q, k, v, layout="bhsd", causal=True))


def test_the_custom_op_traces_with_the_mask():
    q, k, v = _inputs(4, 4, 40, 40, 16)

    def run(q, k, v, doc):
        return flashgen.attention(q, k, v, layout="bhsd", mask_mod="doc[kv_idx] == doc[q_idx]",
                                  mask_tensors={"doc": doc})
    compiled = torch.compile(run, backend="aot_eager", fullgraph=True)
    _close(compiled(q, k, v, DOC), run(q, k, v, DOC))


def test_bad_mask_arguments_are_refused_by_name():
    q, k, v = _inputs(4, 4, 8, 8, 16)
    with pytest.raises(ValueError, match='unknown name "foo"'):
        flashgen.attention(q, k, v, mask_mod="foo < 3")
    with pytest.raises(TypeError, match="mask_tensors must be a dict"):
        flashgen.attention(q, k, v, mask_mod="kv_idx < 3", mask_tensors=[DOC])
    with pytest.raises(TypeError, match="mask_mod must be a str"):
        flashgen.attention(q, k, v, mask_mod=3)
