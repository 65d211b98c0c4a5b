"""flashgen.attention (torch) with the masks and score modifiers: the
keywords reach the library (CPU tensors, against a float64 numpy oracle),
the sinks' gradient comes back through autograd; on CUDA tensors windows,
top-left causal, the soft cap, sinks and ALiBi run on the GPU, and the
options its kernels do not run are refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import flashgen
import score_mods_reference as ref

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

SPECS = [
    dict(causal=True, window_size=(6, 0)),
    dict(causal="top_left", softcap=2.0),
    dict(alibi_slopes=True, window_size=(4, 4)),
    dict(sinks=True, causal="bottom_right"),
    dict(sinks=True, softcap=1.5, alibi_slopes=True, window_size=(3, 1), causal="top_left"),
]


def _case(spec: dict, requires_grad: bool):
    generator = torch.Generator().manual_seed(3)
    batch, seq_q, seq_kv, heads_q, heads_kv, dim = 2, 19, 27, 4, 2, 40

    def tensor(*shape):
        return (torch.rand(shape, generator=generator, dtype=torch.float32) * 2 - 1
                ).requires_grad_(requires_grad)

    q, k, v = tensor(batch, seq_q, heads_q, dim), tensor(batch, seq_kv, heads_kv, dim), \
        tensor(batch, seq_kv, heads_kv, dim)
    keywords = dict(spec)
    if spec.get("alibi_slopes"):
        keywords["alibi_slopes"] = 2.0 ** -torch.arange(1, heads_q + 1, dtype=torch.float32)
    if spec.get("sinks"):
        keywords["sinks"] = torch.linspace(-1.0, 2.0, heads_q).requires_grad_(requires_grad)
    return q, k, v, keywords


def _numpy_keywords(keywords: dict) -> dict:
    out = {key: (value.detach().numpy() if isinstance(value, torch.Tensor) else value)
           for key, value in keywords.items() if key != "window_size"}
    out["window"] = keywords.get("window_size", (-1, -1))
    return out


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: "-".join(sorted(s)))
def test_forward_and_gradients_match_float64(spec):
    q, k, v, keywords = _case(spec, requires_grad=True)
    o, lse = flashgen.attention(q, k, v, return_lse=True, **keywords)
    do = torch.rand_like(o)
    o.backward(do)
    expected = ref.attention(q.detach().numpy(), k.detach().numpy(), v.detach().numpy(),
                             do.numpy(), **_numpy_keywords(keywords))
    np.testing.assert_allclose(o.detach().numpy(), expected[0], atol=2e-5)
    finite = np.isfinite(expected[1])
    np.testing.assert_allclose(lse.numpy()[finite], expected[1][finite], atol=2e-5)
    for tensor, want in zip((q, k, v), expected[2:5]):
        np.testing.assert_allclose(tensor.grad.numpy(), want, atol=5e-5)
    if "sinks" in keywords:
        np.testing.assert_allclose(keywords["sinks"].grad.numpy(), expected[5], atol=5e-5)


def test_sinks_without_requires_grad_get_no_gradient():
    q, k, v, keywords = _case(dict(sinks=True), requires_grad=False)
    q.requires_grad_(True)
    flashgen.attention(q, k, v, **keywords).sum().backward()
    assert q.grad is not None and keywords["sinks"].grad is None


def test_bad_keywords_are_refused_by_name():
    q, k, v, _ = _case({}, requires_grad=False)
    with pytest.raises(TypeError, match="causal must be a bool"):
        flashgen.attention(q, k, v, causal="upper")
    with pytest.raises(TypeError, match="sinks must be float32"):
        flashgen.attention(q, k, v, sinks=torch.zeros(4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"options.softcap \(-2\) must be finite and >= 0"):
        flashgen.attention(q, k, v, softcap=-2.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_tensors_are_refused_by_name():
    q, k, v, _ = _case({}, requires_grad=False)
    q, k, v = q.cuda(), k.cuda(), v.cuda()
    arrays = {f"a{i}": torch.zeros(4, dtype=torch.int32, device="cuda") for i in range(9)}
    with pytest.raises(flashgen.UnsupportedError,
                       match="mask_tensors with more than 8 arrays: not supported by the CUDA"):
        flashgen.attention(q, k, v, mask_mod="a8[0] == 0", mask_tensors=arrays)


CUDA_MASKS = [
    dict(causal=True, window_size=(40, 0)),
    dict(window_size=(25, 9)),
    dict(causal="top_left"),
    dict(causal="top_left", window_size=(30, -1)),
    # The soft cap's gradient puts ALiBi's bias back into the logit it finds.
    dict(causal=True, softcap=3.0, alibi_slopes=torch.tensor([0.5, 0.25, 0.125, 0.0625])),
]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("spec", CUDA_MASKS, ids=lambda s: "-".join(
    key if isinstance(value, torch.Tensor) else f"{key}={value}" for key, value in s.items()))
def test_cuda_windows_top_left_and_modifiers_match_float64(spec):
    generator = torch.Generator().manual_seed(5)
    batch, seq_q, seq_kv, heads_q, heads_kv, dim = 2, 150, 230, 4, 2, 64
    # Drawn in bf16, so the float64 oracle sees the kernels' very inputs.
    q, k, v = ((torch.rand((batch, s, h, dim), generator=generator) * 2 - 1).bfloat16().float()
               for s, h in ((seq_q, heads_q), (seq_kv, heads_kv), (seq_kv, heads_kv)))
    do = (torch.rand((batch, seq_q, heads_q, dim), generator=generator) - 0.5).bfloat16().float()
    expected = ref.attention(q.numpy().astype(np.float64), k.numpy().astype(np.float64),
                             v.numpy().astype(np.float64), do.numpy().astype(np.float64),
                             **_numpy_keywords(spec))
    qc, kc, vc = (t.to("cuda", torch.bfloat16).requires_grad_(True) for t in (q, k, v))
    on_gpu = {key: value.cuda() if isinstance(value, torch.Tensor) else value
              for key, value in spec.items()}
    o, lse = flashgen.attention(qc, kc, vc, return_lse=True, **on_gpu)
    o.backward(do.to("cuda", torch.bfloat16))
    # bf16 inputs and outputs: a few bf16 ulps of values below 1.
    np.testing.assert_allclose(o.float().cpu().detach().numpy(), expected[0], atol=2e-2)
    finite = np.isfinite(expected[1])
    lse = lse.detach().cpu().numpy()
    np.testing.assert_allclose(lse[finite], expected[1][finite], atol=2e-2)
    assert np.array_equal(np.isfinite(lse), finite)
    for tensor, want in zip((qc, kc, vc), expected[2:5]):
        np.testing.assert_allclose(tensor.grad.float().cpu().numpy(), want, atol=3e-2)
