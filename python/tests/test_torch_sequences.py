"""flashgen.attention_varlen / attention_with_kvcache and flashgen.flash_attn on
CPU tensors against flashgen.attention per sequence; on CUDA tensors,
attention_varlen against the same, and the KV cache (paged, appended,
replayed from a CUDA graph) against float32 attention."""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

import flashgen  # noqa: E402
from flashgen.flash_attn import (flash_attn_func, flash_attn_varlen_func,  # noqa: E402
                                 flash_attn_with_kvcache)


def _cumulative(lengths):
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32)


def _varlen_matches_per_sequence_calls(lengths_q, lengths_k, dims, device="cpu",
                                       dtype=torch.float32, tolerance=0.0, **keywords):
    """attention_varlen's o and gradients equal flashgen.attention's on each
    sequence's slice: to the bit on the CPU (the same kernels per sequence);
    within `tolerance` on CUDA, whose kernels find the sequences themselves
    in tiles of their own."""
    cu_q, cu_k = _cumulative(lengths_q).to(device), _cumulative(lengths_k).to(device)
    dim_qk, dim_v = dims

    def tensor(*shape):
        return torch.randn(*shape).to(device, dtype).requires_grad_()
    q = tensor(int(cu_q[-1]), 4, dim_qk)
    k = tensor(int(cu_k[-1]), 2, dim_qk)
    v = tensor(int(cu_k[-1]), 2, dim_v)
    o = flashgen.attention_varlen(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), **keywords)
    o.sum().backward()
    for b in range(len(lengths_q)):
        qs, ks = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        qb, kb, vb = (t.detach()[None, s].clone().requires_grad_() for t, s in ((q, qs), (k, ks), (v, ks)))
        ob = flashgen.attention(qb, kb, vb, **keywords)
        ob.sum().backward()
        close = dict(rtol=tolerance, atol=tolerance)
        torch.testing.assert_close(o[qs], ob[0], **close)
        torch.testing.assert_close(q.grad[qs], qb.grad[0], **close)
        torch.testing.assert_close(k.grad[ks], kb.grad[0], **close)
        torch.testing.assert_close(v.grad[ks], vb.grad[0], **close)


def test_attention_varlen_forward_and_gradients_match_per_sequence_calls():
    torch.manual_seed(0)
    _varlen_matches_per_sequence_calls([5, 0, 1, 30], [7, 3, 1, 30], (24, 16), causal=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("keywords", [dict(causal=True), dict(window_size=(30, 0), softcap=5.0)])
def test_cuda_attention_varlen_matches_per_sequence_calls(keywords):
    torch.manual_seed(1)
    _varlen_matches_per_sequence_calls([70, 0, 1, 300], [70, 5, 1, 260], (64, 64), device="cuda",
                                       dtype=torch.bfloat16, tolerance=3e-2, **keywords)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_attention_varlen_sums_the_sinks_gradient_over_the_sequences():
    torch.manual_seed(4)
    lengths = [90, 0, 200]
    cu = _cumulative(lengths).cuda()
    options = dict(device="cuda", dtype=torch.bfloat16)
    q, k, v = (torch.randn(int(cu[-1]), 4, 64, **options).requires_grad_() for _ in range(3))
    sinks = torch.tensor([-1.0, 0.5, 1.5, 0.0], device="cuda", requires_grad=True)
    o = flashgen.attention_varlen(q, k, v, cu, cu, 200, 200, causal=True, sinks=sinks)
    o.float().square().sum().backward()
    expected = torch.zeros(4, device="cuda")
    for b in range(len(lengths)):
        rows = slice(int(cu[b]), int(cu[b + 1]))
        sinks_b = sinks.detach().clone().requires_grad_()
        ob = flashgen.attention(*(t.detach()[None, rows] for t in (q, k, v)), causal=True,
                                sinks=sinks_b)
        ob.float().square().sum().backward()
        torch.testing.assert_close(o[rows], ob[0], rtol=3e-2, atol=3e-2)
        expected += sinks_b.grad
    torch.testing.assert_close(sinks.grad, expected, rtol=2e-2, atol=2e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_attention_varlen_replays_in_a_cuda_graph():
    """With cu_seqlens on the device nothing waits: a captured forward
    replays with new offsets and new queries."""
    torch.manual_seed(6)
    options = dict(device="cuda", dtype=torch.bfloat16)
    q, k, v = (torch.randn(400, 4, 64, **options) for _ in range(3))
    cu = torch.tensor([0, 100, 400], dtype=torch.int32, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compiles and loads the kernels before the capture
        flashgen.attention_varlen(q, k, v, cu, cu, 300, 300, causal=True)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = flashgen.attention_varlen(q, k, v, cu, cu, 300, 300, causal=True)
    cu.copy_(torch.tensor([0, 250, 400], dtype=torch.int32))
    q.copy_(torch.randn(400, 4, 64, **options))
    graph.replay()
    torch.cuda.synchronize()
    for rows in (slice(0, 250), slice(250, 400)):
        expected = flashgen.attention(q[None, rows], k[None, rows], v[None, rows], causal=True)
        torch.testing.assert_close(o[rows], expected[0], rtol=3e-2, atol=3e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_attention_varlen_checks_offsets_when_asked():
    """Offsets out of rule: clamped by the kernels by default (nothing
    outside the tensors changes), reported by name with check_indices=True."""
    options = dict(device="cuda", dtype=torch.bfloat16)
    q, k, v = (torch.randn(50, 2, 64, **options) for _ in range(3))
    cu = torch.tensor([0, 40, 30], dtype=torch.int32, device="cuda")
    o = flashgen.attention_varlen(q, k, v, cu, cu, 40, 40)
    assert torch.isfinite(o[:40]).all()
    with pytest.raises(ValueError, match=r"cu_seqlens_q must be non-decreasing"):
        flashgen.attention_varlen(q, k, v, cu, cu, 40, 40, check_indices=True)


def test_flash_attn_with_kvcache_appends_and_matches_attention():
    torch.manual_seed(1)
    k_cache, v_cache = torch.randn(4, 16, 1, 32), torch.randn(4, 16, 1, 32)
    block_table = torch.tensor([[3, 1], [0, 2]], dtype=torch.int32)
    seqlens = torch.tensor([5, 16], dtype=torch.int32)
    q, k, v = torch.randn(2, 2, 4, 32), torch.randn(2, 2, 1, 32), torch.randn(2, 2, 1, 32)
    keys = [torch.cat([k_cache[block_table[b, 0]], k_cache[block_table[b, 1]]])[: int(seqlens[b])]
            for b in range(2)]
    values = [torch.cat([v_cache[block_table[b, 0]], v_cache[block_table[b, 1]]])[: int(seqlens[b])]
              for b in range(2)]
    o, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=seqlens,
                                     block_table=block_table, causal=True,
                                     return_softmax_lse=True)
    for b in range(2):
        ob = flashgen.attention(q[b:b + 1], torch.cat([keys[b], k[b]])[None],
                                torch.cat([values[b], v[b]])[None], causal=True)
        torch.testing.assert_close(o[b], ob[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(k_cache[block_table[0, 0], 5], k[0, 0])


def test_flash_attn_compat_refuses_what_flashgen_does_not_do():
    q = torch.randn(1, 4, 1, 16)
    with pytest.raises(ValueError, match="dropout_p must be 0"):
        flash_attn_func(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match="return_attn_probs=True is not supported"):
        flash_attn_func(q, q, q, return_attn_probs=True)
    torch.testing.assert_close(flash_attn_func(q, q, q, causal=True),
                               flashgen.attention(q, q, q, causal=True))
    cu = torch.tensor([0, 4], dtype=torch.int32)
    torch.testing.assert_close(flash_attn_varlen_func(q[0], q[0], q[0], cu, cu, 4, 4),
                               flashgen.attention(q, q, q)[0])


def test_flash_attn_func_passes_the_score_modifiers_through():
    generator = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(2, 9, 4, 16, generator=generator) for _ in range(3))
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625])
    keywords = dict(causal=True, window_size=(3, 0), softcap=2.0, alibi_slopes=slopes)
    torch.testing.assert_close(flash_attn_func(q, k, v, **keywords),
                               flashgen.attention(q, k, v, **keywords))
    # A window that keeps only the diagonal gives each query its own value row.
    torch.testing.assert_close(flash_attn_func(q, k, v, window_size=(0, 0)), v,
                               rtol=1e-5, atol=1e-6)
    cu = torch.tensor([0, 9], dtype=torch.int32)
    torch.testing.assert_close(flash_attn_varlen_func(q[0], k[0], v[0], cu, cu, 9, 9, **keywords),
                               flashgen.attention(q[:1], k[:1], v[:1], **keywords)[0])
    seqlens = torch.full((2,), 9, dtype=torch.int32)
    torch.testing.assert_close(
        flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens, **keywords),
        flashgen.attention(q, k, v, **keywords), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("keywords", [
    dict(causal="top_left", window_size=(6, 0)),
    dict(causal=True, softcap=2.0, alibi_slopes=torch.tensor([0.5, 0.25, 0.125, 0.0625])),
    dict(window_size=(10, 3)),
], ids=lambda k: "-".join(sorted(k)))
def test_attention_varlen_score_keywords_apply_per_sequence(keywords):
    torch.manual_seed(2)
    _varlen_matches_per_sequence_calls([9, 0, 1, 30], [12, 3, 1, 30], (16, 16), **keywords)


def test_attention_varlen_sinks_get_every_sequences_gradient():
    torch.manual_seed(4)
    lengths = [9, 0, 20]
    cu = _cumulative(lengths)
    q, k, v = (torch.randn(int(cu[-1]), 4, 16, requires_grad=True) for _ in range(3))
    sinks = torch.tensor([-1.0, 0.5, 1.5, 0.0], requires_grad=True)
    o = flashgen.attention_varlen(q, k, v, cu, cu, 20, 20, causal=True, sinks=sinks)
    (o * o).sum().backward()
    expected = torch.zeros(4)
    for b in range(len(lengths)):
        rows = slice(int(cu[b]), int(cu[b + 1]))
        sinks_b = sinks.detach().clone().requires_grad_()
        ob = flashgen.attention(*(t.detach()[None, rows] for t in (q, k, v)), causal=True,
                                sinks=sinks_b)
        (ob * ob).sum().backward()
        torch.testing.assert_close(o[rows], ob[0], rtol=0, atol=0)
        expected += sinks_b.grad
    torch.testing.assert_close(sinks.grad, expected, rtol=1e-5, atol=1e-6)


def test_attention_with_kvcache_takes_the_score_keywords():
    torch.manual_seed(3)
    k_cache, v_cache = torch.randn(2, 40, 1, 24), torch.randn(2, 40, 1, 24)
    q = torch.randn(2, 2, 4, 24)
    seqlens = torch.tensor([30, 7], dtype=torch.int32)
    keywords = dict(causal=True, window_size=(8, 0), softcap=1.5,
                    alibi_slopes=torch.tensor([0.5, 0.25, 0.125, 0.0625]),
                    sinks=torch.tensor([-1.0, 0.5, 1.5, 0.0]))
    o = flashgen.attention_with_kvcache(q, k_cache, v_cache, seqlens, **keywords)
    for b in range(2):
        n = int(seqlens[b])
        ob = flashgen.attention(q[b:b + 1], k_cache[b:b + 1, :n], v_cache[b:b + 1, :n], **keywords)
        torch.testing.assert_close(o[b], ob[0], rtol=1e-5, atol=1e-6)


def _cache_rows(cache, block_table, b, n):
    """Sequence b's first n rows of a paged cache, in order."""
    rows = torch.cat([cache[int(p)] for p in block_table[b]])
    return rows[:n]


def _attention_float32(q, k, v, causal):
    """One sequence's attention in float32: q [seq_q, heads_q, d], k, v [seq_k, heads_kv, d]."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1).float(), v.repeat_interleave(group, 1).float()
    s = torch.einsum("qhd,khd->hqk", q.float(), k) / q.shape[-1] ** 0.5
    if causal:
        sq, sk = q.shape[0], k.shape[0]
        seen = torch.arange(sk, device=q.device)[None] <= torch.arange(sq, device=q.device)[:, None] + sk - sq
        s = s.masked_fill(~seen, float("-inf"))
    return torch.einsum("hqk,khd->qhd", s.softmax(-1), v)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_flash_attn_with_kvcache_paged_appends_and_matches_float32():
    torch.manual_seed(4)
    page, pages, heads_q, heads_kv, d = 16, 8, 8, 2, 64
    options = dict(device="cuda", dtype=torch.bfloat16)
    k_cache = torch.randn(2 * pages + 1, page, heads_kv, d, **options)
    v_cache = torch.randn(2 * pages + 1, page, heads_kv, d, **options)
    block_table = torch.randperm(2 * pages + 1, device="cuda")[: 2 * pages].reshape(2, pages)
    block_table = block_table.to(torch.int32)
    seqlens = torch.tensor([37, 100], dtype=torch.int32, device="cuda")
    q = torch.randn(2, 3, heads_q, d, **options)
    k, v = torch.randn(2, 3, heads_kv, d, **options), torch.randn(2, 3, heads_kv, d, **options)
    keys = [torch.cat([_cache_rows(k_cache, block_table, b, int(seqlens[b])), k[b]]) for b in range(2)]
    values = [torch.cat([_cache_rows(v_cache, block_table, b, int(seqlens[b])), v[b]]) for b in range(2)]
    o = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=seqlens,
                                block_table=block_table, causal=True)
    for b in range(2):
        torch.testing.assert_close(o[b].float(), _attention_float32(q[b], keys[b], values[b], True),
                                   rtol=2e-2, atol=2e-2)
        n = int(seqlens[b]) + 3
        torch.testing.assert_close(_cache_rows(k_cache, block_table, b, n), keys[b], rtol=0, atol=0)
        torch.testing.assert_close(_cache_rows(v_cache, block_table, b, n), values[b], rtol=0, atol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_attention_with_kvcache_replays_in_a_cuda_graph():
    """The decode step reads cache_seqlens on the device: a captured call
    replays with new lengths and new queries."""
    torch.manual_seed(5)
    options = dict(device="cuda", dtype=torch.bfloat16)
    k_cache, v_cache = torch.randn(2, 512, 1, 128, **options), torch.randn(2, 512, 1, 128, **options)
    q = torch.randn(2, 1, 4, 128, **options)
    seqlens = torch.tensor([10, 300], dtype=torch.int32, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compiles and loads the kernels before the capture
        flashgen.attention_with_kvcache(q, k_cache, v_cache, seqlens)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = flashgen.attention_with_kvcache(q, k_cache, v_cache, seqlens)
    seqlens.copy_(torch.tensor([500, 1], dtype=torch.int32))
    q.copy_(torch.randn(2, 1, 4, 128, **options))
    graph.replay()
    torch.cuda.synchronize()
    for b, n in enumerate([500, 1]):
        expected = _attention_float32(q[b], k_cache[b, :n], v_cache[b, :n], False)
        torch.testing.assert_close(o[b].float(), expected, rtol=2e-2, atol=2e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_attention_with_kvcache_checks_indices_when_asked():
    """A block_table entry outside the pool: never read by default, reported
    by name with check_indices=True."""
    options = dict(device="cuda", dtype=torch.bfloat16)
    k_cache, v_cache = torch.randn(4, 16, 1, 64, **options), torch.randn(4, 16, 1, 64, **options)
    q = torch.randn(1, 1, 2, 64, **options)
    seqlens = torch.tensor([20], dtype=torch.int32, device="cuda")
    table = torch.tensor([[0, 9]], dtype=torch.int32, device="cuda")
    o = flashgen.attention_with_kvcache(q, k_cache, v_cache, seqlens, block_table=table)
    assert torch.isfinite(o).all()
    with pytest.raises(ValueError, match=r"block_table\[0\]\[1\] \(9\) must be in \[0, num_pages = 4\)"):
        flashgen.attention_with_kvcache(q, k_cache, v_cache, seqlens, block_table=table,
                                        check_indices=True)


def test_attention_with_kvcache_reads_and_appends_an_fp8_cache():
    """float8_e4m3fn caches with per-head scales: the result is attention over
    the dequantized values (rounded to q's dtype), appended rows stored as
    k / k_scale in e4m3."""
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    torch.manual_seed(6)
    k_cache = torch.randn(2, 32, 2, 16).to(torch.float8_e4m3fn)
    v_cache = torch.randn(2, 32, 2, 16).to(torch.float8_e4m3fn)
    k_scale, v_scale = torch.tensor([0.3, 0.7]), torch.tensor([1.5])
    q, k, v = torch.randn(2, 1, 4, 16), torch.randn(2, 1, 2, 16), torch.randn(2, 1, 2, 16)
    seqlens = torch.tensor([5, 20], dtype=torch.int32)
    k_before, v_before = k_cache.float() * k_scale[:, None], v_cache.float() * v_scale
    o = flashgen.attention_with_kvcache(q, k_cache, v_cache, seqlens, k=k, v=v, k_scale=k_scale,
                                        v_scale=v_scale)
    for b in range(2):
        n = int(seqlens[b])
        stored_k = (k[b] / k_scale[:, None]).to(torch.float8_e4m3fn)
        stored_v = (v[b] / v_scale).to(torch.float8_e4m3fn)
        assert torch.equal(k_cache[b, n].view(torch.uint8), stored_k[0].view(torch.uint8))
        keys = torch.cat([k_before[b, :n], stored_k.float() * k_scale[:, None]])
        values = torch.cat([v_before[b, :n], stored_v.float() * v_scale])
        ob = flashgen.attention(q[b:b + 1], keys[None], values[None])
        torch.testing.assert_close(o[b], ob[0], rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_attention_with_kvcache_reads_and_appends_a_paged_fp8_cache():
    """A paged float8_e4m3fn cache on the GPU, one scale for the keys and one
    per key/value head for the values: the kernel's bytes appended as
    k / k_scale in e4m3 (those of torch's conversion) and attention over the
    dequantized values as q's dtype, as a plain call computes it."""
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    torch.manual_seed(7)
    options = dict(device="cuda", dtype=torch.bfloat16)
    pages, page_size, heads_kv, dim = 40, 16, 2, 128
    k_cache = torch.randn(2 * pages, page_size, heads_kv, dim, device="cuda").to(torch.float8_e4m3fn)
    v_cache = torch.randn(2 * pages, page_size, heads_kv, dim, device="cuda").to(torch.float8_e4m3fn)
    k_scale = torch.tensor([0.25], device="cuda")
    v_scale = torch.tensor([0.5, 2.0], device="cuda")
    block_table = torch.randperm(2 * pages, device="cuda").to(torch.int32).reshape(2, pages)
    seqlens = torch.tensor([600, 37], dtype=torch.int32, device="cuda")
    q = torch.randn(2, 1, 8, dim, **options)
    k, v = torch.randn(2, 1, heads_kv, dim, **options), torch.randn(2, 1, heads_kv, dim, **options)
    rows = lambda cache, b: cache[block_table[b].long()].reshape(-1, heads_kv, dim)
    k_before = [rows(k_cache, b).float() * k_scale for b in range(2)]
    v_before = [rows(v_cache, b).float() * v_scale[:, None] for b in range(2)]
    o = flashgen.attention_with_kvcache(q, k_cache, v_cache, seqlens, block_table=block_table,
                                        k=k, v=v, k_scale=k_scale, v_scale=v_scale)
    for b in range(2):
        n = int(seqlens[b])
        stored_k = (k[b].float() / k_scale).to(torch.float8_e4m3fn)
        stored_v = (v[b].float() / v_scale[:, None]).to(torch.float8_e4m3fn)
        assert torch.equal(rows(k_cache, b)[n].view(torch.uint8), stored_k[0].view(torch.uint8))
        assert torch.equal(rows(v_cache, b)[n].view(torch.uint8), stored_v[0].view(torch.uint8))
        keys = torch.cat([k_before[b][:n], stored_k.float() * k_scale]).to(q.dtype)
        values = torch.cat([v_before[b][:n], stored_v.float() * v_scale[:, None]]).to(q.dtype)
        ob = flashgen.attention(q[b:b + 1], keys[None], values[None])
        torch.testing.assert_close(o[b], ob[0], rtol=2e-2, atol=2e-2)
