// Tile shapes of the CPU flash backend. They depend only on the problem
// (never on the thread count), which keeps results bit-identical for any
// number of threads.
#pragma once

#include <cstdint>

#include "common/problem.hpp"
#include "cpu/tile_math.hpp"

namespace flashgen::cpu {

struct Blocking {
  std::int64_t query_rows = 0;  // query rows per tile (rows or columns of S)
  std::int64_t key_rows = 0;    // key rows per tile
};

// 64 x 64 score tiles keep a task's fp32 tiles (Q, Kᵀ, V, S, O: ~150 KiB at
// D = 128) well inside a core's L2; beyond D = 256, halve the query block so
// the Q and O tiles stay about as large.
// Measured (bf16, B=1, H=4, N=1024, one thread, AVX2 kernels): 128-row query
// blocks or 128-key blocks change forward and backward by less than the run
// to run noise (~3%) at D = 64, 128, 256, so the smaller tiles stay: they
// give more tasks to spread over threads on short sequences.
inline Blocking choose_blocking(const Problem& p) {
  constexpr std::int64_t kScoreTile = 64;
  constexpr std::int64_t kLargeDimension = 256;
  const std::int64_t widest = p.dim_qk > p.dim_v ? p.dim_qk : p.dim_v;
  Blocking b;
  b.query_rows = widest > kLargeDimension ? kScoreTile / 2 : kScoreTile;
  b.key_rows = kScoreTile;
  static_assert(kScoreTile / 2 % kTileColumnMultiple == 0);
  return b;
}

// Causal (bottom-right): query row i sees keys j < visible_keys(i).
inline std::int64_t visible_keys(const Problem& p, std::int64_t query_row) {
  if (!p.causal) return p.seq_kv;
  const std::int64_t end = query_row + p.causal_offset() + 1;
  return end < 0 ? 0 : (end > p.seq_kv ? p.seq_kv : end);
}

// Causal: key row j is seen by queries i >= first_query(j).
inline std::int64_t first_query(const Problem& p, std::int64_t key_row) {
  if (!p.causal) return 0;
  const std::int64_t first = key_row - p.causal_offset();
  return first < 0 ? 0 : first;
}

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace flashgen::cpu
