"""The Python package on numpy arrays (the CPU backend): forward and backward of
a causal GQA problem, checked against attention written out in numpy."""

import numpy as np

import flashgen

rng = np.random.default_rng(0)
batch, seq, heads_q, heads_kv, dim = 2, 37, 4, 2, 40
q = rng.standard_normal((batch, seq, heads_q, dim), dtype=np.float32)
k = rng.standard_normal((batch, seq, heads_kv, dim), dtype=np.float32)
v = rng.standard_normal((batch, seq, heads_kv, dim), dtype=np.float32)
grad_o = rng.standard_normal((batch, seq, heads_q, dim), dtype=np.float32)

o, lse = flashgen.numpy.forward(q, k, v, causal=True)
grad_q, grad_k, grad_v = flashgen.numpy.backward(q, k, v, o, grad_o, lse, causal=True)

# The same in numpy, in float64: each query head reads its group's key/value head.
group = heads_q // heads_kv
k64 = np.repeat(k.astype(np.float64), group, axis=2)
v64 = np.repeat(v.astype(np.float64), group, axis=2)
scores = np.einsum("bqhd,bkhd->bhqk", q.astype(np.float64), k64) / np.sqrt(dim)
above_diagonal = np.triu_indices(seq, 1)  # seq_q == seq_kv: keys after the query
scores[:, :, above_diagonal[0], above_diagonal[1]] = -np.inf
weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
weights /= weights.sum(axis=-1, keepdims=True)
expected = np.einsum("bhqk,bkhd->bqhd", weights, v64)

error = float(np.abs(o - expected).max())
print(f"flashgen {flashgen.version()}: max |O - reference| = {error:.2e}, "
      f"dQ {grad_q.shape}, dK {grad_k.shape}, dV {grad_v.shape}")
assert error < 1e-4, error
assert np.isfinite(grad_q).all() and np.isfinite(grad_k).all() and np.isfinite(grad_v).all()
print("ok")
