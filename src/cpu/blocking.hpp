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

// 256 x 256 score tiles: every key block loaded (and, for bf16, packed) is
// used by 256 query rows, every Q tile by 256 keys, and each score row's
// softmax bookkeeping (max, sum, O rescale) is paid once per 256 keys. A
// task's fp32 tiles stay within a core's L2 (~1.3 MiB at D = 128). Beyond
// D = 256 the query block halves so the Q and O tiles stay about as large.
// Measured (one thread, B=1, H=2, N=1024, GFLOP/s forward / backward):
//   query x key rows     f32 D=128 (avx512)   bf16 D=128 (amx)
//   64 x 64               86 / 73             144 / 124
//   128 x 128             98 / 74             220 / 196
//   256 x 128            108 / 79             265 / 234
//   256 x 256            112 / 82             304 / 270
// Results depend only on the problem, never on the thread count.
inline Blocking choose_blocking(const Problem& p) {
  constexpr std::int64_t kScoreTile = 256;
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
