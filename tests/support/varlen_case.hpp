// Varlen calls (flashgen/sequences.hpp) as the tests run them on either
// backend: cases of sequence lengths, their packed tensors in host or CUDA
// memory (inputs filled, outputs poisoned, cu_seqlens in the same memory),
// and the checks against the fp64 reference run per sequence.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "cpu/reference_sequences.hpp"
#include "device_storage.hpp"
#include "flashgen/sequences.hpp"
#include "test_tensor.hpp"

namespace flashgen::testing {

struct VarlenCase {
  std::string name;
  std::vector<std::int64_t> lengths_q, lengths_k;  // per sequence
  std::int64_t heads_q = 2, heads_kv = 2, dim_qk = 32, dim_v = 32;
  bool causal = false;
  DType dtype = DType::bf16;
  Layout layout = Layout::bshd;
  // Score options (flashgen::Options'), given to the call and the reference
  // alike: each sequence measures them from its own lengths.
  bool top_left = false;
  std::int64_t window_left = -1, window_right = -1;
  double softcap = 0.0;
  bool sinks = false;  // a sink logit per query head, and its gradient
  std::string mask_mod;  // over b, h, q_idx and kv_idx (no arrays)
  int alibi_rank = 0;    // ALiBi slopes: 0 none, 1 [heads_q], 2 [sequences, heads_q]
};

inline void PrintTo(const VarlenCase& c, std::ostream* os) { *os << c.name; }

// Shapes every backend runs: mixed lengths with empty and one-token
// sequences, causal, GQA and MQA, odd D, Dv != Dqk, f32, padded rows, more
// queries than keys, all sequences empty, windows, soft cap and sinks,
// sequences of several blocks at D = 128.
std::vector<VarlenCase> varlen_cases();

// The packed tensors of a case in `memory`, cu_seqlens there too or, with
// host_offsets, in host memory.
struct VarlenTensors {
  VarlenTensors(const VarlenCase& c, MemoryKind memory, bool host_offsets = false);
  VarlenForwardArgs forward_args(const VarlenCase& c) const;
  VarlenBackwardArgs backward_args(const VarlenCase& c) const;
  cpu::Sequences sequences() const;
  // `options` with the case's score options (sinks and their gradient in
  // the tensors' memory).
  Options with_score_options(const VarlenCase& c, Options options) const;

  MemoryKind offsets_memory;
  std::vector<std::int32_t> cu_q, cu_k;  // host copies
  std::unique_ptr<Storage> cu_q_storage, cu_k_storage;  // where the calls read them
  TestTensor q, k, v, grad_o, o, lse, grad_q, grad_k, grad_v;
  TestTensor sinks, grad_sinks;  // [1, heads_q, 1]: read and written only where c.sinks
  std::vector<float> sinks_host;  // the sinks' values, for the reference
  TestTensor slopes;              // [sequences, heads_q, 1]: read only where c.alibi_rank
  std::vector<float> slopes_host;
};

// The packed problem (batch 1) of a case, for the reference.
Problem packed_problem(const VarlenCase& c, const VarlenTensors& t);

// Expects the output written everywhere, its guard bands intact and its
// values within the tolerance rule of the reference `ref`.
void expect_rule(const char* name, const TestTensor& t, const std::vector<double>& ref,
                 const std::vector<double>& naive, DType precision);

// Runs forward_varlen with `options` and checks O and LSE against the
// reference, and the inputs unchanged.
void check_varlen_forward(const VarlenCase& c, MemoryKind memory, const Options& options,
                          bool host_offsets = false);
// Runs the forward, then backward_varlen, and checks dQ, dK, dV.
void check_varlen_backward(const VarlenCase& c, MemoryKind memory, const Options& options,
                           bool host_offsets = false);

}  // namespace flashgen::testing
