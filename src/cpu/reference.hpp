// Naive attention, the oracle of the tests: each query row's full score
// vector is formed and normalized with an ordinary softmax (no tiling, no
// online rescaling), one (batch, kv head) per task.
//
// reference_*: everything in fp64 from the inputs' exact values.
// naive_same_dtype_*: the yardstick of the tolerance rule, computed the way
//   a framework would in the storage dtype: scores and softmax in fp32 from
//   the (already rounded) inputs, P rounded to the dtype, O accumulated in
//   fp32 then rounded; backward likewise with dP, dS and the gradients rounded
//   to the dtype, and Dterm = rowsum(dO ∘ O) taken from the rounded O.
//
// Masking follows the library: causal is aligned bottom-right (query i sees
// keys j <= i + seq_kv - seq_q) or top-left (j <= i), the window is measured
// from the bottom-right diagonal (problem.hpp: visible_keys); a row that sees
// no key has O = 0, LSE = -inf (the sink's logit with sinks) and contributes
// no gradient. Scores: x = scale · q·k, then x <- softcap · tanh(x / softcap),
// then x <- x - slope · |i + seq_kv - seq_q - j|; a sink joins each row's
// softmax as a column with logit sink[h] and no value, so LSE includes it and
// dL/dsink[h] = -Σ_{b, i} P_sink · Dterm. The user mask (Problem::mask) is
// evaluated node by node (mask::attends) on the pairs causal and the window
// leave; a masked pair has P = 0, and a row it leaves no key is empty as
// above. GQA: query head h reads kv head h / group_size.
#pragma once

#include <vector>

#include "common/problem.hpp"
#include "flashgen/flashgen.hpp"

namespace flashgen::cpu {

// Inputs as packed fp64, [batch, seq, heads, dim] row-major (BSHD).
struct PackedInputs {
  std::vector<double> q;       // [batch, seq_q,  heads_q,  dim_qk]
  std::vector<double> k;       // [batch, seq_kv, heads_kv, dim_qk]
  std::vector<double> v;       // [batch, seq_kv, heads_kv, dim_v]
  std::vector<double> grad_o;  // [batch, seq_q,  heads_q,  dim_v]; empty for a forward
};

struct ForwardResult {
  std::vector<double> o;    // [batch, seq_q, heads_q, dim_v]
  std::vector<double> lse;  // [batch, heads_q, seq_q], natural log; -inf for empty rows
};

struct BackwardResult {
  std::vector<double> grad_q;  // [batch, seq_q,  heads_q,  dim_qk]
  std::vector<double> grad_k;  // [batch, seq_kv, heads_kv, dim_qk]
  std::vector<double> grad_v;  // [batch, seq_kv, heads_kv, dim_v]
  std::vector<double> grad_sinks;  // [heads_q] with sinks, else empty
};

// A host view of any dtype and strides as packed fp64 BSHD.
std::vector<double> to_packed_double(const TensorView& t);

// grad_o may be null (forward only).
PackedInputs pack_inputs(const TensorView& q, const TensorView& k, const TensorView& v,
                         const TensorView* grad_o);

// threads <= 0: all hardware threads. Work is split by (batch, kv head), so
// results do not depend on it.
ForwardResult reference_forward(const Problem& p, const PackedInputs& in, int threads = 0);
// Needs in.grad_o; also returns the forward through `forward` when not null.
BackwardResult reference_backward(const Problem& p, const PackedInputs& in, int threads = 0,
                                  ForwardResult* forward = nullptr);

ForwardResult naive_same_dtype_forward(const Problem& p, const PackedInputs& in,
                                       int threads = 0);
BackwardResult naive_same_dtype_backward(const Problem& p, const PackedInputs& in,
                                         int threads = 0, ForwardResult* forward = nullptr);

}  // namespace flashgen::cpu
