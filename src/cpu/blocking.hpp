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
  // A sequence shorter than a tile gets a tile of its length (rounded up to
  // the kernels' column multiple): the rest would be zeroed and multiplied
  // for nothing (a call with 4 tokens spent a fifth of its time clearing
  // its 256-row blocks).
  const auto fitted = [](std::int64_t rows, std::int64_t seq) {
    const std::int64_t needed = (seq + kTileColumnMultiple - 1) / kTileColumnMultiple;
    return needed * kTileColumnMultiple < rows && seq > 0 ? needed * kTileColumnMultiple : rows;
  };
  b.query_rows = fitted(b.query_rows, p.seq_q);
  b.key_rows = fitted(b.key_rows, p.seq_kv);
  return b;
}

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The blocks a tile visits. Tiles wholly outside the causal and window masks
// are never visited, so a window's cost grows with its width, not with the
// sequence. The masks' row ranges never move backwards (problem.hpp), so the
// keys of rows [row0, row0 + rows) lie in [keys(row0).begin, keys(last).end).

// Key blocks [begin, end) that query rows [row0, row0 + rows) see.
inline RowRange key_blocks_seen(const Problem& p, const Blocking& b, std::int64_t row0,
                                std::int64_t rows) {
  const RowRange first = visible_keys(p, row0), last = visible_keys(p, row0 + rows - 1);
  if (last.end <= first.begin) return {};
  return {first.begin / b.key_rows, ceil_div(last.end, b.key_rows)};
}

// Query blocks [begin, end) that see key rows [key0, key0 + keys).
inline RowRange query_blocks_seeing(const Problem& p, const Blocking& b, std::int64_t key0,
                                    std::int64_t keys) {
  const RowRange first = seeing_queries(p, key0), last = seeing_queries(p, key0 + keys - 1);
  if (last.end <= first.begin) return {};
  return {first.begin / b.query_rows, ceil_div(last.end, b.query_rows)};
}

// Row r's visible columns of a tile whose first column is row col0 and which
// holds `cols` real columns, as [begin, end) within the tile.
inline RowRange columns_within(const RowRange& rows, std::int64_t col0, std::int64_t cols) {
  auto clamp = [&](std::int64_t x) { return x < 0 ? 0 : (x > cols ? cols : x); };
  return {clamp(rows.begin - col0), clamp(rows.end - col0)};
}

}  // namespace flashgen::cpu
