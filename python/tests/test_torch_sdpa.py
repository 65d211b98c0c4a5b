"""flashgen.scaled_dot_product_attention against torch's on the same inputs:
SDPA's layout, top-left is_causal, scale, enable_gqa, unbatched inputs and
gradients, boolean attn_mask (on CPU and CUDA tensors); the arguments it
does not take yet are refused by name."""

from __future__ import annotations

import pytest

import flashgen

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
F = torch.nn.functional

CASES = [  # batch, heads_q, heads_kv, seq_q, seq_kv, dim_qk, dim_v, is_causal, scale
    (2, 4, 4, 17, 17, 40, 40, False, None),
    (2, 4, 4, 13, 29, 64, 64, True, None),    # top-left: row i sees keys j <= i
    (1, 3, 3, 29, 13, 24, 24, True, 0.3),
    (2, 8, 2, 19, 23, 32, 16, True, None),    # GQA, dim_v != dim_qk
]


def _inputs(batch, heads_q, heads_kv, seq_q, seq_kv, dim_qk, dim_v):
    generator = torch.Generator().manual_seed(5)

    def tensor(*shape):
        return torch.randn(shape, generator=generator, dtype=torch.float64).float().requires_grad_()
    return (tensor(batch, heads_q, seq_q, dim_qk), tensor(batch, heads_kv, seq_kv, dim_qk),
            tensor(batch, heads_kv, seq_kv, dim_v))


@pytest.mark.parametrize("case", CASES)
def test_matches_torch_forward_and_backward(case):
    *shape, is_causal, scale = case
    q, k, v = _inputs(*shape)
    gqa = shape[1] != shape[2]
    ours = flashgen.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale,
                                                 enable_gqa=gqa)
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale,
                                            enable_gqa=gqa)
    assert ours.shape == theirs.shape
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    grad = torch.randn_like(theirs)
    for mine, reference in zip(torch.autograd.grad(ours, (q, k, v), grad),
                               torch.autograd.grad(theirs, (q, k, v), grad)):
        torch.testing.assert_close(mine, reference, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape, mask_shape", [
    ((2, 4, 4, 13, 29, 32, 32), (13, 29)),          # one mask for every batch and head
    ((2, 4, 4, 13, 29, 32, 32), (2, 1, 13, 29)),    # a mask per batch entry
    ((2, 8, 2, 19, 19, 16, 24), (8, 19, 19)),       # per query head, GQA
    ((1, 3, 3, 17, 11, 40, 40), (1, 3, 17, 11)),
])
def test_boolean_attn_mask_matches_torch(shape, mask_shape):
    q, k, v = _inputs(*shape)
    generator = torch.Generator().manual_seed(3)
    mask = torch.rand(mask_shape, generator=generator) < 0.7
    mask[..., 0] = True  # every row sees a key: torch gives NaN for a row that sees none
    gqa = shape[1] != shape[2]
    ours = flashgen.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    grad = torch.randn_like(theirs)
    for mine, reference in zip(torch.autograd.grad(ours, (q, k, v), grad),
                               torch.autograd.grad(theirs, (q, k, v), grad)):
        torch.testing.assert_close(mine, reference, rtol=1e-4, atol=1e-5)


def test_unbatched_inputs():
    q, k, v = (t[0] for t in _inputs(1, 2, 2, 9, 11, 16, 16))
    torch.testing.assert_close(flashgen.scaled_dot_product_attention(q, k, v, is_causal=True),
                               F.scaled_dot_product_attention(q, k, v, is_causal=True),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("keywords, error, message", [
    (dict(attn_mask=torch.zeros(9, 11)), ValueError, "attn_mask: only a boolean mask"),
    (dict(attn_mask=torch.ones(3, 9, 11, dtype=torch.bool)), ValueError, "does not broadcast"),
    (dict(dropout_p=0.1), ValueError, "dropout_p"),
    (dict(is_causal="yes"), TypeError, "is_causal"),
])
def test_refuses_what_it_does_not_take(keywords, error, message):
    q, k, v = _inputs(1, 2, 2, 9, 11, 16, 16)
    with pytest.raises(error, match=message):
        flashgen.scaled_dot_product_attention(q, k, v, **keywords)


def test_grouped_heads_need_enable_gqa():
    q, k, v = _inputs(1, 4, 2, 9, 11, 16, 16)
    with pytest.raises(ValueError, match="enable_gqa=True"):
        flashgen.scaled_dot_product_attention(q, k, v)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("shape, mask_shape", [
    ((2, 4, 4, 130, 290, 64, 64), (130, 290)),
    ((2, 8, 2, 190, 190, 128, 128), (8, 190, 190)),  # per query head, GQA
])
def test_cuda_boolean_attn_mask_matches_torch(shape, mask_shape):
    q, k, v = (t.detach().bfloat16().float() for t in _inputs(*shape))
    generator = torch.Generator().manual_seed(4)
    mask = torch.rand(mask_shape, generator=generator) < 0.7
    mask[..., 0] = True
    gqa = shape[1] != shape[2]
    qc, kc, vc = (t.cuda().bfloat16().requires_grad_() for t in (q, k, v))
    ours = flashgen.scaled_dot_product_attention(qc, kc, vc, attn_mask=mask.cuda(),
                                                 enable_gqa=gqa)
    q, k, v = (t.double().requires_grad_() for t in (q, k, v))
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
    torch.testing.assert_close(ours.double().cpu(), theirs, rtol=0, atol=2e-2)
    grad = torch.randn(theirs.shape, generator=generator, dtype=torch.float64).bfloat16()
    for mine, reference in zip(torch.autograd.grad(ours, (qc, kc, vc), grad.cuda()),
                               torch.autograd.grad(theirs, (q, k, v), grad.double())):
        torch.testing.assert_close(mine.double().cpu(), reference, rtol=0, atol=5e-2)
