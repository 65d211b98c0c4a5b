"""flashgen.attention's mask_mod on torch CPU and CUDA tensors, against torch's
SDPA given the same mask as a boolean attn_mask: outputs and gradients, GQA,
the query's position among the keys, a fault named on the GPU as on the CPU,
and the custom op under torch.compile."""

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


def test_varlen_and_kvcache_take_the_mask():
    # Packed sequences of 30 and 10 tokens: each is the plain call on its rows.
    q, k, v = (t[0].transpose(0, 1).detach().requires_grad_() for t in _inputs(4, 2, 40, 40, 16))
    cu = torch.tensor([0, 30, 40], dtype=torch.int32)
    prefix = torch.tensor([9, 0], dtype=torch.int32)
    keywords = dict(mask_mod="kv_idx < prefix[b] || kv_idx <= q_idx",
                    mask_tensors={"prefix": prefix})
    o = flashgen.attention_varlen(q, k, v, cu, cu, 30, 30, **keywords)
    grads = torch.autograd.grad(o, (q, k, v), torch.ones_like(o))
    for b, (start, end) in enumerate([(0, 30), (30, 40)]):
        rows = [t[start:end].unsqueeze(0) for t in (q, k, v)]
        one = flashgen.attention(*rows, mask_mod=f"kv_idx < {int(prefix[b])} || kv_idx <= q_idx")
        _close(o[start:end], one[0])
        for grad, expected in zip(grads, torch.autograd.grad(one, rows, torch.ones_like(one))):
            _close(grad[start:end], expected[0])
    # Decoding one token per sequence against a cache: kv_idx <= q_idx is causal.
    q1 = torch.randn(2, 1, 4, 16)
    k_cache, v_cache = torch.randn(2, 12, 2, 16), torch.randn(2, 12, 2, 16)
    seqlens = torch.tensor([5, 12], dtype=torch.int32)
    masked = flashgen.attention_with_kvcache(q1, k_cache, v_cache, seqlens,
                                             mask_mod="kv_idx <= q_idx - 2")
    for b in range(2):
        n = int(seqlens[b]) - 2  # keys up to position seqlen - 3: q_idx = seqlen - 1
        expected = flashgen.attention(q1[b:b + 1], k_cache[b:b + 1, :n], v_cache[b:b + 1, :n])
        _close(masked[b:b + 1], expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("heads_q, heads_kv, seq_q, dim, causal", [(4, 4, 300, 64, False),
                                                                   (8, 2, 300, 128, True),
                                                                   (4, 2, 130, 127, True)])
def test_cuda_document_and_prefix_masks_match_sdpa(heads_q, heads_kv, seq_q, dim, causal):
    seq_kv = 300
    generator = torch.Generator().manual_seed(12)
    # Drawn in bf16, so that the fp32 oracle sees the kernels' very inputs.
    q, k, v = (torch.randn(shape, generator=generator).bfloat16().float()
               for shape in ((2, heads_q, seq_q, dim), (2, heads_kv, seq_kv, dim),
                             (2, heads_kv, seq_kv, dim)))
    doc = torch.repeat_interleave(torch.arange(6, dtype=torch.int32),
                                  torch.tensor([37, 1, 90, 130, 22, 20]))  # 300 positions
    prefix = torch.tensor([17, 167], dtype=torch.int32)
    position = torch.arange(seq_q)[:, None] + seq_kv - seq_q
    key = torch.arange(seq_kv)[None, :]
    visible = key <= position if causal else torch.ones(seq_q, seq_kv, dtype=torch.bool)
    cases = [
        ("doc[kv_idx] == doc[q_idx]", {"doc": doc},
         ((doc[key] == doc[position]) & visible).expand(2, seq_q, seq_kv)),
        ("kv_idx < prefix[b] || kv_idx <= q_idx", {"prefix": prefix},
         ((key < prefix[:, None, None]) | (key <= position)) & visible),
    ]
    grad_o = torch.randn(2, heads_q, seq_q, dim, generator=generator).bfloat16().float()
    for mask_mod, tensors, attended in cases:
        qc, kc, vc = (t.cuda().bfloat16().requires_grad_() for t in (q, k, v))
        o = flashgen.attention(qc, kc, vc, layout="bhsd", causal=causal, mask_mod=mask_mod,
                               mask_tensors={n: t.cuda() for n, t in tensors.items()})
        grads = torch.autograd.grad(o, (qc, kc, vc), grad_o.cuda().bfloat16())
        q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
        expected = _expected(q64, k64, v64, attended)
        expected_grads = torch.autograd.grad(expected, (q64, k64, v64), grad_o.double())
        torch.testing.assert_close(o.double().cpu(), expected, rtol=0, atol=2e-2)
        for actual, wanted in zip(grads, expected_grads):
            torch.testing.assert_close(actual.double().cpu(), wanted, rtol=0, atol=4e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_mask_reading_past_its_array_is_refused_naming_the_pair():
    q, k, v = (torch.randn(1, 4, n, 64, device="cuda", dtype=torch.bfloat16)
               for n in (120, 150, 150))
    doc = torch.zeros(100, dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match=r'index 100 of "doc" is outside \[0, 100\)'):
        flashgen.attention(q, k, v, layout="bhsd", mask_mod="doc[kv_idx] == doc[q_idx]",
                           mask_tensors={"doc": doc})
