"""flashgen.attention inside torch.compile, CUDA graphs and a training loop."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

from torch import nn  # noqa: E402

import flashgen  # noqa: E402
from torch_reference import CUDA, DEVICES, cuda_ready, max_error, random_inputs  # noqa: E402


class SelfAttention(nn.Module):
    """Projections around flashgen.attention, as a model would use it."""

    def __init__(self, width: int, heads: int, head_dim: int, kv_heads: int | None = None):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads or heads, head_dim
        self.q = nn.Linear(width, heads * head_dim)
        self.kv = nn.Linear(width, 2 * self.kv_heads * head_dim)
        self.out = nn.Linear(heads * head_dim, width)

    def forward(self, x):  # x [batch, seq, width]
        batch, seq, _ = x.shape
        q = self.q(x).view(batch, seq, self.heads, self.head_dim)
        # k and v are strided views into one projection: read in place.
        k, v = self.kv(x).view(batch, seq, 2, self.kv_heads, self.head_dim).unbind(2)
        o = flashgen.attention(q, k, v, causal=True)  # [batch, seq, heads, head_dim]
        return self.out(o.reshape(batch, seq, self.heads * self.head_dim))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_traces_without_graph_breaks(device, dynamic):
    torch._dynamo.reset()
    torch.manual_seed(0)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    model = SelfAttention(width=96, heads=4, head_dim=72, kv_heads=2).to(device, dtype)
    # Inductor compiles C++ on the CPU, too slow for a unit test there;
    # aot_eager exercises the same tracing, fake tensors and autograd.
    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic, backend=backend)
    for seq in (33, 47):  # a second shape: recompiles or reuses the dynamic graph
        x = torch.randn(2, seq, 96, device=device, dtype=dtype)
        eager_out = model(x)
        eager_grads = torch.autograd.grad(eager_out.float().square().sum(), model.parameters())
        compiled_out = compiled(x)
        compiled_grads = torch.autograd.grad(compiled_out.float().square().sum(),
                                             model.parameters())
        tolerance = 1e-5 if dtype == torch.float32 else 3e-2
        assert max_error(compiled_out, eager_out) <= tolerance * eager_out.abs().max().item()
        for compiled_grad, eager_grad in zip(compiled_grads, eager_grads):
            scale = eager_grad.abs().max().item() + 1e-6
            assert max_error(compiled_grad, eager_grad) <= tolerance * scale


@CUDA.marks[0]
@pytest.mark.skipif(not cuda_ready(), reason="no CUDA GPU that flashgen can use")
def test_cuda_graph_capture_and_replay():
    shape = (2, 300, 300, 8, 2, 72, 72)
    q, k, v, do = random_inputs(shape, torch.bfloat16, "cuda")

    def step():
        o = flashgen.attention(q, k, v, causal=True)
        return (o, *torch.autograd.grad(o, (q, k, v), do))

    # Warm up on a side stream (kernels compiled and loaded, allocator primed),
    # as torch.cuda.graphs requires.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()

    new_q, new_k, new_v, new_do = random_inputs(shape, torch.bfloat16, "cuda", seed=7)
    with torch.no_grad():
        for static, new in ((q, new_q), (k, new_k), (v, new_v), (do, new_do)):
            static.copy_(new)
    graph.replay()
    torch.cuda.synchronize()
    expected = step()
    for name, got, want in zip(("o", "dq", "dk", "dv"), captured, expected):
        assert torch.equal(got, want), f"{name} of the replayed graph differs from eager"


class TinyTransformer(nn.Module):
    """A 2-layer pre-norm decoder with head dim 72 (not a power of two)."""

    def __init__(self, vocab: int, seq: int, width: int = 144, heads: int = 2,
                 head_dim: int = 72, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.randn(seq, width) * 0.02)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict({
                "norm1": nn.LayerNorm(width), "attention": SelfAttention(width, heads, head_dim),
                "norm2": nn.LayerNorm(width),
                "mlp": nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                     nn.Linear(4 * width, width)),
            }))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):  # tokens [batch, seq]
        x = self.embed(tokens) + self.position[: tokens.shape[1]]
        for block in self.blocks:
            x = x + block["attention"](block["norm1"](x))
            x = x + block["mlp"](block["norm2"](x))
        return self.head(self.norm(x))  # [batch, seq, vocab]


@pytest.mark.parametrize("device", DEVICES)
def test_training_a_tiny_transformer_on_a_copy_task(device):
    """Sequences `a b c ... SEP a b c ...`: the second half can only be
    predicted by attending back, so the loss falls only if attention and its
    gradients are right."""
    torch.manual_seed(0)
    vocab, half, batch, steps = 16, 8, 32, 150
    separator = vocab - 1
    seq = 2 * half + 1
    model = TinyTransformer(vocab, seq).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda")
    losses = []
    for _ in range(steps):
        payload = torch.randint(0, separator, (batch, half), device=device)
        sep = torch.full((batch, 1), separator, device=device)
        tokens = torch.cat([payload, sep, payload], dim=1)  # [batch, seq]
        with autocast:
            logits = model(tokens[:, :-1])
        # Predict the copied half: positions half .. seq-2 predict tokens half+1 .. seq-1.
        loss = nn.functional.cross_entropy(logits[:, half:].float().reshape(-1, vocab),
                                           tokens[:, half + 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(math.isfinite(value) for value in losses)
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert first > 0.8 * math.log(separator), f"untrained loss {first:.3f} is suspiciously low"
    assert last < 0.25 * first, f"loss fell only from {first:.3f} to {last:.3f}"
