// The normalized attention problem that every backend consumes. Built by
// src/api/ from validated views; backends never re-check user input.
#pragma once

#include <cstdint>

#include "flashgen/flashgen.hpp"

namespace flashgen {

// Element strides of one [batch, seq, heads, dim] tensor.
struct Strides4 {
  std::int64_t batch = 0, seq = 0, heads = 0, dim = 1;
};

// Element strides of one [batch, heads, seq] row-statistics tensor.
struct Strides3 {
  std::int64_t batch = 0, heads = 0, seq = 1;
};

struct Problem {
  std::int64_t batch = 0;
  std::int64_t seq_q = 0, seq_kv = 0;
  std::int64_t heads_q = 0, heads_kv = 0;
  std::int64_t dim_qk = 0, dim_v = 0;
  DType dtype = DType::bf16;
  double scale = 0.0;  // resolved (never unset here)
  bool causal = false;

  // Query heads per kv head (0 where there are no heads at all).
  std::int64_t group_size() const { return heads_kv > 0 ? heads_q / heads_kv : 0; }
  // Causal: query row i sees keys j <= i + causal_offset().
  std::int64_t causal_offset() const { return seq_kv - seq_q; }
};

Strides4 strides_of(const TensorView& t);
Strides3 strides_of(const RowStatsView& t);

// FLOPs by the FlashAttention convention: 2 · B · Hq · (unmasked pairs) · (Dqk + Dv).
double forward_flops(const Problem& p);
double backward_flops(const Problem& p);  // 2.5 × forward
// Number of (query, key) pairs that are not masked, per (batch, head).
double unmasked_pairs(const Problem& p);

}  // namespace flashgen
